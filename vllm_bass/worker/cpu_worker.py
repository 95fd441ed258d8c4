"""BASS worker for the CPU platform (CPUModelRunner is a V1 GPUModelRunner subclass).

Its own module because importing vLLM's CPU worker patches torch process-wide; see
`vllm_bass.worker.gpu_worker`. Only CPU processes import this.
"""

from __future__ import annotations

from vllm.v1.worker.cpu_worker import CPUWorker

from vllm_bass.worker.gpu_worker import BassWorkerMixin


class BassCPUWorker(BassWorkerMixin, CPUWorker):
    """CPU worker with the BASS runner."""
