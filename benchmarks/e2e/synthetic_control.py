"""Worker extension for benchmarks: change the synthetic acceptance rates of a running
engine, so one engine (one start-up, one set of CUDA graphs) is measured at several
acceptance settings. Loaded into vLLM's workers through `worker_extension_cls`, the same
way for vLLM's own draft_model speculation and for BASS; called with
`llm.collective_rpc("bench_set_synthetic_acceptance", args=(groups, per_request))`.

`groups` is a list of unconditional rate lists (P(the first j drafts accepted)); a request
belongs to group `SamplingParams.extra_args["bass_synthetic_group"]`. BASS keeps one rate
list per group. vLLM takes one conditional list per engine; with `per_request` this
extension gives it the same per-request process as BASS (benchmark-only: vLLM's rate list
set to 1 and each request's uniforms divided by its group's conditional rate, so a draft
token is accepted with exactly its group's probability), else the groups' per-position
average (the batch-average acceptance of a heterogeneous mix).
"""

from __future__ import annotations

GROUP_KEY = "bass_synthetic_group"  # = vllm_bass.worker.sampler.SYNTHETIC_GROUP_KEY


def average_rates(groups: list[list[float]], length: int) -> list[float]:
    return [sum(g[j] if j < len(g) else 0.0 for g in groups) / len(groups)
            for j in range(length)]


def conditional(unconditional: list[float], length: int) -> list[float]:
    u = list(unconditional[:length]) + [0.0] * max(0, length - len(unconditional))
    return [u[0]] + [u[j] / u[j - 1] if u[j - 1] > 0 else 0.0 for j in range(1, length)]


class SyntheticAcceptanceControl:
    def bench_reset_profiler(self) -> None:
        """Forget the worker's profiler: vLLM names a trace after the first start's
        prefix and reuses that profiler; the next start then builds one with its own."""
        self.profiler = None

    def bench_set_policy(self, assignments: dict) -> int:
        """One arm of an in-engine A/B (`vs_vllm.py --arms`): attributes of the BASS policy
        set for the runs that follow; the number of schedulers set."""
        return set_policy_attributes(bass_schedulers(), assignments)

    def bench_set_synthetic_acceptance(self, groups: list[list[float]],
                                       per_request: bool = True) -> str:
        import torch

        sampler = self.model_runner.rejection_sampler
        if hasattr(sampler, "synthetic_groups"):  # BASS
            from vllm_bass.worker.sampler import unconditional_to_conditional

            k = sampler.synthetic_groups.shape[1]
            sampler.synthetic_groups = torch.tensor(
                [unconditional_to_conditional(g, k) for g in groups],
                dtype=sampler.synthetic_groups.dtype, device=sampler.synthetic_groups.device)
            sampler.request_groups.clear()
            return "bass"
        rates = sampler.synthetic_conditional_rates  # vLLM: one conditional list
        assert rates is not None, "the engine was not started with synthetic acceptance"
        k = rates.shape[0]
        if per_request and len(groups) > 1:
            rates.fill_(1.0)
            _install_per_request_uniforms(self.model_runner,
                                          [conditional(g, k) for g in groups])
            return "vllm_per_request"
        _install_per_request_uniforms(self.model_runner, None)
        rates.copy_(torch.tensor(conditional(average_rates(groups, k), k), dtype=rates.dtype))
        return "vllm"


def bass_schedulers() -> list:
    """The BASS schedulers of this process (benchmark-only, found through the garbage
    collector: the engine keeps no handle a worker could reach; what vLLM froze after its
    start-up is unfrozen for the search and frozen again). With one GPU vLLM runs the worker
    in the engine core's process, beside its scheduler (on the CPU platform only without
    multiprocessing)."""
    import gc

    from vllm_bass.scheduler import BassScheduler

    frozen = gc.get_freeze_count() > 0  # vLLM freezes what start-up made (its scheduler)
    if frozen:
        gc.unfreeze()
    try:
        return [o for o in gc.get_objects() if isinstance(o, BassScheduler)]
    finally:
        if frozen:
            gc.freeze()


def set_policy_attributes(schedulers: list, assignments: dict) -> int:
    """Set each `name: value` on every scheduler's draft-length policy (an in-engine arm of
    an A/B: `vs_vllm.py --arms`); a name the policy lacks is an error naming the flag."""
    if not schedulers:
        raise RuntimeError("vs_vllm.py --arms: no BASS scheduler in the worker's process "
                           "(arms need vLLM's one-process executor: one GPU, no Ray)")
    for sched in schedulers:
        policy = sched.bass_policy
        for name, value in assignments.items():
            if not hasattr(policy, name):
                raise AttributeError(f"vs_vllm.py --arms: the {type(policy).__name__} "
                                     f"policy has no attribute {name!r}")
            setattr(policy, name, value)
    return len(schedulers)


def _install_per_request_uniforms(runner, group_rates: list[list[float]] | None) -> None:
    """vLLM's rejection sampler accepts draft j of a request when u < rate[j]; with the
    rates at 1, dividing u by the request's own conditional rate makes that u < its rate."""
    import torch
    from vllm.v1.sample import rejection_sampler as module

    original = getattr(module, "_bench_original_uniforms", module.generate_uniform_probs)
    module._bench_original_uniforms = original
    if group_rates is None:
        module.generate_uniform_probs = original
        return
    table = torch.tensor(group_rates, dtype=torch.float64)
    on_device: dict = {}  # the table where the uniforms live

    def per_request_uniforms(num_tokens, num_draft_tokens, generators, device):
        u = original(num_tokens, num_draft_tokens, generators, device)
        if not num_draft_tokens:
            return u
        ids = runner.input_batch.req_ids[:len(num_draft_tokens)]
        groups = torch.tensor([int((runner.requests[rid].sampling_params.extra_args or {})
                                   .get(GROUP_KEY, 0)) % len(table) for rid in ids])
        counts = torch.tensor(num_draft_tokens)
        # token t of request i divides by its group's rate at draft position t - start_i
        positions = (torch.arange(int(counts.sum()))
                     - (counts.cumsum(0) - counts).repeat_interleave(counts))
        flat = groups.repeat_interleave(counts) * table.shape[1] + positions
        if u.device.type == "cuda":
            # a pageable host tensor's copy waits for the whole stream (CUDA semantics),
            # which took vLLM's async scheduling away on these rows only (sessions 15-16:
            # vLLM K=2 on the mix at 8.9-11.7 ms/token, slower than plain decoding)
            flat = flat.pin_memory()
        key = u.device
        if key not in on_device:
            on_device[key] = table.reshape(-1).to(u.device)
        divisors = on_device[key][flat.to(u.device, non_blocking=True)]
        return u / divisors

    module.generate_uniform_probs = per_request_uniforms
