"""Every exercise proves itself (DMOJ's judge test suite, Exercism): the reference scores 1 on
the canonical and generated variants, each known mistake gets its feedback, the listed selftest
cases score what they say, the templates render, and every code mutant is rejected in the
sandbox."""
from __future__ import annotations

import pytest

from exercises import registry
from graders import selftest


@pytest.mark.parametrize("slug", sorted(registry.load_all()))
def test_exercise_selftest(slug: str) -> None:
    report = selftest.run(registry.get(slug))
    assert report.passed, "the selftest checked nothing"
    assert report.ok, "\n".join(report.failed)
