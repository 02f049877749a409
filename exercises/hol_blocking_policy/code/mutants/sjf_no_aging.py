# MUTANT: pure shortest-prefill-first with no aging: a long prompt starves behind a stream of short ones.
from __future__ import annotations


def order(waiting: list[dict], now: float) -> list[str]:
    return [w["rid"] for w in sorted(waiting, key=lambda w: w["prefill_left"])]
