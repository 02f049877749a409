"""Production: everything secret from the environment, static files hashed and compressed,
HTTPS only (`manage.py check --deploy` is clean; tests/security/test_security_headers.py runs it).
"""
from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import LOG_LEVEL, ROOFLINE_HSTS_SECONDS, ROOFLINE_SSL_REDIRECT, SECRET_KEY

if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set in the environment")
DEBUG = False
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# Cookies only over HTTPS (the session cookie stays HttpOnly and SameSite=Lax from base.py).
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
# TLS ends at the proxy in front of gunicorn, which says so in X-Forwarded-Proto.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Plain HTTP is redirected; ROOFLINE_SSL_REDIRECT=0 only where the proxy already does it.
SECURE_SSL_REDIRECT = ROOFLINE_SSL_REDIRECT
# Probes from inside the network speak plain HTTP to gunicorn (the container's healthcheck, a
# Prometheus scrape): a redirect to HTTPS would fail them. /healthz/ reveals nothing; /metrics
# still needs staff or the bearer token. Django matches these against the path without its "/".
SECURE_REDIRECT_EXEMPT = [r"^healthz/$", r"^metrics$"]
# Browsers remember to use HTTPS (a year by default; ROOFLINE_HSTS_SECONDS=0 turns it off while
# a new domain is being tried out). Subdomains too, and the site may be put on the preload list.
SECURE_HSTS_SECONDS = ROOFLINE_HSTS_SECONDS
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True

# One JSON object per line on stdout (practice/logging_json.py), for the log shipper.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "practice.logging_json.JsonFormatter"}},
    "handlers": {"stdout": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout",
                            "formatter": "json"}},
    "root": {"handlers": ["stdout"], "level": LOG_LEVEL},
}
# Workers log through the same handler instead of Celery's own plain-text one.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
