"""Q22 (exercises/mla_tp_copy): the canonical numbers, sensible variants, distinct mistakes."""
from __future__ import annotations

import math
from typing import Any

import pytest

from exercises.catalog import model
from exercises.mla_tp_copy import exercise as ex
from exercises.spec import Quantity
from tests.exercises.support import ExerciseUnderTest

EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()


# ---------------------------------------------------------------------------------------------
# The canonical variant reproduces facts-q01-q25.md, Q22 (8 x H200, utilisation 0.9, 5 GB/GPU)


def test_canonical_setting() -> None:
    assert ex.CANONICAL == {"gpu": "H200 SXM", "tp": 8, "mem_util": 0.9, "reserve_gb": 5}
    assert ex.is_sensible(ex.CANONICAL)


def test_checkpoint_and_attention_bytes_from_the_config() -> None:
    # Notes: "≈ 673 GB" (their 84.1 GB per GPU splits it all; the engines keep q_a / kv_a whole);
    # attention 61 × 187.1 M = 11.41 B params, FP8.
    assert ex.checkpoint_bytes() / 1e9 == pytest.approx(673.15, abs=0.01)
    m = model("DeepSeek-V3")
    assert m.attn_params_per_layer == 187_105_280
    assert ex.attention_bytes() / 1e9 == pytest.approx(11.416, abs=0.001)
    # q_a and kv_a (15.14 M params a layer) stay whole on every TP rank: 0.92 GB in FP8.
    assert m.tp_replicates_latent_proj
    assert ex.replicated_bytes() == 923_700_064
    assert ex.replicated_bytes() == pytest.approx(
        m.layers * m.latent_proj_params_per_layer, rel=3e-4)  # the rest is the FP32 scales
    # Per GPU the attention shrinks as the catalog's helper says (scales aside).
    for tp in (8, 16):
        split = (ex.attention_bytes() - ex.replicated_bytes()) / tp + ex.replicated_bytes()
        assert split == pytest.approx(m.layers * m.attn_params_per_layer_per_gpu(tp), rel=3e-4)
    assert ex.weights_per_gpu_bytes(8) / 1e9 == pytest.approx(84.95, abs=0.01)
    # The FP8 share is every matrix except the BF16 embedding, head and routers.
    assert m.kv_bytes_per_token(2) == 70_272


def test_canonical_numbers() -> None:
    s = ex.solve(ex.CANONICAL)
    # 673 GB split 8 ways except the replicated 0.92 GB of q_a / kv_a: 85.0 GB, not 84.1.
    assert s["ckpt_gb"] == 673 and s["w_gpu"] == 85.0 and s["attn_gb"] == 11.42
    assert s["naive_w_gpu"] == 84.1 and s["repl_gb"] == 0.92
    # 141 · 0.9 − 85.0 − 5 = 36.9 GB → 525 K tokens at 70,272 B/token.
    assert s["kv_space"].value == pytest.approx(36.9)
    assert s["tp_tokens"].value == pytest.approx(525_102, abs=1)
    assert math.floor(s["tp_tokens"].value / 1e3) == 525
    # 7/8 = 87.5 % of the KV memory is duplicates: 7 × 36.9 = 258.3 GB.
    assert s["waste_pct"] == 87.5
    assert s["waste"].value == pytest.approx(258.3)
    # DP8: +(11.42 − 0.92) × 7/8 = 9.19 GB/GPU → 27.71 GB → 394 K tokens per GPU → 3.15 M, 6.0×.
    assert s["dp_extra"].value == pytest.approx(9.1875)
    assert s["dp_kv_gb"] == pytest.approx(27.71, abs=0.01)
    assert math.floor(s["dp_tokens_gpu"] / 1e3) == 394
    assert s["dp_tokens"].value == pytest.approx(3_154_884, abs=1)
    assert s["gain"] == pytest.approx(6.01, abs=0.01)
    # FP8 latent as vLLM / SGLang cache DeepSeek-V3 (576 B a layer, 35,136 B/token): 1,050 K
    # tokens, still replicated. FlashMLA's 656-B fp8_ds_mla row is V3.2's format.
    assert s["fp8_row"] == 576 and s["fp8_kappa"] == 35_136 and s["fp8_gain"] == 2.0
    assert math.floor(s["fp8_ktokens"]) == 1050
    assert s["fp8_ds_mla_row"] == 656
    # What the engine computes: the 143,156 MiB the driver reports → 45.1 GB, 642 K / 4.09 M.
    assert s["reported_kv_gb"] == pytest.approx(45.10, abs=0.005)
    assert s["reported_kv_gb"] * 1e9 / s["kappa"] == pytest.approx(641_777, abs=1)
    assert "143,156 MiB" in s["reported_note"] and "4.09 M" in s["reported_note"]


def test_gqa_contrast() -> None:
    s = ex.solve(ex.CANONICAL)
    assert s["llama_kappa_gpu"] == 40_960 and s["llama_dup"] == 1
    s16 = ex.solve(dict(ex.CANONICAL, tp=16))
    assert s16["llama_dup"] == 2  # past 8 KV heads, Llama duplicates too (Q46)


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied() -> None:
    seen: dict[str, set[Any]] = {"deployment": set(), "util": set()}
    for p in VARIANTS:
        assert (p["gpu"], p["tp"]) in ex.DEPLOYMENTS
        s = ex.solve(p)
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value > 0
        # The story holds in every variant: TP holds one GPU's worth, DP several times more.
        assert s["tp_tokens"].value == pytest.approx(s["tokens_gpu"])
        assert s["dp_tokens"].value > 2 * s["tp_tokens"].value
        seen["deployment"].add((p["gpu"], p["tp"]))
        seen["util"].add(p["mem_util"])
    assert seen["deployment"] == set(ex.DEPLOYMENTS) and len(seen["util"]) >= 3


def test_200_variants_differ() -> None:
    # "200 random variants ... differ from each other": parameters and answers alike.
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) >= 150
    answers = {tuple(f"{s[pid].value:.6g}" if isinstance(s[pid], Quantity)
                     else str(s[pid]) for pid in PARTS)
               for s in (ex.solve(p) for p in VARIANTS)}
    assert len(answers) >= 150
    graded = {tuple(f"{ex.solve(p)[pid].value:.6g}" for pid in NUMBER_PARTS) for p in VARIANTS}
    assert len(graded) >= 150


def test_drawn_settings_are_rounded_as_displayed() -> None:
    for p in VARIANTS:
        assert 0.80 <= p["mem_util"] <= 0.95 and round(p["mem_util"], 2) == p["mem_util"]
        assert 3 <= p["reserve_gb"] <= 8 and (2 * p["reserve_gb"]) % 1 == 0
        # Whole reserves stay ints, so the statement shows "5 GB", not "5.0 GB".
        assert isinstance(p["reserve_gb"], int) or p["reserve_gb"] % 1 == 0.5
        s = ex.solve(p)
        assert s["usable_gb"] == pytest.approx(s["hbm_gb"] * p["mem_util"], abs=1e-9)


# ---------------------------------------------------------------------------------------------
# Templates and graders

GIVENS = {"layers", "q_heads", "d_c", "d_r", "hbm_gb", "mem_util_pct", "ckpt_gb", "w_gpu",
          "attn_gb", "repl_gb", "attn_params_b", "heads_gpu"}


def test_statement_shows_only_givens() -> None:
    EX.assert_statement_shows_only_givens(GIVENS)


