"""Q35 (exercises/stream_stutter): the canonical numbers, the evidence, and sensible variants."""
from __future__ import annotations

import json
import re
import statistics

import pytest

from exercises import registry
from exercises.catalog import gpu
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("stream_stutter")
EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants()
spec = EX.spec_fixture()


def test_choice_options_are_the_modules():
    assert tuple(o["id"] for o in EX.parts["bimodal_cause"]["options"]) == ex.CAUSE_OPTIONS
    assert tuple(o["id"] for o in EX.parts["metric"]["options"]) == ex.METRIC_OPTIONS


def test_canonical_numbers():
    p = ex.CANONICAL
    assert (p["model"], p["precision"], p["gpu"], p["tp"], p["batch"], p["context"]) == (
        "Llama-3.1-70B", "FP8", "H100 SXM", 4, 64, 3000)
    s = ex.solve(p)
    # Weights 70.55e9 x 1 B / 4 = 17.64 GB; KV 64 x 3,000 x 81,920 B = 15.73 GB (notes).
    assert s["weights_gpu_gb"] == pytest.approx(17.64, abs=0.01)
    assert s["kv_gpu_gb"] == pytest.approx(15.73, abs=0.01)
    # 33.37 GB / (3.35 TB/s x 0.8) = 12.45 ms (notes: 12.5); + 160 x 13.5 us = 2.16 ms -> 14.6 ms.
    assert s["t_mem_ms"] == pytest.approx(12.45, abs=0.01)
    assert s["t_comm_ms"] == pytest.approx(2.16)
    assert s["t_dec"].value == pytest.approx(14.61, abs=0.01)
    # 2 x 70.55e9 x 2,048 / 4 = 7.22e13 FLOP / (1,978.9e12 x 0.5) = 73.0 ms -> t_mix 87.6 ms.
    assert s["t_chunk_ms"] == pytest.approx(73.0, abs=0.05)
    assert s["t_mix"].value == pytest.approx(87.6, abs=0.05)
    # 4,000 prompt tok/s / 2,048 = 1.95 mixed steps/s against 56.7 plain ones: 3.3 % (notes).
    assert s["mixed_per_s"] == pytest.approx(1.953, abs=0.001)
    assert s["fast_per_s"] == pytest.approx(56.73, abs=0.01)
    assert s["slow_share"].value == pytest.approx(3.33, abs=0.01)
    # More than 1 % of gaps are slow, so p99 ITL is the mixed step and p50 the plain one.
    assert s["p99_ms"] == s["t_mix"].value and s["p50_ms"] == s["t_dec"].value
    assert (s["bimodal_cause"], s["metric"]) == ("prefill_chunks", "preemptions")


def test_every_variant_is_sensible_and_bimodal():
    for p in VARIANTS:
        s = ex.solve(p)
        assert s["t_mix"].value >= 2.5 * s["t_dec"].value
        assert 1.5 <= s["slow_share"].value <= 25
        assert s["p99_ms"] == s["t_mix"].value
        assert s["hbm_per_gpu_gb"] <= 0.85 * gpu(p["gpu"]).hbm_gb
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) >= 150
    assert {p["gpu"] for p in VARIANTS} == set(ex.GPUS)
    assert {p["tp"] for p in VARIANTS} >= {1, 2, 4, 8}


def test_one_gpu_has_no_communication():
    p = next(v for v in VARIANTS if v["tp"] == 1)
    s = ex.solve(p)
    assert s["allreduces"] == 0 and s["t_comm_ms"] == 0
    assert s["t_dec"].value == pytest.approx(s["t_mem_ms"])


def test_evidence_matches_the_parts():
    for p in [ex.CANONICAL, *VARIANTS[:20]]:
        s = ex.solve(p)
        ev = ex.evidence(p)["itl"]
        body = json.loads(registry.evidence_bytes(ev))
        gaps = [y for _, y in body["series"][0]["points"]]
        slow = [g for g in gaps if g > (s["t_dec"].value + s["t_mix"].value) / 2]
        fast = [g for g in gaps if g <= (s["t_dec"].value + s["t_mix"].value) / 2]
        # Two peaks: the plain and the mixed step, each scattered by up to ex.SCATTER around
        # parts 1 and 2 and centred on them, the slow one in the share part 3 asks for.
        for mode, centre in ((fast, s["t_dec"].value), (slow, s["t_mix"].value)):
            assert all(abs(g / centre - 1) <= ex.SCATTER + 1e-3 for g in mode)
            assert statistics.median(mode) == pytest.approx(centre, rel=2e-3)
        assert len(slow) / len(gaps) == pytest.approx(s["slow_share"].value / 100, rel=0.3, abs=0.01)
        # The landmarks are ends of the spreads, not the step times (evidence_leaks).
        for g in (gaps[0], gaps[-1], min(gaps), max(gaps)):
            assert min(abs(g / c - 1) for c in (s["t_dec"].value, s["t_mix"].value)) > 0.04
        assert ex.evidence(p)["itl"].data == ev.data  # deterministic


def test_the_statement_shows_only_givens():
    used = set(re.findall(r"\{\{\s*s\.(\w+)", (EX.folder / "statement.md").read_text()))
    assert used <= {"tp_text", "comm_text", "params", "layers", "kv_heads", "head_dim",
                    "kv_heads_per_gpu", "hbm_gb", "hbm_tbps", "rate_tflops", "weight_bytes",
                    "eta_pct", "mfu_pct"}, used


