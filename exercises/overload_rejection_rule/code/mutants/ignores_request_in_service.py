# Predicts the wait as queue_len / rate, forgetting what is left of the request in service (off by up to one service time, always late).
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return state["queue_len"] / state["service_rate"] <= state["timeout_s"]
