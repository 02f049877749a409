"""The identity a sandbox runs under: the slot's uid, which processes run as it, and giving the
spawning thread that identity for a moment.

A uid per worker slot keeps concurrent workers from sharing RLIMIT_NPROC accounting and lets the
janitor find a slot's leftovers by uid (pitfall #9). The per-thread switch lets the worker vfork
bwrap directly as the slot uid instead of exec'ing setpriv/nsenter and prlimit first (see the
runners/bwrap.py module doc for why and what it saves).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator

from runners.base import SandboxUnavailable
from runners.thread_syscalls import (
    CLONE_NEWNET,
    SYSCALL_NUMBERS,
    ThreadSyscallError,
    libc,
    syscall,
    thread_resuid,
)

SLOT_UID_BASE = 60000
SLOTS = 32


def slot_is_explicit() -> bool:
    """True when $ROOFLINE_SANDBOX_SLOT assigns this process its slot (so its uid is ours alone)."""
    return bool(os.environ.get("ROOFLINE_SANDBOX_SLOT"))


def slot() -> int:
    """$ROOFLINE_SANDBOX_SLOT, else a slot this process holds alone (claimed_slot)."""
    raw = os.environ.get("ROOFLINE_SANDBOX_SLOT")
    return int(raw) if raw else claimed_slot()


# Where the slots' lock files live: one folder per machine, shared by every process that grades.
SLOT_LOCK_DIR_ENV = "ROOFLINE_SLOT_LOCK_DIR"
_claim_lock = threading.Lock()
_claimed: tuple[int, int] | None = None  # (the pid that claimed, its slot)
_held_fds: list[int] = []  # kept open for the process's life: closing one releases its slot


def claimed_slot() -> int:
    """A slot of 0..SLOTS-1 that no other process on this machine holds, for this process's
    life: an exclusive flock on the slot's lock file, tried from pid % SLOTS on.

    A slot taken as pid % SLOTS alone could be shared: two worker processes (or a worker and a
    test process grading in-process) whose pids agree mod 32 ran as one uid, and RLIMIT_NPROC
    counts every task of a uid, so one's runs ate the other's fork allowance (the flaky test of
    an earlier sitting was exactly that). The lock goes when the process does, however it ends.
    A forked child claims its own (the pid is part of what is remembered); the parent's lock,
    which it inherits, only keeps that slot taken a little longer. With every slot held, or no
    lock file to be had, it falls back to pid % SLOTS: shared, as before, never refused."""
    global _claimed
    pid = os.getpid()
    with _claim_lock:
        if _claimed is not None and _claimed[0] == pid:
            return _claimed[1]
        folder = os.environ.get(SLOT_LOCK_DIR_ENV) or tempfile.gettempdir()
        start = pid % SLOTS
        chosen = start
        for step in range(SLOTS):
            candidate = (start + step) % SLOTS
            fd = try_lock(os.path.join(folder, f"roofline-slot-{candidate}.lock"))
            if fd is not None:
                _held_fds.append(fd)
                chosen = candidate
                break
        _claimed = (pid, chosen)
        return chosen


def try_lock(path: str) -> int | None:
    """An open fd holding an exclusive flock on `path` (made if missing), or None when another
    open file holds it or the file cannot be opened. Closing the fd releases the lock."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def run_uid() -> int:
    """The real uid the sandbox runs under: a per-slot uid when we are root, else ourselves.

    A uid per worker slot keeps concurrent workers from sharing RLIMIT_NPROC accounting and lets
    the janitor find a slot's leftovers by uid (pitfall #9).
    """
    if os.getuid() == 0 or os.geteuid() == 0:
        return SLOT_UID_BASE + slot()
    return os.getuid()


def count_tasks(uid: int) -> int:
    """Tasks (threads included) whose real uid is `uid`: RLIMIT_NPROC counts all of them."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        status = _status_numbers(entry, ("Uid:", "Threads:"))
        if status is not None and status.get("Uid:") == uid:
            total += max(status.get("Threads:", 1), 1)
    return total


def _status_numbers(pid: str, keys: tuple[str, ...]) -> dict[str, int] | None:
    """The first number of each line of /proc/<pid>/status that starts with one of `keys`
    ("Uid:" gives the real uid), by key; None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return {key: int(line.split()[1]) for line in fh for key in keys
                    if line.startswith(key)}
    except (OSError, ValueError, IndexError):
        return None


def real_uid(pid: str) -> int | None:
    """The real uid of process `pid` (a /proc entry name), or None when it is gone."""
    status = _status_numbers(pid, ("Uid:",))
    return None if status is None else status.get("Uid:")


def processes_of_uid(uid: int) -> list[int]:
    """Host pids whose real uid is `uid`."""
    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and real_uid(entry) == uid]


# -- spawning without exec'd helpers: this thread's own credentials ------------------------

_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
_fast_spawn_broken = False
# One identity switch at a time per process: each switch makes the process non-dumpable until
# it is undone, so two overlapping switches in different threads could read each other's
# transient state and leave it non-dumpable (seen once on CI). Switches last ~0.1 ms.
_identity_lock = threading.Lock()
# What the worker was before any switch; restored after each one.
_PROCESS_DUMPABLE: int | None = None


def fast_spawn_available() -> bool:
    """Whether run() can start bwrap directly (see thread_identity): a known architecture,
    and not turned off with $ROOFLINE_SANDBOX_EXEC_CHAIN=1 (or by an earlier failure)."""
    return (not _fast_spawn_broken and os.uname().machine in SYSCALL_NUMBERS
            and not os.environ.get("ROOFLINE_SANDBOX_EXEC_CHAIN"))


@contextlib.contextmanager
def thread_identity(uid: int, *, netns_fd: int | None = None,
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
        _PROCESS_DUMPABLE = libc().prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
    dumpable = _PROCESS_DUMPABLE
    host_ns = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC) \
        if netns_fd is not None else None
    try:
        if netns_fd is not None:
            syscall("setns", netns_fd, CLONE_NEWNET)
        if real_only:
            syscall("setresgid", uid, -1, -1)
            syscall("setresuid", uid, -1, -1)
        else:
            syscall("setgroups", 0, 0)
            syscall("setresgid", uid, uid, 0)
            syscall("setresuid", uid, uid, 0)
            if thread_resuid()[:2] != (uid, uid):
                raise ThreadSyscallError(0, "this thread did not take the slot uid")
        yield
    finally:
        try:
            syscall("setresuid", 0, 0, 0)  # first: with euid 0 the capabilities come back
            syscall("setresgid", 0, 0, 0)
            syscall("setgroups", len(groups), (ctypes.c_uint * len(groups))(*groups))
            if host_ns is not None:
                syscall("setns", host_ns, CLONE_NEWNET)
            if thread_resuid() != (0, 0, 0):
                raise ThreadSyscallError(0, "this thread did not get root back")
            # An euid change makes the process non-dumpable (kernel rule); undo that side effect.
            if dumpable == 1:
                libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        except OSError as exc:
            _fast_spawn_broken = True
            raise SandboxUnavailable(f"could not restore the worker thread's identity: {exc}"
                                     ) from exc
        finally:
            if host_ns is not None:
                os.close(host_ns)


def check_identity(pid: int, uid: int) -> None:
    """The process we just spawned must run as the slot uid/gid with no groups (pitfall #1)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = {k: v.split() for k, _, v in (ln.partition(":") for ln in fh)}
    except OSError:
        return  # already gone: nothing ran as anyone; reported as a setup error
    if (set(fields.get("Uid", [])) != {str(uid)} or set(fields.get("Gid", [])) != {str(uid)}
            or fields.get("Groups")):
        raise SandboxUnavailable(f"bwrap started with the wrong identity: {fields.get('Uid')}")
