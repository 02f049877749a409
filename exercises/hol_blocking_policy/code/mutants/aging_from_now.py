# MUTANT: ages by the clock (now) instead of each request's own wait: every key shifts equally, so no aging at all.
from __future__ import annotations

AGING_TOKENS_PER_S = 20_000.0


def order(waiting: list[dict], now: float) -> list[str]:
    ranked = sorted(waiting, key=lambda w: w["prefill_left"] - AGING_TOKENS_PER_S * now)
    return [w["rid"] for w in ranked]
