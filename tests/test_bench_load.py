"""Smoke run of bench/load.py: a few students for a few seconds, nothing lost, no failed request.

The benchmark's own figures are not checked (they depend on the machine); only that the whole
chain (gunicorn, Celery workers, log-in, browsing, inline and queued grading, status polling,
drain, grade-rate phase, cleanup) works and that it reports `lost: 0`.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.services, pytest.mark.timed]


def test_a_short_load_run_loses_nothing() -> None:
    # Its own SQLite file and embedded broker: CI's PostgreSQL database and Redis stay untouched.
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "ROOFLINE_VAR_DIR")}
    # The chain, not the figures: its workers neither load the text model (no text answer is
    # sent, and the bench would wait for it) nor yield to the other tests running beside this
    # one (practice/celery.py lowers a worker's whole session), which would only stretch it.
    env |= {"ROOFLINE_TEXT_WARMUP": "0", "ROOFLINE_WORKER_NICE": "0"}
    proc = subprocess.run(
        [sys.executable, "bench/load.py", "--duration", "5", "--students", "3", "--think", "1",
         "--ratio-seconds", "2", "--ratio-concurrency", "2", "--drain", "120",
         "--code-seconds", "4", "--code-clients", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True,
        # About 40 s on two idle cores (server start-up is most of it); the margin is for a
        # machine shared with other test runs. --drain bounds the wait for the queue.
        timeout=400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "lost: 0 " in out, out[-3000:]
    assert "exercise page / trivial view = " in out
    assert "site / in-process = " in out
