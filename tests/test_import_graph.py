"""The package's module-level import graph has no loop (functions may import lazily: vLLM's
process start-up order needs some of that), and no pure wing imports vLLM (the policy wing
has its own, stricter test: tests/policy/test_pure.py)."""

import ast
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cpu]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vllm_bass"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def import_graph() -> dict[str, set[str]]:
    """module -> the vllm_bass modules it imports at module level."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        edges = set()
        for node in ast.parse(path.read_text()).body:  # module level only
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.startswith("vllm_bass")}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "vllm_bass"):
                edges.add(node.module)
                edges |= {f"{node.module}.{a.name}" for a in node.names
                          if _exists(f"{node.module}.{a.name}")}
        graph[_module_name(path)] = {e for e in edges if _exists(e)}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_loop():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("wing", ["policy", "sampling", "kernels", "bench"])
def test_pure_wings_import_no_vllm_at_module_level(wing):
    for path in (PACKAGE / wing).rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "vllm" or n.startswith("vllm.") for n in names), (
                f"{path.relative_to(ROOT)} imports {names}")
