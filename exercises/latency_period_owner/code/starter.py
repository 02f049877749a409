"""Find the period in a step-latency trace and the facts that say who owns the stall.

Implement the eight functions below in plain Python (standard library only; lists in, numbers
out). The grader calls each one on traces and timestamp lists and compares with a reference:

* periods (detect_period, stall_period) are accepted within 3 % of the reference's, and must be
  None exactly where the reference's is;
* shares (slow_fraction, event_alignment) within 1e-9; request_stall_exposure and
  period_load_slope within 1e-6 (relative or absolute); slow_steps and quantile_owned_by_stalls
  exactly;
* where the reference raises ValueError, so must you.

The hidden cases stay clear of knife edges: no gap halfway between two multiples of the period
unless the train is clearly aperiodic, no slow-step count exactly at (1 - p) * n, no stall exactly
tol_s from an event. Times are in seconds, step durations in milliseconds.
"""
from __future__ import annotations


def slow_steps(ts: list[float], step_ms: list[float], threshold_ms: float) -> list[float]:
    """Timestamps ts[i] of the steps with step_ms[i] > threshold_ms (strictly), in input order.

    ts[i] is when step i ended; both lists have the same length and may be empty. Samples can
    be missing (the trace has holes); that changes nothing here.
    """
    raise NotImplementedError


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
    raise NotImplementedError


def stall_period(ts: list[float], step_ms: list[float], threshold_ms: float) -> float | None:
    """The period of the slow steps in a trace: detect_period(slow_steps(...))."""
    raise NotImplementedError


def slow_fraction(step_ms: list[float], threshold_ms: float) -> float:
    """The share of steps with step_ms > threshold_ms, in [0, 1]; 0.0 for an empty list."""
    raise NotImplementedError


def quantile_owned_by_stalls(step_ms: list[float], threshold_ms: float, p: float = 0.99) -> bool:
    """Whether the p-quantile of step_ms is a slow step (> threshold_ms).

    Nearest rank: the quantile is the ceil(p * n)-th smallest value. That is the same as "more
    than a (1 - p) share of the steps are slow". False for an empty list.
    """
    raise NotImplementedError


def request_stall_exposure(duration_s: float, period_s: float) -> float:
    """Chance that a request streaming for duration_s seconds sees at least one stall.

    The stalls are strictly periodic (period_s) and the request starts at a uniformly random point
    of the cycle: min(1, duration_s / period_s). ValueError if period_s <= 0 or duration_s < 0.
    """
    raise NotImplementedError


def event_alignment(stall_ts: list[float], event_ts: list[float], tol_s: float) -> float:
    """The share of stalls with at least one event within tol_s seconds (|stall - event| <= tol_s),
    in [0, 1]; 0.0 when there are no stalls. Both lists are on the same clock, in any order."""
    raise NotImplementedError


def period_load_slope(windows: list[tuple[float, float]]) -> float:
    """Least-squares slope of log(period) against log(request rate) over (rate, period) windows.

    About -1 when the period shrinks in proportion to the load (an allocation-driven GC), about 0
    for a wall-clock timer. ValueError when a rate or period is not positive, or when fewer than
    two distinct rates are given.
    """
    raise NotImplementedError
