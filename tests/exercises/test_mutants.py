"""Every code and kernel part keeps its known bugs as edits of its reference (mutants.toml) and
its look-alike correct solutions the same way (equivalents.toml): each builds, each mutant is
caught by the check it names, each equivalent passes. One test for every exercise; the
sandboxed run of the same mutants is the selftest's (tests/test_every_exercise.py). Also, for
every code part (once here rather than a copy per tests/exercises/test_<slug>.py): the reference
passes every check, the checks are named as CHECKS names them, an error on every case fails every
check, and another process draws the same hidden cases."""
from __future__ import annotations

from pathlib import Path

import pytest

from exercises import mutants, registry
from graders.selftest import SANDBOXED
from tests.exercises.support import check_score, code_part

# A code part is only worth its checks if they tell this many distinct bugs apart.
MIN_CODE_MUTANTS = 6
EQUIVALENT_SEEDS = (12345, 1, 2)
# The seed each exercise's own tests draw their hidden cases with, where it is not the
# contract's 12345: the reference must pass on those draws too.
CASE_SEEDS: dict[str, int] = {
    "canary_sample_size": 4242, "continuous_batching_scheduler": 4242,
    "hol_blocking_policy": 4242, "overload_rejection_rule": 4242,
    "prefix_boundary_diagnosis": 3434, "region_loss_fleet": 2024,
    "spec_acceptance_counters": 4242, "spec_decode_policy": 4242,
}


def _sandboxed_parts() -> list[tuple[str, str, Path]]:
    return [(slug, part.id, spec.path / SANDBOXED[part.type])
            for slug, spec in sorted(registry.load_all().items())
            for part in spec.parts if part.type in SANDBOXED]


def _code_slugs() -> list[str]:
    return [slug for slug, spec in sorted(registry.load_all().items())
            if (spec.path / "code").is_dir()]


def _code_solutions(kind: str) -> list[tuple[str, str]]:
    return [(slug, m.name) for slug, spec in sorted(registry.load_all().items())
            if (spec.path / "code").is_dir()
            for m in mutants.load(spec.path / "code", kind)]


@pytest.mark.parametrize(("slug", "part", "folder"), _sandboxed_parts(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_mutants_build_from_the_reference(slug: str, part: str, folder: Path) -> None:
    built = mutants.load(folder)
    reference = (folder / "reference.py").read_text(encoding="utf-8")
    assert built, f"{slug}/{folder.name}/mutants.toml lists no mutant"
    assert all(m.source != reference for m in built)
    assert len({m.source for m in built}) == len(built), "two mutants are the same program"
    mutants.load(folder, "equivalents")
    if folder.name == "code":
        checks = code_part(slug).checks
        names = [name for name, _, _ in checks.CHECKS]
        assert len(built) >= MIN_CODE_MUTANTS
        for m in built:
            assert m.caught_by in names, f"{m.name}: caught_by {m.caught_by!r} is not a check"


@pytest.mark.parametrize(("slug", "name"), _code_solutions("mutants"))
def test_every_mutant_fails_the_check_it_names(slug: str, name: str) -> None:
    code = code_part(slug)
    mutant = code.built()[name]
    results = code.results(code.module(name))
    failed = {c.name: c for c in results if not c.passed}
    assert check_score(results) < 1
    assert mutant.caught_by in failed, sorted(failed)
    for c in failed.values():  # a failure says what went wrong, not just that it did
        assert c.message.strip(), c.name


@pytest.mark.parametrize(("slug", "name"), _code_solutions("equivalents"))
@pytest.mark.parametrize("seed", EQUIVALENT_SEEDS)
def test_every_equivalent_passes(slug: str, name: str, seed: int) -> None:
    code = code_part(slug)
    results = code.results(code.module(name, "equivalents"), seed)
    assert all(c.passed for c in results), [f"{c.name}: {c.message}" for c in results
                                            if not c.passed]


def _code_draws() -> list[tuple[str, int]]:
    return [(slug, seed) for slug in _code_slugs()
            for seed in sorted({12345, CASE_SEEDS.get(slug, 12345)})]


@pytest.mark.parametrize(("slug", "seed"), _code_draws())
def test_the_reference_passes_every_check(slug: str, seed: int) -> None:
    code = code_part(slug)
    results = code.reference_results(seed)
    assert [c.name for c in results] == [name for name, _, _ in code.checks.CHECKS]
    assert all(c.passed for c in results), [f"{c.name}: {c.message}" for c in results
                                            if not c.passed]


@pytest.mark.parametrize(("slug", "seed"), _code_draws())
def test_an_error_on_every_case_fails_every_check(slug: str, seed: int) -> None:
    # A crashed or killed run is an error record per case: it must earn nothing, not even a
    # check that only looks at some cases or at timing.
    code = code_part(slug)
    cases, expected = code.cases_and_expected(seed)
    got = [{"error": f"no output for case {c['id']}"} for c in cases]
    assert not any(c.passed for c in code.checks.check(cases, got, expected, code.params))


@pytest.mark.parametrize("slug", _code_slugs())
def test_hidden_cases_are_the_same_in_another_process(slug: str, tmp_path: Path) -> None:
    code_part(slug).assert_hidden_cases_same_in_another_process(tmp_path)


# -- the builder itself ----------------------------------------------------------------------

REFERENCE = "def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x + 1\n"


def _write(folder: Path, toml: str) -> Path:
    (folder / "reference.py").write_text(REFERENCE, encoding="utf-8")
    (folder / "mutants.toml").write_text(toml, encoding="utf-8")
    return folder


def test_an_edit_is_applied_once_in_order() -> None:
    built = mutants.build(REFERENCE, [{"old": "def f(x):\n    return x + 1", "new":
                                       "def f(x):\n    return x + 2"},
                                      {"old": "x + 2", "new": "x - 2"}], "here")
    assert built == REFERENCE.replace("x + 1", "x - 2", 1)


@pytest.mark.parametrize(("old", "why"), [("return x + 1", "occurs 2 times"),
                                          ("return x + 3", "does not occur")])
def test_an_orphaned_or_ambiguous_edit_fails_naming_it(old: str, why: str) -> None:
    with pytest.raises(mutants.MutantError, match=why):
        mutants.build(REFERENCE, [{"old": old, "new": "pass"}], "here")


def test_an_edit_that_changes_nothing_fails() -> None:
    with pytest.raises(mutants.MutantError, match="unchanged"):
        mutants.build(REFERENCE, [{"old": "x + 1\n\n\ndef g", "new": "x + 1\n\n\ndef g"}], "m")


@pytest.mark.parametrize(("toml", "why"), [
    ('[[mutant]]\nname = "a"\n[[mutant.edit]]\nold = "x"\nnew = "y"\n', "`bug`"),
    ('[[mutant]]\nname = "a"\nbug = "b"\n', "either"),
    ('[[mutant]]\nname = "a"\nbug = "b"\nwhy = "c"\nfile = "reference.py"\n', "unknown keys"),
    ('[[mutant]]\nname = "a b"\nbug = "b"\nfile = "reference.py"\n', "identifier"),
    ('[[mutant]]\nname = "a"\nbug = "b"\nfile = "missing.py"\n', "`file`"),
    ('[[mutant]]\nname = "a"\nbug = "b"\nfile = "reference.py"\n'
     '[[mutant]]\nname = "a"\nbug = "b"\nfile = "reference.py"\n', "used twice"),
    ('[[mutants]]\nname = "a"\n', "unknown tables"),
])
def test_a_malformed_file_is_named(tmp_path: Path, toml: str, why: str) -> None:
    folder = _write(tmp_path, toml)
    with pytest.raises(mutants.MutantError, match=why) as err:
        mutants.load(folder)
    assert "mutants.toml" in str(err.value)


def test_a_whole_file_mutant_is_read_as_it_is(tmp_path: Path) -> None:
    folder = _write(tmp_path, '[[mutant]]\nname = "a"\nbug = "b"\nfile = "whole.py"\n')
    (folder / "whole.py").write_text("print('whole')\n", encoding="utf-8")
    assert mutants.load(folder)[0].source == "print('whole')\n"
