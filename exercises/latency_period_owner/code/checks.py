"""Test cases and checks for the latency-period analysis (runs in the worker, never in the sandbox).

A case input is one of the kinds driver.py lists (trace, period, exposure, alignment, slope). Each
result handed to `check()` is {"output": <driver.run_case dict>} or {"error": "..."}; `expected`
holds the reference's results for the same cases. Every check reports the smallest case it fails
on, what was expected and what came back.

Hidden cases: hand-written edges plus cases drawn with Hypothesis from the seed. Hypothesis draws
only small knobs (which period, how much jitter, how many stalls dropped, a noise seed below 100);
the timestamps are then built from those knobs with `random.Random`, so a seed gives the same cases
in every process. Drawn cases whose answer would hinge on a rounding choice (a gap halfway between
two multiples of the period, a slow-step count right at the quantile's boundary, a stall exactly
`tol_s` from an event) are redrawn, so a solution that follows the starter's rules gets the
reference's answers whatever estimator details it picks.
"""
from __future__ import annotations

import json
import math
import random
from functools import lru_cache
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

Case = dict[str, Any]

# What the starter promises about comparisons.
PERIOD_REL_TOL = 0.03  # detect_period, stall_period: within 3 % of the reference's period
FRACTION_ABS_TOL = 1e-9  # slow_fraction, event_alignment: shares of whole counts
VALUE_TOL = 1e-6  # request_stall_exposure, period_load_slope: closed forms (relative and absolute)
TS_ABS_TOL = 1e-9  # slow_steps: the input's own timestamps

# The None decision must not hinge on the estimator: a periodic case fits within 15 % of the
# period, an aperiodic one misses by at least 35 % somewhere (the rule's line is 25 %).
FIT_CLEAR = 0.15
MISFIT_CLEAR = 0.35

RANDOM_COUNTS = {"period": 60, "trace": 24, "exposure": 12, "alignment": 24, "slope": 16}
KIND_ORDER = ("exposure", "slope", "period", "alignment", "trace")


def _load(name: str) -> ModuleType:
    return checkkit.sibling(__file__, name)


def _exercise() -> ModuleType:
    from exercises.latency_period_owner import exercise  # the worker has the package

    return exercise


# ---------------------------------------------------------------- case construction


def _case(case_id: str, about: str, **inp: Any) -> Case:
    return {"id": case_id, "about": about, "input": inp}


def _r(x: float, nd: int = 4) -> float:
    return round(float(x), nd)


def size_key(case: Case) -> tuple[int, int, str]:
    """Smaller cases first: how many numbers the input holds, then the kind, then the input."""
    inp = case["input"]
    n = sum(len(v) for v in inp.values() if isinstance(v, list))
    return (n, KIND_ORDER.index(inp["kind"]), json.dumps(inp, sort_keys=True))


def fit_margin(stall_ts: list[float]) -> float | None:
    """How far the worst gap is from a whole number of periods, as a share of the period, by the
    starter's procedure (None for fewer than 3 stalls). Below 0.25 the train is periodic."""
    ts = sorted(stall_ts)
    if len(ts) < 3:
        return None
    gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    g_min = min(gaps)
    if g_min <= 0:
        return None
    single = [g for g in gaps if g < 1.5 * g_min]
    p0 = sum(single) / len(single)
    ks = [max(1, round(g / p0)) for g in gaps]
    period = sum(gaps) / sum(ks)
    # A gap near the halfway point between two multiples, where round() could go either way, is
    # about half a period off whichever way it goes: clearly aperiodic, not borderline.
    return max(abs(g - k * period) / period for g, k in zip(gaps, ks, strict=True))


def _clear(stall_ts: list[float]) -> bool:
    m = fit_margin(stall_ts)
    return m is None or m <= FIT_CLEAR or m >= MISFIT_CLEAR


def public_cases(params: dict[str, Any]) -> list[Case]:
    """What Run plays: the variant's first capture (the evidence file), plus one small example of
    each other function."""
    ex = _exercise()
    p = params if "period_s" in params else ex.CANONICAL
    ts, ms = ex._trace(p, "lo")
    thr = p["step_ms"] + p["stall_ms"] / 2
    hi = ex.period_hi(p)
    reply_s = p["reply_tokens"] * p["step_ms"] / 1000
    return [
        _case("example-evidence", f"your evidence file's first capture ({p['rate_lo']} req/s)",
              kind="trace", ts=ts, step_ms=ms, threshold_ms=thr, p=0.99),
        _case("example-missed-stall", "stalls every 2 s, the one at 6.4 s was not captured",
              kind="period", stall_ts=[0.4, 2.4, 4.4, 8.4, 10.4, 12.4]),
        _case("example-exposure", "a typical reply of your variant against the first period",
              kind="exposure", duration_s=reply_s, period_s=p["period_s"]),
        _case("example-alignment", "gen-2 collections logged a few ms before each stall",
              kind="alignment", stall_ts=[1.02, 3.05, 5.01, 7.03],
              event_ts=[1.0, 3.0, 5.0, 7.0, 9.0], tol_s=0.1),
        _case("example-slope", "the two captures of your variant",
              kind="slope", windows=[[p["rate_lo"], p["period_s"]], [p["rate_hi"], _r(hi, 6)]]),
    ]


def _trace_case(case_id: str, about: str, ms: list[float], thr: float, p: float = 0.99,
                step_s: float | None = None) -> Case:
    """A small hand-written trace: steps back to back, ts = when each one ended."""
    ts, clock = [], 0.0
    for d in ms:
        clock += d / 1000 if step_s is None else step_s
        ts.append(_r(clock))
    return _case(case_id, about, kind="trace", ts=ts, step_ms=list(ms), threshold_ms=thr, p=p)


def _flat_with_spikes(n: int, every: int, first: int, t: float = 25.0, s: float = 150.0
                      ) -> list[float]:
    return [t + s if i >= first and (i - first) % every == 0 else t for i in range(n)]


def edge_cases() -> list[Case]:
    cases = [
        # detect_period
        _case("edge-no-stalls", "no stalls at all", kind="period", stall_ts=[]),
        _case("edge-one-stall", "a single stall", kind="period", stall_ts=[5.0]),
        _case("edge-two-stalls", "two stalls: the period may be longer than half the capture",
              kind="period", stall_ts=[1.0, 3.0]),
        _case("edge-three-even", "three stalls, one period apart", kind="period",
              stall_ts=[0.0, 1.0, 2.0]),
        _case("edge-three-one-missed", "three stalls, the middle gap missing one", kind="period",
              stall_ts=[0.0, 1.0, 3.0]),
        _case("edge-mostly-missed", "period 1 s, most stalls missed", kind="period",
              stall_ts=[0.0, 2.0, 4.0, 5.0, 7.0, 9.0]),
        _case("edge-unsorted", "period 1 s, timestamps out of order", kind="period",
              stall_ts=[4.0, 0.0, 2.0, 1.0, 3.0]),
        _case("edge-jittered", "period 1 s with jitter", kind="period",
              stall_ts=[0.0, 1.04, 1.97, 3.02, 4.0, 4.93, 6.0]),
        _case("edge-half-period-gap", "gaps of 1, 1, 1.5, 1 s: no single period", kind="period",
              stall_ts=[0.0, 1.0, 2.0, 3.5, 4.5]),
        _case("edge-irregular", "irregular stalls", kind="period",
              stall_ts=[0.0, 0.8, 2.1, 2.9, 4.6, 5.3]),
        _case("edge-epoch-clock", "period 2 s on an epoch clock", kind="period",
              stall_ts=[1_700_000_000.0, 1_700_000_002.0, 1_700_000_004.0, 1_700_000_006.0]),
        _case("edge-long-period", "period 30 s", kind="period",
              stall_ts=[12.0, 42.0, 72.0, 102.0]),
        # traces
        _case("edge-empty-trace", "an empty trace", kind="trace", ts=[], step_ms=[],
              threshold_ms=50.0, p=0.99),
        _trace_case("edge-flat-trace", "no slow step at all", [25.0, 25.4, 24.8, 25.1, 25.0,
                                                               24.9], 100.0),
        _trace_case("edge-at-threshold", "some steps exactly at the threshold (not slow)",
                    [25.0, 25.0, 100.0, 25.0, 25.0, 100.0, 25.0, 25.0, 100.0, 25.0], 25.0,
                    p=0.5),
        _trace_case("edge-stalls-own-p99", "a stall every 20 steps: 5 % of steps",
                    _flat_with_spikes(100, 20, 7), 100.0),
        _trace_case("edge-stalls-own-p999-only", "a stall every 200 steps: 0.5 % of steps",
                    _flat_with_spikes(1000, 200, 50), 100.0),
        _trace_case("edge-period-longer-than-half", "two stalls in the capture",
                    _flat_with_spikes(60, 40, 10), 100.0),
        _trace_case("edge-one-stall-trace", "one stall in the capture",
                    _flat_with_spikes(30, 100, 12), 100.0),
        # request_stall_exposure
        _case("edge-exposure-zero", "a request that streams for 0 s", kind="exposure",
              duration_s=0.0, period_s=2.0),
        _case("edge-exposure-one-period", "a request exactly one period long", kind="exposure",
              duration_s=2.0, period_s=2.0),
        _case("edge-exposure-long", "a request longer than the period", kind="exposure",
              duration_s=7.5, period_s=2.0),
        _case("edge-exposure-short", "a quarter of a period", kind="exposure",
              duration_s=1.0, period_s=4.0),
        _case("edge-exposure-zero-period", "period 0 (invalid)", kind="exposure",
              duration_s=1.0, period_s=0.0),
        _case("edge-exposure-negative", "a negative duration (invalid)", kind="exposure",
              duration_s=-1.0, period_s=2.0),
        # event_alignment
        _case("edge-align-no-stalls", "no stalls", kind="alignment", stall_ts=[],
              event_ts=[1.0, 2.0], tol_s=0.1),
        _case("edge-align-no-events", "no events", kind="alignment", stall_ts=[1.0, 2.0],
              event_ts=[], tol_s=0.1),
        _case("edge-align-event-after", "each event comes just after its stall",
              kind="alignment", stall_ts=[1.0, 2.0, 3.0], event_ts=[1.05, 2.05, 3.05], tol_s=0.1),
        _case("edge-align-event-before", "each event comes just before its stall",
              kind="alignment", stall_ts=[1.0, 2.0, 3.0], event_ts=[0.95, 1.95, 2.95], tol_s=0.1),
        _case("edge-align-many-events", "a timer ticking much faster than the stalls",
              kind="alignment", stall_ts=[1.0, 3.0],
              event_ts=[0.0, 0.5, 1.02, 1.5, 2.0, 2.5, 3.5, 4.0], tol_s=0.05),
        _case("edge-align-unsorted", "events out of order", kind="alignment",
              stall_ts=[3.0, 1.0, 2.0], event_ts=[2.98, 9.0, 1.01, 5.0], tol_s=0.05),
        # period_load_slope
        _case("edge-slope-one-window", "a single window (invalid)", kind="slope",
              windows=[[5.0, 2.0]]),
        _case("edge-slope-same-rate", "two windows at the same rate (invalid)", kind="slope",
              windows=[[5.0, 2.0], [5.0, 3.0]]),
        _case("edge-slope-zero-rate", "a rate of 0 (invalid)", kind="slope",
              windows=[[0.0, 2.0], [4.0, 1.0]]),
        _case("edge-slope-gc", "period halves when the rate doubles", kind="slope",
              windows=[[4.0, 2.0], [8.0, 1.0]]),
        _case("edge-slope-timer", "period unchanged when the rate doubles", kind="slope",
              windows=[[4.0, 2.0], [8.0, 2.0]]),
        _case("edge-slope-three", "three windows", kind="slope",
              windows=[[2.0, 5.0], [4.0, 2.6], [10.0, 0.9]]),
    ]
    return cases


# ---------------------------------------------------------------- Hypothesis knobs

# Periods drawn from a list. A seed draws the same knobs in every process (graders.checkkit.draw
# leaves out the literals Hypothesis would collect from loaded source files).
PERIODS = (0.5, 0.8, 1.0, 1.25, 2.0, 2.5, 3.0, 4.0, 7.5, 10.0, 30.0)


@st.composite
def _period_knobs(draw: st.DrawFn) -> dict[str, Any]:
    return {"period": draw(checkkit.sampled_from(PERIODS)), "n": draw(checkkit.integers(2, 30)),
            "phase": draw(checkkit.integers(0, 9)),
            "jitter": draw(checkkit.sampled_from((0, 1, 2, 5))),
            "drop": draw(checkkit.sampled_from((0, 0, 10, 30, 60))),
            "aperiodic": draw(checkkit.sampled_from((False, False, False, True))),
            "offset": draw(checkkit.sampled_from((0, 0, 1000, 86400))),
            "shuffle": draw(checkkit.booleans()), "noise": draw(checkkit.integers(0, 99))}


@st.composite
def _trace_knobs(draw: st.DrawFn) -> dict[str, Any]:
    return {"step": draw(checkkit.sampled_from((10, 20, 25, 40))),
            "n4": draw(checkkit.integers(30, 99)),
            "div": draw(checkkit.sampled_from((1.5, 2.5, 3, 4, 6, 8, 12))),
            "stall": draw(checkkit.sampled_from((0, 2, 4, 8))),
            "mode": draw(checkkit.sampled_from(("gc", "timer", "timer", "random"))),
            "missing": draw(checkkit.sampled_from((0, 0, 1, 2))),
            "p": draw(checkkit.sampled_from((0.9, 0.95, 0.99, 0.999))),
            "noise": draw(checkkit.integers(0, 99))}


@st.composite
def _exposure_knobs(draw: st.DrawFn) -> dict[str, Any]:
    return {"duration": draw(checkkit.sampled_from((0.0, 0.3, 0.5, 1.0, 2.0, 3.0, 7.5, 12.0,
                                                     30.0))),
            "period": draw(checkkit.sampled_from((0.5, 1.0, 2.0, 5.0, 10.0, 30.0)))}


@st.composite
def _alignment_knobs(draw: st.DrawFn) -> dict[str, Any]:
    return {"n": draw(checkkit.integers(0, 30)),
            "period": draw(checkkit.sampled_from((0.5, 1.0, 2.0, 5.0))),
            "tol": draw(checkkit.sampled_from((0.02, 0.05, 0.1, 0.2))),
            "source": draw(checkkit.sampled_from(("true", "true", "other", "both"))),
            "capture": draw(checkkit.sampled_from((1.0, 0.9, 0.6))),
            "shuffle": draw(checkkit.booleans()), "noise": draw(checkkit.integers(0, 99))}


@st.composite
def _slope_knobs(draw: st.DrawFn) -> dict[str, Any]:
    return {"windows": draw(checkkit.integers(2, 6)),
            "mode": draw(checkkit.sampled_from(("gc", "timer", "mixed"))),
            "noise": draw(checkkit.integers(0, 99))}


STRATEGIES = {"period": _period_knobs, "trace": _trace_knobs, "exposure": _exposure_knobs,
              "alignment": _alignment_knobs, "slope": _slope_knobs}


@lru_cache(maxsize=32)
def _random_knobs(seed: int, kind: str, n: int) -> tuple[str, ...]:
    """n Hypothesis draws of one kind's knobs for this seed, as JSON strings."""
    return tuple(json.dumps(knobs, sort_keys=True)
                 for knobs in checkkit.draw(STRATEGIES[kind](), seed, n))


def _rng(kind: str, knobs: dict[str, Any], attempt: int) -> random.Random:
    return random.Random(f"q37|{kind}|{json.dumps(knobs, sort_keys=True)}|{attempt}")


def _build_period(k: dict[str, Any], rng: random.Random) -> tuple[list[float], str] | None:
    period = k["period"]
    if k["aperiodic"]:
        gaps = [period * rng.uniform(1.0, 2.6) for _ in range(max(2, k["n"]))]
        about = f"{len(gaps) + 1} stalls at irregular gaps of {period:g}-{2.6 * period:g} s"
    else:
        # Timestamps on the grid plus jitter, then some dropped (never two ends of a long run).
        j = k["jitter"] / 100
        grid = [period * (i + k["phase"] / 10) for i in range(k["n"] + 1)]
        ts = [g + rng.uniform(-j, j) * period for g in grid]
        kept = [ts[0]] + [t for t in ts[1:-1] if rng.random() >= k["drop"] / 100] + [ts[-1]]
        # At most 5 periods in one gap, so the count of periods per gap stays unambiguous.
        if any(b - a > 5.5 * period for a, b in zip(kept, kept[1:], strict=False)):
            return None
        gaps = [b - a for a, b in zip(kept, kept[1:], strict=False)]
        about = (f"period {period:g} s, {len(kept)} stalls, jitter ±{k['jitter']} %, "
                 f"{len(ts) - len(kept)} missed")
    ts = [k["offset"] + k["phase"] / 10 * period]
    for g in gaps:
        ts.append(ts[-1] + g)
    ts = [_r(t) for t in ts]
    if len(set(ts)) != len(ts):
        return None
    if k["shuffle"]:
        rng.shuffle(ts)
        about += ", in shuffled order"
    return ts, about


def _build_trace(k: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str] | None:
    sim = _load("simulate")
    t = float(k["step"])
    n = 4 * k["n4"]
    window = n * t / 1000
    period = window / k["div"]
    if period < 10 * t / 1000:
        return None  # the stall must be rarer than one step in ten
    stall = min(k["stall"] * t, 0.3 * period * 1000)
    phase = rng.uniform(0.1, 0.9) * period
    if k["mode"] == "random":
        stalls = sorted(rng.uniform(0, window) for _ in range(int(k["div"])))
        about = f"{len(stalls)} stalls at random times"
    else:
        stalls = sim.stall_times(k["mode"], period, window, rng, phase)
        about = f"{k['mode']} stalls every {period:.3g} s"
    if stall == 0:
        stalls, about = [], "no stalls"
    ts, ms = sim.step_trace(t, stall, stalls, window, rng)
    # Missing samples: chunks of 5-30 consecutive steps the collector lost.
    for _ in range(k["missing"]):
        if len(ts) < 40:
            break
        a = rng.randrange(0, len(ts) - 30)
        b = a + rng.randint(5, 30)
        del ts[a:b], ms[a:b]
    if k["missing"]:
        about += f", {k['missing']} runs of samples missing"
    thr = t + stall / 2 if stall else 1.5 * t
    inp = {"kind": "trace", "ts": ts, "step_ms": ms, "threshold_ms": _r(thr, 2), "p": k["p"]}
    # Keep away from the rounding-sensitive lines (see the module docstring).
    slow = [x for x, m in zip(ts, ms, strict=True) if m > inp["threshold_ms"]]
    if any(abs(m - inp["threshold_ms"]) < 0.01 * t for m in ms):
        return None
    n_slow, n_all = len(slow), len(ms)
    if n_all and abs(n_slow - (1 - k["p"]) * n_all) < 0.5:
        return None
    if not _clear(slow):
        return None
    about = f"ordinary steps ~{t:g} ms, {about}, stall +{stall:.0f} ms"
    return inp, about


def _build_alignment(k: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str] | None:
    period, tol = k["period"], k["tol"]
    stalls = [_r(period * (i + rng.uniform(0.2, 0.8))) for i in range(k["n"])]
    events: list[float] = []
    if k["source"] in ("true", "both"):
        # The true source's events sit within 0.8 tol of their stall, on either side.
        events += [_r(s + rng.uniform(-0.8, 0.8) * tol) for s in stalls
                   if rng.random() < k["capture"]]
    if k["source"] in ("other", "both"):
        other = period * rng.choice((0.7, 1.3, 2.9))
        phase = rng.uniform(0, other)
        events += [_r(phase + i * other) for i in range(int(k["n"] * period / other) + 2)]
    if k["shuffle"]:
        rng.shuffle(events)
    for s in stalls:
        d = min((abs(e - s) for e in events), default=math.inf)
        if abs(d - tol) < 0.002:
            return None
    inp = {"kind": "alignment", "stall_ts": stalls, "event_ts": events, "tol_s": tol}
    about = (f"{len(stalls)} stalls, {len(events)} events from the "
             f"{'stall source' if k['source'] == 'true' else 'an unrelated timer' if k['source'] == 'other' else 'stall source and a timer'}"
             f", tol {tol:g} s")
    return inp, about


def _build_slope(k: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    rates = sorted(rng.sample((1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20), k["windows"]))
    c = rng.uniform(4, 20)
    windows = []
    for r in rates:
        noise = 1 + rng.uniform(-0.05, 0.05)
        if k["mode"] == "gc":
            period = c / r * noise
        elif k["mode"] == "timer":
            period = c / 4 * noise
        else:
            period = rng.uniform(0.5, 10)
        windows.append([float(r), _r(period)])
    return ({"kind": "slope", "windows": windows},
            f"{len(windows)} windows, period {'∝ 1/rate' if k['mode'] == 'gc' else 'fixed' if k['mode'] == 'timer' else 'random'}")


def _build(kind: str, knobs: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    for attempt in range(20):
        rng = _rng(kind, knobs, attempt)
        if kind == "period":
            got = _build_period(knobs, rng)
            if got is None or not _clear(got[0]):
                continue
            return {"kind": "period", "stall_ts": got[0]}, got[1]
        if kind == "trace":
            built = _build_trace(knobs, rng)
        elif kind == "alignment":
            built = _build_alignment(knobs, rng)
        elif kind == "slope":
            built = _build_slope(knobs, rng)
        else:
            built = ({"kind": "exposure", "duration_s": knobs["duration"],
                      "period_s": knobs["period"]}, "")
        if built is not None:
            return built
    return None


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases plus Hypothesis-drawn ones, deterministic for a seed, smallest first."""
    cases = edge_cases()
    seen = {json.dumps(c["input"], sort_keys=True) for c in cases}
    for kind, count in RANDOM_COUNTS.items():
        n = 0
        for raw in _random_knobs(int(seed), kind, count):
            built = _build(kind, json.loads(raw))
            if built is None:
                continue
            inp, about = built
            key = json.dumps(inp, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            n += 1
            cases.append({"id": f"random-{kind}-{n:02d}", "about": about, "input": inp})
    cases.sort(key=size_key)
    return cases


# ---------------------------------------------------------------- describing cases


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _nums(xs: list[float], limit: int = 12) -> str:
    shown = ", ".join(f"{x:g}" for x in xs[:limit])
    return f"[{shown}{', ...' if len(xs) > limit else ''}]"


def describe(case: Case) -> str:
    inp = case["input"]
    kind = inp["kind"]
    about = f" ({case['about']})" if case.get("about") else ""
    if kind == "period":
        return f"detect_period({_nums(inp['stall_ts'], 16)}){about}"
    if kind == "trace":
        ts = inp["ts"]
        span = f"from {ts[0]:g} to {ts[-1]:g} s" if ts else "empty"
        return (f"a trace of {len(ts)} steps {span}, threshold_ms={inp['threshold_ms']:g}, "
                f"p={inp['p']:g}{about}")
    if kind == "exposure":
        return f"request_stall_exposure({inp['duration_s']:g}, {inp['period_s']:g}){about}"
    if kind == "alignment":
        return (f"event_alignment({_nums(inp['stall_ts'])}, {_nums(inp['event_ts'])}, "
                f"tol_s={inp['tol_s']:g}){about}")
    return f"period_load_slope({_short(inp['windows'])}){about}"


# ---------------------------------------------------------------- checks

# name -> (weight, message when every applicable case passes)
CHECKS: tuple[tuple[str, float, str], ...] = (
    ("no crash", 1.0, "Every function returned a value of the right type wherever the reference "
                      "did, and raised ValueError wherever it did."),
    ("slow_steps", 1.0, "slow_steps returned exactly the slow steps' timestamps."),
    ("slow_fraction", 1.0, "slow_fraction matched on every trace."),
    ("quantile_owned_by_stalls", 1.0, "quantile_owned_by_stalls matched on every trace."),
    ("detect_period", 3.0, "detect_period found the period (within 3 %) or None where the "
                           "reference did."),
    ("stall_period on a whole trace", 1.0, "stall_period found each trace's period."),
    ("request_stall_exposure", 1.0, "request_stall_exposure matched."),
    ("event_alignment", 1.0, "event_alignment matched."),
    ("period_load_slope", 1.0, "period_load_slope matched."),
    ("results agree with each other", 1.0,
     "On every trace, slow_fraction = len(slow_steps) / n, quantile_owned_by_stalls is True "
     "exactly when that share is over 1 - p, stall_period is the period of the steps your "
     "slow_steps returned, and every share is in [0, 1]."),
)
FUNCTION_CHECK = {"stall_period": "stall_period on a whole trace"}


def _error_type(message: str) -> str:
    return message.split(":", 1)[0].split("\n", 1)[0].strip()


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _value_ok(name: str, value: Any) -> bool:
    """Whether a result value has the type the driver promises (lines can be forged)."""
    if name == "slow_steps":
        return isinstance(value, list) and all(_is_number(x) for x in value)
    if name == "quantile_owned_by_stalls":
        return isinstance(value, bool)
    if name in ("detect_period", "stall_period"):
        return value is None or _is_number(value)
    return _is_number(value)


def well_formed(result: Any, expected_out: dict[str, Any]) -> bool:
    out = checkkit.envelope(result)
    if not isinstance(out, dict):
        return out is not None  # a run's error text is well formed; any other shape is not
    for name in expected_out:
        r = out.get(name)
        if not isinstance(r, dict):
            return False
        if "error" in r:
            if not isinstance(r["error"], str):
                return False
        elif "value" not in r or not _value_ok(name, r["value"]):
            return False
    return True


def _period_reason(stall_ts: list[float], expected: float | None) -> str:
    ts = sorted(stall_ts)
    if expected is None:
        if len(ts) < 3:
            have = ("there are no stalls", "one stall has no gap",
                    "two stalls make one gap")[len(ts)]
            return f"{have}, and one gap cannot show a period (it needs 3 stalls)"
        return (f"the gaps {_nums([_r(b - a) for a, b in zip(ts, ts[1:], strict=False)])} are "
                "not all within 25 % of a whole number of one period")
    gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    ks = [max(1, round(g / expected)) for g in gaps]
    return (f"the gaps {_nums([_r(g) for g in gaps])} are {ks} periods of {expected:.4g} s "
            f"(span / number of periods = {sum(gaps):.4g} / {sum(ks)})")


def _compare_period(got: float | None, exp: float | None) -> bool:
    if exp is None or got is None:
        return got is None and exp is None
    return abs(got - exp) <= PERIOD_REL_TOL * abs(exp)


def _harmonic_hint(got: float | None, exp: float | None) -> str:
    if got is None or exp is None or exp == 0:
        return ""
    ratio = got / exp
    for k, word in ((2, "twice"), (3, "three times"), (0.5, "half"), (1 / 3, "a third of")):
        if abs(ratio - k) <= 0.05 * k:
            return f" That is {word} the period: a harmonic."
    return ""


def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol + tol * abs(b)


def _judge_value(name: str, inp: dict[str, Any], got: Any, exp: Any, own: dict[str, Any]
                 ) -> str:
    """'' when got matches exp for function `name`, else what is wrong."""
    if name == "slow_steps":
        if len(got) == len(exp) and all(abs(g - e) <= TS_ABS_TOL for g, e in zip(got, exp,
                                                                                  strict=True)):
            return ""
        extra = sorted(set(got) - set(exp))
        missing = sorted(set(exp) - set(got))
        detail = []
        if missing:
            i = inp["ts"].index(missing[0]) if missing[0] in inp["ts"] else None
            at = f" (step_ms {inp['step_ms'][i]:g} > {inp['threshold_ms']:g})" if i is not None else ""
            detail.append(f"missing {len(missing)}, e.g. ts {missing[0]:g}{at}")
        if extra:
            i = inp["ts"].index(extra[0]) if extra[0] in inp["ts"] else None
            at = f" (step_ms {inp['step_ms'][i]:g}, not > {inp['threshold_ms']:g})" if i is not None else ""
            detail.append(f"{len(extra)} too many, e.g. ts {extra[0]:g}{at}")
        if not detail:
            detail.append("the right timestamps in the wrong order (keep the input order)")
        return (f"slow_steps returned {len(got)} timestamps, expected {len(exp)}: "
                + "; ".join(detail))
    if name == "slow_fraction":
        if abs(got - exp) <= FRACTION_ABS_TOL:
            return ""
        n = len(inp["step_ms"])
        return (f"slow_fraction returned {got:.6g}, expected {exp:.6g} "
                f"({round(exp * n)} of {n} steps over {inp['threshold_ms']:g} ms)")
    if name == "quantile_owned_by_stalls":
        if got == exp:
            return ""
        n = len(inp["step_ms"])
        k = sum(1 for m in inp["step_ms"] if m > inp["threshold_ms"])
        return (f"quantile_owned_by_stalls returned {got}, expected {exp}: {k} of {n} steps are "
                f"slow ({k / n if n else 0:.3%}) against 1 - p = {1 - inp['p']:.3g}, so the "
                f"p{inp['p'] * 100:g} step is {'a slow' if exp else 'an ordinary'} one")
    if name in ("detect_period", "stall_period"):
        if _compare_period(got, exp):
            return ""
        stall_ts = inp["stall_ts"] if name == "detect_period" else \
            [t for t, m in zip(inp["ts"], inp["step_ms"], strict=True) if m > inp["threshold_ms"]]
        got_s = "None" if got is None else f"{got:.4g} s"
        exp_s = "None" if exp is None else f"{exp:.4g} s"
        where = "" if name == "detect_period" else f"; its slow steps end at {_nums(stall_ts)}"
        return (f"{name} returned {got_s}, expected {exp_s}: {_period_reason(stall_ts, exp)}"
                f"{where}.{_harmonic_hint(got, exp)}")
    if name == "request_stall_exposure":
        if _close(got, exp, VALUE_TOL):
            return ""
        return (f"request_stall_exposure returned {got:.6g}, expected {exp:.6g} = min(1, "
                f"{inp['duration_s']:g} / {inp['period_s']:g})")
    if name == "event_alignment":
        if abs(got - exp) <= FRACTION_ABS_TOL:
            return ""
        n = len(inp["stall_ts"])
        return (f"event_alignment returned {got:.6g}, expected {exp:.6g} ({round(exp * n)} of "
                f"{n} stalls have an event within {inp['tol_s']:g} s, before or after)")
    if name == "period_load_slope":
        if _close(got, exp, VALUE_TOL):
            return ""
        return (f"period_load_slope returned {got:.6g}, expected {exp:.6g} (the least-squares "
                "slope of log(period) on log(rate))")
    raise KeyError(name)


def _judge_case(case: Case, got: Any, exp: dict[str, Any], v: checkkit.Verdicts) -> None:
    inp = case["input"]
    e_out = exp["output"]
    where = describe(case)
    names = list(e_out)
    if not well_formed(got, e_out):
        got = {"error": "the output line for this case is malformed"}
    if "error" in got:
        msg = f"{got['error']} — on {where}"
        v.add("no crash", case, False, msg)
        for name in names:
            v.add(FUNCTION_CHECK.get(name, name), case, False, msg)
        if inp["kind"] == "trace":
            v.add("results agree with each other", case, False, msg)
        return
    g_out = got["output"]
    crashed = ""
    for name in names:
        check = FUNCTION_CHECK.get(name, name)
        e, g = e_out[name], g_out[name]
        if "error" in e:
            want = _error_type(e["error"])
            if "error" in g and _error_type(g["error"]) == want:
                v.add(check, case, True)
            else:
                said = f"raised {g['error'].strip()}" if "error" in g else \
                    f"returned {_short(g['value'])}"
                v.add(check, case, False, f"{name} should raise {want} here, but it {said} "
                                          f"— on {where}")
            continue
        if "error" in g:
            crashed = crashed or f"{name} raised {g['error'].strip()} — on {where}"
            v.add(check, case, False, f"{name} raised {g['error'].strip()} — on {where}")
            continue
        problem = _judge_value(name, inp, g["value"], e["value"], g_out)
        v.add(check, case, not problem, f"{problem} — on {where}" if problem else "")
    v.add("no crash", case, not crashed, crashed)
    _judge_invariants(case, g_out, e_out, v, where)


def _own_slow_steps_period(slow: list[float], period: float | None) -> list[str]:
    """What is wrong with stall_period against the period of the student's own slow steps.

    The period is found here, by the reference's detect_period: the driver runs in the student's
    process, so a period it reported for those steps would be the student's to choose. The
    student's detect_period may differ from the reference's within the stated tolerance, hence
    PERIOD_REL_TOL rather than equality."""
    if len(set(slow)) != len(slow):
        # detect_period's timestamps are distinct; a zero gap would divide by zero in it.
        return ["slow_steps returned the same timestamp twice, so its steps have no period"]
    try:
        want = _load("reference").detect_period(list(slow))
    except (ArithmeticError, ValueError):
        want = None  # gaps too wide for a float: no period to find
    if want is not None and not math.isfinite(want):
        want = None
    if _compare_period(period, want):
        return []
    got_s = "None" if period is None else f"{period:.4g} s"
    want_s = "None" if want is None else f"{want:.4g} s"
    return [f"stall_period returned {got_s}, but by detect_period's rules the timestamps your "
            f"slow_steps returned have period {want_s}: stall_period must be "
            "detect_period(slow_steps(...)), with both as the starter defines them"]


def _judge_invariants(case: Case, g: dict[str, Any], e: dict[str, Any], v: checkkit.Verdicts,
                      where: str) -> None:
    inp = case["input"]
    problems: list[str] = []

    def val(name: str) -> Any:
        r = g.get(name)
        return r.get("value") if isinstance(r, dict) and "value" in r else None

    # An invariant between results that are not there cannot hold.
    failed = [name for name, r in g.items() if isinstance(r, dict) and "error" in r
              and "error" not in e.get(name, {})]
    if failed:
        v.add("results agree with each other", case, False,
              f"cannot check how your results fit together: {', '.join(sorted(failed))} "
              f"raised — on {where}")
        return
    if inp["kind"] == "trace":
        n = len(inp["step_ms"])
        slow, frac, owned = val("slow_steps"), val("slow_fraction"), val("quantile_owned_by_stalls")
        if frac is not None and not 0 <= frac <= 1:
            problems.append(f"slow_fraction returned {frac:.6g}, outside [0, 1]")
        if slow is not None and frac is not None:
            share = len(slow) / n if n else 0.0
            if abs(share - frac) > FRACTION_ABS_TOL:
                problems.append(f"slow_steps found {len(slow)} of {n} steps but slow_fraction "
                                f"says {frac:.6g}, not {share:.6g}")
        if frac is not None and owned is not None and n:
            if owned != (frac > 1 - inp["p"]):
                problems.append(f"quantile_owned_by_stalls says {owned} while slow_fraction is "
                                f"{frac:.6g} against 1 - p = {1 - inp['p']:.3g}")
        period = val("stall_period")
        if slow is not None and "value" in g.get("stall_period", {}):
            problems += _own_slow_steps_period(slow, period)
    elif inp["kind"] in ("exposure", "alignment"):
        name = "request_stall_exposure" if inp["kind"] == "exposure" else "event_alignment"
        x = val(name)
        if x is not None and not 0 <= x <= 1:
            problems.append(f"{name} returned {x:.6g}, outside [0, 1]: it is a share")
    else:
        return
    v.add("results agree with each other", case, not problems,
          "; ".join(problems) + f" — on {where}" if problems else "")


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure names the smallest case it fails on."""
    return checkkit.judge_each(cases, got, expected, _judge_case, size_key, CHECKS)
