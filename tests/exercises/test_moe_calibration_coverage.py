"""Q18 (exercises/moe_calibration_coverage): the canonical counts, a simulated router agreeing with
the expected-value formulas, sensible variants, distinct mistakes."""
from __future__ import annotations

import json
import math
import random

import pytest

from exercises.spec import Quantity
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("moe_calibration_coverage")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants(200)


def test_canonical_reproduces_the_notes():
    p = ex.CANONICAL
    assert (p["model"], p["samples"], p["seq_len"], p["skew"], p["rule_k"]) == (
        "DeepSeek-V3", 128, 2048, 10, 1.0)
    s = ex.solve(p)
    # 128 x 2,048 = 262,144 tokens; x 8 / 256 = 8,192 per expert per layer (exact).
    assert s["n_tokens"] == 262_144
    assert s["mean_tokens"].value == 8192
    # 10x under-routed: 819.2 < d_in = 7,168 for gate/up (the notes' 819).
    assert s["rare_tokens"].value == pytest.approx(819.2)
    assert s["d_bind"] == 7168 and s["bind_name"] == "gate/up" and s["d_other"] == 2048
    # Rule n >= 1 x 7,168: an expert below 7,168 / 8,192 = 0.875 of the average falls short.
    assert s["load_threshold"].value == pytest.approx(0.875)
    # Covering the 10x-rare expert: 7,168 x 10 x 256 / 8 = 2,293,760 tokens = 1,120 x 2,048.
    assert s["tokens_needed"].value == pytest.approx(2_293_760)
    assert s["samples_needed"] == pytest.approx(1120)
    assert s["set_multiple"] == pytest.approx(8.75)
    # The notes' 1,048,576-token set gives 32,768 per expert.
    big = ex.solve(dict(p, samples=512))
    assert big["mean_tokens"].value == 32_768


def test_a_simulated_router_agrees_with_the_expected_counts():
    # Route a calibration set through a router whose expert weights are equal except one expert,
    # weighted 10x lower; each token draws 8 distinct experts by weight. Count tokens per expert.
    # (A smaller set than the canonical one keeps the pure-Python loop fast.)
    p = dict(ex.CANONICAL, samples=16)
    s = ex.solve(p)
    e, k, n = s["experts"], s["top_k"], s["n_tokens"]
    rng = random.Random(3)
    weights = [1.0 / p["skew"]] + [1.0] * (e - 1)
    counts = [0] * e
    for _ in range(n):
        picked: set[int] = set()
        while len(picked) < k:
            picked.add(rng.choices(range(e), weights)[0])
        for i in picked:
            counts[i] += 1
    assert sum(counts) == n * k
    # The average expert sees exactly N k / E; the rare one about a tenth of the others.
    assert sum(counts) / e == s["mean_tokens"].value
    others = sum(counts[1:]) / (e - 1)
    assert counts[0] / others == pytest.approx(1 / p["skew"], rel=0.15)
    assert counts[0] < s["need"]


def test_every_variant_is_sensible():
    models = set()
    for p in VARIANTS:
        s = ex.solve(p)
        models.add(p["model"])
        assert s["mean_tokens"].value == int(s["mean_tokens"].value)  # exact part: an integer
        assert s["rare_tokens"].value < s["need"]  # the rare expert is short
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value > 0
    assert models == set(ex.MODELS)


def test_the_binding_projection_depends_on_the_model():
    # DeepSeek-V3's gate/up (hidden 7,168) binds; Mixtral's down (expert width 14,336) does.
    assert ex.solve(ex.CANONICAL)["bind_name"] == "gate/up"
    mixtral = ex.solve(dict(ex.CANONICAL, model="Mixtral-8x7B"))
    assert mixtral["bind_name"] == "down" and mixtral["d_bind"] == 14_336


STATEMENT_GIVENS = {"moe_layers", "layers", "experts", "top_k", "shared_text", "hidden",
                    "moe_ffn"}


def test_statement_shows_only_givens():
    EX.assert_statement_shows_only_givens(STATEMENT_GIVENS)


def test_canonical_solution_quotes_the_numbers():
    EX.assert_solution_quotes([
        "262,144", "8,192 tokens", "819.2 tokens", "0.875", "2,293,760", "1,120", "8.75×"
    ])


def test_answers_survive_a_json_round_trip():
    for p in VARIANTS[:30]:
        again = ex.solve(json.loads(json.dumps(p)))
        s = ex.solve(p)
        for pid in NUMBER_PARTS:
            assert isinstance(again[pid], Quantity) and again[pid] == s[pid]


def test_generate_is_deterministic():
    assert ex.generate(random.Random(9)) == ex.generate(random.Random(9))
