"""practice.evidence: a variant's evidence is made by the first process that needs it and read
from the shared cache by the others; evidence made by other code, or a cache that fails, never
changes what is served."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import caches

from exercises import registry
from practice import evidence

SLUG = "preemption_policies"  # simulates an engine run for its evidence


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Counts the times the evidence is made (registry.evidence runs the exercise's own);
    each test starts with nothing held anywhere."""
    calls: list[str] = []
    real = registry.evidence

    def counting(spec: Any, params: dict[str, Any]) -> Any:
        calls.append(spec.slug)
        return real(spec, params)

    monkeypatch.setattr(registry, "evidence", counting)
    monkeypatch.setattr(evidence, "SHARE_ABOVE_S", 0)  # whatever this machine's speed
    registry._evidence_cache.clear()
    caches["evidence"].clear()
    yield calls
    registry._evidence_cache.clear()
    caches["evidence"].clear()


def _variant() -> tuple[Any, dict[str, Any]]:
    spec = registry.get(SLUG)
    return spec, registry.params_for(spec, registry.CANONICAL_VARIANT)


def test_another_process_reads_the_evidence_instead_of_making_it(made: list[str]) -> None:
    spec, params = _variant()
    first = evidence.variant_evidence(spec, params)
    assert made == [SLUG] and first
    # Another web worker: nothing in its memory, the shared cache has it.
    registry._evidence_cache.clear()
    second = evidence.variant_evidence(spec, params)
    assert made == [SLUG]
    assert {k: registry.evidence_bytes(v) for k, v in second.items()} == \
        {k: registry.evidence_bytes(v) for k, v in first.items()}
    # ... and keeps it in memory from then on.
    assert registry.cached_evidence(spec, params) is second
    # In a cache of its own: evidence never crowds the log-in counters out of the default one.
    key = evidence.cache_key(spec, params)
    assert caches["evidence"].get(key) is not None and caches["default"].get(key) is None


def test_evidence_made_quickly_is_made_by_each_process(made: list[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evidence, "SHARE_ABOVE_S", 3600)
    spec, params = _variant()
    evidence.variant_evidence(spec, params)
    assert caches["evidence"].get(evidence.cache_key(spec, params)) is None
    registry._evidence_cache.clear()
    evidence.variant_evidence(spec, params)
    assert made == [SLUG, SLUG]


def test_evidence_made_by_other_code_is_not_read(made: list[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    spec, params = _variant()
    evidence.variant_evidence(spec, params)
    registry._evidence_cache.clear()
    monkeypatch.setattr(evidence, "code_digest", lambda: "another-version-of-exercises")
    evidence.variant_evidence(spec, params)
    assert made == [SLUG, SLUG]


def test_a_cache_that_fails_costs_only_the_sharing(made: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    spec, params = _variant()
    expected = {k: registry.evidence_bytes(v) for k, v in registry.evidence(spec, params).items()}
    registry._evidence_cache.clear()
    made.clear()

    def down(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("cache down")

    monkeypatch.setattr(caches["evidence"], "get", down)
    monkeypatch.setattr(caches["evidence"], "set", down)
    found = evidence.variant_evidence(spec, params)
    assert made == [SLUG]
    assert {k: registry.evidence_bytes(v) for k, v in found.items()} == expected


def test_an_exercise_without_evidence_needs_no_cache(made: list[str]) -> None:
    spec = next(s for s in registry.load_all().values()
                if getattr(s.module, "evidence", None) is None)
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    assert evidence.variant_evidence(spec, params) == {}
    assert made == []
