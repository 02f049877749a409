"""Real processes for the crash, outage and poison tests: a private redis-server that a test may
stop and start again, Celery workers and a beat (the sweeper's clock) started with short
recovery settings, and helpers that watch the database.

Every test gets its own Redis port and its own folder, so two runs of the suite can share a
machine; the system Redis on 6379 (which CI uses after us) is never touched.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import reset_producers, worker_env
from tests.processes import GroupProcess, celery, celery_worker

ROOT = Path(__file__).resolve().parents[2]

# The cheap code exercise the tests submit (its reference grades in ~0.4-0.6 s through bwrap
# on the 2-core dev VM, hidden cases included).
CODE_SLUG = "canary_sample_size"

# kombu's Redis transport looks for unacked messages of dead consumers this often
# (unacked_restore_interval in practice/settings/base.py; not an env knob, it is short already).
RESTORE_INTERVAL_S = 5.0
# A fresh worker: Python, Django, Celery and the sandbox probe, on a loaded 2-core machine.
WORKER_START_BUDGET_S = 60.0


def on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def need(condition: bool, why: str) -> None:
    """CI must run these tests; a developer machine without the tool skips them."""
    if not condition:
        if on_ci():
            pytest.fail(why)
        pytest.skip(why)


def need_sandbox() -> None:
    """Every test here grades code, which a worker runs only in the sandbox."""
    import runners

    try:
        runners.get_backend()
    except runners.SandboxUnavailable as exc:
        need(False, f"no sandbox to grade code in: {exc}")


@dataclass(frozen=True)
class Recovery:
    """The recovery settings handed to worker and beat processes (env knobs read by
    practice/settings/base.py). Tests pick short values and say why next to them."""

    sweep_period_s: float = 3.0  # ROOFLINE_SWEEP_PERIOD_S: beat sends `sweep` this often
    running_grace_s: int = 20  # ROOFLINE_RUNNING_GRACE_S: running longer = its worker died
    queued_grace_s: int = 60  # ROOFLINE_QUEUED_GRACE_S: queued longer = its message was lost
    visibility_timeout_s: int = 300  # ROOFLINE_VISIBILITY_TIMEOUT: Redis redelivers unacked
    max_deliveries: int = 3  # ROOFLINE_MAX_DELIVERIES: claims before a row is stopped as poison

    def env(self) -> dict[str, str]:
        return {"ROOFLINE_SWEEP_PERIOD_S": str(self.sweep_period_s),
                "ROOFLINE_RUNNING_GRACE_S": str(self.running_grace_s),
                "ROOFLINE_QUEUED_GRACE_S": str(self.queued_grace_s),
                "ROOFLINE_VISIBILITY_TIMEOUT": str(self.visibility_timeout_s),
                "ROOFLINE_MAX_DELIVERIES": str(self.max_deliveries)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A redis-server of this test's own, without persistence: stopping it loses every message
    in it, the harshest outage (the rows in the database must carry the work through)."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.folder = folder
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20) -> None:
        self.starts += 1
        log = (self.folder / f"redis{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--dir", str(self.folder)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        import redis

        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.log_tail()}")
            try:
                client.ping()
                return
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server not answering in {timeout} s: {self.log_tail()}")

    def stop(self) -> None:
        """Terminate the server (an outage: clients get 'connection refused' until start)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self) -> str:
        return (self.folder / f"redis{self.starts}.log").read_text(errors="replace")[-2000:]


class CeleryProcess(GroupProcess):
    """A `celery worker` (prefork, one child) or `celery beat`, in a process group of its own so
    a test can kill the whole tree at once, ready once its log shows `ready`."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, ready: str) -> None:
        super().__init__(argv, env, log)
        self.ready_marker = ready

    def wait_ready(self, timeout: float = WORKER_START_BUDGET_S) -> float:
        return self.wait_for(self.ready_marker, timeout)

    def kill_mid_grading(self, timeout: float) -> None:
        """kill -9 the group at a moment its pool child is inside a sandbox run, so it holds a
        claimed row whose result is not saved yet (the result is saved after the run). The
        group is stopped (SIGSTOP) while we look, so it cannot finish between look and kill."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            os.killpg(self.proc.pid, signal.SIGSTOP)
            if self.grading_now():
                self.kill()
                return
            os.killpg(self.proc.pid, signal.SIGCONT)
            time.sleep(0.02)
        raise AssertionError(f"{self.log.name} was never seen grading in {timeout} s")

    def pool_children(self) -> list[int]:
        return children_of(self.proc.pid)

    def grading_now(self) -> bool:
        """True while the pool child has a process of its own: a sandbox run in progress."""
        return any(children_of(child) for child in self.pool_children())


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 (after the parenthesised command, which may hold spaces) is the parent pid.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


@dataclass
class Site:
    """The broker, the worker and beat processes, and the settings they were started with."""

    broker: str  # a redis:// URL, or "embedded"
    var_dir: Path
    recovery: Recovery
    redis: RedisServer | None = None
    app: str = "practice"
    processes: list[CeleryProcess] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return worker_env(self.broker, self.var_dir) | self.recovery.env()

    def start_worker(self, wait: bool = True) -> CeleryProcess:
        n = sum(1 for p in self.processes if p.ready_marker == "ready.")
        w = CeleryProcess(celery_worker(f"rel{n}-{os.getpid()}-{time.monotonic_ns()}",
                                        app=self.app),
                          self.env(), self.var_dir / f"worker{n}.log", "ready.")
        self.processes.append(w)
        if wait:
            w.wait_ready()
        return w

    def start_beat(self) -> CeleryProcess:
        b = CeleryProcess(
            celery("-A", self.app, "beat", "--loglevel", "INFO",
                   "-s", str(self.var_dir / "celerybeat-schedule")),
            self.env(), self.var_dir / "beat.log", "beat: Starting")
        self.processes.append(b)
        b.wait_ready()
        return b

    def stop_all(self) -> None:
        for p in self.processes:  # all at once: each warm shutdown takes seconds
            p.terminate()
        for p in self.processes:
            p.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.log.name}\n{p.text()[-4000:]}" for p in self.processes)


# What the redis_site and embedded_site fixtures give a test: Site for the given settings.
SiteFactory = Callable[[Recovery], Site]


def point_app_at(conf: dict[str, Any]) -> Callable[[], None]:
    """Make this (the test) process publish to the broker under test; returns the undo."""
    from practice.celery import app

    saved = {k: app.conf[k] for k in conf}
    app.conf.update(conf)
    reset_producers(app)

    def undo() -> None:
        app.conf.update(saved)
        reset_producers(app)

    return undo


@pytest.fixture
def redis_site(tmp_path: Path) -> Iterator[SiteFactory]:
    """A private redis-server and a factory for a Site on it (workers and beat added by the
    test). Everything started is stopped at the end, the server last."""
    need(shutil.which("redis-server") is not None, "redis-server is not installed")
    need_sandbox()
    sites: list[Site] = []
    undo: list[Callable[[], None]] = []
    server = RedisServer(tmp_path)

    def make(recovery: Recovery) -> Site:
        var_dir = tmp_path / "var"
        var_dir.mkdir(exist_ok=True)
        server.start()
        undo.append(point_app_at({"broker_url": server.url, "broker_transport_options": {
            "visibility_timeout": recovery.visibility_timeout_s,
            "unacked_restore_interval": RESTORE_INTERVAL_S, "unacked_restore_throttle": 1}}))
        site = Site(server.url, var_dir, recovery, redis=server)
        sites.append(site)
        return site

    yield make
    for site in sites:
        site.stop_all()
    for u in undo:
        u()
    server.stop()


@pytest.fixture
def embedded_site(tmp_path: Path) -> Iterator[SiteFactory]:
    """The embedded (filesystem) broker in this test's folder."""
    need_sandbox()
    sites: list[Site] = []
    undo: list[Callable[[], None]] = []

    def make(recovery: Recovery) -> Site:
        var_dir = tmp_path / "var"
        broker = var_dir / "broker"
        for sub in ("queue", "control", "processed"):
            (broker / sub).mkdir(parents=True, exist_ok=True)
        undo.append(point_app_at({"broker_url": "filesystem://", "broker_transport_options": {
            "data_folder_in": str(broker / "queue"), "data_folder_out": str(broker / "queue"),
            "control_folder": str(broker / "control"),
            "processed_folder": str(broker / "processed"),
            "store_processed": False, "polling_interval": 0.1}}))
        site = Site("embedded", var_dir, recovery)
        sites.append(site)
        return site

    yield make
    for site in sites:
        site.stop_all()
    for u in undo:
        u()


# --- watching the database ------------------------------------------------------------------

def wait_until(check: Callable[[], bool], timeout: float, what: str,
               on_timeout: Callable[[], str] = lambda: "", step: float = 0.2) -> float:
    """Poll until check() is true; returns the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        time.sleep(step)
    raise AssertionError(f"{what}: not within {timeout:.0f} s\n{on_timeout()}")


def status_counts(pks: list[int]) -> dict[str, int]:
    from django.db.models import Count

    from practice.models import Submission

    rows = Submission.objects.filter(pk__in=pks).values("status").annotate(n=Count("id"))
    return {r["status"]: r["n"] for r in rows}


def all_finished(pks: list[int]) -> bool:
    from practice.models import Submission

    return not Submission.objects.filter(pk__in=pks).exclude(
        status__in=(Submission.Status.GRADED, Submission.Status.ERROR)).exists()


def code_reference() -> tuple[str, str]:
    """(part id, reference source) of the cheap code exercise."""
    from exercises import registry

    spec = registry.get(CODE_SLUG)
    part = next(p for p in spec.parts if p.type == "code")
    return part.id, (spec.code_dir / "reference.py").read_text()
