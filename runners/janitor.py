"""Job directories and the janitor.

Each run's files go into a fresh job directory, removed when the run ends. A worker killed
mid-run leaves its job directory, cgroups and (under its own slot uid) processes behind; the
janitor, run once at worker start, clears them (pitfall #13). The owner tag in a job
directory's name says whose it is, so a live worker's runs are never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator

from runners import cgroups
from runners.identity import processes_of_uid, run_uid, slot_is_explicit

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


def leftover_job_dirs() -> list[str]:
    """Job dirs that exist right now (none should, outside a run)."""
    root = _jobs_root()
    with contextlib.suppress(OSError):
        return [os.path.join(root, n) for n in os.listdir(root) if n.startswith(JOB_PREFIX)]
    return []


def janitor() -> dict[str, int]:
    """Clean up after workers that died mid-run (pitfall #13). Call once at worker start.

    Always: cgroups and job dirs whose owner process is dead. And when $ROOFLINE_SANDBOX_SLOT
    gives this process its slot (so no live worker shares the uid), every process still
    running as that slot's uid.
    """
    done = {"cgroups": cgroups.janitor(), "job_dirs": janitor_job_dirs(), "processes": 0}
    if slot_is_explicit() and os.geteuid() == 0:
        for pid in processes_of_uid(run_uid()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                done["processes"] += 1
    return done


@contextlib.contextmanager
def new_job_dir(files: dict[str, bytes]) -> Iterator[str]:
    path = tempfile.mkdtemp(prefix=f"{JOB_PREFIX}{cgroups.owner_tag()}-", dir=_jobs_root())
    try:
        for name, content in files.items():
            target = os.path.join(path, name)
            parent = os.path.dirname(target)
            if parent != path:
                os.makedirs(parent, mode=0o755, exist_ok=True)
            # O_EXCL|O_NOFOLLOW: we write as root into a fresh dir; never follow anything.
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, content.encode() if isinstance(content, str) else content)
                os.fchmod(fd, 0o644)  # the umask may have masked group/other read
            finally:
                os.close(fd)
        # mkdtemp makes it 0700; the slot uid needs to read and traverse it.
        for dirpath, _, _ in os.walk(path):
            os.chmod(dirpath, 0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
