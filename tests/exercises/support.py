"""Shared pieces of the exercise tests: loading an exercise with its TOML, its tolerances and its
variants, and the checks the contract test (test_contract.py) runs over every exercise (known
mistakes stay distinct from the reference and from each other; the real graders accept the
reference and name each mistake). ExerciseUnderTest also carries the checks many exercise files
make of their own templates, selftest cases and formula parts, and CodePart the in-process run
of a code part's trusted machinery (checks, driver, reference, mutants) with the checks the
code exercises' files share; each file passes its own figures, answers and seeds."""
from __future__ import annotations

import functools
import importlib.util
import math
import random
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import graders
from exercises import registry, templating
from exercises.spec import ExerciseSpec, Mistake
from graders.selftest import answer_text

EXERCISES = Path(__file__).resolve().parents[2] / "exercises"
DEFAULT_TOLERANCE = 0.02
# A solution value named in a template: looser than templating.PLACEHOLDER (no closing braces
# needed), so a half-written placeholder counts too.
SOLUTION_REF = re.compile(r"\{\{\s*s\.([A-Za-z_]\w*)")


def close(value: float, ref: float, rel: float) -> bool:
    """Within `rel` of `ref` (relative); exact equality when `rel` is 0."""
    return value == ref if rel == 0 else abs(value - ref) <= rel * abs(ref)


def load_by_path(name: str) -> ModuleType:
    """exercises/<name>/exercise.py, loaded by path as the registry does (the exercise folders
    are not packages), under the module name `<name>_exercise`."""
    spec = importlib.util.spec_from_file_location(f"{name}_exercise",
                                                  EXERCISES / name / "exercise.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # Registered before running it, as an import would: dataclasses look their module up there.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_file(path: Path, name: str) -> ModuleType:
    """A trusted exercise file (checks.py, driver.py, reference.py) loaded by path under `name`,
    registered in sys.modules as an import would (dataclasses look their module up there)."""
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class ExerciseUnderTest:
    module: ModuleType
    folder: Path
    toml: dict[str, Any]
    parts: dict[str, dict[str, Any]]
    number_parts: list[str]

    @classmethod
    def load(cls, module: ModuleType) -> ExerciseUnderTest:
        assert module.__file__
        folder = Path(module.__file__).resolve().parent
        toml = tomllib.loads((folder / "exercise.toml").read_text(encoding="utf-8"))
        parts = {p["id"]: p for p in toml["parts"]}
        number_parts = [pid for pid, p in parts.items() if p["type"] == "number"]
        return cls(module, folder, toml, parts, number_parts)

    def tol(self, part: str) -> float:
        return self.parts[part].get("tolerance", DEFAULT_TOLERANCE)

    def variants(self, count: int = 200) -> list[dict[str, Any]]:
        """Variant i is generated from random.Random(i)."""
        return [self.module.generate(random.Random(seed)) for seed in range(count)]

    def spec(self) -> ExerciseSpec:
        # Loaded by folder: registry.get() would load every exercise, including half-written ones.
        return registry.load(self.folder)

    def spec_fixture(self) -> Callable[[], ExerciseSpec]:
        """A module-scoped pytest fixture named `spec`; assign it to `spec` in the test module."""
        def spec() -> ExerciseSpec:  # a plain function: pytest deprecates bound-method fixtures
            return self.spec()

        return pytest.fixture(scope="module", name="spec")(spec)

    def rendered(self, which: str, variants: Iterable[Mapping[str, Any]]) -> Iterator[str]:
        """`which` (statement.md or solution.md) rendered for the canonical variant, then for
        each of `variants`."""
        template = (self.folder / which).read_text(encoding="utf-8")
        for p in [self.module.CANONICAL, *variants]:
            yield templating.render(template, p, self.module.solve(p), which)

    def assert_no_nan_rendered(self, which: str, variants: Iterable[Mapping[str, Any]]) -> None:
        """No placeholder of `which` renders as nan or inf for the canonical variant or any of
        `variants`: the text has no more of those words than the template's own prose (which
        may say "NaN" on purpose)."""
        template = (self.folder / which).read_text(encoding="utf-8").lower()
        for text in self.rendered(which, variants):
            for word in ("nan", "inf"):
                assert text.lower().count(word) == template.count(word), word

    def assert_solution_quotes(self, figures: Iterable[str]) -> None:
        """The solution rendered for the canonical variant shows each of `figures` as written (the
        research notes' numbers, so a change of formula that moves them is seen)."""
        text = next(self.rendered("solution.md", ()))
        for figure in figures:
            assert figure in text, figure

    def assert_selftest_cases_well_formed(self, wrong: str, right: str) -> None:
        """selftest.toml names real parts, each case is invalid or has a score, one is invalid, the
        answer `wrong` (typically off by 2x) scores 0 and `right` (typically in other units) 1."""
        cases = tomllib.loads((self.folder / "selftest.toml").read_text(encoding="utf-8"))["case"]
        # A labelled text answer (`covered`) is checked key point by key point, not by score.
        assert all(c["part"] in self.parts and (c.get("invalid") or "score" in c or "covered" in c)
                   for c in cases)
        assert any(c.get("invalid") for c in cases)
        assert any(c["answer"] == wrong and c["score"] == 0 for c in cases)
        assert any(c["answer"] == right and c["score"] == 1 for c in cases)

    def assert_formula_grader_separates(self, spec: ExerciseSpec, part: str = "formula",
                                        right: str | None = None) -> None:
        """The real grader gives the canonical formula (the module's, or `right` as a student might
        write it) full marks and each known mistake of `part` none, with that mistake's own feedback
        (a formula is graded in a child process, which the contract test's in-process grading
        leaves out)."""
        module = self.module
        p = module.CANONICAL
        right = module.solve(p)[part] if right is None else right
        assert graders.grade_answer(spec, part, right, p, seed=1).score == 1.0
        for m in module.mistakes(p):
            if m.part == part:
                r = graders.grade_answer(spec, part, answer_text(spec.part(part), m.answer), p,
                                         seed=1)
                assert r.score == 0.0 and r.feedback == m.feedback, m.name

    def assert_statement_shows_only_givens(self, givens: Iterable[str]) -> None:
        """statement.md uses no solution value (`{{ s.name }}`) but `givens`: no answer or worked
        intermediate is handed out."""
        statement = (self.folder / "statement.md").read_text(encoding="utf-8")
        used = set(SOLUTION_REF.findall(statement))
        assert used <= set(givens), used - set(givens)


def assert_mistakes_distinct(eut: ExerciseUnderTest, params: Mapping[str, Any],
                             solved: Mapping[str, Any], mistakes: Sequence[Mistake], *,
                             finite: bool = True, allow_zero: bool = False,
                             ref_floor: float = 0.0, pair_floor: float = 1e-9,
                             is_close: Callable[[float, float, float], bool] = close) -> None:
    """Mistakes are named and explained; each number part has at least two, each outside the
    part's tolerance of the reference (or the grader would call it right) and of each other (or
    the grader could not tell them apart). `ref_floor` and `pair_floor` are the least relative
    gaps to the reference and between two; `is_close` replaces `close` where a file needs."""
    assert all(isinstance(m, Mistake) and m.feedback and m.name for m in mistakes)
    for pid in eut.number_parts:
        mine = [m for m in mistakes if m.part == pid]
        assert len(mine) >= 2, (pid, params)
        ref = float(solved[pid].value)
        for m in mine:
            value = float(m.answer)
            if finite:
                assert math.isfinite(value), (pid, m.name, value)
            assert value >= 0 if allow_zero else value > 0, (pid, m.name, value)
            assert not is_close(value, ref, max(eut.tol(pid), ref_floor)), \
                (pid, m.name, value, ref, params)
        values = sorted(float(m.answer) for m in mine)
        for a, b in zip(values, values[1:], strict=False):
            assert not is_close(a, b, max(eut.tol(pid), pair_floor)), (pid, a, b, params)


def assert_graders_accept_and_name(spec: ExerciseSpec, module: ModuleType,
                                   params_list: Iterable[Mapping[str, Any]],
                                   parts: Iterable[str], *, skip: str | None = None) -> None:
    """The platform's real graders give full marks to the reference answer of each of `parts`,
    and less than full marks, with the mistake's own feedback, to every known mistake (except
    those of part `skip`, typically a formula whose grader runs in a child process)."""
    parts = list(parts)
    for p in params_list:
        s = module.solve(p)
        for pid in parts:
            r = graders.grade_answer(spec, pid, answer_text(spec.part(pid), s[pid]), p, seed=1)
            assert r.score == 1.0, (pid, r.feedback, p)
        for m in module.mistakes(p):
            if m.part == skip:
                continue
            r = graders.grade_answer(spec, m.part, answer_text(spec.part(m.part), m.answer), p,
                                     seed=1)
            # The feedback leads with the mistake's own words; a multi-select adds its tally.
            assert r.score < 1.0 and m.feedback in r.feedback, (m.name, r.feedback, p)


def assert_speed_case_is_seeded_and_distinct(checks: ModuleType, driver: ModuleType,
                                             reference: ModuleType, params: Mapping[str, Any],
                                             hit_blocks: Callable[[Any], int]) -> None:
    """The prefix-cache exercises' speed case (exercises/prefix_speed.py): drawn from each
    submission's seed, with no prompt or probe twice, every lookup's result returned, and most
    lookups hitting deep into the cache. The driver runs in the student's process, which can
    replace any of it: a workload known in advance could be computed at import (outside the
    timed window) and replayed, and a lookup made twice could be made once and copied.
    `hit_blocks` reads a lookup's result as the number of blocks it matched."""
    a, b = (checks.hidden_cases(params, s)[-1]["input"]["speed"] for s in (7, 8))
    assert (a["seed"], b["seed"]) == (7, 8) and a == checks.speed_spec(7)
    prompts, probes = driver.speed_workload(a)
    assert driver.speed_workload(b)[0][0] != prompts[0]
    assert len(set(probes)) == len(probes) == a["probes"]
    assert len({tuple(p) for p in prompts}) == len(prompts) == a["fill"]
    results = driver.play_speed(reference, a, prompts, probes)
    lookups = results[len(prompts):]
    assert len(lookups) == len(probes)
    assert sum(hit_blocks(r) for r in lookups) > 0.8 * sum(k for _, k in probes)


class CodePart:
    """A code part's trusted machinery, run in-process as the grader runs the reference:
    checks.py, driver.py and reference.py loaded by path, and its mutants and equivalents built
    from mutants.toml / equivalents.toml. Results are `checks.check`'s, on the public cases plus
    the hidden cases drawn with `seed`."""

    def __init__(self, slug: str, part: str | None = None) -> None:
        from graders.code import load_module  # the grader's own loader (no Django)

        self.spec = registry.load(EXERCISES / slug)
        code_parts = [p for p in self.spec.parts if p.type == "code"]
        self.part = next(p for p in code_parts if part in (None, p.id))
        self.slug = slug
        self.code = EXERCISES / slug / "code"
        self.params = registry.params_for(self.spec, registry.CANONICAL_VARIANT)
        registry.expose_shared_modules(self.part.sandbox_modules)
        self.checks = load_module(self.code / "checks.py")
        self.driver = load_module(self.code / "driver.py")
        self.reference = load_module(self.code / "reference.py")
        self._load = load_module
        self._expected: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        self._failures: list[tuple[str, Any]] | None = None
        self._results: dict[tuple[str, int], list[Any]] = {}

    def built(self, kind: str = "mutants") -> dict[str, Any]:
        from exercises import mutants

        return {m.name: m for m in mutants.load(self.code, kind)}

    def module(self, name: str, kind: str = "mutants") -> ModuleType:
        """A mutant (or equivalent) imported from a file, as the sandbox imports a submission."""
        from exercises import mutants

        return mutants.module(self.code, name, kind)

    def cases(self, seed: int = 12345) -> list[dict[str, Any]]:
        return (list(self.checks.public_cases(self.params))
                + list(self.checks.hidden_cases(self.params, seed)))

    def run(self, module: ModuleType, cases: list[dict[str, Any]], timings: int = 1, *,
            catch: bool = False) -> list[dict[str, Any]]:
        """`module`'s outputs through JSON, as the result channel carries them. A timed case is
        timed once, as a student's run is; the reference gets the grader's own timings (the
        least of several), so a noisy moment cannot make a slow solution look fast. With
        `catch`, a case that raises gives `{"error": ...}` as the child would report it (for
        hand-written modules whose crash is the point), instead of failing the test."""
        import json

        from graders.code import run_and_time

        got = []
        for c in cases:
            try:
                got.append(json.loads(json.dumps(run_and_time(self.driver, module, c,
                                                              timings=timings))))
            except Exception as exc:
                if not catch:
                    raise
                got.append({"error": f"{type(exc).__name__}: {exc}"})
        return got

    def expected(self, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from graders.code import REFERENCE_TIMINGS

        return self.run(self.reference, cases, timings=REFERENCE_TIMINGS)

    def failures(self) -> list[tuple[str, Any]]:
        """(mutant, failed check) for every check each mutant fails on the canonical variant."""
        if self._failures is None:
            self._failures = [(name, c) for name in self.built()
                              for c in self.results(self.module(name)) if not c.passed]
        return self._failures

    def cases_and_expected(self, seed: int = 12345
                           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The cases drawn with `seed` and the reference's results on them, worked out once per
        seed (the reference's timed cases are the slow part of every code test)."""
        if seed not in self._expected:
            cases = self.cases(seed)
            self._expected[seed] = (cases, self.expected(cases))
        return self._expected[seed]

    def results(self, module: ModuleType, seed: int = 12345) -> list[Any]:
        """The checks' results for `module` (cached: the contract test and the per-exercise
        tests read the same mutants' results)."""
        key = (module.__name__, seed)
        if key not in self._results:
            cases, expected = self.cases_and_expected(seed)
            self._results[key] = self.checks.check(cases, self.run(module, cases), expected,
                                                   self.params)
        return self._results[key]

    def check(self, module: ModuleType, cases: list[dict[str, Any]],
              expected: list[dict[str, Any]], *, catch: bool = False) -> list[Any]:
        """The checks' results for `module` on `cases` against `expected` (uncached: for a
        subset of the cases or a hand-written module)."""
        return self.checks.check(cases, self.run(module, cases, catch=catch), expected,
                                 self.params)

    def reference_results(self, seed: int = 12345) -> list[Any]:
        """The checks' results for the reference's own outputs: what an exact copy scores."""
        cases, expected = self.cases_and_expected(seed)
        return self.checks.check(cases, expected, expected, self.params)

    def fixtures(self, seed: int = 12345) -> tuple[Any, Any]:
        """Module-scoped pytest fixtures `all_cases` and `expected` (the cases drawn with `seed`
        and the reference's results); assign them to those names in the test module. Each test
        module gets its own copies: the cached lists are shared with the contract tests, which
        a test that edits them in place must not disturb."""
        import copy

        def all_cases() -> list[dict[str, Any]]:
            return copy.deepcopy(self.cases_and_expected(seed)[0])

        def expected() -> list[dict[str, Any]]:
            return copy.deepcopy(self.cases_and_expected(seed)[1])

        return (pytest.fixture(scope="module", name="all_cases")(all_cases),
                pytest.fixture(scope="module", name="expected")(expected))

    def assert_lines_fail_every_check(self, lines: Sequence[Any], cases: list[dict[str, Any]],
                                      expected: list[dict[str, Any]]) -> list[Any]:
        """Forged or malformed result lines, `lines` repeated over `cases`, pass no check (the
        child's output is the student's to forge). Returns the results, for their messages."""
        got = [lines[i % len(lines)] for i in range(len(cases))]
        results = self.checks.check(cases, got, expected, self.params)
        assert not any(c.passed for c in results)
        return results

    def assert_hidden_cases_seeded(self, cached: str = "_random_inputs") -> list[dict[str, Any]]:
        """The hidden cases (of the canonical variant) are a function of the seed: the same again
        after the draws' cache (`checks.<cached>`) is cleared, others for another seed. Returns
        those of seed 7."""
        checks, params = self.checks, self.params
        a = checks.hidden_cases(params, 7)
        getattr(checks, cached).cache_clear()
        assert checks.hidden_cases(params, 7) == a
        assert checks.hidden_cases(params, 8) != a
        return a

    def assert_hidden_cases_same_in_another_process(self, tmp_path: Path) -> None:
        """Another process, with another hash seed, draws the same hidden cases. It also loads a
        module full of literals >= 100, which Hypothesis would like to mix into its draws; the
        cases must not change (the grader draws them in a worker, the student's run in a child).
        That process draws with Hypothesis's own ConjectureData, this one with checkkit's lean
        one, which must draw the same values. Drawn for the canonical variant (the exercises
        whose cases ignore the variant draw the same cases for `{}`)."""
        import json
        import os
        import subprocess

        checks_py = self.code / "checks.py"
        (tmp_path / "many_literals.py").write_text(
            "VALUES = [" + ", ".join(str(i) for i in range(100, 400)) + "]\n")
        source = (
            "import importlib.util, json, sys\n"
            "import many_literals\n"
            "from hypothesis.internal.conjecture.data import ConjectureData\n"
            "from graders import checkkit\n"
            "checkkit._DATA = ConjectureData\n"
            f"spec = importlib.util.spec_from_file_location('c', {str(checks_py)!r})\n"
            "m = importlib.util.module_from_spec(spec); sys.modules['c'] = m\n"
            "spec.loader.exec_module(m)\n"
            f"print(json.dumps(m.hidden_cases(json.loads({json.dumps(self.params)!r}), 7)))\n"
        )
        root = EXERCISES.parent
        env = dict(os.environ, PYTHONHASHSEED="4242",
                   PYTHONPATH=os.pathsep.join([str(root), str(tmp_path)]))
        out = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True,
                             text=True, check=True, cwd=root)
        assert json.loads(out.stdout) == self.checks.hidden_cases(self.params, 7)

    def assert_speed_check_gives_partial_credit(self, all_cases: list[dict[str, Any]],
                                                expected: list[dict[str, Any]]) -> list[Any]:
        """The prefix-cache exercises' speed check (exercises/prefix_speed.py): 15x the reference's
        time (or 0.2 s) still passes, so noise never costs a mark; 50x (or 1 s) fails that check
        alone. Returns the checks' results on the slow run, for the caller's score."""
        import json

        got = json.loads(json.dumps(expected))
        speed = next(i for i, c in enumerate(all_cases) if "speed" in c["input"])
        ref_s = expected[speed]["cpu_s"]
        got[speed]["cpu_s"] = max(ref_s * 15, 0.2)  # slow but within bounds
        assert all(c.passed for c in self.checks.check(all_cases, got, expected, self.params))
        got[speed]["cpu_s"] = max(ref_s * 50, 1.0)
        results = self.checks.check(all_cases, got, expected, self.params)
        assert [c.name for c in results if not c.passed] == ["lookup speed"]
        return results

    def assert_fast_but_wrong_speed_case_fails(self, all_cases: list[dict[str, Any]],
                                               expected: list[dict[str, Any]]) -> None:
        """A replaced driver that skips lookups and copies results is fast and wrong: only the time
        of the right results counts, so the speed check says it did not judge the time."""
        import json

        got = json.loads(json.dumps(expected))
        speed = next(i for i, c in enumerate(all_cases) if "speed" in c["input"])
        got[speed]["output"]["speed"]["digest"] = "0" * 16
        got[speed]["cpu_s"] = expected[speed]["cpu_s"] / 10
        results = {c.name: c for c in self.checks.check(all_cases, got, expected, self.params)}
        assert [n for n, c in results.items() if not c.passed] == ["large case matches",
                                                                    "lookup speed"]
        assert "not judged" in results["lookup speed"].message


@functools.cache
def code_part(slug: str) -> CodePart:
    """One CodePart per exercise per test run: its reference results are worked out once."""
    return CodePart(slug)


def check_score(results: Sequence[Any]) -> float:
    """The weighted share of checks passed, as the code grader scores."""
    return sum(c.weight for c in results if c.passed) / sum(c.weight for c in results)
