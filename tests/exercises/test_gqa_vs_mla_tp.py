"""Q49 (exercises/gqa_vs_mla_tp): the canonical numbers, sensible variants, distinct mistakes."""
from __future__ import annotations

import math
from typing import Any

import pytest

from exercises.gqa_vs_mla_tp import exercise as ex
from exercises.mla_tp_copy import exercise as q22
from tests.exercises.support import ExerciseUnderTest

EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()


# ---------------------------------------------------------------------------------------------
# The canonical variant reproduces facts-q26-q49.md, Q49 (and §0.2 of both notes files)


def test_canonical_setting() -> None:
    p = ex.CANONICAL
    assert (p["gqa_model"], p["gpu"], p["tp"], p["context_k"], p["sessions"]) == (
        "Llama-3.1-70B", "H200 SXM", 8, 32, 32)


def test_canonical_per_token_and_per_gpu() -> None:
    s = ex.solve(ex.CANONICAL)
    # 2·80·8·128·2 = 327,680 B (320 KiB); (512 + 64)·61·2 = 70,272 B (68.6 KiB); 4.66×.
    assert s["gqa_token"].value == 327_680 and s["mla_token"].value == 70_272
    assert s["token_ratio"] == pytest.approx(4.66, abs=0.005)
    # TP8 per GPU: GQA 40 KiB, MLA 68.6 KiB (1.72× GQA).
    assert s["gqa_gpu"].value == 40_960 and s["mla_gpu"].value == 70_272
    assert s["gpu_ratio"] == pytest.approx(1.72, abs=0.005)
    # Per 128K request per GPU: GQA 5.0 GiB, MLA 8.6 GiB.
    assert s["req128_gqa_gib"] == 5.0
    assert s["req128_mla_gib"] == pytest.approx(8.6, abs=0.05)
    # Whole-session figures: 32 × 32K sessions need 68.6 GiB/GPU on MLA, 40 GiB/GPU on GQA.
    assert s["need_mla_gb"] * 1e9 / 2**30 == pytest.approx(68.6, abs=0.05)
    assert s["need_gqa_gb"] * 1e9 / 2**30 == pytest.approx(40.0, abs=0.05)


def test_canonical_budgets_match_q22() -> None:
    # The notes' Q49 budgets (42.6 GiB, 106.5 GiB) use 141 GiB and a 4 GiB reserve; this exercise
    # uses the convention of Q22 (141 × 10^9 B) with a 4 GB reserve, so its MLA budget is Q22's
    # at that reserve. DeepSeek-V3's 85.0 GB per GPU counts q_a / kv_a whole on every GPU.
    s = ex.solve(ex.CANONICAL)
    assert ex.CANONICAL["reserve_gb"] == 4
    assert s["mla_w"] == 85.0 and s["naive_mla_w"] == 84.1 and s["gqa_w"] == 17.6
    assert s["mla_budget"] == 37.9 and s["gqa_budget"] == 105.3
    assert s["mla_budget"] == pytest.approx(
        q22.solve(dict(q22.CANONICAL, reserve_gb=4))["kv_space"].value)
    assert ex.mla_checkpoint_bytes() == q22.checkpoint_bytes()
    assert ex.mla_attention_bytes() == q22.attention_bytes()
    assert ex.mla_replicated_bytes() == q22.replicated_bytes()
    # The story: MLA holds 16 sessions of 32K (16.46), GQA 78; 32 fit only on the GQA model.
    assert s["mla_sessions"].value == 16 and s["gqa_sessions"] == 78
    assert s["mla_cap"] == pytest.approx(16.46, abs=0.005)
    assert s["which_fits"] == "gqa_only"
    # At Q22's 5 GB reserve the budget is 36.9 GB: 16.02 sessions, too near 16 (boundary rule).
    five = ex.solve(dict(ex.CANONICAL, reserve_gb=5))
    assert five["mla_budget"] == 36.9 and not ex.is_sensible(dict(ex.CANONICAL, reserve_gb=5))
    # DP attention adds 7/8 of the split attention weights: (11.42 − 0.92) × 7/8 = 9.19 GB.
    assert s["dp_extra_gb"] == pytest.approx(9.1875)
    # vLLM / SGLang's FP8 cache for DeepSeek-V3: 576 B a layer, 2× the BF16 row's tokens;
    # FlashMLA's 656-B fp8_ds_mla row is V3.2's.
    assert s["fp8_row"] == 576 and s["fp8_gain"] == 2.0 and s["fp8_ds_mla_row"] == 656


def test_replicated_heads_past_the_kv_head_count() -> None:
    # Qwen3-30B-A3B has 4 KV heads: at TP8 each GPU keeps one whole head (Q46), 1/4 not 1/8.
    s = ex.solve(dict(ex.CANONICAL, gqa_model="Qwen3-30B-A3B"))
    assert s["replicated"] and s["copies"] == 2
    assert s["gqa_gpu"].value == s["gqa_token"].value // 4
    assert any(m.name == "split_past_heads" for m in ex.mistakes(
        dict(ex.CANONICAL, gqa_model="Qwen3-30B-A3B")))


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied() -> None:
    seen: dict[str, set[Any]] = {"fits": set(), "model": set(), "gpu": set(), "context": set()}
    for p in VARIANTS:
        assert p["gqa_model"] in ex.DEPLOYMENTS[(p["gpu"], p["tp"])]
        s = ex.solve(p)
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value > 0
        # MLA per GPU never splits; GQA per GPU never exceeds the whole model.
        assert s["mla_gpu"].value == s["mla_token"].value
        assert s["gqa_gpu"].value < s["gqa_token"].value
        # The blurb's turn-over holds in every variant: per GPU, MLA stores more than GQA.
        assert s["mla_gpu"].value > s["gqa_gpu"].value
        seen["fits"].add(s["which_fits"])
        seen["model"].add(p["gqa_model"])
        seen["gpu"].add(p["gpu"])
        seen["context"].add(p["context_k"])
    assert seen["fits"] == {"both", "gqa_only", "mla_only", "neither"}
    assert len(seen["model"]) == 5 and len(seen["gpu"]) == 3 and len(seen["context"]) == 5
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) >= 150


# ---------------------------------------------------------------------------------------------
# Templates and graders

GIVENS = {"gqa_layers", "gqa_q_heads", "gqa_kv_heads", "gqa_head_dim", "mla_layers",
          "mla_q_heads", "d_c", "d_r", "hbm_gb", "mem_util_pct", "usable_gb", "mla_w", "gqa_w",
          "mla_budget", "gqa_budget", "context"}


def test_statement_shows_only_givens() -> None:
    EX.assert_statement_shows_only_givens(GIVENS)


