"""practice/rendered.py: a variant's pages are rendered once and reused, per spec and variant."""
from __future__ import annotations

import dataclasses

import pytest

from exercises import registry
from practice import rendered as r

SLUG = "max_concurrency"


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(r, "_cache", r.OrderedDict())


def test_the_same_variant_is_rendered_once() -> None:
    spec = registry.get(SLUG)
    first = r.rendered(spec, "3")
    assert r.rendered(spec, "3") is first
    other = r.rendered(spec, "4")
    assert other is not first and other.statement_html != first.statement_html
    # What it holds is what the page showed before: the statement with and without hints.
    assert first.parsed.hints and first.interview_html != first.statement_html
    assert set(first.sections_html) == {p.id for p in spec.parts}


def test_a_reloaded_spec_is_rendered_afresh() -> None:
    spec = registry.get(SLUG)
    first = r.rendered(spec, "3")
    reloaded = dataclasses.replace(spec)
    again = r.rendered(reloaded, "3")
    assert again is not first and again.statement_html == first.statement_html


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(r, "CACHE_SIZE", 3)
    spec = registry.get(SLUG)
    for variant in ("1", "2", "3", "4", "5"):
        r.rendered(spec, variant)
    assert [k[1] for k in r._cache] == ["3", "4", "5"]
