"""The warm start of a kernel run's untrusted processes, inside the sandbox.

run.py imports torch, then forks this zygote before it reads a byte of its stdin: the zygote's
memory never holds the result key, the config or the worker's seed, and nor does anything forked
from it. The zygote waits on a socket only run.py holds. Each process that runs the student's
code (kernel_child.py's: one for the cases, a fresh one after a crash, one for the sm_90
compile) is forked from it on run.py's request, so it starts with torch imported instead of
importing it again in a new interpreter: one torch import per run, not three. Triton (a tenth
of torch's import) is imported by each child, in its own mode (_serve says why).

What each forked child keeps of an exec'd one, and how:
- its own session (setsid): run.py ends it, and the compiler processes it starts, with one
  killpg, as before;
- only its own descriptors: stdin /dev/null; stdout and stderr the stderr run.py passed with
  the request (a batch gives each submission its own file); the command pipe at 3, the reply
  pipe at 4; everything else closed, the zygote's socket included, so the child cannot ask for
  forks or pose as the zygote;
- dumpable, as after an exec (the zygote and run.py stay non-dumpable: a child can neither
  ptrace them nor read their memory or descriptors through /proc);
- Triton's interpreter only in the preview's case child (TRITON_INTERPRET is read when a kernel
  is decorated, triton.language's own included); the compile child imports Triton without it,
  in a process that never interpreted a kernel, so triton.language is unpatched there (aot.py
  says why that matters);
- CUDA untouched until the child: neither run.py (before the fork) nor the zygote initialises
  it, so a GPU child initialises its own context after the fork.

The zygote reaps a child only when run.py asks (after its reply pipe closed, or after run.py
killed it), so a pid run.py holds is never reused under it. Its CPU time and its children's are
run.py's descendants', so cpuclock.py's budgets count them as before. Standard library only.
"""
from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import sys
import time
import traceback
from typing import Any

PR_SET_DUMPABLE = 4
CMD_FD, REPLY_FD = 3, 4
# run.py's wait for the zygote's answer: it is ours and answers at once unless a student's
# process stopped or killed it, which costs that student the step, not the worker its time.
ANSWER_TIMEOUT_S = 30.0
REAP_POLL_S = 0.01
MODES = ("preview", "gpu", "compile")


class ZygoteGone(Exception):
    """The zygote did not answer (a student's process killed or stopped it)."""


class Zygote:
    """run.py's handle on the forked zygote."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # the zygote: never returns into run.py's code
            ours.close()
            os._exit(_serve(theirs))
        theirs.close()
        ours.settimeout(ANSWER_TIMEOUT_S)
        self.sock = ours
        self.pid = pid

    def _ask(self, request: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], fds or [])
            answer = self.sock.recv(4096)
        except OSError as exc:
            raise ZygoteGone(str(exc)) from None
        if not answer:
            raise ZygoteGone("the zygote is gone")
        return json.loads(answer)

    def spawn(self, mode: str, source: str, cmd_r: int, reply_w: int, err: int) -> int:
        """A fresh child in `mode` for `source`; its pid (its process group too)."""
        return int(self._ask({"op": "spawn", "mode": mode, "source": source},
                             [cmd_r, reply_w, err])["pid"])

    def reap(self, pid: int, timeout_s: float) -> int | None:
        """The child's exit code (negative: the signal that ended it), waiting at most
        `timeout_s`; None if it is still running."""
        code = self._ask({"op": "reap", "pid": pid, "timeout_s": timeout_s})["code"]
        return None if code is None else int(code)

    def close(self) -> None:
        self.sock.close()  # the zygote exits on the end of its socket
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _serve(sock: socket.socket) -> int:
    """The zygote's loop: spawn and reap on request, until run.py closes the socket."""
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # run.py's stdin (the key, the config) is never read here
        os.close(devnull)
        os.dup2(2, 1)  # nor is its stdout (the sealed result line) written
        os.environ["TRITON_CACHE_DIR"] = "/tmp/triton-cache"
        os.environ.pop("TRITON_INTERPRET", None)
        # Not Triton: each child imports it after the fork, because triton.language's own
        # @jit functions (tl.max, tl.sum, tl.cdiv, ...) are decorated when it is imported, as
        # interpreted functions only under TRITON_INTERPRET, so a preview child must import it
        # with that set and a compile child without. (torch does not import Triton.)
        import kernel_child  # noqa: F401
        while True:
            message, fds, _, _ = socket.recv_fds(sock, 4096, 3)
            if not message:
                return 0
            request = json.loads(message)
            if request["op"] == "spawn":
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    os._exit(_child(request["mode"], request["source"], fds))
                for fd in fds:
                    os.close(fd)
                sock.send(json.dumps({"pid": pid}).encode())
            elif request["op"] == "reap":
                sock.send(json.dumps({"code": _reap(int(request["pid"]),
                                                    float(request["timeout_s"]))}).encode())
    except Exception:  # our own failure: said on stderr; run.py sees the zygote gone
        traceback.print_exc()
        return 1


def _reap(pid: int, timeout_s: float) -> int | None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(REAP_POLL_S)


def _child(mode: str, source: str, fds: list[int]) -> int:
    """In the forked child: become a process of its own, then serve kernel_child's protocol."""
    try:
        if mode not in MODES or len(fds) != 3:
            raise ValueError(f"bad spawn request: {mode!r}, {len(fds)} descriptors")
        os.setsid()
        # Above every target first, so no dup2 below overwrites a descriptor still needed.
        cmd, reply, err = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds)
        os.dup2(err, 1)
        os.dup2(err, 2)
        os.dup2(cmd, CMD_FD)
        os.dup2(reply, REPLY_FD)
        os.closerange(REPLY_FD + 1, os.sysconf("SC_OPEN_MAX"))
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        if mode == "preview":
            os.environ["TRITON_INTERPRET"] = "1"
        import kernel_child

        kernel_child.serve(CMD_FD, REPLY_FD, mode, source)
        code = 0
    except BaseException:  # noqa: BLE001 - said on the child's stderr; run.py sees it exit
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a student's replaced stream
            pass
    return code
