"""Reference: the smallest whole-replica fleet that survives any single region loss.

With a_i = ceil(d_i / q), q = r * U, and B = ceil(D / q), a total C works if and only if some
placement has c_i >= a_i and C - c_j >= B for every j, i.e. a_i <= c_i <= C - B. Such a placement
exists exactly when C >= sum(a_i), C - B >= max(a_i) and N * (C - B) >= C. The smallest C is
therefore max(sum(a), B + max(a), ceil(N * B / (N - 1))). Handing the spare to the emptiest
region first never pushes a region past C - B (the average stays below the cap), so the greedy
placement meets every constraint.
"""
from __future__ import annotations

import math


def min_fleet(demands: dict[str, float], r: float, U: float) -> dict[str, int]:
    if len(demands) < 2:
        raise ValueError("need at least two regions: one region cannot survive its own loss")
    if any(d < 0 for d in demands.values()):
        raise ValueError("demands must be >= 0")
    if not r > 0:
        raise ValueError(f"r must be positive, got {r!r}")
    if not 0 < U <= 1:
        raise ValueError(f"U must be in (0, 1], got {U!r}")
    q = r * U  # requests/s one replica may carry under the ceiling
    n = len(demands)
    own = {name: math.ceil(d / q) for name, d in demands.items()}
    survivors = math.ceil(sum(demands.values()) / q)  # what must remain after any loss
    total = max(sum(own.values()),
                survivors + max(own.values()),  # losing the biggest region's own replicas
                -(-n * survivors // (n - 1)))  # the largest region holds >= C / N
    fleet = dict(own)
    for _ in range(total - sum(own.values())):
        # min() returns the first of equal keys, so ties go to the region listed first.
        emptiest = min(fleet, key=fleet.__getitem__)
        fleet[emptiest] += 1
    return fleet
