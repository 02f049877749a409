"""A web worker's long-lived heap kept out of the collector's way (gc.freeze), as the grading
workers' is (practice.celery).

A web worker holds the catalog, every exercise's spec and the pages it has rendered per variant:
hundreds of thousands of objects that live as long as the process. Python's full (generation
2) collection scans all of them each time it runs, and it runs in the middle of whatever
request happens to allocate past the threshold: measured in bench/load.py at 50 students, 30 to
200 ms each, a few times a minute per worker, which is most of the exercise page's slowest
percentile. The worker settles its heap once as it starts (practice.warm: the registry and the
URLconf, loaded then), and again after a few requests (1, 16, 256 and 4096: what the first
request loads lazily, then the catalog and the pages rendered as the class arrives): one full
collection runs as the request finishes and what survives it is frozen, so later full
collections scan only what was made since. Only those few points pay a collection, so the
frozen leftovers of the request in hand at each (its cycles are kept forever) stay a bounded
few."""
from __future__ import annotations

import gc
from typing import Any

FREEZE_AT = frozenset({1, 16, 256, 4096})
# A grading child's youngest generation is collected after this many new container objects
# (Python's default is 700). See settle_grading_heap.
GRADING_GEN0_THRESHOLD = 10_000


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
            settle_heap()
            self.frozen += 1


def settle_heap() -> None:
    """One full collection, then what survives it frozen: later collections skip it."""
    gc.collect()
    gc.freeze()


def settle_grading_heap() -> None:
    """A grading child's heap: what it holds now frozen (gc.freeze), and its collector run a
    fourteenth as often.

    A code grade allocates hundreds of thousands of objects (Hypothesis draws the hidden cases
    afresh, the reference's outputs, the student's outputs parsed), and tens of thousands of
    them live on for a while in graders.code's per-seed cache. With the default threshold of
    700 the collector ran every few hundred allocations, and each youngest-generation pass let
    enough survivors through to set off a full collection every five or six grades, each
    scanning the whole unfrozen heap (about 100 ms; the freeze alone does not stop them, since
    the cache itself is most of what they scan). Measured over the 14 code exercises' reference
    and starter answers, 168 grades in one process: 21.8 ms of collector time a grade, 18 % of
    the grade's CPU, at the default; 7.0 ms at 10,000 (a full collection about once in 170
    grades); no better at 20,000 or 50,000. Memory is not the cost: what a pass frees is the
    cyclic garbage, and 10,000 young objects more before a pass is a few megabytes at most.
    Called as each child starts and again once its text model is loaded; bench/load.py's
    in-process rate runs under it too, so the two rates compare the same grading."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GRADING_GEN0_THRESHOLD, older, oldest)
