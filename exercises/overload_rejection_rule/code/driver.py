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
Output: counts of served / dead / rejected requests and the first decision of each wrong kind
(for the feedback), see `run_case`.
"""
from __future__ import annotations

import random

import engine_sim

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ROUND = 4
# A request that starts within a microsecond of its timeout still counts as served in time:
# evenly spaced arrivals put many waits exactly on the timeout, and the simulator's float sums can
# land them a few ulps over it. Without the grace, the exact rule would show "dead" requests.
GRACE_S = 1e-6


def build_arrivals(case: dict[str, Any]) -> list[float]:
    """The workload's arrival times, sorted."""
    out: list[float] = []
    rng = random.Random(case["poisson_seed"]) if case.get("poisson_seed") is not None else None
    start = 0.0
    for duration, rate in case["segments"]:
        end = start + duration
        if rate > 0:
            if rng is None:
                k = 0
                while start + k / rate < end:
                    out.append(start + k / rate)
                    k += 1
            else:
                t = start + rng.expovariate(rate)
                while t < end:
                    out.append(t)
                    t += rng.expovariate(rate)
        start = end
    for t, n in case.get("bursts", []):
        out.extend([float(t)] * int(n))
    out.sort()
    return out


def _decision(state: dict[str, float]) -> dict[str, float]:
    return {k: round(state[k], ROUND) for k in ("now", "queue_len", "predicted_wait_s")}


def run_case(module: Any, case_input: dict[str, Any]) -> dict[str, Any]:
    arrivals = build_arrivals(case_input)
    rate = float(case_input["service_rate"])
    timeout = float(case_input["timeout_s"])
    first_late: list[dict[str, float]] = []
    first_needless: list[dict[str, float]] = []
    rejected_in_time = 0

    def rule(state: dict[str, float]) -> bool:
        nonlocal rejected_in_time
        verdict = module.admit(dict(state))  # a copy: the rule cannot edit the simulator's view
        if not isinstance(verdict, bool):
            raise TypeError(f"admit() returned {type(verdict).__name__} {verdict!r:.40}; "
                            "return True or False")
        fits = state["predicted_wait_s"] <= state["timeout_s"]
        if verdict and state["predicted_wait_s"] > state["timeout_s"] + GRACE_S and not first_late:
            first_late.append(_decision(state))
        if not verdict and fits:
            rejected_in_time += 1
            if not first_needless:
                first_needless.append(_decision(state))
        return verdict

    res = engine_sim.simulate_queue(arrivals, rate, timeout, admit=rule)
    dead = [(a, start) for a, start in res.dead if start - a > timeout + GRACE_S]
    return {
        "arrivals": len(arrivals),
        "served": len(res.served) + len(res.dead) - len(dead),  # started in time (goodput)
        "dead": len(dead),
        "rejected": len(res.rejected),
        "rejected_in_time": rejected_in_time,
        "dead_work_s": round(len(dead) / rate, ROUND),
        "first_dead": [round(x, ROUND) for x in dead[0]] if dead else None,
        "first_late_admit": first_late[0] if first_late else None,
        "first_needless_reject": first_needless[0] if first_needless else None,
    }
