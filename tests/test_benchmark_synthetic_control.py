"""The benchmark's per-request synthetic acceptance for vLLM's own sampler
(`benchmarks/e2e/synthetic_control.py`): with vLLM's rates at 1, each draft token's uniform is
divided by its request's group rate at that draft position, so vLLM accepts it exactly as
BASS's per-group sampler does; uninstalling restores vLLM's function."""

import types

import pytest

pytestmark = [pytest.mark.cpu]


def test_uniforms_divided_by_each_requests_group_rate(monkeypatch):
    import torch
    from vllm.v1.sample import rejection_sampler as module

    from benchmarks.e2e import synthetic_control as sc

    monkeypatch.setattr(module, "generate_uniform_probs",
                        lambda t, nd, g, d: torch.ones(t, dtype=torch.float64))
    monkeypatch.delattr(module, "_bench_original_uniforms", raising=False)
    rates = [sc.conditional([a ** (j + 1) for j in range(32)], 5) for a in (0.9, 0.6, 0.3)]
    drafts = [5, 0, 3, 1, 5, 2, 4]
    groups = [0, 1, 2, None, 1, 0, 2]  # None: no group asked (group 0)
    requests = {f"r{i}": types.SimpleNamespace(sampling_params=types.SimpleNamespace(
        extra_args=None if g is None else {sc.GROUP_KEY: g})) for i, g in enumerate(groups)}
    runner = types.SimpleNamespace(input_batch=types.SimpleNamespace(req_ids=list(requests)),
                                   requests=requests)
    sc._install_per_request_uniforms(runner, rates)
    u = module.generate_uniform_probs(sum(drafts), drafts, {}, "cpu")
    want = [1.0 / rates[g or 0][j] for g, n in zip(groups, drafts) for j in range(n)]
    assert u.tolist() == pytest.approx(want)
    sc._install_per_request_uniforms(runner, None)
    assert module.generate_uniform_probs(3, [3], {}, "cpu").tolist() == [1.0, 1.0, 1.0]


def test_same_alpha_runs_the_mix_machinery_at_one_rate():
    """`sameA` gives vLLM the per-request patch (two groups) at one alpha: its rows against
    the plain `A` rows price the patch itself."""
    from benchmarks.e2e.vs_vllm import acceptance_for, acceptance_groups

    same = acceptance_groups("same0.7")
    assert len(same) == 2 and same[0] == same[1] == acceptance_groups("0.7")[0]
    assert same[0][:3] == pytest.approx([0.7, 0.49, 0.343])
    assert acceptance_for("vllm_k1", ["0.7", "same0.7"]) == ["0.7", "same0.7"]
    assert acceptance_for("bass_default", ["same0.7"]) == ["same0.7"]
