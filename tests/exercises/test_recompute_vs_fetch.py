"""Q04 (exercises/recompute_vs_fetch): the canonical numbers, and sensible variants."""
from __future__ import annotations

import re

import pytest

from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("recompute_vs_fetch")
EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants()
spec = EX.spec_fixture()


def test_choice_options_are_the_modules():
    assert tuple(o["id"] for o in EX.parts["loses"]["options"]) == ex.LOSE_OPTIONS


def test_canonical_numbers():
    p = ex.CANONICAL
    assert (p["model"], p["gpu"], p["tp"], p["mfu"], p["slow_gbs"]) == (
        "Llama-3.1-70B", "H100 SXM", 8, 0.5, 7)
    s = ex.solve(p)
    # 2 x 70.55e9 / (8 x 989.4e12 x 0.5) = 35.65 us per token (notes: 35.7).
    assert s["recompute_us"].value == pytest.approx(35.65, abs=0.01)
    # 327,680 B / (8 x 50 GB/s) = 0.8192 us (notes: 0.82).
    assert s["fetch_us"].value == pytest.approx(0.8192, abs=1e-6)
    # 2P / kappa = 430,626 FLOP per KV byte against 9,894 FLOP per link byte: R = 43.5 (notes).
    assert s["saved_flop_per_byte"] == pytest.approx(430_626, abs=1)
    assert s["gpu_flop_per_link_byte"] == pytest.approx(9894)
    assert s["ratio"].value == pytest.approx(43.52, abs=0.01)
    # Break-even 1.15 GB/s per GPU (notes).
    assert s["breakeven_bw"].value == pytest.approx(1.149, abs=0.001)
    # One 7 GB/s drive for 8 GPUs: 0.875 GB/s each, R = 0.76 (notes): recompute wins.
    assert s["slow_ratio"].value == pytest.approx(0.762, abs=0.001)
    assert s["slow_winner"] == "recomputing"
    assert s["loses"] == ["slow_tier", "short_prefix", "contention"]


@pytest.mark.parametrize(("name", "ratio", "breakeven"), [
    ("Llama-3.1-8B", 12.4, 4.04),  # notes: R = 12.4 over PCIe, BW* = 4.04 GB/s
    ("Llama-2-7B", 2.6, 19.2),  # notes: multi-head attention, R = 2.6, BW* = 19.2 GB/s
])
def test_the_notes_other_models(name, ratio, breakeven):
    s = ex.solve(dict(ex.CANONICAL, model=name, tp=1))
    assert s["ratio"].value == pytest.approx(ratio, rel=0.01)
    assert s["breakeven_bw"].value == pytest.approx(breakeven, rel=0.01)


def test_the_gpu_count_cancels():
    for p in VARIANTS[:50]:
        base = ex.solve(p)
        for tp in (1, 2, 4, 8):
            other = ex.solve(dict(p, tp=tp))
            assert other["ratio"].value == pytest.approx(base["ratio"].value)
            assert other["breakeven_bw"].value == pytest.approx(base["breakeven_bw"].value)


def test_every_variant_is_sensible_and_both_slow_verdicts_occur():
    winners, models = set(), set()
    for p in VARIANTS:
        s = ex.solve(p)
        assert s["ratio"].value >= 1.5
        winners.add(s["slow_winner"])
        models.add(p["model"])
    assert winners == {"fetching", "recomputing"}
    assert models == set(ex.TP_CHOICES)
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) >= 150


def test_moe_models_recompute_with_active_parameters():
    s = ex.solve(dict(ex.CANONICAL, model="Qwen3-30B-A3B", tp=1))
    assert s["active_params"] < s["params"] / 5
    assert s["flops_per_token_g"] == pytest.approx(2 * s["active_params"] / 1e9)


def test_the_statement_shows_only_givens():
    used = set(re.findall(r"\{\{\s*s\.(\w+)", (EX.folder / "statement.md").read_text()))
    assert used <= {"params_text", "layers", "attention_kind", "kv_heads", "head_dim",
                    "bf16_tflops", "link_raw_gbs", "link_gbs", "mfu_pct", "all_gpus",
                    "shared_by"}, used


