"""The Celery app for the poison test: the real one (`celery -A tests.reliability.poison_app`),
with one thing added in each pool child: grading an answer that carries POISON_MARK kills the
child with SIGKILL, the way a grader crash in native code or the kernel's OOM killer would.

Why here and not in the answer itself: the sandbox exists so that no answer can kill its worker,
and no exercise may carry test-only behaviour; so the poison is injected in the worker process,
by a module only the test loads, at the point a real crash would happen: after the claim
(which counts the delivery), inside grading. Production code is not changed at all.
"""
from __future__ import annotations

import os
import signal
from typing import Any

from celery.signals import worker_process_init

from practice.celery import app

__all__ = ["POISON_MARK", "app"]

POISON_MARK = "# roofline-test: this answer kills its worker child"


@worker_process_init.connect
def _poison_grading(**kwargs: Any) -> None:
    # Each child after the fork, once Django is set up (practice.grading needs the models).
    from practice import grading

    real = grading.grade_claimed

    def grade_or_die(sub: Any) -> Any:
        if POISON_MARK in sub.answer:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(sub)

    grading.grade_claimed = grade_or_die  # type: ignore[assignment]
