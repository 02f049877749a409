"""Q30 (exercises/reasoning_kv_growth): the notes' pool, concurrency, recompute price and
per-user table; sensible variants; and the engine-simulator timeline against the graded model."""
from __future__ import annotations

import json
import random
from typing import Any

import pytest

from exercises.spec import Quantity
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("reasoning_kv_growth")
EX = ExerciseUnderTest.load(ex)
FOLDER = EX.folder
spec = EX.spec_fixture()


def test_canonical_pool_and_concurrency() -> None:
    s = ex.solve(ex.CANONICAL)
    # 2 x 80 layers x (8/4) heads x 128 x 2 B = 81,920 B per token per GPU.
    assert s["kv_token"] == Quantity(81_920, "B")
    # The engine starts from the driver's 81,090 MiB = 79.19 GiB (the notes: a round 80 GiB), and
    # the canonical keeps 2.5 GiB aside (the notes' 3 GiB leaves 41.14 reservations, too near 41).
    assert s["driver_mib"] == 81_090 and s["requested_gib"] == 71.2705
    assert ex.CANONICAL["other_gib"] == 2.5
    # 0.9 x 79.19 GiB - 70.6e9 / 4 B - 2.5 GiB = 52.33 GiB -> 42,870 blocks of 16 = 685,920 tokens.
    assert s["params_b"] == pytest.approx(70.6)
    assert s["pool_gib"] == pytest.approx(52.33, abs=0.005)
    assert s["pool_blocks"] == 42_870 and s["pool_tokens"].value == 685_920
    # Reserve: 42,870 // ceil(16,500/16) = 42,870 // 1,032 = 41 (41.54).
    assert s["reserve_blocks"] == 1_032 and s["conc_reserve"].value == 41
    # Fixed 8K replies: 685,920 / 4,500 = 152; uniform on [0, 16K]: / (500 + 16,000/3) = 118.
    assert round(s["conc_fixed"]) == 152
    assert round(s["conc_expected"].value) == 118


def test_canonical_preemption_price() -> None:
    s = ex.solve(ex.CANONICAL)
    # 6,500 tokens x 2 x 70.6e9 = 9.18e14 FLOP at 4 x 989.4 TFLOP/s x 0.5: 0.46 s.
    assert s["redo_tokens"] == 6_500
    assert s["redo_flops"] == pytest.approx(9.178e14, rel=1e-3)
    assert s["preempt_s"].value == pytest.approx(0.46, abs=0.005)
    assert s["fp8_preempt_s"] == pytest.approx(0.23, abs=0.005)
    assert s["attn_pct"] == pytest.approx(6.0, abs=0.1)  # "causal attention adds about 6 %"
    assert s["swap_gb"] == pytest.approx(2.13, abs=0.01)  # 6,500 x 320 KiB


@pytest.mark.parametrize(
    ("batch", "ctx", "step_ms", "user", "tps", "answer_s"),
    [
        (16, 4_500, 8.8, 114, 1_821, 70),
        (32, 4_500, 11.0, 91, 2_912, 88),
        (64, 4_500, 15.4, 65, 4_159, 123),
        (128, 4_500, 24.2, 41, 5_291, 194),
        (128, 8_500, 39.8, 25, 3_213, 319),
    ],
)
def test_canonical_per_user_table(batch: int, ctx: int, step_ms: float, user: int, tps: int,
                                  answer_s: int) -> None:
    # The notes' table: t = (70.6 GB + batch x ctx x 320 KiB) / (4 x 3.35 TB/s x 0.8).
    t = ex.step_s(ex.CANONICAL, batch, ctx)
    assert t * 1e3 == pytest.approx(step_ms, abs=0.05)
    assert round(1 / t) == user
    assert batch / t == pytest.approx(tps, abs=1)
    assert 8_000 * t == pytest.approx(answer_s, abs=0.5)
    s = ex.solve(ex.CANONICAL)
    assert f"| {batch} | {ctx:,} | {step_ms:.1f} |" in s["table"]


def test_canonical_trade_off() -> None:
    s = ex.solve(ex.CANONICAL)
    # 64 -> 128: +27 % throughput, -36 % per-user speed, +70 s per answer; late context -39 %.
    assert s["big_batch"] == 128 and s["half_batch"] == 64
    assert round(s["throughput_gain_pct"]) == 27
    assert round(s["user_loss_pct"]) == 36
    assert round(s["extra_answer_s"]) == 70
    assert round(s["late_loss_pct"]) == 39
    assert s["user_tps"].value == pytest.approx(41.3, abs=0.05)


def test_fixed_length_is_the_named_slip() -> None:
    named = {m.name: m for m in ex.mistakes(ex.CANONICAL)}
    assert round(named["fixed_length"].answer) == 152
    assert "P + O_max/3" in named["fixed_length"].feedback


def test_variants_are_sensible_and_render() -> None:
    seen = set()
    for p in EX.variants(200):
        s = ex.solve(p)
        assert s["conc_reserve"].value < s["conc_expected"].value < s["conc_fixed"]
        assert s["user_tps"].value < s["half_user_tps"]
        seen.add(json.dumps(p, sort_keys=True))
    assert len(seen) >= 150


@pytest.mark.parametrize("variant", ["canonical", 0, 1])
def test_timeline_agrees_with_the_graded_model(variant: Any) -> None:
    p = ex.CANONICAL if variant == "canonical" else ex.generate(random.Random(variant))
    s = ex.solve(p)
    data = ex.evidence(p)["timeline"].data
    series = {se["label"]: se["points"] for se in data["series"]}
    reserve = s["conc_reserve"].value
    low = "the cap of part 3 (reserve every maximum)"
    # Capped at the reservation figure: never a preemption, the pool never fills.
    assert series[f"preemptions so far, {low}"][-1][1] == 0
    assert not any(lb.startswith("running requests") for lb in series)  # it would be part 3
    assert max(v for _, v in series[f"KV pool used, {low}"]) < 100
    for label, pts in series.items():
        if label.startswith("KV pool used"):
            assert all(0 <= v <= 100 for _, v in pts)
    # Per-user speed comes from the graded step model: never above the weights-only bound, never
    # below a full batch at the longest context (the series rounds to 0.1 token/s).
    fastest = 1 / ex.step_s(p, 0, 0)
    for cap in (reserve, round(s["conc_fixed"])):
        label = low if cap == reserve else "the larger cap (fixed-length estimate)"
        speeds = [v for _, v in series[f"per-user speed, {label}"]]
        slowest = 1 / ex.step_s(p, cap, p["prompt"] + p["out_max"])
        assert all(0.9 * slowest <= v <= fastest + 0.05 for v in speeds)
    # The larger cap preempts in the canonical variant, as the solution says.
    if variant == "canonical":
        high = "the larger cap (fixed-length estimate)"
        assert series[f"preemptions so far, {high}"][-1][1] > 0
        assert max(v for _, v in series[f"KV pool used, {high}"]) >= 99.9
