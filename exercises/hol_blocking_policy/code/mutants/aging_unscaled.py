# MUTANT: subtracts the seconds waited straight from a token count: the aging credit is a few tokens, i.e. none.
from __future__ import annotations


def order(waiting: list[dict], now: float) -> list[str]:
    return [w["rid"] for w in sorted(waiting, key=lambda w: w["prefill_left"] - w["waited"])]
