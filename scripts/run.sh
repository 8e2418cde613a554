#!/usr/bin/env bash
# The README's run command: install what is missing, then run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p mf-cli
for f in scenarios/compaction/*.json; do
    echo "==> mf plan --strategy v2 $f"
    target/release/mf plan --strategy v2 "$f"
done
