# Uses the queue length as if it were seconds of wait: caps the queue at timeout_s requests.
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return state["queue_len"] <= state["timeout_s"]
