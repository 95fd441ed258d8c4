"""README's options table states the defaults the code has (a user reads the table, the
engine runs the code): every BassConfig field with a default is in the table, with that
default; num_speculative_tokens per policy as `default_max_draft` says."""

import dataclasses
import re
from pathlib import Path

import pytest

from vllm_bass.config import BassConfig, default_max_draft

pytestmark = [pytest.mark.cpu]

README = Path(__file__).resolve().parents[1] / "README.md"


def _table() -> dict[str, str]:
    rows = {}
    for line in README.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        keys = re.findall(r"`([a-z_]+)`", cells[0].split("(")[0])
        defaults = [d.strip(" `") for d in cells[1].split(",")]
        for i, key in enumerate(keys):
            rows[key] = defaults[i] if len(defaults) == len(keys) else cells[1]
    return rows


def _as_readme(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_readme_defaults_match_the_code():
    table = _table()
    skip = {"draft_model", "extra", "acceptance_mode", "synthetic_acceptance_rates",
            "synthetic_acceptance_rate_groups", "num_speculative_tokens"}
    for f in dataclasses.fields(BassConfig):
        if f.name in skip:
            continue
        assert f.name in table, f"README options table lacks {f.name}"
        assert table[f.name] == _as_readme(f.default), (f.name, table[f.name], f.default)


def test_readme_draft_bound_per_policy():
    cell = _table()["num_speculative_tokens"]
    assert cell.startswith(str(default_max_draft("per_request")))
    assert f"`bass`: {default_max_draft('bass')}" in cell
    assert f"`fixed`: {default_max_draft('fixed')}" in cell
    assert BassConfig(draft_model="d").num_speculative_tokens == default_max_draft(
        BassConfig(draft_model="d").draft_length_policy)
