"""Q26 (exercises/two_batch_overlap): the canonical numbers, the model's algebra, sensible
variants and distinct mistakes."""
from __future__ import annotations

import json
import math

import pytest
import sympy

from graders.formula import parse_formula
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("two_batch_overlap")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()
spec = EX.spec_fixture()
SYMBOLS = PARTS["crossover_formula"]["symbols"]


# ---------------------------------------------------------------------------------------------
# The canonical variant reproduces facts-q26-q49.md §Q26


def test_canonical_constants_come_from_the_catalog() -> None:
    p = ex.CANONICAL
    # C0 = 187.1 MB attention + 8 x 44.04 MB experts = 539.4 MB FP8 / 4.8 TB/s = 112.4 -> 112 µs;
    # c = 4,096 x 1,152 B / 4.8 TB/s = 0.98 -> 1.0 µs.
    assert p["c0_us"] == 112 and p["c_us"] == 1.0
    assert (p["m0_us"], p["m_us"], p["delta_us"], p["threshold"]) == (30, 3.1, 0, 32)


@pytest.mark.parametrize(
    ("b", "t1", "t2", "speedup"),
    [(8, 174.8, 232.0, 0.75), (16, 207.6, 240.0, 0.87), (27, 252.7, 251.0, 1.01),
     (32, 273.2, 256.0, 1.07), (64, 404.4, 288.0, 1.40), (128, 666.8, 456.8, 1.46),
     (256, 1191.6, 853.6, 1.40)],
)
def test_notes_table(b: int, t1: float, t2: float, speedup: float) -> None:
    p = ex.CANONICAL
    assert ex.t1_us(p, b) == pytest.approx(t1)
    assert ex.t2_us(p, b) == pytest.approx(t2)
    # The notes round to two places (0.865 is printed 0.87).
    assert ex.t1_us(p, b) / ex.t2_us(p, b) == pytest.approx(speedup, abs=0.0051)


def test_canonical_numbers() -> None:
    s = ex.solve(ex.CANONICAL)
    assert s["speedup_big"].value == pytest.approx(1.46, abs=0.005)
    assert s["speedup_small"].value == pytest.approx(0.865, abs=0.001)
    # B* = (112 - 30)/3.1 = 26.45 -> 27 at delta = 0; >= 33 at 10 µs, >= 40 at 20 µs.
    assert s["b_star"] == pytest.approx(26.45, abs=0.01) and s["crossover"].value == 27
    assert math.floor(s["b_star_10"]) + 1 == 33 and math.floor(s["b_star_20"]) + 1 == 40
    # delta that puts the crossover on vLLM's 32: (32 x 3.1 - 112 + 30)/2 = 8.6 µs.
    assert s["delta_budget"].value == pytest.approx(8.6)
    # Per step: B = 128 38.7 vs 26.5 ms; B = 16 12.0 vs 13.9 ms. Best near B = 78 at 1.53x.
    assert (round(s["t1_big_ms"], 1), round(s["t2_big_ms"], 1)) == (38.7, 26.5)
    assert (round(s["t1_small_ms"], 1), round(s["t2_small_ms"], 1)) == (12.0, 13.9)
    assert round(s["b_bal"]) == 78 and s["s_bal"] == pytest.approx(1.53, abs=0.005)


# ---------------------------------------------------------------------------------------------
# The model's algebra


def _formula_value(text: str, p: dict) -> float:
    expr = parse_formula(text, SYMBOLS).expr
    subs = {"C0": p["c0_us"], "c": p["c_us"], "M0": p["m0_us"], "m": p["m_us"],
            "delta": p["delta_us"]}
    return float(expr.subs({sympy.Symbol(k, positive=True): v for k, v in subs.items()}))


def test_formula_matches_the_simulated_crossover() -> None:
    for p in [ex.CANONICAL, *VARIANTS[:60]]:
        s = ex.solve(p)
        assert _formula_value(s["crossover_formula"], p) == pytest.approx(s["b_star"])
        # Scan whole batches: the first where T2 < T1 is the answer, and it stays won after.
        wins = [b for b in range(1, 200) if ex.t2_us(p, b) < ex.t1_us(p, b)]
        assert wins[0] == s["crossover"].value, p
        assert wins == list(range(wins[0], 200))


def test_formula_mistakes_are_not_equivalent() -> None:
    for m in (m for m in ex.mistakes(ex.CANONICAL) if m.part == "crossover_formula"):
        values = {_formula_value(m.answer, dict(ex.CANONICAL, delta_us=d)) for d in (0, 5)}
        refs = {_formula_value(ex.FORMULA, dict(ex.CANONICAL, delta_us=d)) for d in (0, 5)}
        assert values != refs, m.name


def test_delta_budget_puts_the_crossover_on_the_threshold() -> None:
    for p in [ex.CANONICAL, *VARIANTS]:
        budget = ex.solve(p)["delta_budget"].value
        assert ex.crossover_exact(p, budget) == pytest.approx(p["threshold"])


def test_speedup_peaks_where_the_stages_balance() -> None:
    # The solution says the gain peaks at C(B/2) = M(B/2) and falls beyond it.
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        for b in (0.5 * s["b_bal"], 0.8 * s["b_bal"], 1.25 * s["b_bal"], 2 * s["b_bal"]):
            assert ex.t1_us(p, b) / ex.t2_us(p, b) < s["s_bal"], (b, p)


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied() -> None:
    seen: dict[str, set] = {k: set() for k in ("gpu", "ep", "context", "delta_us", "b_big")}
    for p in VARIANTS:
        s = ex.solve(p)
        assert s["speedup_big"].value > 1 > s["speedup_small"].value
        assert s["crossover"].value <= p["threshold"]
        assert p["c0_us"] == ex.fixed_compute_us(p["gpu"], p["ep"])
        assert p["c_us"] == ex.per_token_compute_us(p["gpu"], p["context"])
        for key in seen:
            seen[key].add(p[key])
    assert seen["gpu"] == set(ex.GPUS) and len(seen["ep"]) >= 2
    assert seen["delta_us"] == set(ex.DELTAS_US) and seen["b_big"] == set(ex.BIG_BATCHES)
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150


# ---------------------------------------------------------------------------------------------
# Templates and graders

GIVENS = {"local_experts", "moe_layers", "attn_mb", "expert_mb", "hbm_tbps", "kv_layer_bytes"}


def test_statement_shows_only_givens() -> None:
    EX.assert_statement_shows_only_givens(GIVENS)


def test_canonical_solution_quotes_the_notes_figures() -> None:
    EX.assert_solution_quotes([
        "666.8", "456.8", "1.46×", "0.865", "26.45", "27 tokens", "8.6 µs", "38.7 ms", "26.5 ms",
        "32.9", "39.4", "1.53×"
    ])


