"""runners.cgroups against a fake cgroupfs in tmp_path.

The dev/CI VM only has hybrid cgroup v1, so the v2 path (a delegated parent, memory.max,
memory.oom.group, memory.events, cpu.max, cgroup.kill) is checked here against the file
semantics of Documentation/admin-guide/cgroup-v2.rst: a fake `_make_dir` populates each new
directory with the interface files the kernel would create, and `_read` of cgroup.procs only
lists processes still alive, as the kernel does. The v1 memory/memsw ordering rule is checked
the same way. Nothing here needs root or a sandbox.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners import cgroups as cg

V2_CONTROLLERS = "cpuset cpu io memory hugetlb pids rdma misc"
V2_FILES = {
    "cgroup.procs": "",
    "cgroup.controllers": "",
    "cgroup.subtree_control": "",
    "cgroup.kill": "",
    "memory.max": "max\n",
    "memory.swap.max": "max\n",
    "memory.oom.group": "0\n",
    "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
    "pids.max": "max\n",
    "cpu.max": "max 100000\n",
    "cpu.stat": "usage_usec 1250000\nuser_usec 1000000\nsystem_usec 250000\n",
}
V1_FILES = {
    "memory": {"cgroup.procs": "", "memory.limit_in_bytes": cg.V1_UNLIMITED + "\n",
               "memory.memsw.limit_in_bytes": cg.V1_UNLIMITED + "\n",
               "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"},
    "pids": {"cgroup.procs": "", "pids.max": "max\n"},
    "cpu": {"cgroup.procs": "", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n"},
    "cpuacct": {"cgroup.procs": "", "cpuacct.usage": "1250000000\n"},
}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class FakeFS:
    """Records every write, in order, so tests can check what reached which file."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.writes: list[tuple[str, str]] = []
        real_write, real_read = cg._write, cg._read

        def make_dir(path: str) -> None:
            os.mkdir(path)
            files = self._files_for(path)
            for name, content in files.items():
                Path(path, name).write_text(content)

        def write(path: str, value: str) -> None:
            self.writes.append((os.path.relpath(path, self.root), value))
            if path.endswith("cgroup.kill") and value == "1":
                for pid in self.procs(path):
                    os.kill(pid, 9)
            if path.endswith("cgroup.procs"):
                # The kernel appends a moved pid; a plain file write would replace the list.
                with open(path, "a") as fh:
                    fh.write(value + "\n")
                return
            real_write(path, value)
            # The kernel replaces the value; os.write into a plain file would keep a longer tail.
            Path(path).write_text(value)

        def read(path: str) -> str:
            text = real_read(path)
            if path.endswith("cgroup.procs"):
                return "".join(f"{p}\n" for p in map(int, text.split()) if _alive(p))
            return text

        def remove_dir(path: str) -> None:
            procs = Path(path, "cgroup.procs")
            if procs.exists() and any(_alive(int(p)) for p in procs.read_text().split()):
                raise OSError(errno.EBUSY, "Device or resource busy")
            shutil.rmtree(path)

        monkeypatch.setattr(cg, "_make_dir", make_dir)
        monkeypatch.setattr(cg, "_remove_dir", remove_dir)
        monkeypatch.setattr(cg, "_write", write)
        monkeypatch.setattr(cg, "_read", read)
        self._files_for = lambda path: V2_FILES

    def procs(self, path: str) -> list[int]:
        procs = os.path.join(os.path.dirname(path), "cgroup.procs")
        return [int(p) for p in Path(procs).read_text().split()]

    def files_of(self, path: str) -> dict[str, str]:
        return {name: Path(path, name).read_text() for name in os.listdir(path)
                if Path(path, name).is_file()}


@pytest.fixture
def v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeFS, str]:
    fs = FakeFS(tmp_path, monkeypatch)
    parent = tmp_path / "delegated"
    parent.mkdir()
    for name, content in V2_FILES.items():
        (parent / name).write_text(content)
    (parent / "cgroup.controllers").write_text(V2_CONTROLLERS + "\n")
    return fs, str(parent)


@pytest.fixture
def v1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeFS, cg.CgroupSetup]:
    fs = FakeFS(tmp_path, monkeypatch)
    parents = {}
    for ctrl in ("memory", "pids", "cpu", "cpuacct"):
        parent = tmp_path / ctrl
        parent.mkdir()
        parents[ctrl] = str(parent)
    fs._files_for = lambda path: V1_FILES[Path(path).parent.name]
    return fs, cg.CgroupSetup("v1", parents)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


# -- v2 ---------------------------------------------------------------------------------------


def test_v2_detect_enables_controllers_for_children(v2: tuple[FakeFS, str]) -> None:
    fs, parent = v2
    setup = cg.detect_v2_at(parent)
    assert setup.version == "v2" and setup.parents == {"unified": parent}
    assert ("delegated/cgroup.subtree_control", "+memory +pids +cpu") in fs.writes
    # The probe child was created and removed again.
    assert [n for n in os.listdir(parent) if n.startswith(cg.PREFIX)] == []


def test_v2_detect_skips_controllers_already_enabled(v2: tuple[FakeFS, str]) -> None:
    fs, parent = v2
    Path(parent, "cgroup.subtree_control").write_text("memory pids\n")
    assert cg.detect_v2_at(parent).version == "v2"
    assert ("delegated/cgroup.subtree_control", "+cpu") in fs.writes


def test_v2_without_memory_controller_is_none(v2: tuple[FakeFS, str]) -> None:
    _, parent = v2
    Path(parent, "cgroup.controllers").write_text("cpu io pids\n")
    setup = cg.detect_v2_at(parent)
    assert setup.version == "none" and "memory" in setup.reason


def test_v2_busy_parent_is_none_with_reason(v2: tuple[FakeFS, str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # The "no internal processes" rule: enabling controllers in a cgroup that holds processes
    # fails with EBUSY. That must end in rlimit-only mode with the reason, not a crash.
    _, parent = v2
    real = cg._write

    def busy(path: str, value: str) -> None:
        if path.endswith("subtree_control"):
            raise OSError(16, "Device or resource busy")
        real(path, value)

    monkeypatch.setattr(cg, "_write", busy)
    setup = cg.detect_v2_at(parent)
    assert setup.version == "none" and "busy" in setup.reason.lower()


def test_v2_lane_limits_oom_group_and_no_swap(v2: tuple[FakeFS, str]) -> None:
    fs, parent = v2
    lane = cg.LaneCgroup(cg.detect_v2_at(parent), "roofline-sbx-1.2-0.1")
    lane.create()
    lane.configure(memory_bytes=256 << 20, pids=33, cpus=0.5)
    files = fs.files_of(lane.dirs["unified"])
    assert files["memory.max"] == str(256 << 20)
    assert files["memory.oom.group"] == "1"  # OOM kills the whole sandbox (pitfall #11)
    assert files["memory.swap.max"] == "0"
    assert files["pids.max"] == "33"
    assert files["cpu.max"] == "50000 100000"


def test_v2_unchanged_limits_are_not_rewritten(v2: tuple[FakeFS, str]) -> None:
    fs, parent = v2
    lane = cg.LaneCgroup(cg.detect_v2_at(parent), "roofline-sbx-1.2-0.1")
    lane.create()
    lane.configure(memory_bytes=256 << 20, pids=33, cpus=1)
    before = len(fs.writes)
    lane.configure(memory_bytes=256 << 20, pids=33, cpus=1)
    assert len(fs.writes) == before
    lane.configure(memory_bytes=128 << 20, pids=33, cpus=1)
    assert fs.writes[before:] == [(os.path.relpath(lane.dirs["unified"], fs.root)
                                   + "/memory.max", str(128 << 20))]


def test_v2_oom_kill_counter(v2: tuple[FakeFS, str]) -> None:
    _, parent = v2
    lane = cg.LaneCgroup(cg.detect_v2_at(parent), "roofline-sbx-1.2-0.1")
    lane.create()
    assert lane.oom_kills() == 0
    Path(lane.dirs["unified"], "memory.events").write_text(
        "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 1\n")
    assert lane.oom_kills() == 2


def test_v2_pinned_bytes_leave_out_file_pages(v2: tuple[FakeFS, str]) -> None:
    """Page cache may stay charged to an emptied lane; memory no file backs may not."""
    _, parent = v2
    lane = cg.LaneCgroup(cg.detect_v2_at(parent), "roofline-sbx-1.2-0.1")
    lane.create()
    unified = Path(lane.dirs["unified"])
    (unified / "memory.current").write_text(f"{(40 << 20) + 4096}\n")
    (unified / "memory.stat").write_text(f"anon 0\nfile {40 << 20}\nsock 4096\n")
    assert lane.pinned_bytes() == 4096
    (unified / "memory.stat").write_text(f"anon 0\nfile {8 << 20}\nshmem {32 << 20}\n")
    assert lane.pinned_bytes() == (32 << 20) + 4096 > cg.PINNED_SLACK_BYTES


def test_v1_pinned_bytes_leave_out_file_pages(v1: tuple[FakeFS, cg.CgroupSetup]) -> None:
    _, setup = v1
    lane = cg.LaneCgroup(setup, "roofline-sbx-1.2-0.1")
    lane.create()
    mem = Path(lane.dirs["memory"])
    (mem / "memory.usage_in_bytes").write_text(f"{70 << 20}\n")
    (mem / "memory.stat").write_text(f"cache {64 << 20}\ntotal_active_file {60 << 20}\n"
                                     f"total_inactive_file {4 << 20}\ntotal_shmem 0\n")
    assert lane.pinned_bytes() == 6 << 20


def test_the_cpu_counter_is_found_and_read_in_both_versions(
        v1: tuple[FakeFS, cg.CgroupSetup], tmp_path: Path) -> None:
    """The file runners/bwrap.py binds into the sandbox, and what cpuclock reads from it."""
    from runners.cpuclock import sandbox_cpu_s

    fs, setup = v1
    lane = cg.LaneCgroup(setup, "roofline-sbx-1.2-0.1")
    lane.create()
    counter = lane.cpu_usage_file()
    assert counter == os.path.join(lane.dirs["cpuacct"], "cpuacct.usage")
    assert sandbox_cpu_s(counter) == 1.25
    fs._files_for = lambda path: V2_FILES
    parent = tmp_path / "delegated"
    parent.mkdir()
    for name, content in {**V2_FILES, "cgroup.controllers": V2_CONTROLLERS + "\n"}.items():
        (parent / name).write_text(content)
    lane2 = cg.LaneCgroup(cg.detect_v2_at(str(parent)), "roofline-sbx-1.2-0.2")
    lane2.create()
    counter2 = lane2.cpu_usage_file()
    assert counter2 == os.path.join(lane2.dirs["unified"], "cpu.stat")
    assert sandbox_cpu_s(counter2) == 1.25
    assert sandbox_cpu_s(str(tmp_path / "absent")) is None
    no_acct = cg.LaneCgroup(cg.CgroupSetup("v1", {k: v for k, v in setup.parents.items()
                                                  if k != "cpuacct"}), "roofline-sbx-1.2-0.3")
    assert no_acct.cpu_usage_file() is None


def test_shared_v1_hierarchies_are_joined_once(v1: tuple[FakeFS, cg.CgroupSetup]) -> None:
    """cpu and cpuacct mounted together ("cpu,cpuacct") are one directory: one write per pid."""
    _, setup = v1
    shared = cg.CgroupSetup("v1", {**setup.parents, "cpuacct": setup.parents["cpu"]})
    lane = cg.LaneCgroup(shared, "roofline-sbx-1.2-0.1")
    assert len(lane.procs_files) == 3


def test_v2_add_and_kill_all_uses_cgroup_kill(v2: tuple[FakeFS, str],
                                               sleeper: subprocess.Popen[bytes]) -> None:
    fs, parent = v2
    lane = cg.LaneCgroup(cg.detect_v2_at(parent), "roofline-sbx-1.2-0.1")
    lane.create()
    lane.add(sleeper.pid)
    assert lane.pids() == {sleeper.pid}
    assert lane.kill_all(timeout_s=2.0)
    sleeper.wait(timeout=5)
    kill_file = os.path.relpath(lane.dirs["unified"], fs.root) + "/cgroup.kill"
    assert (kill_file, "1") in fs.writes
    assert lane.pids() == set()


# -- v1 ---------------------------------------------------------------------------------------


def test_v1_memsw_never_below_limit(v1: tuple[FakeFS, cg.CgroupSetup]) -> None:
    """v1 rejects memory.limit_in_bytes > memsw: grow memsw first, shrink the limit first."""
    fs, setup = v1
    lane = cg.LaneCgroup(setup, "roofline-sbx-1.2-0.1")
    lane.create()
    state = {"memory.limit_in_bytes": int(cg.V1_UNLIMITED),
             "memory.memsw.limit_in_bytes": int(cg.V1_UNLIMITED)}
    for size in (512 << 20, 128 << 20, 1024 << 20, 256 << 20):
        start = len(fs.writes)
        lane.configure(memory_bytes=size, pids=65, cpus=1)
        for path, value in fs.writes[start:]:
            name = os.path.basename(path)
            if name in state:
                state[name] = int(value)
                assert state["memory.memsw.limit_in_bytes"] >= state["memory.limit_in_bytes"]
        assert state == {"memory.limit_in_bytes": size, "memory.memsw.limit_in_bytes": size}
    files = fs.files_of(lane.dirs["cpu"])
    assert files["cpu.cfs_quota_us"] == "100000" and files["cpu.cfs_period_us"] == "100000"
    assert fs.files_of(lane.dirs["pids"])["pids.max"] == "65"


def test_v1_oom_counter_and_kill(v1: tuple[FakeFS, cg.CgroupSetup],
                                 sleeper: subprocess.Popen[bytes]) -> None:
    _, setup = v1
    lane = cg.LaneCgroup(setup, "roofline-sbx-1.2-0.1")
    lane.create()
    Path(lane.dirs["memory"], "memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert lane.oom_kills() == 3
    lane.add(sleeper.pid)
    assert lane.pids() == {sleeper.pid}
    assert lane.kill_all(timeout_s=2.0)  # no cgroup.kill in v1: SIGKILL each pid
    sleeper.wait(timeout=5)


# -- lanes and the janitor --------------------------------------------------------------------


def test_lanes_are_reused_and_replaced_when_stuck(v1: tuple[FakeFS, cg.CgroupSetup],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _, setup = v1
    monkeypatch.setattr(cg, "_lanes", {})
    monkeypatch.setattr(cg, "_generation", {})
    first = cg.lane_cgroup(setup, 0)
    assert cg.lane_cgroup(setup, 0) is first
    assert cg.lane_cgroup(setup, 1) is not first
    # A process that survives SIGKILL keeps the lane busy: the next run gets a fresh one.
    monkeypatch.setattr(cg.LaneCgroup, "kill_all", lambda self, timeout_s=2.0: False)
    assert cg.lane_cgroup(setup, 0) is first  # clean: reused without a check
    first.dirty = True  # as run() marks it when its final kill_all fails
    replaced = cg.lane_cgroup(setup, 0)
    assert replaced is not first and replaced.name.endswith("-0.2")
    # The stuck one is left for the janitor of a later worker; retired lanes are removed.
    assert os.path.exists(first.dirs["memory"])
    cg.retire_lane(0)
    cg.retire_lane(1)
    assert not os.path.exists(replaced.dirs["memory"])


def test_janitor_removes_only_dead_owners(v1: tuple[FakeFS, cg.CgroupSetup],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _, setup = v1
    monkeypatch.setattr(cg, "detect", lambda: setup)
    dead = f"{cg.PREFIX}999999999.1-0.1"
    live = f"{cg.PREFIX}{cg.owner_tag()}-5.1"
    for parent in setup.parents.values():
        os.mkdir(os.path.join(parent, dead))
        os.mkdir(os.path.join(parent, live))
    assert sorted(cg.leftovers(setup)) == sorted(os.path.join(p, dead)
                                                 for p in setup.parents.values())
    assert cg.janitor() == len(setup.parents)
    for parent in setup.parents.values():
        assert os.listdir(parent) == [live]
    assert cg.leftovers(setup) == []


def test_owner_tag_names_this_process() -> None:
    tag = cg.owner_tag()
    assert tag.startswith(f"{os.getpid()}.") and cg.owner_alive(tag)
    assert not cg.owner_alive("999999999.1")
    assert cg._owner_of(f"{cg.PREFIX}{tag}-3.2") == tag


def test_a_lane_weighs_as_its_worker_is_nice_v2(v2: tuple[FakeFS, str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker at niceness 10 (practice/celery.py) gets lanes that weigh as nice 10: the
    kernel's 1.25x per level, as cpu.weight (v2, 100 = nice 0) or cpu.shares (v1, 1024)."""
    assert [cg.cpu_weight(n) for n in (0, 10, 19, -20)] == [100, 11, 1, 8674]
    monkeypatch.setattr(os, "getpriority", lambda which, who: 10)
    fs, parent = v2
    monkeypatch.setattr(fs, "_files_for", lambda path: {**V2_FILES, "cpu.weight": "100\n"})
    lane = cg.LaneCgroup(cg.detect_v2_at(parent), "roofline-sbx-1.2-0.1")
    lane.create()
    lane.configure(memory_bytes=256 << 20, pids=33, cpus=1)
    assert fs.files_of(lane.dirs["unified"])["cpu.weight"] == "11"


def test_a_lane_weighs_as_its_worker_is_nice_v1(v1: tuple[FakeFS, cg.CgroupSetup],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getpriority", lambda which, who: 10)
    fs, setup = v1
    monkeypatch.setattr(fs, "_files_for", lambda path: {
        **V1_FILES[Path(path).parent.name],
        **({"cpu.shares": "1024\n"} if Path(path).parent.name == "cpu" else {})})
    lane = cg.LaneCgroup(setup, "roofline-sbx-1.2-0.2")
    lane.create()
    lane.configure(memory_bytes=256 << 20, pids=33, cpus=1)
    assert fs.files_of(lane.dirs["cpu"])["cpu.shares"] == "113"
