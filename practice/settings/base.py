"""Settings shared by every environment.

Layering: base.py reads the environment (and only base.py does); dev.py, test.py and prod.py
import it and change what differs. `DJANGO_SETTINGS_MODULE` picks the layer (manage.py defaults to
dev). Nothing secret lives in git: SECRET_KEY, DATABASE_URL and REDIS_URL come from the environment.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("ROOFLINE_VAR_DIR", BASE_DIR / "var"))

SECRET_KEY = os.environ.get("SECRET_KEY", "")
DEBUG = False
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "practice.apps.PracticeConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before WhiteNoise, which answers static files itself: they get the same headers as pages.
    "practice.security.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "practice.urls"
WSGI_APPLICATION = "practice.wsgi.application"
AUTH_USER_MODEL = "practice.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "catalog"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "practice.context_processors.recall_due",
            ],
        },
    },
]

def _service_url(url: str, password: str, template: str, fallback: str) -> str:
    """`url` if set; else, where docker-compose.yml passes the password of its own postgres or
    redis service (ROOFLINE_*_PASSWORD), that service's URL; else `fallback`. The compose file
    cannot build the URL itself: Compose v1 (Debian's docker-compose) does not nest ${...}
    inside a default."""
    if url:
        return url
    return template.format(quote(password, safe="")) if password else fallback


DATABASES = {
    "default": dj_database_url.parse(
        _service_url(os.environ.get("DATABASE_URL", ""),
                     os.environ.get("ROOFLINE_POSTGRES_PASSWORD", ""),
                     "postgres://roofline:{}@postgres:5432/roofline",
                     f"sqlite:///{VAR_DIR / 'db.sqlite3'}"), conn_max_age=0
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Web and worker write to the same file: wait for the lock instead of failing at once.
    # IMMEDIATE: a transaction takes the write lock when it begins. SQLite's default (deferred)
    # upgrades a read lock to a write lock at the first write, and when another process is
    # writing then, SQLite fails at once with "database is locked" (waiting could deadlock),
    # ignoring the timeout: a submission (count in-flight rows, then insert) or a worker's
    # record_result (read the row, then save) failed whenever the other was writing.
    # WAL: readers never wait for the writer (in the default rollback journal a commit locks
    # every reader out), so pages keep loading while workers record grades. Synchronous stays
    # FULL: a commit is on disk when it returns. The mode is kept in the file once set.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        timeout=20, transaction_mode="IMMEDIATE", init_command="PRAGMA journal_mode=WAL")
elif DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # A database host that drops packets fails a request (and /healthz/) in seconds instead of
    # hanging it for the kernel's TCP timeout; a URL's own ?connect_timeout= wins.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
    # One connection per process, kept between requests and tasks: opening one (TCP, the
    # startup packet, authentication) cost a page about as much as the rest of a status poll.
    # Checked before reuse, so a restarted server costs one failed check, not a failed request.
    DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("ROOFLINE_DB_CONN_MAX_AGE", "300"))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Argon2 (memory-hard) for new passwords; the others only verify hashes made before, and Django
# rehashes those with Argon2 at the next successful log-in.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

# --- Celery (the broker carries submission ids only; the Submission row is the result) ---
REDIS_URL = _service_url(os.environ.get("REDIS_URL", ""),
                         os.environ.get("ROOFLINE_REDIS_PASSWORD", ""), "redis://:{}@redis:6379/0", "")
BROKER_DIR = VAR_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Longer than the longest task, so a slow grade is not handed to a second worker.
        "visibility_timeout": int(os.environ.get("ROOFLINE_VISIBILITY_TIMEOUT", "300")),
        # kombu only restores unacked messages of a dead worker when these sweeps run.
        "unacked_restore_interval": 5,
        "unacked_restore_throttle": 1,
    }
else:
    # Embedded broker: a folder, no server. It drops a message when a worker fetches it, so a
    # worker killed mid-task loses the message: the sweeper below re-enqueues the row.
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
        "polling_interval": 0.1,
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = 90
CELERY_TASK_TIME_LIMIT = 120
# A grading child is replaced when its peak memory passes 1.5 GiB (a leak), and in any case
# after 5,000 tasks. Not after every 200 as before: a new child loads the text model again
# (14 s of CPU), which cost every grade 70 ms on average, taken from the cores grading needs.
CELERY_WORKER_MAX_TASKS_PER_CHILD = 5000
CELERY_WORKER_MAX_MEMORY_PER_CHILD = 1_500_000  # KiB of resident memory, checked after a task
CELERY_TASK_DEFAULT_QUEUE = "grade"
# The niceness a worker's grading children (and their sandboxes) run at: the web's requests
# come first on busy cores (practice/celery.py). 0 leaves the worker's own.
ROOFLINE_WORKER_NICE = int(os.environ.get("ROOFLINE_WORKER_NICE", "10"))
# How often beat runs the sweeper (requeue_stuck). An env knob so the reliability tests can
# watch a recovery in seconds instead of waiting for the production period.
ROOFLINE_SWEEP_PERIOD_S = float(os.environ.get("ROOFLINE_SWEEP_PERIOD_S", "30"))
CELERY_BEAT_SCHEDULE = {
    "sweep-stuck-submissions": {"task": "practice.tasks.sweep",
                                "schedule": ROOFLINE_SWEEP_PERIOD_S},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Grading ---
# A submission queued longer than this is re-enqueued (its message was lost).
ROOFLINE_QUEUED_GRACE_S = int(os.environ.get("ROOFLINE_QUEUED_GRACE_S", "60"))
# Running longer than its deadline (time limit + this margin) means its worker died.
ROOFLINE_RUNNING_GRACE_S = int(os.environ.get("ROOFLINE_RUNNING_GRACE_S", "150"))
# A submission delivered this many times without a verdict is stopped with an error.
# Where kernel parts are graded: "grade" (any worker, a preview in Triton's interpreter) or
# "gpu" (only workers started with -Q gpu and ROOFLINE_KERNEL_DEVICE=gpu).
ROOFLINE_KERNEL_QUEUE = os.environ.get("ROOFLINE_KERNEL_QUEUE", "grade")
ROOFLINE_MAX_DELIVERIES = int(os.environ.get("ROOFLINE_MAX_DELIVERIES", "3"))
# A re-grade task works this long, then queues the rest of its job as a new task (well under
# the visibility timeout; students' submissions get graded in between).
ROOFLINE_REGRADE_SLICE_S = float(os.environ.get("ROOFLINE_REGRADE_SLICE_S", "60"))

# --- Security (practice/security.py adds the CSP and Permissions-Policy headers) ---
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# Pages hand the token to htmx in <body hx-headers>; no script reads the cookie.
CSRF_COOKIE_HTTPONLY = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Every script, style sheet, font and library is served from static/ (vendored), and templates
# have no inline <script> or style="" (json_script blocks are data, not run). `data:` images:
# Pico's CSS draws its checkbox and select icons as data: SVGs, and the favicon is `data:,`.
# practice/security.py adds a per-response nonce to style-src, for CodeMirror's <style> only.
ROOFLINE_CSP: dict[str, list[str]] = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}
# Powerful browser features the site never uses, switched off for it and anything it embeds.
ROOFLINE_PERMISSIONS_POLICY = ("accelerometer=(), camera=(), geolocation=(), gyroscope=(), "
                               "magnetometer=(), microphone=(), payment=(), usb=()")
# HTTPS settings that prod.py switches on (here because only this file reads the environment).
ROOFLINE_HSTS_SECONDS = int(os.environ.get("ROOFLINE_HSTS_SECONDS", str(365 * 24 * 3600)))
ROOFLINE_SSL_REDIRECT = os.environ.get("ROOFLINE_SSL_REDIRECT", "1") != "0"

# --- Rate limits (practice/ratelimit.py) ---
# Counters live where every web process sees them: submissions are counted in the database;
# failed log-ins in this cache (Redis when there is one, else files under VAR_DIR, which every
# process on this machine shares; never per-process memory).
# Evidence shared between processes (practice/evidence.py) has a cache of its own: the file
# cache culls a third of its entries at random past MAX_ENTRIES, and evidence must never push
# a log-in counter out.
if REDIS_URL:
    _REDIS_CACHE = {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                    "LOCATION": REDIS_URL,
                    "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}
    CACHES = {"default": {**_REDIS_CACHE, "KEY_PREFIX": "roofline"},
              "evidence": {**_REDIS_CACHE, "KEY_PREFIX": "roofline-evidence"}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache")},
              "evidence": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                           "LOCATION": str(VAR_DIR / "cache-evidence"),
                           "OPTIONS": {"MAX_ENTRIES": 2000}}}
# A student may have this many submissions queued or running at once (each holds a worker).
ROOFLINE_MAX_IN_FLIGHT = int(os.environ.get("ROOFLINE_MAX_IN_FLIGHT", "5"))
# ... and send at most this many answers per window (every part type; invalid ones are free).
ROOFLINE_SUBMIT_RATE = int(os.environ.get("ROOFLINE_SUBMIT_RATE", "30"))
ROOFLINE_SUBMIT_WINDOW_S = int(os.environ.get("ROOFLINE_SUBMIT_WINDOW_S", "60"))
# This many failed log-ins for one username from one address lock that pair for the window.
ROOFLINE_LOGIN_FAILURES = int(os.environ.get("ROOFLINE_LOGIN_FAILURES", "5"))
ROOFLINE_LOGIN_WINDOW_S = int(os.environ.get("ROOFLINE_LOGIN_WINDOW_S", "900"))

# --- Operations (practice/health.py, practice/metrics.py, practice/error_hook.py) ---
# /metrics answers staff, or a scraper sending `Authorization: Bearer <token>` when this is set.
ROOFLINE_METRICS_TOKEN = os.environ.get("ROOFLINE_METRICS_TOKEN", "")
# Errors go to Sentry (or a compatible service) when this is set and sentry_sdk is installed.
SENTRY_DSN = os.environ.get("SENTRY_DSN", "")
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO").upper()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
}
