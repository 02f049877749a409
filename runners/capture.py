"""Feed stdin, read stdout/stderr under one shared byte cap and one wall deadline.

Shared by every backend: the cap is what stops a `while True: print(...)` from filling the
worker's memory, and the deadline is what stops `time.sleep(10**6)`. On either, `kill()` is
called and reading stops after a short drain, so a process that survives the kill (or a
grandchild that still holds the pipe) cannot keep us here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

CHUNK = 1 << 16
# After the process exits (or is killed), keep reading this long for what is still buffered.
DRAIN_S = 0.5


@dataclass
class Captured:
    stdout: bytes
    stderr: bytes
    truncated: bool
    timed_out: bool


def capture(proc: subprocess.Popen[bytes], stdin: bytes, deadline: float, limit: int,
            kill: Callable[[], None]) -> Captured:
    """Run the I/O loop until both pipes close, or until `deadline` (time.monotonic()).

    `proc` must have been started with stdin/stdout/stderr=PIPE. Returns when the output is
    complete or the process was killed; the caller still has to wait() for it.
    """
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    bufs: dict[int, bytearray] = {proc.stdout.fileno(): bytearray(),
                                  proc.stderr.fileno(): bytearray()}
    total = 0
    truncated = timed_out = False
    sel = selectors.DefaultSelector()
    for fd in bufs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ, "out")
    stdin_fd = proc.stdin.fileno()
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(stdin_fd, False)
        sel.register(stdin_fd, selectors.EVENT_WRITE, "in")
    else:
        proc.stdin.close()
    # A pidfd wakes us the moment the process exits, even if a leftover grandchild keeps the
    # pipes open; without one (old kernels) we poll.
    pidfd: int | None = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    stop_at: float | None = None  # set once the process has exited or been killed

    def finish_stdin() -> None:
        if not proc.stdin or proc.stdin.closed:
            return
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(stdin_fd)
        with contextlib.suppress(OSError):
            proc.stdin.close()

    exited = False
    try:
        while True:
            # Done when both pipes are closed and the process is gone (or was killed): EOF alone
            # is not enough, since a program can close its stdout/stderr and keep running.
            if not any(fd in sel.get_map() for fd in bufs) and (exited or stop_at is not None):
                break
            now = time.monotonic()
            if stop_at is None and now >= deadline:
                timed_out = True
                kill()
                stop_at = now + DRAIN_S
            if stop_at is not None and now >= stop_at:
                break
            limit_t = (stop_at if stop_at is not None else deadline) - now
            timeout = min(limit_t, 0.05 if pidfd is None else limit_t)
            for key, _ in sel.select(max(0.0, timeout)):
                if key.data == "exit":
                    sel.unregister(key.fd)
                    exited = True
                    stop_at = time.monotonic() + DRAIN_S if stop_at is None else stop_at
                elif key.data == "in":
                    try:
                        written = os.write(stdin_fd, pending[:CHUNK])
                        pending = pending[written:]
                        if not pending:
                            finish_stdin()
                    except BlockingIOError:
                        pass
                    except OSError as exc:
                        # EPIPE: the program exited or closed stdin without reading it all.
                        if exc.errno not in (errno.EPIPE, errno.EBADF):
                            raise
                        finish_stdin()
                else:
                    try:
                        data = os.read(key.fd, CHUNK)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(key.fd)
                        continue
                    room = limit - total
                    if len(data) > room:
                        data = data[:room]
                        truncated = True
                    bufs[key.fd] += data
                    total += len(data)
                    if truncated:
                        if stop_at is None:
                            kill()
                            stop_at = time.monotonic() + DRAIN_S
                        # Nothing more will be kept; stop reading this pipe at once.
                        for fd in bufs:
                            with contextlib.suppress(KeyError, ValueError):
                                sel.unregister(fd)
            if pidfd is None and not exited and proc.poll() is not None:
                exited = True
                stop_at = time.monotonic() + DRAIN_S if stop_at is None else stop_at
    finally:
        finish_stdin()
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
    return Captured(bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]),
                    truncated, timed_out)
