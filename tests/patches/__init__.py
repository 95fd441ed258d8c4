

def assert_runs_in_a_fresh_process(script: str) -> None:
    """`script` (ends by printing OK) in a new interpreter: a patch applied there cannot leak
    into this test process's vLLM."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stderr[-3000:]
