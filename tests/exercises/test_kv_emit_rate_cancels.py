"""Q08 (exercises/kv_emit_rate_cancels): the rate a prefill GPU emits KV, with n and N cancelling."""
from __future__ import annotations

import math
import random

import pytest
import sympy

from exercises import templating
from exercises.catalog import gpu, model
from exercises.spec import Quantity
from graders.formula import parse_formula
from tests.exercises.support import ExerciseUnderTest, close, load_by_path

ex = load_by_path("kv_emit_rate_cancels")
EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants()
spec = EX.spec_fixture()


def test_parts_agree_with_the_module():
    s = ex.solve(ex.CANONICAL)
    for pid in ("breakers", "levers"):
        options = {o["id"] for o in EX.parts[pid]["options"]}
        assert set(s[pid]) <= options and EX.parts[pid]["multi"]


# ---------------------------------------------------------------------------------------------
# The canonical variant: the notes' table (facts-q01-q25 §Q08)


def test_canonical_rows_reproduce_the_notes():
    s = ex.solve(ex.CANONICAL)
    rates = {r["letter"]: r["rate_gbs"] for r in s["row_data"]}
    # kappa * F * MFU / (2P): 327,680 x 989.4e12 x 0.5 / (2 x 70.55e9) = 1.149 GB/s (notes: 1.15)
    assert rates["A"] == pytest.approx(1.149, abs=5e-4)
    # DeepSeek-V3, FP8 on H100: 70,272 x 1,978.9e12 x 0.5 / (2 x 37.55e9) = 0.926 (notes: 0.93)
    assert rates["B"] == pytest.approx(0.926, abs=5e-4)
    # Qwen3-30B-A3B, 3.35 B active: 98,304 x 989.4e12 x 0.5 / 6.70e9 = 7.26 (notes: 7.25)
    assert rates["C"] == pytest.approx(7.26, abs=0.01)
    # Llama-2-7B (MHA): 524,288 x 989.4e12 x 0.5 / 13.48e9 = 19.24 (notes: 19.2)
    assert rates["D"] == pytest.approx(19.24, abs=0.01)
    # On B200 in FP8 (4,500 TFLOPS dense): 33.0 and 87.5 GB/s, the latter over a 50 GB/s NIC.
    assert rates["E"] == pytest.approx(33.0, abs=0.05)
    assert rates["F"] == pytest.approx(87.5, abs=0.05)
    assert s["rate_a"].value == rates["A"] and s["rate_worst"].value == rates["F"]
    assert s["breakers"] == ["f"] and s["budget_gbs"] == 50
    assert s["a_instance_gbs"] == pytest.approx(9.19, abs=0.005)  # notes: 9.19 per 8-GPU instance


def test_canonical_attention_correction():
    s = ex.solve(ex.CANONICAL)
    # 2 x 80 x n x 8,192 per token on top of 141.1 GFLOP: 1.07 GB/s at 8K (the notes' figure),
    # 0.881 at the 32K of part 3, 0.518 at 128K.
    assert s["rate_8k"] == pytest.approx(1.068, abs=5e-4)
    assert s["rate_long"].value == pytest.approx(0.881, abs=5e-4)
    assert s["rate_128k"] == pytest.approx(0.518, abs=5e-4)
    assert s["request_gb"] == pytest.approx(10.74, abs=0.005)  # 32,768 x 327,680 B


def test_rate_matches_catalog_without_rounding():
    # The statement rounds active parameters to 0.01 B; the effect stays far inside the tolerance.
    for r in ex.solve(ex.CANONICAL)["row_data"]:
        m, g = model(r["model"]), gpu(r["gpu"])
        f = g.bf16_flops if r["precision"] == "BF16" else g.fp8_flops
        exact = m.kv_bytes_per_token() * f * 0.5 / (2 * m.active_params) / 1e9
        assert close(r["rate_gbs"], exact, 0.005), (r["model"], r["rate_gbs"], exact)


# ---------------------------------------------------------------------------------------------
# The formula: the reference cancels n and N, and equals the number parts


def _eval(text: str, values: dict[str, float]) -> float:
    expr = parse_formula(text, EX.parts["rate_formula"]["symbols"]).expr
    return float(expr.subs({sympy.Symbol(k, positive=True): v for k, v in values.items()}))


def test_formula_has_no_n_or_n_gpus_and_gives_the_number():
    s = ex.solve(ex.CANONICAL)
    expr = parse_formula(s["rate_formula"], EX.parts["rate_formula"]["symbols"]).expr
    assert {str(x) for x in expr.free_symbols} == {"kappa", "F", "M", "P"}
    a = s["row_data"][0]
    got = _eval(s["rate_formula"], {"kappa": a["kappa"], "F": a["tflops"] * 1e12, "M": 0.5,
                                    "P": a["active_b"] * 1e9})
    assert got / 1e9 == pytest.approx(s["rate_a"].value)


def test_formula_mistakes_differ_from_the_reference():
    point = {"n": 3.0, "N": 5.0, "kappa": 7.0, "F": 11.0, "M": 0.3, "P": 13.0}
    ref = _eval(ex.solve(ex.CANONICAL)["rate_formula"], point)
    for m in ex.mistakes(ex.CANONICAL):
        if m.part == "rate_formula":
            assert not math.isclose(_eval(m.answer, point), ref, rel_tol=1e-6), m.name


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied():
    seen_models, seen_links, breaker_counts = set(), set(), set()
    for p in VARIANTS:
        s = ex.solve(p)
        seen_models |= {r[0] for r in p["rows"]}
        seen_links.add((p["link"], p["gpus_per_nic"]))
        breaker_counts.add(len(s["breakers"]))
        assert p["rows"][0][0] in ex.ROW_A_MODELS
        for key in ("rate_a", "rate_long", "rate_worst"):
            v = s[key].value
            assert math.isfinite(v) and v > 0
        assert s["rate_long"].value < s["rate_a"].value  # attention only ever lowers the rate
        assert s["rate_worst"].value == max(r["rate_gbs"] for r in s["row_data"])
    assert seen_models == set(ex.INSTANCE_GPUS)
    # An 800 Gb/s ConnectX-8 leaves few deployments that break the link, so only about one
    # variant in 250 draws it: look for every link over 1,000 variants, not the first 200.
    seen_links |= {(p["link"], p["gpus_per_nic"]) for p in EX.variants(1000)}
    assert seen_links == set(ex.LINKS)
    assert len(breaker_counts) >= 4


def test_templates_render_for_every_variant():
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        text = templating.render(EX.spec().statement_template, p, s)
        assert s["a_model"] in text and "nan" not in text.lower().split()
        templating.render(EX.spec().solution_template, p, s)


def test_generate_is_deterministic():
    assert ex.generate(random.Random(7)) == ex.generate(random.Random(7))
    assert isinstance(ex.solve(ex.CANONICAL)["rate_a"], Quantity)
