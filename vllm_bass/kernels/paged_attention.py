"""Per-step choice between the PAD and SPLIT strategies, and the entry point.

BASS picks between padding the batch (one launch) and splitting the work per
sequence; here the cost model is the GPU's occupancy. PAD launches
batch x KV heads x query tiles programs, each reading a whole context:

* >= ``PAD_PROGRAMS_PER_SM`` programs per SM: PAD, 64-key steps, 4 warps (2 K/V
  stages up to ``PAD_TWO_STAGE_CONTEXT`` keys, else 3);
* fewer, but >= ``NARROW_PAD_PROGRAMS_PER_SM``: PAD on the same tiles, 3 stages;
* fewer, but >= ``WIDE_PAD_PROGRAMS_PER_SM``, or short contexts: PAD with
  128-key steps and 8 warps (more bytes in flight per program);
* fewer still: SPLIT the KV length into at most ``SPLIT_PROGRAMS_PER_SM`` x SMs
  programs (at least ``MIN_SPLIT_TOKENS`` keys each, on the host and per sequence on
  the device; a captured graph's launch scales its splits down on the device when it
  meets more requests than planned), narrow tiles, then reduce.

All launches order programs head-major (``AttnTiles.head_fastest``). On Hopper they are
programmatic dependent launches that overlap the KV-cache write before them
(``paged_attention_common.pdl_enabled``).
Thresholds from H200 and H100 sweeps of Llama-2-7B verification shapes
(benchmarks/kernels/bench_paged_attention.py --tune; graph-timed): splitting
costs a few percent of GPU time (workspace round trip, reduction launch,
smaller last wave), so it only pays when PAD would leave SMs idle.
The choice needs host ints only (batch, longest query, longest context), so
it is made once per step by the metadata builder; for a captured CUDA graph it is
made once for the graph (``any_batch``: expected batch and query length, contexts
up to max_model_len) and the launch serves every batch the graph replays.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, replace
from typing import Any, Iterator

import torch

from vllm_bass import envs
from vllm_bass.kernels.paged_attention_common import (
    AttnTiles,
    cdiv,
    paged_attention_ref,
    pick_tiles,
)
from vllm_bass.kernels.paged_attention_pad import paged_attention_pad
from vllm_bass.kernels.paged_attention_split import (
    MAX_SPLITS,
    paged_attention_split,
    split_geometry,
    split_workspace_numel,
)

reference = paged_attention_ref

PAD_PROGRAMS_PER_SM = 3.0
WIDE_PAD_PROGRAMS_PER_SM = 1.9
# Between these PAD keeps the narrow tiles (64 keys, 4 warps, the chooser's 3 stages):
# H200, 7B layer with its cache write, graph-timed (session 57, `bench_captured_plans.py
# --pad-tiles`): 9-12 requests of 1-9 tokens (288-384 programs, 2.2-2.9 an SM) 20.4-23.5 us
# against the wide tiles' 26.1-31.2 at 256 cached tokens, 53.1-60.0 against 65.9-75.5 at
# 1024, 181-195 against 217-241 at 4096, 346-376 against 418-462 at 8192 (FA3 370-373 at
# 12 x 1-9); 8 requests (256 programs, 1.9 an SM) want the wide ones (44.9 against 52.0 at
# 1024, 137 against 180 at 4096).
NARROW_PAD_PROGRAMS_PER_SM = 2.1
# SPLIT launches at most this many programs an SM (rounded down to whole splits): H100,
# 7B layer, batch 1 (32 programs a split): 12 splits beat 8-9 and 16-32 at 4096 / 8192
# cached tokens (32.2 / 55.6 us against 34.5 / 57.1 for 8; FA3 33.3 / 56.0); batch 4: 3
# splits (384 programs) beat 2 and 4 (session 27 tune)
SPLIT_PROGRAMS_PER_SM = 3.0
# the fewest keys of a split, on the host and per sequence on the device: batch 1 at 1024
# cached tokens, 128-key splits 14.2 us against 16.8 for four 256-key ones, FA3 14.7;
# captured graphs planned for 1-4 requests at contexts 200-1000 (bench_captured_plans):
# 9.8-14.0 us against 12.2-16.5 with 256 (FA3 10.1-14.9). A captured plan made for few
# requests that meets many splits less (`AttnPlan.split_programs`), which keeps their short
# contexts whole, as 256 did (session 23: 64-key pieces of batch 8 at context 200, 28.6 us)
MIN_SPLIT_TOKENS = 128
SHORT_CONTEXT = 256  # keys; at or below this a split saves less than it costs (2 x 192-key
# splits 11.3 us against PAD's 10.7 at 256 cached tokens, batch 1; 3 x 128 at 261: 9.8)
# ... and a little past it where the programs are about one an SM already (batch 4 of a 7B
# layer: 128 on 132 SMs): there PAD on 64-key tiles, 4 warps, 2 stages took 13.7 us against
# 16.1 for 3 splits on the same tiles, 19.2 for the plan chosen before (3 splits, 3 stages)
# and FA3's 16.9 (H200, 256 cached tokens + 1 draft, graph-timed, session 40 tune; the
# 96-shape sweep's only losses, 0.91-0.95x FA3, were batch 4 at 256 cached tokens). Measured
# at that context only: kept within a query's reach of SHORT_CONTEXT.
SHORT_PAD_REACH = 64  # keys past SHORT_CONTEXT
SHORT_PAD_PROGRAMS_PER_SM = 0.9
# Full-occupancy PAD (>= PAD_PROGRAMS_PER_SM) keeps 2 K/V stages where the plan's context
# is at most this: H200, 7B layer, batch 64-256, graph-timed (sessions 50-51), the 64-key
# tiles with 2 stages against 3: 4-7% faster at 128-384 cached tokens (24 of 24 shapes,
# one and two query tokens), 2-3% at 1024, 0.2-0.7% slower at 4096; end to end on the mix
# (4x1024, batch 64 / 128 / 256) 2-7% faster on best repeats, 3-6% on medians. A captured
# graph plans for max_model_len, so this is also a bound on the engine's context length.
PAD_TWO_STAGE_CONTEXT = 2048


@dataclass(frozen=True)
class AttnPlan:
    strategy: str  # "pad" or "split"
    num_splits: int  # launched KV splits (1 for pad)
    tiles: AttnTiles
    # grid by token and request counts, valid for any query lengths (CUDA graphs of
    # ragged batches); else by the step's longest query (eager steps, no search)
    any_batch: bool = False
    # SPLIT: the fewest keys of a split; a sequence this short is not split
    min_split_keys: int = 0
    # SPLIT, any_batch: programs to aim at for the requests a replay meets (see
    # paged_attention_split); 0: always num_splits
    split_programs: int = 0

    def workspace_numel(self, num_tokens: int, num_heads: int) -> int:
        """fp32 elements of the SPLIT workspace (0 for PAD)."""
        if self.strategy == "pad":
            return 0
        return split_workspace_numel(num_tokens, num_heads, self.num_splits, self.tiles.block_d)


@functools.lru_cache(maxsize=8)
def num_sms(device: torch.device | str | None = None) -> int:
    """Multiprocessors of the GPU; a small stand-in on CPU (interpreter)."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(device or torch.cuda.current_device()).multi_processor_count
    return 4


def pad_stages_cap() -> int:
    """`VLLM_BASS_PAD_STAGES`: at most this many K/V stages in PAD launches (0: no cap).
    Read where a plan is chosen (once a step and head configuration), so an A/B engine
    and the tests may set it; a value that is not an integer >= 0 raises ValueError."""
    cap = envs.integer("VLLM_BASS_PAD_STAGES")
    if cap < 0:
        raise ValueError(f"VLLM_BASS_PAD_STAGES must be 0 (the chooser's stages) or a "
                         f"positive number of stages, got {cap}")
    return cap


def _pad(tiles: AttnTiles, any_batch: bool, most_stages: int = 0) -> AttnPlan:
    """A PAD plan on `tiles`, their stages capped at `most_stages` (0: no cap of the
    chooser's) and by VLLM_BASS_PAD_STAGES."""
    caps = [c for c in (most_stages, pad_stages_cap()) if c]
    if caps and tiles.num_stages > min(caps):
        tiles = replace(tiles, num_stages=min(caps))
    return AttnPlan("pad", 1, tiles, any_batch)


def choose_plan(
    batch: int,
    num_heads: int,
    num_kv_heads: int,
    head_size: int,
    max_query_len: int,
    max_seq_len: int,
    sms: int,
    strategy: str = "auto",
    elem_size: int = 2,
    any_batch: bool = False,
) -> AttnPlan:
    """Pick PAD or SPLIT, the split count and the tiles from the step's shapes.
    ``strategy`` "pad"/"split" forces one (tests, benchmarks). ``any_batch``: the plan
    must serve any batch of the same token and request counts (a captured CUDA graph);
    ``batch`` and ``max_query_len`` are then the expected ones, they only steer the
    choice."""
    assert strategy in ("auto", "pad", "split"), strategy
    tiles = pick_tiles(num_heads, num_kv_heads, head_size, max_query_len, elem_size)
    q_tiles = cdiv(max(1, max_query_len), tiles.q_per_tile)
    programs = batch * num_kv_heads * q_tiles
    if strategy == "auto":
        if programs >= PAD_PROGRAMS_PER_SM * sms:
            return _pad(tiles, any_batch, 2 if max_seq_len <= PAD_TWO_STAGE_CONTEXT else 0)
        if programs >= NARROW_PAD_PROGRAMS_PER_SM * sms:
            return _pad(tiles, any_batch)
        if (SHORT_CONTEXT < max_seq_len <= SHORT_CONTEXT + SHORT_PAD_REACH
                and SHORT_PAD_PROGRAMS_PER_SM * sms <= programs < WIDE_PAD_PROGRAMS_PER_SM * sms):
            # where SPLIT was chosen before (at or below SHORT_CONTEXT: the wide PAD below)
            return _pad(tiles, any_batch, 2)
        if programs >= WIDE_PAD_PROGRAMS_PER_SM * sms or max_seq_len <= SHORT_CONTEXT:
            strategy = "pad"
    wide = pick_tiles(num_heads, num_kv_heads, head_size, max_query_len, elem_size, wide=True)
    if strategy == "pad":
        return _pad(wide, any_batch)
    splits = min(
        int(SPLIT_PROGRAMS_PER_SM * sms) // max(1, programs),
        cdiv(max(1, max_seq_len), MIN_SPLIT_TOKENS),
        MAX_SPLITS,
    )
    if strategy == "auto" and splits <= 1:
        return _pad(wide, any_batch)
    splits = max(2, splits)
    # split programs use the narrow tiles: two fit on an SM (H100 sweep: batch 4,
    # 3 splits, 64-key tiles 98.7 us against 109.6 us for the wide ones at ctx 4096)
    return AttnPlan("split", split_geometry(max_seq_len, splits, tiles.block_n)[1], tiles,
                    any_batch, MIN_SPLIT_TOKENS,
                    int(SPLIT_PROGRAMS_PER_SM * sms) if any_batch and strategy == "auto" else 0)


def paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    out: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    scale: float,
    max_query_len: int,
    max_seq_len: int,
    plan: AttnPlan | None = None,
    strategy: str = "auto",
    workspace: torch.Tensor | None = None,
    check: bool = True,
) -> torch.Tensor:
    """Causal paged attention with per-sequence query and context lengths.
    ``plan`` (from ``choose_plan``, once per step) and ``workspace`` (fp32,
    ``plan.workspace_numel`` elements) are optional; ``check=False`` skips the
    input asserts."""
    if plan is None:
        plan = choose_plan(
            seq_lens.shape[0], q.shape[1], k_cache.shape[2], q.shape[2],
            max_query_len, max_seq_len, num_sms(q.device if q.is_cuda else None),
            strategy, q.element_size(),
        )
    if plan.strategy == "pad":
        return paged_attention_pad(
            q, k_cache, v_cache, out, cu_seqlens_q, seq_lens, block_table,
            scale, max_query_len, plan.tiles, check, plan.any_batch,
        )
    return paged_attention_split(
        q, k_cache, v_cache, out, cu_seqlens_q, seq_lens, block_table,
        scale, max_query_len, max_seq_len, plan.num_splits, plan.tiles, workspace, check,
        plan.any_batch, plan.min_split_keys, plan.split_programs,
    )


@dataclass(frozen=True)
class KernelLaunch:
    """One launch of a Triton kernel as the launchers above make it, tensors as their
    dtypes (what Triton's `warmup` takes for them: it assumes 16-byte alignment, as the
    launchers' tensors have)."""
    kernel: Any  # the @triton.jit function
    grid: tuple
    args: tuple
    meta: dict


class _Recorder:
    def __init__(self, kernel, launches: list[KernelLaunch]):
        self.kernel, self.launches = kernel, launches

    def __getitem__(self, grid):
        def record(*args, **meta):
            # dtypes, not tensors: a recorded launch keeps no workspace alive
            self.launches.append(KernelLaunch(self.kernel, tuple(grid), tuple(
                a.dtype if isinstance(a, torch.Tensor) else a for a in args), meta))
        return record


def _step_kernel_slots() -> list[tuple[Any, str]]:
    """(module, name) of the Triton kernels an attention layer's step launches: PAD, SPLIT,
    the reduction and the KV-cache write."""
    from vllm_bass.kernels import paged_attention_pad as pad
    from vllm_bass.kernels import paged_attention_split as split
    from vllm_bass.kernels import reshape_and_cache as cache_write

    return [(pad, "_paged_attention_pad_kernel"), (split, "_paged_attention_split_kernel"),
            (split, "_split_reduce_kernel"), (cache_write, "_reshape_and_cache_kernel")]


def step_kernels() -> list[Any]:
    """The Triton kernels an attention layer's step launches (`_step_kernel_slots`)."""
    return [getattr(module, name) for module, name in _step_kernel_slots()]


@contextlib.contextmanager
def recording_launches() -> Iterator[list[KernelLaunch]]:
    """Inside, the step's launches (`step_kernels`) are recorded, not run (no kernel
    touches the GPU): what a step would launch, for compiling it ahead
    (`vllm_bass.attention.precompile`). Not thread-safe: for start-up, before any step."""
    launches: list[KernelLaunch] = []
    saved = [(module, name, getattr(module, name)) for module, name in _step_kernel_slots()]
    for module, name, kernel in saved:
        setattr(module, name, _Recorder(kernel, launches))
    try:
        yield launches
    finally:
        for module, name, kernel in saved:
            setattr(module, name, kernel)
