"""graders.kernel.grade_batch (the selftest's trusted sources in one sandbox run) grades each
source exactly as grade() does alone: the same score, verdict, feedback and checks.

Kept small on purpose (each sandboxed source costs seconds in Triton's interpreter): the
reference, a mutant that fails a case check, one that fails to load (after the static checks,
which allow a module-level constant), and one the static checks refuse.
"""
from __future__ import annotations

import pytest

import graders
from exercises import mutants, registry
from graders import kernel
from graders.base import GradeResult

SLUG = "fused_rope_positions"
SEED = 12345


def _seen(r: GradeResult) -> tuple[object, ...]:
    return (r.score, r.verdict, r.feedback, [(c.name, c.passed, c.message) for c in r.checks])


@pytest.mark.usefixtures("sandbox")
def test_a_batch_grades_each_source_as_grade_does_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = registry.get(SLUG)
    part = next(p for p in spec.parts if p.type == "kernel")
    built = {m.name: m.source for m in mutants.load(spec.path / "kernel", "mutants")}
    reference = (spec.path / "kernel" / "reference.py").read_text(encoding="utf-8")
    broken_import = reference + '\nBROKEN = int("at import")\n'
    sources = [reference, built["rotates_backwards"], broken_import, built["torch_in_wrapper"]]
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    ctx = graders.context_for(spec, part, params, seed=SEED)

    from runners import get_backend

    runs = []
    backend = get_backend()
    monkeypatch.setattr("runners.get_backend", lambda: backend)
    real_run = backend.run
    monkeypatch.setattr(backend, "run", lambda s: runs.append(s) or real_run(s))

    batch = kernel.grade_batch(part, sources, ctx)
    assert len(runs) == 1, "one sandbox run for the whole batch"
    alone = [kernel.grade(part, source, ctx) for source in sources]
    assert [_seen(r) for r in batch] == [_seen(r) for r in alone]
    # What the sources are meant to show, so the comparison is not between two broken paths.
    assert [r.verdict for r in alone] == ["provisional", "partial", "incorrect", "incorrect"]
    assert alone[2].checks[0].name == "loads" and "at import" in alone[2].checks[0].message
    assert alone[3].checks[0].name == "static checks"
