"""Draft-length policies, acceptance estimates, auto-off and the step-cost model: pure
(numpy, no vLLM import; tests/policy/test_pure.py holds it so), used by the scheduler."""
