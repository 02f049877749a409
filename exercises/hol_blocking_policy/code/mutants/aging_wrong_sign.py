# MUTANT: aging with the wrong sign: waiting ADDS to the key, so the longer a request waits the later it goes.
from __future__ import annotations

AGING_TOKENS_PER_S = 20_000.0


def order(waiting: list[dict], now: float) -> list[str]:
    ranked = sorted(waiting, key=lambda w: w["prefill_left"] + AGING_TOKENS_PER_S * w["waited"])
    return [w["rid"] for w in ranked]
