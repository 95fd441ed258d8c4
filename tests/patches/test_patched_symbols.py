"""Every patched vLLM symbol still has the signature the patch was written against; if vLLM
changes one, this fails and names it (then re-read the patch's module docstring)."""

import importlib

import pytest

from vllm_bass import patches

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]

CASES = [(module, symbol, expected)
         for module in patches.PATCH_MODULES
         for symbol, expected in importlib.import_module(module).PATCHED_SYMBOLS.items()]


@pytest.mark.parametrize("module,symbol,expected", CASES, ids=[c[1] for c in CASES])
def test_patched_symbol_signature_unchanged(module, symbol, expected):
    assert patches.current_signature(symbol) == expected, (
        f"{symbol} changed in this vLLM; review {module}")


def test_patches_apply_once_and_are_idempotent():
    import vllm.entrypoints.openai.api_server  # noqa: F401  (as the CLI does before plugins)

    from vllm_bass.plugin import register

    register()
    register()
    for _, symbol, _ in CASES:
        assert patches.is_patched(symbol)
        owner, name, raw = patches.resolve(symbol)
        func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        inner = func.__wrapped__
        assert not hasattr(inner, "__vllm_bass_original__"), f"{symbol} wrapped twice"
