"""How much of a device's nominal compute and memory bandwidth a measured run used.

Pure arithmetic (no vLLM, no torch), so a throughput measured anywhere turns into
utilisation numbers that can be checked by hand:

- model FLOPs = 2 * P * tokens + attention FLOPs, with P the target's matrix-multiply
  weights (attention projections, gated MLP, LM head; the embedding lookup is a gather,
  norms and activations are left out) and 4 * layers * heads * head_dim FLOPs per
  (query token, key) pair (Q.K^T and the weighted sum of V, 2 FLOPs per multiply-add);
- bytes moved = the weights once per step + every sequence's KV cache read once per step
  (K and V, every layer, its context length).

Both are the usual lower bounds (activations, the draft model, rejected draft tokens,
padding and re-reads are not counted), so utilisation here is what the *useful* work needs
of the device, not what the kernels did. The default peaks are nominal datasheet numbers
of an H100 SXM (bf16 dense tensor-core FLOP/s, HBM3 bandwidth), not measured ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

H100_SXM_BF16_FLOPS = 989e12  # nominal dense bf16 tensor-core peak, FLOP/s
H100_SXM_BYTES_PER_S = 3.35e12  # nominal HBM3 bandwidth, bytes/s
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2,
               "fp8": 1, "float8_e4m3fn": 1}


@dataclass(frozen=True)
class ModelShape:
    """The dimensions of a decoder-only transformer with a gated (SwiGLU) MLP."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    head_dim: int

    @classmethod
    def from_hf_config(cls, config: dict) -> "ModelShape":
        """From a Hugging Face `config.json` (Llama-style keys; a nested `text_config`,
        as multimodal configs have, is used when present)."""
        c = config.get("text_config") or config
        heads = int(c["num_attention_heads"])
        return cls(layers=int(c["num_hidden_layers"]), hidden=int(c["hidden_size"]),
                   intermediate=int(c["intermediate_size"]), heads=heads,
                   kv_heads=int(c.get("num_key_value_heads") or heads),
                   vocab=int(c["vocab_size"]),
                   head_dim=int(c.get("head_dim") or int(c["hidden_size"]) // heads))

    @property
    def params(self) -> int:
        """Matrix-multiply weights one token passes through (LM head included)."""
        q_o = 2 * self.hidden * self.heads * self.head_dim
        k_v = 2 * self.hidden * self.kv_heads * self.head_dim
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (q_o + k_v + mlp) + self.vocab * self.hidden

    def kv_bytes_per_token(self, dtype_bytes: float) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


@dataclass
class StepTotals:
    """Sums over engine steps of what FLOPs and bytes depend on (both are linear in
    these), so a whole run is one object: `add` one step at a time."""

    steps: int = 0
    tokens: int = 0
    query_context: int = 0  # sum over sequences of query tokens * context length
    kv_context: int = 0  # sum over sequences of context length (KV entries read)

    def add(self, context_lens: Sequence[int], query_lens: Sequence[int] | None = None,
            tokens: int | None = None) -> None:
        """One step: each sequence's context length (tokens in its KV after the step) and
        its query tokens (default: `tokens` spread evenly, or 1 each)."""
        n = len(context_lens)
        if query_lens is None:
            per = (tokens / n if tokens is not None else 1) if n else 0
            query_lens = [per] * n
        self.steps += 1
        self.tokens += int(round(sum(query_lens))) if tokens is None else tokens
        self.query_context += int(round(sum(q * c for q, c in zip(query_lens, context_lens))))
        self.kv_context += sum(context_lens)

    def merge(self, others: Iterable["StepTotals"]) -> "StepTotals":
        for o in others:
            self.steps += o.steps
            self.tokens += o.tokens
            self.query_context += o.query_context
            self.kv_context += o.kv_context
        return self


def model_flops(shape: ModelShape, totals: StepTotals) -> float:
    attention = 4 * shape.layers * shape.heads * shape.head_dim * totals.query_context
    return 2.0 * shape.params * totals.tokens + attention


def bytes_moved(shape: ModelShape, dtype_bytes: float, totals: StepTotals) -> float:
    weights = shape.params * dtype_bytes * totals.steps
    return weights + shape.kv_bytes_per_token(dtype_bytes) * totals.kv_context


def utilisation(shape: ModelShape, dtype_bytes: float, totals: StepTotals, seconds: float,
                peak_flops: float = H100_SXM_BF16_FLOPS,
                bandwidth: float = H100_SXM_BYTES_PER_S) -> dict:
    """Achieved model FLOP/s and bytes/s over `seconds`, and their fractions of the
    given peak FLOP/s (`mfu`) and bandwidth (`mbu`)."""
    flops, moved = model_flops(shape, totals), bytes_moved(shape, dtype_bytes, totals)
    rate = (lambda x: x / seconds) if seconds > 0 else (lambda x: 0.0)
    return {"flops": flops, "flop_per_s": rate(flops), "mfu": rate(flops) / peak_flops,
            "bytes": moved, "bytes_per_s": rate(moved), "mbu": rate(moved) / bandwidth,
            "peak_flops": peak_flops, "bandwidth": bandwidth, "params": shape.params,
            "steps": totals.steps, "tokens": totals.tokens, "seconds": seconds}


def step_utilisation(shape: ModelShape, dtype_bytes: float, tokens_per_step: int,
                     context_lens: Sequence[int], step_seconds: float,
                     peak_flops: float = H100_SXM_BF16_FLOPS,
                     bandwidth: float = H100_SXM_BYTES_PER_S,
                     query_lens: Sequence[int] | None = None) -> dict:
    """One step of `tokens_per_step` tokens over sequences of the given context lengths
    that took `step_seconds`."""
    totals = StepTotals()
    totals.add(context_lens, query_lens, tokens=tokens_per_step)
    return utilisation(shape, dtype_bytes, totals, step_seconds, peak_flops, bandwidth)
