"""CPU-time budgets for a sandbox's own processes, read from /proc.

A time limit that decides a verdict must not depend on how busy the machine is: a run that gets
a third of a core takes three times as long on the wall clock and is no slower for it. So the
limits inside the sandbox (runners/relay.py's cases, gpu_sandbox/run.py's import, cases and
sm_90 compile) count CPU seconds: those used by the processes this one started, and by theirs,
live or already reaped (`utime + stime + cutime + cstime` in /proc/PID/stat). CPU time does not
grow while another process holds the core. A wall-clock backstop, WALL_FACTOR times longer,
still ends a run that uses no CPU (a student's process blocked or asleep); it tells that case
from a starved one by the time the processes spent runnable but waiting for a core
(/proc/PID/schedstat): "busy" is the machine's fault and is reported as such, never as a TLE.
Starved by the sandbox's own processes (a student's spinners that left the tree and hold the
sandbox's one CPU) is not busy: the CPU time of everything in /proc (the sandbox's pid
namespace) says where the core went. Only the student's own time is at stake there: a run
that must wait for its own processes has them to blame.

The sandbox's CPU quota (SandboxSpec.cpus: 1 CPU, 2 for a kernel run's parallel compile) bounds
how fast CPU time can grow, so a budget need not read /proc more often than its remaining
seconds run out at that rate. Without a
cgroup, RLIMIT_CPU still bounds each process.

Where the sandbox's lane has a CPU-accounting cgroup, runners/bwrap.py binds its counter
read-only at SANDBOX_CPU_FILE, and "everything" is read there instead: the kernel counts every
process that ran in the lane, including the ones /proc no longer shows and no parent's
cutime/cstime received (children of a process that ignores SIGCHLD are reaped by the kernel
and their CPU time is dropped). Without it a student's auto-reaped spinners could starve the
tree unseen and pass for a busy machine, or do a timed case's work off the books.

Standard library only and nothing of ours: the file is copied into the sandboxes and imported
by plain name (relay.py and run.py put their own folder on sys.path).
"""
from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# The wall-clock backstop, as a multiple of the CPU budget: a run may be slowed this much by
# other work on the machine before it is stopped at all.
WALL_FACTOR = 4.0
# Stopped at the backstop, a run counts as starved (the machine's fault) when its processes
# waited for a core for at least this share of the time they were not running...
STARVED_SHARE = 0.5
# ... and the rest of the sandbox used less CPU than they did (at least this much is allowed
# it, for our own processes' bookkeeping): else the sandbox starved itself. A student's
# processes outside the tree would need three times the tree's CPU to starve it below
# 1/WALL_FACTOR of the quota, the least that reaches the backstop without spending it.
OTHERS_FLOOR_S = 0.25
# The most CPU seconds the sandbox can use per wall second: its CPU quota, which the backends
# set in ROOFLINE_SANDBOX_CPUS (runners/sandbox_env.py); 1 where unset, or unreadable.
CPUS_ENV = "ROOFLINE_SANDBOX_CPUS"


def _max_cpus() -> float:
    try:
        return max(1.0, float(os.environ.get(CPUS_ENV, "1")))
    except ValueError:
        return 1.0


MAX_CPUS = _max_cpus()
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
# Where runners/bwrap.py binds the lane cgroup's CPU counter (v1 cpuacct.usage or v2 cpu.stat).
SANDBOX_CPU_FILE = "/run/roofline/cpu-usage"
# A container of the docker backend is its own cgroup, and the engine mounts it at
# /sys/fs/cgroup: runners/docker.py names the candidates here (v1, then v2 with the private
# cgroup namespace the engine gives by default), separated by ':'; the first that exists counts.
# Read once, when the harness imports this file, before any student code runs.
CPU_FILES_ENV = "ROOFLINE_SANDBOX_CPU_FILES"


def _cpu_file() -> str:
    for candidate in os.environ.get(CPU_FILES_ENV, "").split(":"):
        if candidate and os.path.exists(candidate):
            return candidate
    return SANDBOX_CPU_FILE


CPU_FILE = _cpu_file()


def sandbox_cpu_s(path: str | None = None) -> float | None:
    """CPU seconds of everything that ran in this sandbox's cgroup, or None without one."""
    try:
        with open(path or CPU_FILE, "rb") as f:
            data = f.read()
        if data.startswith(b"usage_usec"):  # v2 cpu.stat: "usage_usec N" is the first line
            return int(data.split()[1]) / 1e6
        return int(data.split()[0]) / 1e9  # v1 cpuacct.usage: nanoseconds
    except (OSError, IndexError, ValueError):
        return None


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU seconds, CPU seconds of reaped children) of `pid`, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = data[data.rfind(b")") + 2:].split()
    try:
        ppid = int(fields[1])
        own = (int(fields[11]) + int(fields[12])) * TICK_S
        reaped = (int(fields[13]) + int(fields[14])) * TICK_S
    except (IndexError, ValueError):
        return None
    return ppid, own, reaped


def _waited_s(pid: int) -> float:
    """Seconds `pid` spent runnable but waiting for a core (0 where the kernel does not say)."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def descendants_usage(root: int | None = None) -> tuple[float, float, float]:
    """(CPU seconds, seconds waiting for a core) of `root`'s descendants (default: this
    process's), live or reaped, `root`'s own CPU time not counted; and the CPU seconds of every
    process in the sandbox: its cgroup's counter where there is one (sandbox_cpu_s), else the
    sum over /proc, live or reaped. Processes that left the tree (re-parented to init) count
    only in the last: they are bounded by their own RLIMIT_CPU."""
    root = os.getpid() if root is None else root
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    cpu = table[root][2] if root in table else 0.0
    waited = 0.0
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        _, own, reaped = table[pid]
        cpu += own + reaped
        waited += _waited_s(pid)
        todo.extend(children.get(pid, ()))
    return cpu, waited, sandbox_total_s(table)


def process_table() -> dict[int, tuple[int, float, float]]:
    """pid -> _stat(pid) for every process in /proc."""
    table: dict[int, tuple[int, float, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            entry = _stat(int(name))
            if entry is not None:
                table[int(name)] = entry
    return table


def sandbox_total_s(table: dict[int, tuple[int, float, float]] | None = None) -> float:
    """CPU seconds of every process in the sandbox: the cgroup's counter where there is one (one
    file read), else the sum over /proc (`table`, if already read), live or reaped."""
    counted = sandbox_cpu_s()
    if counted is not None:
        return counted
    table = process_table() if table is None else table
    return sum(own + reaped for _, own, reaped in table.values())


class Budget:
    """`cpu_s` CPU seconds for the descendants of this process, from now; stopped on the wall
    clock only at `wall_deadline` (time.monotonic(); default WALL_FACTOR x cpu_s from now).

    wait_s() says how long one may wait before the budget could be spent (0: it is, and
    `outcome` says why: "cpu", or at the backstop "busy" when starved, else "wall")."""

    def __init__(self, cpu_s: float, wall_deadline: float | None = None,
                 usage: Callable[[], tuple[float, float, float]] = descendants_usage,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cpu_s = max(float(cpu_s), 0.0)
        self.usage = usage
        self.clock = clock
        self.started = clock()
        self.deadline = (self.started + WALL_FACTOR * self.cpu_s if wall_deadline is None
                         else wall_deadline)
        self.cpu0, self.waited0, self.everything0 = usage()
        self.used_s = 0.0  # CPU seconds used, as of the last reading
        self.read_at = self.started
        self.outcome: str | None = None

    def _read(self, now: float) -> tuple[float, float, float]:
        cpu, waited, everything = self.usage()
        self.used_s = max(cpu - self.cpu0, 0.0)
        self.read_at = now
        return self.used_s, max(waited - self.waited0, 0.0), everything - self.everything0

    def used(self) -> float:
        """CPU seconds used since the budget started (read now)."""
        return self._read(self.clock())[0]

    def wait_s(self) -> float:
        now = self.clock()
        wall_left = self.deadline - now
        # CPU time grows at most MAX_CPUS per wall second: until this runs out, no need to look.
        surely_left = self.cpu_s - self.used_s - (now - self.read_at) * MAX_CPUS
        if surely_left > 0 and wall_left > 0:
            return min(surely_left / MAX_CPUS, wall_left)
        used, waited, everything = self._read(now)
        if used >= self.cpu_s:
            self.outcome = "cpu"
            return 0.0
        if wall_left <= 0:
            elapsed = now - self.started
            starved = waited > 0 and waited >= STARVED_SHARE * (elapsed - used)
            ours = everything - used  # the rest of the sandbox (in its own pid namespace)
            self.outcome = "busy" if starved and ours <= max(used, OTHERS_FLOOR_S) else "wall"
            return 0.0
        return min((self.cpu_s - used) / MAX_CPUS, wall_left)
