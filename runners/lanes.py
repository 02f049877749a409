"""Lanes: one per concurrent run in this process, each with its own network namespace.

A run takes the smallest free lane index; the lane names its cgroup (runners/cgroups.py) and
keeps one empty network namespace that every run of the lane enters (see lane_netns for why
reuse is safe and what it saves).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import subprocess
import threading
from collections.abc import Iterator

from runners.thread_syscalls import CLONE_NEWNET, syscall

# util-linux, present wherever bwrap is (Debian: essential package).
NSENTER = "/usr/bin/nsenter"
UNSHARE = "/usr/bin/unshare"

# What an operator sees when a run left something behind for the next one (and it was retired).
log = logging.getLogger("roofline.sandbox")

# -- per-process state, reset in a forked child ---------------------------------------------

_state_lock = threading.Lock()
_busy_lanes: set[int] = set()
# lane -> fd of that lane's own empty network namespace (see lane_netns).
_netns: dict[int, int] = {}


def _reset_in_child() -> None:
    # The parent's lanes are not ours, nor is its lock's state at the fork.
    global _state_lock
    _state_lock = threading.Lock()
    _busy_lanes.clear()
    for fd in _netns.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _netns.clear()


os.register_at_fork(after_in_child=_reset_in_child)


@contextlib.contextmanager
def take_lane() -> Iterator[int]:
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


def lane_netns(lane: int) -> int | None:
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
    (retire_netns_if_used): nothing (an abstract unix socket, say) survives from one
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


def unix_sockets_in(netns_fd: int) -> int:
    """How many Unix sockets live in the namespace behind `netns_fd` (its /proc/net/unix, read
    by this thread from inside it; setns changes only the calling thread)."""
    host_ns = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        syscall("setns", netns_fd, CLONE_NEWNET)
        try:
            with open("/proc/thread-self/net/unix", "rb") as fh:
                return max(0, len(fh.read().splitlines()) - 1)  # less the header line
        finally:
            syscall("setns", host_ns, CLONE_NEWNET)
    finally:
        os.close(host_ns)


def retire_netns_if_used(lane: int, netns_fd: int) -> bool:
    """Drop the lane's namespace when a finished run left a socket in it (see lane_netns):
    the next run gets a new one, and the old one lives only as long as those sockets do, out
    of everyone's reach. True when retired. Any doubt (the check itself failing) retires."""
    try:
        left = unix_sockets_in(netns_fd)
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
