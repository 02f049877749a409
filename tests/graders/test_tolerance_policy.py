"""The tolerance policy (graders.precision, graders.policy): the rule itself, the audit's rules
each shown to catch a planted break, and the audit run over 300 variants of every exercise."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from exercises import registry
from exercises.spec import ExerciseSpec, Mistake, PartSpec, Quantity
from graders import policy
from graders.precision import (
    accepts,
    round_sig,
    rounding_sig,
    stated_sig_figs,
    states_precision,
)

VARIANTS = 300


def number(prompt: str = "How big?", tolerance: float = 0.02, unit: str = "GB") -> PartSpec:
    return PartSpec(id="n", type="number", prompt=prompt, unit=unit, tolerance=tolerance)


@pytest.mark.parametrize(("x", "sig", "rounded"), [
    (2.684, 2, 2.7), (2.65, 2, 2.7), (2.6499, 2, 2.6), (-2.65, 2, -2.7), (26389, 2, 26000),
    (0.0012345, 3, 0.00123), (999.6, 3, 1000.0), (1.0, 2, 1.0), (0.0, 2, 0.0)])
def test_round_sig(x: float, sig: int, rounded: float) -> None:
    assert round_sig(x, sig) == pytest.approx(rounded, rel=1e-12)


@pytest.mark.parametrize(("prompt", "states", "sig"), [
    ("How much memory? Answer in GB.", False, None),
    ("How much? (To 3 significant figures.)", True, 3),
    ("to two significant digits", True, 2),
    ("How many blocks? (An exact count.)", True, None),
    ("How many replicas, rounded up?", True, None),
    ("How many replicas would you add?", False, None),
    ("round up to a whole replica", True, None),
    ("to the nearest ms", True, None),
])
def test_what_a_prompt_states(prompt: str, states: bool, sig: int | None) -> None:
    assert states_precision(prompt) is states
    assert stated_sig_figs(prompt) == sig


def test_two_figures_accepted_unless_the_prompt_states_the_precision() -> None:
    assert rounding_sig(number()) == 2
    assert accepts(number(), 2.7, 2.684)  # 0.6 % off: inside 2 % anyway
    assert accepts(number(), 1.5, 1.46)  # 2.7 % off: the reference to two figures
    assert not accepts(number(), 1.4, 1.46)  # 4 % off, and not the rounding
    three = number("How big? (To 3 significant figures.)")
    assert rounding_sig(three) == 3
    assert not accepts(three, 1.5, 1.46) and accepts(three, 1.46, 1.46)
    # At a tolerance tighter than three figures can meet, the rounded reference still counts.
    tight = number("How big? (To 3 significant figures.)", tolerance=0.001)
    assert accepts(tight, 1.01, 1.0051) and not accepts(tight, 1.00, 1.0051)
    exact = number("How many blocks? (An exact count.)", tolerance=0.0, unit="")
    assert rounding_sig(exact) is None
    assert accepts(exact, 26389, 26389) and not accepts(exact, 26000, 26389)


# --- the audit's rules, each on a planted break -------------------------------------------------


def fake_spec(parts: tuple[PartSpec, ...], solution: dict[str, Any],
              mistakes: list[Mistake] | None = None, title: str = "Fake") -> ExerciseSpec:
    module = SimpleNamespace(CANONICAL={}, generate=lambda rng: {},
                             solve=lambda p: dict(solution), mistakes=lambda p: list(mistakes or []))
    return ExerciseSpec(slug="fake", uuid="00000000-0000-4000-8000-000000000000", title=title,
                        seed="Q00", topic="t", difficulty="easy",
                        minutes=1, summary="", parts=parts, path=Path("."), module=module)


def rules(spec: ExerciseSpec) -> set[str]:
    return {f.rule for f in policy.audit_variant(spec, {}, "canonical")}


def test_audit_passes_a_clean_part() -> None:
    spec = fake_spec((number(),), {"n": Quantity(2.68, "GB")},
                     [Mistake("n", 1.34, "K but not V.", "half")])
    assert rules(spec) == set()


def test_audit_catches_an_exact_count_that_does_not_say_so() -> None:
    part = number("How many blocks does the pool hold?", tolerance=0.0, unit="")
    assert rules(fake_spec((part,), {"n": Quantity(26389, "")})) == {"precision"}
    # A small count rounded to two figures is itself: nothing to say.
    assert rules(fake_spec((part,), {"n": Quantity(48, "")})) == set()
    said = dataclasses.replace(part, prompt="How many blocks? (An exact count.)")
    assert rules(fake_spec((said,), {"n": Quantity(26389, "")})) == set()


def test_audit_catches_a_mistake_inside_the_tolerance_or_its_rounding() -> None:
    inside = fake_spec((number(),), {"n": Quantity(2.68, "GB")},
                       [Mistake("n", 2.70, "GiB?", "near")])
    assert rules(inside) == {"mistake accepted"}
    # 2.5 % away is outside 2 %, but typed to two figures (1.5) it is the reference's rounding.
    rounded = fake_spec((number(),), {"n": Quantity(1.46, "GB")},
                        [Mistake("n", 1.497, "Forgot the scales.", "no_scales")])
    assert rules(rounded) == {"mistake accepted"}
    three = number("How big? (To 3 significant figures.)")
    assert rules(fake_spec((three,), {"n": Quantity(1.46, "GB")},
                           [Mistake("n", 1.497, "Forgot the scales.", "no_scales")])) == set()


def test_audit_catches_no_effect_accepted_for_an_effect() -> None:
    part = number("What is the speedup? Answer as a factor.", unit="")
    assert rules(fake_spec((part,), {"n": Quantity(0.985, "")})) == {"no effect"}
    assert rules(fake_spec((part,), {"n": Quantity(0.95, "")})) == set()


def test_audit_catches_a_count_at_a_rounding_boundary() -> None:
    part = number("How many blocks? (An exact count.)", tolerance=0.0, unit="")
    near = fake_spec((part,), {"n": Quantity(26389, ""), "n_unrounded": 26389.995})
    assert rules(near) == {"boundary"}
    clear = fake_spec((part,), {"n": Quantity(7, ""), "n_unrounded": 7.5})
    assert rules(clear) == set()


def test_audit_catches_a_quoted_figure_graded_wrong() -> None:
    # "The 70 % rule" over a reference of 69.3 % at a 1 % tolerance: 70 % would be marked wrong.
    tight = PartSpec(id="n", type="number", prompt="What is the ceiling? (To 3 significant "
                     "figures.)", unit="", tolerance=0.01)
    spec = fake_spec((tight,), {"n": Quantity(0.693, "")}, title="The 70 % rule")
    assert [f.rule for f in policy.audit_quoted(spec)] == ["quoted figure"]
    loose = dataclasses.replace(tight, tolerance=0.015)
    assert policy.audit_quoted(fake_spec((loose,), {"n": Quantity(0.693, "")},
                                         title="The 70 % rule")) == []
    assert policy.quoted_figures("A 2.5× gap, a 6K-token victim, 2,684 MB, 3 figures") == [
        (2.5, 2, ""), (6000.0, 1, ""), (2684.0, 4, "MB")]


# --- every exercise -------------------------------------------------------------------------------


# Breaks kept on purpose, each with its reason; the test fails once one no longer breaks.
EXCEPTIONS: dict[tuple[str, str, str, str | int], str] = {
    ("kv_page_ledger", "cap_worst", "boundary", "canonical"): (
        "floor(26,016 / 344) = floor(75.629): 0.49 % below 76, inside the 0.5 % margin. The next "
        "whole number needs 128 more blocks of pool, and the pool part accepts only ±0.2 % (±52), "
        "so no accepted pool answer moves the cap; the canonical is the research notes' own "
        "setting (on the driver's 81,090 MiB), and no generated variant sits this close"),
}


@pytest.mark.parametrize("slug", sorted(registry.load_all()))
def test_every_number_part_keeps_the_policy_over_300_variants(slug: str) -> None:
    everything = policy.audit(registry.get(slug), VARIANTS)
    excused = {k for k in EXCEPTIONS if k[0] == slug}
    hit = {(slug, f.part, f.rule, f.variant) for f in everything} & excused
    assert hit == excused, f"no longer breaks, drop the exception: {sorted(excused - hit)}"
    found = [f for f in everything if (slug, f.part, f.rule, f.variant) not in excused]
    shown = "\n".join(str(f) for f in found[:20])
    assert not found, f"{len(found)} breaks of the tolerance policy, first ones:\n{shown}"


@pytest.mark.parametrize("slug", sorted(registry.load_all()))
def test_the_number_grader_applies_the_same_rule(slug: str) -> None:
    # The audit reasons with precision.accepts(); the grader must give the same verdict for the
    # reference rounded to two and three figures, and for each listed mistake, as typed.
    import graders

    spec = registry.get(slug)
    for variant in ("canonical", 1, 2):
        params = registry.params_for(spec, variant)
        solution = registry.solve(spec, params)
        for part in (p for p in spec.parts if p.type == "number"):
            ref = solution[part.id]
            value = float(ref.value if isinstance(ref, Quantity) else ref)
            unit = ref.unit if isinstance(ref, Quantity) else part.unit
            if unit != part.unit or value == 0:
                continue
            tries = [round_sig(value, 2), round_sig(value, 3)]
            tries += [float(m.answer) for m in registry.mistakes(spec, params, part.id)
                      if isinstance(m.answer, int | float)]
            for x in tries:
                got = graders.grade_answer(spec, part.id, f"{x:.12g} {part.unit}".strip(), params)
                assert (got.verdict == "correct") == accepts(part, x, value), (
                    part.id, variant, x, value, got.verdict, got.feedback)
