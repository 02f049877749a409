"""The sandbox's untrusted side: plays the relay's cases through the exercise's driver.

Started by relay.py as `python -I -B -u case_loop.py NONCE MAX_REPLY_BYTES`, with fd 3 carrying cases
in and fd 4 replies out, each framed as a 4-byte big-endian length and then the bytes; fds 1 and
2 are a pipe the relay counts and forwards. It imports `driver.py` and the student's
`submission.py`, then answers every case with exactly one reply:

    in:  [nonce: 16 hex chars][the case's input as JSON]
    out: [nonce][R]                                         ready (sent once, with NONCE)
         [nonce][I]{"exception": ..., "frames": [...], "dropped": n}   import failed; exit
         [nonce][O]<run_case's value as JSON>
         [nonce][E]{"error": "Type: message", "exception": ..., "frames": [...], ...}
         [nonce][M]{"exception": ..., "frames": [...], ...}  MemoryError: a limit, not an answer

This file shares an interpreter with the student's code, so nothing here is trusted: relay.py
binds each reply to its case and the worker checks every payload. Exercise drivers only define
`run_case(module, case_input)` (and may set `MAX_OUTPUT_BYTES`); the loop lives here, once.
Standard library only, nothing of ours.
"""
from __future__ import annotations

import json
import os
import struct
import sys

# `typing` costs ~4 ms of start-up in every sandbox run; the annotations are never evaluated
# (postponed), so it is imported for type checkers only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CASE_FD = 3
REPLY_FD = 4
FRAME_HEADER = struct.Struct(">I")
NONCE_BYTES = 16
CHUNK = 1 << 16
MAX_FRAMES = 100
CHANNEL_LOST = 1
MAX_ERROR_CHARS = 400
# Per string in a frame, and for the exception text: keeps an error report small.
MAX_TEXT_CHARS = 300
MAX_EXCEPTION_CHARS = 2000
HERE = os.path.dirname(os.path.abspath(__file__))
STUDENT_FILE = "submission.py"
STUDENT_PATH = os.path.join(HERE, STUDENT_FILE)


def _json(obj: Any) -> bytes:
    # ASCII escapes keep lone surrogates a student's str may hold representable; no NaN, which
    # is not JSON and which the worker refuses.
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("ascii")


def _send(nonce: bytes, kind: bytes, payload: bytes = b"") -> None:
    data = nonce + kind + payload
    view = memoryview(FRAME_HEADER.pack(len(data)) + data)
    try:
        while view:
            view = view[os.write(REPLY_FD, view):]
    except OSError:
        # fd 4 was closed or replaced by the student's code, or the relay is gone: there is no
        # one to tell, and a traceback of this file would only confuse the student's output.
        os._exit(CHANNEL_LOST)


class Cases:
    """Frames from fd 3, read in as large chunks as are there (one read per case, usually)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def _fill(self, size: int) -> bool:
        while len(self.buf) < size:
            chunk = os.read(CASE_FD, max(CHUNK, size - len(self.buf)))
            if not chunk:
                return False  # the relay closed the pipe: no more cases
            self.buf += chunk
        return True

    def next(self) -> bytes | None:
        if not self._fill(FRAME_HEADER.size):
            return None
        end = FRAME_HEADER.size + FRAME_HEADER.unpack_from(self.buf)[0]
        if not self._fill(end):
            return None
        frame = bytes(self.buf[FRAME_HEADER.size:end])
        del self.buf[:end]
        return frame


def _one_line(exc: BaseException) -> str:
    try:
        detail = str(exc)
    except Exception:  # a student's exception class can break __str__
        detail = "<str() of the exception failed>"
    text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def _exception(exc: BaseException) -> dict[str, Any]:
    """The exception line(s) and every frame; the worker keeps only the student's frames. The
    student's file is named plain `submission.py` (wherever the sandbox put it), so the worker
    can tell it from ours without knowing the mount point."""
    import traceback  # only on an error: it pulls in linecache and tokenize

    def name(path: str) -> str:
        return STUDENT_FILE if path == STUDENT_PATH else path[:MAX_TEXT_CHARS]

    try:
        stack = traceback.extract_tb(exc.__traceback__)
        frames = [[name(f.filename), f.lineno or 0, f.name[:MAX_TEXT_CHARS],
                   None if f.line is None else f.line[:MAX_TEXT_CHARS]]
                  for f in stack[-MAX_FRAMES:]]
        dropped = max(0, len(stack) - MAX_FRAMES)
        text = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
        # A SyntaxError names the file in its text.
        text = text.replace(f'"{STUDENT_PATH}"', f'"{STUDENT_FILE}"')
        text = text[-MAX_EXCEPTION_CHARS:]  # the end names the exception
    except Exception:
        frames, text, dropped = [], _one_line(exc), 0
    return {"exception": text, "frames": frames, "dropped": dropped}


def _report(report: dict[str, Any], limit: int) -> bytes:
    """An exception report as JSON within `limit` bytes: fewer frames until it fits (non-ASCII
    source lines escape to six bytes a character)."""
    data = _json(report)
    keep = len(report.get("frames", []))
    while len(data) > limit and keep:
        keep //= 2
        report = {**report, "frames": report["frames"][-keep:] if keep else [],
                  "dropped": report.get("dropped", 0) + len(report["frames"]) - keep}
        data = _json(report)
    return data if len(data) <= limit else _json({**report, "exception": "(too long)"})


def main() -> int:
    start_nonce = sys.argv[1].encode("ascii")
    # The relay refuses a bigger frame (as tampering); an exercise's driver may ask for less.
    max_payload = int(sys.argv[2]) - NONCE_BYTES - 1
    if HERE not in sys.path:
        sys.path.insert(0, HERE)  # python -I leaves the script's folder off sys.path
    try:
        import driver
        import submission  # the student's file
    except BaseException as exc:
        _send(start_nonce, b"I", _report(_exception(exc), max_payload))
        return 0
    limit = min(max_payload, int(getattr(driver, "MAX_OUTPUT_BYTES", max_payload)))
    _send(start_nonce, b"R")
    cases = Cases()
    while True:
        body = cases.next()
        if not body:
            return 0
        nonce = body[:NONCE_BYTES]
        try:
            kind, payload = b"O", _json(driver.run_case(submission, json.loads(body[NONCE_BYTES:])))
            if len(payload) > limit:
                kind, payload = b"E", _json({
                    "error": f"the output for this case is too large ({len(payload):,} bytes "
                             f"of JSON, at most {limit:,})", "exception": "", "frames": []})
        except MemoryError as exc:
            kind, payload = b"M", _report(_exception(exc), max_payload)
        except BaseException as exc:  # a student's sys.exit() must not end the run either
            kind, payload = b"E", _report({"error": _one_line(exc), **_exception(exc)},
                                          max_payload)
        _send(nonce, kind, payload)


if __name__ == "__main__":
    sys.exit(main())
