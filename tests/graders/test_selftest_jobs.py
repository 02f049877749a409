"""graders.selftest.run_all with jobs > 1: the same reports, in the same order, as one at a time."""
from __future__ import annotations

import pytest

from graders import selftest

# Two quick exercises (no sandbox with code=False), deliberately not in sorted order.
SLUGS = ["stranded_prefix_blocks", "batch1_gap_trace"]


def test_parallel_reports_match_serial_ones_in_order() -> None:
    serial = selftest.run_all(SLUGS, code=False)
    parallel = selftest.run_all(SLUGS, code=False, jobs=2)
    assert [r.slug for r in parallel] == SLUGS
    assert [(r.slug, r.passed, r.failed) for r in parallel] == \
        [(r.slug, r.passed, r.failed) for r in serial]
    assert all(r.passed for r in parallel)


def test_an_unknown_slug_fails_before_any_exercise_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    monkeypatch.setattr(selftest, "run", lambda spec, code=True: ran.append(spec.slug))
    with pytest.raises(KeyError, match="no_such_exercise"):
        selftest.run_all(["batch1_gap_trace", "no_such_exercise"], jobs=2)
    assert ran == []
