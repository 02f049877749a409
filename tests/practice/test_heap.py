"""practice.heap: a web worker settles its heap (one full collection, then gc.freeze) at a few
request counts only, and the WSGI module the web server loads is what installs it."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from practice.heap import HeapSettler

ROOT = Path(__file__).resolve().parents[2]


def test_the_heap_is_settled_at_the_given_request_counts_and_no_others() -> None:
    settler = HeapSettler(at=frozenset({2, 5}))
    frozen_before = gc.get_freeze_count()
    try:
        frozen_at = []
        for served in range(1, 8):
            before = settler.frozen
            settler()
            if settler.frozen != before:
                frozen_at.append(served)
        assert frozen_at == [2, 5]
        assert settler.served == 7
        # What was alive is now in the permanent generation.
        assert gc.get_freeze_count() > frozen_before
    finally:
        gc.unfreeze()  # this test process keeps its heap as it was


# The web server imports practice.wsgi: it warms the process (practice.warm) and settles the
# heap at once, and a finished request then reaches the settler. Run in a process of its own
# so that this test run's heap is never frozen.
PROBE = textwrap.dedent("""
    import gc, sys
    sys.path.insert(0, {root!r})
    from django.core.signals import request_finished
    import practice.wsgi
    from exercises import registry
    print("views-imported", "practice.views.pages" in sys.modules)
    print("registry-loaded", registry.load_all.cache_info().currsize)
    print("frozen-at-start", gc.get_freeze_count())
    kept = [[i] for i in range(1000)]  # made by the first request, alive after it
    request_finished.send(sender=None)
    print("frozen-after", gc.get_freeze_count())
    kept2 = [[i] for i in range(1000)]  # made by the second, which is not a settling point
    request_finished.send(sender=None)
    print("frozen-later", gc.get_freeze_count())
""")


def test_the_wsgi_application_starts_warm_and_settles_its_heap_after_its_first_request(
        ) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(root=str(ROOT))], capture_output=True, text=True,
        timeout=120, check=True, cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "practice.settings.test"}).stdout
    seen = dict(line.split() for line in out.splitlines() if " " in line)
    # Loaded before any request: the URLconf's view modules and every exercise.
    assert seen["views-imported"] == "True"
    assert seen["registry-loaded"] == "1"
    assert int(seen["frozen-at-start"]) > 0
    # The first request's survivors are frozen too; the second request's are not.
    assert int(seen["frozen-after"]) >= int(seen["frozen-at-start"]) + 1000  # the lists
    assert seen["frozen-later"] == seen["frozen-after"]


# A grading child as practice.celery starts it: its heap settled, then a grade's worth of
# allocations. Run in a process of its own: this test run's collector is left as it is.
GRADING_PROBE = textwrap.dedent("""
    import gc, sys
    sys.path.insert(0, {root!r})
    import practice.celery
    from practice.heap import GRADING_GEN0_THRESHOLD

    def young_passes(n):
        passes = []
        gc.callbacks.append(lambda phase, info: phase == "start" and passes.append(info))
        kept = [[i] for i in range(n)]
        gc.callbacks.clear()
        return sum(1 for info in passes if info["generation"] == 0), len(kept)

    before, _ = young_passes(100_000)
    practice.celery._settle_heap()
    after, _ = young_passes(100_000)
    print(before, after, gc.get_freeze_count() > 0, GRADING_GEN0_THRESHOLD)
""")


def test_a_grading_child_freezes_its_heap_and_collects_the_young_a_fourteenth_as_often() -> None:
    out = subprocess.run(
        [sys.executable, "-c", GRADING_PROBE.format(root=str(ROOT))], capture_output=True,
        text=True, timeout=120, check=True, cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "practice.settings.test"}).stdout
    before, after, frozen, threshold = out.split()
    assert frozen == "True"
    # 100,000 new lists: about one pass per 700 at Python's default (net of what is freed on
    # the way), one per `threshold` after.
    assert int(before) >= 100_000 // 1_000
    assert int(after) <= 100_000 // int(threshold) + 1
