"""The tree that travels to the GPU host stays small: session 37 committed the 45 MiB GPU
bundle (`.gpubundle/site.tar.zst`), and the fix that rewrote those commits was refused.
Caught here, before a commit lands, it costs one `git rm --cached`."""

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cpu]

REPO = Path(__file__).resolve().parents[1]
MAX_TRACKED_MIB = 12.0  # the brief's limit for the whole tree, model weights included
MAX_FILE_MIB = 8.0  # the embedded target's weights (5.5 MiB) are the largest legitimate file


def _require_git_checkout() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")


def _tracked_sizes() -> dict[str, int]:
    _require_git_checkout()
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    sizes = {}
    for name in out.stdout.decode().split("\0"):
        path = REPO / name
        if name and path.is_file():
            sizes[name] = path.stat().st_size
    return sizes


def test_no_tracked_file_is_a_bundle_or_a_blob():
    big = {n: round(s / 2**20, 1) for n, s in _tracked_sizes().items()
           if s > MAX_FILE_MIB * 2**20}
    assert not big, f"tracked files over {MAX_FILE_MIB} MiB (git rm --cached them): {big}"


def test_the_tracked_tree_stays_under_the_limit():
    total = sum(_tracked_sizes().values()) / 2**20
    assert total < MAX_TRACKED_MIB, f"tracked files hold {total:.1f} MiB"


def test_the_gpu_bundles_are_ignored():
    _require_git_checkout()
    for path in (".gpubundle/site.tar.zst", ".gpubundle-ray/site.tar.zst"):
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO)
        assert ignored.returncode == 0, f"{path} is not git-ignored"
