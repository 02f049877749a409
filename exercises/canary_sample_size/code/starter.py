"""Canary sizing: how many requests each verdict needs, and how long the canary takes to get them.

Implement the three functions below with the standard library only. The grader calls them on
hidden inputs and compares with a reference, exactly for the sample sizes and to 1e-9 relative for
the minutes.

Rules every function follows:
- The test is ONE-SIDED: you only care whether the canary got worse. z_a = z_{1-alpha} and
  z_b = z_{power}, both exact standard-normal quantiles: statistics.NormalDist().inv_cdf(q).
- A sample size is rounded UP to a whole number of requests (math.ceil) and returned as an int.
- Invalid input raises ValueError: a rate outside (0, 1) or p1 <= p0; rel_shift <= 0 or cv <= 0;
  alpha outside (0, 0.5); power outside (0.5, 1); for canary_minutes, n < 0, fleet_rps <= 0 or
  canary_fraction outside (0, 1].
"""
from __future__ import annotations


def canary_sample_size(p0: float, p1: float, alpha: float = 0.05, power: float = 0.8,
                       known_baseline: bool = False) -> int:
    """Requests needed in the canary arm to catch an error rate rising from p0 to p1.

    known_baseline=False (two arms, the control is sampled too; the answer is per arm):
        n = (z_a * sqrt(2 * pbar * (1 - pbar)) + z_b * sqrt(p0*(1-p0) + p1*(1-p1)))**2 / (p1-p0)**2
        with pbar = (p0 + p1) / 2.
    known_baseline=True (p0 is known exactly, e.g. from a huge control; only the canary samples):
        n = ((z_a * sqrt(p0*(1-p0)) + z_b * sqrt(p1*(1-p1))) / (p1 - p0))**2
    """
    raise NotImplementedError


def canary_sample_size_mean(rel_shift: float, cv: float, alpha: float = 0.05,
                            power: float = 0.8) -> int:
    """Requests per arm to catch the mean of a metric (e.g. TTFT) rising by rel_shift (0.05 = 5 %),
    when the metric's standard deviation is cv times its mean, both arms sampled:

        n = 2 * (z_a + z_b)**2 * cv**2 / rel_shift**2
    """
    raise NotImplementedError


def canary_minutes(n: int, fleet_rps: float, canary_fraction: float) -> float:
    """Minutes until the canary has served n requests, when it receives canary_fraction
    (0.01 = 1 %) of a fleet's fleet_rps requests per second. Not rounded."""
    raise NotImplementedError
