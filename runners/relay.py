"""The sandbox's trusted entry point: the only process whose records the worker believes.

The exercise driver and the student's module share one interpreter, so whatever the driver can
write the student can write too. This relay therefore runs them (`case_loop.py`, which imports
`driver.py` and `submission.py`) in a child interpreter of its own, hands it one case at a time,
accepts exactly one reply per case (bound to that case by a fresh nonce, of a known kind, of
bounded size) and writes its own record of every case to stdout, sealed with a key that arrived
on stdin before any student code existed.

    worker --stdin: config line (key, limits), then one case input per line--> relay
    worker <--stdout: sealed records, one per case, then an "end" record------ relay
    worker <--stderr: the student's prints, at most the output limit---------- relay
                    relay --fd 3: [len][nonce][case input JSON]---------> case_loop.py, driver.py,
                    relay <--fd 4: [len][nonce][kind][payload], one per case-- submission.py
                    relay <--fd 1 and 2: the student's prints (counted)-------

Why each piece:
- PR_SET_DUMPABLE 0: the child runs as the same uid; a non-dumpable relay's /proc/<pid>/fd,
  /mem and /environ cannot be opened by it (seccomp already denies ptrace).
- stdin is read to EOF before the child starts, so neither the key nor the case list can be read
  later through any path to the stdin pipe.
- The seal (keyed BLAKE2b over the whole record, which starts with a sequence number) makes a
  line put on the worker's stdout by any other route (e.g. /proc/1/fd/1 where that pipe can be
  opened) worthless, and a replayed or dropped line detectable.
- A reply is only accepted with the nonce its case was sent with, so nothing prepared before the
  case was sent, or meant for another case, can stand for it.
- The payload (the driver's output JSON, or an exception report) is carried opaque, base64 in
  the record; the worker parses and checks its shape. The relay parses no JSON at all, which also
  keeps it fast: json, hashlib and signal cost ~15 ms of imports per run inside the sandbox.
- The child gets a session of its own, so one kill ends everything it started.
- Time is the relay's to keep: one budget for all cases, from the config, in CPU seconds of
  the child and what it started (cpuclock.py), so a busy machine does not turn a correct run
  into a TLE; a wall-clock backstop several times longer ends a run that uses no CPU, as a TLE,
  or as "busy" when the child was starved of a core (the worker never counts that against the
  student). The sandbox's own wall clock and CPU limit are backstops above these. A crash or
  a refused reply costs that case and one fresh child goes on; a second one, a SIGKILL (the
  OOM killer), a MemoryError, the time or the print limit ends the run, and the end record
  says where.

- A timed case (the config lists them) is timed here too: the CPU seconds the whole sandbox
  used from the moment the case was sent until its reply arrived, read from the lane cgroup's
  counter (or /proc without one; cpuclock.py), so work handed to other processes counts too.
  The driver's own clock runs in the student's interpreter, where any code can replace it, so
  a speed check reads only this figure.

Record (one line): SEAL SEQ KIND INDEX FIELD PAYLOAD, where SEAL is 32 hex digits over the rest.
    ready  0 -                    (submission.py was imported)
    output i CPU <b64 output JSON>       (CPU: "-", or for a timed case "cpu=SECONDS")
    error  i - <b64 {"error", "exception", "frames"}>   (an exception the child loop caught)
    failed i <how> -              (this case crashed or was rejected; a fresh child goes on)
    end    <done> <verdict>:<phase>:<restarts>:<reason> <b64 exception report, if any>

Standard library only, and nothing of ours: this file runs inside the sandbox.
"""
from __future__ import annotations

import binascii
import ctypes
import fcntl
import os
import select
import struct
import sys
import time

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # -I leaves our folder off
from cpuclock import WALL_FACTOR, Budget, sandbox_total_s  # noqa: E402 - the path above

# Annotations are never evaluated (postponed); importing `collections.abc` for them would cost
# start-up time in every run.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

try:
    # hashlib re-exports this; importing hashlib also loads OpenSSL (~3 ms per run).
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b
try:
    # The C module that `signal` wraps in enums (importing those costs ~5 ms per run).
    from _signal import SIGKILL, SIGXCPU
except ImportError:
    from signal import SIGKILL, SIGXCPU

CASE_FD = 3
REPLY_FD = 4
FRAME_HEADER = struct.Struct(">I")
NONCE_BYTES = 16  # hex characters
CHUNK = 1 << 16
PR_SET_DUMPABLE = 4
SEAL_BYTES = 16
# Reply kinds (one byte after the nonce): ready, import failed, output, error, MemoryError.
READY, IMPORT_FAILED, OUTPUT, ERROR, MEMORY = b"R", b"I", b"O", b"E", b"M"
# After the child is gone, how long to keep reading prints a grandchild may still be writing.
DRAIN_S = 0.2
# How long a reply may keep us waiting before the records held back are written out.
IDLE_S = 0.001
# Without a pidfd (old kernels, or a filter that denies it) we poll for the child's exit.
POLL_WITHOUT_PIDFD_S = 0.02
# Fds an inherited environment may have left open above the five we hand the child.
MAX_FD = 1024
SETUP_FAILED = 3


class Stop(Exception):
    """The run cannot go on: `verdict` (TLE/MLE/OLE/RE) and a `reason` the worker words."""

    def __init__(self, verdict: str, reason: str, payload: bytes = b"") -> None:
        super().__init__(f"{verdict}:{reason}")
        self.verdict = verdict
        self.reason = reason
        self.payload = payload


class Rejected(Exception):
    """The child sent something other than one well-formed reply for the case it was given."""


class Gone(Exception):
    """The child exited or was killed before replying."""

    def __init__(self, how: str, signal_number: int | None, cpu_s: float) -> None:
        super().__init__(how)
        self.how = how  # "exit=N" or "signal=N"
        self.signal_number = signal_number
        self.cpu_s = cpu_s


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Channel:
    """Our stdout: sealed, numbered records, one per line (the worker verifies both).

    Records are held back while cases answer quickly (a write per case costs a wake-up of the
    worker each time) and written out as soon as the child keeps us waiting, so a run the
    sandbox ends from outside (memory, wall clock) still shows every case that had finished.
    """

    def __init__(self, key: bytes, budget: int) -> None:
        self.key = key
        self.seq = 0
        self.budget = budget
        self.pending = bytearray()

    def flush(self) -> None:
        if self.pending:
            _write_all(1, bytes(self.pending))
            self.pending.clear()

    def emit(self, kind: bytes, index: int, field: bytes = b"-", payload: bytes = b"") -> None:
        body = b" ".join((b"%d" % self.seq, kind, b"%d" % index, field,
                          binascii.b2a_base64(payload, newline=False)))
        seal = blake2b(body, key=self.key, digest_size=SEAL_BYTES).hexdigest().encode("ascii")
        line = seal + b" " + body + b"\n"
        if kind != b"end":  # the worker leaves room for one end record above the budget
            self.budget -= len(line)
            if self.budget < 0:
                raise Stop("OLE", "results")
        self.pending += line
        self.seq += 1
        if kind == b"end" or len(self.pending) >= CHUNK:
            self.flush()


class Prints:
    """The student's stdout and stderr: forwarded to our stderr until the limit, then a stop."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0

    def take(self, data: bytes) -> None:
        room = self.limit - self.total
        if room > 0:
            _write_all(2, data[:room])
        self.total += len(data)
        if self.total > self.limit:
            raise Stop("OLE", "prints")


def _exec_child(argv: list[str], plan: list[tuple[int, int]]) -> None:
    """In the forked process: wire the fds, leave our session, exec. Never returns."""
    try:
        os.setsid()
        # Lift every source above the targets first, so no dup2 overwrites a source still needed.
        lifted = [(fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, 10), dst) for src, dst in plan]
        for src, dst in lifted:
            os.dup2(src, dst)
        # Our fds 0-2 (the worker's pipes) are replaced now; anything else inherited goes too.
        os.closerange(REPLY_FD + 1, MAX_FD)
        os.execv(argv[0], argv)
    finally:
        os._exit(127)


class Child:
    """One child interpreter running case_loop.py, and the pipes to it."""

    def __init__(self, here: str, max_reply: int, prints: Prints) -> None:
        self.max_reply = max_reply
        self.prints = prints
        # The ready / import-failed report carries this, like every reply carries its case's.
        self.nonce = os.urandom(NONCE_BYTES // 2).hex().encode("ascii")
        case_r, case_w = os.pipe()
        reply_r, reply_w = os.pipe()
        out_r, out_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        # -u: -I ignores PYTHONUNBUFFERED, and a print still in the child's buffer when it is
        # killed (after its last reply, or at a limit) would never reach the student.
        argv = [sys.executable, "-I", "-B", "-u", os.path.join(here, "case_loop.py"),
                self.nonce.decode("ascii"), str(max_reply)]
        pid = os.fork()
        if pid == 0:
            _exec_child(argv, [(null, 0), (out_w, 1), (out_w, 2), (case_r, CASE_FD),
                               (reply_w, REPLY_FD)])
        for fd in (case_r, reply_w, out_w, null):
            os.close(fd)
        self.pid = pid
        self.case_w, self.reply_r, self.out_r = case_w, reply_r, out_r
        for fd in (case_w, reply_r, out_r):
            os.set_blocking(fd, False)
        self.killed = False
        self.buf = bytearray()
        self.pending = b""
        self.writing = False
        self.status: Gone | None = None
        self.poll = select.poll()
        self.poll.register(reply_r, select.POLLIN)
        self.poll.register(out_r, select.POLLIN)
        self.open = {reply_r, out_r}
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(pid)
            self.poll.register(self.pidfd, select.POLLIN)
        except (AttributeError, OSError):
            self.pidfd = None

    # -- io --------------------------------------------------------------------------------

    def send(self, nonce: bytes, case_input: bytes) -> None:
        self.pending += FRAME_HEADER.pack(len(nonce) + len(case_input)) + nonce + case_input
        self._flush_case()

    def _flush_case(self) -> None:
        # Written as the child reads: a large case must not block us while it prints.
        try:
            while self.pending:
                self.pending = self.pending[os.write(self.case_w, self.pending):]
        except BlockingIOError:
            pass
        except BrokenPipeError:
            self.pending = b""  # the child is gone; its exit shows on the pidfd / EOF
        if bool(self.pending) != self.writing:  # (un)register only on a change
            self.writing = bool(self.pending)
            if self.writing:
                self.poll.register(self.case_w, select.POLLOUT)
            else:
                self.poll.unregister(self.case_w)

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.poll.unregister(fd)
            self.open.discard(fd)
        elif fd == self.out_r:
            self.prints.take(data)
        else:
            self.buf += data

    def _frame(self) -> bytes | None:
        if len(self.buf) < FRAME_HEADER.size:
            return None
        (size,) = FRAME_HEADER.unpack_from(self.buf)
        if size > self.max_reply:
            raise Rejected("size")
        end = FRAME_HEADER.size + size
        if len(self.buf) < end:
            return None
        frame = bytes(self.buf[FRAME_HEADER.size:end])
        del self.buf[:end]
        return frame

    def _drain(self) -> None:
        """Read what the dead child left in the pipes (bounded: a grandchild may hold them)."""
        until = time.monotonic() + DRAIN_S
        # A poll of its own: the case pipe and the pidfd would wake this loop for nothing.
        poll = select.poll()
        for fd in self.open:
            poll.register(fd, select.POLLIN)
        while self.open and time.monotonic() < until:
            for fd, _ in poll.poll(max(1, int((until - time.monotonic()) * 1000))):
                if fd in self.open:
                    self._read(fd)
                    if fd not in self.open:
                        poll.unregister(fd)

    def _try_reap(self, timeout_s: float) -> bool:
        """Reap the child if it has exited or does so within `timeout_s`; record how."""
        until = time.monotonic() + timeout_s
        while self.status is None:
            try:
                pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: nothing more to learn
                self.status = Gone("exit=unknown", None, 0.0)
                break
            if pid:
                self._record(status, usage.ru_utime + usage.ru_stime)
                break
            left = until - time.monotonic()
            if left <= 0:
                return False
            if self.pidfd is not None:
                select.select([self.pidfd], [], [], left)
            else:
                time.sleep(min(left, POLL_WITHOUT_PIDFD_S / 4))
        self._close_pidfd()
        return True

    def next_frame(self, budget: Budget, idle: Callable[[], None]) -> bytes:
        """The child's next frame. Raises Stop (time, busy, prints), Rejected, or Gone. `idle`
        runs once if the child has not answered within IDLE_S."""
        waited = False
        while True:
            frame = self._frame()
            if frame is not None:
                return frame
            if self.status is not None:
                if self.buf:
                    raise Rejected("frame")  # died in the middle of a reply
                raise self.status
            left = budget.wait_s()
            if left <= 0:
                # "busy": stopped at the wall-clock backstop while starved of a core.
                raise Stop("TLE", "busy" if budget.outcome == "busy" else "time")
            wait = left if self.pidfd is not None else min(left, POLL_WITHOUT_PIDFD_S)
            if not waited:
                wait = min(wait, IDLE_S)
            exited = False
            events = self.poll.poll(int(wait * 1000) + 1)
            if not events and not waited:
                waited = True
                idle()
            for fd, _ in events:
                if fd == self.case_w:
                    self._flush_case()
                elif fd in self.open:
                    self._read(fd)
                elif fd == self.pidfd:
                    exited = True
            if (exited or self.pidfd is None) and self._try_reap(0.0):
                self._drain()  # a reply written just before the end still counts
            if self.status is None and self.reply_r not in self.open:
                # EOF on the reply pipe: the child is dying (its files close just before it
                # becomes a zombie), or its code closed fd 4 and would leave us waiting.
                if not self._try_reap(DRAIN_S):
                    raise Rejected("closed")
                self._drain()

    def _record(self, status: int, cpu_s: float) -> None:
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            self.status = Gone(f"signal={number}", number, cpu_s)
        else:
            self.status = Gone(f"exit={os.WEXITSTATUS(status)}", None, cpu_s)

    def _close_pidfd(self) -> None:
        if self.pidfd is not None:
            try:
                self.poll.unregister(self.pidfd)
            except KeyError:
                pass
            os.close(self.pidfd)
            self.pidfd = None

    def kill(self) -> None:
        """Kill the child and everything in its session; read its last prints; reap it."""
        if self.killed:
            return
        self.killed = True
        try:
            os.killpg(self.pid, SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.status is None:
            try:
                _, status, usage = os.wait4(self.pid, 0)  # SIGKILLed: does not block long
                self._record(status, usage.ru_utime + usage.ru_stime)
            except ChildProcessError:
                pass
        try:
            self._drain()
        except Stop:
            pass  # printing past the limit while dying changes nothing now
        self._close_pidfd()
        for fd in (self.case_w, self.reply_r, self.out_r):
            try:
                os.close(fd)
            except OSError:
                pass


def _split(frame: bytes, nonce: bytes) -> tuple[bytes, bytes]:
    """(kind, payload) of a reply that carries `nonce`; Rejected otherwise."""
    if len(frame) < NONCE_BYTES + 1 or frame[:NONCE_BYTES] != nonce:
        # Written before this case was sent, or meant for another one.
        raise Rejected("nonce")
    return frame[NONCE_BYTES:NONCE_BYTES + 1], frame[NONCE_BYTES + 1:]


def _died(gone: Gone, time_limit_s: float) -> Stop | None:
    """A Stop when the death was the CPU limit; None when it was the code itself."""
    # SIGXCPU at the soft RLIMIT_CPU; SIGKILL at the hard one, if SIGXCPU was caught.
    if gone.signal_number == SIGXCPU or (
            gone.signal_number == SIGKILL and gone.cpu_s >= time_limit_s):
        return Stop("TLE", "cpu")
    return None


def run(config: list[bytes], cases: list[bytes], channel: Channel,
        started: float) -> tuple[int, bytes, bytes]:
    """Play every case, emitting one record each. Returns the end record's index (cases with a
    record), field and payload."""
    here = os.path.dirname(os.path.abspath(__file__))
    time_limit_s = float(config[1])
    budget = Budget(time_limit_s, wall_deadline=started + WALL_FACTOR * time_limit_s)
    prints = Prints(int(config[2]))
    max_reply = int(config[3])
    restarts_allowed = int(config[5])
    timed = {int(i) for i in config[6].split(b",")} if config[6] != b"-" else set()
    restarts = 0
    index = 0
    phase = "import"
    announced = False
    # Drawn at once (one syscall, not one per case); they live only in our memory.
    pool = os.urandom(NONCE_BYTES // 2 * len(cases)).hex().encode("ascii")
    nonces = [pool[i:i + NONCE_BYTES] for i in range(0, len(pool), NONCE_BYTES)]
    child = Child(here, max_reply, prints)
    try:
        while True:
            try:
                if phase == "import":
                    kind, payload = _split(child.next_frame(budget, channel.flush),
                                           child.nonce)
                    if kind == IMPORT_FAILED:
                        raise Stop("RE", "import", payload)
                    if kind != READY:
                        raise Rejected("kind")
                    phase = "case"
                    if not announced:
                        # Lets the worker tell "stopped while importing" from "during a case"
                        # when the sandbox itself ends the run (memory, wall clock).
                        channel.emit(b"ready", 0)
                        channel.flush()
                        announced = True
                if index == len(cases):
                    return index, b"ok:case:%d:-" % restarts, b""
                # A fresh nonce per case: only a reply written after this case was sent can
                # carry it, so nothing prepared in advance or copied from another case counts.
                nonce = nonces[index]
                # Read before the case is sent: nothing the child does for it comes earlier.
                cpu0 = sandbox_total_s() if index in timed else 0.0
                child.send(nonce, cases[index])
                kind, payload = _split(child.next_frame(budget, channel.flush), nonce)
                if kind == OUTPUT:
                    cpu = (b"cpu=%.6f" % max(sandbox_total_s() - cpu0, 0.0)
                           if index in timed else b"-")
                    channel.emit(b"output", index, cpu, payload=payload)
                elif kind == ERROR:
                    channel.emit(b"error", index, payload=payload)
                elif kind == MEMORY:
                    raise Stop("MLE", "memory", payload)
                else:
                    raise Rejected("kind")
                index += 1
                continue
            except Gone as gone:
                stop = _died(gone, time_limit_s)
                if stop is not None:
                    raise stop from None
                if gone.signal_number == SIGKILL:
                    # From inside the sandbox that is the kernel's OOM killer (or the code
                    # killing itself): a fresh child would meet it again. The worker reads the
                    # sandbox's OOM flag to tell which.
                    raise Stop("RE", gone.how) from None
                how = gone.how
            except Rejected as rejected:
                how = f"rejected={rejected}"
            # The child crashed or tampered with its channel, so this case failed. One fresh
            # child may go on with the next case; a second failure ends the run.
            child.kill()
            if phase == "import" or restarts >= restarts_allowed:
                raise Stop("RE", how)
            restarts += 1
            channel.emit(b"failed", index, how.encode("ascii"))
            index += 1
            if index == len(cases):
                return index, b"ok:case:%d:-" % restarts, b""
            phase = "import"
            try:
                child = Child(here, max_reply, prints)
            except OSError:
                # E.g. no pid left: what the crashed code started still holds them.
                raise Stop("RE", how) from None
    except Stop as stop:
        field = f"{stop.verdict}:{phase}:{restarts}:{stop.reason}".encode("ascii")
        return index, field, stop.payload
    finally:
        child.kill()


def main() -> int:
    started = time.monotonic()
    # Before anything else, and before any child exists (see the module docstring).
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.stderr.write("relay: prctl(PR_SET_DUMPABLE, 0) failed\n")
        return SETUP_FAILED
    data = sys.stdin.buffer.read()  # to EOF: nothing is left in the pipe for anyone else
    first, _, rest = data.partition(b"\n")
    # key, time limit (s), print limit (bytes), max reply (bytes), results budget, restarts,
    # the timed cases' indices ("1,7", or "-" for none)
    config = first.split()
    if len(config) != 7:
        sys.stderr.write("relay: bad config line\n")
        return SETUP_FAILED
    channel = Channel(bytes.fromhex(config[0].decode("ascii")), int(config[4]))
    try:
        done, field, payload = run(config, [line for line in rest.split(b"\n") if line.strip()],
                                   channel, started)
        channel.emit(b"end", done, field, payload)
    except Exception:
        import traceback  # only on our own bug

        channel.emit(b"end", 0, b"internal:-:0:-",
                     traceback.format_exc()[-4000:].encode("utf-8", "replace"))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
