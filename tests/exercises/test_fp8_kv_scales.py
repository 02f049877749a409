"""Q45 (exercises/fp8_kv_scales): the format facts, the canonical numbers, sensible variants and
distinct mistakes.

The E4M3 quantiser in the exercise is checked against a brute-force nearest-value search over the
format's 127 finite non-negative values, decoded independently here from the bit layout.
"""
from __future__ import annotations

import math
import random
import tomllib

import pytest
import sympy

from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("fp8_kv_scales")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()
tol = EX.tol


def close(value: float, ref: float, rel: float) -> bool:
    return abs(value - ref) <= 1e-9 * max(abs(ref), 1.0) if rel == 0 else \
        abs(value - ref) <= rel * abs(ref)


# ---------------------------------------------------------------------------------------------
# The format, decoded independently from the bit layout (OCP OFP8 spec: E4M3FN, bias 7)


def _decode_e4m3fn(code: int) -> float | None:
    """Value of a 7-bit magnitude code, None for the NaN pattern."""
    exp_field, mant = code >> 3, code & 7
    if exp_field == 15 and mant == 7:
        return None
    if exp_field == 0:
        return mant * 2.0 ** -9
    return (8 + mant) * 2.0 ** (exp_field - 7 - 3)


FINITE = sorted(v for v in (_decode_e4m3fn(c) for c in range(128)) if v is not None)


def _nearest(x: float) -> float:
    """Brute force: the nearest finite value, ties to the one with an even mantissa code."""
    a = abs(x)
    if a >= FINITE[-1]:
        return math.copysign(FINITE[-1], x)
    best = min(FINITE, key=lambda v: (abs(v - a), FINITE.index(v) % 2))
    return math.copysign(best, x)


def test_format_constants_match_the_bit_layout():
    assert ex.e4m3_values() == FINITE and len(FINITE) == 127
    assert ex.E4M3_MAX == FINITE[-1] == 448.0
    assert ex.E4M3_MIN_NORMAL == 2.0 ** -6 == FINITE[8]
    assert ex.E4M3_MIN_SUBNORMAL == 2.0 ** -9 == FINITE[1]
    assert ex.E4M3FNUZ_MAX == 240.0 and ex.E5M2_MAX == 57344.0 and ex.E4M3_ALL_CODES_MAX == 480.0
    assert ex.ROUND_BOUND == 0.0625
    assert ex.ROUND_WORST_REACHED == pytest.approx(1 / 17)


def test_quantiser_is_round_to_nearest_even_with_saturation():
    rng = random.Random(45)
    xs = [rng.uniform(-500, 500) for _ in range(2000)]
    xs += [math.exp(rng.uniform(math.log(1e-4), math.log(2000))) for _ in range(2000)]
    # Every midpoint between neighbours is a tie; ties go to the even mantissa code.
    xs += [(a + b) / 2 for a, b in zip(FINITE, FINITE[1:], strict=False)]
    for x in xs:
        assert ex.to_e4m3(x) == _nearest(x), x
    assert ex.to_e4m3(1e6) == 448 and ex.to_e4m3(-1e6) == -448
    assert ex.to_e4m3(448 + 15.9) == 448  # would round down to 448 anyway
    assert ex.to_e4m3(2.0 ** -10) == 0  # the tie between 0 and 2^-9 goes to 0


def test_relative_rounding_error_never_exceeds_the_bound_in_the_normal_range():
    worst = 0.0
    for i in range(1, 200_001):
        x = 2.0 ** -6 * (448 * 64) ** (i / 200_001)
        worst = max(worst, abs(ex.to_e4m3(x) - x) / x)
    assert worst <= ex.ROUND_BOUND
    assert worst == pytest.approx(ex.ROUND_WORST_REACHED, rel=1e-3)


# ---------------------------------------------------------------------------------------------
# The canonical variant reproduces the research notes (facts-q26-q49.md, Q45)


def test_canonical_numbers_match_the_notes():
    p = ex.CANONICAL
    s = ex.solve(p)
    assert (p["model"], p["amax"], p["sigma"], p["n_eval"], p["n_dep"]) == (
        "Llama-3.1-70B", 1000, 0.3, 1000, 131072)
    # "With scale 1.0: 500 -> 448 (-10%), 1,000 -> 448 (-55%)"; "100 -> 96"
    assert s["clip_threshold"].value == 448
    assert s["clip_error"].value == pytest.approx(55.2)
    assert ex.stored(500, 1.0) == 448 and (500 - 448) / 500 == pytest.approx(0.104)
    assert ex.stored(100, 1.0) == 96
    # "0.001 -> 0.00195 (+95%) with scale 1.0"
    assert ex.stored(0.001, 1.0) == pytest.approx(0.001953125)
    assert (ex.stored(0.001, 1.0) - 0.001) / 0.001 == pytest.approx(0.953, abs=1e-3)
    # "worst-case relative rounding error 2^-4 = 6.25 %"; Appendix C: 1/17 = 5.9 % reached
    assert s["round_bound"].value == 6.25
    assert s["round_reached_pct"] == pytest.approx(5.88, abs=5e-3)
    # "normal dynamic range 448 / 2^-6 ~ 2^14.8"
    assert s["normal_range_log2"] == pytest.approx(14.8, abs=0.01)
    # "N = 1,000 -> 3.72 sigma; N = 8,192 -> 4.25 sigma; N = 131,072 -> 4.85 sigma"
    assert math.sqrt(2 * math.log(1000)) == pytest.approx(3.72, abs=5e-3)
    assert math.sqrt(2 * math.log(8192)) == pytest.approx(4.25, abs=5e-3)
    assert math.sqrt(2 * math.log(131072)) == pytest.approx(4.85, abs=5e-3)
    # "With sigma = 0.3 logits the noise ceiling rises from 1.12 to 1.46, eating 0.34 logits"
    assert s["ceiling_eval"] == pytest.approx(1.12, abs=5e-3)
    assert s["ceiling_dep"] == pytest.approx(1.46, abs=5e-3)
    assert s["ceiling_rise"].value == pytest.approx(0.34, rel=tol("ceiling_rise"))
    # KV: Llama-3.1-70B is 320 KiB per token in BF16 (notes §0.2), 160 KiB in FP8.
    assert s["kv_bf16"] == 327_680 and s["kv_fp8"] == 163_840
    assert s["scale_effect"] == ["same_rounding", "outlier_fixed", "small_underflow"]


def test_expected_max_is_below_the_bound_and_grows_like_it():
    for n in (1000, 2000, 4000, 32768, 65536, 131072):
        assert ex.expected_max(n) < math.sqrt(2 * math.log(n))
    # Known values of E[max of N standard normals]: 3.241 for N = 1,000.
    assert ex.expected_max(1000) == pytest.approx(3.2414, abs=1e-3)


# ---------------------------------------------------------------------------------------------
# Shape and variants


def test_parts_and_tolerances_agree_with_the_module():
    assert list(PARTS) == ["clip_threshold", "clip_error", "round_bound", "scale_effect",
                           "ceiling_formula", "ceiling_rise", "why_long"]


def test_variants_are_sensible_and_differ():
    seen = set()
    for p in VARIANTS:
        assert p["model"] in ex.MODELS and p["gpu"] in ex.GPUS
        s = ex.solve(p)
        for pid in NUMBER_PARTS:
            v = s[pid].value
            assert math.isfinite(v) and v > 0, (pid, v, p)
        assert 10 < s["clip_error"].value < 100
        assert 0 < s["ceiling_rise"].value < s["ceiling_dep"]
        seen.add(tuple(sorted(p.items())))
    # 200 draws from a few thousand combinations: most are different.
    assert len(seen) > 150
    assert len({ex.solve(p)["clip_error"].value for p in VARIANTS}) == len(ex.AMAXES)


def test_solution_claims_hold_in_every_variant():
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        scale = s["scale"]
        # The outlier maps exactly to 448 and is stored without error.
        assert ex.stored(p["amax"], scale) == pytest.approx(p["amax"], rel=1e-12)
        # 0.3, 5.3 and 100 stay in the normal range and inside the bound under both scales.
        for x in (0.3, 5.3, 100.0):
            assert x / scale >= ex.E4M3_MIN_NORMAL
            for sc in (1.0, scale):
                assert abs(ex.stored(x, sc) - x) / x <= ex.ROUND_BOUND
        # The smallest sample is a subnormal under both scales: its error is at most half a
        # subnormal step, 2^-10 x scale, a bound that grows with the scale.
        x = 0.004
        assert x / scale < ex.E4M3_MIN_NORMAL and x < ex.E4M3_MIN_NORMAL
        for sc in (1.0, scale):
            assert abs(ex.stored(x, sc) - x) <= 2.0 ** -10 * sc * (1 + 1e-12)
        # Anything at or below 2^-10 x scale becomes zero.
        assert ex.stored(s["zero_s"], scale) == 0
        assert ex.stored(s["zero_s"] * 1.01, scale) > 0


# ---------------------------------------------------------------------------------------------
# Mistakes


def _formula(text: str, sigma: float, n: float) -> float:
    # Our own trusted strings only; students' input goes through the grader's AST whitelist.
    expr = sympy.sympify(text, locals={"ln": sympy.log, "sigma": sympy.Symbol("sigma"),
                                       "N": sympy.Symbol("N")})
    return float(expr.subs({"sigma": sigma, "N": n}))


def test_formula_reference_matches_the_numbers_and_mistakes_differ():
    for p in VARIANTS[:30]:
        s = ex.solve(p)
        rise = _formula(s["ceiling_formula"], p["sigma"], p["n_dep"]) - _formula(
            s["ceiling_formula"], p["sigma"], p["n_eval"])
        assert rise == pytest.approx(s["ceiling_rise"].value)
    points = [(0.3, 1000.0), (0.2, 131072.0), (1.5, 3.0)]
    ref = [_formula(ex.CEILING_FORMULA, a, b) for a, b in points]
    for m in (m for m in ex.mistakes(ex.CANONICAL) if m.part == "ceiling_formula"):
        got = [_formula(m.answer, a, b) for a, b in points]
        assert any(abs(g - r) > 1e-6 for g, r in zip(got, ref, strict=True)), m.answer


# ---------------------------------------------------------------------------------------------
# Templates, selftest file, real graders


@pytest.mark.parametrize("which", ["statement.md", "solution.md"])
def test_templates_render_for_every_variant(which):
    EX.assert_no_nan_rendered(which, VARIANTS)


def test_canonical_solution_quotes_the_worked_numbers():
    EX.assert_solution_quotes([
        "448", "55.2 %", "6.25", "5.88 %", "2.232", "0.341", "1.115", "1.456", "28,672",
        "| 100 | 96 |"
    ])


def test_selftest_cases_are_well_formed():
    cases = tomllib.loads((FOLDER / "selftest.toml").read_text(encoding="utf-8"))["case"]
    for case in cases:
        assert case["part"] in PARTS
        assert case.get("invalid") or "score" in case or "covered" in case
    assert any(c.get("invalid") for c in cases)
    assert any(c["part"] == "clip_error" and c["answer"] == "27.6" and c["score"] == 0
               for c in cases)  # off by 2x
    assert any(c["part"] == "clip_error" and c["answer"] == "0.552" and c["score"] == 0.5
               for c in cases)  # a converted unit (fraction for a percentage)


