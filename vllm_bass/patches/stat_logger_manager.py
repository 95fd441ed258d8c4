"""Patch: `StatLoggerManager.__init__` (vllm/v1/metrics/loggers.py).

What: when the engine runs BASS, adds `vllm_bass.metrics.BassStatLogger` to the stat loggers.
Why: vLLM loads `vllm.stat_logger_plugins` only in AsyncLLM (the server), not in the offline
LLMEngine; both build a StatLoggerManager, so this one place gives BASS metrics to
`/metrics`, `LLM.get_metrics()` and the periodic stats log.
When it can go: when vLLM loads stat-logger plugins for the offline engine too (then register
BassStatLogger through that entry point).
"""

from __future__ import annotations

from vllm_bass.patches import wrap

PATCHED_SYMBOLS = {
    "vllm.v1.metrics.loggers.StatLoggerManager.__init__":
        "(self, vllm_config: vllm.config.vllm.VllmConfig, engine_idxs: list[int] | None = None, custom_stat_loggers: list[type['AggregateStatLoggerBase'] | collections.abc.Callable[[vllm.config.vllm.VllmConfig, int], 'StatLoggerBase']] | None = None, enable_default_loggers: bool = True, aggregate_engine_logging: bool = False, client_count: int = 1)",
}


def apply() -> None:
    def make(original):
        def __init__(self, vllm_config, engine_idxs=None, custom_stat_loggers=None,
                     *args, **kwargs):
            from vllm_bass.config import bass_config_from_vllm

            if bass_config_from_vllm(vllm_config) is not None:
                from vllm_bass.metrics import BassStatLogger

                custom_stat_loggers = list(custom_stat_loggers or [])
                if BassStatLogger not in custom_stat_loggers:
                    custom_stat_loggers.append(BassStatLogger)
            original(self, vllm_config, engine_idxs, custom_stat_loggers, *args, **kwargs)
        return __init__

    wrap("vllm.v1.metrics.loggers.StatLoggerManager.__init__", make)
