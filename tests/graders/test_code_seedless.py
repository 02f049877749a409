"""graders.code keeps the reference's result on a case every seed draws (a public or an edge
case, known by its id and input) once per variant: a later grade with another seed takes it from
there. It must be what a fresh run gives, even after the checks have read it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from exercises import registry
from graders import code, fixed_cases


def _code_exercises() -> list[str]:
    return [slug for slug, spec in sorted(registry.load_all().items())
            if (spec.code_dir / "checks.py").is_file()]


def _setup(slug: str) -> tuple[Path, str, dict[str, Any], tuple[str, ...]]:
    spec = registry.get(slug)
    part = next(p for p in spec.parts if p.type == "code")
    return (spec.code_dir, "code/reference.py", registry.params_for(spec, registry.CANONICAL_VARIANT),
            part.sandbox_modules)


def _fresh(code_dir: Path, cases: list[dict[str, Any]]) -> list[Any]:
    driver = code.load_module(code_dir / "driver.py")
    ref = code.load_module(code_dir.parent / "code/reference.py")
    return [None if c.get("timed") else code.run_and_time(driver, ref, c)["output"] for c in cases]


@pytest.mark.parametrize("slug", _code_exercises())
def test_a_seedless_case_is_run_once_and_stays_what_a_fresh_run_gives(
        slug: str, monkeypatch: pytest.MonkeyPatch) -> None:
    code_dir, reference, params, modules = _setup(slug)
    checks = code.load_module(code_dir / "checks.py")
    cases, expected = code._cases_and_expected(code_dir, reference, params, 71, "submit", modules)
    # The checks read the results (as a grade does) before another seed reuses them.
    checks.check(cases, [dict(e) for e in expected], expected, params)
    ran: list[str] = []
    real = code.run_and_time

    def counted(driver: Any, ref: Any, case: dict[str, Any], timings: int = 1) -> Any:
        ran.append(case["id"])
        return real(driver, ref, case, timings)

    monkeypatch.setattr(code, "run_and_time", counted)
    again, expected_again = code._cases_and_expected(code_dir, reference, params, 72, "submit",
                                                     modules)
    # Seedless: a public case, or a hidden one with the id and input it had for both probe seeds.
    seedless = {c["id"]: fixed_cases.input_key(c) for c in checks.public_cases(params)} \
        | fixed_cases.fixed_ids(checks, params)
    shared = [c["id"] for c in again
              if not c.get("timed") and seedless.get(c["id"]) == fixed_cases.input_key(c)]
    assert shared, "no case is drawn for every seed"
    assert not set(shared) & set(ran), "a seedless case was run again"
    assert len(ran) == len(again) - len(shared)
    monkeypatch.setattr(code, "run_and_time", real)
    fresh = _fresh(code_dir, again)
    for case, exp, want in zip(again, expected_again, fresh, strict=True):
        if not case.get("timed"):
            assert json.dumps(exp["output"], sort_keys=True) == json.dumps(want, sort_keys=True), \
                case["id"]
