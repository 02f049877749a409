# Queue cap in the wrong unit: timeout / rate (seconds per rate) instead of timeout x rate (requests).
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return state["queue_len"] < state["timeout_s"] / state["service_rate"]
