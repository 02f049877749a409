"""Per-run cgroups: one memory limit for the whole sandbox, a pids cap, a CPU quota.

RLIMIT_AS is per process, so without a cgroup N children can each use the full limit
(feasibility pitfall #10); the cgroup is what makes "512 MiB" mean the whole sandbox.

Layout: each run gets `roofline-sbx-<pid>.<starttime>-<seq>` nested under *our own* cgroup in
every controller (v1: memory, pids, cpu hierarchies; v2: the unified tree). The owner's pid and
start time in the name let `janitor()` tell a crashed worker's leftovers (pitfall #13) from a
live worker's runs. The v1 path is measured on the dev/CI VM; the v2 path follows the kernel
documentation but has not been exercised there (it only has hybrid v1).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Literal

PREFIX = "roofline-sbx-"
CGROUP_ROOT = "/sys/fs/cgroup"
V1_REQUIRED = ("memory", "pids")
V1_OPTIONAL = ("cpu",)
CFS_PERIOD_US = 100_000

_seq = itertools.count()


class CgroupError(RuntimeError):
    pass


@dataclass(frozen=True)
class CgroupSetup:
    """Where per-run cgroups can be created, or why they cannot."""

    version: Literal["v1", "v2", "none"]
    # v1: controller -> parent directory; v2: {"unified": parent directory}.
    parents: dict[str, str] = field(default_factory=dict)
    reason: str = ""


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
            os.mkdir(probe)
            os.rmdir(probe)
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
    try:
        with open(os.path.join(parent, "cgroup.controllers")) as fh:
            available = set(fh.read().split())
    except OSError:
        return CgroupSetup("none", reason=f"cannot read cgroup2 controllers under {parent!r}")
    if not {"memory", "pids"} <= available:
        return CgroupSetup("none", reason=f"cgroup2 at {parent} lacks memory/pids controllers")
    wanted = [c for c in ("memory", "pids", "cpu") if c in available]
    try:
        # Fails with EBUSY when our own cgroup holds processes (the "no internal processes"
        # rule); a delegated, empty parent via ROOFLINE_SANDBOX_CGROUP_PARENT avoids that.
        with open(os.path.join(parent, "cgroup.subtree_control"), "w") as fh:
            fh.write(" ".join(f"+{c}" for c in wanted))
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


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


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


def owner_tag() -> str:
    """`<pid>.<starttime>` of this process: names its cgroups and job dirs for janitor()."""
    return f"{os.getpid()}.{_starttime(os.getpid())}"


class RunCgroup:
    """The cgroup(s) of one sandbox run."""

    def __init__(self, setup: CgroupSetup, dirs: dict[str, str]) -> None:
        self.setup = setup
        self.dirs = dirs
        # Precomputed so the child's preexec_fn does as little as possible between fork and exec.
        self.procs_files = [os.path.join(d, "cgroup.procs") for d in dirs.values()]

    @classmethod
    def create(cls, setup: CgroupSetup, *, memory_bytes: int, pids: int,
               cpus: float) -> RunCgroup:
        name = f"{PREFIX}{owner_tag()}-{next(_seq)}"
        dirs: dict[str, str] = {}
        self = cls(setup, dirs)
        try:
            for ctrl, parent in setup.parents.items():
                path = os.path.join(parent, name)
                os.mkdir(path)
                dirs[ctrl] = path
            self.procs_files = [os.path.join(d, "cgroup.procs") for d in dirs.values()]
            quota = max(1000, int(cpus * CFS_PERIOD_US))
            if setup.version == "v1":
                mem = dirs["memory"]
                _write(os.path.join(mem, "memory.limit_in_bytes"), str(memory_bytes))
                # Without memsw the run could spill into swap instead of being OOM-killed.
                memsw = os.path.join(mem, "memory.memsw.limit_in_bytes")
                if os.path.exists(memsw):
                    _write(memsw, str(memory_bytes))
                _write(os.path.join(dirs["pids"], "pids.max"), str(pids))
                if "cpu" in dirs:
                    _write(os.path.join(dirs["cpu"], "cpu.cfs_period_us"), str(CFS_PERIOD_US))
                    _write(os.path.join(dirs["cpu"], "cpu.cfs_quota_us"), str(quota))
            else:
                d = dirs["unified"]
                _write(os.path.join(d, "memory.max"), str(memory_bytes))
                for fname, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if os.path.exists(os.path.join(d, fname)):
                        _write(os.path.join(d, fname), value)
                _write(os.path.join(d, "pids.max"), str(pids))
                if os.path.exists(os.path.join(d, "cpu.max")):
                    _write(os.path.join(d, "cpu.max"), f"{quota} {CFS_PERIOD_US}")
        except OSError as exc:
            self.remove()
            raise CgroupError(f"cannot set up cgroup {name}: {exc}") from exc
        return self

    def join(self) -> None:
        """Move the calling process in. Called in the child before it drops root."""
        pid = str(os.getpid())
        for path in self.procs_files:
            with open(path, "w") as fh:
                fh.write(pid)

    def oom_killed(self) -> bool:
        # The v1 OOM killer kills one process, so a parent can exit 0 while its children were
        # killed (pitfall #11): the counter, not the exit status, decides MLE.
        try:
            if self.setup.version == "v1":
                text = _read(os.path.join(self.dirs["memory"], "memory.oom_control"))
            else:
                text = _read(os.path.join(self.dirs["unified"], "memory.events"))
        except (OSError, KeyError):
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value or 0) > 0
        return False

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in _read(path).split())
        return found

    def kill_all(self, timeout_s: float = 2.0) -> bool:
        """SIGKILL everything inside until empty; True when empty."""
        return _kill_procs(self.procs_files, self.dirs.get("unified"), timeout_s)

    def remove(self, timeout_s: float = 1.0) -> bool:
        ok = _kill_procs(self.procs_files, self.dirs.get("unified"), timeout_s)
        return _rmdirs(list(self.dirs.values()), timeout_s) and ok


def _kill_procs(procs_files: list[str], unified: str | None, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    if unified and os.path.exists(os.path.join(unified, "cgroup.kill")):
        with contextlib.suppress(OSError):
            _write(os.path.join(unified, "cgroup.kill"), "1")
    while True:
        pids: set[int] = set()
        for path in procs_files:
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in _read(path).split())
        if not pids:
            return True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


def _rmdirs(dirs: list[str], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    ok = True
    for path in dirs:
        while True:
            try:
                os.rmdir(path)
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


def owner_alive(tag: str) -> bool:
    pid_s, _, start = tag.partition(".")
    if not pid_s.isdigit():
        return False
    return _starttime(int(pid_s)) == start


def janitor() -> int:
    """Kill and remove per-run cgroups left by dead workers (e.g. after a kill -9)."""
    setup = detect()
    removed = 0
    for parent in setup.parents.values():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            if not name.startswith(PREFIX):
                continue
            tag = name[len(PREFIX):].rsplit("-", 1)[0]
            if owner_alive(tag):
                continue
            path = os.path.join(parent, name)
            unified = path if setup.version == "v2" else None
            _kill_procs([os.path.join(path, "cgroup.procs")], unified, 1.0)
            if _rmdirs([path], 1.0):
                removed += 1
    return removed
