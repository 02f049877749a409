# MUTANT: computes a priority (higher = sooner) but sorts it ascending: the biggest, newest requests go first.
from __future__ import annotations

AGING_TOKENS_PER_S = 20_000.0


def order(waiting: list[dict], now: float) -> list[str]:
    ranked = sorted(waiting, key=lambda w: AGING_TOKENS_PER_S * w["waited"] - w["prefill_left"])
    return [w["rid"] for w in ranked]
