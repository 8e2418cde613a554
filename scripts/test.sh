#!/usr/bin/env bash
# The README's test command: install what is missing, then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "==> scenario files validate"
python3 scenarios/tools/validate.py --strict
echo "==> cargo test --workspace"
cargo test --workspace --all-targets --locked 2>&1
echo "==> fuzz workspace builds (planner target)"
(cd fuzz && cargo check --locked --quiet 2>&1)
