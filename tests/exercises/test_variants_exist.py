"""Every variant could exist: 1,000 draws of every exercise pass `exercises.feasibility`.

Each exercise declares what its statement claims (`constraints(p)`: what sits on which GPUs, how
long a sequence gets, which model feature it relies on, its own story's logic) and the shared
validator checks the claims against the catalog. The unit tests below show each rule failing on
a scenario that cannot happen.
"""
from __future__ import annotations

import pytest

from exercises import feasibility, registry
from exercises.catalog import model
from exercises.feasibility import Fits, HasFeature, Holds, WithinContext

VARIANTS = 1000

# Canonical variants that break a rule, and why the blurb's numbers keep them as they are. Empty
# is the goal; an entry must say what would have to change.
CANONICAL_EXCEPTIONS: dict[str, str] = {}

SPECS = registry.load_all()


@pytest.mark.parametrize("slug", sorted(SPECS))
def test_every_exercise_declares_its_claims(slug: str) -> None:
    assert callable(getattr(SPECS[slug].module, "constraints", None)), (
        f"{slug}/exercise.py has no constraints(p): declare what the statement puts on which "
        "GPUs, the sequence lengths it uses and the model features it relies on")


@pytest.mark.parametrize("slug", sorted(SPECS))
def test_generated_variants_could_exist(slug: str) -> None:
    spec = SPECS[slug]
    bad: list[str] = []
    for n in range(VARIANTS):
        problems = feasibility.violations(spec.module, registry.params_for(spec, n))
        if problems:
            bad.append(f"variant {n}: {'; '.join(problems)}")
    assert not bad, f"{len(bad)} of {VARIANTS} variants cannot exist, e.g.\n" + "\n".join(bad[:5])


@pytest.mark.parametrize("slug", sorted(SPECS))
def test_canonical_variant_could_exist(slug: str) -> None:
    spec = SPECS[slug]
    problems = feasibility.violations(spec.module, registry.params_for(spec, "canonical"))
    if slug in CANONICAL_EXCEPTIONS:
        assert problems, f"{slug}'s canonical variant passes now: drop its exception"
        return
    assert not problems, problems


# --------------------------------------------------------------------------------------------
# The validator's rules, each failing on a scenario that cannot happen


def test_fits_rejects_70b_bf16_on_one_h100() -> None:
    weights = model("Llama-3.1-70B").weight_bytes(2)  # 141 GB
    (problem,) = feasibility.check([Fits("BF16 weights", "H100 SXM", 1, weights)])
    assert "141.1 GB on 1 x H100 SXM" in problem
    assert feasibility.check([Fits("BF16 weights", "H100 SXM", 2, weights)]) == []


def test_fits_counts_the_usable_share() -> None:
    weights = model("Llama-3.1-8B").weight_bytes(2)  # 16.1 GB
    assert feasibility.fits_memory("H100 SXM", 1, 60e9 + weights, usable=0.9) is False  # 76 > 72
    assert feasibility.fits_memory("H100 SXM", 1, 60e9 + weights, usable=1.0) is True
    assert feasibility.fits_memory("H100 SXM", 1, 70e9) is True
    assert feasibility.fits_memory("H100 SXM", 1, 70e9, usable=0.85) is False
    assert feasibility.fits_memory("H100 SXM", 0, 1.0) is False


def test_fits_asked_checks_names_only() -> None:
    assert feasibility.check([Fits("the sessions' KV", "H100 SXM", 1, 1e15, asked=True)]) == []
    with pytest.raises(KeyError):
        feasibility.check([Fits("x", "H100 PCIe 7GB", 1, 0.0, asked=True)])


def test_within_context_uses_max_position_embeddings() -> None:
    assert feasibility.within_context("Llama-2-7B", 4096)
    (problem,) = feasibility.check([WithinContext("Llama-2-7B", 8192, "the prompt")])
    assert "8,192 tokens" in problem and "4,096" in problem
    assert feasibility.check([WithinContext("Llama-3.1-8B", 131_073, "the prompt")])


def test_has_feature_mtp_and_group_routing() -> None:
    assert feasibility.has_feature("DeepSeek-V3", "mtp")
    assert feasibility.has_feature("DeepSeek-R1", "group_limited_routing")  # the alias
    assert feasibility.check([HasFeature("Llama-3.1-70B", "mtp", "an MTP drafter")]) == [
        "an MTP drafter: Llama-3.1-70B has no mtp"]
    # Qwen3-MoE routes top-8 of 128 with no group limit.
    assert feasibility.check([HasFeature("Qwen3-30B-A3B", "group_limited_routing")])
    with pytest.raises(ValueError, match="unknown feature"):
        feasibility.has_feature("DeepSeek-V3", "telepathy")


def test_holds_reports_the_rule() -> None:
    victim, max_tokens = 4096, 4096
    assert feasibility.check([Holds(victim < max_tokens, "the victim has not finished")]) == [
        "the victim has not finished"]
    assert feasibility.check([Holds(True, "fine")]) == []


def test_an_exercise_without_constraints_has_no_violations() -> None:
    class Bare:
        pass
    assert feasibility.declared(Bare, {}) is None  # type: ignore[arg-type]
    assert feasibility.violations(Bare, {}) == []  # type: ignore[arg-type]
