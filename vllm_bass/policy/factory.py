"""The configured draft-length policy (the one place that knows every policy: the policy
modules import only the base types, so the package has no import loop)."""

from __future__ import annotations

from vllm_bass.policy.auto_off import AutoOff
from vllm_bass.policy.per_request import PerRequestDraftLength
from vllm_bass.policy.policies import BassAlgorithm1, DraftLengthPolicy, FixedDraftLength


def make_policy(bass_config) -> DraftLengthPolicy:
    """The configured policy; `bass` and `fixed` are wrapped in `AutoOff` when auto_off is on
    (they always draft by themselves), `per_request` switches off within its optimisation."""
    name = bass_config.draft_length_policy
    k_max = bass_config.num_speculative_tokens
    if name == "per_request":
        return PerRequestDraftLength(bass_config)
    if name == "fixed":
        policy: DraftLengthPolicy = FixedDraftLength(k_max)
    elif name == "bass":
        policy = BassAlgorithm1(bass_config.initial_draft_length,
                                bass_config.draft_length_increment, k_max,
                                bass_config.draft_length_shrink_divisor)
    else:
        raise ValueError(f"unknown draft_length_policy {name!r}")
    if bass_config.auto_off:
        policy = AutoOff(policy, bass_config)
    return policy
