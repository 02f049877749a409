# EQUIVALENT (drops the sum(a_i) term from the minimum): no valid input can expose it. The
# placement starts every region at a_i and only ever adds replicas, so when sum(a_i) is the
# largest term the loop runs zero times and the fleet is exactly a, whose total is sum(a_i): the
# reference's answer. The term matters for the closed form, not for this algorithm.
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
    total = max(survivors + max(own.values()), -(-n * survivors // (n - 1)))
    fleet = dict(own)
    for _ in range(total - sum(own.values())):
        # min() returns the first of equal keys, so ties go to the region listed first.
        emptiest = min(fleet, key=fleet.__getitem__)
        fleet[emptiest] += 1
    return fleet
