"""Plays one test case against the student's module: `run_case(module, case_input)`.

Runs inside the sandbox against the student's `submission.py` and in the worker against the
reference. Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case input, one of:
  {"fn": "windows", "k": int, "snapshots": [snapshot, ...]}
  {"fn": "infer_steps", "emitted": int, "accept_length": float, "eos_discard": int}
Output: {"windows": [window-or-None, ...]} / {"value": float}, or {"error": "Type: message"} with
the lines of the traceback that are in the module's own file.
"""
from __future__ import annotations

import copy

from driver_errors import describe as _describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_OUTPUT_BYTES = 64_000

INT_KEYS = ("drafts", "draft_tokens", "accepted", "missing_draft_tokens")
FLOAT_KEYS = ("acceptance_rate", "accept_length")


def _number(value: Any, what: str) -> float:
    # bool is an int subclass but never a count or a rate here.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} is {type(value).__name__}, expected a number")
    return value


def _window(w: Any, i: int) -> dict[str, Any] | None:
    """The student's window in plain JSON types, or a TypeError naming what is wrong."""
    if w is None:
        return None
    if not isinstance(w, dict):
        raise TypeError(f"window {i} is {type(w).__name__}, expected a dict or None")
    out: dict[str, Any] = {}
    for key in INT_KEYS + FLOAT_KEYS:
        if key not in w:
            raise TypeError(f"window {i} has no key {key!r}")
        out[key] = _number(w[key], f"window {i}[{key!r}]")
    per = w.get("per_position")
    if not isinstance(per, list | tuple):
        raise TypeError(f"window {i}['per_position'] is {type(per).__name__}, expected a list")
    out["per_position"] = [None if x is None else _number(x, f"window {i}['per_position']")
                           for x in per]
    flags = w.get("flags")
    if not isinstance(flags, list | tuple) or not all(isinstance(f, str) for f in flags):
        raise TypeError(f"window {i}['flags'] must be a list of str")
    out["flags"] = list(flags)
    return out


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    try:
        if case_input["fn"] == "windows":
            # A copy, so a solution that edits the snapshots cannot change what the checks see.
            got = module.acceptance_windows(copy.deepcopy(case_input["snapshots"]),
                                            case_input["k"])
            if not isinstance(got, list | tuple):
                raise TypeError(f"acceptance_windows returned {type(got).__name__}, expected a list")
            return {"windows": [_window(w, i) for i, w in enumerate(got)]}
        value = module.infer_steps(case_input["emitted"], case_input["accept_length"],
                                   case_input["eos_discard"])
        return {"value": _number(value, "infer_steps()")}
    except MemoryError:
        raise
    except (Exception, SystemExit) as exc:
        return {"error": _describe(exc, module)}
