"""exercises/_template/ is no exercise (folders starting with "_" are never loaded, so the site
never lists it), but a new code part is copied from its code/ folder, so the suite proves that
folder as it proves an exercise's: the reference passes every check, each mutant in
mutants.toml fails the check it names (in process here, and through the real sandbox in the
selftest below), and the whole template selftests."""
from __future__ import annotations

import json
import os
import tomllib
from types import ModuleType
from typing import Any

import pytest

from exercises import mutants, registry
from exercises.spec import ExerciseSpec
from graders import selftest
from graders.code import load_module
from tests.exercises.support import load_by_path

TEMPLATE = registry.EXERCISES_DIR / "_template"
CODE = TEMPLATE / "code"
SEED = 12345


def test_the_template_is_never_loaded_as_an_exercise() -> None:
    assert TEMPLATE not in registry.exercise_folders()
    with pytest.raises(registry.ExerciseError, match="folder name"):
        registry.load(TEMPLATE)


class _Code:
    """The template's checks, driver and reference, run in process as the grader runs them."""

    def __init__(self) -> None:
        registry.expose_shared_modules(("driver_errors",))  # the driver imports it by name
        self.checks = load_module(CODE / "checks.py")
        self.driver = load_module(CODE / "driver.py")
        self.reference = load_module(CODE / "reference.py")
        self.cases = self.checks.public_cases({}) + self.checks.hidden_cases({}, SEED)
        self.expected = self.run(self.reference)

    def run(self, module: ModuleType) -> list[dict[str, Any]]:
        # Through JSON, as the result channel carries them.
        return [json.loads(json.dumps({"output": self.driver.run_case(module, c["input"])}))
                for c in self.cases]

    def failed(self, module: ModuleType) -> dict[str, str]:
        results = self.checks.check(self.cases, self.run(module), self.expected, {})
        assert [c.name for c in results] == [name for name, _, _ in self.checks.CHECKS]
        return {c.name: c.message for c in results if not c.passed}


@pytest.fixture(scope="module")
def code() -> _Code:
    return _Code()


def test_the_reference_passes_every_check(code: _Code) -> None:
    assert code.failed(code.reference) == {}
    ids = [c["id"] for c in code.cases]
    assert len(set(ids)) == len(ids)
    assert code.checks.hidden_cases({}, SEED) == code.checks.hidden_cases({}, SEED)
    assert code.checks.hidden_cases({}, SEED) != code.checks.hidden_cases({}, SEED + 1)


@pytest.mark.parametrize("name", [m.name for m in mutants.load(CODE)])
def test_every_mutant_fails_the_check_it_names(code: _Code, name: str) -> None:
    mutant = next(m for m in mutants.load(CODE) if m.name == name)
    failed = code.failed(mutants.module(CODE, name))
    assert mutant.caught_by in failed, failed
    # Failures name the count and the smallest failing case, as every exercise's do.
    assert all(" cases fail. Smallest: blocks_needed(" in m for m in failed.values()), failed


def _template_spec() -> ExerciseSpec:
    """The template as the registry would load it, were its folder name a slug and had it a
    uuid (a copy gets both)."""
    toml = TEMPLATE / "exercise.toml"
    data = tomllib.loads(toml.read_text(encoding="utf-8"))
    parts = tuple(registry._parse_part(raw, i, toml) for i, raw in enumerate(data["parts"]))
    return ExerciseSpec(
        slug="template", title=data["title"], seed=data["seed"], topic=data["topic"],
        difficulty=data["difficulty"], minutes=data["minutes"], summary=data["summary"],
        parts=parts, path=TEMPLATE, module=load_by_path("_template"),
        selftest=registry._parse_selftest(TEMPLATE / "selftest.toml"))


def test_the_template_selftests_in_the_sandbox() -> None:
    """The real selftest: the reference scores 1 and every mutant fails its check, in the
    sandbox; the other parts and the templates as for any exercise."""
    from runners import SandboxUnavailable, get_backend

    try:
        get_backend()
    except SandboxUnavailable as exc:
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(f"sandbox unavailable on CI: {exc}")
        pytest.skip(f"sandbox unavailable: {exc}")
    report = selftest.run(_template_spec())
    assert report.ok, "\n".join(report.failed)
    assert any("mutant no_validation fails 'rejects invalid input'" in p
               for p in report.passed), report.passed
