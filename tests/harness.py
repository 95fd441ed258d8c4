"""Test-side names for the isolated engine runner (see vllm_bass.utils.isolated_engine)."""

from vllm_bass.utils.isolated_engine import (  # noqa: F401
    DRAFT,
    REPO,
    TARGET,
    base_engine_kwargs,
    bass_spec,
    engine_env,
    metric,
    on_gpu,
    run_engine,
)
