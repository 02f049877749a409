"""Q15 (exercises/fused_rope_positions): the canonical numbers, BF16 rounding checked against an
independent bit-level cast, sensible variants, distinct mistakes, and the kernel task's cases.

The kernel itself (reference scores 1, each mutant below 1 and failing its own check) is run by
the selftest in the real sandbox (tests/test_every_exercise.py and selftest.toml)."""
from __future__ import annotations

import math
import struct

import pytest

from exercises.catalog import model
from tests.exercises.support import EXERCISES, ExerciseUnderTest, load_by_path, load_file

ex = load_by_path("fused_rope_positions")
EX = ExerciseUnderTest.load(ex)
PARTS = EX.parts
VARIANTS = EX.variants(200)
spec = EX.spec_fixture()


# task.py needs torch only inside make()/reference(), which get it as an argument.
TASK = load_file(EXERCISES / "fused_rope_positions" / "kernel" / "task.py", "fused_rope_task")


def bf16_by_bits(x: int) -> int:
    """An independent BF16 cast: FP32 bits, round the low 16 to nearest even, keep the high 16."""
    bits = struct.unpack("<I", struct.pack("<f", float(x)))[0]
    bits += 0x7FFF + ((bits >> 16) & 1)
    return int(struct.unpack("<f", struct.pack("<I", (bits >> 16) << 16))[0])


# ---------------------------------------------------------------------------------------------
# Shape


def test_parts_and_tolerances_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    assert s["culprit"] in {o["id"] for o in PARTS["culprit"]["options"]}
    assert PARTS["kernel"]["type"] == "kernel" and s["kernel"] == "kernel/reference.py"


# ---------------------------------------------------------------------------------------------
# The canonical variant reproduces the research notes (facts-q01-q25.md, Q15)


def test_canonical_setting() -> None:
    assert ex.CANONICAL == {"model": "Llama-3.1-8B", "gpu": "H100 SXM", "prefill": 4096,
                            "mfu_pct": 50, "position": 100_000}
    assert ex.is_sensible(ex.CANONICAL)


def test_canonical_numbers() -> None:
    s = ex.solve(ex.CANONICAL)
    # N1: 2 x (4,096 + 1,024) x 2 = 20,480 B per token per layer; 655,360 B over 32 layers.
    assert s["rope_bytes"].value == 20_480
    assert s["rope_bytes_all_layers"] == 655_360
    # N2: 2.68 GB -> 0.80 ms at 3.35 TB/s; 7.02e13 FLOPs -> 142 ms at 50 % MFU; 0.56 %.
    assert s["prefill_gb"] == pytest.approx(2.684, abs=1e-3)
    assert s["rope_ms"] == pytest.approx(0.801, abs=1e-3)
    assert s["flops"] == pytest.approx(7.02e13, rel=1e-3)
    assert s["compute_ms"] == pytest.approx(141.9, abs=0.1)
    assert s["saving_pct"].value == pytest.approx(0.565, abs=1e-3)
    # N3: bf16(100,000) = 99,840; spacing 512 and worst error 256 in [65,536, 131,072).
    assert s["bf16_position"].value == 99_840
    assert (s["binade_lo"], s["binade_hi"], s["spacing"], s["max_error"]) == (
        65_536, 131_072, 512, 256)
    assert s["distinct_in_binade"] == 129
    # N4: 22 of 64 pairs for base 500,000 and head_dim 128.
    assert s["scrambled_pairs"].value == 22 and s["pairs"] == 64
    # Decode: 0.2 µs of bytes against 32 launches (~0.13 ms) of a 4.8 ms step.
    assert s["decode_rope_us"] == pytest.approx(0.196, abs=1e-3)
    assert s["decode_step_ms"] == pytest.approx(4.79, abs=0.01)
    assert s["launches_us"] == 128 and s["decode_tp"] == 1


def test_the_catalog_carries_rope_theta_with_a_source() -> None:
    for name in ex.MODELS:
        m = model(name)
        assert m.rope_theta is not None and m.max_context is not None, name
        assert "rope_theta" in m.source("rope_theta"), name
    assert model("Llama-3.1-8B").rope_theta == 500_000
    assert model("Mixtral-8x7B").rope_theta == 1_000_000
    assert model("Gemma-2-9B").rope_theta == 10_000


# ---------------------------------------------------------------------------------------------
# BF16 rounding


def test_bf16_matches_a_bit_level_cast() -> None:
    for x in [*range(1, 3000), *range(65_000, 67_000), *range(99_000, 101_000), 131_071,
              131_072, 15_962, 50_000]:
        assert ex.bf16(x) == bf16_by_bits(x), x


def test_the_notes_table_of_bf16_position_errors() -> None:
    # facts Q15: 8K-16K spacing 64 (error 32), 16K-32K 128 (64), 32K-64K 256 (128), 64K-128K 512
    # (256); integers exact up to 256; examples 15,962 -> 15,936, 50,000 -> 49,920.
    for lo, step in ((8192, 64), (16_384, 128), (32_768, 256), (65_536, 512)):
        assert ex.spacing(lo, ex.BF16_BITS) == step
        assert max(abs(p - ex.bf16(p)) for p in range(lo, 2 * lo)) == step // 2
    assert all(ex.bf16(p) == p for p in range(1, 257)) and ex.bf16(257) != 257
    assert ex.bf16(15_962) == 15_936 and ex.bf16(50_000) == 49_920
    assert len({ex.bf16(p) for p in range(65_536, 131_072)}) == 129
    # Ties go to the even neighbour: 65,536 + 256 sits halfway between 65,536 and 66,048.
    assert ex.bf16(65_536 + 256) == 65_536 and ex.bf16(65_536 + 768) == 66_560


def test_llama3_rope_scaling_leaves_the_scrambled_pairs_alone() -> None:
    # Llama 3.1 scales only pairs whose wavelength exceeds 8,192 / 4 = 2,048 positions; a pair
    # that 256 positions can turn past pi has a wavelength under 512.
    freqs = ex.inv_freqs(500_000.0, 128)
    scrambled = [f for f in freqs if f * 256 > math.pi]
    assert len(scrambled) == 22
    assert all(2 * math.pi / f < 2048 for f in scrambled)


def test_crossing_formula_agrees_with_the_count() -> None:
    for theta, d, err in ((500_000.0, 128, 256), (1e6, 128, 64), (1e4, 256, 16), (1e4, 128, 8)):
        assert ex.scrambled(theta, d, err) == math.ceil(ex.crossing(theta, d, err))


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied() -> None:
    for p in VARIANTS:
        m = model(p["model"])
        assert m.max_context is not None and m.max_context // 4 <= p["position"] < m.max_context
        if m.sliding_window:
            assert p["prefill"] <= m.sliding_window
    assert len({p["model"] for p in VARIANTS}) == len(ex.MODELS)
    assert len({ex.solve(p)["scrambled_pairs"].value for p in VARIANTS}) >= 5


# ---------------------------------------------------------------------------------------------
# The kernel task (no torch needed for these)


def test_every_label_in_every_checked_mode() -> None:
    labels = {"short positions", "long positions", "ragged tail", "inputs unchanged"}
    for mode in ("preview", "gpu"):
        cases = TASK.cases({}, mode)
        assert {c["label"] for c in cases} == labels, mode
        assert len({c["id"] for c in cases}) == len(cases)
        for c in cases:
            if c["label"] in ("short positions", "ragged tail"):
                assert c["pos_hi"] <= 256  # where a BF16 position is still exact
            if c["label"] == "long positions":
                assert c["pos_lo"] >= 50_000
            if c["label"] == "ragged tail":
                assert c["T"] % 16 and c["T"] % 2
    # The interpreter runs programs one by one: keep each preview launch small.
    assert all(math.ceil(c["T"] / 16) * c["H"] <= 100 for c in TASK.cases({}, "preview"))


def test_tolerance_admits_fp32_angles_and_nothing_near_a_position() -> None:
    for c in TASK.cases({}, "gpu"):
        rtol, atol = TASK.tolerance(c, "out")
        assert rtol == 1e-2
        # At most 0.25 x scale even at 131,071; a one-position error moves pair 0 by 1 rad.
        assert c["scale"] * 0.01 <= atol <= c["scale"] * 0.25


def test_roofline_of_the_4k_prefill() -> None:
    bench = TASK.cases({}, "bench")
    assert {c["label"] for c in bench} == {"bench"}
    c = bench[0]
    r = TASK.roofline(c)
    # Llama-3.1-8B: 40 heads (32 Q + 8 K) of 128, 4,096 tokens, BF16 read + write, int64 ids.
    assert (c["T"], c["H"], c["D"]) == (4096, 40, 128)
    assert r["bytes"] == 2 * 4096 * 40 * 128 * 2 + 4096 * 8
    assert r["flops"] == 3 * 4096 * 40 * 128 + 4096 * 64
    assert "theta 500,000" in TASK.describe(c)
