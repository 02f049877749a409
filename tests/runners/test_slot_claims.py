"""runners.identity.claimed_slot: a process without $ROOFLINE_SANDBOX_SLOT holds a slot of its
own for its life, so two grading processes never run their sandboxes as one uid."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from runners.identity import SLOT_LOCK_DIR_ENV, SLOTS, try_lock

ROOT = Path(__file__).resolve().parents[2]

# Prints its slot, then waits for a line on stdin before it exits (its lock held until then).
# With "fork", it also forks a child after claiming, and the child prints its own.
HOLDER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {root!r})
    from runners import identity
    print(identity.slot(), flush=True)
    if {fork!r}:
        pid = os.fork()
        if pid == 0:
            print(identity.slot(), flush=True)
            sys.stdin.readline()
            os._exit(0)
        sys.stdin.readline()
        os.waitpid(pid, 0)
    else:
        sys.stdin.readline()
""")


def _holder(lock_dir: Path, fork: bool = False) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "ROOFLINE_SANDBOX_SLOT"}
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(root=str(ROOT), fork=fork)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**env, SLOT_LOCK_DIR_ENV: str(lock_dir)})


def _read_slots(proc: subprocess.Popen[str], n: int) -> list[int]:
    assert proc.stdout is not None
    return [int(proc.stdout.readline()) for _ in range(n)]


def _release(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        proc.communicate("\n\n", timeout=60)


def _hold_all_but(lock_dir: Path, free: set[int]) -> list[int]:
    """Lock every slot but `free` from this process (as other workers would); the fds."""
    fds = []
    for n in range(SLOTS):
        if n in free:
            continue
        fd = try_lock(str(lock_dir / f"roofline-slot-{n}.lock"))
        assert fd is not None, f"slot {n} already held"
        fds.append(fd)
    return fds


def test_processes_alive_together_hold_different_slots(tmp_path: Path) -> None:
    procs = [_holder(tmp_path) for _ in range(6)]
    try:
        slots = [_read_slots(p, 1)[0] for p in procs]
    finally:
        _release(*procs)
    assert len(set(slots)) == len(slots)
    assert all(0 <= s < SLOTS for s in slots)


def test_with_two_slots_left_two_processes_take_one_each(tmp_path: Path) -> None:
    # Whatever their pids: taken from the pid alone, two slots would be shared or held twice.
    fds = _hold_all_but(tmp_path, {5, 9})
    try:
        procs = [_holder(tmp_path) for _ in range(2)]
        try:
            slots = {_read_slots(p, 1)[0] for p in procs}
        finally:
            _release(*procs)
    finally:
        for fd in fds:
            os.close(fd)
    assert slots == {5, 9}


def test_a_forked_child_claims_a_slot_of_its_own(tmp_path: Path) -> None:
    fds = _hold_all_but(tmp_path, {5, 9})
    try:
        proc = _holder(tmp_path, fork=True)
        try:
            parent, child = _read_slots(proc, 2)
        finally:
            _release(proc)
    finally:
        for fd in fds:
            os.close(fd)
    assert {parent, child} == {5, 9}


def test_a_slot_is_free_again_once_its_process_has_ended(tmp_path: Path) -> None:
    first = _holder(tmp_path)
    taken = _read_slots(first, 1)[0]
    _release(first)
    lock_file = tmp_path / f"roofline-slot-{taken}.lock"
    assert lock_file.exists()  # the process did lock it
    fd = try_lock(str(lock_file))
    assert fd is not None  # None if the lock had outlived its process
    os.close(fd)


def test_with_every_slot_held_a_process_still_gets_one(tmp_path: Path) -> None:
    fds = _hold_all_but(tmp_path, set())
    try:
        proc = _holder(tmp_path)
        try:
            got = _read_slots(proc, 1)[0]
        finally:
            _release(proc)
        assert got == proc.pid % SLOTS  # shared, as a slot was before: never refused
    finally:
        for fd in fds:
            os.close(fd)
