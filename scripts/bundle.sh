#!/usr/bin/env bash
# Builds the installable Linux package (.deb) with the tauri bundler: the
# app, the `mf` command line and the code tool's sandbox helper (mf-sandbox,
# found beside the app), the demo worlds and the benchmark's scenarios.
#
#   scripts/bundle.sh             release build (what `make bundle` runs)
#   scripts/bundle.sh --prebuilt  packages the programs the test build left in
#                                 $CARGO_TARGET_DIR/debug (the package test:
#                                 nothing is compiled again)
#
# The package lands in $CARGO_TARGET_DIR/<release|debug>/bundle/deb/.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
if [ "${1:-}" = --prebuilt ]; then
    profile=debug
    for b in measured-forgetting mf mf-sandbox; do
        [ -x "$target/$profile/$b" ] || { echo "error: $target/$profile/$b is missing: build the workspace first (scripts/test.sh does)" >&2; exit 1; }
    done
else
    profile=release
    cargo build --release --locked -p mf-cli -p mf-tools --bins
fi
# The bundler takes extra programs as NAME-<target triple> files and installs them beside the app as NAME.
triple="$(rustc -vV | sed -n 's/^host: //p')"
staged="$target/$profile/bundle-bin"
mkdir -p "$staged"
for b in mf mf-sandbox; do cp "$target/$profile/$b" "$staged/$b-$triple"; done
rm -rf "$target/$profile/bundle/deb"
config="{\"bundle\":{\"externalBin\":[\"$staged/mf\",\"$staged/mf-sandbox\"]}}"
if [ "$profile" = debug ]; then
    # `tauri bundle` packages the app already built; `tauri build` would
    # compile it again under its own profile.
    npx --no-install tauri bundle --debug --bundles deb --ci --config "$config"
else
    npx --no-install tauri build --bundles deb --ci --config "$config"
fi
ls "$target/$profile/bundle/deb/"*.deb
