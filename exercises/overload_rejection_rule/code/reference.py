"""Reference admission rule: queue a request only if it will start before its client gives up.

Service is deterministic and FIFO, so the predicted wait is exact: admitting exactly the requests
whose predicted wait fits the timeout leaves no dead work and turns away nobody who could have
been served in time.
"""
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return state["predicted_wait_s"] <= state["timeout_s"]
