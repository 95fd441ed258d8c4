# Imported first in this directory: sets TRITON_INTERPRET=1 when there is no
# CUDA device, before any Triton kernel of vllm_bass is decorated.
import tests.kernels.bass_kernel_testutils  # noqa: F401
