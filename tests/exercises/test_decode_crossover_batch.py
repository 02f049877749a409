"""Q02 (exercises/decode_crossover_batch): the crossover equals the ridge, and sensible variants."""
from __future__ import annotations

import math
import re

import pytest

from exercises.catalog import gpu
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("decode_crossover_batch")
EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants()
spec = EX.spec_fixture()


def test_choice_options_are_the_modules():
    assert tuple(o["id"] for o in EX.parts["why_equal"]["options"]) == ex.WHY_OPTIONS
    assert tuple(o["id"] for o in EX.parts["context_verdict"]["options"]) == ex.VERDICT_OPTIONS


def test_canonical_numbers():
    p = ex.CANONICAL
    assert (p["gpu"], p["model"], p["scheme"], p["context"]) == (
        "H100 SXM", "Llama-3.1-70B", "W4A16", 4096)
    s = ex.solve(p)
    # 989.4e12 / 3.35e12 = 295.3 FLOP/B (notes N1: 295).
    assert s["ridge"].value == pytest.approx(295.34, abs=0.01)
    # BF16: I(B) = 2B / 2 = B, so B* = 295.3 tokens, the same number.
    assert s["crossover"].value == pytest.approx(s["ridge"].value)
    # W4A16: 295.3 x 0.5 / 2 = 73.8 (notes N3: 74).
    assert s["alt_crossover"].value == pytest.approx(73.84, abs=0.01)
    # (2 x 70.55e9 + 4 x 80 x 4,096 x 8,192) / (4,096 x 327,680) = 113.1 (notes N4: 113), below
    # the ridge: never compute-bound.
    assert s["context_limit"].value == pytest.approx(113.13, abs=0.01)
    assert s["context_verdict"] == "never" and s["why_equal"] == "cancel"


def test_the_notes_other_figures():
    # Ridge per GPU (notes Q02): A100 153, H200 206, HGX B200 292.
    assert gpu("A100 SXM 80GB").ridge_bf16 == pytest.approx(153.0, abs=0.1)
    assert gpu("H200 SXM").ridge_bf16 == pytest.approx(206.1, abs=0.1)
    assert gpu("B200").ridge_bf16 == pytest.approx(292.2, abs=0.1)
    h100 = dict(ex.CANONICAL)
    # W8A16 = 148; FP8 weights with FP8 math: the coincidence survives (1978.9 / 3.35 / 2 = 295).
    assert ex.solve(dict(h100, scheme="W8A16"))["alt_crossover"].value == pytest.approx(147.7,
                                                                                         abs=0.1)
    fp8 = ex.solve(dict(h100, scheme="W8A8-FP8"))["alt_crossover"].value
    assert fp8 == pytest.approx(295.4, abs=0.1)
    # At 1K context the step crosses, near batch 930 (notes: 933 with a slightly smaller P).
    one_k = ex.solve(dict(h100, context=1024))
    assert one_k["context_verdict"] == "later"
    assert one_k["context_limit"].value == pytest.approx(428.5, abs=0.5)
    assert one_k["b_context"] == pytest.approx(932.5, abs=1)
    # H200's lower ridge at 4K: still never (notes).
    assert ex.solve(dict(h100, gpu="H200 SXM"))["context_verdict"] == "never"


def test_the_coincidence_holds_on_every_gpu_of_every_variant():
    for p in VARIANTS:
        s = ex.solve(p)
        assert s["crossover"].value == pytest.approx(s["ridge"].value)


def test_every_variant_is_sensible_and_both_verdicts_occur():
    verdicts, schemes = set(), set()
    for p in VARIANTS:
        s = ex.solve(p)
        verdicts.add(s["context_verdict"])
        schemes.add(p["scheme"])
        if s["context_verdict"] == "later":
            assert s["b_context"] > s["crossover"].value
        else:
            assert math.isinf(s["b_context"])
    assert verdicts == {"never", "later"}
    assert schemes == set(ex.SCHEMES)
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) >= 150


def test_the_statement_shows_only_givens():
    used = set(re.findall(r"\{\{\s*s\.(\w+)", (EX.folder / "statement.md").read_text()))
    assert used <= {"bf16_tflops", "fp8_tflops_text", "hbm_tbps", "params", "layers", "q_heads",
                    "kv_heads", "head_dim", "q_dim", "scheme_text"}, used


