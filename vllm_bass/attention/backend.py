"""vLLM attention backend running the BASS paged-attention kernels.

Registered in vLLM's CUSTOM slot (see ``register_bass_attention_backend``)
and selected with ``attention_config={"backend": "CUSTOM"}`` /
``--attention-backend CUSTOM``. Same KV-cache layout as TRITON_ATTN /
FLASH_ATTN (logical ``(num_blocks, num_kv_heads, block_size, 2 * head_size)``,
physically NHD unless the HND layout is configured), so the rest of vLLM
(KV cache allocation, block tables, slot mappings, the draft model sharing
the target's block table) works unchanged.

Scope: causal decoder self-attention as a Llama-style model needs it, for
any mix of query lengths per step (decode, BASS verification with ragged
draft lengths, chunked prefill). Rejected with a clear error: sliding
window, ALiBi, logits soft-cap, attention sinks, encoder / cross attention,
quantized (fp8/int) KV caches, fused output quantization.

The Triton kernels are imported lazily (first ``build``/``forward``), so this
module imports on machines without Triton.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionCGSupport,
    AttentionImpl,
    AttentionLayer,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
    MultipleOf,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.kv_cache_interface import AttentionSpec

BACKEND_NAME = "CUSTOM"  # the AttentionBackendEnum member we are registered as
logger = logging.getLogger("vllm.bass")  # under vLLM's handlers
_announced = False


# Architectures whose attention is plain causal (GQA) self-attention, which is what the
# kernels implement; anything else keeps vLLM's own backend unless CUSTOM is asked for.
DEFAULT_ARCHITECTURES = frozenset({
    "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"})


def default_backend_unsupported(model_config, kv_cache_dtype: str = "auto",
                                capability: "DeviceCapability | None" = None) -> str | None:
    """Why our backend should not be the *default* for this model on this GPU (`capability`;
    None: not asked) (None: it can be)."""
    if capability is not None and not BassAttentionBackend.supports_compute_capability(
            capability):
        return (f"compute capability {capability.major}.{capability.minor} "
                "(our kernels need 8.0 or newer)")
    hf = model_config.hf_text_config
    archs = set(getattr(model_config, "architectures", None) or [])
    if not archs & DEFAULT_ARCHITECTURES:
        return f"architecture {sorted(archs)} not in {sorted(DEFAULT_ARCHITECTURES)}"
    if getattr(hf, "sliding_window", None) and getattr(hf, "use_sliding_window", True):
        return "sliding-window attention"
    head_size = model_config.get_head_size()
    if not BassAttentionBackend.supports_head_size(head_size):
        return f"head size {head_size}"
    if kv_cache_dtype not in BassAttentionBackend.supported_kv_cache_dtypes:
        return f"kv_cache_dtype {kv_cache_dtype!r}"
    if str(model_config.dtype).removeprefix("torch.") not in ("float16", "bfloat16", "float32"):
        return f"dtype {model_config.dtype}"
    return None


# A step whose longest query has at least this many tokens (a prompt's prefill, a chunk of
# one) runs FA3's kernel over the same paged cache where vLLM ships it: our kernels are built
# for verification (queries of 1 + drafts tokens) and ran prefill at 0.36-0.75x FA3 from
# 512-token queries (H100, `benchmarks/results/session20/paged_attention_prefill_h100.json`).
# Graph-captured steps (verification, one-token decode, the drafter) never take this path.
PREFILL_QUERY_LEN = 64
_fa3_prefill: Any = None  # flash_attn_varlen_func, or False where FA3 is not usable
fa3_unusable_reason: str | None = None  # why not (logged once; tests print it)


def fa3_for_prefill(dtype: torch.dtype):
    """vLLM's FA3 varlen function if this step's prefill can run on it, else None."""
    global _fa3_prefill, fa3_unusable_reason
    if dtype not in (torch.float16, torch.bfloat16):
        return None
    if _fa3_prefill is None:
        _fa3_prefill = False
        from vllm_bass import envs

        if not envs.flag("VLLM_BASS_PREFILL_FA3"):
            fa3_unusable_reason = "VLLM_BASS_PREFILL_FA3=0"
        elif not torch.cuda.is_available():
            fa3_unusable_reason = "no CUDA device"
        else:
            try:
                from vllm.vllm_flash_attn import flash_attn_varlen_func
                from vllm.vllm_flash_attn.flash_attn_interface import (
                    fa_version_unsupported_reason,
                    is_fa_version_supported,
                )

                if is_fa_version_supported(3):
                    _fa3_prefill = flash_attn_varlen_func
                else:
                    fa3_unusable_reason = str(fa_version_unsupported_reason(3))
            except Exception as e:  # noqa: BLE001 -- then our kernels run prefill too
                fa3_unusable_reason = f"{type(e).__name__}: {e}"
        if fa3_unusable_reason:
            logger.info("vllm-bass: prefill steps run our attention kernels (FA3 not used: "
                        "%s)", fa3_unusable_reason)
    return _fa3_prefill or None


_fa3_prefill_checked = False
FA3_PREFILL_TOLERANCE = 2e-2  # relative L2 (bf16 rounding of P and of the output: ~4e-3)


def check_fa3_prefill(fa3_out: torch.Tensor, ours: torch.Tensor) -> bool:
    """The process's first FA3 prefill is also run by our kernels: FA3 is kept only if the
    two agree (it reads our cache through strided views), else prefill stays ours."""
    global _fa3_prefill, _fa3_prefill_checked, fa3_unusable_reason
    _fa3_prefill_checked = True
    err = ((fa3_out.float() - ours.float()).norm()
           / ours.float().norm().clamp_min(1e-30)).item()
    if err <= FA3_PREFILL_TOLERANCE and bool(torch.isfinite(fa3_out).all()):
        logger.info("vllm-bass: prefill steps run on FA3 (first prefill checked against our "
                    "kernels: relative error %.1e)", err)
        return True
    _fa3_prefill = False
    fa3_unusable_reason = f"FA3 disagreed with our kernels on a prefill (relative error {err:.2e})"
    logger.warning("vllm-bass: %s; prefill steps run our kernels", fa3_unusable_reason)
    return False


_ops: tuple | None = None


def _kernels():
    """Import the Triton ops on first use (then from a module global: every layer of every
    step calls this, and an import statement costs a few microseconds each time)."""
    global _ops
    if _ops is None:
        from vllm_bass.kernels import paged_attention, reshape_and_cache

        _ops = (paged_attention, reshape_and_cache)
    return _ops


@dataclass
class BassAttentionMetadata:
    """Per-step metadata. ``plan``/``workspace``: the PAD/SPLIT choice of the
    builder's head configuration; a layer gets its own through ``plan_for``
    (the tiles pack the query heads of one KV head, so a plan is only valid
    for the head configuration it was chosen for)."""

    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    query_start_loc: torch.Tensor  # [num_reqs + 1] int32
    seq_lens: torch.Tensor  # [num_reqs] int32
    block_table: torch.Tensor  # [num_reqs, max_blocks] int32
    slot_mapping: torch.Tensor
    sms: int  # multiprocessors, for the PAD/SPLIT choice
    device: torch.device  # of the SPLIT workspaces
    # the context length plans are chosen for: the step's longest, or max_model_len when
    # the step is captured into a CUDA graph (the launch then serves any context)
    plan_seq_len: int = 0
    # captured CUDA graphs: plans whose grid serves any split of the graph's tokens into
    # requests (AttnPlan.any_batch), chosen for the expected requests and query length
    any_batch: bool = False
    expected_batch: int = 0
    expected_query_len: int = 0
    plan: Any = None  # vllm_bass.kernels.paged_attention.AttnPlan
    workspace: torch.Tensor | None = None  # SPLIT partials, shared by the layers of the step
    # (num_heads, num_kv_heads, head_size, elem_size) -> (plan, workspace)
    plans: dict = field(default_factory=dict)
    # head configurations whose inputs were asserted this step (first layer
    # of each), the other layers skip the asserts
    checked: set = field(default_factory=set)

    def plan_for(
        self, num_heads: int, num_kv_heads: int, head_size: int, dtype: torch.dtype
    ) -> tuple[Any, torch.Tensor | None]:
        """(plan, workspace) for layers of this head configuration and dtype,
        chosen on first use and reused by the step's other such layers."""
        key = (num_heads, num_kv_heads, head_size, dtype.itemsize)
        if key not in self.plans:
            paged_attention, _ = _kernels()
            plan = paged_attention.choose_plan(
                self.expected_batch or self.seq_lens.shape[0], num_heads, num_kv_heads,
                head_size, self.expected_query_len or self.max_query_len,
                self.plan_seq_len or self.max_seq_len, self.sms,
                elem_size=dtype.itemsize, any_batch=self.any_batch,
            )
            numel = plan.workspace_numel(self.num_actual_tokens, num_heads)
            workspace = torch.empty(numel, dtype=torch.float32, device=self.device) if numel else None
            self.plans[key] = (plan, workspace)
        return self.plans[key]


# Drafts per request a captured mixed verification graph is planned for, whatever the
# bound: planned for requests of 1 + 16 tokens (bound 16), the graphs got 32-row tiles and
# SPLIT for the few requests such tokens could hold, and every replay paid for it (7B
# layer, graph-timed, H100: batch 32 of 2-3 tokens 16-59 us over fixed K=2's plan at
# contexts 200-4000; end to end bound 16 lost 3-10% to bound 8 at batch 8 / 32, session
# 23). Long drafts come at high acceptance and small batches, where a uniform graph
# (planned exactly) or a SPLIT plan of fewer splits serves them.
PLANNED_DRAFTS = 8

# A short-query request: one token and one draft (session 55). Where a mixed graph's plan for
# a few verifications of 1 + PLANNED_DRAFTS tokens differs from the plan for many requests of
# this length, the BASS runner can capture a second graph of the same size planned for the
# latter (`worker.cuda_graphs`, VLLM_BASS_SHORT_QUERY_GRAPHS): at 32-104 tokens the first is
# a SPLIT or a wide PAD, the second the narrow PAD that a K=1 engine's graphs get, and the
# default's one-draft verifications at batch 16 / 32 ran 0.30 / 0.37 ms a step slower on the
# H200 than fixed K=1's (session 54's runner traces).
SHORT_QUERY_LEN = 2


def short_query_len(tokens: int, max_reqs: int) -> int:
    """The query length a size's short-query graph is planned and captured for:
    SHORT_QUERY_LEN, or the shortest that fits `tokens` into `max_reqs` requests (vLLM's
    dummy run makes at most max_num_seqs of them; session 56's first GPU run failed its
    capture at 104 tokens and 32 requests of two tokens)."""
    return max(SHORT_QUERY_LEN, -(-tokens // max(1, max_reqs)))


def short_query_plan_len(dispatcher, desc) -> int:
    """Where `desc` is a size's short-query graph (the size's mixed key, the size having a
    long-query key too: `worker.cuda_graphs.add_short_query_graphs`), the query length its
    capture is planned for (`planned_query_len`, `short_query_len`), else 0."""
    long = (getattr(dispatcher, "long_query_keys", None) or {}).get(desc.num_tokens)
    if desc.uniform or long in (None, desc):
        return 0
    return short_query_len(desc.num_tokens, desc.num_reqs or desc.num_tokens)


def expected_verification_query_len(vllm_config) -> int:
    """What a verification's requests usually bring (1 + drafts, at most PLANNED_DRAFTS of
    them): the query length captured mixed graphs are planned for."""
    spec = getattr(vllm_config, "speculative_config", None)
    return 1 + min(getattr(spec, "num_speculative_tokens", None) or 0, PLANNED_DRAFTS)


def long_query_batch_limit(tokens: int, max_reqs: int, expected_query_len: int,
                           plan_for) -> int | None:
    """The most requests a batch of `tokens` tokens may hold and still replay the graph
    planned for requests of `expected_query_len` tokens, where the plan for requests of
    `short_query_len` tokens differs; batches of more requests replay the short-query graph.
    None: one plan serves every batch of this size (or no batch size picks the short plan).
    `plan_for(batch, query_len)`: the plan (its strategy, splits and tiles) a captured graph
    gets for that many requests of that query length. The limit is one below the fewest
    requests whose own plan (the plan for exactly that batch shape) is the short one."""
    short_len = short_query_len(tokens, max_reqs)
    if expected_query_len <= short_len or max_reqs < 2:
        return None
    fewest = min(max_reqs, -(-tokens // expected_query_len))
    short = plan_for(-(-tokens // short_len), short_len)
    if plan_for(fewest, expected_query_len) == short:
        return None
    for reqs in range(fewest + 1, min(max_reqs, tokens) + 1):
        if plan_for(reqs, -(-tokens // reqs)) == short:
            return reqs - 1
    return None


def graph_plan_for(num_heads: int, num_kv_heads: int, head_size: int, elem_size: int,
                   plan_seq_len: int, sms: int):
    """`long_query_batch_limit`'s `plan_for` for layers of this shape: the plan
    `build_for_cudagraph_capture` makes (any batch, contexts up to `plan_seq_len`)."""
    paged_attention, _ = _kernels()

    def plan_for(batch: int, query_len: int):
        plan = paged_attention.choose_plan(batch, num_heads, num_kv_heads, head_size,
                                           query_len, plan_seq_len, sms,
                                           elem_size=elem_size, any_batch=True)
        return plan.strategy, plan.num_splits, plan.tiles
    return plan_for


class BassAttentionMetadataBuilder(AttentionMetadataBuilder[BassAttentionMetadata]):
    # Full CUDA graphs for any batch (plain decoding, BASS off-steps, ragged verification):
    # a captured launch's grid follows the graph's token and request counts only, each
    # program finding its sequence on the device (AttnPlan.any_batch); the kernels read
    # every query and context length on the device and SPLIT sizes its splits per sequence
    # there, so a graph captured with plans for max_model_len serves any batch of its size.
    _cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.ALWAYS
    # a graph captured from `build` would keep the launch grid of the batch it was built
    # for: graphs of other layouts (the drafter's first pass) build with
    # `build_for_cudagraph_capture` (`worker.drafter.draft_graphs.draft_attention_metadata`)
    captures_any_batch: ClassVar[bool] = True

    def __init__(
        self,
        kv_cache_spec: "AttentionSpec",
        layer_names: list[str],
        vllm_config: "VllmConfig",
        device: torch.device,
    ):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        from vllm.v1.attention.backends.utils import get_num_attention_heads_from_layers

        model_config = vllm_config.model_config
        parallel_config = vllm_config.parallel_config
        self.num_heads_q = get_num_attention_heads_from_layers(
            vllm_config, layer_names
        ) or model_config.get_num_attention_heads(parallel_config)
        # the layers' own spec, not model_config: under speculative decoding
        # the drafter's builders get the target's config (model_config is the
        # target's), and the draft model has other head counts
        self.num_heads_kv = kv_cache_spec.num_kv_heads
        self.head_size = kv_cache_spec.head_size
        self.block_size = kv_cache_spec.block_size
        self.dtype = kv_cache_spec.dtype
        self.max_model_len = vllm_config.model_config.max_model_len
        # what a verification step's requests usually bring (1 + drafts, at most
        # PLANNED_DRAFTS of them); steers the plans of captured mixed graphs, which serve
        # any query lengths
        self.expected_query_len = expected_verification_query_len(vllm_config)
        self._sms: int | None = None
        # plans (and SPLIT workspaces) baked into captured CUDA graphs: kept alive here
        self._captured_plans: list[dict] = []

    def build_for_cudagraph_capture(
        self, common_attn_metadata: CommonAttentionMetadata
    ) -> BassAttentionMetadata:
        """Plans for any batch the graph will replay: contexts up to max_model_len, any
        query lengths. A uniform decode graph replays exactly its requests and query length;
        for a mixed-batch graph PAD or SPLIT is chosen for the fewest requests its tokens
        likely hold (each bringing the expected query length): a SPLIT launch that meets
        more requests costs a few percent, a PAD launch that meets few long ones up to 5x."""
        md = self._build_as_captured(common_attn_metadata)
        self._captured_plans.append(md.plans)  # the graph keeps using their workspaces
        return md

    def _build_as_captured(self, cm: CommonAttentionMetadata) -> BassAttentionMetadata:
        """`build_for_cudagraph_capture`'s plans, kept by no graph."""
        from vllm_bass.attention import capturing_uniform_batch, planned_query_len

        if capturing_uniform_batch.get():
            query_len, batch = cm.max_query_len, cm.num_reqs
        else:  # vLLM's and our dummy batches hold longer queries than verifications bring
            query_len = planned_query_len.get() or (
                self.expected_query_len if self.expected_query_len > 1 else cm.max_query_len)
            batch = min(cm.num_reqs, -(-cm.num_actual_tokens // query_len))
        return self.build(0, cm, plan_seq_len=self.max_model_len, any_batch=True,
                          expected_batch=batch, expected_query_len=query_len)

    def build(
        self,
        common_prefix_len: int,
        common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
        plan_seq_len: int = 0,
        any_batch: bool = False,
        expected_batch: int = 0,
        expected_query_len: int = 0,
    ) -> BassAttentionMetadata:
        from vllm_bass.attention import warming_full_graph

        if not any_batch and warming_full_graph.get():
            # vLLM's eager warm-up of a FULL graph about to be captured: the capture's plans
            return self._build_as_captured(common_attn_metadata)
        paged_attention, _ = _kernels()
        cm = common_attn_metadata
        num_reqs = cm.num_reqs
        if self._sms is None:
            dev = torch.device(self.device)
            self._sms = paged_attention.num_sms(dev if dev.type == "cuda" else None)
        md = BassAttentionMetadata(
            num_actual_tokens=cm.num_actual_tokens,
            max_query_len=cm.max_query_len,
            max_seq_len=cm.max_seq_len,
            query_start_loc=cm.query_start_loc[: num_reqs + 1],
            seq_lens=cm.seq_lens[:num_reqs],
            block_table=cm.block_table_tensor[:num_reqs],
            slot_mapping=cm.slot_mapping,
            sms=self._sms,
            device=torch.device(self.device),
            plan_seq_len=plan_seq_len,
            any_batch=any_batch,
            expected_batch=expected_batch,
            expected_query_len=expected_query_len,
        )
        md.plan, md.workspace = md.plan_for(self.num_heads_q, self.num_heads_kv, self.head_size, self.dtype)
        return md


class BassAttentionBackend(AttentionBackend):
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float16, torch.bfloat16, torch.float32]
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto", "float16", "bfloat16"]
    forward_includes_kv_cache_update: bool = False

    @staticmethod
    def get_name() -> str:
        return BACKEND_NAME

    @staticmethod
    def get_impl_cls() -> type["BassAttentionImpl"]:
        return BassAttentionImpl

    @staticmethod
    def get_builder_cls() -> type[BassAttentionMetadataBuilder]:
        return BassAttentionMetadataBuilder

    @staticmethod
    def get_supported_kernel_block_sizes() -> list[int | MultipleOf]:
        return [MultipleOf(16)]

    @staticmethod
    def get_kv_cache_shape(
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_size: int,
        cache_dtype_str: str = "auto",
    ) -> tuple[int, ...]:
        if block_size % 16 != 0:
            raise ValueError("BASS attention: block size must be a multiple of 16.")
        # K and V packed into the content dim, as in TRITON_ATTN / FLASH_ATTN.
        return (num_blocks, num_kv_heads, block_size, 2 * head_size)

    @staticmethod
    def get_kv_cache_stride_order(include_num_layers_dimension: bool = False) -> tuple[int, ...]:
        from vllm.v1.attention.backends.utils import get_kv_cache_layout

        layout = get_kv_cache_layout()
        if layout == "NHD":
            return (1, 0, 3, 2, 4) if include_num_layers_dimension else (0, 2, 1, 3)
        if layout == "HND":
            return (1, 2, 0, 3, 4) if include_num_layers_dimension else (0, 1, 2, 3)
        raise ValueError(f"Unknown KV cache layout: {layout}")

    @classmethod
    def supports_head_size(cls, head_size: int) -> bool:
        # any size works (padded to a power of two); multiples of 8 keep the
        # loads 16-byte wide
        return 16 <= head_size <= 256 and head_size % 8 == 0

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @classmethod
    def supports_compute_capability(cls, capability: "DeviceCapability") -> bool:
        return capability.major >= 8  # bf16 tensor-core dots

    @staticmethod
    def use_cascade_attention(*args, **kwargs) -> bool:
        return False


class BassAttentionImpl(AttentionImpl[BassAttentionMetadata]):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int | None = None,
        alibi_slopes: list[float] | None = None,
        sliding_window: int | None = None,
        kv_cache_dtype: str = "auto",
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        sinks: torch.Tensor | None = None,
        **unsupported: Any,
    ) -> None:
        unsupported = {k: v for k, v in unsupported.items() if v not in (None, False, -1)}
        problems = []
        if alibi_slopes is not None:
            problems.append("ALiBi")
        if sliding_window is not None:
            problems.append(f"sliding window ({sliding_window})")
        if logits_soft_cap not in (None, 0, 0.0):
            problems.append(f"logits soft-cap ({logits_soft_cap})")
        if attn_type != AttentionType.DECODER:
            problems.append(f"attention type {attn_type!r} (decoder self-attention only)")
        if sinks is not None:
            problems.append("attention sinks")
        if kv_cache_dtype not in BassAttentionBackend.supported_kv_cache_dtypes:
            problems.append(f"kv_cache_dtype {kv_cache_dtype!r}")
        if unsupported:
            problems.append(f"options {sorted(unsupported)}")
        if problems:
            raise NotImplementedError(
                "BASS attention backend (CUSTOM) does not support: " + ", ".join(problems)
                + ". Use FLASH_ATTN or TRITON_ATTN for this model."
            )
        global _announced
        if not _announced:
            _announced = True
            logger.info("vllm-bass: BASS Triton attention (CUSTOM backend) in use")
        num_kv_heads = num_kv_heads or num_heads
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads {num_heads} not a multiple of num_kv_heads {num_kv_heads}")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.attn_type = attn_type
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self._cache_views: tuple | None = None  # (kv_cache, key view, value view)

    def _split_cache(self, kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """logical (B, H, N, 2*hs) -> K, V views (B, N, H, hs), physical strides kept.
        A layer's cache tensor stays the same from step to step: its views are made once
        (host time of eager layers, as in the drafter's steps), again if it is replaced."""
        views = self._cache_views
        if views is None or views[0] is not kv_cache:
            key_cache, value_cache = kv_cache.transpose(1, 2).split(self.head_size, dim=-1)
            views = self._cache_views = (kv_cache, key_cache, value_cache)
        return views[1], views[2]

    def forward(
        self,
        layer: AttentionLayer,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: BassAttentionMetadata,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """query [T, H, D]; output [T, H, D] (or [T, H*D]); K/V of these
        tokens are already in kv_cache (do_kv_cache_update ran first)."""
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("BASS attention: fused output quantization is not supported")
        if attn_metadata is None:  # profiling run
            return output.fill_(0)
        n = attn_metadata.num_actual_tokens
        key_cache, value_cache = self._split_cache(kv_cache)
        out = output.view(output.shape[0], self.num_heads, self.head_size)
        # FA3 reads the NHD cache (pages outside heads): our views of it have stride(1) >
        # stride(2); under the HND layout our kernels run the prefill as well
        if (attn_metadata.max_query_len >= PREFILL_QUERY_LEN and not attn_metadata.any_batch
                and key_cache.stride(1) > key_cache.stride(2)):
            fa3 = fa3_for_prefill(query.dtype)
            if fa3 is not None:
                fa3(q=query[:n].view(n, self.num_heads, self.head_size), k=key_cache,
                    v=value_cache, out=out[:n], cu_seqlens_q=attn_metadata.query_start_loc,
                    max_seqlen_q=attn_metadata.max_query_len,
                    seqused_k=attn_metadata.seq_lens, max_seqlen_k=attn_metadata.max_seq_len,
                    softmax_scale=self.scale, causal=True,
                    block_table=attn_metadata.block_table, fa_version=3)
                if _fa3_prefill_checked:
                    return output
                ours = self._ours(query, key_cache, value_cache, torch.empty_like(out[:n]),
                                  attn_metadata)
                if check_fa3_prefill(out[:n], ours):
                    return output
                out[:n].copy_(ours)
                return output
        self._ours(query, key_cache, value_cache, out[:n], attn_metadata)
        return output

    def _ours(self, query, key_cache, value_cache, out, attn_metadata) -> torch.Tensor:
        """Our kernels over the step's tokens, into `out` [n, heads, head_size]."""
        paged_attention, _ = _kernels()
        n = attn_metadata.num_actual_tokens
        # this layer's own plan: tiles depend on its head configuration
        plan_key = (self.num_heads, self.num_kv_heads, self.head_size, query.dtype)
        plan, workspace = attn_metadata.plan_for(*plan_key)
        paged_attention.paged_attention(
            query[:n].view(n, self.num_heads, self.head_size),
            key_cache,
            value_cache,
            out,
            attn_metadata.query_start_loc,
            attn_metadata.seq_lens,
            attn_metadata.block_table,
            self.scale,
            attn_metadata.max_query_len,
            attn_metadata.plan_seq_len or attn_metadata.max_seq_len,  # as the plan assumed
            plan=plan,
            workspace=workspace,
            check=plan_key not in attn_metadata.checked,
        )
        attn_metadata.checked.add(plan_key)
        return out

    def do_kv_cache_update(
        self,
        layer: AttentionLayer,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        _, reshape_and_cache = _kernels()
        key_cache, value_cache = self._split_cache(kv_cache)
        reshape_and_cache.reshape_and_cache(key, value, key_cache, value_cache, slot_mapping)
