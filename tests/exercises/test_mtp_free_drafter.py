"""Q19 (exercises/mtp_free_drafter): the canonical numbers, the draft-step price from the catalog,
and sensible variants."""
from __future__ import annotations

import json
import math

import pytest

from tests.exercises.support import ExerciseUnderTest, close, load_by_path

ex = load_by_path("mtp_free_drafter")
EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants(200)


def test_draft_step_weights_from_the_config() -> None:
    # facts-q01-q25 §Q19: eh_proj 102.8 M + MLA 187.1 M + 9 experts 396.4 M + router 1.8 M
    # + LM head 926.7 M = 1.615 B.
    w = ex.draft_weights()
    assert w["eh_proj"] == 7168 * 14336 == 102_760_448
    assert w["attention"] == 187_105_280
    assert w["experts"] == 9 * 44_040_192 == 396_361_728
    assert w["head"] == 129_280 * 7168 == 926_679_040
    assert sum(w.values()) == 1_614_741_760


def test_canonical_reproduces_the_blurb() -> None:
    p = ex.CANONICAL
    s = ex.solve(p)
    # Acceptance inside the reported 85-90 %, a measured draft cost, a free second token.
    assert (p["accept_pct"], p["draft_cost_pct"], p["verify_overhead_pct"]) == (89.0, 5.0, 0.0)
    assert p["report_lo_pct"] <= p["accept_pct"] <= p["report_hi_pct"]
    # (1 + 0.89) / (1 + 0.05 + 0) = 1.800: the reported 1.8x.
    assert s["speedup"].value == pytest.approx(1.8, rel=1e-12)
    # Draft cost by multiplied weights: 1.615 / (37.55 - 0.93) = 4.41 %; with the 37.6 B headline
    # as the denominator 4.30 % (Appendix E point 9: "4.3 % vs 4.4 %").
    assert s["draft_cost"].value == pytest.approx(4.409, abs=5e-3)
    assert s["c_headline_pct"] == pytest.approx(4.30, abs=5e-3)
    assert s["active_b"] == pytest.approx(37.55, abs=0.01)
    # The accepted band covers both readings.
    assert close(s["c_headline_pct"], s["draft_cost"].value, EX.tol("draft_cost"))
    # The notes' own check: (1 + 0.85)/(1 + 0.043) = 1.774, (1 + 0.90)/1.043 = 1.822.
    assert (1 + 0.85) / (1 + 0.043) == pytest.approx(1.774, abs=5e-4)
    assert s["speedup_lo"] == pytest.approx(1.85 / 1.05)
    assert s["speedup_hi"] == pytest.approx(1.90 / 1.05)
    # Break-even overhead e = p - c = 84 %; fully compute-bound (e = 1) it is a slowdown.
    assert s["max_overhead"].value == pytest.approx(84.0)
    assert s["speedup_compute_bound"] < 1
    # README_WEIGHTS: 11.5 B unique MTP parameters (our count from the config: 11.6 B).
    assert s["mtp_unique_b"] == pytest.approx(11.5, abs=0.15)


def test_formula_agrees_with_the_speedup() -> None:
    for p in [ex.CANONICAL, *VARIANTS[:20]]:
        s = ex.solve(p)
        value = (1 + s["acc"]) / (1 + s["c"] + s["e"])
        assert value == pytest.approx(s["speedup"].value)
    assert ex.solve(ex.CANONICAL)["formula"] == "(1 + p)/(1 + c + e)"


def test_variants_are_sensible_and_distinct() -> None:
    distinct = {json.dumps(p, sort_keys=True) for p in VARIANTS}
    assert len(distinct) >= 150
    for p in VARIANTS:
        assert p["accept_pct"] in ex.ACCEPT_GRID and p["draft_cost_pct"] in ex.DRAFT_COSTS
        s = ex.solve(p)
        assert 1.3 <= s["speedup"].value < 2
        assert math.isfinite(s["max_overhead"].value) and s["max_overhead"].value > 0


def test_mistakes_are_distinct_from_the_reference_and_named() -> None:
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        ms = ex.mistakes(p)
        wiring = [m for m in ms if m.part == "wiring"]
        assert len(wiring) >= 2 and all(set(m.answer) != set(s["wiring"]) for m in wiring)


@pytest.mark.parametrize("which", ["statement.md", "solution.md"])
def test_templates_render_for_every_variant(which: str) -> None:
    for text in EX.rendered(which, VARIANTS[:50]):
        assert "{{" not in text and "nan" not in text.lower().split()


def test_canonical_solution_quotes_the_numbers() -> None:
    EX.assert_solution_quotes(["1.615 B", "4.41", "4.30", "1.800", "84.0", "1.76", "1.81", "0.92"])


