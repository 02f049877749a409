"""runners/cpuclock.py: the CPU-time budgets that decide time limits inside the sandbox.

A spinning process spends its budget ("cpu", the student's TLE); one that sleeps runs into the
wall-clock backstop ("wall", still the student's); one starved of its core by other work runs
into the backstop too, and is told apart ("busy", the machine's fault). Real processes, small
budgets; no assertion on how long anything took.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest

from runners.cpuclock import Budget, descendants_usage

SPIN = "while True: pass"


@contextmanager
def started(code: str, n: int = 1, cpu: int | None = None
            ) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`n` processes running `code` (pinned to `cpu`), each in a session of its own so that one
    kill ends what it started too."""
    pin = f"import os; os.sched_setaffinity(0, {{{cpu}}})\n" if cpu is not None else ""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen([sys.executable, "-c", pin + code],
                                          stdin=subprocess.DEVNULL, start_new_session=True))
        yield procs
    finally:
        for p in procs:
            with suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()


def _spend(budget: Budget) -> str | None:
    while (left := budget.wait_s()) > 0:
        time.sleep(left)
    return budget.outcome


def test_a_spinning_child_spends_its_cpu_budget() -> None:
    with started(SPIN):
        # A wall-clock backstop far off: however busy the machine, 0.5 s of CPU comes first.
        budget = Budget(0.5, wall_deadline=time.monotonic() + 120)
        assert _spend(budget) == "cpu"
        assert budget.used() >= 0.5


def test_reaped_children_count() -> None:
    # A child that spun and exited is in our cutime: killing and restarting it saves nothing.
    before = descendants_usage()[0]
    subprocess.run([sys.executable, "-c",
                    "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.3: pass"], check=True)
    after = descendants_usage()[0]
    assert after - before >= 0.3


def test_a_sleeping_child_meets_the_backstop_as_its_own_time() -> None:
    with started("import time; time.sleep(60)"):
        budget = Budget(5.0, wall_deadline=time.monotonic() + 0.5)
        assert _spend(budget) == "wall"
        assert budget.used() < 5.0


def _one_core() -> int:
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("needs CPU affinity")
    with open("/proc/self/schedstat", "rb") as f:
        if len(f.read().split()) < 2:
            pytest.skip("the kernel reports no run-queue wait (/proc/PID/schedstat)")
    return min(os.sched_getaffinity(0))


# A child spinning under a wrapper: the budget counts only what the wrapper started, as
# relay.py's counts its child.
CHILD = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {SPIN!r}])"


def test_a_child_starved_of_its_core_by_others_is_busy_not_slow() -> None:
    core = _one_core()
    # Five spinning processes outside the sandbox share the child's one core with it, so it
    # reaches the backstop (4x its budget) with the budget unspent; the "sandbox" here is the
    # wrapper's tree alone (in a real one, everything in its /proc).
    with started(SPIN, n=5, cpu=core), started(CHILD, cpu=core) as (wrapper,):
        def tree_only() -> tuple[float, float, float]:
            cpu, waited, _ = descendants_usage(wrapper.pid)
            return cpu, waited, cpu

        budget = Budget(0.4, usage=tree_only)
        assert _spend(budget) == "busy"
        assert 0 < budget.used() < 0.4


def test_a_child_starved_by_its_own_sandbox_is_not_busy() -> None:
    # The same starvation, but the spinners count as the sandbox's (as a student's processes
    # that left the child's tree would): the core went to the sandbox, so this is the student's
    # time, a TLE, never an uncounted "machine busy".
    core = _one_core()
    with started(SPIN, n=5, cpu=core) as spinners, started(CHILD, cpu=core) as (wrapper,):
        def with_spinners() -> tuple[float, float, float]:
            cpu, waited, _ = descendants_usage(wrapper.pid)
            theirs = sum(descendants_usage(s.pid)[0] + _own_cpu(s.pid) for s in spinners)
            return cpu, waited, cpu + theirs

        budget = Budget(0.4, usage=with_spinners)
        assert _spend(budget) == "wall"
        assert 0 < budget.used() < 0.4


def _own_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
