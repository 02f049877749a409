"""The optional error hook: with SENTRY_DSN set and sentry_sdk installed, unhandled errors in
views and Celery tasks go to Sentry (or any service that speaks its protocol).

sentry_sdk is not a dependency: a deployment that wants it installs it. SENTRY_DSN set without
the package logs a warning and the site runs on, since losing error reports must not take the
site down. Called from PracticeConfig.ready(), so the web and the worker processes both install it.
"""
from __future__ import annotations

import importlib.util
import logging

log = logging.getLogger(__name__)


def install(dsn: str) -> bool:
    """True when the hook was installed."""
    if not dsn:
        return False
    if importlib.util.find_spec("sentry_sdk") is None:
        log.warning("SENTRY_DSN is set but sentry_sdk is not installed: errors are only logged")
        return False
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    # No personal data: students' usernames and answers stay on our side.
    sentry_sdk.init(dsn=dsn, integrations=[DjangoIntegration(), CeleryIntegration()],
                    send_default_pii=False)
    return True
