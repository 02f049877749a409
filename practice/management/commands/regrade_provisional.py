"""`manage.py regrade_provisional` — send every provisional kernel grade to the GPU workers.

A kernel part graded while there was no GPU worker is "provisional" (a CPU preview pass). Run
this once kernel parts are routed to GPU workers (ROOFLINE_KERNEL_QUEUE=gpu); GPU workers also
run it themselves when they start (practice/celery.py). Without GPU workers it does nothing.
"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from practice import provisional


class Command(BaseCommand):
    help = "Re-grade every provisional (CPU-preview) kernel submission on the GPU workers."

    def handle(self, *args: Any, **opts: Any) -> None:
        if not provisional.gpu_workers_configured():
            self.stdout.write("Kernel parts are not routed to GPU workers "
                              "(ROOFLINE_KERNEL_QUEUE is not \"gpu\"): nothing queued.")
            return
        jobs = provisional.regrade_provisional()
        n = sum(job.total for job in jobs)
        self.stdout.write(f"Queued {n} provisional submission{'s' if n != 1 else ''} for a GPU "
                          f"re-grade in {len(jobs)} job{'s' if len(jobs) != 1 else ''}.")
