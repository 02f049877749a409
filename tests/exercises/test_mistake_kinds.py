"""Mistake kinds (exercises/mistake_kinds.py), checked once over every exercise: each kind is used
and its drill is a real part that lists a slip of that kind, a missing or unknown kind is refused
when the exercise loads, and graded answers carry the kinds of the slips they show through a
stored GradeResult."""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

import graders
from exercises import mistake_kinds, registry
from exercises.registry import ExerciseError
from exercises.slips import Slips
from exercises.spec import Mistake, PartSpec, Quantity
from graders import number
from graders.base import GradeContext, GradeResult
from graders.selftest import answer_text

# Kinds can depend on the variant (a slip some variants drop), so look past the canonical one.
VARIANTS: tuple[str | int, ...] = ("canonical", 1, 2, 3, 4, 5)


def _kinds_by_part() -> dict[str, dict[tuple[str, str], set[str]]]:
    """kind -> (exercise, part) -> names of the mistakes of that kind there."""
    found: dict[str, dict[tuple[str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    for slug, spec in registry.load_all().items():
        for variant in VARIANTS:
            for m in registry.mistakes(spec, registry.params_for(spec, variant)):
                for kind in m.kinds:
                    found[kind][(slug, m.part)].add(m.name)
    return found


def test_the_vocabulary_is_short_and_well_formed() -> None:
    assert 10 <= len(mistake_kinds.KINDS) <= 16
    labels = [k.label for k in mistake_kinds.KINDS.values()]
    assert len(set(labels)) == len(labels)
    for kind_id, kind in mistake_kinds.KINDS.items():
        assert kind.id == kind_id and re.fullmatch(r"[a-z][a-z0-9_]+", kind_id)
        assert kind.label and len(kind.label) <= 24, kind_id
        assert kind.slip.endswith(".") and "|" not in kind_id, kind_id


def test_every_kind_is_used_and_every_drill_lists_a_slip_of_its_kind() -> None:
    found = _kinds_by_part()
    specs = registry.load_all()
    assert set(found) <= set(mistake_kinds.KINDS)  # the registry refuses anything else
    unused = sorted(set(mistake_kinds.KINDS) - set(found))
    assert not unused, f"kinds no mistake uses (merge or drop them): {unused}"
    for kind in mistake_kinds.KINDS.values():
        spec = specs.get(kind.drill_exercise)
        assert spec is not None, f"{kind.id}: no exercise {kind.drill_exercise!r}"
        assert kind.drill_part in [p.id for p in spec.parts], f"{kind.id}: no part {kind.drill_part!r}"
        assert (kind.drill_exercise, kind.drill_part) in found[kind.id], (
            f"{kind.id}: {kind.drill_exercise}/{kind.drill_part} lists no mistake of this kind")


def _fake_mistakes(kind: str) -> Any:
    def mistakes(p: dict[str, Any]) -> list[Mistake]:
        return [Mistake("pool_blocks", 1.0, "A slip.", "made_up", kind=kind)]
    return mistakes


@pytest.mark.parametrize(("kind", "said"), [
    ("gb_vs_gb", "unknown kind 'gb_vs_gb'"),
    ("", "has no kind"),
    ("gb_vs_gib|nonsense", "unknown kind 'nonsense'"),
])
def test_a_missing_or_unknown_kind_is_refused_at_load(monkeypatch: pytest.MonkeyPatch, kind: str,
                                                      said: str) -> None:
    spec = registry.get("kv_page_ledger")
    monkeypatch.setattr(spec.module, "mistakes", _fake_mistakes(kind))
    with pytest.raises(ExerciseError) as err:
        registry.load(spec.path)
    message = str(err.value)
    assert "exercises/kv_page_ledger/exercise.py" in message
    assert "'made_up'" in message and "'pool_blocks'" in message and said in message
    assert all(k in message for k in mistake_kinds.KINDS)


def test_every_variants_mistakes_name_known_kinds() -> None:
    """Loading checks the canonical variant; a slip only some variants list is checked here."""
    for spec in registry.load_all().values():
        for variant in VARIANTS[1:]:
            registry.check_mistake_kinds(spec, registry.params_for(spec, variant))


def test_a_variant_with_an_unknown_kind_is_refused_by_the_check() -> None:
    spec = registry.get("kv_page_ledger")
    fake = replace(spec, module=SimpleNamespace(mistakes=_fake_mistakes("typo")))
    with pytest.raises(ExerciseError, match=r"unknown kind 'typo'.*allowed kinds"):
        registry.check_mistake_kinds(fake, {})


def test_coinciding_slips_keep_both_kinds() -> None:
    out: list[Mistake] = []
    add = Slips({"a": Quantity(1.0, "GB")}, {"a": 0.02}, out).add
    add("a", 2.0, "K but not V.", "k_only", "k_without_v")
    add("a", 2.01, "Bytes per element doubled.", "fp32", "wrong_precision")
    assert len(out) == 1 and out[0].kinds == ("k_without_v", "wrong_precision")
    part = PartSpec(id="a", type="number", prompt="How much?", unit="GB")
    result = number.grade(part, "2 GB", GradeContext(reference=Quantity(1.0, "GB"), mistakes=tuple(out)))
    assert result.kinds == ("k_without_v", "wrong_precision")


def _round_trip(result: GradeResult) -> GradeResult:
    return GradeResult.from_json(result.as_json())


def test_a_listed_mistake_carries_its_kind_through_a_stored_result() -> None:
    spec = registry.get("kv_page_ledger")
    params = registry.params_for(spec, "canonical")
    m = next(m for m in registry.mistakes(spec, params, "pool_blocks") if m.name == "gb_not_gib")
    result = graders.grade_answer(spec, "pool_blocks", answer_text(spec.part("pool_blocks"), m.answer),
                                  params)
    assert result.mistake == "gb_not_gib" and result.kinds == ("gb_vs_gib",)
    assert _round_trip(result).kinds == ("gb_vs_gib",)
    assert _round_trip(result) == result


@pytest.mark.parametrize(("answer", "kind", "verdict"), [
    ("2.7 GiB", "gb_vs_gib", "partial"),       # the GB/GiB detector
    ("21.6", "bits_vs_bytes", "incorrect"),    # 8x: bits for bytes
    ("2700", "unit_slip", "partial"),          # a power of ten
    ("5.4", "miscounted_term", "incorrect"),   # a bare factor of 2
])
def test_a_detected_slip_carries_its_kind_without_being_listed(answer: str, kind: str,
                                                               verdict: str) -> None:
    part = PartSpec(id="kv", type="number", prompt="How much KV?", unit="GB")
    result = number.grade(part, answer, GradeContext(reference=Quantity(2.7, "GB")))
    assert (result.verdict, result.mistake, result.kinds) == (verdict, "", (kind,))
    assert _round_trip(result).kinds == (kind,)


def test_a_correct_or_unexplained_answer_has_no_kind_and_old_results_read_as_none() -> None:
    part = PartSpec(id="kv", type="number", prompt="How much KV?", unit="GB")
    ctx = GradeContext(reference=Quantity(2.7, "GB"))
    assert number.grade(part, "2.7", ctx).kinds == ()
    assert number.grade(part, "3.9", ctx).kinds == ()
    stored = {"score": 0.0, "verdict": "incorrect", "feedback": "x", "mistake": "old"}
    assert GradeResult.from_json(stored).kinds == ()


def test_every_listed_number_and_choice_mistake_is_graded_with_its_kinds() -> None:
    """The canonical variant's listed slips, graded by the real graders (formulas are left to
    the expression grader's own tests: a child process per answer is too slow to run for all)."""
    wrong = []
    for slug, spec in registry.load_all().items():
        params = registry.params_for(spec, "canonical")
        for m in registry.mistakes(spec, params):
            part = spec.part(m.part)
            if part.type not in ("number", "choice", "ranking"):
                continue
            result = graders.grade_answer(spec, part.id, answer_text(part, m.answer), params)
            if not set(m.kinds) <= set(result.kinds):
                wrong.append(f"{slug}/{part.id}/{m.name}: {m.kinds} not in {result.kinds}")
    assert not wrong, wrong[:10]


def test_a_listed_formula_mistake_carries_its_kind() -> None:
    spec = registry.get("max_concurrency")
    params = registry.params_for(spec, "canonical")
    m = next(m for m in registry.mistakes(spec, params, "formula") if m.name == "k_only")
    result = graders.grade_answer(spec, "formula", m.answer, params)
    assert (result.mistake, result.kinds) == ("k_only", ("k_without_v",))
    assert _round_trip(result).kinds == ("k_without_v",)
