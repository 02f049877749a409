# An arbitrary safety margin: admits only if the wait is under half the timeout, turning away requests that would have started in time.
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return state["predicted_wait_s"] <= state["timeout_s"] / 2
