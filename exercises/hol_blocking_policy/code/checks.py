"""Workloads and checks for the scheduling policy (runs in the worker, never in the sandbox).

A case input is {"budget", "cost", "requests": [[rid, arrival, prompt, cached], ...]} (see
driver.py). The policy is free: the checks look only at the simulated TTFTs, never at the order
itself. It passes a workload when its mean TTFT is within MEAN_SLACK of the reference policy's
(the goal: the mean that size-based ordering buys) and its worst TTFT within WORST_SLACK of the
worst that first come, first served gives on the same workload (the starvation bound: FCFS makes
no request wait behind later arrivals, so it is the yardstick for "nobody starves", and it needs
no knowledge of the reference). Every failure names the smallest workload it happens on, the
numbers, and the first step where the student's order and the reference's admitted different
requests.

The sandbox returns only what the policy answered at each call (driver.py). Every TTFT graded here
comes from `replay`: this process runs its own simulator on the workload, feeds it those answers,
and checks at each call that it is at the time and queue the policy was shown; an output that
does not fit is "could not be replayed". So a submission that replaces the driver or patches the
simulator in the sandbox gets exactly what its answers earn.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from exercises import engine_sim
from exercises.catalog import gpu, model
from graders import checkkit
from graders.base import Check

# Pass criteria (the statement and the starter quote them): mean TTFT at most MEAN_SLACK x the
# reference policy's, worst TTFT at most WORST_SLACK x the worst under first come, first served,
# each + ABS_SLACK_S.
MEAN_SLACK = 1.30
WORST_SLACK = 2.0
ABS_SLACK_S = 0.010

# The hidden workloads run on the blurb's engine: Llama-3.1-70B on 8 H100s at 50 % MFU, prompts
# prefilled whole, 32,768 tokens per step.
_M = model("Llama-3.1-70B")
COST: dict[str, float] = {
    "flops_per_s": 8 * gpu("H100 SXM").bf16_flops * 0.5,
    "flops_per_token": 2.0 * _M.params,
    "attn_coeff": 4.0 * _M.layers * _M.q_dim,
}
BUDGET = 32_768
# Tokens per second the engine prefills at its best (weights only): ~28,000.
CAPACITY = COST["flops_per_s"] / COST["flops_per_token"]

# Steps whose admissions the feedback compares (where the two orders first differ).
MAX_STEPS_SHOWN = 60
# How far the sandbox's clock may sit from this process's at a call: float sums in another
# interpreter build may differ in the last bits; a different model of time is far off.
TIME_REL = 1e-9

RANDOM_CASES = 36
MAX_STREAM = 400  # requests in one stream workload, to bound the grading time

Case = dict[str, Any]
Req = tuple[float, int, int]  # arrival, prompt, cached


def make_case(case_id: str, reqs: list[Req], budget: int = BUDGET,
              cost: dict[str, float] | None = None) -> Case:
    """Requests sorted by arrival (stable: equal arrivals keep the order given) and named r0, r1,
    ... in that order, so ids say nothing about size."""
    ordered = sorted(reqs, key=lambda r: r[0])
    return {"id": case_id, "input": {
        "budget": int(budget), "cost": dict(cost or COST),
        "requests": [[f"r{i}", round(float(a), 6), int(p), int(c)]
                     for i, (a, p, c) in enumerate(ordered)]}}


def size_key(case: Case) -> tuple[int, int, str]:
    """Smaller workloads first: requests, then tokens."""
    reqs = case["input"]["requests"]
    return (len(reqs), sum(r[2] for r in reqs), case["id"])


# ---------------------------------------------------------------- workloads


def hol(long: int = 32_768, short: int = 1_024, n: int = 10) -> list[Req]:
    """The blurb: one long prompt first in the queue, n short ones right behind it."""
    return [(0.0, long, 0)] + [(0.0, short, 0)] * n


def stream(short: int, load: float, seconds: float, longs: list[tuple[float, int, int]]) -> list[Req]:
    """Short prompts arriving evenly at `load` times what the engine can prefill, plus long
    ones at given times."""
    rate = load * CAPACITY / short
    n = min(int(rate * seconds), MAX_STREAM)
    return [(i / rate, short, 0) for i in range(n)] + list(longs)


CACHED_CHAT: list[Req] = [(0.0, 30_720, 0), (0.0, 32_000, 31_488)] + [(0.0, 1_024, 0)] * 3


def public_cases(params: dict[str, Any]) -> list[Case]:
    """What Run shows: the variant's own queue, a stream that starves a long prompt under pure
    shortest-first, and a long conversation whose prompt is mostly in the prefix cache."""
    cases = []
    if {"model", "gpu", "tp", "mfu", "long", "short", "n_short"} <= set(params):
        m, g = model(params["model"]), gpu(params["gpu"])
        cost = {"flops_per_s": params["tp"] * g.bf16_flops * params["mfu"],
                "flops_per_token": 2.0 * m.params, "attn_coeff": 4.0 * m.layers * m.q_dim}
        cases.append(make_case("example-your-queue",
                               hol(params["long"], params["short"], params["n_short"]),
                               budget=params["long"], cost=cost))
    else:
        cases.append(make_case("example-your-queue", hol()))
    cases.append(make_case("example-stream", stream(1_024, 1.1, 10, [(0.5, 32_768, 0)])))
    cases.append(make_case("example-cached-chat", CACHED_CHAT))
    return cases


EDGE_CASES: tuple[tuple[str, list[Req]], ...] = (
    ("single-request", [(0.0, 4_096, 0)]),
    ("blurb-queue", hol()),
    ("long-behind-shorts", [(0.0, 1_024, 0)] * 10 + [(0.0, 32_768, 0)]),
    ("equal-prompts", [(0.0, 4_096, 0)] * 12),
    ("shorts-overflow-the-budget", [(0.0, 24_576, 0)] + [(0.0, 2_048, 0)] * 40),
    ("shorts-arrive-during-the-long", [(0.0, 32_768, 0)] + [(0.01 * i, 1_024, 0)
                                                            for i in range(1, 11)]),
    # A conversation with a long cached history needs only 512 tokens of prefill, but its prompt
    # is longer than the uncached long one: ordering by prompt puts it behind that prefill.
    ("cached-long-chat", CACHED_CHAT),
    ("cached-chats-and-a-long-prompt",
     [(0.0, 30_720, 0)] + [(0.0, 31_744 + 256 * i, 30_720 + 256 * i) for i in range(4)]
     + [(0.001, 2_048, 0)] * 4),
    ("overload-stream-long-late", stream(1_024, 1.1, 12, [(2.0, 32_768, 0)])),
    ("overload-stream-long-first", stream(2_048, 1.2, 10, [(0.0, 28_672, 0)])),
    ("overload-stream-two-longs", stream(768, 1.05, 10, [(0.5, 32_768, 0), (2.0, 16_384, 0)])),
    ("light-load-mixed", [(0.3 * i, 1_024 if i % 4 else 16_384, 0) for i in range(20)]),
)


def _prompt(draw: st.DrawFn, long: bool) -> tuple[int, int]:
    """A prompt and its cached prefix, drawn as small integers and scaled."""
    if long:
        prompt = 1_024 * draw(checkkit.integers(8, 32))
        if draw(checkkit.integers(0, 3)) == 0:  # a conversation whose history is cached
            return prompt, prompt - 128 * draw(checkkit.integers(1, 16))
        return prompt, 0
    return 128 * draw(checkkit.integers(1, 32)), 0


@st.composite
def _workload(draw: st.DrawFn) -> list[Req]:
    kind = draw(checkkit.sampled_from(("burst", "burst", "stream", "mixed", "mixed")))
    reqs: list[Req] = []
    if kind == "burst":
        for _ in range(draw(checkkit.integers(1, 3))):
            reqs.append((draw(checkkit.integers(0, 5)) / 1000, *_prompt(draw, True)))
        for _ in range(draw(checkkit.integers(1, 24))):
            reqs.append((draw(checkkit.integers(0, 20)) / 1000, *_prompt(draw, False)))
    elif kind == "stream":
        short = 256 * draw(checkkit.integers(1, 8))
        load = 0.8 + draw(checkkit.integers(0, 50)) / 100
        seconds = draw(checkkit.integers(3, 8))
        longs = [(draw(checkkit.integers(0, 20)) / 10, *_prompt(draw, True))
                 for _ in range(draw(checkkit.integers(1, 2)))]
        reqs = stream(short, load, seconds, longs)
    else:
        t = 0.0
        for _ in range(draw(checkkit.integers(3, 40))):
            t += draw(checkkit.integers(0, 40)) / 100
            reqs.append((t, *_prompt(draw, draw(checkkit.integers(0, 4)) == 0)))
    return reqs


@lru_cache(maxsize=16)
def _random_inputs(seed: int, n: int) -> tuple[str, ...]:
    """n Hypothesis draws for this seed, as JSON (hashable; copied on every use)."""
    return tuple(json.dumps(make_case("", reqs)["input"], sort_keys=True)
                 for reqs in checkkit.draw(_workload(), seed, n))


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """The edge workloads plus Hypothesis-drawn ones, deterministic for a seed, smallest first."""
    cases = [make_case(f"edge-{name}", reqs) for name, reqs in EDGE_CASES]
    return checkkit.with_draws(cases, _random_inputs(int(seed), RANDOM_CASES), size_key)


# ---------------------------------------------------------------- feedback helpers


def _tokens(prompt: int, cached: int) -> str:
    return f"{prompt:,} tok" + (f" ({cached:,} cached)" if cached else "")


def describe(case: Case) -> str:
    """The workload in a line: runs of equal requests grouped, with their arrival span."""
    reqs = case["input"]["requests"]
    groups: list[list[Any]] = []  # [first rid, last rid, prompt, cached, first t, last t, count]
    for rid, t, prompt, cached in reqs:
        g = groups[-1] if groups else None
        if g and g[2] == prompt and g[3] == cached:
            g[1], g[5], g[6] = rid, t, g[6] + 1
        else:
            groups.append([rid, rid, prompt, cached, t, t, 1])
    parts = []
    for first, last, prompt, cached, t0, t1, count in groups:
        who = first if count == 1 else f"{first}..{last}"
        when = f"t={t0:.3f} s" if t0 == t1 else f"t={t0:.3f}..{t1:.3f} s"
        parts.append(f"{who}: {'' if count == 1 else f'{count} x '}{_tokens(prompt, cached)} "
                     f"at {when}")
    text = "; ".join(parts)
    if len(text) > 420:
        text = text[:417] + "..."
    budget = case["input"]["budget"]
    return f"workload {case['id']} ({len(reqs)} requests, budget {budget:,} tokens/step): {text}"


def _well_formed(result: Any) -> bool:
    """The envelope only: an error text, a policy error, or calls (replay checks those)."""
    out = checkkit.envelope(result)
    if not isinstance(out, dict):
        return out is not None  # a run's error text is well formed; any other shape is not
    return "policy_error" not in out or isinstance(out["policy_error"], str)


class ReplayError(ValueError):
    """The recorded answers do not fit the run this process simulates."""


@dataclass(frozen=True)
class Replayed:
    ttft: dict[str, float]
    admissions: list[list[Any]]  # [[step start, [rid, ...]], ...], the first MAX_STEPS_SHOWN


def _engine(inp: dict[str, Any]) -> tuple[list[engine_sim.Request], engine_sim.EngineConfig,
                                          engine_sim.StepCost]:
    """The engine driver.py builds from a case input (the driver cannot import this module)."""
    c = inp["cost"]
    cost = engine_sim.StepCost(flops_per_s=float(c["flops_per_s"]),
                               flops_per_token=float(c["flops_per_token"]),
                               attn_coeff=float(c["attn_coeff"]))
    config = engine_sim.EngineConfig(token_budget=int(inp["budget"]), chunked_prefill=False,
                                     max_seqs=100_000)
    reqs = [engine_sim.Request(rid, float(t), int(prompt) - int(cached), 1)
            for rid, t, prompt, cached in inp["requests"]]
    return reqs, config, cost


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    try:
        value = float(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _calls(raw: Any, n_requests: int) -> list[tuple[float, int, list[str]]]:
    if not isinstance(raw, list):
        raise ReplayError("the output is malformed: it holds no list of calls of order()")
    # Every call admits at least one request (any prompt fits an empty step), so a run has at
    # most one call per request.
    if len(raw) > n_requests:
        raise ReplayError(f"the output records {len(raw):,} calls of order() for "
                          f"{n_requests:,} requests")
    calls = []
    for k, call in enumerate(raw):
        ok = isinstance(call, list) and len(call) == 3
        now = _number(call[0]) if ok else None
        waiting, front = (call[1], call[2]) if ok else (None, None)
        if now is None or isinstance(waiting, bool) or not isinstance(waiting, int) \
                or not isinstance(front, list) or not all(isinstance(r, str) for r in front):
            raise ReplayError(f"call {k + 1} of order() in the output is malformed")
        calls.append((now, waiting, front))
    return calls


def replay(case: Case, output: dict[str, Any]) -> Replayed:
    """The run the recorded answers in `output` ({"calls": ...}) give on this process's
    simulator. Raises ReplayError when they do not fit it."""
    inp = case["input"]
    reqs, config, cost = _engine(inp)
    calls = _calls(output.get("calls"), len(reqs))
    k = 0

    def policy(waiting: list[dict[str, Any]], now: float) -> list[str]:
        nonlocal k
        if k == len(calls):
            raise ReplayError(f"the output records {len(calls)} calls of order(); the run "
                              "needs more")
        shown, n, front = calls[k]
        k += 1
        ids = [w["rid"] for w in waiting]
        if abs(shown - now) > TIME_REL * max(1.0, abs(now)) or n != len(ids):
            raise ReplayError(f"call {k} of order() was at t = {shown:.6g} s with {n} waiting; "
                              f"here it is at t = {now:.6g} s with {len(ids)} waiting")
        chosen = set(front)
        if len(chosen) != len(front) or not chosen <= set(ids):
            raise ReplayError(f"call {k} of order() at t = {now:.3f} s answered ids that are "
                              "not the waiting ones, each once")
        # The engine stops at the first request that does not fit; what follows it in the
        # student's order was never read, so any rest gives the same step.
        return front + [r for r in ids if r not in chosen]

    result = engine_sim.simulate(reqs, config, cost, policy)
    if k != len(calls):
        raise ReplayError(f"the output records {len(calls)} calls of order(); the run makes {k}")
    return Replayed({rid: t.ttft for rid, t in result.requests.items()},
                    [[s.start, list(s.admitted)] for s in result.steps[:MAX_STEPS_SHOWN]])


@lru_cache(maxsize=256)
def _replay_json(case_json: str, output_json: str) -> Replayed:
    return replay(json.loads(case_json), json.loads(output_json))


def replay_cached(case: Case, output: dict[str, Any]) -> Replayed:
    """Cached by value: the reference's answers are replayed for every submission of a variant
    (callers only read the result)."""
    return _replay_json(json.dumps(case, sort_keys=True), json.dumps(output, sort_keys=True))


def _first_difference(got: list[Any], exp: list[Any]) -> str:
    for (tg, ag), (te, ae) in zip(got, exp, strict=False):
        if sorted(ag) != sorted(ae):
            return (f"The orders first differ at t = {tg:.3f} s: your policy admitted "
                    f"{_names(ag)}, the reference admitted {_names(ae)}"
                    + ("" if abs(tg - te) < 1e-6 else f" (at t = {te:.3f} s)") + ".")
    return "The two orders admitted the same requests in the steps shown."


def _names(rids: list[str]) -> str:
    if not rids:
        return "nothing"
    return "[" + ", ".join(rids[:6]) + (f", ... {len(rids)} in all" if len(rids) > 6 else "") + "]"


def _worst(ttft: dict[str, float]) -> tuple[str, float]:
    rid = max(ttft, key=lambda r: (ttft[r], r))
    return rid, ttft[rid]


@lru_cache(maxsize=256)
def _fcfs_ttft_json(case_input: str) -> str:
    """TTFTs under first come, first served: the same engine as driver.py, run here (trusted)."""
    reqs, config, cost = _engine(json.loads(case_input))
    result = engine_sim.simulate(reqs, config, cost, engine_sim.fcfs)
    return json.dumps({rid: t.ttft for rid, t in result.requests.items()})


def fcfs_ttft(case: Case) -> dict[str, float]:
    out: dict[str, float] = json.loads(_fcfs_ttft_json(json.dumps(case["input"], sort_keys=True)))
    return out


# ---------------------------------------------------------------- the checks

# name -> (weight, message when every workload passes)
CHECKS: tuple[tuple[str, float, str], ...] = (
    ("valid order on every call", 1.0,
     "order() returned each waiting id exactly once on every call."),
    ("mean TTFT within 30 % of the reference's", 2.0,
     "Your mean TTFT was within 30 % of the reference policy's (or better) on every workload."),
    ("no starvation: worst TTFT within 2x of first come, first served's", 2.0,
     "No request waited more than twice as long as the longest wait under first come, first "
     "served."),
)


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    v = checkkit.Verdicts(size_key)
    for case, g, e in zip(cases, got, expected, strict=True):
        reqs = case["input"]["requests"]
        where = describe(case)
        if not _well_formed(g):
            g = {"error": "the output line for this workload is malformed"}
        mine: Replayed | None = None
        msg = ""
        if "error" in g or "policy_error" in g["output"]:
            msg = (g.get("error") or g["output"]["policy_error"]).rstrip()
        else:
            try:
                mine = replay(case, g["output"])
            except ReplayError as exc:
                msg = f"your policy's decisions could not be replayed: {exc}"
        if mine is None:
            for name, _, _ in CHECKS:
                v.add(name, case, False, f"{msg} — on {where}")
            continue
        ref = replay_cached(case, e["output"])  # the reference's answers, made in this process
        v.add("valid order on every call", case, True)
        gt, et = mine.ttft, ref.ttft
        gm, em = sum(gt.values()) / len(gt), sum(et.values()) / len(et)
        limit = MEAN_SLACK * em + ABS_SLACK_S
        ok = gm <= limit
        msg = "" if ok else (
            f"your mean TTFT is {gm:.3f} s, the reference policy's {em:.3f} s (limit "
            f"{limit:.3f} s). "
            + _first_difference(mine.admissions, ref.admissions)
            + f" — on {where}")
        v.add("mean TTFT within 30 % of the reference's", case, ok, msg)

        rid, gw = _worst(gt)
        ft = fcfs_ttft(case)
        _, fw = _worst(ft)
        limit = WORST_SLACK * fw + ABS_SLACK_S
        ok = gw <= limit
        msg = ""
        if not ok:
            _, _, prompt, cached = next(r for r in reqs if r[0] == rid)
            msg = (f"request {rid} ({_tokens(prompt, cached)}) waited {gw:.3f} s for its first "
                   f"token; under first come, first served no request waits more than "
                   f"{fw:.3f} s (limit {limit:.3f} s). A request that is passed over at every "
                   "step starves: its priority must improve as it waits. "
                   + _first_difference(mine.admissions, ref.admissions)
                   + f" — on {where}")
        v.add("no starvation: worst TTFT within 2x of first come, first served's", case, ok, msg)

    return v.checks(CHECKS, noun="workloads")
