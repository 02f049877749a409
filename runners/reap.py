"""After a run: the sandbox's PID 1 becomes our child (we are its subreaper), and we signal it
through a pidfd and reap it for its rusage. Its death takes the whole pid namespace with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import signal
import time

from runners.base import SandboxUnavailable
from runners.thread_syscalls import libc

_subreaper_pid = 0


def _reset_in_child() -> None:
    # PR_SET_CHILD_SUBREAPER is not inherited across fork.
    global _subreaper_pid
    _subreaper_pid = 0


os.register_at_fork(after_in_child=_reset_in_child)


def set_subreaper() -> None:
    # bwrap's outer monitor exits as soon as the payload does, orphaning the sandbox PID 1; as
    # subreaper we inherit it and reap it ourselves instead of leaving zombies under init
    # (pitfall #7). Once per process.
    global _subreaper_pid
    if _subreaper_pid == os.getpid():
        return
    pr_set_child_subreaper = 36
    if libc().prctl(pr_set_child_subreaper, 1, 0, 0, 0) != 0:
        raise SandboxUnavailable(f"prctl(PR_SET_CHILD_SUBREAPER) failed: "
                                 f"{os.strerror(ctypes.get_errno())}")
    _subreaper_pid = os.getpid()


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def open_pidfd(pid: int) -> int | None:
    with contextlib.suppress(OSError, AttributeError):
        return os.pidfd_open(pid)
    return None  # kernel < 5.3: fall back to pids (safe while the process is unreaped)


def send_signal(pid: int, pidfd: int | None, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, OSError):
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)


def reap(pid: int, pidfd: int | None, timeout_s: float) -> resource.struct_rusage | None:
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
