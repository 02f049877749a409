"""Server processes for tests and benchmarks: each started as the leader of a process group of
its own, its output in a log file, so one signal reaches its whole tree (a Celery worker's pool
child and the sandbox under it, gunicorn's workers).

Used by tests/conftest.py (a worker per test), tests/reliability/conftest.py (workers killed
mid-grading, beat) and bench/load.py (gunicorn and workers under load).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class GroupProcess:
    """One process started in a new session (so its pid is its group's id)."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.argv = argv
        self.terminated = False
        with log.open("wb") as out:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def name(self) -> str:
        return self.log.stem

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, chars: int = 3000) -> str:
        return self.text()[-chars:]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_for(self, marker: str, timeout: float, poll_s: float = 0.1) -> float:
        """Seconds until `marker` shows in the log; RuntimeError (with the log's tail) if the
        process exits first or `timeout` passes."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if not self.alive():
                raise RuntimeError(f"{self.log.name} exited: {self.tail()}")
            if marker in self.text():
                return time.monotonic() - start
            time.sleep(poll_s)
        raise RuntimeError(f"{self.log.name}: no {marker!r} within {timeout:.0f} s: "
                           f"{self.tail()}")

    def signal_group(self, sig: int) -> None:
        """`sig` to the whole group; the leader may be gone while its group lives on."""
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(self) -> None:
        """Ask the group for a warm shutdown, once (the caller waits with stop())."""
        if self.alive() and not self.terminated:
            self.terminated = True
            self.signal_group(signal.SIGTERM)

    def kill(self) -> None:
        """kill -9 the whole group, and reap the leader."""
        self.signal_group(signal.SIGKILL)
        self.proc.wait()

    def stop(self, grace_s: float = 20) -> None:
        """SIGTERM to the group, then SIGKILL past `grace_s` (a warm shutdown waits for the
        task in hand)."""
        if self.alive():
            self.terminate()
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.kill()


def celery(*args: str) -> list[str]:
    """The command line of `celery ARGS` with this interpreter."""
    return [sys.executable, "-m", "celery", *args]


def celery_worker(name: str, *extra: str, app: str = "practice") -> list[str]:
    """A worker as the tests and benchmarks run one: both queues, prefork with one child, no
    gossip or mingle (they only slow the start), named `name@host`."""
    return celery("-A", app, "worker", "-Q", "grade,gpu", "-c", "1", "--pool", "prefork",
                  "--without-gossip", "--without-mingle", "--loglevel", "INFO",
                  "-n", f"{name}@%h", *extra)
