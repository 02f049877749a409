"""Q06 (exercises/mla_absorption): the canonical numbers, sensible variants, distinct mistakes."""
from __future__ import annotations

import math
from typing import Any

import pytest

from exercises.mla_absorption import exercise as ex
from exercises.spec import Quantity
from tests.exercises.support import ExerciseUnderTest

EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()


# ---------------------------------------------------------------------------------------------
# The canonical variant reproduces the research notes (facts-q01-q25.md, Q06 and Appendix C)


def test_canonical_setting() -> None:
    p = ex.CANONICAL
    assert (p["gpu"], p["attn_tp"], p["cache"], p["gqa_model"]) == (
        "H100 SXM", 1, "bf16", "Llama-3.1-70B")


def test_canonical_numbers() -> None:
    s = ex.solve(ex.CANONICAL)
    # "2,176 vs 640 FLOPs (exact), ratio 3.4" (Q06 N1).
    assert s["flops_absorbed"] == 2176 and s["flops_plain"] == 640
    assert s["flops_ratio"] == pytest.approx(3.4)
    # 128 heads x 2,176 = 278,528 FLOPs per cached token per layer.
    assert s["layer_flops"].value == 278_528
    # Appendix C: 128 · 2·(576 + 512) / (576·2) = 241.8 FLOP/B; 483.6 with one MTP draft.
    assert s["row_bytes"] == 1152
    assert s["intensity"].value == pytest.approx(241.8, abs=0.05)
    assert s["intensity_2"] == pytest.approx(483.6, abs=0.05)
    # FlashMLA FP8 row 656 B: 424.6 FLOP/B.
    assert s["fp8_row_bytes"] == 656
    assert 128 * 2176 / s["fp8_row_bytes"] == pytest.approx(424.6, abs=0.05)
    # Re-expanding the cache: 2·512·(128·256) = 33.55 MFLOP per cached token per layer, ~120x.
    assert s["expand_flops"] == 33_554_432
    assert 120 <= s["expand_over_absorbed"] <= 121
    # GQA (Llama-3.1-70B, g = 8): 8 FLOP/B, ~37x below the H100 ridge of 295.
    assert s["gqa_intensity"].value == 8
    assert s["ridge"] == pytest.approx(295.3, abs=0.05)
    assert s["gqa_cross"] == 37
    # TP8 leaves 16 heads per GPU: intensity ~30 (memory-bound again).
    assert s["intensity_tp8"] == pytest.approx(30.2, abs=0.05)
    # 241.8 is 82 % of the H100 ridge, so one extra query token (s = 2) crosses it.
    assert s["regime"] == "near_ridge" and s["s_cross"].value == 2
    assert s["per_head_formula"] == "4*d_c + 2*d_r"


def test_regime_follows_the_ridge() -> None:
    # H200's ridge (206) sits below 241.8: the same kernel is compute-bound there.
    assert ex.solve(dict(ex.CANONICAL, gpu="H200 SXM"))["regime"] == "compute"
    assert ex.solve(dict(ex.CANONICAL, attn_tp=8))["regime"] == "memory"


def test_attainable_ceilings_lower_the_ridge() -> None:
    # FlashMLA-like ceilings on H100 (67 % of the BF16 rate, 90 % of HBM): the ridge drops from
    # 295.3 to 219.8 FLOP/B, so the canonical kernel (241.8) is compute-bound against it.
    s = ex.solve(dict(ex.CANONICAL, flops_pct=67, hbm_pct=90))
    assert s["peak_ridge"] == pytest.approx(295.3, abs=0.05)
    assert s["ridge"] == pytest.approx(295.34 * 67 / 90, rel=1e-3)
    assert s["regime"] == "compute" and s["s_cross"].value == 1
    # The datasheet ridge would give s = 2 (the same wrong value as the FP8-rate slip: one entry).
    slips = {m.answer: m.feedback for m in ex.mistakes(dict(ex.CANONICAL, flops_pct=67, hbm_pct=90))
             if m.part == "s_cross"}
    assert "datasheet ridge" in slips[2.0]
    # The canonical variant has no ceilings: datasheet peaks, and no peak_ridge slip.
    assert ex.ceilings(ex.CANONICAL) is None
    assert "peak_ridge" not in {m.name for m in ex.mistakes(ex.CANONICAL)}


def test_per_tensor_fp8_row() -> None:
    # vLLM/SGLang FP8 MLA cache: the whole 576-wide row at 1 B, one scale per tensor.
    s = ex.solve(dict(ex.CANONICAL, cache="fp8_tensor"))
    assert s["row_bytes"] == 576 and s["intensity"].value == pytest.approx(483.6, abs=0.05)
    ms = [m for m in ex.mistakes(dict(ex.CANONICAL, cache="fp8_tensor")) if m.part == "intensity"]
    assert "flashmla_layout" in {m.name for m in ms} and "fp8_naive" not in {m.name for m in ms}
    # The BF16-row slip lands on half the reference, the same value as counting K and V.
    assert any("BF16 row" in m.feedback for m in ms)


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied() -> None:
    seen: dict[str, set[Any]] = {"regime": set(), "s_cross": set(), "gpu": set(), "cache": set()}
    for p in VARIANTS:
        assert p["gpu"] in ex.GPUS and p["attn_tp"] in ex.ATTN_TP
        s = ex.solve(p)
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value > 0
        seen["regime"].add(s["regime"])
        seen["s_cross"].add(s["s_cross"].value)
        seen["gpu"].add(p["gpu"])
        seen["cache"].add(p["cache"])
    assert seen["regime"] == {"compute", "near_ridge", "memory"}
    assert len(seen["s_cross"]) >= 4 and seen["gpu"] == set(ex.GPUS)
    assert seen["cache"] == set(ex.CACHES)
    # Not all the same: many distinct parameter sets and answers.
    assert len({round(ex.solve(p)["intensity"].value, 3) for p in VARIANTS}) >= 6


def _answers(s: dict[str, Any]) -> tuple[Any, ...]:
    """Every part's reference answer (numbers to 6 significant figures)."""
    return tuple(f"{s[pid].value:.6g}" if isinstance(s[pid], Quantity) else s[pid]
                 for pid in PARTS)


def test_200_variants_differ() -> None:
    # "200 random variants ... differ from each other": parameters and answers alike.
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) >= 150
    assert len({_answers(ex.solve(p)) for p in VARIANTS}) >= 150
    # The graded answers alone (the text part left out) vary too, within the few head splits,
    # cache rows, group sizes and crossing points the exercise has.
    graded = [pid for pid, part in PARTS.items() if part["type"] != "text"]
    assert len({tuple(_answers(ex.solve(p))[list(PARTS).index(pid)] for pid in graded)
                for p in VARIANTS}) >= 75


# ---------------------------------------------------------------------------------------------
# Templates and graders

GIVENS = {"layers", "q_heads", "d_c", "d_r", "d_nope", "d_v", "qk_dim", "heads_gpu", "row_bytes",
          "bf16_tflops", "hbm_tbps", "gqa_q_heads", "gqa_kv_heads", "gqa_head_dim", "cache_label",
          "gpu_note", "fp8_rule", "roofline_rule"}


def test_statement_shows_only_givens() -> None:
    EX.assert_statement_shows_only_givens(GIVENS)


