"""A web worker's long-lived heap kept out of the collector's way (gc.freeze), as the grading
workers' is (practice.celery).

A web worker holds the catalog, every exercise's spec and the pages it has rendered per variant:
hundreds of thousands of objects that live as long as the process. Python's full (generation
2) collection scans all of them each time it runs, and it runs in the middle of whatever
request happens to allocate past the threshold: measured in bench/load.py at 50 students, 30 to
200 ms each, a few times a minute per worker, which is most of the exercise page's slowest
percentile. After a few points in the worker's life (requests 1, 16, 256 and 4096: start-up,
then the catalog and the pages rendered as the class arrives) one full collection runs as a
request finishes and what survives it is frozen: later full collections scan only what was
made since. Only those few points pay a collection, so the frozen leftovers of the request in
hand at each (its cycles are kept forever) stay a bounded few."""
from __future__ import annotations

import gc
from typing import Any

FREEZE_AT = frozenset({1, 16, 256, 4096})


class HeapSettler:
    """A request_finished receiver: counts the requests this process has served and settles
    the heap when the count reaches one of `at`."""

    def __init__(self, at: frozenset[int] = FREEZE_AT) -> None:
        self.at = at
        self.served = 0
        self.frozen = 0  # how many times it has settled the heap (tests, diagnostics)

    def __call__(self, **kwargs: Any) -> None:
        self.served += 1
        if self.served in self.at:
            gc.collect()
            gc.freeze()
            self.frozen += 1
