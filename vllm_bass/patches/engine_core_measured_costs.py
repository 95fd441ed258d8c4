"""Patch: `EngineCore._initialize_kv_caches` (vllm/v1/engine/core.py).

What: after vLLM's own work (memory profile, KV caches, graph capture), a BASS engine whose
workers time their draft-step graphs (`draft_graphs.measures_replays`: one rank, and
VLLM_BASS_MEASURED_DRAFT_STEP not 0) asks its workers (`collective_rpc("bass_measured_draft_steps")`) for a draft step's measured
time by batch size and hands it to the scheduler, which EngineCore builds next
(`vllm_bass.scheduler.stash_measured_draft_steps`).
Why: the scheduler's step-cost fit cannot price a draft step from scattered step periods
(session 46: 0.02 ms fitted at batch 8 against ~0.1 ms measured); the workers time their
captured draft-step graphs at start-up, and the scheduler has no other way to reach them.
Any executor (one process, multiprocessing, Ray) of one rank.
When it can go: when vLLM passes worker-side measurements to the scheduler (or the
scheduler gets an executor handle).
"""

from __future__ import annotations

import logging

from vllm_bass.patches import wrap

logger = logging.getLogger("vllm.bass")

PATCHED_SYMBOLS = {
    "vllm.v1.engine.core.EngineCore._initialize_kv_caches":
        "(self, vllm_config: vllm.config.vllm.VllmConfig) -> "
        "vllm.v1.kv_cache_interface.KVCacheConfig",
}


def slowest_rank(per_rank: list) -> dict[int, float]:
    """Per batch size, the largest of the ranks' times (a step waits for every rank)."""
    merged: dict[int, float] = {}
    for times in per_rank or ():
        for rows, seconds in (times or {}).items():
            merged[int(rows)] = max(merged.get(int(rows), 0.0), float(seconds))
    return merged


def apply() -> None:
    def make(original):
        def _initialize_kv_caches(self, vllm_config):
            kv_cache_config = original(self, vllm_config)
            from vllm_bass.config import bass_config_from_vllm

            from vllm_bass.worker.drafter.draft_graphs import measures_replays

            if (bass_config_from_vllm(vllm_config) is not None
                    and measures_replays(vllm_config.parallel_config)):
                from vllm_bass.scheduler import stash_measured_draft_steps

                try:
                    per_rank = self.model_executor.collective_rpc("bass_measured_draft_steps")
                except Exception as e:  # noqa: BLE001 (a worker without it: the fit alone)
                    logger.warning("vllm-bass: no measured draft step times (%s: %s)",
                                   type(e).__name__, e)
                    per_rank = []
                stash_measured_draft_steps(vllm_config, slowest_rank(per_rank))
            return kv_cache_config
        return _initialize_kv_caches

    wrap("vllm.v1.engine.core.EngineCore._initialize_kv_caches", make)
