#!/usr/bin/env bash
# The README's run command: install what is missing, build the UI and the
# desktop app, and open it with the embedded llama.cpp backend and the default
# model (models/Qwen3-8B-Q4_K_M.gguf when present, else the SmolLM2 test
# model, with a notice in the window).
#
#   make run                      open the app (needs a display)
#   MF_HEADLESS=1 make run        run it under Xvfb instead (no display needed)
#   MF_RUN_SECONDS=20 ...         close it after 20 s, with a screenshot in
#                                 artifacts/screenshots/app/run.png (headless only)
set -euo pipefail
cd "$(dirname "$0")/.."

headless="${MF_HEADLESS:-0}"
if [ "$headless" != 1 ] && [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
    echo "error: no display: \$DISPLAY and \$WAYLAND_DISPLAY are empty, so the app's window cannot open." >&2
    echo "       Run it from a desktop session, or run it under Xvfb with: MF_HEADLESS=1 make run" >&2
    exit 2
fi

scripts/setup.sh
command -v npm >/dev/null || { echo "error: Node.js >= 20.19 with npm is required: https://nodejs.org" >&2; exit 1; }
[ -d node_modules/vite ] || npm ci --no-audit --no-fund --loglevel=error
echo "==> UI (vite build → ui/dist, embedded into the app)"
npm -w ui run build
echo "==> the app and its run_code sandbox helper beside it (cargo build -p measured-forgetting -p mf-tools --bins)"
cargo build -p measured-forgetting -p mf-tools --bins
bin="${CARGO_TARGET_DIR:-target}/debug/measured-forgetting"

if [ -f models/Qwen3-8B-Q4_K_M.gguf ]; then
    echo "==> model: models/Qwen3-8B-Q4_K_M.gguf"
else
    echo "==> model: models/Qwen3-8B-Q4_K_M.gguf is absent; the app uses the SmolLM2 test model (it says so in the window)"
fi
echo "    (a model chosen in Settings is kept in the settings file and wins over this default)"

if [ "$headless" != 1 ]; then
    exec "$bin"
fi
secs="${MF_RUN_SECONDS:-0}"
if [ "$secs" = 0 ]; then
    exec xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- "$bin"
fi
mkdir -p artifacts/screenshots/app
# shellcheck disable=SC2016
exec xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- bash -c '
    "$1" & pid=$!
    sleep "$2"
    import -window root artifacts/screenshots/app/run.png && echo "screenshot: artifacts/screenshots/app/run.png"
    kill "$pid"; wait "$pid" 2>/dev/null || true' _ "$bin" "$secs"
