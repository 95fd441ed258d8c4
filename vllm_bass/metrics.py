"""BASS metrics, next to vLLM's own speculative-decoding counters.

vLLM exports drafts, draft tokens and accepted tokens (also per position). BASS adds what
adaptive, ragged drafting needs to be understood:
  vllm:bass_draft_length                      histogram of per-sequence draft lengths
  vllm:bass_draft_tokens_per_pos_total        drafts that reached position p, so
                                              accepted_per_pos / draft_tokens_per_pos is the
                                              per-position acceptance rate of ragged drafts
  vllm:bass_sequence_steps_total{speculation} decode sequence-steps with / without a draft
  vllm:bass_steps_total{speculation}          engine steps with any draft / none (auto-off)
All are derived from the stats vLLM already ships from the engine core to the front end
(SpecDecodingStats.num_draft_tokens_per_pos; IterationStats token counts), so they work for
the OpenAI server's /metrics, for `LLM.get_metrics()` and in the periodic stats log line.
"""

from __future__ import annotations

import logging

import prometheus_client
from vllm.v1.metrics.loggers import StatLoggerBase

from vllm_bass.config import MAX_DRAFT_TOKENS, bass_config_from_vllm

logger = logging.getLogger("vllm.bass")  # under vLLM's handlers
_METRICS: dict[str, object] = {}


def _metric(kind, name, doc, labels, **kw):
    """Create once per process (several engines / loggers share the registry), and put it
    back in the registry if vLLM's PrometheusStatLogger unregistered every `vllm:` collector
    (it does so when it is constructed, after the custom loggers)."""
    if name not in _METRICS:
        _METRICS[name] = kind(name, doc, labelnames=labels, **kw)
    metric = _METRICS[name]
    registry = prometheus_client.REGISTRY
    if metric not in registry._collector_to_names:
        registry.register(metric)
    return metric


def draft_length_counts(draft_tokens_per_pos: list[int]) -> dict[int, int]:
    """drafts reaching each position -> number of drafts of each length."""
    counts = {}
    padded = list(draft_tokens_per_pos) + [0]
    for length in range(1, len(padded)):
        n = padded[length - 1] - padded[length]
        if n > 0:
            counts[length] = n
    return counts


def _new_interval() -> dict:
    """Counters of one logging interval (the periodic stats line)."""
    return {"drafts": 0, "accepted": 0, "seq_on": 0, "seq_off": 0,
            "steps_on": 0, "steps_off": 0, "lengths": {}}


class BassStatLogger(StatLoggerBase):
    def __init__(self, vllm_config, engine_index: int = 0):
        self.enabled = bass_config_from_vllm(vllm_config) is not None
        self.label_values = [vllm_config.model_config.served_model_name, str(engine_index)]
        self._metrics_ready = False
        self._interval = _new_interval()

    def _create_metrics(self) -> None:
        """Lazily, at the first record: by then vLLM's Prometheus logger has been built."""
        labels = ["model_name", "engine"]
        self.hist = _metric(prometheus_client.Histogram, "vllm:bass_draft_length",
                            "Draft length of each drafted sequence-step.", labels,
                            buckets=list(range(1, MAX_DRAFT_TOKENS + 1)))
        self.per_pos = _metric(prometheus_client.Counter, "vllm:bass_draft_tokens_per_pos",
                               "Drafts that reached each position.", labels + ["position"])
        self.seq_steps = _metric(prometheus_client.Counter, "vllm:bass_sequence_steps",
                                 "Decode sequence-steps, with or without a draft.",
                                 labels + ["speculation"])
        self.steps = _metric(prometheus_client.Counter, "vllm:bass_steps",
                             "Engine steps with decodes: any draft (on) or none (off).",
                             labels + ["speculation"])
        self._metrics_ready = True

    def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx=0):
        if not self.enabled:
            return
        if not self._metrics_ready:
            self._create_metrics()
        lv = self.label_values
        sds = scheduler_stats.spec_decoding_stats if scheduler_stats is not None else None
        drafts = accepted = 0
        if sds is not None and sds.num_drafts:
            drafts, accepted = sds.num_drafts, sds.num_accepted_tokens
            for length, n in draft_length_counts(sds.num_draft_tokens_per_pos).items():
                for _ in range(n):
                    self.hist.labels(*lv).observe(length)
                self._interval["lengths"][length] = self._interval["lengths"].get(length, 0) + n
            for pos, n in enumerate(sds.num_draft_tokens_per_pos):
                if n:
                    self.per_pos.labels(*lv, str(pos)).inc(n)
        if iteration_stats is None:
            return
        # every decode sequence-step emits 1 + accepted tokens; first tokens come from prefill
        decode_seq_steps = (iteration_stats.num_generation_tokens - accepted
                            - len(iteration_stats.time_to_first_tokens_iter))
        off = max(0, decode_seq_steps - drafts)
        if drafts:
            self.seq_steps.labels(*lv, "on").inc(drafts)
        if off:
            self.seq_steps.labels(*lv, "off").inc(off)
        if decode_seq_steps > 0:
            state = "on" if drafts else "off"
            self.steps.labels(*lv, state).inc()
            self._interval["steps_" + state] += 1
        it = self._interval
        it["drafts"] += drafts
        it["accepted"] += accepted
        it["seq_on"] += drafts
        it["seq_off"] += off

    def log_engine_initialized(self):
        pass

    def log(self):
        it = self._interval
        if not self.enabled or not (it["steps_on"] or it["steps_off"]):
            return
        lengths = it["lengths"]
        mean_len = (sum(k * v for k, v in lengths.items()) / max(1, sum(lengths.values())))
        logger.info(
            "BASS: mean acceptance length %.2f, mean draft length %.2f, draft lengths %s, "
            "speculation off in %.1f%% of steps and %.1f%% of sequence-steps",
            1 + it["accepted"] / max(1, it["drafts"]), mean_len,
            dict(sorted(lengths.items())),
            100.0 * it["steps_off"] / max(1, it["steps_on"] + it["steps_off"]),
            100.0 * it["seq_off"] / max(1, it["seq_on"] + it["seq_off"]))
        self._interval = _new_interval()
