"""Calls one of the three canary functions: `run_case(module, case_input)`.

Runs inside the sandbox on the student's `submission.py` and in the worker on the reference.
Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case input: {"fn": "proportions" | "mean" | "minutes", "args": [...], "known_baseline": bool}
(known_baseline only for "proportions"). Output: {"value": number, "type": "int" | "float"}, or
{"raised": "Type: message"} (with the submission's own traceback lines), or {"bad": "..."} when
the function returned something that is not a finite number.
"""
from __future__ import annotations

import math

from driver_errors import describe as _describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_OUTPUT_BYTES = 4_000


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    fn = case_input["fn"]
    args = list(case_input["args"])
    try:
        if fn == "proportions":
            value = module.canary_sample_size(*args,
                                              known_baseline=bool(case_input["known_baseline"]))
        elif fn == "mean":
            value = module.canary_sample_size_mean(*args)
        else:
            value = module.canary_minutes(*args)
    except MemoryError:
        raise  # a limit, not an answer
    except (Exception, SystemExit) as exc:  # a student's sys.exit() must not end the run
        return {"raised": _describe(exc, module)}
    if isinstance(value, bool) or not isinstance(value, int | float):
        return {"bad": f"returned {type(value).__name__} {value!r:.60}, expected a number"}
    if isinstance(value, float) and not math.isfinite(value):
        return {"bad": f"returned {value!r}, expected a finite number"}
    return {"value": value, "type": "int" if isinstance(value, int) else "float"}
