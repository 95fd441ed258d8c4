"""BASS workers: vLLM's own workers whose model runner gets the BASS mixin.

vLLM picks the runner inside `Worker.init_device` with no hook, so we let it build its runner
and then install the mixin on that instance (see `install_bass_runner`). Selected by the
plugin through `worker_cls`, one dotted path per platform: this module for GPUs,
`vllm_bass.worker.cpu_worker` for CPUs.

Keep the CPU worker out of this module: importing `vllm.v1.worker.cpu_worker` runs
`vllm.v1.worker.cpu.shm`, which monkeypatches torch and vLLM process-wide (a CPU-only
`async_tensor_h2d`, no-op `torch.accelerator.synchronize`, fake `pin_memory`). On a GPU
host that silently put the runner's speculative-decoding metadata on the CPU (seen on an
H200: the drafter's Triton launch got CPU tensors).
"""

from __future__ import annotations

from vllm.v1.worker.gpu_worker import Worker

from vllm_bass.config import bass_config_from_vllm
from vllm_bass.worker.model_runner import install_bass_runner


def _check_v1_runner(worker) -> None:
    if getattr(worker, "use_v2_model_runner", False):
        raise RuntimeError(
            "vllm-bass runs on vLLM's V1 model runner; unset VLLM_USE_V2_MODEL_RUNNER=1 "
            "(vLLM itself selects V1 for draft-model speculation)")


class BassWorkerMixin:
    def init_device(self) -> None:
        super().init_device()
        _check_v1_runner(self)
        cfg = bass_config_from_vllm(self.vllm_config)
        if cfg is None:
            raise RuntimeError("BassWorker started without additional_config['bass']; use "
                               "--spec-worker bass or speculative_config={'method': 'bass'}")
        install_bass_runner(self.model_runner, cfg)

    def bass_draft_faults(self) -> dict:
        """The drafter's contained faults (`drafter.faults`), for `collective_rpc`:
        {"passes": draft passes run, "faults": of them raised, "consecutive": in a row
        now, "speculation_off": bool}."""
        faults = getattr(getattr(self.model_runner, "drafter", None), "bass_faults", None)
        return faults.as_dict() if faults is not None else {}

    def bass_measured_draft_steps(self) -> dict[int, float]:
        """Seconds of one draft step by batch size (its graph timed at capture), for
        `collective_rpc` at start-up (`patches.engine_core_measured_costs`); {} without
        step graphs (CPU, eager mode)."""
        steps = getattr(getattr(self.model_runner, "drafter", None), "bass_step_graphs", None)
        return dict(getattr(steps, "replay_seconds", None) or {})

    def bass_draft_graph_stats(self) -> dict:
        """How the drafter's first passes ran (`first_pass_graphs`), for `collective_rpc`:
        {"replays": through a captured graph, "eager": through its eager twin (no graphs),
        "fallbacks": vLLM's pass (did not fit), "graphs": captured sizes}; {} without."""
        first = getattr(getattr(self.model_runner, "drafter", None),
                        "bass_first_pass_graphs", None)
        return first.stats() if first is not None else {}


class BassGPUWorker(BassWorkerMixin, Worker):
    """CUDA (and other GPU platform) worker with the BASS runner."""
