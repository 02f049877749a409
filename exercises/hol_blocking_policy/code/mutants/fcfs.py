# MUTANT: first come, first served: the queue order as given, so short prompts wait behind a long one.
from __future__ import annotations


def order(waiting: list[dict], now: float) -> list[str]:
    return [w["rid"] for w in waiting]
