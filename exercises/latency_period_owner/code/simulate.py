"""A model of the engine's step timeline with a periodic stall (trusted: never in the sandbox).

Used by exercise.py for the evidence a student downloads and by checks.py for the hidden traces,
so both are drawn from one model. Decode steps run back to back; each takes about `step_ms`. A
stall source fires at `stall_times`; a stall that fires during a step stretches that step by
about `stall_ms` (the loop is blocked: a garbage-collection pause, or a timer's handler holding the
interpreter). Standard library only.
"""
from __future__ import annotations

import random

# Normal steps vary by up to ±2 % (batch composition, kernel timing); a stall by up to ±3 %.
STEP_NOISE = 0.02
STALL_NOISE = 0.03
# A garbage collector fires after a number of allocations, so each gap wanders by up to ±5 %
# and the errors add up; a timer is tied to the clock and wobbles by ±0.5 % around its ticks.
GC_GAP_JITTER = 0.05
TIMER_JITTER = 0.005


def stall_times(mode: str, period_s: float, window_s: float, rng: random.Random,
                phase_s: float, jitter: float | None = None) -> list[float]:
    """When the stall source fires in [0, window_s): "gc" (allocation-driven, each gap jittered,
    errors accumulate) or "timer" (fixed ticks phase_s + k * period_s, each slightly jittered)."""
    out: list[float] = []
    if mode == "gc":
        j = GC_GAP_JITTER if jitter is None else jitter
        t = phase_s
        while t < window_s:
            out.append(t)
            t += period_s * (1 + rng.uniform(-j, j))
    elif mode == "timer":
        j = TIMER_JITTER if jitter is None else jitter
        k = 0
        while phase_s + k * period_s < window_s:
            out.append(max(0.0, phase_s + k * period_s + rng.uniform(-j, j) * period_s))
            k += 1
    else:
        raise ValueError(f"unknown stall source {mode!r}")
    return out


def step_trace(step_ms: float, stall_ms: float, stalls: list[float], window_s: float,
               rng: random.Random) -> tuple[list[float], list[float]]:
    """Back-to-back steps over [0, window_s): (step end times in s, step durations in ms).

    End times are rounded to 0.1 ms and durations to 0.01 ms, as a trace file would hold them.
    """
    ts: list[float] = []
    ms: list[float] = []
    clock = 0.0
    pending = sorted(stalls)
    i = 0
    while clock < window_s:
        d = step_ms * (1 + rng.uniform(-STEP_NOISE, STEP_NOISE))
        # Every stall that fires before this step would end lands in it and stretches it.
        while i < len(pending) and pending[i] <= clock + d / 1000:
            d += stall_ms * (1 + rng.uniform(-STALL_NOISE, STALL_NOISE))
            i += 1
        clock += d / 1000
        ts.append(round(clock, 4))
        ms.append(round(d, 2))
    return ts, ms
