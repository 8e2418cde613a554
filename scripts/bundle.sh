#!/usr/bin/env bash
# Builds the installable Linux package (.deb) with the tauri bundler: the
# app, the `mf` command line and the code tool's sandbox helper (mf-sandbox,
# found beside the app), the demo worlds and the benchmark's scenarios.
#
#   scripts/bundle.sh            release build (what `make bundle` runs)
#   scripts/bundle.sh --debug    debug build (the package test reuses the test build)
#
# The package lands in $CARGO_TARGET_DIR/<profile>/bundle/deb/.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
args=()
if [ "${1:-}" = --debug ]; then profile=debug; args+=(--debug); fi
target="${CARGO_TARGET_DIR:-$PWD/target}"
cargo_profile=(); [ "$profile" = release ] && cargo_profile=(--release)
cargo build "${cargo_profile[@]}" --locked -p mf-cli -p mf-tools --bins
# The bundler takes extra programs as NAME-<target triple> files and installs them beside the app as NAME.
triple="$(rustc -vV | sed -n 's/^host: //p')"
staged="$target/$profile/bundle-bin"
mkdir -p "$staged"
for b in mf mf-sandbox; do cp "$target/$profile/$b" "$staged/$b-$triple"; done
rm -rf "$target/$profile/bundle/deb"
npx --no-install tauri build "${args[@]}" --bundles deb --ci \
    --config "{\"bundle\":{\"externalBin\":[\"$staged/mf\",\"$staged/mf-sandbox\"]}}"
ls "$target/$profile/bundle/deb/"*.deb
