# A queue cap tuned for one workload (600 = 20 req/s x 30 s) and hard-coded: wrong for any other rate or timeout.
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return state["queue_len"] < 600
