# A breaker that opens when the wait passes the timeout and stays open until the queue is empty: rejects everything for the rest of the spike.
from __future__ import annotations

_open = False


def admit(state: dict[str, float]) -> bool:
    global _open
    if state["queue_len"] == 0:
        _open = False
    if state["predicted_wait_s"] > state["timeout_s"]:
        _open = True
    return not _open
