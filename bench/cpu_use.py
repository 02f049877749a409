"""CPU seconds each part of a bench/load.py run used, from runners/cpuclock.py's process table:
the servers' process trees (gunicorn and its workers; a Celery worker, its pool child and the
sandboxes it ran) and the bench's own process (the simulated clients). A process's CPU is its
own plus that of the children it has reaped, so a sandbox that ran and exited is counted in its
worker's tree. Imported by bench/load.py (run as a script, so this folder is on sys.path)."""
from __future__ import annotations

import os

from runners.cpuclock import process_table


def snapshot(roles: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far per role: its pids and their live descendants, each with what it has
    reaped; and "client" for this process's own time alone (its servers are its children too,
    but counted under their roles)."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)

    def tree(root: int) -> float:
        total, todo = 0.0, [root]
        while todo:
            pid = todo.pop()
            if pid in table:
                _, own, reaped = table[pid]
                total += own + reaped
            todo += children.get(pid, [])
        return total

    out = {role: sum(tree(pid) for pid in pids) for role, pids in roles.items()}
    out["client"] = table[os.getpid()][1] if os.getpid() in table else 0.0
    return out


def per_event_lines(before: dict[str, float], after: dict[str, float], events: int,
                    seconds: float, cores: int) -> list[str]:
    """Milliseconds of CPU per event by role, and the share of the cores they used."""
    if events <= 0:
        return []
    used = {role: after[role] - before.get(role, 0.0) for role in after}
    total = sum(used.values())
    parts = ", ".join(f"{role} {used[role] / events * 1000:.0f}" for role in sorted(used))
    return [f"  CPU per verdict (ms): {parts}; all {total / events * 1000:.0f} "
            f"({total / (seconds * cores):.0%} of {cores} cores for {seconds:.0f} s)"]
