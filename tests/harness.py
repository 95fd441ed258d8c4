"""Test-side names for the isolated engine runner (see support.isolated_engine)."""

from support.isolated_engine import (  # noqa: F401
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
