"""Reference policy: shortest remaining prefill first, with aging.

A request's key is the prefill it still needs minus a credit for the time it has waited. Short
prompts go first, which is what cuts the mean TTFT, but every second of waiting takes
AGING_TOKENS_PER_S tokens off a request's key, so a long prompt overtakes fresh short ones after
about (its prefill - theirs) / AGING_TOKENS_PER_S seconds and cannot starve. The rate is about what
the engine prefills per second (70B on 8 H100s at 50 % MFU: ~26,000 tokens/s), so one second of
waiting is worth about one second of work. Python's sort is stable: equal keys keep queue order.
"""
from __future__ import annotations

AGING_TOKENS_PER_S = 20_000.0


def order(waiting: list[dict], now: float) -> list[str]:
    ranked = sorted(waiting, key=lambda w: w["prefill_left"] - AGING_TOKENS_PER_S * w["waited"])
    return [w["rid"] for w in ranked]
