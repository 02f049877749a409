"""Plays one test case against a latency-analysis module: `run_case(module, case_input)`.

Runs inside the sandbox against the student's `submission.py` (under `runners/case_loop.py`, which
reads the cases and sends the replies) and in the worker against the reference. Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case input: {"kind": ..., ...}, one of
  trace      {"ts", "step_ms", "threshold_ms", "p"}: slow_steps, slow_fraction,
             quantile_owned_by_stalls, stall_period (checks.py finds the period of the
             returned slow_steps itself, with the reference's detect_period)
  period     {"stall_ts"}: detect_period
  exposure   {"duration_s", "period_s"}: request_stall_exposure
  alignment  {"stall_ts", "event_ts", "tol_s"}: event_alignment
  slope      {"windows": [[rate, period], ...]}: period_load_slope
Output: {function name: {"value": ...} or {"error": "Type: message ..."}}; an error string starts
with the exception type (checks.py compares it) and goes on with the module's own frames.
"""
from __future__ import annotations

import math

from driver_errors import describe as _describe

# `typing` costs start-up time in every sandbox run; the annotations are never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The longest correct output is the slow-step list of the biggest public trace (a few hundred
# timestamps); this only stops a runaway submission from flooding the result channel.
MAX_OUTPUT_BYTES = 64_000


def _number(value: Any, what: str) -> float:
    # bool is an int: True would pass as 1.0 and hide a wrong return type.
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise TypeError(f"{what} returned a bool, expected float")
    if not isinstance(value, int | float):
        try:
            value = float(value)  # numpy scalars and the like
        except (TypeError, ValueError):
            raise TypeError(f"{what} returned {type(value).__name__}, expected float") from None
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what} returned {value}, expected a finite number")
    return value


def _number_or_none(value: Any, what: str) -> float | None:
    return None if value is None else _number(value, what)


def _flag(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_":  # numpy's bool
        return bool(value)
    raise TypeError(f"{what} returned {type(value).__name__}, expected bool")


def _numbers(value: Any, what: str) -> list[float]:
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{what} returned {type(value).__name__}, expected a list") from None
    return [_number(v, what + " (an item)") for v in items]


def _call(out: dict[str, Any], name: str, module: Any, convert: Any, *args: Any) -> Any:
    """Call module.<name>(*args), store {"value"} or {"error"} under name; return the value."""
    try:
        fn = getattr(module, name)
        value = convert(fn(*args), f"{name}()")
    except MemoryError:
        raise  # a limit, not an answer: case_loop.py reports it as one
    except (Exception, SystemExit) as exc:  # a student's sys.exit() must not end the run
        out[name] = {"error": _describe(exc, module)}
        return None
    out[name] = {"value": value}
    return value


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    kind = case_input["kind"]
    out: dict[str, Any] = {}
    if kind == "trace":
        ts = [float(x) for x in case_input["ts"]]
        ms = [float(x) for x in case_input["step_ms"]]
        thr = float(case_input["threshold_ms"])
        p = float(case_input["p"])
        _call(out, "slow_steps", module, _numbers, list(ts), list(ms), thr)
        _call(out, "slow_fraction", module, _number, list(ms), thr)
        _call(out, "quantile_owned_by_stalls", module, _flag, list(ms), thr, p)
        _call(out, "stall_period", module, _number_or_none, list(ts), list(ms), thr)
    elif kind == "period":
        _call(out, "detect_period", module, _number_or_none,
              [float(x) for x in case_input["stall_ts"]])
    elif kind == "exposure":
        _call(out, "request_stall_exposure", module, _number,
              float(case_input["duration_s"]), float(case_input["period_s"]))
    elif kind == "alignment":
        _call(out, "event_alignment", module, _number, [float(x) for x in case_input["stall_ts"]],
              [float(x) for x in case_input["event_ts"]], float(case_input["tol_s"]))
    elif kind == "slope":
        windows = [(float(r), float(t)) for r, t in case_input["windows"]]
        _call(out, "period_load_slope", module, _number, windows)
    else:
        raise ValueError(f"unknown case kind {kind!r}")
    return out
