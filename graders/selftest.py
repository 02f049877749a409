"""Every exercise proves itself: its reference scores 1, its known mistakes get their feedback,
its listed cases score what they say, its templates render, and its code mutants are rejected.

A kernel part's sources (reference, starter, mutants, equivalents) are graded first in one
sandbox run (graders.kernel.grade_batch) and the checks read those grades from the cache.

Shared by `manage.py selftest` and `tests/test_every_exercise.py`; no Django.
"""
from __future__ import annotations

import json
import math
import multiprocessing
from collections.abc import Collection, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import astuple, dataclass, field
from typing import Any

import graders
from exercises import mutants as mutant_files
from exercises import registry, templating
from exercises.spec import ExerciseSpec, Mistake, PartSpec, Quantity, SelftestCase
from graders import kernel
from graders.base import GradeResult, InvalidAnswer
from graders.code import _source_bytes
from runners.base import MachineBusy

GENERATED_VARIANTS = (1, 2, 3)
# Part types graded by running the student's code in the sandbox, and the folder that holds
# their reference, starter and mutants.
SANDBOXED = {"code": "code", "kernel": "kernel"}


@dataclass
class Report:
    slug: str
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed

    def check(self, ok: bool, what: str) -> None:
        (self.passed if ok else self.failed).append(what)


def answer_text(part: PartSpec, answer: Any) -> str:
    """How a student would type a reference or mistake answer for this part."""
    if isinstance(answer, Quantity):
        return f"{answer.value:.12g} {answer.unit}".strip()
    if part.type == "number":
        return f"{float(answer):.12g} {part.unit}".strip()
    if part.type == "ranking":
        return " > ".join(answer)
    if isinstance(answer, (list, tuple)):
        return ", ".join(answer)
    return str(answer)


def part_solutions(spec: ExerciseSpec, part: PartSpec, kind: str = "mutants"
                   ) -> list[mutant_files.Mutant]:
    """A sandboxed part's mutants (or equivalents), built from its mutants.toml (raises
    MutantError when an edit no longer applies to the reference)."""
    return mutant_files.load(spec.path / SANDBOXED[part.type], kind)


def _case_text(spec: ExerciseSpec, case: SelftestCase) -> str:
    if case.file:
        return (spec.path / case.file).read_text(encoding="utf-8")
    if case.mutant:
        built = {m.name: m for m in part_solutions(spec, spec.part(case.part))}
        if case.mutant not in built:
            raise mutant_files.MutantError(f"{spec.slug}/selftest.toml names mutant "
                                           f"{case.mutant!r}, which mutants.toml does not list")
        return built[case.mutant].source
    return case.answer


def _reference_text(spec: ExerciseSpec, part: PartSpec, answer: Any) -> str:
    if part.type in SANDBOXED:
        return (spec.path / str(answer)).read_text(encoding="utf-8")
    return answer_text(part, answer)


def _variants() -> Iterator[str | int]:
    yield registry.CANONICAL_VARIANT
    yield from GENERATED_VARIANTS


@dataclass(frozen=True)
class Outcome:
    """One grade as the selftest reads it; score None when the input was rejected as invalid."""

    score: float | None
    verdict: str
    feedback: str
    failed_checks: tuple[str, ...] = ()


# Sandboxed grades already made in this process, by (exercise, part, answer, variant): a mutant
# listed in selftest.toml with its expected score is also in mutants.toml, and a kernel part's grade
# takes seconds in Triton's interpreter. Grading is deterministic for a fixed seed.
_sandboxed: dict[tuple[str, str, str, str], Outcome] = {}
SEED = 12345


def _key(spec: ExerciseSpec, part_id: str, text: str, params: dict[str, Any]
         ) -> tuple[str, str, str, str]:
    return (str(spec.path), part_id, text, json.dumps(params, sort_keys=True, default=str))


def _outcome(r: GradeResult) -> Outcome:
    return Outcome(r.score, r.verdict, r.feedback, tuple(c.name for c in r.checks if not c.passed))


def _grade(spec: ExerciseSpec, part_id: str, text: str, params: dict[str, Any],
           cache: bool = True) -> Outcome:
    key = _key(spec, part_id, text, params)
    sandboxed = spec.part(part_id).type in SANDBOXED
    if sandboxed and cache and key in _sandboxed:
        return _sandboxed[key]
    try:
        outcome = _outcome(graders.grade_answer(spec, part_id, text, params, seed=SEED))
    except InvalidAnswer as exc:
        outcome = Outcome(None, "invalid", str(exc))
    if sandboxed:
        _sandboxed[key] = outcome
    return outcome


def _kernel_sources(spec: ExerciseSpec, part: PartSpec, params: dict[str, Any]) -> list[str]:
    """Every source the selftest grades for a kernel part on these (canonical) params: the
    reference, its mistakes, its selftest.toml cases on the canonical variant (starter, files,
    mutants), and every mutant and equivalent. One that cannot be built is left to the check
    that reports it."""
    texts = []
    try:
        texts.append(_reference_text(spec, part, registry.solve(spec, params)[part.id]))
    except OSError:
        pass  # _check_reference says so
    texts += [answer_text(part, m.answer) for m in registry.mistakes(spec, params, part.id)]
    canonical = json.dumps(params, sort_keys=True, default=str)
    for case in spec.selftest:
        if case.part == part.id and json.dumps(registry.params_for(spec, case.variant),
                                               sort_keys=True, default=str) == canonical:
            try:
                texts.append(_case_text(spec, case))
            except mutant_files.MutantError:
                pass
    for kind in ("mutants", "equivalents"):
        try:
            texts += [m.source for m in part_solutions(spec, part, kind)]
        except mutant_files.MutantError:
            pass
    return list(dict.fromkeys(texts))


def _readable(text: str) -> bool:
    """Whether grade_answer and the kernel grader read `text` (else it is InvalidAnswer)."""
    if len(text) > graders.MAX_ANSWER_CHARS or "\x00" in text:
        return False
    try:
        _source_bytes(text)
    except InvalidAnswer:
        return False
    return True


def _batch_kernel_part(spec: ExerciseSpec, part: PartSpec) -> None:
    """Grade all of a kernel part's trusted sources in one sandbox run (graders.kernel.
    grade_batch; about half the time of one run each) and cache their Outcomes under the keys
    _grade reads, so the checks below find them. A source grade_answer would refuse as
    invalid, or a batch that raises, is left to _grade, one at a time."""
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    texts = [t for t in _kernel_sources(spec, part, params)
             if _key(spec, part.id, t, params) not in _sandboxed]
    valid = [t for t in texts if _readable(t)]
    if not valid:
        return
    ctx = graders.context_for(spec, part, params, seed=SEED)
    try:
        results = kernel.grade_batch(part, valid, ctx)
    except (InvalidAnswer, MachineBusy):
        return
    for text, r in zip(valid, results, strict=True):
        _sandboxed[_key(spec, part.id, text, params)] = _outcome(r)


def run(spec: ExerciseSpec, *, code: bool = True) -> Report:
    """Run every check for one exercise. `code=False` skips sandboxed code parts (fast mode)."""
    rep = Report(spec.slug)
    if code:
        for part in spec.parts:
            if part.type == "kernel":
                _batch_kernel_part(spec, part)
    for variant in _variants():
        params = registry.params_for(spec, variant)
        solution = registry.solve(spec, params)
        for name, text in (("statement.md", spec.statement_template),
                           ("solution.md", spec.solution_template)):
            try:
                templating.render(text, params, solution, name)
                rep.check(True, f"{variant}: {name} renders")
            except templating.TemplateError as exc:
                rep.check(False, f"{variant}: {exc}")
        for part in spec.parts:
            if part.type in SANDBOXED and (not code or variant != registry.CANONICAL_VARIANT):
                continue  # the sandbox runs once per code part, on the canonical variant
            _check_reference(rep, spec, part, solution[part.id], params, variant)
            for m in registry.mistakes(spec, params, part.id):
                _check_mistake(rep, spec, part, m, params, variant, solution[part.id])
    for case in spec.selftest:
        part = spec.part(case.part)
        if part.type in SANDBOXED and not code:
            continue
        _check_case(rep, spec, case)
    if code:
        _check_mutants(rep, spec)
    return rep


def _check_case(rep: Report, spec: ExerciseSpec, case: SelftestCase, cache: bool = True) -> None:
    """One [[case]] of selftest.toml: its score (or its rejection) and its feedback."""
    params = registry.params_for(spec, case.variant)
    label = f"selftest {case.part} {case.file or case.mutant or case.answer[:40]!r}"
    try:
        text = _case_text(spec, case)
    except mutant_files.MutantError as exc:
        rep.check(False, f"{label}: {exc}")
        return
    if case.covered is not None:
        _check_labels(rep, spec, case, text, params)
        return
    score, verdict, feedback, _ = astuple(_grade(spec, case.part, text, params, cache))
    if case.invalid:
        rep.check(score is None, f"{label}: rejected as invalid (got {verdict})")
        return
    rep.check(score is not None and abs(score - (case.score or 0.0)) <= case.tolerance,
              f"{label}: score {case.score} (got {score}, {verdict}: {feedback[:120]})")
    if case.feedback:
        rep.check(case.feedback.lower() in feedback.lower(),
                  f"{label}: feedback mentions {case.feedback!r} (got {feedback[:160]!r})")


def key_point_statuses(spec: ExerciseSpec, part_id: str, text: str, params: dict[str, Any]
                       ) -> list[dict[str, str]] | None:
    """The matcher's verdict on each key point (status, sentence, why), or None when the part
    gets no automatic feedback (bare key points, or the model is unavailable)."""
    result = graders.grade_answer(spec, part_id, text, params)
    if not result.checks:
        return None
    return [dict(c.details or {}) for c in result.checks]


def _check_labels(rep: Report, spec: ExerciseSpec, case: SelftestCase, text: str,
                  params: dict[str, Any]) -> None:
    """A labelled text answer: the matcher must agree with the expert on every key point."""
    label = f"selftest {case.part} [{case.label or 'labelled'}] {case.answer[:40]!r}"
    try:
        got = key_point_statuses(spec, case.part, text, params)
    except InvalidAnswer as exc:
        rep.check(False, f"{label}: rejected as invalid ({exc})")
        return
    if got is None:
        rep.check(False, f"{label}: the part gets no automatic key-point verdicts (its key "
                         "points need `also`/`against`/`number`, and the model must load)")
        return
    covered = set(case.covered or ())
    for i, verdict in enumerate(got):
        want = ("covered" if i in covered else
                "contradicted" if i in case.contradicted else "missing")
        rep.check(verdict["status"] == want,
                  f"{label}: key point {i} is {want} (matcher: {verdict['status']}"
                  + (f", on {verdict['sentence'][:80]!r}" if verdict.get("sentence") else "")
                  + ")")


def sandboxed_cases(spec: ExerciseSpec, files: Collection[str] | None = None) -> Report:
    """The selftest.toml cases of sandboxed parts (those naming one of `files`, if given), each
    graded afresh: a grade cached by an earlier run in this process would test nothing (the
    load test in tests/gpu_sandbox/test_load_independence.py grades them with every core busy)."""
    rep = Report(spec.slug)
    for case in spec.selftest:
        if spec.part(case.part).type in SANDBOXED and (
                files is None or (case.file or case.mutant) in files):
            _check_case(rep, spec, case, cache=False)
    return rep


def _check_reference(rep: Report, spec: ExerciseSpec, part: PartSpec, answer: Any,
                     params: dict[str, Any], variant: str | int) -> None:
    if isinstance(answer, Quantity) and not math.isfinite(answer.value):
        rep.check(False, f"{variant}: {part.id} reference is not finite ({answer.value})")
        return
    text = _reference_text(spec, part, answer)
    score, verdict, feedback, _ = astuple(_grade(spec, part.id, text, params))
    if part.type == "text":
        rep.check(verdict == "pending", f"{variant}: {part.id} model answer is saved for review")
        statuses = key_point_statuses(spec, part.id, text, params)
        if statuses is not None:
            missed = [f"{i} ({v['status']})" for i, v in enumerate(statuses)
                      if v["status"] != "covered"]
            rep.check(not missed, f"{variant}: {part.id} model answer covers every key point "
                                  f"(not: {', '.join(missed)})")
        return
    rep.check(score == 1.0, f"{variant}: {part.id} reference scores 1 "
                            f"(got {score}, {verdict}: {feedback[:160]})")


def _check_mistake(rep: Report, spec: ExerciseSpec, part: PartSpec, m: Mistake,
                   params: dict[str, Any], variant: str | int, reference: Any) -> None:
    text = answer_text(part, m.answer)
    score, verdict, feedback, _ = astuple(_grade(spec, part.id, text, params))
    label = f"{variant}: {part.id} mistake {m.name or text[:40]!r}"
    rep.check(score is not None and score < 1.0, f"{label} scores below 1 (got {score})")
    rep.check(m.feedback in feedback, f"{label} gets its feedback (got {feedback[:160]!r})")


def _check_mutants(rep: Report, spec: ExerciseSpec) -> None:
    """Every mutant in a sandboxed part's mutants.toml is built from the reference and scores
    below 1, failing the check it names; every equivalent scores 1."""
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    for part in spec.parts:
        if part.type not in SANDBOXED:
            continue
        for kind in ("mutants", "equivalents"):
            try:
                built = part_solutions(spec, part, kind)
            except mutant_files.MutantError as exc:
                rep.check(False, f"{part.id}: {exc}")
                continue
            if kind == "mutants":
                rep.check(bool(built), f"{part.id}: {SANDBOXED[part.type]}/mutants.toml lists "
                                       "known-buggy solutions")
            for m in built:
                got = _grade(spec, part.id, m.source, params)
                label = f"{part.id}: {kind[:-1]} {m.name}"
                if kind == "equivalents":
                    rep.check(got.score == 1.0, f"{label} scores 1 (got {got.score}, "
                                                f"{got.verdict}: {got.feedback[:160]})")
                    continue
                rep.check(got.score is not None and got.score < 1.0,
                          f"{label} is rejected (got {got.score}, {got.verdict})")
                if m.caught_by is not None:
                    rep.check(m.caught_by in got.failed_checks,
                              f"{label} fails {m.caught_by!r} (failed: {list(got.failed_checks)})")


def run_all(slugs: list[str] | None = None, *, code: bool = True, jobs: int = 1) -> list[Report]:
    """Every chosen exercise's report, in the order chosen. `jobs` > 1 runs that many exercises
    at a time, each in a fresh interpreter (spawned, not forked: nothing of this process's
    threads, caches or sandbox state is shared); an unknown slug raises KeyError before any runs."""
    names = slugs or sorted(registry.load_all())
    specs = [registry.get(s) for s in names]
    if jobs <= 1 or len(specs) <= 1:
        return [run(spec, code=code) for spec in specs]
    # A child gets the slug and loads the spec itself: a spec holds its module, not picklable.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(names)), mp_context=spawn) as pool:
        return list(pool.map(_run_slug, names, [code] * len(names)))


def _run_slug(slug: str, code: bool) -> Report:
    return run(registry.get(slug), code=code)
