"""Plays one workload through the queue simulator with the student's `admit` rule.

Runs inside the sandbox (the submission as `module`) and in the worker (the reference). Imports
only the standard library and the shared simulator, copied beside this file in the sandbox
(`sandbox_modules = ["engine_sim"]`).

Case input:
    {"service_rate": req/s, "timeout_s": s,
     "segments": [[duration_s, rate_per_s], ...]   back to back from t = 0,
     "poisson_seed": int or null                   null: evenly spaced arrivals in each segment;
                                                   an int: random (exponential) gaps, this seed,
     "bursts": [[t, n], ...]}                      n extra arrivals all at time t
Output: {"admit": "1101..."}, the rule's verdict on each arrival in order ("1" queued, "0"
rejected), and nothing else. Everything graded (served in time, dead, rejected) is computed in the
worker, which replays these verdicts through its own copy of the simulator (checks.replay): what
runs here is in the student's process, so a figure computed here could be anything the
submission likes.
"""
from __future__ import annotations

import engine_sim

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    arrivals = engine_sim.segment_arrivals(case_input["segments"], case_input.get("bursts", []),
                                           case_input.get("poisson_seed"))
    verdicts: list[str] = []

    def rule(state: dict[str, float]) -> bool:
        verdict = module.admit(dict(state))  # a copy: the rule cannot edit the simulator's view
        if not isinstance(verdict, bool):
            raise TypeError(f"admit() returned {type(verdict).__name__} {verdict!r:.40}; "
                            "return True or False")
        verdicts.append("1" if verdict else "0")
        return verdict

    engine_sim.simulate_queue(arrivals, float(case_input["service_rate"]),
                              float(case_input["timeout_s"]), admit=rule)
    return {"admit": "".join(verdicts)}
