# MUTANT: searches P0, P0/2, P0/3 for the smallest misfit in seconds; sub-multiples always fit as well, so jitter tips it to T/2 or T/3.
from __future__ import annotations

import math
from bisect import bisect_left

# A gap counts as one period when it is shorter than this many shortest gaps.
ONE_PERIOD_SPAN = 1.5
# Every gap must lie within this share of the period of a whole number of periods.
FIT_TOLERANCE = 0.25


def slow_steps(ts: list[float], step_ms: list[float], threshold_ms: float) -> list[float]:
    """Timestamps ts[i] of the steps with step_ms[i] > threshold_ms (strictly), in input order."""
    return [t for t, ms in zip(ts, step_ms, strict=True) if ms > threshold_ms]


def detect_period(stall_ts: list[float]) -> float | None:
    """The period of a train of stall timestamps (seconds), or None when there is none.

    Timestamps are distinct but may come in any order. Stalls may be missing (a missed stall makes
    one gap 2, 3, ... periods long) but there are no extra ones, so the shortest gap is one period.
    1. Sort. Fewer than 3 stalls: None (one gap cannot show a period).
    2. Gaps g between neighbours; g_min the shortest. First estimate P0 = the mean of the gaps
       shorter than 1.5 * g_min (the gaps of one period).
    3. k_i = max(1, round(g_i / P0)) periods per gap; P = sum(g) / sum(k).
    4. Periodic when every |g_i - k_i * P| <= 0.25 * P: return P. Otherwise None.
    """
    ts = sorted(stall_ts)
    if len(ts) < 3:
        return None
    gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    g_min = min(gaps)
    single = [g for g in gaps if g < ONE_PERIOD_SPAN * g_min]
    p0 = sum(single) / len(single)
    best = None
    for m in (1, 2, 3):
        cand = p0 / m
        ks_m = [max(1, round(g / cand)) for g in gaps]
        p_m = sum(gaps) / sum(ks_m)
        misfit = sum(abs(g - k * p_m) for g, k in zip(gaps, ks_m, strict=True))
        if best is None or misfit < best[0]:
            best = (misfit, p_m, ks_m)
    _, period, ks = best
    if all(abs(g - k * period) <= FIT_TOLERANCE * period for g, k in zip(gaps, ks, strict=True)):
        return period
    return None


def stall_period(ts: list[float], step_ms: list[float], threshold_ms: float) -> float | None:
    """The period of the slow steps in a trace: detect_period(slow_steps(...))."""
    return detect_period(slow_steps(ts, step_ms, threshold_ms))


def slow_fraction(step_ms: list[float], threshold_ms: float) -> float:
    """The share of steps with step_ms > threshold_ms, in [0, 1]; 0.0 for an empty list."""
    if not step_ms:
        return 0.0
    return sum(1 for ms in step_ms if ms > threshold_ms) / len(step_ms)


def quantile_owned_by_stalls(step_ms: list[float], threshold_ms: float, p: float = 0.99) -> bool:
    """Whether the p-quantile of step_ms is a slow step (> threshold_ms).

    Nearest rank: the quantile is the ceil(p * n)-th smallest value. That is the same as "more
    than a (1 - p) share of the steps are slow". False for an empty list.
    """
    n = len(step_ms)
    if n == 0:
        return False
    rank = max(1, math.ceil(p * n))
    return sorted(step_ms)[rank - 1] > threshold_ms


def request_stall_exposure(duration_s: float, period_s: float) -> float:
    """Chance that a request streaming for duration_s seconds sees at least one stall.

    The stalls are strictly periodic (period_s) and the request starts at a uniformly random point
    of the cycle: min(1, duration_s / period_s). ValueError if period_s <= 0 or duration_s < 0.
    """
    if period_s <= 0 or duration_s < 0:
        raise ValueError("need period_s > 0 and duration_s >= 0")
    return min(1.0, duration_s / period_s)


def event_alignment(stall_ts: list[float], event_ts: list[float], tol_s: float) -> float:
    """The share of stalls with at least one event within tol_s seconds (|stall - event| <= tol_s),
    in [0, 1]; 0.0 when there are no stalls. Both lists are on the same clock, in any order."""
    if not stall_ts:
        return 0.0
    events = sorted(event_ts)
    hit = 0
    for t in stall_ts:
        i = bisect_left(events, t)
        near = [abs(events[j] - t) for j in (i - 1, i) if 0 <= j < len(events)]
        if near and min(near) <= tol_s:
            hit += 1
    return hit / len(stall_ts)


def period_load_slope(windows: list[tuple[float, float]]) -> float:
    """Least-squares slope of log(period) against log(request rate) over (rate, period) windows.

    About -1 when the period shrinks in proportion to the load (an allocation-driven GC), about 0
    for a wall-clock timer. ValueError when a rate or period is not positive, or when fewer than
    two distinct rates are given.
    """
    if any(r <= 0 or t <= 0 for r, t in windows):
        raise ValueError("rates and periods must be positive")
    if len({r for r, _ in windows}) < 2:
        raise ValueError("need at least two distinct request rates")
    xs = [math.log(r) for r, _ in windows]
    ys = [math.log(t) for _, t in windows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return sxy / sxx
