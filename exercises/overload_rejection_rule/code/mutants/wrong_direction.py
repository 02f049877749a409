# Comparison the wrong way round: admits only requests that will wait longer than the timeout.
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return state["predicted_wait_s"] >= state["timeout_s"]
