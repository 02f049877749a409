"""How a code part's driver reports a student's exception inside one case, shared by the drivers.

A driver that plays several operations per case records an exception as that operation's result
(`{"error": describe(exc, module)}`) instead of losing the whole case, so the checks can show the
student which call raised what. The string starts with "Type: message" (checks compare the type)
and goes on with the traceback lines in the student's own file only: the driver's and the
interpreter's frames say nothing to a student and would show our files.

Standard library only: it is copied into the sandbox beside the driver (a code part lists it in
`sandbox_modules`), and imported by its plain name there and in the worker.
"""
from __future__ import annotations

import os

# `typing` costs start-up time in every sandbox run; the annotations are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

MAX_ERROR_CHARS = 400  # of the "Type: message" line
TRACE_FRAMES = 3  # innermost frames of the student's file shown
TRACE_LINE_CHARS = 160


def own_frames(tb: TracebackType | None, module: Any) -> list[str]:
    """`File "submission.py", line N, in f` lines for the frames in `module`'s file only,
    innermost last."""
    import traceback  # only on an error: it costs start-up time in every sandbox run

    path = getattr(module, "__file__", None)
    if not path:
        return []
    path = os.path.abspath(path)
    name = os.path.basename(path)
    lines: list[str] = []
    for frame in traceback.extract_tb(tb)[::-1]:  # innermost first, so the cap keeps them
        if os.path.abspath(frame.filename) != path:
            continue
        text = f'  File "{name}", line {frame.lineno}, in {frame.name}'
        if frame.line:
            text += "\n    " + frame.line.strip()[:TRACE_LINE_CHARS]
        lines.append(text)
        if len(lines) == TRACE_FRAMES:
            break
    return lines[::-1]


def describe(exc: BaseException, module: Any, max_chars: int = MAX_ERROR_CHARS) -> str:
    """"Type: message" (cut to `max_chars`), then the student's own frames, if any."""
    try:
        detail = str(exc)
    except Exception:  # a student's exception class can break __str__
        detail = "<str() of the exception failed>"
    text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    if len(text) > max_chars:
        text = text[: max_chars - 3] + "..."
    frames = own_frames(exc.__traceback__, module)
    # Ends with a newline so whatever a check appends starts on a line of its own.
    return "\n".join([text, *frames]) + "\n" if frames else text
