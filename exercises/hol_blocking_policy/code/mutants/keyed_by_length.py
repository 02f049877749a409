# MUTANT: indexes requests by their prefill length in a dict, so requests of equal length overwrite each other and go missing.
from __future__ import annotations


def order(waiting: list[dict], now: float) -> list[str]:
    by_length = {w["prefill_left"]: w["rid"] for w in waiting}
    return [by_length[k] for k in sorted(by_length)]
