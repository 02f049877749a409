"""MUTANT: sizes the fleet by the largest region alone, (D + d_max) / (r·U) in whole replicas, missing the N/(N-1) bound that binds for balanced regions."""
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
    total = max(sum(own.values()), survivors + max(own.values()))
    fleet = dict(own)
    for _ in range(total - sum(own.values())):
        # min() returns the first of equal keys, so ties go to the region listed first.
        emptiest = min(fleet, key=fleet.__getitem__)
        fleet[emptiest] += 1
    return fleet
