"""Calls `min_fleet` once: `run_case(module, case_input)`.

Runs inside the sandbox on the student's `submission.py` and in the worker on the reference.
Standard library only, plus the shared
driver_errors module (listed in the part's sandbox_modules).

Case input: {"regions": [[name, demand], ...], "r": number, "U": number}
Output: {"fleet": [[name, replicas], ...]} in the order returned, or {"raised": "Type: message"}
(with the submission's own traceback lines), or {"bad": "..."} for a return value that is not a
dict of names to whole numbers.
"""
from __future__ import annotations

from driver_errors import describe as _describe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_OUTPUT_BYTES = 8_000


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    demands = {name: demand for name, demand in case_input["regions"]}
    try:
        fleet = module.min_fleet(demands, case_input["r"], case_input["U"])
    except MemoryError:
        raise  # a limit, not an answer
    except (Exception, SystemExit) as exc:  # a student's sys.exit() must not end the run
        return {"raised": _describe(exc, module)}
    if not isinstance(fleet, dict):
        return {"bad": f"returned {type(fleet).__name__}, expected a dict of region -> replicas"}
    rows = []
    for name, count in list(fleet.items())[:64]:
        if not isinstance(name, str):
            return {"bad": f"has a key {name!r:.40} that is not a region name"}
        if isinstance(count, bool) or not isinstance(count, int):
            if isinstance(count, float) and count.is_integer() and abs(count) < 2**53:
                count = int(count)  # 72.0 is a whole number of replicas; accept it
            else:
                return {"bad": f"gives {name!r:.40} {count!r:.40} replicas, expected a whole number"}
        rows.append([name, count])
    if len(fleet) > 64:
        return {"bad": f"returned {len(fleet)} regions"}
    return {"fleet": rows}
