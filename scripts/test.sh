#!/usr/bin/env bash
# The README's test command: install what is missing, then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "==> scenario files validate"
python3 scenarios/tools/validate.py --strict
python3 scripts/check_docs.py    # README and docs/: links stay in the repository, settings tables match the code
python3 scripts/check_circles.py # no two modules of a crate import each other, directly or around a circle
echo "==> UI: npm ci, vitest, svelte-check"
command -v npm >/dev/null || { echo "error: Node.js >= 20.19 with npm is required: https://nodejs.org" >&2; exit 1; }
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' \
    || { echo "error: Node.js >= 20.19 is required (found $(node -v))" >&2; exit 1; }
npm ci --no-audit --no-fund --loglevel=error
npm -w ui test
npm -w ui run check
echo "==> UI in a real browser (Chromium, scripted shell; screenshots in artifacts/screenshots/web)"
npm -w ui run e2e:web
echo "==> UI production build (ui/dist: the desktop app embeds it at compile time)"
npm -w ui run build
echo "==> cargo fmt --check (rustfmt.toml)"
cargo fmt --all --check
echo "==> cargo test --workspace, compiled by clippy with warnings denied (clippy.toml, [workspace.lints])"
# `cargo clippy -- -D warnings` is `cargo check` with clippy-driver as the
# workspace's compiler wrapper and its lint flags in CLIPPY_ARGS. The same two
# variables on `cargo test` lint every target `cargo clippy --all-targets`
# lints while compiling the tests: one build instead of a check build (which
# built every dependency's build script, llama.cpp's CMake project included,
# a second time) plus a test build. Dependencies are not wrapped, so they are
# the artifacts a plain `cargo test` uses.
export RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# A test run compiles the workspace once: incremental compilation's bookkeeping
# would only cost time and disk.
export CARGO_INCREMENTAL=0
# setup fetched the test models and the OpenAI-compatible test server: a test
# that needs one fails by name instead of passing without it.
export MF_REQUIRE_MODELS=1
cargo test --workspace --all-targets --locked 2>&1
echo "==> desktop app: real window under Xvfb (SmolLM2, loopback API, benchmark; screenshots in artifacts/screenshots/app)"
# The programs of the test build itself (app, mf, mf-sandbox), in
# $CARGO_TARGET_DIR/debug, made from the artifacts `cargo test` built: with
# all targets, dependencies resolve to the same features (with `--bins` alone
# the dev-dependencies drop out, features change, and 27 crates, tokio and
# tauri among them, compiled again: 72 s), and only what `cargo test` built as a
# test harness instead (the app's binary, the examples) is compiled: 10.5 s
# in a cold run.
# The package below is made from them too.
cargo build --workspace --all-targets --profile test --locked 2>&1
scripts/e2e-app.sh
echo "==> the installable package: .deb built, extracted, its binary started under Xvfb"
scripts/bundle-test.sh
echo "==> fuzz workspace builds (planner target)"
(cd fuzz && env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo check --locked --quiet 2>&1)
