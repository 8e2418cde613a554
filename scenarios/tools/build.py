#!/usr/bin/env python3
"""Rebuild scenarios/compaction/*.json from the scen_<class>.py sources.

Usage: python3 scenarios/tools/build.py [CLASS ...]   (default: every class)

Deterministic: the filler rounds are seeded, so a rebuild gives identical files.
"""

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CLASSES = ["lookup", "multi_hop", "exploratory", "aggregation", "contradiction", "temporal"]


def main() -> int:
    wanted = sys.argv[1:] or CLASSES
    for klass in wanted:
        if klass not in CLASSES:
            print(f"unknown class {klass!r}; expected one of {CLASSES}", file=sys.stderr)
            return 2
        mod = importlib.import_module(f"scen_{klass}")
        for scenario in mod.build():
            path = scenario.write()
            print(f"wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
