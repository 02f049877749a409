"""Plays test cases against a StopStreamer module and prints what it did, one JSON line per case.

Runs inside the sandbox with the student's file as `submission.py`, and in the worker against the
reference. Standard library only, and nothing of ours: the sandbox has neither.

Input line:  {"id": "...", "input": {"tokens": [hex, ...], "stops": [str, ...], "include_stop": b}}
Output line: {"id": "...", "output": {...}} or {"id": "...", "error": "..."}
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

# A correct output is about as long as the case's text (a few hundred characters); this bound
# only stops a runaway submission from flooding the protocol.
MAX_CASE_OUTPUT_CHARS = 32_000
MAX_ERROR_CHARS = 400


def _describe(exc: BaseException) -> str:
    detail = str(exc)
    text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


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
    except (Exception, SystemExit) as exc:  # a student's sys.exit() must not end the run
        out["stream_error"] = _describe(exc)
    try:
        result = module.reference_output(list(tokens), list(stops), include)
        if not (isinstance(result, tuple | list) and len(result) == 2):
            raise TypeError(f"reference_output returned {type(result).__name__}, expected a pair")
        out["reference_output"] = [_as_text(result[0], "reference_output"), _reason(result[1])]
    except (Exception, SystemExit) as exc:
        out["reference_output_error"] = _describe(exc)
    return out


def _line(case_id: Any, output: dict[str, Any]) -> str:
    line = json.dumps({"id": case_id, "output": output})
    if len(line) > MAX_CASE_OUTPUT_CHARS:
        line = json.dumps({"id": case_id, "error": "output for this case is too large "
                           f"({len(line)} characters): push() returned far more text than the "
                           "tokens decode to"})
    return line


def main() -> int:
    # The protocol owns the real stdout; the submission's prints go to stderr.
    protocol = sys.stdout
    sys.stdout = sys.stderr
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)  # python -I leaves the script's folder off sys.path
    try:
        import submission  # your file
    except BaseException:
        traceback.print_exc()
        return 1
    for raw in sys.stdin:
        if not raw.strip():
            continue
        case = json.loads(raw)
        try:
            line = _line(case["id"], run_case(submission, case["input"]))
        except (Exception, SystemExit) as exc:
            line = json.dumps({"id": case["id"], "error": _describe(exc)})
        protocol.write(line + "\n")
        protocol.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
