"""The contract every exercise keeps, run over all of them (one parametrised module instead of a
copy in each tests/exercises/test_<slug>.py).

What `graders/selftest.py` already proves for every exercise (tests/test_every_exercise.py) is not
repeated here: the reference scores 1 and each mistake gets its feedback on the canonical variant
and variants 1-3, and the templates render for 200 variants. This module adds what the
per-exercise tests used to check one by one:

- the TOML's parts agree with the module (units, the module's TOLERANCE dict, the canonical
  choices among the option ids and a multi-select's never all of them), and
  solution.md has one section per part, in the TOML's order;
- generate() is deterministic per seed, its variants are JSON and pass the exercise's
  `is_sensible` where it has one;
- the known mistakes of every number part stay outside the part's tolerance of the reference and
  of each other, on the canonical variant and 200 generated ones;
- the real graders accept the reference and name each mistake of every inline part (number,
  choice, ranking) on more generated variants than the selftest's three.
"""
from __future__ import annotations

import dataclasses
import json
import random
import re
from typing import Any

import pytest

from exercises import key_point_specs, registry, templating
from exercises.spec import ExerciseSpec, Quantity
from tests.exercises.support import (
    ExerciseUnderTest,
    assert_graders_accept_and_name,
    assert_mistakes_distinct,
)

SPECS = registry.load_all()
SLUGS = sorted(SPECS)
VARIANTS = 200  # generated variants (seeds 0..199), as the per-exercise tests drew them
GRADED_PART_TYPES = ("number", "choice", "ranking")  # graded in-process, milliseconds each

# Generated variants (seeds 0..N-1) on which the real graders must accept the reference and name
# each mistake, besides the canonical one. The selftest grades variants 1-3; an exercise whose
# mistakes depend on the variant's shape grades more.
GRADED_VARIANTS_DEFAULT = 5
GRADED_VARIANTS: dict[str, int] = {
    "batch1_gap_trace": 25, "block_pool_hash_chain": 40, "block_sharing_cow": 25,
    "canary_sample_size": 10, "capacity_cost_split": 40, "chained_block_hash": 40,
    "chunked_prefill_lockout": 30, "continuous_batching_scheduler": 40,
    "decode_crossover_batch": 40, "ep_dispatch_bytes": 40, "fp8_kv_scales": 30,
    "fused_rope_positions": 15, "gqa_vs_mla_tp": 15, "hol_blocking_policy": 30,
    "kv_emit_rate_cancels": 40, "kv_tier_value": 40, "kv_transfer_disagg": 60,
    "l2_kv_pinning": 60, "latency_period_owner": 12, "max_concurrency": 30,
    "memory_beyond_kv": 30, "mla_absorption": 15, "mla_tp_copy": 15,
    "moe_calibration_coverage": 60, "mtp_free_drafter": 40, "nvl72_boundary": 40,
    "overload_rejection_rule": 40, "paging_waste_bound": 25, "physics_or_marketing": 40,
    "preemption_policies": 40, "radix_prefix_trie": 40, "recompute_vs_fetch": 40,
    "region_loss_fleet": 10, "sliding_window_layers": 30, "spec_decode_policy": 40,
    "stranded_prefix_blocks": 25, "stream_stutter": 40, "tp_past_kv_heads": 30,
    "tp_vs_pp_405b": 10, "two_batch_overlap": 40,
}


def _rel_zero_slack(value: float, ref: float, rel: float) -> bool:
    """`close`, but a tolerance of 0 still allows 1e-9 of absolute slack (FP8 scales)."""
    return abs(value - ref) <= 1e-9 * max(abs(ref), 1.0) if rel == 0 else \
        abs(value - ref) <= rel * abs(ref)


# How an exercise's mistakes may sit (the keywords of `assert_mistakes_distinct`), and the number
# parts whose answer may be signed (left out: a sign is the mistake there).
MISTAKE_OPTIONS: dict[str, dict[str, Any]] = {
    # A count of zero is a real (wrong) answer: no blocks shared, step 0.
    "block_pool_hash_chain": {"allow_zero": True},
    "block_sharing_cow": {"allow_zero": True},
    "chained_block_hash": {"allow_zero": True},
    "continuous_batching_scheduler": {"allow_zero": True},
    "fp8_kv_scales": {"is_close": _rel_zero_slack},
    # A mistake may be unbounded (dividing by a head count that does not split).
    "gqa_vs_mla_tp": {"finite": False},
    "max_concurrency": {"finite": False},
    "memory_beyond_kv": {"finite": False, "pair_floor": 0.0},
    "mla_absorption": {"finite": False},
    "mla_tp_copy": {"finite": False},
    "tp_past_kv_heads": {"finite": False},
}
SIGNED_PARTS: dict[str, tuple[str, ...]] = {"kv_tier_value": ("dram_value", "nvme_value")}


def _eut(spec: ExerciseSpec) -> ExerciseUnderTest:
    return ExerciseUnderTest.load(spec.module)


def _variants(spec: ExerciseSpec, count: int) -> list[dict[str, Any]]:
    return [registry.params_for(spec, n) for n in range(count)]


@pytest.mark.parametrize("name", SLUGS)
def test_parts_agree_with_the_module(name: str) -> None:
    spec = SPECS[name]
    eut = _eut(spec)
    module = spec.module
    assert 3 <= len(spec.parts) <= 7
    solved = registry.solve(spec, dict(module.CANONICAL))
    tolerances = getattr(module, "TOLERANCE", None)
    for part in spec.parts:
        answer = solved[part.id]
        options = [o.id for o in part.options]
        if part.type == "number":
            assert isinstance(answer, Quantity), part.id
            assert answer.unit == part.unit, part.id
            if tolerances is not None:
                assert tolerances[part.id] == part.tolerance == eut.tol(part.id), part.id
        elif part.type == "text":
            assert part.key_points and isinstance(answer, str), part.id
            key_point_specs.check_numbers(part.key_point_specs, solved, spec.path, part.id)
        elif part.type == "choice":
            chosen = [answer] if isinstance(answer, str) else list(answer)
            assert chosen and set(chosen) <= set(options), (part.id, answer)
            assert part.multi or len(chosen) == 1, part.id
            # Ticking every box must never be the answer (or a student could skip the question).
            assert not part.multi or set(chosen) < set(options), (part.id, answer)
        elif part.type == "ranking":
            assert sorted(answer) == sorted(options), (part.id, answer)
        elif part.type in ("code", "kernel"):
            assert (spec.path / str(answer)).is_file(), (part.id, answer)
    if tolerances is not None:
        # No stale entries: every tolerance the module keeps belongs to one of its number parts.
        assert set(tolerances) <= set(eut.number_parts), set(tolerances) - set(eut.number_parts)


@pytest.mark.parametrize("name", SLUGS)
def test_solution_has_one_section_per_part_in_order(name: str) -> None:
    spec = SPECS[name]
    text = (spec.path / "solution.md").read_text(encoding="utf-8")
    ids = [p.id for p in spec.parts]
    assert re.findall(r"<!-- part: ([a-z0-9_]+) -->", text) == ids
    assert list(templating.split_sections(text)[1]) == ids  # as the platform splits it


@pytest.mark.parametrize("name", SLUGS)
def test_generate_is_deterministic_and_variants_are_sensible(name: str) -> None:
    spec = SPECS[name]
    module = spec.module
    is_sensible = getattr(module, "is_sensible", None)
    for n in range(VARIANTS):
        p = module.generate(random.Random(n))
        assert module.generate(random.Random(n)) == p, n
        assert json.loads(json.dumps(p)) == p, n  # a variant is stored and served as JSON
        if is_sensible is not None:
            assert is_sensible(p), (n, p)


@pytest.mark.parametrize("name", SLUGS)
def test_mistakes_are_distinct_from_the_reference_and_each_other(name: str) -> None:
    spec = SPECS[name]
    eut = _eut(spec)
    signed = SIGNED_PARTS.get(name, ())
    if signed:
        eut = dataclasses.replace(eut, number_parts=[p for p in eut.number_parts
                                                     if p not in signed])
    # A tolerance of 0 still needs the mistake to differ from the reference at all.
    options = {"ref_floor": 1e-9, **MISTAKE_OPTIONS.get(name, {})}
    part_ids = {q.id for q in spec.parts}
    for p in [dict(spec.module.CANONICAL), *_variants(spec, VARIANTS)]:
        solved = registry.solve(spec, p)
        mistakes = registry.mistakes(spec, p)
        assert_mistakes_distinct(eut, p, solved, mistakes, **options)
        for m in mistakes:
            assert m.part in part_ids, m.name
            _assert_a_wrong_choice(spec.part(m.part), m.answer, solved[m.part], (m.name, p))


def _assert_a_wrong_choice(part: Any, answer: Any, reference: Any, where: Any) -> None:
    """A choice mistake picks options of the part (at least one), not the reference's set; a
    ranking mistake orders all the options, not as the reference does."""
    options = {o.id for o in part.options}
    if part.type == "choice":
        picked = {answer} if isinstance(answer, str) else set(answer)
        ref = {reference} if isinstance(reference, str) else set(reference)
        assert picked and picked <= options and picked != ref, where
    elif part.type == "ranking":
        assert sorted(answer) == sorted(options) and list(answer) != list(reference), where


@pytest.mark.parametrize("name", SLUGS)
def test_graders_accept_the_reference_and_name_each_mistake(name: str) -> None:
    spec = SPECS[name]
    count = GRADED_VARIANTS.get(name, GRADED_VARIANTS_DEFAULT)
    parts = [p.id for p in spec.parts if p.type in GRADED_PART_TYPES]
    others = {p.id for p in spec.parts if p.type not in GRADED_PART_TYPES}
    params = [dict(spec.module.CANONICAL), *_variants(spec, count)]
    # Mistakes of other parts (a formula, graded in a child process) are the selftest's.
    module = _MistakesOf(spec.module, others)
    assert_graders_accept_and_name(spec, module, params, parts)  # type: ignore[arg-type]


class _MistakesOf:
    """The exercise module seen with only the mistakes of the parts graded here."""

    def __init__(self, module: Any, leave_out: set[str]) -> None:
        self._module, self._leave_out = module, leave_out

    def solve(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._module.solve(dict(p))

    def mistakes(self, p: dict[str, Any]) -> list[Any]:
        return [m for m in self._module.mistakes(dict(p)) if m.part not in self._leave_out]


# The kinds of labelled answer every text part with checkable key points carries in its
# selftest.toml (issue 21): the selftest fails when the matcher disagrees with one.
LABEL_KINDS = {"strong", "partial", "negated", "keywords", "paraphrase"}


@pytest.mark.parametrize("name", SLUGS)
def test_checkable_text_parts_carry_labelled_answers(name: str) -> None:
    from graders.text import checkable

    spec = SPECS[name]
    for part in spec.parts:
        if part.type != "text" or not checkable(part):
            continue
        labels = {c.label for c in spec.selftest if c.part == part.id and c.covered is not None}
        assert LABEL_KINDS <= labels, (part.id, sorted(LABEL_KINDS - labels))
        for case in spec.selftest:
            if case.part == part.id and case.covered is not None:
                indices = set(case.covered) | set(case.contradicted)
                assert indices <= set(range(len(part.key_points))), (part.id, case.label)
