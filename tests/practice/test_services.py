"""CI exercises the real services: PostgreSQL for the database, Redis for the broker."""
from __future__ import annotations

import os

import pytest
from django.conf import settings
from django.db import connection


@pytest.mark.skipif(not os.environ.get("CI"), reason="CI runs on PostgreSQL and Redis")
@pytest.mark.django_db
def test_ci_runs_on_postgresql_and_redis() -> None:
    assert connection.vendor == "postgresql"
    assert settings.CELERY_BROKER_URL.startswith("redis://")


def test_celery_is_configured_for_a_judge_queue() -> None:
    assert settings.CELERY_TASK_ACKS_LATE and settings.CELERY_TASK_REJECT_ON_WORKER_LOST
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1
    assert settings.CELERY_TASK_SOFT_TIME_LIMIT < settings.CELERY_TASK_TIME_LIMIT
    assert settings.CELERY_TASK_IGNORE_RESULT
    from practice.celery import app

    assert app.conf.task_default_queue == "grade"
    assert app.conf.task_acks_late
