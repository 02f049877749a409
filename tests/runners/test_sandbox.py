"""The sandbox's promises, checked by attacking it (feasibility note §4, trimmed to ~30 s)."""

from __future__ import annotations

import os
import signal
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
    runtime_python,
)
from runners import cgroups as cg
from runners.bwrap import SLOT_UID_BASE, run_uid

PROJECT = str(Path(__file__).resolve().parents[2])
MiB = 1 << 20


def py(sandbox: Backend, code: str, *extra: str, **kw: object) -> SandboxResult:
    return sandbox.run(SandboxSpec(argv=[runtime_python(), "-c", code, *extra], **kw))  # type: ignore[arg-type]


def processes_with(marker: str) -> list[tuple[int, int]]:
    """(pid, real uid) of every host process whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if marker.encode() not in fh.read():
                    continue
            with open(f"/proc/{entry}/status") as fh:
                uid = next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        found.append((int(entry), uid))
    return found


# -- without a sandbox ----------------------------------------------------------------------


def test_unknown_backend_raises() -> None:
    with pytest.raises(SandboxUnavailable):
        get_backend("nonexistent")
    with pytest.raises(SandboxUnavailable):
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
    result = py(sandbox, "while True: pass", cpu_time_s=1, wall_timeout_s=5)
    assert result.verdict == "TLE", result
    assert result.signal == signal.SIGXCPU and not result.timed_out
    assert 0.8 < result.cpu_s and result.wall_s < 3.5


def test_ignoring_sigxcpu_is_still_tle(sandbox: Backend) -> None:
    code = "import signal; signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass"
    result = py(sandbox, code, cpu_time_s=1, wall_timeout_s=5)
    assert result.verdict == "TLE", result  # SIGKILL at the hard RLIMIT_CPU
    assert result.wall_s < 3.5


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


def test_children_share_one_memory_limit(sandbox: Backend) -> None:
    code = ("import os\n"
            "for _ in range(4):\n"
            "    if os.fork() == 0:\n"
            "        b = bytearray(100 << 20); b[::4096] = b'x' * len(b[::4096]); os._exit(0)\n"
            "print([os.wait()[1] for _ in range(4)])\n")
    result = py(sandbox, code, memory_bytes=192 * MiB, wall_timeout_s=10)
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
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(uid for _, uid in processes_with(marker))
            time.sleep(0.02)

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
    # bwrap itself and the payload, as seen from the host: never root (pitfalls #1, #2).
    assert seen and 0 not in seen, seen
    if os.geteuid() == 0:
        assert seen == {run_uid()}


def test_double_fork_daemon_is_reaped(sandbox: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = f"daemon-{uuid.uuid4().hex}"
    if os.geteuid() == 0:
        # A slot uid nobody else (e.g. another test run on this host) is using right now.
        busy = {_real_uid(pid) for pid in os.listdir("/proc") if pid.isdigit()}
        free = next(s for s in range(32) if SLOT_UID_BASE + s not in busy)
        monkeypatch.setenv("ROOFLINE_SANDBOX_SLOT", str(free))
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
        slot_procs = [pid for pid in os.listdir("/proc") if pid.isdigit()
                      and _real_uid(pid) == run_uid()]
        assert slot_procs == []


def _real_uid(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
    except (OSError, StopIteration):
        return None


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
