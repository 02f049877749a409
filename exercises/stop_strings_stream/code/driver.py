"""Plays one test case against a StopStreamer module: `run_case(module, case_input)`.

Runs inside the sandbox against the student's `submission.py` (under `runners/case_loop.py`, which
reads the cases and sends the replies) and in the worker against the reference. Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case input: {"tokens": [hex, ...], "stops": [str, ...], "include_stop": bool}
Output: {"stream": {...} or "stream_error": "...", "reference_output": [...] or
"reference_output_error": "..."}; an error string starts with "Type: message" (checks.py compares
the type) and goes on with the lines of the traceback that are in the module's own file.
"""
from __future__ import annotations

from driver_errors import describe as _describe

# `typing` costs ~4 ms of start-up in every sandbox run; the annotations are never evaluated
# (postponed), so it is imported for type checkers only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A correct output is about as long as the case's text (a few hundred characters); this bound
# only stops a runaway submission from flooding the result channel (case_loop.py enforces it).
MAX_OUTPUT_BYTES = 32_000


def _as_text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} returned {type(value).__name__}, expected str")
    return value


def _reason(value: Any) -> str | None:
    # Anything but a str or None cannot be compared to the reference; show what it was.
    if value is None or isinstance(value, str):
        return value
    return f"<{type(value).__name__}: {value!r:.60}>"


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    """Run one case: the streamer token by token, then `reference_output` on the whole list."""
    tokens = [bytes.fromhex(h) for h in case_input["tokens"]]
    stops = list(case_input["stops"])
    include = bool(case_input["include_stop"])
    out: dict[str, Any] = {}
    try:
        streamer = module.StopStreamer(list(stops), include_stop=include)
        deltas: list[str] = []
        stopped_after: list[bool] = []
        for i, tok in enumerate(tokens):
            deltas.append(_as_text(streamer.push(tok), f"push() of token {i}"))
            stopped_after.append(bool(getattr(streamer, "stopped", False)))
        final = _as_text(streamer.finish(), "finish()")
        out["stream"] = {
            "deltas": deltas,
            "stopped_after": stopped_after,
            "final": final,
            "stopped": bool(getattr(streamer, "stopped", False)),
            "stop_reason": _reason(getattr(streamer, "stop_reason", None)),
        }
    except MemoryError:
        raise  # a limit, not an answer: case_loop.py reports it as one
    except (Exception, SystemExit) as exc:  # a student's sys.exit() must not end the run
        out["stream_error"] = _describe(exc, module)
    try:
        result = module.reference_output(list(tokens), list(stops), include)
        if not (isinstance(result, tuple | list) and len(result) == 2):
            raise TypeError(f"reference_output returned {type(result).__name__}, expected a pair")
        out["reference_output"] = [_as_text(result[0], "reference_output"), _reason(result[1])]
    except MemoryError:
        raise
    except (Exception, SystemExit) as exc:
        out["reference_output_error"] = _describe(exc, module)
    return out

