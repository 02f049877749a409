"""graders.code.retimed: a timed case's reference is timed once per grade, and again (the least
of REFERENCE_TIMINGS kept) only for a submission slow enough that the extra timings could
change its speed verdict."""
from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from exercises import registry
from graders import code

SEED = 31


def _timed_exercises() -> list[str]:
    """Every code exercise whose hidden cases include a timed one."""
    slugs = []
    for slug, spec in sorted(registry.load_all().items()):
        if not (spec.code_dir / "checks.py").is_file():
            continue
        checks = code.load_module(spec.code_dir / "checks.py")
        params = registry.params_for(spec, registry.CANONICAL_VARIANT)
        if any(c.get("timed") for c in checks.hidden_cases(params, SEED)):
            slugs.append(slug)
    return slugs


def _bound(checks: ModuleType) -> float:
    """The slowdown a checks.py allows against the reference, whatever it names it."""
    for name in ("SLOWDOWN_LIMIT", "SPEED_RATIO"):
        if hasattr(checks, name):
            return float(getattr(checks, name))
    import exercises.prefix_scripts as shared  # the two hash-chain exercises' shared bound

    return shared.SPEED_RATIO


def test_some_exercises_have_a_timed_case() -> None:
    assert len(_timed_exercises()) >= 3


@pytest.mark.parametrize("slug", _timed_exercises())
def test_each_speed_bound_leaves_the_single_timing_room(slug: str) -> None:
    # Skipping the extra timings below RETIME_ABOVE x the first one is sound only if the bound is
    # far above it: a submission under RETIME_ABOVE x passes any bound over that many times the
    # least timing the extra runs could find, unless noise inflated one timing bound/RETIME x.
    checks = code.load_module(registry.get(slug).code_dir / "checks.py")
    assert _bound(checks) >= 5 * code.RETIME_ABOVE


def _radix() -> tuple[Path, list[dict[str, Any]]]:
    spec = registry.get("radix_prefix_trie")
    checks = code.load_module(spec.code_dir / "checks.py")
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    timed = [c for c in checks.hidden_cases(params, SEED) if c.get("timed")]
    return spec.code_dir, timed


def test_a_slow_submission_gets_the_least_of_more_timings_and_the_cache_is_untouched() -> None:
    code_dir, cases = _radix()
    # A first timing inflated far beyond the reference's real cost (~0.1 s here).
    expected = [{"output": "kept", "cpu_s": 50.0}]
    got = [{"output": "x", "cpu_s": 101.0}]  # above RETIME_ABOVE x 50 s
    out = code.retimed(code_dir, "code/reference.py", cases, got, expected)
    assert out is not expected and expected == [{"output": "kept", "cpu_s": 50.0}]
    assert out[0]["output"] == "kept" and 0 < out[0]["cpu_s"] < 50.0


def test_a_submission_under_the_threshold_keeps_the_single_timing() -> None:
    code_dir, cases = _radix()
    expected = [{"output": "kept", "cpu_s": 50.0}]
    for got in ([{"output": "x", "cpu_s": 99.0}], [{"error": "boom"}], [{"output": "x"}]):
        assert code.retimed(code_dir, "code/reference.py", cases, got, expected) is expected


def test_an_untimed_case_is_never_retimed() -> None:
    code_dir, cases = _radix()
    untimed = [{k: v for k, v in cases[0].items() if k != "timed"}]
    expected = [{"output": "kept", "cpu_s": 50.0}]
    got = [{"output": "x", "cpu_s": 500.0}]
    assert code.retimed(code_dir, "code/reference.py", untimed, got, expected) is expected
