# No rule at all: every request is queued, so after the queue passes the timeout the server works on dead requests.
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    return True
