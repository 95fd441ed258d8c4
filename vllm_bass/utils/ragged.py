"""Index arithmetic of ragged layouts (items laid out group by group, group g holding
counts[g] of them): the draft tokens of a verification, the tokens a catch-up owes."""

from __future__ import annotations

import numpy as np


def ragged_rows(counts) -> tuple[np.ndarray, np.ndarray]:
    """(group of each item, its index within the group), both int64 [sum(counts)]."""
    counts = np.asarray(counts, dtype=np.int64)
    rows = np.repeat(np.arange(len(counts)), counts)
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    return rows, offsets
