"""Plays one test case against the student's module: `run_case(module, case_input)`.

Runs inside the sandbox against the student's `submission.py` and in the worker against the
reference. Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case input: {"fn": <function name>, ...its arguments}. For predict_window, "assign" is the
replica of each request (the route is built from it) or null for the default routing.
Output: {"value": <JSON value>} or {"error": "Type: message"} with the lines of the traceback
that are in the module's own file.
"""
from __future__ import annotations

import copy

from driver_errors import describe as _describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_OUTPUT_BYTES = 16_000


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} returned {type(value).__name__}, expected a number")
    return value


def _call(module: Any, inp: dict[str, Any]) -> Any:
    fn = inp["fn"]
    if fn == "common_prefix_len":
        return _number(module.common_prefix_len(list(inp["a"]), list(inp["b"])), fn)
    if fn == "reusable_tokens":
        return _number(module.reusable_tokens(list(inp["cached"]), list(inp["new"]),
                                              inp["block_size"]), fn)
    if fn == "predict_window":
        assign = inp["assign"]

        def route(i: int, prompt: list[int]) -> int:
            return assign[i]

        got = module.predict_window(copy.deepcopy(inp["trace"]), inp["block_size"],
                                    inp["replicas"], route if assign is not None else None,
                                    inp["capacity_blocks"])
        if not isinstance(got, tuple | list) or len(got) != 2:
            raise TypeError(f"predict_window returned {type(got).__name__}, expected a pair "
                            "(queries_tokens, hits_tokens)")
        return [_number(got[0], fn), _number(got[1], fn)]
    if fn == "counter_delta":
        return _number(module.counter_delta(dict(inp["before"]), dict(inp["after"]),
                                            inp["name"]), fn)
    if fn == "observed_hit_rate":
        return _number(module.observed_hit_rate(copy.deepcopy(inp["before"]),
                                                copy.deepcopy(inp["after"])), fn)
    if fn == "diagnose":
        got = module.diagnose(inp["observed"], dict(inp["predictions"]), inp["tol"])
        if not isinstance(got, str):
            raise TypeError(f"diagnose returned {type(got).__name__}, expected str")
        return got
    raise ValueError(f"unknown function {fn!r}")


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"value": _call(module, case_input)}
    except MemoryError:
        raise
    except (Exception, SystemExit) as exc:
        return {"error": _describe(exc, module)}
