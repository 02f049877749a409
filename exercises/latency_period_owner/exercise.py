"""Q37: a regular period in the latency trace.

Users say the stream "hiccups" every few seconds while the dashboard's median inter-token latency
looks fine. The student gets two captures of the engine's decode-step durations, at a lower and a
higher request rate (the evidence, generated per variant by code/simulate.py), and walks the
blurb's argument: read the period; decide whether a few slow steps own the p99 (they do exactly
when they are more than 1 % of the steps: one slow step in every T/t); count how many stalls one
reply sits through (almost every reply stutters although its mean gap barely moves); name the
owner from how the period moved with the load (an allocation-driven garbage collector speeds up
with the load, a wall-clock timer does not); write the analysis code; and say what confirms the
owner and what fixes it.

The variant's `owner` is which mechanism generated the stalls; the statement never prints it.
"""
from __future__ import annotations

import json
import math
import random
from pathlib import Path
from types import ModuleType
from typing import Any

from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Holds
from exercises.file_module import load_file
from exercises.slips import Slips, near, tolerances
from exercises.spec import Evidence, Mistake, Quantity

HERE = Path(__file__).resolve().parent

# Parts the statement asks the student to read off the evidence (exercises/evidence_leaks.py):
# the chart's stall height is within the p99's tolerance by design, as the stall owns the p99.
EVIDENCE_MEASURED: dict[str, str] = {
    "p99_itl": "the p99 is read from the captures: the stall height owns it",
}

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# The facts note's worked example: 25 ms steps, a 150 ms stall every 2 s, 300-token replies.
CANONICAL: dict[str, Any] = {
    "owner": "gc",  # hidden: which mechanism the traces come from
    "step_ms": 25,  # decode step at the lower rate
    "step_ms_hi": 28,  # and at the higher rate (a bigger batch)
    "stall_ms": 150,  # what one stall adds to the step it lands in
    "period_s": 2.0,  # stall period at the lower rate
    "rate_lo": 6,  # requests per second, first capture
    "rate_hi": 12,  # second capture
    "reply_tokens": 300,  # a typical reply
    "window_s": 40,  # length of each capture
}

OWNERS = ("gc", "timer")
STEPS_MS = (20, 22, 25, 28, 30, 32, 35, 40)
RATES = (2, 3, 4, 5, 6, 8, 10)
RATIOS = (1.5, 2, 2.5, 3)
REPLIES = (200, 250, 300, 400, 500, 600, 800)
# Timers run on round intervals; a collector's period is whatever the allocation rate makes it.
TIMER_PERIODS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0)
P = 0.99  # the quantile the parts ask about


def _load(name: str) -> ModuleType:
    """code/<name>.py, loaded once by path (the code folder is not a package)."""
    return load_file(f"roofline_latency_period_owner_{name}", HERE / "code" / f"{name}.py")


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        owner = rng.choice(OWNERS)
        step = rng.choice(STEPS_MS)
        rate = rng.choice(RATES)
        ratio = rng.choice(RATIOS)
        period = (rng.choice(TIMER_PERIODS) if owner == "timer"
                  else round(rng.uniform(1.0, 5.0), 1))
        p = dict(CANONICAL)
        p.update(
            owner=owner,
            step_ms=step,
            # Twice the batch costs a few more milliseconds per step: weights dominate the read.
            step_ms_hi=round(step * (1 + 0.1 * (ratio - 1))),
            stall_ms=rng.randrange(60, 310, 10),
            period_s=period,
            rate_lo=rate,
            rate_hi=round(rate * ratio, 1),
            reply_tokens=rng.choice(REPLIES),
        )
        if float(p["rate_hi"]).is_integer():
            p["rate_hi"] = int(p["rate_hi"])
        return p

    return draw_sensible(rng, draw, is_sensible)


def period_hi(p: dict[str, Any]) -> float:
    """The stall period at the higher rate: a collector fires after a fixed number of allocations,
    and allocations grow with the request rate; a timer keeps its interval."""
    if p["owner"] == "gc":
        return p["period_s"] * p["rate_lo"] / p["rate_hi"]
    return float(p["period_s"])


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    t, s, period = p["step_ms"], p["stall_ms"], p["period_s"] * 1000
    hi = period_hi(p) * 1000
    if s / period > 0.08 or hi < 600 or s / hi > 0.25:
        return False  # the stall must stay a small share of the period (see stalls_per_reply)
    # The p99 question must not hinge on the approximation t/T versus the exact t/(T - s).
    if not (t / period >= 0.012 or t / (period - s) <= 0.008):
        return False
    return evidence_agrees(p)


def evidence_agrees(p: dict[str, Any]) -> bool:
    """The graded numbers can be read off the variant's evidence: the reference detector finds
    each capture's period within 3 %, and the first capture's p99 is within 4 % of the answer."""
    ref = _load("reference")
    s = solve(p)
    for (ts, ms), period, step in ((_trace(p, "lo"), p["period_s"], p["step_ms"]),
                                   (_trace(p, "hi"), period_hi(p), p["step_ms_hi"])):
        found = ref.stall_period(ts, ms, step + p["stall_ms"] / 2)
        if found is None or abs(found / period - 1) > 0.03:
            return False
    ts, ms = _trace(p, "lo")
    q = sorted(ms)[math.ceil(P * len(ms)) - 1]
    return abs(q / s["p99_itl"].value - 1) <= 0.04


# ----------------------------------------------------------------------------------------------
# The evidence


def _trace(p: dict[str, Any], which: str) -> tuple[list[float], list[float]]:
    """One capture, seeded from the variant and the load, so a student's file is theirs alone."""
    sim = _load("simulate")
    rng = random.Random(f"q37|{json.dumps(p, sort_keys=True)}|{which}")
    period = p["period_s"] if which == "lo" else period_hi(p)
    step = p["step_ms"] if which == "lo" else p["step_ms_hi"]
    phase = rng.uniform(0.2, 0.9) * period
    stalls = sim.stall_times(p["owner"], period, p["window_s"], rng, phase)
    return sim.step_trace(step, p["stall_ms"], stalls, p["window_s"], rng)


def evidence(p: dict[str, Any]) -> dict[str, Evidence]:
    series = []
    for which, rate in (("lo", p["rate_lo"]), ("hi", p["rate_hi"])):
        ts, ms = _trace(p, which)
        series.append({"label": f"step duration at {rate} req/s", "unit": "ms",
                       "points": [[t, m] for t, m in zip(ts, ms, strict=True)]})
    return {
        "latency": Evidence(
            title="Decode-step durations at two request rates",
            filename="q37_latency.json",
            kind="series",
            data={"x": {"label": "time since the capture started", "unit": "s"},
                  "series": series},
            caption=(f"Two {p['window_s']}-second captures of the engine loop, one point per "
                     f"decode step: x is when the step finished, y how long it took. The first "
                     f"capture ran at {p['rate_lo']} req/s, the second at {p['rate_hi']} req/s."),
        )
    }


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    t, s = p["step_ms"], p["stall_ms"]
    period, hi = p["period_s"], period_hi(p)
    n = p["reply_tokens"]

    steps_per_period = period * 1000 / t
    f_simple = t / (period * 1000)  # one slow step in every T/t
    f_exact = t / (period * 1000 - s)  # the stall's own time is not available for steps
    owned = f_simple > 1 - P
    p99 = t + s if owned else t
    mean_gap = t + f_exact * s
    reply_s = n * t / 1000
    stalls = reply_s / period
    stalls_exact = n * f_exact
    exposure = min(1.0, reply_s / period)
    tpot_rise = stalls * s / n
    slope = math.log(hi / period) / math.log(p["rate_hi"] / p["rate_lo"])
    # Little's law: requests in flight = arrival rate x time each one streams.
    batch = round(p["rate_lo"] * reply_s)
    ratio = p["rate_hi"] / p["rate_lo"]

    s_out: dict[str, Any] = {
        # part answers
        "period": Quantity(period, "s"),
        "p99_itl": Quantity(p99, "ms"),
        "stalls_per_reply": Quantity(stalls, ""),
        "owner": p["owner"],
        "analysis": "code/reference.py",
        # intermediates
        "period_hi_s": hi,
        "period_ratio": period / hi,
        "rate_ratio": ratio,
        "steps_per_period": steps_per_period,
        "slow_pct": f_simple * 100,
        "slow_pct_exact": f_exact * 100,
        "slow_per_1000": f_simple * 1000,
        "owned": owned,
        "stall_step_ms": t + s,
        "mean_gap_ms": mean_gap,
        "stall_time_pct": s / (period * 1000) * 100,
        "reply_s": reply_s,
        "stalls_exact": stalls_exact,
        "exposure_pct": exposure * 100,
        "tpot_rise_ms": tpot_rise,
        "tpot_ms": t + tpot_rise,
        "batch": batch,
        "slope": slope,
        "threshold_ms": t + s / 2,
        "p999_ms": t + s,  # at least 1 in 1,000 steps stalls in every variant
        "window_s": p["window_s"],
        "stalls_in_window": p["window_s"] / period,
        "stalls_in_window_hi": p["window_s"] / hi,
        "owner_label": "garbage collection" if p["owner"] == "gc" else "a wall-clock timer",
    }
    s_out["worst_md"] = (
        "its worst gap is the stall" if stalls >= 1 else
        f"{exposure * 100:.0f} % of such replies have the stall as their worst gap")
    s_out["verdict"] = (
        f"**the stalls own the p99**: they are {f_simple * 100:.2f} % of the steps, more than "
        f"the 1 % above the p99, so the p99 gap is a stalled step, about **{t + s} ms**"
        if owned else
        f"**the p99 is still an ordinary step**: the stalls are only {f_simple * 100:.2f} % of "
        f"the steps, under the 1 % above the p99, so the p99 gap is about **{t} ms** and the "
        f"stalls own the p99.9 ({t + s} ms) instead")
    if p["owner"] == "gc":
        s_out["owner_md"] = (
            f"The period fell from {period:g} s to {hi:.3g} s while the rate rose "
            f"{ratio:g}×: period × rate stayed at {period * p['rate_lo']:.3g} requests per stall, "
            "and the log-log slope is −1. Something fires once per fixed amount of work. A gen-2 "
            "collection is exactly that: CPython collects after a number of allocations, and the "
            "allocations grow with the requests served. A timer would have kept its interval. "
            "So the owner is **garbage collection**.")
    else:
        s_out["owner_md"] = (
            f"The period stayed at {period:g} s while the rate rose {ratio:g}× (log-log slope 0). "
            "A collector fires after a number of allocations, which grow with the requests "
            f"served, so its period would have shrunk to about {period / ratio:.3g} s. Something "
            "on the wall clock fires instead: a Prometheus scrape of a heavy /metrics page, a "
            "health check, the periodic stats log. So the owner is **a wall-clock timer**.")
    s_out["fix"] = _model_answer(p, s_out)
    return s_out


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    common = (
        f"The tail arithmetic: one slow step in every {s['steps_per_period']:.0f} is "
        f"{s['slow_pct']:.2f} % of the gaps, and a stall delays every running request at once, so "
        "the per-token share equals the per-step share (not times the batch). A "
        f"{p['reply_tokens']}-token reply streams for {s['reply_s']:.1f} s and sits through about "
        f"{s['stalls_per_reply'].value:.1f} stalls: its mean gap rises by only "
        f"{s['tpot_rise_ms']:.1f} ms, but {s['worst_md']}, so watch the per-request maximum gap "
        "and the p99.9, not the mean TPOT."
    )
    if p["owner"] == "gc":
        return (
            f"The period went from {p['period_s']:g} s to {s['period_hi_s']:.2f} s when the load "
            f"went from {p['rate_lo']} to {p['rate_hi']} req/s: period × rate stayed constant "
            "(log-log slope −1), the signature of a collector that fires after a fixed number of "
            "allocations. A timer would have kept its interval. To confirm it against the "
            "runner-up, timestamp every gen-2 collection (gc.callbacks, or the "
            "python_gc_collections_total{generation=\"2\"} counter) and check that nearly every "
            "stall lines up with one, and that the scrape or log clock does not. Fix: freeze the "
            "heap after start-up and warm-up (gc.freeze(), as vLLM does) so gen-2 passes stop "
            "rescanning long-lived objects, cut per-token allocations on the hot path, raise the "
            "collection thresholds or trigger collections between steps. And keep the API "
            "server's collector out of the engine loop's process. " + common
        )
    return (
        f"The period stayed at {p['period_s']:g} s while the load went from {p['rate_lo']} to "
        f"{p['rate_hi']} req/s (log-log slope 0): a collector would have sped up with the "
        "allocation rate, so this is something on a wall-clock timer, such as a metrics scrape, "
        "a health check or the periodic stats log. To confirm it against the runner-up, "
        "line the stall timestamps up with the scraper's or logger's clock (they phase-lock to it) "
        "and check that gen-2 collections (gc.callbacks) do not line up. Fix: make the handler "
        "cheap and lengthen the interval. And move it off the engine loop: render /metrics from "
        "a snapshot in another thread or process, log stats asynchronously. " + common
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    t, s_ms, period, hi = p["step_ms"], p["stall_ms"], p["period_s"], s["period_hi_s"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near).add

    add("period", 2 * period,
        "That is two periods: there is a spike in between. Measure from one spike to the next, "
        "or divide the span by the number of gaps (an autocorrelation can also peak at twice the "
        "lag).", "harmonic", kind="wrong_scope")
    add("period", period * 1000 / t,
        f"That is the period counted in steps ({s['steps_per_period']:.0f} steps of {t} ms). The "
        "part asks for seconds.", "steps", kind="unit_slip")
    add("period", hi,
        f"That is the period in the second capture, at {p['rate_hi']} req/s. The part asks about "
        f"the first one, at {p['rate_lo']} req/s.", "other_capture", kind="wrong_scope")
    add("period", 1 / period,
        "That is the frequency (stalls per second). The part asks for the period, its inverse.",
        "frequency", kind="inverted")

    if s["owned"]:
        add("p99_itl", t,
            f"The ordinary step is the median, not the p99. The stalls are one step in every "
            f"{s['steps_per_period']:.0f}, {s['slow_pct']:.2f} % of the gaps, more than the 1 % that "
            "lies above the p99, so the p99 lands on a stalled step.", "few_steps_cannot_matter",
            kind="mean_vs_tail")
    else:
        add("p99_itl", t + s_ms,
            f"The stalls are only {s['slow_pct']:.2f} % of the gaps (one step in "
            f"{s['steps_per_period']:.0f}), under the 1 % above the p99, so the p99 is an ordinary "
            f"step; they own the p99.9. If you multiplied by the {s['batch']} requests in the "
            "batch: a stall delays all of them at the same moment, so the share of slow gaps is "
            "the same per token as per step.", "times_batch", kind="misread_mechanism")
    add("p99_itl", s["mean_gap_ms"],
        "That is the mean gap. A quantile is not moved a little by rare slow steps: it is either "
        "an ordinary step or a stalled one.", "mean", kind="mean_vs_tail")
    add("p99_itl", s_ms,
        f"That is the pause alone. The stalled step still does its own {t} ms of work, so the "
        f"gap is {t} + {s_ms} ms.", "pause_only", kind="miscounted_term")

    n = p["reply_tokens"]
    stalls = s["stalls_per_reply"].value
    add("stalls_per_reply", stalls * s["batch"],
        f"You multiplied by the {s['batch']} requests in the batch. Each stall delays all of "
        "them at once, but each reply sits through it only once.", "times_batch",
        kind="misread_mechanism")
    add("stalls_per_reply", n / period,
        f"You divided tokens by seconds. Turn the reply into time first: {n} tokens × {t} ms = "
        f"{s['reply_s']:.1f} s, then divide by the period.", "tokens_over_seconds",
        kind="unit_slip")
    add("stalls_per_reply", min(1.0, s["reply_s"] / period),
        "That is the chance of seeing at least one stall, capped at 1. The part asks for the "
        "average number of stalls.", "probability", kind="mean_vs_tail")
    add("stalls_per_reply", n * s_ms / (period * 1000),
        f"You used the share of time spent stalled ({s['stall_time_pct']:.1f} %). A reply meets "
        f"a stall once per period it lasts, and it lasts {s['reply_s']:.1f} s.", "time_share",
        kind="mean_vs_tail")
    add("stalls_per_reply", s["reply_s"] / hi,
        f"You used the period of the second capture ({hi:.2f} s). The part asks about the first "
        "load.", "other_capture", kind="wrong_scope")

    wrong_owner = "timer" if p["owner"] == "gc" else "gc"
    owner_feedback = {
        "timer": (f"A wall-clock timer keeps its interval whatever the load, but here the period "
                  f"fell from {period:g} s to {hi:.2f} s when the rate went from {p['rate_lo']} "
                  f"to {p['rate_hi']} req/s: period × rate is constant. Something that fires "
                  "per amount of work, not per second, owns the stall."),
        "gc": (f"A collector fires after a number of allocations, and allocations grow with the "
               f"request rate, so its period would have shrunk {s['rate_ratio']:g}×. Here it "
               f"stayed {period:g} s at both rates: something on the clock owns the stall."),
    }
    out.append(Mistake("owner", wrong_owner, owner_feedback[wrong_owner], "wrong_owner",
                       kind="misread_mechanism"))
    out.append(Mistake(
        "owner", "batch_job",
        "A long prompt from a periodic job slows every step while its prefill chunks run: "
        "several steps in a row, not one isolated step per period.", "batch_job",
        kind="misread_mechanism"))
    out.append(Mistake(
        "owner", "thermal",
        "Power or thermal capping lowers the clocks for seconds at a time and stretches every "
        "step in that window; these stalls are single steps.", "thermal", kind="misread_mechanism"))
    out.append(Mistake(
        "owner", "host",
        "Log rotation, page-cache writeback and the like are irregular or hourly, not a steady "
        "period of seconds that moves (or not) with the load.", "host", kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [Holds(p["rate_hi"] > p["rate_lo"], "the second capture runs at the higher rate")]
