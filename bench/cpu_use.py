"""CPU seconds each part of a bench/load.py run used, read from /proc: the servers' process
trees (gunicorn and its workers; a Celery worker, its pool child and the sandboxes it ran) and
the bench's own process (the simulated clients). A process's CPU is its own plus that of the
children it has reaped, so a sandbox that ran and exited is counted in its worker's tree.
Imported by bench/load.py (run as a script, so this folder is on sys.path)."""
from __future__ import annotations

import os
from pathlib import Path

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone, or not ours to read
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    return text[text.rindex(")") + 2:].split()


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                kids.setdefault(int(fields[1]), []).append(int(entry))
    return kids


def tree_seconds(root: int, kids: dict[int, list[int]], *, reaped: bool = True) -> float:
    """CPU seconds (user + system) of `root` and every live descendant, with what each has
    reaped when `reaped`."""
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        fields = _stat(pid)
        if fields is None:
            continue
        # Fields 14-17 of proc(5) (utime, stime, cutime, cstime), here from index 11.
        ticks = int(fields[11]) + int(fields[12])
        if reaped:
            ticks += int(fields[13]) + int(fields[14])
        total += ticks * TICK_S
        todo += kids.get(pid, [])
    return total


def snapshot(roles: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far per role: the trees of its pids, and "client" for this process alone
    (its servers are its children too, but counted under their roles)."""
    kids = _children()
    out = {role: sum(tree_seconds(pid, kids) for pid in pids) for role, pids in roles.items()}
    out["client"] = tree_seconds(os.getpid(), {}, reaped=False)
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
