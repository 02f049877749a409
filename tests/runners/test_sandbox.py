"""The sandbox's promises, checked by attacking it (feasibility note §4, trimmed to ~30 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from runners import (
    Backend,
    SandboxResult,
    SandboxSpec,
    SandboxUnavailable,
    SpecError,
    get_backend,
    identity,
    janitor,
    runtime_python,
)
from runners import bwrap as bwrap_module
from runners import cgroups as cg
from runners.base import SandboxSetupError
from runners.bwrap import BwrapBackend
from runners.identity import SLOT_UID_BASE, processes_of_uid, run_uid
from runners.sandbox_env import runtime_venv_host_path
from tests.runners.conftest import unused_test_slot

PROJECT = str(Path(__file__).resolve().parents[2])
MiB = 1 << 20


def py(sandbox: Backend, code: str, *extra: str, **kw: object) -> SandboxResult:
    return sandbox.run(SandboxSpec(argv=[runtime_python(), "-c", code, *extra], **kw))  # type: ignore[arg-type]


def processes_with(marker: str) -> list[tuple[int, int]]:
    """(pid, real uid) of every host process whose command line contains `marker`."""
    return [(pid, uid) for pid, uid, _ in processes_with_argv0(marker)]


def processes_with_argv0(marker: str) -> list[tuple[int, int, str]]:
    """(pid, real uid, argv[0]) of every host process whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            if marker.encode() not in cmdline:
                continue
            with open(f"/proc/{entry}/status") as fh:
                uid = next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        found.append((int(entry), uid, cmdline.split(b"\0")[0].decode(errors="replace")))
    return found


# -- without a sandbox ----------------------------------------------------------------------


def test_unknown_backend_raises() -> None:
    with pytest.raises(SandboxUnavailable):
        get_backend("nonexistent")
    if not __import__("runners.docker", fromlist=["x"]).DockerBackend().available()[0]:
        with pytest.raises(SandboxUnavailable):  # no engine here: refused, never a fallback
            get_backend("docker")


def test_spec_refuses_network_and_escaping_file_names() -> None:
    with pytest.raises(SpecError):
        SandboxSpec(argv=["x"], network=True)
    for bad in ("../x", "/etc/passwd", "a/../../b", "", "a//b"):
        with pytest.raises(SpecError):
            SandboxSpec(argv=["x"], files={bad: b""})


@pytest.mark.parametrize(
    ("fields", "verdict"),
    [
        ({}, "OK"),
        ({"exit_code": 1}, "RE"),
        ({"exit_code": None, "signal": signal.SIGSEGV}, "RE"),
        ({"exit_code": None, "signal": signal.SIGXCPU}, "TLE"),
        ({"exit_code": None, "signal": signal.SIGKILL, "timed_out": True}, "TLE"),
        ({"exit_code": 0, "oom_killed": True}, "MLE"),
        ({"timed_out": True, "oom_killed": True}, "TLE"),
        ({"exit_code": None, "signal": signal.SIGKILL, "output_truncated": True,
          "timed_out": True}, "OLE"),
    ],
)
def test_verdict_precedence(fields: dict[str, object], verdict: str) -> None:
    base: dict[str, object] = dict(
        exit_code=0, signal=None, stdout=b"", stderr=b"", wall_s=0.0, cpu_s=0.0, timed_out=False,
        output_truncated=False, oom_killed=False, backend="x", memory_isolation="cgroup")
    assert SandboxResult(**{**base, **fields}).verdict == verdict  # type: ignore[arg-type]


# -- through the sandbox --------------------------------------------------------------------


def test_python_pass(sandbox: Backend) -> None:
    result = sandbox.run(SandboxSpec(argv=[runtime_python(), "-c", "pass"]))
    assert result.verdict == "OK", result
    assert result.backend == sandbox.name


def test_hello_world_with_files(sandbox: Backend) -> None:
    result = sandbox.run(SandboxSpec(
        argv=[runtime_python(), "main.py"],
        files={"main.py": b"import os, pkg.data as d\nprint('hello', os.getcwd(), d.X)\n",
               "pkg/__init__.py": b"", "pkg/data.py": b"X = 42\n"}))
    assert result.verdict == "OK", result
    assert result.stdout == b"hello /sandbox 42\n"
    assert result.exit_code == 0 and result.signal is None


def test_stdin_round_trip(sandbox: Backend) -> None:
    data = os.urandom(300_000)  # more than a pipe buffer, so feeding must interleave reading
    result = py(sandbox, "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read()[::-1])",
                stdin=data)
    assert result.verdict == "OK", result
    assert result.stdout == data[::-1]


def test_env_has_no_host_secrets(sandbox: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", "supersecret-test-value")
    code = ("import os, glob\n"
            "print(sorted(os.environ))\n"
            "for p in glob.glob('/proc/[0-9]*/environ'):\n"
            "    print(open(p, 'rb').read())\n")
    result = py(sandbox, code, env={"EXTRA": "1"})
    assert result.verdict == "OK", result
    assert b"supersecret" not in result.stdout and b"DJANGO" not in result.stdout
    names = eval(result.stdout.splitlines()[0])  # noqa: S307 - our own repr of a list of str
    assert "EXTRA" in names and "PATH" in names


def test_host_files_invisible(sandbox: Backend) -> None:
    code = ("import os, sys\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n"
            "        open(p, 'rb').read() if os.path.isfile(p) else os.listdir(p)\n"
            "        print(p, 'READ')\n"
            "    except OSError as e:\n"
            "        print(p, type(e).__name__)\n")
    paths = ["/etc/shadow", "/etc/passwd", "/root", "/home", PROJECT, PROJECT + "/pyproject.toml",
             "/sys/class/net", "/var/run"]
    result = py(sandbox, code, *paths)
    assert result.verdict == "OK", result
    assert b"READ" not in result.stdout, result.stdout.decode()
    assert len(result.stdout.splitlines()) == len(paths)


def test_cannot_write_outside_tmp(sandbox: Backend) -> None:
    code = ("import sys\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n"
            "        open(p, 'w').write('x'); print(p, 'WROTE')\n"
            "    except OSError as e:\n"
            "        print(p, e.errno)\n")
    result = py(sandbox, code, "/usr/pwned", "/sandbox/pwned", "/pwned", "/etc/pwned",
                "/opt/venv/pwned", "/tmp/ok", files={"main.py": b""})
    assert result.verdict == "OK", result
    lines = result.stdout.decode().splitlines()
    assert lines[-1] == "/tmp/ok WROTE"
    assert all("WROTE" not in line for line in lines[:-1]), lines


def test_network_is_unreachable(sandbox: Backend) -> None:
    code = ("import socket\n"
            "for fam, kind in [(socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM),\n"
            "                  (socket.AF_INET6, socket.SOCK_STREAM), (socket.AF_NETLINK, socket.SOCK_RAW)]:\n"
            "    try:\n"
            "        s = socket.socket(fam, kind); s.settimeout(1); s.connect(('127.0.0.1', 6379))\n"
            "        print('CONNECTED')\n"
            "    except OSError as e:\n"
            "        print(e.errno)\n"
            "a, b = socket.socketpair(); a.send(b'u'); print(b.recv(1))\n")
    result = py(sandbox, code)
    assert result.verdict == "OK", result
    assert b"CONNECTED" not in result.stdout
    assert result.stdout.endswith(b"b'u'\n")  # AF_UNIX stays usable (multiprocessing needs it)


def test_dangerous_syscalls_denied(sandbox: Backend) -> None:
    code = ("import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.unshare(0x10000000), ctypes.get_errno())\n"  # CLONE_NEWUSER
            "print(libc.ptrace(0, 0, 0, 0), ctypes.get_errno())\n")  # PTRACE_TRACEME
    result = py(sandbox, code)
    assert result.verdict == "OK", result
    assert result.stdout.split() == [b"-1", b"1", b"-1", b"1"]  # EPERM


def test_cpu_spin_is_tle(sandbox: Backend) -> None:
    # A generous wall limit: on a loaded 2-core machine 1 s of CPU can take 3 s of wall time,
    # and it is RLIMIT_CPU that must end this run, not the wall clock.
    result = py(sandbox, "while True: pass", cpu_time_s=1, wall_timeout_s=10)
    assert result.verdict == "TLE", result
    assert result.signal == signal.SIGXCPU and not result.timed_out
    assert 0.8 < result.cpu_s < 2.5 and result.wall_s < 9


def test_ignoring_sigxcpu_is_still_tle(sandbox: Backend) -> None:
    code = "import signal; signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass"
    result = py(sandbox, code, cpu_time_s=1, wall_timeout_s=10)
    # SIGKILL at the hard RLIMIT_CPU (soft + 1 s), recognised from the measured CPU time.
    assert result.verdict == "TLE" and result.signal == signal.SIGKILL, result
    assert result.cpu_s >= 1.5 and result.wall_s < 9  # not the 10 s wall clock


def test_sleep_is_tle_at_wall_limit(sandbox: Backend) -> None:
    result = py(sandbox, "import time; time.sleep(10**6)", wall_timeout_s=1.0)
    assert result.verdict == "TLE" and result.timed_out, result
    assert 0.95 <= result.wall_s < 2.5


def test_big_allocation_is_refused(sandbox: Backend) -> None:
    touch = "b = bytearray({n} << 20); b[::4096] = b'x' * len(b[::4096])"
    # Beyond RLIMIT_AS (2 x memory): refused outright, with or without a cgroup.
    for code in ("b = bytearray(30 << 30)", touch.format(n=300)):
        result = py(sandbox, code, memory_bytes=128 * MiB)
        assert result.verdict != "OK", result
    # Touched memory between the limit and RLIMIT_AS: only a memory cgroup catches it (the
    # "rlimit-only" mode bounds per process at 2 x memory, by design).
    result = py(sandbox, touch.format(n=200), memory_bytes=128 * MiB)
    if result.memory_isolation == "cgroup":
        assert result.verdict == "MLE" and result.oom_killed, result


# Four children each fill 100 MiB and hold it until every one has filled or died: any two
# together are over the 192 MiB limit, however the scheduler orders them. (Children that exit
# at once can run one after another on a busy machine and never overlap: CI saw that pass OK.)
SHARED_LIMIT_CHILDREN = """
import os, select
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
pids = {}
for i in range(4):
    pid = os.fork()
    if pid == 0:
        os.close(ready_r); os.close(go_w)
        b = bytearray(100 << 20); b[::4096] = b'x' * len(b[::4096])
        os.write(ready_w, bytes([i]))
        os.read(go_r, 1)  # hold the memory until the parent lets go
        os._exit(0)
    pids[pid] = i
os.close(ready_w); os.close(go_r)
ready, dead = set(), {}
while len(ready | set(dead)) < 4:
    if select.select([ready_r], [], [], 0.05)[0]:
        ready.update(os.read(ready_r, 4))
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid:
        dead[pids[pid]] = status
os.close(go_w)
while len(dead) < 4:
    pid, status = os.wait()
    dead[pids[pid]] = status
print([dead[i] for i in range(4)])
"""


def test_children_share_one_memory_limit(sandbox: Backend) -> None:
    result = py(sandbox, SHARED_LIMIT_CHILDREN, memory_bytes=192 * MiB, wall_timeout_s=10)
    if result.memory_isolation != "cgroup":
        pytest.skip("no memory cgroup here: children are bounded only per process")
    # The parent may exit 0 although its children were OOM-killed (pitfall #11).
    assert result.verdict == "MLE" and result.oom_killed, result


def test_fork_bomb_is_contained(sandbox: Backend) -> None:
    marker = f"forkbomb-{uuid.uuid4().hex}"
    code = ("import os, time\n"
            "n = 0\n"
            "try:\n"
            "    while True:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(30); os._exit(0)\n"
            "        n += 1\n"
            "except OSError as e:\n"
            "    print(n, e.errno)\n")
    start = time.monotonic()
    result = py(sandbox, code, marker, wall_timeout_s=8)
    assert time.monotonic() - start < 5, result
    assert result.stdout.split()[-1:] == [b"11"], result  # EAGAIN: pids capped
    assert processes_with(marker) == []


def test_output_flood_is_ole_with_exact_cap(sandbox: Backend) -> None:
    result = py(sandbox, "import sys; sys.stdout.write('x' * 10_000_000)")
    assert result.verdict == "OLE" and result.output_truncated, result
    assert len(result.stdout) == 1 * MiB and set(result.stdout) == {ord("x")}
    assert result.wall_s < 3


def test_output_cap_is_shared_by_stdout_and_stderr(sandbox: Backend) -> None:
    code = "import sys; sys.stderr.write('e' * 4000); sys.stderr.flush(); sys.stdout.write('o' * 9000)"
    result = py(sandbox, code, output_limit_bytes=10_000)
    assert result.verdict == "OLE", result
    assert len(result.stdout) + len(result.stderr) == 10_000


def test_uid_is_unprivileged_inside_and_outside(sandbox: Backend) -> None:
    marker = f"uidcheck-{uuid.uuid4().hex}"
    seen: set[tuple[str, int]] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update((os.path.basename(argv0), uid)
                        for _, uid, argv0 in processes_with_argv0(marker))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = py(sandbox, "import os, time; print(os.getuid(), os.geteuid()); time.sleep(1)",
                    marker)
    finally:
        done.set()
        watcher.join()
    assert result.verdict == "OK", result
    assert b"0" not in result.stdout.split()
    # bwrap and the payload, as seen from the host: never root (pitfalls #1, #2). setpriv is
    # root for the microseconds before it drops to the slot uid and execs the next program.
    confined = {(name, uid) for name, uid in seen if name != "setpriv"}
    assert any(name == "bwrap" for name, _ in confined), seen
    assert all(uid != 0 for _, uid in confined), seen
    if os.geteuid() == 0:
        assert {uid for _, uid in confined} == {run_uid()}


def test_double_fork_daemon_is_reaped(sandbox: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = f"daemon-{uuid.uuid4().hex}"
    if os.geteuid() == 0:
        # A slot uid nobody else (e.g. another test run on this host) is using right now.
        monkeypatch.setenv("ROOFLINE_SANDBOX_SLOT", str(unused_test_slot()))
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(60)\n"
            "    os._exit(0)\n"
            "print('parent done')\n")
    result = py(sandbox, code, marker)
    assert result.verdict == "OK" and result.stdout == b"parent done\n", result
    assert result.wall_s < 3
    assert processes_with(marker) == []
    if os.geteuid() == 0:
        assert processes_of_uid(run_uid()) == []


def test_gpu_is_refused_for_now(sandbox: Backend) -> None:
    with pytest.raises(SandboxUnavailable):
        sandbox.run(SandboxSpec(argv=[runtime_python(), "-c", "pass"], gpu=0))


def test_janitor_removes_stale_cgroups(sandbox: Backend) -> None:
    setup = cg.detect()
    if setup.version == "none":
        pytest.skip(f"no cgroups: {setup.reason}")
    # An owner tag whose pid/start time cannot match a live process: a crashed worker's leftover.
    stale = [os.path.join(parent, f"{cg.PREFIX}999999999.1-0") for parent in setup.parents.values()]
    for path in stale:
        os.mkdir(path)
    assert cg.janitor() >= len(stale)
    assert not any(os.path.exists(path) for path in stale)


# -- the hardened spawn path ----------------------------------------------------------------


def test_bwrap_setup_failure_is_an_infrastructure_error(sandbox: Backend, tmp_path: Path) -> None:
    """An unreadable bind source (a venv under a 0700 dir, pitfall #12) fails inside bwrap's
    setup: that is SandboxSetupError, never a student's runtime error."""
    if not isinstance(sandbox, BwrapBackend) or os.geteuid() != 0:
        pytest.skip("needs the bwrap backend dropping to a slot uid")
    venv = tmp_path / "private" / "venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(os.path.realpath(os.path.join(runtime_venv_host_path(), "bin", "python")),
               venv / "bin" / "python")
    os.chmod(tmp_path / "private", 0o700)
    broken = BwrapBackend(venv=str(venv))
    with pytest.raises(SandboxSetupError) as info:
        broken.run(SandboxSpec(argv=[runtime_python(), "-c", "print('ran')"]))
    assert "bwrap:" in str(info.value) and b"ran" not in info.value.stderr
    ok, reason = broken.available()
    assert not ok and "bwrap:" in reason


def test_student_printing_a_bwrap_error_is_still_the_students(sandbox: Backend) -> None:
    code = "import sys; sys.stderr.write('bwrap: Can\\'t find source path /x: Permission denied\\n'); sys.exit(1)"
    result = py(sandbox, code)
    assert result.verdict == "RE" and result.exit_code == 1, result


def test_gate_fails_closed_when_the_worker_dies_mid_setup(
        sandbox: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the worker never releases the gate (it died between spawning bwrap and joining the
    cgroup), bwrap reads an empty seccomp filter and exits: the payload never runs."""
    if not isinstance(sandbox, BwrapBackend):
        pytest.skip("bwrap-specific")

    def die(self: cg.LaneCgroup, pid: int) -> None:
        raise OSError("simulated worker failure before the gate")

    monkeypatch.setattr(cg.LaneCgroup, "add", die)
    if cg.detect().version == "none":
        pytest.skip("no cgroup to fail joining")
    with pytest.raises(SandboxSetupError) as info:
        sandbox.run(SandboxSpec(argv=[runtime_python(), "-c", "print('payload ran')"]))
    assert b"payload ran" not in info.value.stderr
    assert "seccomp" in str(info.value).lower()


def test_spawn_is_fork_safe_and_threads_get_their_own_lanes(
        sandbox: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """No preexec_fn / user= (Python in a forked child deadlocks multi-threaded callers, and
    user= turns vfork into fork); concurrent runs from threads each get a cgroup of their own."""
    if not isinstance(sandbox, BwrapBackend):
        pytest.skip("bwrap-specific")
    real_popen = subprocess.Popen
    kwargs_seen: list[dict[str, object]] = []

    def spy(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        kwargs_seen.append(kwargs)
        return real_popen(*args, **kwargs)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(bwrap_module.subprocess, "Popen", spy)
    # Which cgroup each run got, seen from the host: the payload's own view of /proc/self/cgroup
    # is "/" or the lane's path depending on whether bwrap unshared its cgroup namespace before
    # or after joining the lane, so it cannot tell two lanes apart.
    lane_names: list[str] = []
    real_lane_cgroup = BwrapBackend._lane_cgroup

    def record(self: BwrapBackend, *args: object, **kwargs: object) -> object:
        lane = real_lane_cgroup(self, *args, **kwargs)  # type: ignore[arg-type]
        lane_names.append(lane.name)
        return lane

    monkeypatch.setattr(BwrapBackend, "_lane_cgroup", record)
    code = ("import os, time; print(open('/proc/self/cgroup').read())\n"
            "print('netns', os.readlink('/proc/self/ns/net')); time.sleep(0.3)")
    results: list[SandboxResult] = []
    stop = threading.Event()

    def busy() -> None:  # a live-server-like thread holding locks and allocating meanwhile
        while not stop.is_set():
            with threading.Lock():
                bytearray(1 << 16)

    noise = threading.Thread(target=busy)
    noise.start()
    try:
        threads = [threading.Thread(target=lambda: results.append(py(sandbox, code)))
                   for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        noise.join()
    assert len(results) == 3 and all(r.verdict == "OK" for r in results), results
    for kw in kwargs_seen:
        assert not {"preexec_fn", "user", "group", "extra_groups"} & set(kw), kw
    if cg.detect().version != "none":
        assert len(set(lane_names)) == 3, lane_names
        for r in results:  # and each payload sits in one of them (seen from its namespace)
            line = next(ln for ln in r.stdout.decode().splitlines() if ":memory:" in ln)
            assert line.endswith(":/") or line.rsplit("/", 1)[1] in lane_names, line
    # Each lane has a network namespace of its own, and none is the host's.
    netns = {next(ln for ln in r.stdout.decode().splitlines() if ln.startswith("netns"))
             for r in results}
    assert len(netns) == 3 and f"netns {os.readlink('/proc/self/ns/net')}" not in netns, netns


def test_rlimit_only_mode_clamps_and_says_so(sandbox: Backend, free_slot: int,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Without cgroups (pitfall #10): pids x RLIMIT_AS is kept within the budget, and the
    result says the memory limit is per process only. On a slot uid of its own: RLIMIT_NPROC
    counts every task of the uid, so a run of another test process on the same uid that ended
    after this run's count would leave it room for more processes (it once forked 12)."""
    if not isinstance(sandbox, BwrapBackend):
        pytest.skip("bwrap-specific")
    monkeypatch.setattr(bwrap_module.cgroups, "detect", lambda: cg.CgroupSetup("none"))
    monkeypatch.setenv("ROOFLINE_SANDBOX_RLIMIT_BUDGET", str(1 << 30))
    code = ("import os, time\n"
            "n = 0\n"
            "try:\n"
            "    while n < 50:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(5); os._exit(0)\n"
            "        n += 1\n"
            "except OSError as e:\n"
            "    print(n, e.errno)\n")
    # 128 MiB of memory -> RLIMIT_AS 256 MiB -> a 1 GiB budget allows 4 processes.
    result = py(sandbox, code, memory_bytes=128 * MiB, pids=64)
    assert result.memory_isolation == "rlimit-only", result
    assert result.verdict == "OK", result
    forked, err = result.stdout.split()
    assert int(forked) <= 4 and int(err) == 11, result.stdout


def test_lane_cgroup_is_reused_and_oom_is_per_run(sandbox: Backend) -> None:
    """The lane's cgroup outlives a run; its cumulative oom_kill counter must not turn the next
    run into an MLE."""
    if not isinstance(sandbox, BwrapBackend) or cg.detect().version == "none":
        pytest.skip("needs bwrap with cgroups")
    hog = "b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096])"
    first = py(sandbox, hog, memory_bytes=128 * MiB)
    assert first.verdict == "MLE", first
    lanes = cg.lane_names()
    second = py(sandbox, "print('small')", memory_bytes=128 * MiB)
    assert second.verdict == "OK" and not second.oom_killed, second
    # The same hog fits once the lane's limit is rewritten in place; the payload's own view of
    # /proc/self/cgroup cannot show this (it depends on whether bwrap cloned its PID 1, with a
    # new cgroup namespace, before or after the outer process joined the lane).
    third = py(sandbox, hog, memory_bytes=384 * MiB)
    assert third.verdict == "OK" and not third.oom_killed, third
    assert cg.lane_names() == lanes  # same lanes, same cgroups: nothing made afresh
    assert [p for p in cg.leftovers() if cg.owner_tag() in p] == []


def test_cpu_time_is_measured(sandbox: Backend) -> None:
    result = py(sandbox, "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass")
    assert result.verdict == "OK", result
    assert 0.25 < result.cpu_s < 2.0, result


def test_janitor_kills_leftovers_of_an_explicit_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """At worker start, with $ROOFLINE_SANDBOX_SLOT set, whatever still runs as that slot's uid
    (left by a predecessor killed mid-run) is killed."""
    if os.geteuid() != 0:
        pytest.skip("slot uids exist only for a root worker")
    free = unused_test_slot()
    monkeypatch.setenv("ROOFLINE_SANDBOX_SLOT", str(free))
    uid = SLOT_UID_BASE + free
    stray = subprocess.Popen(["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                              "--clear-groups", "/bin/sleep", "60"])
    try:
        deadline = time.monotonic() + 5
        while stray.pid not in processes_of_uid(uid) and time.monotonic() < deadline:
            time.sleep(0.01)
        done = janitor.janitor()
        assert done["processes"] >= 1
        assert stray.wait(timeout=5) == -signal.SIGKILL
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()


def test_fast_spawn_restores_the_worker_thread(sandbox: Backend) -> None:
    """Starting bwrap directly gives the spawning thread the slot identity for a moment: after
    runs from a worker thread, that thread and the main thread are root again, in the host's
    network namespace, with their groups, and the process is still dumpable."""
    if not isinstance(sandbox, BwrapBackend) or not identity.fast_spawn_available():
        pytest.skip("the fast spawn path is not used here")
    before = (os.getresuid(), os.getresgid(), os.getgroups(), os.readlink("/proc/self/ns/net"))
    seen: list[tuple[object, ...]] = []

    def worker() -> None:
        for _ in range(2):
            assert py(sandbox, "print(1)").verdict == "OK"
        seen.append((os.getresuid(), os.getresgid(), os.getgroups(),
                     os.readlink("/proc/thread-self/ns/net")))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [before]
    assert (os.getresuid(), os.getresgid(), os.getgroups(),
            os.readlink("/proc/self/ns/net")) == before
    import ctypes
    assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 1  # PR_GET_DUMPABLE


def test_exec_chain_fallback_still_confines(sandbox: Backend,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """$ROOFLINE_SANDBOX_EXEC_CHAIN=1 (or an unknown architecture): nsenter/setpriv + prlimit
    exec'd in front of bwrap instead. Same identity, same limits."""
    if not isinstance(sandbox, BwrapBackend):
        pytest.skip("bwrap-specific")
    monkeypatch.setenv("ROOFLINE_SANDBOX_EXEC_CHAIN", "1")
    assert not identity.fast_spawn_available()
    code = ("import os, resource\n"
            "print(os.getuid(), resource.getrlimit(resource.RLIMIT_CPU),\n"
            "      resource.getrlimit(resource.RLIMIT_NOFILE))\n")
    result = py(sandbox, code, cpu_time_s=2, nofile=77)
    assert result.verdict == "OK", result
    assert result.stdout == b"1000 (2, 3) (77, 77)\n"
    assert py(sandbox, "while True: pass", cpu_time_s=1, wall_timeout_s=10).verdict == "TLE"


def test_bwrap_never_starts_as_root_even_if_the_drop_fails(
        sandbox: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence in depth for pitfall #1: if the spawning thread kept root (simulated by a
    no-op identity switch), bwrap is caught at the gate and the payload never runs."""
    if (not isinstance(sandbox, BwrapBackend) or os.geteuid() != 0
            or not identity.fast_spawn_available()):
        pytest.skip("needs the fast spawn path as root")
    import contextlib as cl

    monkeypatch.setattr(identity, "thread_identity",
                        lambda *a, **k: cl.nullcontext())
    with pytest.raises(SandboxUnavailable) as info:
        py(sandbox, "print('payload ran')")
    assert "wrong identity" in str(info.value)
