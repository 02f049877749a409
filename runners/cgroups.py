"""Per-lane cgroups: one memory limit for the whole sandbox, a pids cap, a CPU quota.

RLIMIT_AS is per process, so without a cgroup N children can each use the full limit
(feasibility pitfall #10); the cgroup is what makes "512 MiB" mean the whole sandbox.

Layout: a *lane* is one concurrent run of this process (a Celery prefork child has one lane; a
threaded caller may have several). Each lane owns `roofline-sbx-<pid>.<starttime>-<lane>.<gen>`
nested under our own cgroup in every controller (v1: memory, pids, cpu hierarchies; v2: a
delegated parent in the unified tree). Lane cgroups are created on first use and *reused* for
every later run of that lane: limits are rewritten only when they change and the OOM verdict is
the increase of the `oom_kill` counter over the run. Creating and removing a cgroup per run cost
about 1 ms, which the overhead budget of a sandboxed `import numpy` (≤ 10 %) cannot afford.

The owner's pid and start time in the name let `janitor()` tell a crashed worker's leftovers
(pitfall #13) from a live worker's lanes. The v1 path is measured on the dev/CI VM; the v2 path
follows Documentation/admin-guide/cgroup-v2.rst and is unit-tested against a fake cgroupfs
(tests/runners/test_cgroups.py) because that VM has only hybrid v1.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

PREFIX = "roofline-sbx-"
CGROUP_ROOT = "/sys/fs/cgroup"
V1_REQUIRED = ("memory", "pids")
# cpuacct: the lane's CPU counter, which also counts processes no /proc walk can see (children
# reaped by the kernel when their parent ignores SIGCHLD, daemons that left the tree).
V1_OPTIONAL = ("cpu", "cpuacct")
CFS_PERIOD_US = 100_000
# v1 memsw is the memory+swap limit; "no limit" reads back as this (PAGE_COUNTER_MAX pages).
V1_UNLIMITED = "9223372036854771712"
# What an emptied lane may still hold that no file backs: the kernel memory of the run's dead
# processes not yet freed (slab, per-cpu stock). Measured on the dev/CI VM after honest runs
# (`pass`, `import torch`, a 2-process Pool): 0.4-1.4 MiB. More means something outlived the
# run (an in-flight Unix socket cycle holding buffers or a memfd): the lane is retired.
PINNED_SLACK_BYTES = 8 << 20


class CgroupError(RuntimeError):
    pass


@dataclass(frozen=True)
class CgroupSetup:
    """Where lane cgroups can be created, or why they cannot."""

    version: Literal["v1", "v2", "none"]
    # v1: controller -> parent directory; v2: {"unified": parent directory}.
    parents: dict[str, str] = field(default_factory=dict)
    reason: str = ""


# -- small file helpers (os.open/os.write: no buffered-file setup on the per-run path) -------


def _make_dir(path: str) -> None:
    # One seam for the tests: the fake cgroupfs populates interface files like the kernel does.
    os.mkdir(path)


def _remove_dir(path: str) -> None:
    # cgroupfs lets rmdir remove a directory full of interface files; the fake needs a seam.
    os.rmdir(path)


def cpu_weight(nice: int) -> int:
    """The lane cgroup's cpu.weight (1..10000, 100 = nice 0) for a worker at this niceness:
    the kernel's own nice-to-weight step, 1.25x per level. Processes in a cgroup compete with
    the rest of the machine as one group, at the group's weight, whatever their own niceness:
    without this a worker's `os.nice` (practice/celery.py) would not reach its sandboxes."""
    return max(1, min(10000, round(100 / 1.25 ** max(-20, min(19, nice)))))


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


# -- detection ------------------------------------------------------------------------------


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root, mountpoint, fstype, super options) for each cgroup mount in our namespace."""
    out: list[tuple[str, str, str, set[str]]] = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields = left.split()
            rfields = right.split()
            if len(fields) < 5 or len(rfields) < 3 or not rfields[0].startswith("cgroup"):
                continue
            out.append((fields[3], fields[4], rfields[0], set(rfields[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """controller name ("" for the v2 unified line) -> our cgroup path."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for ctrl in controllers.split(",") if controllers else [""]:
                paths[ctrl] = path
    return paths


def _host_dir(mount_root: str, mountpoint: str, path: str) -> str | None:
    # Inside a cgroup namespace or a bind-mounted subtree the mount's root is not "/", so our
    # path from /proc/self/cgroup has to be made relative to it.
    if mount_root != "/":
        if path != mount_root and not path.startswith(mount_root.rstrip("/") + "/"):
            return None
        path = path[len(mount_root.rstrip("/")):] or "/"
    return os.path.join(mountpoint, path.lstrip("/"))


def _probe_mkdir(parents: dict[str, str]) -> str:
    """Create and remove a child in each parent: the only reliable test of write access."""
    for ctrl, parent in parents.items():
        probe = os.path.join(parent, f"{PREFIX}{owner_tag()}-probe")
        try:
            _make_dir(probe)
            _remove_dir(probe)
        except OSError as exc:
            return f"cannot create a {ctrl} cgroup under {parent}: {exc.strerror}"
    return ""


def _detect_v1(mounts: list[tuple[str, str, str, set[str]]], own: dict[str, str]) -> CgroupSetup:
    parents: dict[str, str] = {}
    for ctrl in V1_REQUIRED + V1_OPTIONAL:
        for root, mountpoint, fstype, opts in mounts:
            if fstype == "cgroup" and ctrl in opts and ctrl in own:
                parent = _host_dir(root, mountpoint, own[ctrl])
                if parent and os.path.isdir(parent):
                    parents[ctrl] = parent
                break
    missing = [c for c in V1_REQUIRED if c not in parents]
    if missing:
        return CgroupSetup("none", reason=f"cgroup v1 controllers missing: {', '.join(missing)}")
    err = _probe_mkdir(parents)
    if err:
        return CgroupSetup("none", reason=err)
    return CgroupSetup("v1", parents)


def _detect_v2(mounts: list[tuple[str, str, str, set[str]]], own: dict[str, str]) -> CgroupSetup:
    parent = os.environ.get("ROOFLINE_SANDBOX_CGROUP_PARENT", "")
    if not parent:
        unified = [(r, m) for r, m, t, _ in mounts if t == "cgroup2"]
        if not unified or "" not in own:
            return CgroupSetup("none", reason="no cgroup2 mount")
        parent = _host_dir(unified[0][0], unified[0][1], own[""]) or ""
    return detect_v2_at(parent)


def detect_v2_at(parent: str) -> CgroupSetup:
    """Check (and prepare) a v2 parent: memory and pids must be available there and enabled
    for its children. Public so the tests can point it at a fake cgroupfs."""
    try:
        available = set(_read(os.path.join(parent, "cgroup.controllers")).split())
    except OSError:
        return CgroupSetup("none", reason=f"cannot read cgroup2 controllers under {parent!r}")
    if not {"memory", "pids"} <= available:
        return CgroupSetup("none", reason=f"cgroup2 at {parent} lacks memory/pids controllers")
    wanted = [c for c in ("memory", "pids", "cpu") if c in available]
    try:
        enabled = set(_read(os.path.join(parent, "cgroup.subtree_control")).split())
    except OSError:
        enabled = set()
    missing = [c for c in wanted if c not in enabled]
    if missing:
        try:
            # Fails with EBUSY when the parent itself holds processes (the "no internal
            # processes" rule): our own cgroup usually does, so production points
            # ROOFLINE_SANDBOX_CGROUP_PARENT at a delegated, empty parent instead.
            _write(os.path.join(parent, "cgroup.subtree_control"),
                   " ".join(f"+{c}" for c in missing))
        except OSError as exc:
            return CgroupSetup("none", reason=f"cannot enable cgroup2 controllers in {parent}: "
                                              f"{exc.strerror}")
    err = _probe_mkdir({"unified": parent})
    if err:
        return CgroupSetup("none", reason=err)
    return CgroupSetup("v2", {"unified": parent})


@functools.cache
def detect() -> CgroupSetup:
    """v1 if the memory controller is on a v1 hierarchy (hybrid hosts), else v2, else none."""
    try:
        mounts = _mounts()
        own = _own_paths()
    except OSError as exc:
        return CgroupSetup("none", reason=f"cannot read /proc cgroup info: {exc}")
    if any(t == "cgroup" and "memory" in opts for _, _, t, opts in mounts):
        return _detect_v1(mounts, own)
    return _detect_v2(mounts, own)


# -- ownership ------------------------------------------------------------------------------


def _starttime(pid: int) -> str | None:
    """Start time (clock ticks since boot) of a live process; None if gone or a zombie."""
    try:
        stat = _read(f"/proc/{pid}/stat")
    except OSError:
        return None
    # Fields after the ")" that ends the command name (which may hold spaces): state is
    # field 3, starttime field 22. A zombie owner (its parent never reaped it) is dead too.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


_tag_cache: tuple[int, str] | None = None


def owner_tag() -> str:
    """`<pid>.<starttime>` of this process: names its cgroups and job dirs for janitor()."""
    global _tag_cache
    pid = os.getpid()
    if _tag_cache is None or _tag_cache[0] != pid:  # recomputed in a forked child
        _tag_cache = (pid, f"{pid}.{_starttime(pid)}")
    return _tag_cache[1]


def owner_alive(tag: str) -> bool:
    pid_s, _, start = tag.partition(".")
    if not pid_s.isdigit():
        return False
    return _starttime(int(pid_s)) == start


def _owner_of(name: str) -> str:
    """The owner tag in `roofline-sbx-<pid>.<start>-<rest>`."""
    return name[len(PREFIX):].split("-", 1)[0]


# -- one lane -------------------------------------------------------------------------------


class LaneCgroup:
    """The cgroup(s) of one lane, reused run after run."""

    def __init__(self, setup: CgroupSetup, name: str) -> None:
        self.setup = setup
        self.name = name
        self.dirs = {ctrl: os.path.join(parent, name) for ctrl, parent in setup.parents.items()}
        # cpu and cpuacct may share one v1 hierarchy: each directory once.
        self.unique_dirs = list(dict.fromkeys(self.dirs.values()))
        self.procs_files = [os.path.join(d, "cgroup.procs") for d in self.unique_dirs]
        # What was last written, so an unchanged limit costs no syscall.
        self._written: dict[str, str] = {}
        # Set when a run could not empty it; checked before the lane's next run.
        self.dirty = False

    @property
    def unified(self) -> str | None:
        return self.dirs.get("unified")

    def create(self) -> None:
        try:
            for path in self.dirs.values():
                try:
                    _make_dir(path)
                except FileExistsError:
                    pass  # our own name (pid + start time): a lane of this very process
            if self.setup.version == "v2":
                # On OOM kill the whole sandbox, not one process of it (pitfall #11): a parent
                # that survives its OOM-killed children would otherwise exit 0.
                self._set_optional(self.unified, "memory.oom.group", "1")
                # No swap: past memory.max the run is OOM-killed instead of slowly paging.
                self._set_optional(self.unified, "memory.swap.max", "0")
        except OSError as exc:
            self.remove()
            raise CgroupError(f"cannot create cgroup {self.name}: {exc}") from exc

    def _set(self, path: str, value: str) -> None:
        if self._written.get(path) != value:
            _write(path, value)
            self._written[path] = value

    def _set_optional(self, directory: str | None, fname: str, value: str) -> None:
        if directory is not None and os.path.exists(os.path.join(directory, fname)):
            self._set(os.path.join(directory, fname), value)

    def configure(self, *, memory_bytes: int, pids: int, cpus: float) -> None:
        """Write this run's limits (only those that differ from the last run's), and a CPU
        weight that follows the worker's niceness (cpu_weight)."""
        quota = max(1000, int(cpus * CFS_PERIOD_US))
        weight = cpu_weight(os.getpriority(os.PRIO_PROCESS, 0))
        try:
            if self.setup.version == "v1":
                self._configure_v1_memory(memory_bytes)
                self._set(os.path.join(self.dirs["pids"], "pids.max"), str(pids))
                if "cpu" in self.dirs:
                    cpu = self.dirs["cpu"]
                    self._set(os.path.join(cpu, "cpu.cfs_period_us"), str(CFS_PERIOD_US))
                    self._set(os.path.join(cpu, "cpu.cfs_quota_us"), str(quota))
                    self._set_optional(cpu, "cpu.shares", str(round(weight * 1024 / 100)))
            else:
                d = self.dirs["unified"]
                self._set(os.path.join(d, "memory.max"), str(memory_bytes))
                self._set(os.path.join(d, "pids.max"), str(pids))
                self._set_optional(d, "cpu.max", f"{quota} {CFS_PERIOD_US}")
                self._set_optional(d, "cpu.weight", str(weight))
        except OSError as exc:
            raise CgroupError(f"cannot set limits on cgroup {self.name}: {exc}") from exc

    def _configure_v1_memory(self, memory_bytes: int) -> None:
        mem = self.dirs["memory"]
        limit = os.path.join(mem, "memory.limit_in_bytes")
        memsw = os.path.join(mem, "memory.memsw.limit_in_bytes")
        value = str(memory_bytes)
        if self._written.get(limit) == value:
            return
        has_memsw = os.path.exists(memsw)
        # v1 requires memsw >= limit at every moment: raise memsw first when growing, lower the
        # plain limit first when shrinking. Without memsw the run could spill into swap instead
        # of being OOM-killed.
        old = int(self._written.get(limit, V1_UNLIMITED))
        order = [memsw, limit] if memory_bytes > old else [limit, memsw]
        for path in order:
            if path == memsw and not has_memsw:
                continue
            self._set(path, value)

    def add(self, pid: int) -> None:
        """Move `pid` (bwrap, or its sandbox PID 1 still blocked before the payload) in.

        Its later children (the payload and everything it forks) are born inside. The first
        write may wait for an RCU grace period (cgroup_threadgroup_rwsem): ~10 ms on the dev/CI
        VM unless a cgroup2 mount has `favordynmods` (then ~0.1 ms); run() overlaps it with
        bwrap's own start-up.
        """
        for path in self.procs_files:
            _write(path, str(pid))

    def oom_kills(self) -> int:
        # The v1 OOM killer kills one process, so a parent can exit 0 while its children were
        # killed (pitfall #11): the counter, not the exit status, decides MLE. Both counters
        # are cumulative over the cgroup's life, hence the delta around each run.
        try:
            if self.setup.version == "v1":
                text = _read(os.path.join(self.dirs["memory"], "memory.oom_control"))
            else:
                text = _read(os.path.join(self.dirs["unified"], "memory.events"))
        except (OSError, KeyError):
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value or 0)
        return 0

    def pinned_bytes(self, below: int = 0) -> int:
        """Memory still charged to the (emptied) lane that no file backs. Page cache of the
        runtime's files is reclaimable and may stay; anything else lives on past its run only
        through the kernel (sockets in flight, the memfds and buffers they carry), and would be
        charged against the next run's limit. A total charge of at most `below` is returned as
        is, without reading the (slower) statistics."""
        try:
            if self.setup.version == "v1":
                mem = self.dirs["memory"]
                usage = int(_read(os.path.join(mem, "memory.usage_in_bytes")))
                file_keys = ("total_active_file", "total_inactive_file")
            else:
                mem = self.dirs["unified"]
                usage = int(_read(os.path.join(mem, "memory.current")))
                file_keys = ("file",)
            if usage <= below:
                return usage
            stat = _read(os.path.join(mem, "memory.stat"))
        except (OSError, KeyError, ValueError):
            return 0  # no memory accounting to read: nothing to compare against
        fields = dict(line.split(" ", 1) for line in stat.splitlines() if " " in line)
        backed = sum(int(fields.get(key, "0")) for key in file_keys)
        return max(0, usage - backed)

    def cpu_usage_file(self) -> str | None:
        """The kernel's count of the CPU time of every process that ran in the lane, alive or
        gone, however it was reaped (v1: cpuacct.usage, ns; v2: cpu.stat's usage_usec), or
        None where the lane has no such file."""
        if self.setup.version == "v1":
            directory = self.dirs.get("cpuacct")
            path = os.path.join(directory, "cpuacct.usage") if directory else None
        else:
            path = os.path.join(self.dirs["unified"], "cpu.stat")
        return path if path and os.path.exists(path) else None

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in _read(path).split())
        return found

    def kill_all(self, timeout_s: float = 2.0) -> bool:
        """SIGKILL everything inside until empty; True when empty."""
        return _kill_procs(self.procs_files, self.unified, timeout_s)

    def remove(self, timeout_s: float = 1.0) -> bool:
        ok = _kill_procs(self.procs_files, self.unified, timeout_s)
        return _rmdirs(self.unique_dirs, timeout_s) and ok


def _kill_procs(procs_files: list[str], unified: str | None, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    killed_via_cgroup = False
    while True:
        pids: set[int] = set()
        for path in procs_files:
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in _read(path).split())
        if not pids:
            return True
        if unified and not killed_via_cgroup and os.path.exists(os.path.join(unified,
                                                                             "cgroup.kill")):
            # v2 (5.14+): one write kills every process, including ones forked meanwhile.
            with contextlib.suppress(OSError):
                _write(os.path.join(unified, "cgroup.kill"), "1")
            killed_via_cgroup = True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)


def _rmdirs(dirs: list[str], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    ok = True
    for path in dirs:
        while True:
            try:
                _remove_dir(path)
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                # EBUSY until the last task (zombies included) has been reaped.
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    ok = False
                    break
                time.sleep(0.005)
    return ok


# -- lanes of this process --------------------------------------------------------------------

_lanes_lock = threading.Lock()
_lanes: dict[int, LaneCgroup] = {}
_generation: dict[int, int] = {}


def _forget_lanes_in_child() -> None:
    # A forked child (Celery prefork) must not reuse its parent's lanes: they carry the
    # parent's owner tag and may be in use by the parent or a sibling right now.
    global _lanes_lock
    _lanes_lock = threading.Lock()
    _lanes.clear()
    _generation.clear()


os.register_at_fork(after_in_child=_forget_lanes_in_child)


def lane_cgroup(setup: CgroupSetup, lane: int) -> LaneCgroup:
    """The (created) cgroup of `lane`; empty on return, or a fresh one replaces it.

    Runs end by emptying their lane (and mark it dirty if they could not), so a clean lane is
    not re-checked here: that keeps the per-run path to one stat per controller."""
    with _lanes_lock:
        cg = _lanes.get(lane)
        if cg is not None and (cg.setup != setup
                               or not all(os.path.isdir(d) for d in cg.dirs.values())):
            # Another detection result (tests), or removed behind our back: start afresh.
            cg.remove()
            cg = None
        if cg is not None and cg.dirty and not cg.kill_all(timeout_s=1.0):
            # A process that survives SIGKILL (stuck in the kernel) keeps this one busy: retire
            # it (the janitor of a later worker removes it) and use a new generation.
            cg = None
        if cg is None:
            gen = _generation.get(lane, 0) + 1
            _generation[lane] = gen
            cg = LaneCgroup(setup, f"{PREFIX}{owner_tag()}-{lane}.{gen}")
            cg.create()
            _lanes[lane] = cg
        return cg


def lane_names() -> dict[int, str]:
    """lane -> name of its current cgroup in this process (what a reused lane keeps)."""
    with _lanes_lock:
        return {lane: cg.name for lane, cg in _lanes.items()}


def retire_lane(lane: int) -> None:
    """Drop `lane`'s cgroup (removed if possible); the next lane_cgroup() makes a fresh one."""
    with _lanes_lock:
        cg = _lanes.pop(lane, None)
    if cg is not None:
        cg.remove(timeout_s=0.5)


def remove_lanes() -> None:
    """Remove this process's lane cgroups (at exit; the janitor covers a kill -9)."""
    with _lanes_lock:
        for cg in _lanes.values():
            cg.remove(timeout_s=0.5)
        _lanes.clear()


atexit.register(remove_lanes)


def janitor() -> int:
    """Kill and remove cgroups left by dead workers (e.g. after a kill -9, pitfall #13)."""
    setup = detect()
    removed = 0
    for parent in setup.parents.values():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            if not name.startswith(PREFIX) or owner_alive(_owner_of(name)):
                continue
            path = os.path.join(parent, name)
            unified = path if setup.version == "v2" else None
            _kill_procs([os.path.join(path, "cgroup.procs")], unified, 1.0)
            if _rmdirs([path], 1.0):
                removed += 1
    return removed


def leftovers(setup: CgroupSetup | None = None) -> list[str]:
    """Sandbox cgroups that hold a process, or that belong to no live owner (for tests and
    health checks): after a run both lists should be empty."""
    setup = setup or detect()
    found: list[str] = []
    for parent in setup.parents.values():
        with contextlib.suppress(OSError):
            for name in os.listdir(parent):
                if not name.startswith(PREFIX):
                    continue
                path = os.path.join(parent, name)
                busy = False
                with contextlib.suppress(OSError):
                    busy = bool(_read(os.path.join(path, "cgroup.procs")).split())
                if busy or not owner_alive(_owner_of(name)):
                    found.append(path)
    return found
