#!/usr/bin/env bash
# The installable package: builds the .deb (scripts/bundle.sh --prebuilt:
# the programs of the test build, nothing compiled again; `make bundle` builds
# the release one),
# checks its control fields and contents, extracts it into a folder laid out
# as it installs, and starts the installed binary under Xvfb
# (ui/e2e/installed.mjs). Screenshot: artifacts/screenshots/app/12-installed-deb.png.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
bundles="$target/debug/bundle/deb"
scripts/bundle.sh --prebuilt
debs=("$bundles"/*.deb)
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || { echo "error: expected one .deb in $bundles, found: ${debs[*]}" >&2; exit 1; }
deb="${debs[0]}"
fail() { echo "error: $deb: $*" >&2; exit 1; }
[ "$(dpkg-deb -f "$deb" Package)" = measured-forgetting ] || fail "Package is not measured-forgetting"
dpkg-deb -f "$deb" Depends | grep -q 'libwebkit2gtk-4.1-0' || fail "Depends does not name libwebkit2gtk-4.1-0"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
dpkg-deb -x "$deb" "$scratch/root"
root="$scratch/root"
for b in measured-forgetting mf mf-sandbox; do [ -x "$root/usr/bin/$b" ] || fail "no executable usr/bin/$b"; done
"$root/usr/bin/mf" --version | grep -q '^mf ' || fail "usr/bin/mf --version does not answer"
grep -qx 'Exec=measured-forgetting' "$root/usr/share/applications/Measured Forgetting.desktop" || fail "the desktop entry does not start measured-forgetting"
for d in agentic compaction; do
    want=$(find "scenarios/$d" -maxdepth 1 -name '*.json' | wc -l)
    got=$(find "$root/usr/lib/Measured Forgetting/scenarios/$d" -maxdepth 1 -name '*.json' | wc -l)
    [ "$want" -eq "$got" ] || fail "scenarios/$d: $got files in the package, $want in the repository"
done
echo "package: $(basename "$deb"), $(du -h "$deb" | cut -f1), Depends: $(dpkg-deb -f "$deb" Depends)"
export MF_INSTALLED_ROOT="$root"
export MF_TAURI_DRIVER="${MF_TAURI_DRIVER:-${MF_TOOLS_DIR:-$HOME/.cache/measured-forgetting/tools}/bin/tauri-driver}"
xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- node ui/e2e/installed.mjs
