# MUTANT: sorts by prompt length, not remaining prefill: a long conversation whose history is cached looks long.
from __future__ import annotations

AGING_TOKENS_PER_S = 20_000.0


def order(waiting: list[dict], now: float) -> list[str]:
    ranked = sorted(waiting, key=lambda w: w["prompt"] - AGING_TOKENS_PER_S * w["waited"])
    return [w["rid"] for w in ranked]
