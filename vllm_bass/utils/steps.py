"""What kind of engine step a scheduler output describes (the runner skips the draft pass
only in pure-decode steps)."""

from __future__ import annotations


def decode_tokens(num_scheduled_tokens: dict[str, int],
                  scheduled_spec_decode_tokens: dict[str, list[int]],
                  req_ids) -> list[int] | None:
    """Each request's scheduled tokens when every request in `req_ids` runs exactly one new
    token plus its drafts (pure decoding, no prefill), else None."""
    scheduled = [num_scheduled_tokens.get(r, 0) for r in req_ids]
    # every scheduled request has >= 1 + its drafts: equal sums mean each is equal
    if not all(scheduled) or sum(scheduled) != len(scheduled) + sum(
            len(scheduled_spec_decode_tokens.get(r, ())) for r in req_ids):
        return None
    return scheduled
