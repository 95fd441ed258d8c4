"""Worker extension for benchmarks: change the synthetic acceptance rates of a running
engine, so one engine (one start-up, one set of CUDA graphs) is measured at several
acceptance settings. Loaded into vLLM's workers through `worker_extension_cls`, the same
way for vLLM's own draft_model speculation and for BASS; called with
`llm.collective_rpc("bench_set_synthetic_acceptance", args=(groups,))`.

`groups` is a list of unconditional rate lists (P(the first j drafts accepted)). BASS keeps
one rate list per group and each request its group (SamplingParams.extra_args
["bass_synthetic_group"]); vLLM takes one list per engine, so it gets the groups' average
(per position) -- the batch-average acceptance of a heterogeneous mix.
"""

from __future__ import annotations


def average_rates(groups: list[list[float]], length: int) -> list[float]:
    return [sum(g[j] if j < len(g) else 0.0 for g in groups) / len(groups)
            for j in range(length)]


class SyntheticAcceptanceControl:
    def bench_set_synthetic_acceptance(self, groups: list[list[float]]) -> str:
        import torch

        sampler = self.model_runner.rejection_sampler
        if hasattr(sampler, "synthetic_groups"):  # BASS
            from vllm_bass.sampling.sampler import unconditional_to_conditional

            k = sampler.synthetic_groups.shape[1]
            sampler.synthetic_groups = torch.tensor(
                [unconditional_to_conditional(g, k) for g in groups],
                dtype=sampler.synthetic_groups.dtype, device=sampler.synthetic_groups.device)
            sampler.request_groups.clear()
            return "bass"
        rates = sampler.synthetic_conditional_rates  # vLLM: one conditional list
        assert rates is not None, "the engine was not started with synthetic acceptance"
        k = rates.shape[0]
        mean = average_rates(groups, k)
        conditional = [mean[0]] + [mean[j] / mean[j - 1] if mean[j - 1] > 0 else 0.0
                                   for j in range(1, k)]
        rates.copy_(torch.tensor(conditional, dtype=rates.dtype))
        return "vllm"
