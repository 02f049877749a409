"""MUTANT: a two-sided test: z_{1-alpha/2} instead of z_{1-alpha}."""
from __future__ import annotations

import math
from statistics import NormalDist

_Z = NormalDist()


def _check_test(alpha: float, power: float) -> tuple[float, float]:
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha!r}")
    if not 0.5 < power < 1:
        raise ValueError(f"power must be in (0.5, 1), got {power!r}")
    # One-sided: only a regression matters, so all of alpha sits in the upper tail.
    return _Z.inv_cdf(1 - alpha / 2), _Z.inv_cdf(power)


def canary_sample_size(p0: float, p1: float, alpha: float = 0.05, power: float = 0.8,
                       known_baseline: bool = False) -> int:
    if not (0 < p0 < 1 and 0 < p1 < 1):
        raise ValueError(f"rates must be in (0, 1), got p0={p0!r}, p1={p1!r}")
    if p1 <= p0:
        raise ValueError("p1 must be larger than p0: the canary is tested for a regression")
    z_a, z_b = _check_test(alpha, power)
    delta = p1 - p0
    if known_baseline:
        # Under H0 the canary's rate is the known p0; under H1 it is p1.
        root_n = (z_a * math.sqrt(p0 * (1 - p0)) + z_b * math.sqrt(p1 * (1 - p1))) / delta
        return math.ceil(root_n * root_n)
    # Under H0 both arms share one rate, estimated by the pooled pbar; under H1 they differ.
    pbar = (p0 + p1) / 2
    num = z_a * math.sqrt(2 * pbar * (1 - pbar)) + z_b * math.sqrt(p0 * (1 - p0) + p1 * (1 - p1))
    return math.ceil(num * num / (delta * delta))


def canary_sample_size_mean(rel_shift: float, cv: float, alpha: float = 0.05,
                            power: float = 0.8) -> int:
    if not rel_shift > 0:
        raise ValueError(f"rel_shift must be positive, got {rel_shift!r}")
    if not cv > 0:
        raise ValueError(f"cv must be positive, got {cv!r}")
    z_a, z_b = _check_test(alpha, power)
    # Two independent arms: the difference of means has variance 2 sigma^2 / n.
    return math.ceil(2 * (z_a + z_b) ** 2 * cv**2 / rel_shift**2)


def canary_minutes(n: int, fleet_rps: float, canary_fraction: float) -> float:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    if not fleet_rps > 0:
        raise ValueError(f"fleet_rps must be positive, got {fleet_rps!r}")
    if not 0 < canary_fraction <= 1:
        raise ValueError(f"canary_fraction must be in (0, 1], got {canary_fraction!r}")
    return n / (fleet_rps * canary_fraction) / 60
