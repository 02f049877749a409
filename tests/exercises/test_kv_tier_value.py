"""Q09 (exercises/kv_tier_value): each KV tier is worth the recompute it avoids minus the fetch it
costs; the flash tier that should not exist for a small model; the SSD that wears out in a week."""
from __future__ import annotations

import math

import pytest

from exercises import templating
from exercises.catalog import drive
from tests.exercises.support import ExerciseUnderTest, close, load_by_path

ex = load_by_path("kv_tier_value")
EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants()
spec = EX.spec_fixture()


# ---------------------------------------------------------------------------------------------
# The canonical variant (facts-q01-q25 §Q09, with the catalog drive's 6.8 GB/s read)


def test_canonical_tier_values():
    s = ex.solve(ex.CANONICAL)
    # Recompute: 2 x 70.55e9 / (8 x 989.4e12 x 0.5) = 35.65 us; DRAM fetch 327,680 / 400 GB/s =
    # 0.82 us; the notes' 34.8 us saved.
    assert s["big_recompute_us"] == pytest.approx(35.65, abs=0.01)
    assert s["big_dram_fetch_us"] == pytest.approx(0.819, abs=0.001)
    assert s["dram_value"].value == pytest.approx(34.84, abs=0.01)
    # One drive at 6.8 GB/s: 48.19 us fetch, so the tier loses 12.5 us per token. (The notes use a
    # generic 7 GB/s drive and get 46.8 us and -11.2 us; the catalog's Micron 7450 reads 6.8.)
    assert s["big_local_fetch_us"] == pytest.approx(48.19, abs=0.01)
    assert s["nvme_value"].value == pytest.approx(-12.53, abs=0.01)
    # Small model on one H100: recompute 32.5 us, DRAM 2.6 us (wins), the shared drive 154 us.
    assert s["small_recompute_us"] == pytest.approx(32.5, abs=0.05)
    assert s["pairs"]["small_dram"]["fetch_us"] == pytest.approx(2.62, abs=0.01)
    assert s["small_local_fetch_us"] == pytest.approx(154.2, abs=0.1)
    assert s["tiers"] == ["big_dram", "big_shared", "small_dram"]


def test_canonical_break_even_and_drive_count():
    s = ex.solve(ex.CANONICAL)
    # Break-even per GPU = kappa F MFU / (2P): 1.15 GB/s (70B), 4.04 GB/s (8B), as in Q08.
    assert s["be_big_gbs"] == pytest.approx(1.149, abs=5e-4)
    assert s["be_small_gbs"] == pytest.approx(4.037, abs=5e-4)
    # The small model's node needs 8 x 4.04 = 32.3 GB/s: 4.75 drives, so 5. The big one needs 2.
    assert s["drives_needed_exact"] == pytest.approx(4.75, abs=0.005)
    assert s["drives_small"].value == 5 and s["drives_big"] == 2


def test_canonical_ssd_wears_out_in_a_week():
    s = ex.solve(ex.CANONICAL)
    d = drive(ex.CANONICAL["drive"])
    # TBW = 3.84 TB x 1 DWPD x 365 x 5 = 7,008 TB.
    assert d.tbw_bytes == pytest.approx(7.008e15)
    # The node emits 8 x 1.149 = 9.19 GB/s, over the drive's 5.6 GB/s ceiling: 483.8 TB/day,
    # 14.5 days at WAF 1 and 7.2 days at WAF 2, "the SSD that wears out in a week".
    assert s["emit_node_gbs"] == pytest.approx(9.19, abs=0.005)
    assert s["saturated"] and s["per_drive_gbs"] == 5.6
    assert s["tb_per_day"] == pytest.approx(483.84)
    assert s["days_waf1"] == pytest.approx(14.48, abs=0.005)
    assert s["ssd_days"].value == pytest.approx(7.24, abs=0.005)


def test_value_is_positive_exactly_when_per_gpu_bandwidth_beats_break_even():
    for p in [ex.CANONICAL, *VARIANTS[:50]]:
        s = ex.solve(p)
        per_gpu = {"dram": s["host_gbs"], "local": s["local_per_gpu_gbs"],
                   "shared": s["shared_per_gpu_gbs"]}
        for pid, pair in s["pairs"].items():
            who, tier = pid.split("_")
            be = s["be_big_gbs"] if who == "big" else s["be_small_gbs"]
            assert (pair["value_us"] > 0) == (per_gpu[tier] > be), (pid, p)


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied():
    tier_sets, gpus, drives = set(), set(), set()
    for p in VARIANTS:
        s = ex.solve(p)
        tier_sets.add(tuple(s["tiers"]))
        gpus.add(p["gpu"])
        drives.add(p["drive"])
        assert "small_local" not in s["tiers"]  # the tier that should not exist, by construction
        assert {"big_dram", "small_dram"} <= set(s["tiers"])
        assert s["drives_small"].value > p["drives"]
        assert 0 < s["ssd_days"].value < 120
        assert s["per_drive_gbs"] <= drive(p["drive"]).seq_write_gb_per_s
    assert len(tier_sets) >= 4
    assert gpus == set(ex.GPUS) and drives == set(ex.DRIVES)


def test_mistakes_of_the_signed_tier_values_are_distinct():
    # The two tier values are signed (a reversed sign is a listed mistake); the contract test
    # (test_contract.py) checks the parts whose answers are positive.
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        ms = ex.mistakes(p)
        for pid in ("dram_value", "nvme_value"):
            tol, ref = EX.tol(pid), s[pid].value
            mine = sorted(float(m.answer) for m in ms if m.part == pid)
            assert len(mine) >= 2
            for v in mine:
                assert math.isfinite(v) and not close(v, ref, tol), (pid, v, ref, p)
            for a, b in zip(mine, mine[1:], strict=False):
                assert not close(a, b, tol) and not close(b, a, tol), (pid, a, b, p)


def test_templates_render_for_every_variant():
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        text = templating.render(EX.spec().statement_template, p, s)
        assert p["drive"] in text and "nan" not in text.lower().split()
        templating.render(EX.spec().solution_template, p, s)


