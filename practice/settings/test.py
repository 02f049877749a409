"""Tests: the database from DATABASE_URL (PostgreSQL on CI) or a SQLite file.

The SQLite test database is a file, not memory, so that worker processes started by the tests
see the rows the test wrote.
"""
from __future__ import annotations

import os
from pathlib import Path

# `make test` runs the suite in two pytest-xdist workers: each keeps its own var folder (the
# embedded broker's queue, static files, the SQLite file), so neither reads the other's
# messages. A worker process a test starts gets ROOFLINE_VAR_DIR from the test.
if os.environ.get("PYTEST_XDIST_WORKER") and "ROOFLINE_VAR_DIR" not in os.environ:
    os.environ["ROOFLINE_VAR_DIR"] = str(
        Path(__file__).resolve().parents[2] / "var" / f"test-{os.environ['PYTEST_XDIST_WORKER']}")

from .base import *  # noqa: E402, F403
from .base import DATABASES, VAR_DIR  # noqa: E402

SECRET_KEY = "test-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}
# A connection per request or task, as before persistent connections: the worker and server
# processes the tests start come and go around a test database that is dropped at the end,
# and PostgreSQL refuses to drop one that an idle connection still holds.
DATABASES["default"]["CONN_MAX_AGE"] = 0

VAR_DIR.mkdir(parents=True, exist_ok=True)
# Serve static files from their source folders (no collectstatic in tests).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
(VAR_DIR / "staticfiles").mkdir(exist_ok=True)
# Per-process memory is right for tests (each test clears it; workers never read it), and keeps
# log-in counters out of the shared Redis that CI's REDIS_URL points at.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
          "evidence": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                       "LOCATION": "evidence"}}
# Suites submit hundreds of answers as one student (every exercise solved in one browser run, a
# hundred code submissions for the crash test): the caps are off here, and
# tests/security/test_rate_limits.py turns the real ones back on.
ROOFLINE_MAX_IN_FLIGHT = 1_000_000
ROOFLINE_SUBMIT_RATE = 1_000_000
