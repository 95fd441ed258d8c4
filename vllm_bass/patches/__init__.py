"""Wrappers of vLLM functions, one module per symbol, installed at plugin load; and
`registry`, the one list of every vLLM surface vllm-bass touches (these wraps, the methods
the worker side overrides, class swaps, private attributes, attached attributes, kernel
flags, process-wide replacements), each with why and when it can go.

Each wrapper module declares `PATCHED_SYMBOLS` (symbol -> the signature it was written for);
`tests/patches/test_registry.py` fails the moment vLLM changes any registered surface.
Patches are idempotent: applying twice wraps once.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

_MARK = "__vllm_bass_original__"

PATCH_MODULES = (
    "vllm_bass.patches.engine_args_cli",
    "vllm_bass.patches.engine_args_config",
    "vllm_bass.patches.stat_logger_manager",
    "vllm_bass.patches.api_server_shutdown",
    "vllm_bass.patches.engine_core_measured_costs",
    "vllm_bass.patches.engine_core_burst_window",
)


def resolve(dotted: str) -> tuple[Any, str, Any]:
    """'pkg.mod.Class.attr' -> (owner object, attribute name, raw attribute from __dict__)."""
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:-1]:
            obj = getattr(obj, name)
        raw = obj.__dict__[parts[-1]] if isinstance(obj, type) else getattr(obj, parts[-1])
        return obj, parts[-1], raw
    raise ImportError(f"cannot resolve {dotted}")


def unwrap(raw: Any) -> Callable:
    func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    return getattr(func, _MARK, func)


def current_signature(dotted: str) -> str:
    """Signature of the ORIGINAL vLLM symbol (through our wrapper if applied)."""
    _, _, raw = resolve(dotted)
    return str(inspect.signature(unwrap(raw)))


def is_patched(dotted: str) -> bool:
    _, _, raw = resolve(dotted)
    func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    return hasattr(func, _MARK)


def wrap_once(dotted: str, make_wrapper: Callable[[Callable], Callable]) -> bool:
    """`wrap` unless `dotted` is wrapped already; False then, and where this vLLM lacks it
    (the registry test names that change)."""
    try:
        if is_patched(dotted):
            return False
    except (ImportError, AttributeError, KeyError):
        return False
    wrap(dotted, make_wrapper)
    return True


def wrap(dotted: str, make_wrapper: Callable[[Callable], Callable]) -> None:
    """Replace `dotted` by make_wrapper(original), keeping static/class-method kind; idempotent."""
    owner, name, raw = resolve(dotted)
    kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
    func = raw.__func__ if kind else raw
    if hasattr(func, _MARK):
        return
    wrapper = make_wrapper(func)
    wrapper.__wrapped__ = func
    setattr(wrapper, _MARK, func)
    wrapper.__name__ = getattr(func, "__name__", name)
    wrapper.__doc__ = getattr(func, "__doc__", None)
    setattr(owner, name, kind(wrapper) if kind else wrapper)


def apply_all() -> None:
    for module in PATCH_MODULES:
        importlib.import_module(module).apply()
