# Unit slip: compares the wait in seconds with the timeout converted to milliseconds, so nothing is ever rejected.
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return state["predicted_wait_s"] <= state["timeout_s"] * 1000
