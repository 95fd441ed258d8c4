"""Shared corpus definition for the embedded tiny model pair.

The corpus is the Python standard library source of the *running* interpreter
(``sysconfig.get_paths()["stdlib"]``).  Files are addressed by their path
relative to that directory with ``/`` separators (e.g. ``json/decoder.py``), so
the same split applies to any CPython version (3.11 here, 3.12 on the GPU
host): modules that only exist in one version simply fall on whichever side
their name says.

Used by ``train_tokenizer.py``, ``train_tiny_pair.py`` and
``eval_acceptance.py``; change the split only here.
"""

from __future__ import annotations

import os
import sysconfig
from typing import Iterable

# ---------------------------------------------------------------------------
# HELD-OUT SET (never used for tokenizer or model training; evaluation only).
# A path is held out when it lies inside one of these top-level packages or is
# one of these top-level modules.
# ---------------------------------------------------------------------------
HELDOUT_PACKAGES: tuple[str, ...] = ("json", "email", "asyncio")
HELDOUT_MODULES: tuple[str, ...] = ("textwrap.py", "argparse.py")

# Directories skipped anywhere in the tree (test suites, third-party packages,
# codec tables / doc dumps that are data rather than code, caches).
SKIP_DIR_NAMES: frozenset[str] = frozenset({
    "test", "tests", "idle_test", "site-packages", "dist-packages",
    "__pycache__", "encodings", "pydoc_data", "lib-dynload", "_bundled",
})
# Top-level directory prefixes skipped (``config-3.11-x86_64-linux-gnu``).
SKIP_TOP_PREFIXES: tuple[str, ...] = ("config-",)
# Files larger than this are skipped (none of the real code files are).
MAX_FILE_BYTES = 400_000

# Every VALIDATION_EVERY-th training file (in sorted order) is kept aside as a
# validation split for checkpoint selection during model training.  It is part
# of the training side of the held-out split (the tokenizer sees it).
VALIDATION_EVERY = 40


def stdlib_dir() -> str:
    return sysconfig.get_paths()["stdlib"]


def is_heldout(rel: str) -> bool:
    rel = rel.replace(os.sep, "/")
    top = rel.split("/", 1)[0]
    if "/" in rel and top in HELDOUT_PACKAGES:
        return True
    return rel in HELDOUT_MODULES


def list_stdlib_files(root: str | None = None) -> list[str]:
    """All corpus ``*.py`` files as sorted relative ``/``-separated paths."""
    root = root or stdlib_dir()
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        keep = []
        for d in dirnames:
            if d in SKIP_DIR_NAMES:
                continue
            if not rel_dir and d.startswith(SKIP_TOP_PREFIXES):
                continue
            keep.append(d)
        dirnames[:] = sorted(keep)
        for f in filenames:
            if not f.endswith(".py"):
                continue
            if f.startswith("test_") or f.startswith("_sysconfigdata"):
                continue
            full = os.path.join(dirpath, f)
            try:
                if os.path.getsize(full) > MAX_FILE_BYTES or os.path.islink(full):
                    continue
            except OSError:
                continue
            out.append(f"{rel_dir}/{f}" if rel_dir else f)
    return sorted(out)


def read_source(path: str) -> str:
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_files(root: str | None = None) -> dict[str, list[str]]:
    """Return ``{"train": [...], "val": [...], "heldout": [...]}`` (relative paths)."""
    files = list_stdlib_files(root)
    heldout = [f for f in files if is_heldout(f)]
    rest = [f for f in files if not is_heldout(f)]
    val = [f for i, f in enumerate(rest) if i % VALIDATION_EVERY == VALIDATION_EVERY // 2]
    vset = set(val)
    train = [f for f in rest if f not in vset]
    return {"train": train, "val": val, "heldout": heldout}


def load_texts(rels: Iterable[str], root: str | None = None) -> list[str]:
    root = root or stdlib_dir()
    return [read_source(os.path.join(root, r)) for r in rels]


if __name__ == "__main__":  # quick summary
    s = split_files()
    root = stdlib_dir()
    for k, v in s.items():
        n = sum(os.path.getsize(os.path.join(root, f)) for f in v)
        print(f"{k:8s} files={len(v):5d} bytes={n:,}")
