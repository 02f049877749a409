"""Plays one case against a module with `blocks_needed`: `run_case(module, case_input)`.

Runs inside the sandbox on the student's submission.py and in the worker on the reference.
Standard library only, plus the shared modules the part lists in `sandbox_modules` (here
driver_errors, which words the student's exception). It returns the student's own answer and
nothing derived from it: code in the sandbox can rewrite this file, so checks.py judges.

Case input: {"num_tokens": n, "block_size": b}. Output: {"value": int}, {"raised": "Type:
message ..."} or {"bad": "..."} (a value that is not an int).
"""
from __future__ import annotations

from driver_errors import describe

# `typing` costs start-up time in every sandbox run; the annotations are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    try:
        value = module.blocks_needed(case_input["num_tokens"], case_input["block_size"])
    except MemoryError:
        raise  # the memory limit's verdict, not this case's error
    except (Exception, SystemExit) as exc:  # a student's sys.exit() must not end the run
        return {"raised": describe(exc, module)}
    if isinstance(value, bool) or not isinstance(value, int):
        return {"bad": f"returned {value!r:.80}, expected an int"}
    return {"value": value}
