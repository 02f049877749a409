# Rejects everything during a spike: admits only when nobody is waiting, throwing away the capacity the timeout allows.
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return state["queue_len"] == 0
