"""Workloads and checks for the admission rule (runs in the worker, never in the sandbox).

A case input is a workload (see driver.py): a service rate, a client timeout, back-to-back
segments of arrivals at a constant rate (evenly spaced or random), and bursts of simultaneous
arrivals. The student's rule and the reference (admit iff the request will start in time) are
each played through the same simulator; the checks compare served-in-time (goodput), dead and
rejected counts, and each failure names the smallest workload it happens on, with the first
decision that went wrong there.

The sandbox returns only the rule's verdicts, one per arrival (driver.py). Every count graded here
comes from `replay`: this process builds the workload's arrivals itself and plays the verdicts
through its own simulator, so a submission that replaces the driver or patches the simulator in
the sandbox gets exactly what its verdicts earn.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from exercises import engine_sim
from graders import checkkit
from graders.base import Check

Case = dict[str, Any]

# How close to the reference a rule must come (the statement and the starter say the same).
# Served in time: at least the reference's less 1 % of it or 2 requests, whichever is more;
# rejected: at most the reference's plus 1 % of it or 2 requests. The 2 lets a rule decide a wait
# exactly equal to the timeout either way (evenly spaced arrivals produce such ties).
SLACK_REL = 0.01
SLACK_ABS = 2
# A request that starts within a microsecond of its timeout still counts as served in time:
# evenly spaced arrivals put many waits exactly on the timeout, and the simulator's float sums can
# land them a few ulps over it. Without the grace, the exact rule would show "dead" requests.
GRACE_S = 1e-6
ROUND = 4  # decimals of the decisions quoted in feedback
# Random workloads: enough to cover the shapes, few enough that a run stays well under a second.
RANDOM_CASES = 36
MAX_ARRIVALS = 5_000

# Every drawn number comes from a short list (Hypothesis draws only small indices), so a seed
# gives the same workloads in every process whatever literals the loaded modules contain.
SERVICE_RATES = (0.5, 1.0, 2.0, 4.0, 5.0, 8.0, 10.0, 20.0, 25.0, 40.0)
TIMEOUTS = (0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0)
DURATIONS = (2.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0)
LOAD_FACTORS = (0.0, 0.3, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0, 4.0)  # arrival rate / service rate
BURST_SIZES = (5, 20, 50, 100)


def workload(case_id: str, service_rate: float, timeout_s: float,
             segments: Sequence[Sequence[float]], bursts: Sequence[Sequence[float]] = (),
             poisson_seed: int | None = None) -> Case:
    return {"id": case_id, "input": {
        "service_rate": float(service_rate), "timeout_s": float(timeout_s),
        "segments": [[float(d), float(r)] for d, r in segments],
        "poisson_seed": poisson_seed,
        "bursts": [[float(t), int(n)] for t, n in bursts]}}


def expected_arrivals(inp: dict[str, Any]) -> int:
    return round(sum(d * r for d, r in inp["segments"]) + sum(n for _, n in inp["bursts"]))


def size_key(case: Case) -> tuple[int, str]:
    """Smaller workloads first (by arrivals), then a stable order."""
    inp = case["input"]
    return expected_arrivals(inp), json.dumps(inp, sort_keys=True)


def spike_case(case_id: str, p: dict[str, Any]) -> Case:
    """The statement's spike: spike_rate for spike_s, then the baseline until the queue is long
    empty (the spike starts at t = 0 with an empty queue)."""
    backlog = (p["spike_rate"] - p["service_rate"]) * p["spike_s"]
    drain = backlog / (p["service_rate"] - p["base_rate"])
    tail = math.ceil(drain + 60)
    return workload(case_id, p["service_rate"], p["timeout_s"],
                    [(p["spike_s"], p["spike_rate"]), (tail, p["base_rate"])])


def public_cases(params: dict[str, Any]) -> list[Case]:
    """What Run plays: the statement's spike, a burst at t = 0, and a quiet hour-let."""
    return [
        spike_case("example-1-the-spike", params),
        workload("example-2-burst", 10, 5, [(30, 4)], bursts=[(0, 200)]),
        workload("example-3-no-overload", 20, 30, [(60, 12)], poisson_seed=7),
    ]


EDGE_CASES: tuple[Case, ...] = (
    workload("edge-no-arrivals", 10, 5, [(10, 0)]),
    workload("edge-never-overloaded", 20, 10, [(60, 10)]),
    workload("edge-burst-only", 10, 5, [(1, 0)], bursts=[(0, 120)]),
    workload("edge-timeout-below-service-time", 0.5, 1, [(60, 1.0)], poisson_seed=11),
    workload("edge-two-bursts", 4, 10, [(60, 2)], bursts=[(0, 60), (20, 60)]),
    workload("edge-spike-then-silence", 20, 10, [(30, 60), (60, 0)]),
    workload("edge-two-spikes", 10, 10, [(20, 25), (20, 5), (20, 25), (60, 5)]),
    workload("edge-sustained-overload", 5, 20, [(200, 10)]),
    workload("edge-tiny-timeout", 40, 0.5, [(30, 60)]),
    workload("edge-slow-server-burst", 1, 30, [(60, 0.5)], bursts=[(0, 100)]),
    workload("edge-random-spike", 20, 15, [(45, 45), (120, 10)], poisson_seed=5),
    workload("edge-the-blurb", 20, 30, [(60, 40), (340, 10)]),
)


@st.composite
def _random_workload(draw: st.DrawFn) -> dict[str, Any]:
    mu = draw(checkkit.sampled_from(SERVICE_RATES))
    timeout = draw(checkkit.sampled_from(TIMEOUTS))
    segments = draw(checkkit.lists(checkkit.tuples(checkkit.sampled_from(DURATIONS),
                                                   checkkit.sampled_from(LOAD_FACTORS)),
                                   min_size=1, max_size=4))
    bursts = draw(checkkit.lists(checkkit.tuples(checkkit.sampled_from(DURATIONS),
                                                 checkkit.sampled_from(BURST_SIZES)),
                                 max_size=2))
    return {"service_rate": mu, "timeout_s": timeout,
            "segments": [[d, f * mu] for d, f in segments],
            "poisson": draw(checkkit.booleans()),
            "bursts": [[t, n] for t, n in bursts]}


@lru_cache(maxsize=16)
def _random_inputs(seed: int, n: int) -> tuple[str, ...]:
    """n Hypothesis draws for this seed, as JSON strings."""
    return tuple(json.dumps(w, sort_keys=True)
                 for w in checkkit.draw(_random_workload(), seed, n))


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """The edge workloads, the variant's own spike and Hypothesis-drawn ones, smallest first."""
    cases = [*EDGE_CASES, spike_case("variant-spike", params)]
    seen = {json.dumps(c["input"], sort_keys=True) for c in cases}
    for i, raw in enumerate(_random_inputs(int(seed), RANDOM_CASES)):
        w = json.loads(raw)
        # Random gaps get their own seed, derived here rather than drawn (see SERVICE_RATES).
        c = workload(f"random-{i + 1:02d}", w["service_rate"], w["timeout_s"], w["segments"],
                     w["bursts"], (int(seed) % 100_000) * 100 + i if w["poisson"] else None)
        key = json.dumps(c["input"], sort_keys=True)
        if key in seen or expected_arrivals(c["input"]) > MAX_ARRIVALS:
            continue
        seen.add(key)
        cases.append(c)
    cases.sort(key=size_key)
    return cases


# ---------------------------------------------------------------- feedback


def _num(x: float) -> str:
    return f"{x:g}"


def describe(case: Case) -> str:
    inp = case["input"]
    spacing = "random" if inp.get("poisson_seed") is not None else "evenly spaced"
    segs = ", then ".join(f"{_num(r)}/s for {_num(d)} s" if r else f"none for {_num(d)} s"
                          for d, r in inp["segments"])
    text = (f"service_rate {_num(inp['service_rate'])} req/s, timeout {_num(inp['timeout_s'])} s, "
            f"arrivals {segs} ({spacing})")
    if inp["bursts"]:
        text += ", plus " + ", ".join(f"{n} at once at t = {_num(t)} s" for t, n in inp["bursts"])
    return f"{text} [{case['id']}]"


def _decision(d: dict[str, float] | None, inp: dict[str, Any]) -> str:
    if not d:
        return ""
    return (f"at t = {_num(d['now'])} s, with {int(d['queue_len'])} waiting and a predicted wait "
            f"of {_num(d['predicted_wait_s'])} s against the {_num(inp['timeout_s'])} s timeout")


def _well_formed(result: Any) -> bool:
    """The envelope only: an error text, or an output dict (replay checks what is inside)."""
    return checkkit.envelope(result) is not None


class ReplayError(ValueError):
    """The output's verdicts do not fit the workload this process simulates."""


def arrivals(inp: dict[str, Any]) -> list[float]:
    return engine_sim.segment_arrivals(inp["segments"], inp["bursts"], inp.get("poisson_seed"))


def _snapshot(state: dict[str, float]) -> dict[str, float]:
    return {k: round(state[k], ROUND) for k in ("now", "queue_len", "predicted_wait_s")}


def replay(inp: dict[str, Any], output: dict[str, Any]) -> dict[str, Any]:
    """What the verdicts in `output` ({"admit": "10..."}) do to this workload, on this process's
    simulator: the counts the checks grade and the first wrong decision of each kind."""
    times = arrivals(inp)
    verdicts = output.get("admit")
    if not isinstance(verdicts, str):
        raise ReplayError("your rule's decisions could not be replayed: the output holds no "
                          "verdicts")
    if len(verdicts) != len(times) or verdicts.strip("01"):
        raise ReplayError(f"your rule's decisions could not be replayed: the workload has "
                          f"{len(times):,} arrivals, the output {len(verdicts):,} verdicts"
                          + ("" if not verdicts.strip("01") else " (not all of them 0 or 1)"))
    return _replay(json.dumps(inp, sort_keys=True), verdicts)


@lru_cache(maxsize=256)
def _replay(inp_json: str, verdicts: str) -> dict[str, Any]:
    """Cached: the reference's verdicts are replayed for every submission of a variant. The
    result is shared, so callers only read it."""
    inp = json.loads(inp_json)
    times = arrivals(inp)
    rate, timeout = float(inp["service_rate"]), float(inp["timeout_s"])
    calls = 0
    rejected_in_time = 0
    first_late: list[dict[str, float]] = []
    first_needless: list[dict[str, float]] = []

    def rule(state: dict[str, float]) -> bool:
        nonlocal calls, rejected_in_time
        verdict = verdicts[calls] == "1"
        calls += 1
        if verdict and state["predicted_wait_s"] > state["timeout_s"] + GRACE_S and not first_late:
            first_late.append(_snapshot(state))
        if not verdict and state["predicted_wait_s"] <= state["timeout_s"]:
            rejected_in_time += 1
            if not first_needless:
                first_needless.append(_snapshot(state))
        return verdict

    res = engine_sim.simulate_queue(times, rate, timeout, admit=rule)
    if calls != len(times):  # simulate_queue asks once per arrival; a change there breaks this
        raise RuntimeError(f"the queue simulator asked {calls} times for {len(times)} arrivals")
    dead = [(a, start) for a, start in res.dead if start - a > timeout + GRACE_S]
    return {
        "arrivals": len(times),
        "served": len(res.served) + len(res.dead) - len(dead),  # started in time (goodput)
        "dead": len(dead),
        "rejected": len(res.rejected),
        "rejected_in_time": rejected_in_time,
        "dead_work_s": round(len(dead) / rate, ROUND),
        "first_dead": [round(x, ROUND) for x in dead[0]] if dead else None,
        "first_late_admit": first_late[0] if first_late else None,
        "first_needless_reject": first_needless[0] if first_needless else None,
    }


CHECKS: tuple[tuple[str, float, str], ...] = (
    ("runs and returns a bool", 1.0, "admit() returned True or False on every workload."),
    ("no dead work", 2.0, "No admitted request was served after its client had given up."),
    ("goodput", 2.0, "You served as many requests in time as the best rule (within 1 % or 2)."),
    ("rejections", 1.0, "You turned away no more requests than needed (within 1 % or 2)."),
)


def _judge(case: Case, got: Any, exp: dict[str, Any], v: checkkit.Verdicts) -> None:
    inp = case["input"]
    where = describe(case)

    def add(name: str, ok: bool, msg: str = "") -> None:
        v.add(name, case, ok, f"{msg} — on {where}" if msg else "")

    if not _well_formed(got):
        got = {"error": "the output for this workload is malformed"}
    if "error" in got:
        for name, _, _ in CHECKS:
            add(name, False, got["error"].strip())
        return
    try:
        g = replay(inp, got["output"])
    except ReplayError as exc:
        for name, _, _ in CHECKS:
            add(name, False, str(exc))
        return
    e = replay(inp, exp["output"])  # the reference's verdicts, made in this process
    add("runs and returns a bool", True)

    late = _decision(g["first_late_admit"], inp)
    dead_ok = g["dead"] <= e["dead"]
    add("no dead work", dead_ok, "" if dead_ok else (
        f"{g['dead']} of the requests you admitted started after their client had given up "
        f"({_num(g['dead_work_s'])} s of server time on dead work; the best rule has "
        f"{e['dead']}). " + (f"The first wrong admission: {late}, you admitted it, so it was "
                             "going to start too late." if late else "")))

    needless = _decision(g["first_needless_reject"], inp)
    floor = e["served"] - max(SLACK_ABS, math.floor(SLACK_REL * e["served"]))
    good_ok = g["served"] >= floor
    add("goodput", good_ok, "" if good_ok else (
        f"you served {g['served']} requests in time, the best rule serves {e['served']} "
        f"(at least {floor} needed). You turned away {g['rejected_in_time']} requests that would "
        "have started in time" + (f"; the first {needless}." if needless else ".")
        + (f" And {g['dead']} admitted requests went dead, taking server time from live ones."
           if g["dead"] else "")))

    allowed = e["rejected"] + max(SLACK_ABS, math.ceil(SLACK_REL * e["rejected"]))
    rej_ok = g["rejected"] <= allowed
    add("rejections", rej_ok, "" if rej_ok else (
        f"you rejected {g['rejected']} requests, the best rule rejects {e['rejected']} (at most "
        f"{allowed} allowed); {g['rejected_in_time']} of yours would have started in time"
        + (f", the first {needless}." if needless else ".")))


def check(cases: list[Case], got: list[Any], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all workloads; each failure names the smallest workload it fails on."""
    return checkkit.judge_each(cases, got, expected, _judge, size_key, CHECKS, noun="workloads")
