#!/usr/bin/env bash
# The desktop app's real-window test (ui/e2e/app.mjs) under Xvfb: the built
# binary, tauri-driver and WebKitWebDriver, driven by webdriverio.
# Expects ui/dist and the binary built (scripts/test.sh does both first).
# Screenshots: artifacts/screenshots/app/.
set -euo pipefail
cd "$(dirname "$0")/.."
export MF_TAURI_DRIVER="${MF_TAURI_DRIVER:-${MF_TOOLS_DIR:-$HOME/.cache/measured-forgetting/tools}/bin/tauri-driver}"
export MF_OPENAI_SERVER_PYTHON="${MF_OPENAI_SERVER_PYTHON:-${MF_OPENAI_SERVER_DIR:-$HOME/.cache/measured-forgetting/openai-server}/venv/bin/python}"
export MF_APP_BIN="${MF_APP_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/debug/measured-forgetting}"
for tool in xvfb-run dbus-run-session WebKitWebDriver; do
    command -v "$tool" >/dev/null || { echo "error: $tool is missing: run scripts/setup.sh" >&2; exit 2; }
done
exec xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- node ui/e2e/app.mjs
