"""Hostile submissions: every kind of attack we know of, against every available backend.

Each test attacks once and asserts three things:
1. the verdict, and the limit that produced it;
2. the host is unaffected: no process of the slot uid left, no busy or stray cgroup and no job
   dir of ours, nothing reached the listeners the test opened, no host file changed;
3. the NEXT submission grades normally: the `host_unaffected` fixture grades the Q41 reference
   through graders.grade_answer after every test and expects 1.0.

Limits are small (1 s CPU, 256 MiB) so the whole suite stays well under 90 s on 2 cores. Timing
assertions are loose on purpose: the CI machine has 2 cores and often other work.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import platform
import re
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import graders
from exercises import mutants, registry
from graders.base import GradeResult, InvalidAnswer
from runners import Backend, SandboxResult, SandboxSpec, runtime_python
from runners import cgroups as cg
from runners.bwrap import BwrapBackend
from runners.identity import processes_of_uid, run_uid
from runners.janitor import leftover_job_dirs

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
SMALL: dict[str, Any] = {"cpu_time_s": 1, "wall_timeout_s": 5, "memory_bytes": 256 * MiB,
                         "pids": 32}


# -- helpers ----------------------------------------------------------------------------------


def run(backend: Backend, code: str, *args: str, **limits: Any) -> SandboxResult:
    spec = SandboxSpec(argv=[runtime_python(), "-c", code, *args], **{**SMALL, **limits})
    return backend.run(spec)


def lines(result: SandboxResult) -> list[str]:
    return result.stdout.decode(errors="replace").splitlines()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Q41:
    """The stop_strings_stream code part, graded through the public grader entry point."""

    def __init__(self) -> None:
        # registry.load (not get): one exercise, unaffected by any other exercise's state.
        self.spec = registry.load(registry.EXERCISES_DIR / "stop_strings_stream")
        self.params = registry.params_for(self.spec, registry.CANONICAL_VARIANT)
        self.reference = (self.spec.path / "code" / "reference.py").read_text()

    def grade(self, backend: Backend, source: str) -> GradeResult:
        os.environ["ROOFLINE_SANDBOX_BACKEND"] = backend.name
        return graders.grade_answer(self.spec, "streamer", source, self.params)


@pytest.fixture(scope="module")
def q41() -> Iterator[Q41]:
    saved = os.environ.get("ROOFLINE_SANDBOX_BACKEND")
    yield Q41()
    if saved is None:
        os.environ.pop("ROOFLINE_SANDBOX_BACKEND", None)
    else:
        os.environ["ROOFLINE_SANDBOX_BACKEND"] = saved


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def ours_or_orphaned(pid: int) -> bool:
    """A process of the slot uid that our runs could have left: one of our descendants (we are
    the subreaper, so every orphan of our runs is re-parented to us), or one that escaped to
    init. A concurrent test session that drew the same slot has its own process tree."""
    me, seen = os.getpid(), 0
    parent = _parent(pid)
    if parent in (0, 1):
        return True
    while parent > 1 and seen < 64:
        if parent == me:
            return True
        parent, seen = _parent(parent), seen + 1
    return False


def leftovers(backend: Backend) -> list[str]:
    """What a finished run must not leave on the host."""
    if isinstance(backend, BwrapBackend):
        tag = cg.owner_tag()
        found = [f"process {pid} of slot uid {run_uid()}" for pid in processes_of_uid(run_uid())
                 if ours_or_orphaned(pid)]
        found += [f"cgroup {p}" for p in cg.leftovers() if tag in p]
        found += [f"job dir {d}" for d in leftover_job_dirs() if tag in d]
        return found
    own = getattr(backend, "leftovers", None)  # e.g. containers/volumes of the docker backend
    return list(own()) if callable(own) else []


@pytest.fixture(autouse=True)
def host_unaffected(hostile_backend: Backend, q41: Q41) -> Iterator[None]:
    assert leftovers(hostile_backend) == [], "dirty before the test"
    yield
    deadline = time.monotonic() + 2.0
    while (left := leftovers(hostile_backend)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == [], left
    # The next submission still grades normally.
    result = q41.grade(hostile_backend, q41.reference)
    assert result.score == 1.0, result


class Listener:
    """TCP and UDP listeners on 127.0.0.1 that count whatever reaches them."""

    def __init__(self) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(16)
        self.tcp.settimeout(0.05)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.05)
        self.tcp_port = self.tcp.getsockname()[1]
        self.udp_port = self.udp.getsockname()[1]
        self.received: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                conn, peer = self.tcp.accept()
                self.received.append(f"tcp connection from {peer}")
                conn.close()
            with contextlib.suppress(OSError):
                data, peer = self.udp.recvfrom(4096)
                self.received.append(f"udp datagram {data!r} from {peer}")

    def control(self) -> None:
        """Prove the listeners work from the host, then forget that traffic."""
        with socket.create_connection(("127.0.0.1", self.tcp_port), timeout=2):
            pass
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"ping", ("127.0.0.1",
                                                                             self.udp_port))
        deadline = time.monotonic() + 2
        while len(self.received) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(self.received) == 2, self.received
        self.received.clear()

    def close(self) -> None:
        time.sleep(0.1)  # let anything in flight arrive before the final count
        self._stop.set()
        self._thread.join()
        self.tcp.close()
        self.udp.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    lst = Listener()
    lst.control()
    yield lst
    lst.close()


# -- network ----------------------------------------------------------------------------------

CONNECT = """
import socket, sys
for kind, host, port in [(socket.SOCK_STREAM, h, int(p)) for h, p in
                         (a.split(':') for a in sys.argv[1].split(','))] + \\
                        [(socket.SOCK_DGRAM, '127.0.0.1', int(sys.argv[2]))]:
    try:
        fam = socket.AF_INET6 if ':' in host or host == '::1' else socket.AF_INET
        s = socket.socket(fam, kind)
        s.settimeout(1)
        if kind == socket.SOCK_DGRAM:
            s.sendto(b'HOST-SERVICE-REACHED', (host, port))
        else:
            s.connect((host, port)); s.sendall(b'HOST-SERVICE-REACHED')
        print(host, port, 'REACHED')
    except OSError as e:
        print(host, port, __import__('errno').errorcode.get(e.errno, e.errno))
"""


def test_tcp_and_udp_to_a_host_listener(hostile_backend: Backend, listener: Listener) -> None:
    targets = f"127.0.0.1:{listener.tcp_port}"
    result = run(hostile_backend, CONNECT, targets, str(listener.udp_port))
    assert result.verdict == "OK", result
    assert "REACHED" not in result.stdout.decode(), result.stdout
    listener.close()
    assert listener.received == []


def test_redis_and_postgres_on_the_host(hostile_backend: Backend) -> None:
    # Both listen on this machine (CI asserts it); the sandbox must reach neither, nor IPv6.
    targets = "127.0.0.1:6379,127.0.0.1:5432,::1:6379"
    result = run(hostile_backend, CONNECT.replace("a.split(':')", "a.rsplit(':', 1)"),
                 targets, "53")
    assert result.verdict == "OK", result
    out = result.stdout.decode()
    assert "REACHED" not in out and len(out.splitlines()) == 4, out


def test_dns_lookup(hostile_backend: Backend) -> None:
    code = ("import os, socket\n"
            "for name in ('example.com', 'localhost', 'redis', 'postgres'):\n"
            "    try:\n"
            "        print(name, socket.getaddrinfo(name, 80)[0][4])\n"
            "    except OSError as e:\n"
            "        print(name, 'failed', type(e).__name__)\n"
            "print('resolv.conf', os.path.exists('/etc/resolv.conf'),\n"
            "      'hosts', os.path.exists('/etc/hosts'))\n"
            "import re\n"
            "for f in ('/etc/resolv.conf', '/etc/hosts'):\n"
            "    if os.path.exists(f):\n"
            "        text = open(f).read()\n"
            "        print('addresses', sorted(set(re.findall(r'[0-9]+(?:\\.[0-9]+){3}', text))))\n")
    result = run(hostile_backend, code)
    assert result.verdict == "OK", result
    out = lines(result)
    assert all("failed" in ln for ln in out[:4]), out
    if isinstance(hostile_backend, BwrapBackend):
        assert out[4:] == ["resolv.conf False hosts False"]
    else:
        # The engine always writes both files into a container; they may exist, but name no
        # address past the container's own loopback (not the host's resolver, not its hosts).
        assert out[4] == "resolv.conf True hosts True"
        found = [json.loads(ln.split(" ", 1)[1].replace("'", '"')) for ln in out[5:]]
        assert len(found) == 2 and all(a.startswith("127.") for f in found for a in f), out


def test_unix_sockets_of_the_host(hostile_backend: Backend) -> None:
    """A socket file the host made, the host's abstract namespace, and the well-known service
    sockets: none can be reached (host /tmp and /var/run are not in view; the abstract
    namespace belongs to the host's network namespace)."""
    host_dir = Path(tempfile.mkdtemp(prefix="roofline-hostile-"))
    os.chmod(host_dir, 0o777)
    path_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path_sock.bind(str(host_dir / "service.sock"))
    os.chmod(host_dir / "service.sock", 0o777)
    path_sock.listen(4)
    abstract_name = f"\0roofline-hostile-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(abstract_name)
    abstract.listen(4)
    try:
        code = ("import socket, sys\n"
                "for target in sys.argv[1:]:\n"
                "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                "    try:\n"
                "        s.connect(target.replace('@', '\\0', 1)); print(target, 'REACHED')\n"
                "    except OSError as e:\n"
                "        print(target, e.errno)\n")
        targets = [str(host_dir / "service.sock"), "@" + abstract_name[1:],
                   "/var/run/postgresql/.s.PGSQL.5432", "/run/postgresql/.s.PGSQL.5432",
                   "/var/run/redis/redis-server.sock", "/var/run/docker.sock"]
        result = run(hostile_backend, code, *targets)
        assert result.verdict == "OK", result
        assert "REACHED" not in result.stdout.decode(), result.stdout
        for sock in (path_sock, abstract):
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.accept()
    finally:
        path_sock.close()
        abstract.close()
        with contextlib.suppress(OSError):
            (host_dir / "service.sock").unlink()
        host_dir.rmdir()


def test_nothing_survives_in_the_network_namespace(hostile_backend: Backend) -> None:
    """One submission leaves a daemon serving an abstract unix socket (abstract names live in
    the network namespace, which a lane reuses); the next submission must find nothing."""
    name = f"roofline-leak-{uuid.uuid4().hex}"
    plant = ("import os, socket, sys, time\n"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
             "s.bind('\\0' + sys.argv[1]); s.listen(8)\n"
             "if os.fork() == 0:\n"
             "    os.setsid(); os.close(1); os.close(2)\n"
             "    while True: s.accept()[0].sendall(b'LEAKED')\n"
             "print('planted')\n")
    first = run(hostile_backend, plant, name)
    assert first.verdict == "OK" and first.stdout == b"planted\n", first
    probe = ("import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
             "try:\n"
             "    s.connect('\\0' + sys.argv[1]); print(s.recv(16))\n"
             "except OSError as e:\n"
             "    print('refused', e.errno)\n")
    second = run(hostile_backend, probe, name)
    assert second.verdict == "OK", second
    assert lines(second) == [f"refused {errno.ECONNREFUSED}"], second.stdout


# A socket sent over SCM_RIGHTS into a socketpair that holds itself outlives every process of
# its run: only the kernel's Unix garbage collector frees the cycle, some time later. Until then
# what it carries (here a memfd) is charged to the lane's memory cgroup and the abstract name it
# bound is in the lane's network namespace.
PIN_IN_FLIGHT = """
import array, os, socket, sys
chunk, fds = b'\\1' * (1 << 20), []
for mib in range(int(sys.argv[2])):
    if mib % 8 == 0:  # RLIMIT_FSIZE caps each file, memfds included
        fds.append(os.memfd_create('pinned'))
    os.write(fds[-1], chunk)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind('\\0' + sys.argv[1]); s.listen(8)
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                    array.array('i', [a.fileno(), b.fileno(), s.fileno(), *fds]))])
print('pinned')
"""
PROBE_ABSTRACT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect('\\0' + sys.argv[1]); print('reached')
except OSError as e:
    print('refused', e.errno)
"""


def test_sockets_in_flight_pin_nothing_for_the_next_run(hostile_backend: Backend) -> None:
    """Pin 160 MiB in flight, then a correct run that needs 160 MiB of the 256 MiB limit: it
    must not be charged for the first run's leftovers (it was graded "memory limit exceeded")."""
    pin = run(hostile_backend, PIN_IN_FLIGHT, f"roofline-pin-{uuid.uuid4().hex}", "160")
    assert pin.verdict == "OK" and pin.stdout == b"pinned\n", pin
    victim = run(hostile_backend, "x = bytearray(160 << 20); x[::4096] = b'v' * len(x[::4096]); "
                                  "print(len(x) >> 20)")
    assert (victim.verdict, victim.stdout) == ("OK", b"160\n"), victim


def test_abstract_socket_in_flight_is_gone_for_the_next_run(hostile_backend: Backend) -> None:
    name = f"roofline-inflight-{uuid.uuid4().hex}"
    pin = run(hostile_backend, PIN_IN_FLIGHT, name, "1")
    assert pin.verdict == "OK" and pin.stdout == b"pinned\n", pin
    probe = run(hostile_backend, PROBE_ABSTRACT, name)
    assert probe.verdict == "OK", probe
    assert lines(probe) == [f"refused {errno.ECONNREFUSED}"], probe.stdout


def test_the_lane_is_at_baseline_after_a_run(hostile_backend: Backend) -> None:
    """What the next run of this lane starts from, read right after a pinning run: no memory
    beyond the slack that no file backs, and no socket in its network namespace."""
    if not isinstance(hostile_backend, BwrapBackend):
        pytest.skip("lanes are the bwrap backend's; docker starts each run in a new container")
    from runners import lanes

    pin = run(hostile_backend, PIN_IN_FLIGHT, f"roofline-pin-{uuid.uuid4().hex}", "64")
    assert pin.verdict == "OK", pin
    setup = cg.detect()
    if setup.version != "none":
        lane = cg.lane_cgroup(setup, 0)
        assert lane.pinned_bytes() <= cg.PINNED_SLACK_BYTES, lane.pinned_bytes()
    netns = lanes.lane_netns(0)
    if netns is not None:
        assert lanes.unix_sockets_in(netns) == 0


# -- host files -------------------------------------------------------------------------------

PROBE_PATHS = """
import os, sys
for p in sys.argv[1:]:
    try:
        if os.path.isdir(p):
            print(p, 'LISTED', len(os.listdir(p)))
        else:
            data = open(p, 'rb').read()
            print(p, 'READ', __import__('hashlib').sha256(data).hexdigest())
    except OSError as e:
        print(p, __import__('errno').errorcode[e.errno])
"""


@pytest.fixture
def hidden_tests() -> Iterator[list[Path]]:
    """Files standing for hidden tests, outside any job dir: one world-readable in /tmp, one
    mode 600 in /var/tmp."""
    marker = f"HIDDEN-EXPECTED-{uuid.uuid4().hex}"
    files = []
    for directory, mode in (("/tmp", 0o644), ("/var/tmp", 0o600)):
        fd, name = tempfile.mkstemp(prefix="roofline-hidden-", dir=directory)
        os.write(fd, marker.encode())
        os.close(fd)
        os.chmod(name, mode)
        files.append(Path(name))
    yield files
    for f in files:
        f.unlink()


def test_host_files_are_not_in_view(hostile_backend: Backend, hidden_tests: list[Path]) -> None:
    paths = ["/etc/shadow", "/etc/passwd", "/root", "/home", str(REPO_ROOT),
             str(REPO_ROOT / "exercises" / "stop_strings_stream" / "code" / "checks.py"),
             *(str(p) for p in hidden_tests), "/var/run/postgresql", "/sys/class/net",
             "/var/lib/postgresql", "/etc/ssh"]
    before = {p: sha256(p) for p in hidden_tests}
    result = run(hostile_backend, PROBE_PATHS, *paths)
    assert result.verdict == "OK", result
    out = lines(result)
    assert len(out) == len(paths), out
    if isinstance(hostile_backend, BwrapBackend):
        assert all(ln.endswith("ENOENT") for ln in out), out
    else:
        # A container has its image's own /etc, /root and /home: never the host's.
        # ... and its own read-only /sys, where the network namespace has a loopback only.
        system, host_only = out[:4], [ln for ln in out[4:] if ln != "/sys/class/net LISTED 1"]
        assert len(host_only) == len(out) - 5 and all(
            ln.endswith("ENOENT") for ln in host_only), out
        nics = run(hostile_backend, "import os; print(os.listdir('/sys/class/net'))")
        assert lines(nics) == ["['lo']"], nics
        host_passwd = f"/etc/passwd READ {sha256(Path('/etc/passwd'))}"
        assert host_passwd not in system and all(
            ln.split()[1] in ("ENOENT", "EACCES", "READ", "LISTED") for ln in system), out
        assert "/etc/shadow READ" not in " ".join(system), out
    assert {p: sha256(p) for p in hidden_tests} == before


def test_proc_shows_only_the_sandbox(hostile_backend: Backend) -> None:
    code = ("import os, sys\n"
            "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
            "print(pids)\n"
            "print(os.path.exists(f'/proc/{sys.argv[1]}'))\n"
            "for p in pids:\n"
            "    try:\n"
            "        env = open(f'/proc/{p}/environ', 'rb').read()\n"
            "        print(p, b'SECRET' in env or b'DJANGO' in env)\n"
            "    except OSError as e:\n"
            "        print(p, 'unreadable', e.errno)\n")
    result = run(hostile_backend, code, str(os.getpid()))
    assert result.verdict == "OK", result
    out = lines(result)
    pids = json.loads(out[0])
    assert max(pids) < 10 and len(pids) <= 3, pids  # its own pid namespace
    assert out[1] == "False"  # the worker is not in view
    assert all(not ln.endswith("True") for ln in out[2:]), out


def test_no_writes_outside_tmp(hostile_backend: Backend) -> None:
    marker = f"pwned-{uuid.uuid4().hex}"
    targets = [f"/usr/{marker}", f"/sandbox/{marker}", f"/{marker}", f"/etc/{marker}",
               f"/opt/venv/{marker}", f"/dev/{marker}", f"/proc/{marker}",
               "/proc/sys/kernel/hostname", "/proc/sysrq-trigger", f"/tmp/{marker}"]
    code = ("import sys\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n"
            "        open(p, 'w').write('x'); print(p, 'WROTE')\n"
            "    except OSError as e:\n"
            "        print(p, e.errno)\n")
    result = run(hostile_backend, code, *targets, )
    assert result.verdict == "OK", result
    out = lines(result)
    assert out[-1].endswith("WROTE") and not any(ln.endswith("WROTE") for ln in out[:-1]), out
    # Nothing on the host either (the /tmp write went to the sandbox's own tmpfs).
    for host_path in (f"/usr/{marker}", f"/{marker}", f"/etc/{marker}", f"/tmp/{marker}",
                      f"/opt/roofline/sandbox-venv/{marker}"):
        assert not os.path.exists(host_path)


# -- disk, processes, memory, CPU, time, output ------------------------------------------------


def test_disk_fill_of_tmp(hostile_backend: Backend) -> None:
    code = ("import errno, os\n"
            "total = 0\n"
            "try:\n"
            "    for i in range(1000):\n"
            "        with open(f'/tmp/fill{i}', 'wb') as fh:\n"
            "            for _ in range(4):\n"
            "                fh.write(b'x' * (1 << 20)); fh.flush(); total += 1 << 20\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno], total >> 20)\n")
    result = run(hostile_backend, code, tmpfs_bytes=8 * MiB)
    assert result.verdict == "OK", result
    name, mib = lines(result)[0].split()
    assert name == "ENOSPC" and int(mib) <= 8, result.stdout


def test_disk_fill_of_one_file_and_shm(hostile_backend: Backend) -> None:
    code = ("import errno\n"
            "for path in ('/tmp/big', '/dev/shm/big'):\n"
            "    total = 0\n"
            "    try:\n"
            "        with open(path, 'wb', buffering=0) as fh:\n"
            "            while True:\n"
            "                total += fh.write(b'x' * (1 << 20))\n"
            "    except OSError as e:\n"
            "        print(path, errno.errorcode[e.errno], total >> 20)\n")
    result = run(hostile_backend, code, fsize_bytes=4 * MiB, shm_bytes=2 * MiB)
    assert result.verdict == "OK", result
    assert lines(result) == ["/tmp/big EFBIG 4", "/dev/shm/big ENOSPC 2"], result.stdout


def test_fd_exhaustion(hostile_backend: Backend) -> None:
    code = ("import os\n"
            "fds = []\n"
            "try:\n"
            "    while True: fds.append(os.open('/dev/null', os.O_RDONLY))\n"
            "except OSError as e:\n"
            "    print(e.errno, len(fds))\n")
    result = run(hostile_backend, code, nofile=64)
    assert result.verdict == "OK", result
    err, count = lines(result)[0].split()
    assert int(err) == errno.EMFILE and int(count) < 64


def test_fork_bomb(hostile_backend: Backend) -> None:
    code = ("import os, time\n"
            "n = 0\n"
            "try:\n"
            "    while True:\n"
            "        if os.fork() == 0:\n"
            "            while True:\n"
            "                try: os.fork()\n"
            "                except OSError: time.sleep(30)\n"
            "        n += 1\n"
            "except OSError as e:\n"
            "    print(n, e.errno)\n")
    start = time.monotonic()
    result = run(hostile_backend, code, pids=16, wall_timeout_s=5)
    assert time.monotonic() - start < 6.5
    # Either the payload saw EAGAIN and exited (OK) or the grandchildren kept the wall clock
    # running (TLE); never more than pids processes, never anything left (host_unaffected).
    assert result.verdict in ("OK", "TLE"), result
    if result.verdict == "OK":
        assert lines(result)[-1].split()[1] == str(errno.EAGAIN)


def test_thread_bomb(hostile_backend: Backend) -> None:
    code = ("import threading, time\n"
            "ts = []\n"
            "try:\n"
            "    while True:\n"
            "        t = threading.Thread(target=time.sleep, args=(30,), daemon=True)\n"
            "        t.start(); ts.append(t)\n"
            "except RuntimeError as e:\n"
            "    print(len(ts), e)\n")
    result = run(hostile_backend, code, pids=24)
    assert result.verdict == "OK", result
    count = int(lines(result)[0].split()[0])
    assert 0 < count < 24, result.stdout


MEMORY_HOG = ("chunks = []\n"
              "for i in range(64):\n"
              "    chunks.append(b'\\x01' * (16 << 20))  # 16 MiB, every page written\n"
              "print('survived', len(chunks) * 16)\n")


def test_memory_bomb_one_process(hostile_backend: Backend) -> None:
    # 1 GiB touched against 256 MiB: the memory cgroup OOM-kills it (MLE). Without a cgroup
    # RLIMIT_AS (2 x memory) makes it a MemoryError (RE) instead.
    result = run(hostile_backend, MEMORY_HOG, memory_bytes=256 * MiB)
    assert b"survived" not in result.stdout
    if result.memory_isolation == "cgroup":
        assert result.verdict == "MLE" and result.oom_killed, result
    else:
        assert result.verdict == "RE" and b"MemoryError" in result.stderr, result


def test_memory_bomb_many_children(hostile_backend: Backend) -> None:
    # Four children of 100 MiB each against 256 MiB for the whole sandbox. The parent itself
    # exits 0 (pitfall #11): the verdict comes from the cgroup's OOM counter.
    code = ("import os\n"
            "kids = []\n"
            "for _ in range(4):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        b = b'\\x01' * (100 << 20)\n"
            "        import time; time.sleep(1); os._exit(0)\n"
            "    kids.append(pid)\n"
            "print([os.waitpid(p, 0)[1] for p in kids])\n")
    result = run(hostile_backend, code, memory_bytes=256 * MiB, wall_timeout_s=8)
    if result.memory_isolation != "cgroup":
        pytest.skip("no memory cgroup: children are bounded per process only (pitfall #10)")
    assert result.verdict == "MLE" and result.oom_killed, result


def test_cpu_spin_one_thread(hostile_backend: Backend) -> None:
    result = run(hostile_backend, "while True: pass", cpu_time_s=1, wall_timeout_s=10)
    assert result.verdict == "TLE" and result.signal == signal.SIGXCPU, result
    assert not result.timed_out  # RLIMIT_CPU, not the wall clock


def test_cpu_spin_many_threads(hostile_backend: Backend) -> None:
    # sha256 over a large buffer releases the GIL, so the threads really run in parallel;
    # RLIMIT_CPU counts the whole process.
    code = ("import hashlib, threading\n"
            "data = b'x' * (1 << 20)\n"
            "def spin():\n"
            "    while True: hashlib.sha256(data).digest()\n"
            "for _ in range(4): threading.Thread(target=spin).start()\n")
    result = run(hostile_backend, code, cpu_time_s=1, wall_timeout_s=10)
    assert result.verdict == "TLE" and result.signal == signal.SIGXCPU, result


def test_cpu_spin_many_processes(hostile_backend: Backend) -> None:
    """Each process has its own RLIMIT_CPU, so only the wall clock (and the CPU quota of the
    cgroup) bounds four spinning processes."""
    code = ("import os\n"
            "for _ in range(3):\n"
            "    if os.fork() == 0: break\n"
            "while True: pass\n")
    result = run(hostile_backend, code, cpu_time_s=10, wall_timeout_s=2)
    assert result.verdict == "TLE" and result.timed_out, result
    assert result.wall_s < 4
    setup = cg.detect()
    if isinstance(hostile_backend, BwrapBackend) and ("cpu" in setup.parents
                                                     or setup.version == "v2"):
        # cpus=1.0: four spinners get about one CPU between them, not the host's two.
        assert result.cpu_s < 1.5 * result.wall_s + 0.3, result


def test_sleep_forever(hostile_backend: Backend) -> None:
    result = run(hostile_backend, "import time; time.sleep(10**6)", wall_timeout_s=1)
    assert result.verdict == "TLE" and result.timed_out, result
    assert 0.95 <= result.wall_s < 3


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood(hostile_backend: Backend, stream: str) -> None:
    code = f"import sys\nwhile True: sys.{stream}.write('x' * 65536)"
    result = run(hostile_backend, code, output_limit_bytes=256 * 1024)
    assert result.verdict == "OLE" and result.output_truncated, result
    flooded = result.stdout if stream == "stdout" else result.stderr
    assert len(result.stdout) + len(result.stderr) == 256 * 1024
    assert set(flooded) == {ord("x")}
    assert result.wall_s < 3


# -- signals, daemons, environment, privileges ------------------------------------------------


@pytest.fixture
def canary() -> Iterator[subprocess.Popen[bytes]]:
    """A host process running as the sandbox's own slot uid: kill(-1) inside must not reach
    it (a plain setuid sandbox would let it)."""
    if os.geteuid() != 0:
        pytest.skip("the canary needs a root harness dropping to a slot uid")
    uid = run_uid()
    proc = subprocess.Popen(["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}",
                             "--clear-groups", "/bin/sleep", "60"])
    deadline = time.monotonic() + 5
    while proc.pid not in processes_of_uid(uid) and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def test_signals_to_the_parent_and_everyone(hostile_backend: Backend,
                                            canary: subprocess.Popen[bytes]) -> None:
    code = ("import os, signal, sys\n"
            "def attempt(name, fn):\n"
            "    try:\n"
            "        fn(); print(name, 'sent')\n"
            "    except OSError as e:\n"
            "        print(name, e.errno)\n"
            "attempt('ppid', lambda: os.kill(os.getppid(), signal.SIGKILL))\n"
            "attempt('pid1', lambda: os.kill(1, signal.SIGKILL))\n"
            "attempt('all', lambda: os.kill(-1, signal.SIGKILL))\n"
            "for pid in sys.argv[1:]:\n"
            "    attempt('host ' + pid, lambda: os.kill(int(pid), signal.SIGKILL))\n"
            "print('still alive')\n")
    host_pids = [str(os.getpid()), str(os.getppid()), str(canary.pid)]
    result = run(hostile_backend, code, *host_pids)
    assert result.verdict == "OK", result
    out = lines(result)
    assert out[-1] == "still alive"
    assert "all 3" in out, out  # ESRCH: nothing else in its pid namespace
    assert all(ln.endswith(" 3") for ln in out if ln.startswith("host ")), out
    assert canary.poll() is None, "kill(-1) in the sandbox reached a host process"


def test_daemon_left_behind(hostile_backend: Backend) -> None:
    marker = f"daemon-{uuid.uuid4().hex}"
    code = ("import os, signal, time, sys\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
            "        signal.signal(s, signal.SIG_IGN)\n"
            "    if os.fork() == 0:\n"
            "        os.close(1); os.close(2)\n"
            "        time.sleep(120)\n"
            "    os._exit(0)\n"
            "print('parent done')\n")
    result = run(hostile_backend, code, marker)
    assert result.verdict == "OK" and result.stdout == b"parent done\n", result
    assert result.wall_s < 3
    # host_unaffected then checks that no process of the slot uid survived.


def test_environment_secrets(hostile_backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"supersecret-{uuid.uuid4().hex}"
    monkeypatch.setenv("DJANGO_SECRET_KEY", secret)
    monkeypatch.setenv("DATABASE_URL", f"postgres://app:{secret}@127.0.0.1:5432/app")
    code = ("import glob, os\n"
            "print(sorted(os.environ))\n"
            "for p in glob.glob('/proc/*/environ'):\n"
            "    try: print(p, open(p, 'rb').read())\n"
            "    except OSError as e: print(p, e.errno)\n"
            "print(open('/proc/1/cmdline', 'rb').read())\n")
    result = run(hostile_backend, code)
    assert result.verdict == "OK", result
    assert secret.encode() not in result.stdout + result.stderr
    names = json.loads(lines(result)[0].replace("'", '"'))
    assert "DJANGO_SECRET_KEY" not in names and "DATABASE_URL" not in names
    assert "PATH" in names


def test_setuid_binaries_gain_nothing(hostile_backend: Backend) -> None:
    setuid = sorted(str(p) for d in ("/usr/bin", "/usr/sbin") for p in Path(d).iterdir()
                    if p.is_file() and p.stat().st_mode & stat.S_ISUID)
    code = ("import os, subprocess, sys\n"
            "status = open('/proc/self/status').read()\n"
            "print([ln for ln in status.splitlines() if ln.startswith(('NoNewPrivs', 'CapEff'))])\n"
            "for cmd in (['su', 'root', '-c', 'id -u'], ['mount', '-t', 'tmpfs', 'x', '/tmp'],\n"
            "            ['newgrp', 'root'], ['passwd', '-S', 'root']):\n"
            "    try:\n"
            "        r = subprocess.run(cmd, capture_output=True, timeout=3, input=b'')\n"
            "        print(cmd[0], r.returncode, r.stdout.strip()[:40])\n"
            "    except (OSError, subprocess.TimeoutExpired) as e:\n"
            "        print(cmd[0], 'failed', type(e).__name__)\n"
            "print('uid', os.getuid(), os.geteuid())\n")
    result = run(hostile_backend, code)
    assert result.verdict == "OK", result
    out = lines(result)
    assert "NoNewPrivs:\\t1" in out[0] and "CapEff:\\t0000000000000000" in out[0], out
    # The sandbox user: bwrap's mapped uid 1000, the image's nobody (65534) under docker.
    uid = 1000 if isinstance(hostile_backend, BwrapBackend) else 65534
    assert out[-1] == f"uid {uid} {uid}", out
    for ln in out[1:-1]:
        # Either it could not start, or it ran and failed; never a root id printed.
        assert not ln.endswith(" 0 b'0'"), (ln, setuid)


SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {"ptrace": 101, "unshare": 272, "mount": 165, "bpf": 321, "io_uring_setup": 425,
               "keyctl": 250, "perf_event_open": 298, "setns": 308, "userfaultfd": 323,
               "init_module": 175, "kexec_load": 246, "pivot_root": 155, "chroot": 161,
               "open_by_handle_at": 304, "add_key": 248, "process_vm_readv": 310},
    "aarch64": {"ptrace": 117, "unshare": 97, "mount": 40, "bpf": 280, "io_uring_setup": 425,
                "keyctl": 219, "perf_event_open": 241, "setns": 268, "userfaultfd": 282,
                "init_module": 105, "kexec_load": 104, "pivot_root": 41, "chroot": 51,
                "open_by_handle_at": 265, "add_key": 217, "process_vm_readv": 270},
}


def test_dangerous_syscalls(hostile_backend: Backend) -> None:
    table = SYSCALLS.get(platform.machine())
    if table is None:
        pytest.skip(f"no syscall table for {platform.machine()}")
    code = ("import ctypes, json, sys\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "libc.syscall.restype = ctypes.c_long\n"
            "out = {}\n"
            "for name, nr in json.loads(sys.argv[1]).items():\n"
            "    ctypes.set_errno(0)\n"
            "    rc = libc.syscall(ctypes.c_long(nr), ctypes.c_long(0), ctypes.c_long(0),\n"
            "                      ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))\n"
            "    out[name] = (rc, ctypes.get_errno())\n"
            "print(json.dumps(out))\n")
    result = run(hostile_backend, code, json.dumps(table))
    assert result.verdict == "OK", result
    got = json.loads(lines(result)[-1])
    # EPERM straight from the seccomp filter, before the kernel looks at the (null) arguments:
    # without the filter most of these would fail with EFAULT/EINVAL instead.
    assert {name: tuple(v) for name, v in got.items()} == {
        name: (-1, errno.EPERM) for name in table}, got


# -- forged results, crashes, odd submissions (through the real grader) -----------------------

FORGERY = '''
import json, os, sys
FAKE = [json.dumps({"id": f"case-{i}", "output": {"stream": {}}}) for i in range(400)]
FAKE += ["0" * 32 + " 0 end 400 OK:done:0:ok -", '{"passed": true, "score": 1.0}']
def spray():
    text = ("\\n".join(FAKE) + "\\n").encode()
    for target in (1, 2):
        try: os.write(target, text)
        except OSError: pass
    for path in ("/proc/1/fd/1", "/proc/2/fd/1", "/proc/self/fd/1", "/dev/stdout"):
        try:
            with open(path, "wb") as fh: fh.write(text)
        except OSError: pass
    try:
        sys.__stdout__.write("\\n".join(FAKE) + "\\n"); sys.__stdout__.flush()
    except Exception: pass
spray()
import atexit; atexit.register(spray)

class StopStreamer:
    def __init__(self, stops, include_stop=False):
        self.stopped = True
        self.stop_reason = "###"
        spray()
    def push(self, token_bytes):
        spray()
        return "ALL TESTS PASSED"
    def finish(self):
        return ""

def reference_output(token_bytes, stops, include_stop):
    spray()
    return ("", None)
'''


def test_forged_results_score_below_one(hostile_backend: Backend, q41: Q41) -> None:
    result = q41.grade(hostile_backend, FORGERY)
    assert result.score < 1.0, result
    assert result.verdict != "correct"


CHEAT = '''
import os
found = []
# Everywhere a copy could hide, short of walking /usr and /proc (the fixture checks the host
# side: these files live only in the project checkout, which is not in view).
for top in ("/sandbox", "/tmp", "/opt", "/etc", "/var", "/srv", "/home", "/root", "/mnt",
            "/usr/local", "/proc/1/cwd", "/proc/2/cwd", "/proc/self/cwd", "/dev/shm"):
    for root, dirs, files in os.walk(top):
        for name in files:
            if name in ("reference.py", "checks.py", "solution.md", "selftest.toml"):
                found.append(os.path.join(root, name))
found += [os.path.join("/", n) for n in os.listdir("/") if n.endswith(".py")]
if found:
    import importlib.util
    spec = importlib.util.spec_from_file_location("stolen", found[0])
    stolen = importlib.util.module_from_spec(spec); spec.loader.exec_module(stolen)
    StopStreamer, reference_output = stolen.StopStreamer, stolen.reference_output
else:
    class StopStreamer:
        def __init__(self, stops, include_stop=False):
            self.stopped = False
            self.stop_reason = None
        def push(self, token_bytes):
            return ""
        def finish(self):
            return ""
    def reference_output(token_bytes, stops, include_stop):
        return ("", None)
'''


def test_hidden_expectations_never_enter_the_sandbox(hostile_backend: Backend, q41: Q41) -> None:
    """The cheat would score 1.0 if the reference (or the checks) were anywhere in view."""
    result = q41.grade(hostile_backend, CHEAT)
    assert result.score < 1.0, result


@pytest.mark.parametrize(("crash", "verdicts", "expected_signal"), [
    ("import os; os.abort()", ("RE",), signal.SIGABRT),
    ("import ctypes; ctypes.string_at(0)", ("RE",), signal.SIGSEGV),
    # Recursion through a C function (map) blows the C stack: SIGSEGV.
    ("import sys\nsys.setrecursionlimit(10**7)\ndef f(n): return list(map(f, [n + 1]))\nf(0)",
     ("RE",), signal.SIGSEGV),
    # Pure-Python recursion costs no C stack in 3.11+: its frames fill the heap instead, so the
    # memory limit ends it (or a MemoryError under RLIMIT_AS) -- or the CPU limit, when filling
    # the heap takes longer than it allows (seen once in CI: SIGXCPU after 1.02 s of CPU).
    ("import sys\nsys.setrecursionlimit(10**8)\ndef f(n): return f(n + 1) + 1\nf(0)",
     ("RE", "MLE", "TLE"), None),
])
def test_interpreter_crashes(hostile_backend: Backend, q41: Q41, crash: str,
                             verdicts: tuple[str, ...], expected_signal: int | None) -> None:
    result = run(hostile_backend, crash)
    assert result.verdict in verdicts, result
    if expected_signal is not None:
        assert result.signal == expected_signal, result
    # The same crash as a submission (at import): graded 0, and the grader itself survives.
    graded = q41.grade(hostile_backend, q41.reference + "\n" + crash + "\n")
    assert graded.score == 0.0, graded


def test_huge_submission_is_rejected_before_any_sandbox_run(
        hostile_backend: Backend, q41: Q41, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[SandboxSpec] = []
    real_run = type(hostile_backend).run

    def counting_run(self: Backend, spec: SandboxSpec) -> SandboxResult:
        runs.append(spec)
        return real_run(self, spec)  # type: ignore[arg-type]

    monkeypatch.setattr(type(hostile_backend), "run", counting_run)
    huge = q41.reference + "\n" + "# padding padding padding padding padding\n" * 2600
    assert len(huge.encode()) > 100_000
    with pytest.raises(InvalidAnswer):
        q41.grade(hostile_backend, huge)
    assert runs == []


def test_large_but_allowed_submission_runs(hostile_backend: Backend, q41: Q41) -> None:
    padding = "# a long comment line that only makes the file bigger, nothing else\n"
    n = (95_000 - len(q41.reference.encode())) // len(padding)
    source = q41.reference + "\n" + padding * n
    assert 90_000 < len(source.encode()) < 100_000
    assert q41.grade(hostile_backend, source).score == 1.0


def test_pinned_memory_does_not_fail_the_next_student(hostile_backend: Backend,
                                                      q41: Q41) -> None:
    """The report's sequence, in this one worker process through the grader: a submission pins
    ~440 MiB in flight at import, then an honest one that needs 60 MiB must get 1.0, not
    "Memory limit (512 MiB) exceeded"."""
    pin = ("import array, os, socket\n"
           "fds = []\n"
           "for mib in range(440):\n"
           "    if mib % 8 == 0:\n"
           "        fds.append(os.memfd_create('pinned'))\n"
           "    os.write(fds[-1], b'\\1' * (1 << 20))\n"
           "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
           "a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,\n"
           "                    array.array('i', [a.fileno(), b.fileno(), *fds]))])\n"
           "for fd in fds:\n"
           "    os.close(fd)\n")
    assert q41.grade(hostile_backend, q41.reference + "\n" + pin).score == 1.0
    honest = "BALLAST = bytearray(60 << 20)\nBALLAST[::4096] = b'b' * len(BALLAST[::4096])\n"
    result = q41.grade(hostile_backend, q41.reference + "\n" + honest)
    assert result.score == 1.0, result


NON_UTF8 = b"\xff\xfe\x80\x81 not utf-8 \xc3\x28 \xed\xa0\x80 \x00\x01\x02\n"


def test_non_utf8_output(hostile_backend: Backend, q41: Q41) -> None:
    code = (f"import os, sys\n"
            f"data = {NON_UTF8!r}\n"
            f"sys.stdout.buffer.write(data); sys.stdout.flush()\n"
            f"sys.stderr.buffer.write(data); sys.stderr.flush()\n"
            f"os.write(1, data[:3]); os.write(2, data[:3])\n")
    result = run(hostile_backend, code)
    assert result.verdict == "OK", result
    assert result.stdout == NON_UTF8 + NON_UTF8[:3] and result.stderr == NON_UTF8 + NON_UTF8[:3]
    # As a submission printing raw bytes everywhere, at import and in every push: the grader
    # must produce a result, storable as JSON.
    noisy = q41.reference.replace(
        "    def push(self, token_bytes: bytes) -> str:\n",
        "    def push(self, token_bytes: bytes) -> str:\n"
        f"        import os, sys; sys.stdout.buffer.write({NON_UTF8!r}); os.write(2, {NON_UTF8!r})\n")
    assert noisy != q41.reference
    noisy += (f"\nimport os, sys\nsys.stdout.buffer.write({NON_UTF8!r}); sys.stdout.flush()\n"
              f"os.write(1, {NON_UTF8!r}); os.write(2, {NON_UTF8!r})\n")
    graded = q41.grade(hostile_backend, noisy)
    assert 0.0 <= graded.score <= 1.0
    json.dumps({"feedback": graded.feedback,
                "checks": [(c.name, c.passed, c.message) for c in graded.checks]})


# -- forged simulations: the simulator exercises grade what the worker replays ----------------

# Each forgery replaces the simulation the driver runs in the sandbox and brings no (or a poor)
# policy; `earns` is the most its actual decisions can score (the same decisions graded honestly:
# none at all, or first come first served / accept everything as the mutants selftest.toml
# lists).
SIM_FORGERIES: dict[str, tuple[str, str, str, float]] = {
    # Q10: the driver's run_case replaced outright: every TTFT zero, no order() at all.
    "hol-run-case": ("hol_blocking_policy", "policy", (
        "import driver\n"
        "driver.run_case = lambda module, case: {\n"
        "    'ttft': {r[0]: 0.0 for r in case['requests']}, 'admissions': []}\n"), 0.0),
    # Q10: first come, first served (0.6 honestly), with the simulator's clock stopped so every
    # TTFT the sandbox sees is a nanosecond.
    "hol-engine-sim": ("hol_blocking_policy", "policy", (
        "import engine_sim\n"
        "engine_sim.StepCost.step_time = lambda self, chunks, decodes: 1e-9\n"
        "def order(waiting, now):\n"
        "    return [w['rid'] for w in waiting]\n"), 0.6),
    # Q13: run_case replaced: everything served in time, nothing dead or rejected, no admit().
    "overload-run-case": ("overload_rejection_rule", "admit", (
        "import driver\n"
        "def run_case(module, case):\n"
        "    n = 10 ** 6\n"
        "    return {'arrivals': n, 'served': n, 'dead': 0, 'rejected': 0,\n"
        "            'rejected_in_time': 0, 'dead_work_s': 0.0, 'first_dead': None,\n"
        "            'first_late_admit': None, 'first_needless_reject': None}\n"
        "driver.run_case = run_case\n"), 0.0),
    # Q13: accept everything (1/3 honestly), with clients that never give up in the sandbox.
    "overload-engine-sim": ("overload_rejection_rule", "admit", (
        "import engine_sim\n"
        "_real = engine_sim.simulate_queue\n"
        "engine_sim.simulate_queue = lambda arrivals, rate, timeout, **kw: _real(\n"
        "    arrivals, rate, float('inf'), **kw)\n"
        "def admit(state):\n"
        "    return True\n"), 1 / 3),
}


@pytest.mark.parametrize("name", sorted(SIM_FORGERIES))
def test_forged_simulations_score_what_their_decisions_earn(hostile_backend: Backend,
                                                            name: str) -> None:
    slug, part, source, earns = SIM_FORGERIES[name]
    spec = registry.load(registry.EXERCISES_DIR / slug)
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    os.environ["ROOFLINE_SANDBOX_BACKEND"] = hostile_backend.name
    result = graders.grade_answer(spec, part, source, params, seed=12345)
    assert result.score <= earns + 1e-6, result
    assert result.verdict != "correct", result


# -- hidden cases: drawn afresh for each submission (issue 19, item 6) -------------------------

# Q33's reference with a bug only large requests counts reach (every hidden draw with n past
# 100,000 is wrong), so a failure shows one of the drawn cases.
CANARY = registry.EXERCISES_DIR / "canary_sample_size"
PARTIAL = (CANARY / "code" / "reference.py").read_text(encoding="utf-8").replace(
    "    return n / (fleet_rps * canary_fraction) / 60\n",
    "    return n / (fleet_rps * canary_fraction) / 60 * (1.01 if n > 100_000 else 1.0)\n")
SHOWN = re.compile(r"Smallest: canary_minutes\(n=(\d+), fleet_rps=(\d+), "
                   r"canary_fraction=([0-9.e-]+)\) returned [^,]+, expected ([0-9.e+-]+)")


def _submission(pk: int, answer: str) -> Any:
    from practice.models import Exercise, Submission

    return Submission(pk=pk, exercise=Exercise(slug="canary_sample_size"), part_id="sizing",
                      part_type="code", variant="canonical", mode=Submission.Mode.SUBMIT,
                      answer=answer)


def _minutes_check(result: GradeResult) -> Any:
    return next(c for c in result.checks if c.name == "collection minutes")


def test_a_case_shown_in_one_submission_is_worth_nothing_in_the_next(
        hostile_backend: Backend) -> None:
    """Submit shows the smallest failing hidden case with its expected value; hard-coding it in
    the next submission must gain nothing, since that submission's cases are drawn afresh. The
    same submission graded again (a regrade) sees the same cases."""
    from practice.grading import grade_claimed

    assert PARTIAL != (CANARY / "code" / "reference.py").read_text(encoding="utf-8")
    os.environ["ROOFLINE_SANDBOX_BACKEND"] = hostile_backend.name
    first = grade_claimed(_submission(9001, PARTIAL))
    shown = SHOWN.search(_minutes_check(first).message)
    assert shown, _minutes_check(first).message
    n, rps, fraction, value = shown.groups()
    memorised = PARTIAL + (
        "\n_general = canary_minutes\n\n\n"
        "def canary_minutes(n, fleet_rps, canary_fraction):\n"
        f"    if (n, fleet_rps, canary_fraction) == ({n}, {rps}, {fraction}):\n"
        f"        return {value}\n"
        "    return _general(n, fleet_rps, canary_fraction)\n")
    honest_next = grade_claimed(_submission(9002, PARTIAL))
    cheat_next = grade_claimed(_submission(9002, memorised))
    assert not _minutes_check(cheat_next).passed
    assert _minutes_check(cheat_next).details == _minutes_check(honest_next).details
    assert cheat_next.score == honest_next.score
    # A regrade of the first submission reproduces its cases and its grade exactly.
    again = grade_claimed(_submission(9001, PARTIAL))
    assert [(c.name, c.passed, c.message) for c in again.checks] \
        == [(c.name, c.passed, c.message) for c in first.checks]


# -- forged timings: a speed check reads the CPU time the relay measured ---------------------

# A solution too slow for the speed check (its selftest mutant, or the reference with a CPU
# spin in every match), and the same code with a stopped clock: time.perf_counter is what the
# driver times with inside the sandbox, so a forged clock must gain nothing.
STOPPED_CLOCK = ("import itertools as _it, time as _time\n"
                 "_ticks = _it.count()\n"
                 "_time.perf_counter = lambda: next(_ticks) * 1e-9\n")
_RADIX = registry.EXERCISES_DIR / "radix_prefix_trie" / "code" / "reference.py"
_MATCH = "    def match_prefix(self, key: Sequence[int]) -> tuple[list[int], TreeNode]:\n"


def _radix_slow_in_match(work: str, prelude: str = "") -> str:
    """The radix reference, with `work` at the start of every match on a long prompt."""
    source = _RADIX.read_text(encoding="utf-8")
    slow = source.replace(_MATCH, f"{_MATCH}        if len(key) > 1000:\n            {work}\n")
    assert slow != source
    return slow + prelude


SLOW_SOLUTIONS: dict[str, tuple[str, str, str]] = {
    "block-pool": ("block_pool_hash_chain", "pool", mutants.source(
        registry.EXERCISES_DIR / "block_pool_hash_chain" / "code", "scan_instead_of_table")),
    "chained-hash": ("chained_block_hash", "model", mutants.source(
        registry.EXERCISES_DIR / "chained_block_hash" / "code", "linear_scan_lookup")),
    # Slow on long prompts, in CPU time.
    "radix-trie": ("radix_prefix_trie", "trie", _radix_slow_in_match("sum(range(6_000_000))")),
}


_honest_grades: dict[tuple[str, str], GradeResult] = {}


def _slow_and_forged(backend: Backend, name: str, forgery: str
                     ) -> tuple[GradeResult, GradeResult]:
    """SLOW_SOLUTIONS[name] graded as it is (once per backend: several forgeries share it) and
    with `forgery` appended, on the same seed."""
    slug, part, slow = SLOW_SOLUTIONS[name]
    spec = registry.load(registry.EXERCISES_DIR / slug)
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    os.environ["ROOFLINE_SANDBOX_BACKEND"] = backend.name
    key = (backend.name, name)
    if key not in _honest_grades:
        _honest_grades[key] = graders.grade_answer(spec, part, slow, params, seed=12345)
    forged = graders.grade_answer(spec, part, slow + "\n" + forgery, params, seed=12345)
    return _honest_grades[key], forged


@pytest.mark.parametrize("name", sorted(SLOW_SOLUTIONS))
def test_a_forged_clock_does_not_pass_the_speed_check(hostile_backend: Backend,
                                                      name: str) -> None:
    honest, forged = _slow_and_forged(hostile_backend, name, STOPPED_CLOCK)
    assert honest.score < 1.0, honest
    assert forged.score <= honest.score + 1e-6, (honest.score, forged.score, forged.feedback)


# -- skimped timed work: the submission's process decides what runs inside the timed window --

# The submission can replace any driver function, so it decides how much of the timed case's
# work really happens. A workload that repeats itself (rounds of the same lookups, plays of the
# same script) lets it do one repeat and copy the results; a constant workload lets it do the
# work at import, before the window opens, and replay it. Each forgery below is the slow
# solution plus such a replacement: it must earn no more than the slow solution itself.
SKIMPED_PLAY = """
import driver as _driver

_SHARE = {share}  # one timed lookup in _SHARE is made; the others copy its results


def _skimped_play(module, spec, prompts, probes, rounds=getattr(_driver, "LOOKUP_ROUNDS", 1)):
    # The driver's fill and lookups, with only the first 1/_SHARE of the lookups really made.
    B = spec["block_size"]
    pool = {make_pool}
    results = []
    for i, tokens in enumerate(prompts):
        results.append(pool.allocate(f"f{{i}}", tokens))
        pool.free(f"f{{i}}")
    timed = [prompts[j][: k * B + 1] for j, k in probes] * rounds
    made = [pool.lookup(q) for q in timed[: -(-len(timed) // _SHARE)]]
    return results + (made * _SHARE)[: len(timed)]


_driver.play_speed = _skimped_play
"""
# The speed case's spec as it was a constant (checks.SPEED_SPEC before the workload was drawn
# from the submission's seed): computed at import, replayed when the case asks for it.
PRECOMPUTED_SPEED = """
import sys as _sys

import driver as _driver

_KNOWN = {spec!r}
_honest_speed = _driver._speed
try:
    _READY = _honest_speed(_sys.modules[__name__], dict(_KNOWN))
except Exception:
    _READY = None


def _replayed(module, spec):
    return _READY if _READY is not None and spec == _KNOWN else _honest_speed(module, spec)


_driver._speed = _replayed
"""
SKIMPED_RADIX = """
import driver as _driver

_honest_run_case = _driver.run_case


def _skimped_run_case(module, case):
    # A third of the operations the driver would play (one play of three, when it played the
    # same script three times); their results stand in for the rest.
    if case.get("mode") != "timed":
        return _honest_run_case(module, case)
    plays = getattr(_driver, "TIMED_PLAYS", 1)
    ops = case["ops"] if "ops" in case else _driver.long_script(case["script"])
    n = len(ops) * plays // 3
    if n >= len(ops):
        results = _driver._play_timed(module, dict(case, ops=ops))
    else:
        made = _driver._play_timed(module, dict(case, ops=ops[:n]))
        results = (made * 3)[: len(ops)]
    return {"results": results, "plays": plays}


_driver.run_case = _skimped_run_case
"""
SKIMPED: dict[str, tuple[str, str]] = {
    # name -> (SLOW_SOLUTIONS entry, what is appended to it)
    "block-pool-one-round": ("block-pool", SKIMPED_PLAY.format(
        share=3, make_pool='module.BlockPool(spec["num_blocks"], B, _driver._fast)')),
    "block-pool-precomputed": ("block-pool", PRECOMPUTED_SPEED.format(spec={
        "seed": 2, "num_blocks": 4096, "block_size": 16, "fill": 256, "fill_blocks": 16,
        "probes": 400})),
    "chained-hash-one-round": ("chained-hash", SKIMPED_PLAY.format(
        share=10, make_pool='module.PrefixCacheModel(spec["num_blocks"], B, _driver._fast_hash)')),
    "chained-hash-precomputed": ("chained-hash", PRECOMPUTED_SPEED.format(spec={
        "seed": 1, "num_blocks": 8192, "block_size": 16, "fill": 512, "fill_blocks": 16,
        "probes": 1000, "fast_hash": True})),
    "radix-trie-one-play": ("radix-trie", SKIMPED_RADIX),
}
SPEED_CHECKS = ("lookup speed", "speed on long prompts")


@pytest.mark.parametrize("name", sorted(SKIMPED))
def test_skimping_on_the_timed_work_does_not_pass_the_speed_check(hostile_backend: Backend,
                                                                  name: str) -> None:
    honest, forged = _slow_and_forged(hostile_backend, *SKIMPED[name])
    assert honest.score < 1.0, honest
    (speed,) = [c for c in forged.checks if c.name in SPEED_CHECKS]
    assert not speed.passed, speed.message
    assert forged.score <= honest.score + 1e-6, (honest.score, forged.score, forged.feedback)


# The same slow match, its work done in a child the kernel reaps unseen: with SIGCHLD ignored no
# parent's cutime gets the child's CPU time, so only the lane cgroup's counter shows it.
OFFLOAD = """
import os as _os, signal as _signal
_signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)


def _offload(n):
    r, w = _os.pipe()
    if _os.fork() == 0:
        sum(range(n))
        _os._exit(0)
    _os.close(w)
    _os.read(r, 1)  # end of file once the child is gone
    _os.close(r)
"""


def test_work_handed_to_reaped_children_is_timed(hostile_backend: Backend) -> None:
    spec = registry.load(registry.EXERCISES_DIR / "radix_prefix_trie")
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    os.environ["ROOFLINE_SANDBOX_BACKEND"] = hostile_backend.name
    result = graders.grade_answer(spec, "trie", _radix_slow_in_match("_offload(6_000_000)",
                                                                     OFFLOAD), params, seed=12345)
    (speed,) = [c for c in result.checks if "CPU time" in c.message]
    assert not speed.passed, speed.message


# Spinners that live 50 ms each and are reaped by the kernel hold the sandbox's one CPU while
# the case's own process waits for it: by /proc alone the process looks starved by the machine
# ("busy", never the student's fault, retried and then not counted). The lane's CPU counter
# says the sandbox used the core itself: the student's time limit.
REAPED_SPINNERS = """
import signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
while True:
    for _ in range(4):
        try:
            if os.fork() == 0:
                end = time.process_time() + 0.05
                while time.process_time() < end:
                    pass
                os._exit(0)
        except OSError:
            pass  # at the pids limit: spin on
    end = time.process_time() + 0.01
    while time.process_time() < end:
        pass
"""


def test_reaped_spinners_do_not_pass_for_a_busy_machine(hostile_backend: Backend,
                                                         q41: Q41) -> None:
    from exercises.spec import PartSpec
    from graders import code as code_grader
    from graders.base import GradeContext

    part = PartSpec(id="streamer", type="code", prompt="", time_limit_s=1,
                    sandbox_modules=("driver_errors",))
    push = "    def push(self, token_bytes: bytes) -> str:\n"
    body = "".join(f"        {line}\n" for line in REAPED_SPINNERS.strip().splitlines())
    source = q41.reference.replace(push, push + body).replace(
        "from __future__ import annotations\n", "from __future__ import annotations\nimport os\n")
    ctx = GradeContext(reference="code/reference.py", params=q41.params,
                       exercise_path=str(q41.spec.path), mode="submit", seed=12345)
    os.environ["ROOFLINE_SANDBOX_BACKEND"] = hostile_backend.name
    result = code_grader.grade(part, source, ctx)  # MachineBusy, raised, is the failure
    assert result.score == 0.0
    assert "time limit" in result.feedback.lower(), result.feedback
