"""One list of environment variables (`vllm_bass.envs`): every `VLLM_BASS_*` name the package
mentions is declared there, every declared one is used and in README's table, and only
`envs` reads them from the environment (the pure policy wing gets the environment passed in
by the scheduler)."""

import ast
import re
from pathlib import Path

import pytest

from vllm_bass import envs

pytestmark = [pytest.mark.cpu]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vllm_bass"
NAME = re.compile(r"VLLM_BASS_[A-Z0-9_]+[A-Z0-9]")


def _mentions() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "envs.py":
            continue
        for name in NAME.findall(path.read_text()):
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_variable_is_declared_and_every_declared_one_used():
    mentions = _mentions()
    undeclared = sorted(set(mentions) - set(envs.ENVIRONMENT_VARIABLES))
    assert not undeclared, {n: mentions[n] for n in undeclared}
    unused = sorted(set(envs.ENVIRONMENT_VARIABLES) - set(mentions))
    assert not unused, f"declared in envs.py but read nowhere: {unused}"


def test_readme_lists_every_variable():
    readme = (ROOT / "README.md").read_text()
    missing = [n for n in envs.ENVIRONMENT_VARIABLES if f"`{n}" not in readme]
    assert not missing, f"README's environment table lacks {missing}"


def test_only_envs_reads_the_environment():
    """No `os.environ` / `os.getenv` read of our variables in the package outside envs.py
    (passing the whole environment on is fine: the scheduler hands it to the pure policy
    wing's test aid)."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "envs.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                target = ast.unparse(node.func)
                if target in ("os.environ.get", "os.getenv", "os.environ.setdefault") and (
                        _ours(node.args[0]) if node.args else True):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {target}")
            if (isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ"
                    and _ours(node.slice)):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} os.environ[...]")
    assert not offenders, offenders


def _ours(key) -> bool:
    """A key that is (or may be) one of ours: other tools' variables (TRITON_INTERPRET) are
    theirs to document."""
    return not isinstance(key, ast.Constant) or str(key.value).startswith("VLLM_BASS_")


def test_accessors(monkeypatch):
    monkeypatch.delenv("VLLM_BASS_SYNC_DEBUG_AFTER", raising=False)
    assert envs.integer("VLLM_BASS_SYNC_DEBUG_AFTER") == 50  # the declared default
    monkeypatch.setenv("VLLM_BASS_SYNC_DEBUG_AFTER", "x")
    with pytest.raises(ValueError, match="VLLM_BASS_SYNC_DEBUG_AFTER"):
        envs.integer("VLLM_BASS_SYNC_DEBUG_AFTER")
    monkeypatch.setenv("VLLM_BASS_DISABLE", "yes")
    assert envs.flag("VLLM_BASS_DISABLE")
    with pytest.raises(KeyError):
        envs.get("VLLM_BASS_NOT_A_VARIABLE")
