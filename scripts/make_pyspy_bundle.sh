#!/usr/bin/env bash
# .pyspy/py-spy.xz (git-ignored): the py-spy binary for the GPU host's `gpu_bench.sh pyspy` /
# `host_b64` presets, which carry it (the host has no network). Needs pip's index here.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .pyspy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip download -q py-spy --no-deps -d "$tmp"
python3 - "$tmp" <<'PY'
import glob, lzma, shutil, sys, zipfile
wheel = glob.glob(f"{sys.argv[1]}/py_spy-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/py-spy"))
    with z.open(name) as src, lzma.open(".pyspy/py-spy.xz", "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
ls -la .pyspy/py-spy.xz
