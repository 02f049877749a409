"""The smallest fleet of whole replicas that survives losing any one region.

Implement `min_fleet` with the standard library only. The grader calls it on hidden inputs and
checks the invariants below, the total against the true minimum, and the exact placement.
"""
from __future__ import annotations


def min_fleet(demands: dict[str, float], r: float, U: float) -> dict[str, int]:
    """Replicas per region: the fewest in total such that the fleet survives any one region loss.

    demands: peak requests/s per region (>= 0), in a fixed order (the dict's order).
    r: requests/s one replica serves at full load (> 0).  U: the utilisation ceiling, 0 < U <= 1;
    a replica counts for r * U requests/s.

    Rules (whole replicas everywhere):
    1. Normal operation: each region serves its own peak, so region i needs at least
       a_i = ceil(d_i / (r * U)) replicas.
    2. Any region may serve any other region's traffic after a loss, so when region j is lost the
       other regions together need at least B = ceil(D / (r * U)) replicas, D = sum of demands.
    3. Return the smallest total C meeting 1 and 2 for every j. Placement: start every region at
       a_i, then hand out the remaining C - sum(a_i) replicas one at a time, each to the region
       that has the fewest replicas at that moment; on a tie, the one that comes first in
       `demands`.
    Return a dict with the same keys in the same order, values int.

    Raise ValueError for fewer than two regions (one region cannot survive its own loss), a
    negative demand, r <= 0, or U outside (0, 1].

    Inputs are chosen so that every d_i / (r * U) and D / (r * U) is either a whole number that
    floating point computes exactly or at least 1e-6 away from one: plain math.ceil is safe.
    """
    raise NotImplementedError
