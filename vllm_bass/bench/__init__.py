"""Benchmarks shipped with the package (`vllm-bass time-budget`). `utilisation`, `scoring`
and `sandbox` are pure (no vLLM); `time_budget` imports vLLM only in its engine process."""
