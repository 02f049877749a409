"""Q31 (exercises/capacity_cost_split): capacities per phase, replica-seconds, a ceiling, dollars,
and the prompt as two thirds of the bill."""
from __future__ import annotations

import math

import pytest

from exercises import templating
from exercises.catalog import gpu
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("capacity_cost_split")
EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants()
spec = EX.spec_fixture()


def test_canonical_states_its_price_and_ceiling():
    p = ex.CANONICAL
    assert (p["model"], p["gpu"], p["tp"], p["precision"]) == ("Llama-3.1-70B", "H100 SXM", 8, "FP8")
    assert (p["rate"], p["prompt"], p["output"]) == (40, 2500, 500)
    assert p["gpu_hour_usd"] == 2.5 and p["ceiling"] == 0.7 and p["mfu"] == 0.4
    statement = (EX.folder / "statement.md").read_text(encoding="utf-8")
    assert "{{ p.gpu_hour_usd:.2f }}" in statement and "{{ s.ceiling_pct:.0f }}" in statement


# ---------------------------------------------------------------------------------------------
# The canonical variant: facts-q26-q49 §Q31


def test_canonical_capacities():
    s = ex.solve(ex.CANONICAL)
    # 8 x 1,978.9e12 x 0.4 / (2 x 70.55e9) = 44,879 tok/s (notes: 44,850 with P = 70.6 B).
    assert s["prefill_capacity"].value == pytest.approx(44_879, abs=1)
    # Pool, from the total the driver reports (what vLLM multiplies by gpu_memory_utilization):
    # 8 x (0.9 x 81,090 MiB - 3 GiB) - 70.6 GB = 516 GB; batch floor(516e9 / (3,000 x
    # 327,680)) = 524; step (70.6e9 + 524 x 2,750 x 327,680) / (8 x 3.35e12 x 0.75) = 27.0 ms;
    # 524 / 27.00 ms = 19,404 tok/s (notes: 531, 27.3 ms, 19,440 on an 80 GiB reading; nvidia-smi's
    # 81,559 MiB would give 519 GB, 527, 19,419).
    h100 = gpu("H100 SXM")
    assert h100.hbm_driver_total_mib == 81_090 and s["driver_mib"] == 81_090
    assert s["weights_gb"] == 70.6 and s["pool_gb"] == 516
    assert s["batch"] == 524
    assert s["step_ms"] == pytest.approx(27.00, abs=0.01)
    assert s["decode_capacity"].value == pytest.approx(19_404, abs=1)


def test_canonical_fleet_share_and_prices():
    s = ex.solve(ex.CANONICAL)
    # Demand: 100,000 / 44,879 = 2.228 and 20,000 / 19,404 = 1.031 replica-seconds per second.
    assert s["rs_prefill"] == pytest.approx(2.228, abs=5e-4)
    assert s["rs_decode"] == pytest.approx(1.031, abs=5e-4)
    # 3.259 / 0.7 = 4.66 -> 5 replicas = 40 GPUs = $100 per hour.
    assert s["replicas_exact"] == pytest.approx(4.656, abs=5e-4)
    assert s["replicas"].value == 5 and s["gpus"] == 40 and s["bill_h"] == 100
    # The prompt is two thirds of the bill: 2.228 / 3.259 = 68.4 %.
    assert s["prefill_share"].value == pytest.approx(68.4, abs=0.05)
    # $68.37/h over 360 M input tokens = $0.190 per 1M; $31.63/h over 72 M = $0.439 per 1M.
    assert s["price_in"].value == pytest.approx(0.190, abs=5e-4)
    assert s["price_out"].value == pytest.approx(0.439, abs=5e-4)
    # Priced at full capacity instead (notes, Appendix C point 9): $0.12 and $0.29 per 1M.
    assert s["full_in"] == pytest.approx(0.124, abs=5e-4)
    assert s["full_out"] == pytest.approx(0.286, abs=5e-4)
    assert s["per_request_usd"] == pytest.approx(0.000694, abs=1e-6)
    # A 50 % prefix-cache hit rate: 1.11 + 1.03 = 2.14 -> 3.06 -> 4 replicas.
    assert s["cached_rs"] == pytest.approx(2.145, abs=5e-4) and s["cached_replicas"] == 4
    assert s["levers"] == list(ex.PREFILL_LEVERS)


def test_bill_splits_exactly_into_the_two_prices():
    for p in [ex.CANONICAL, *VARIANTS[:50]]:
        s = ex.solve(p)
        hourly = (s["price_in"].value * s["prefill_demand"]
                  + s["price_out"].value * s["decode_demand"]) * 3600 / 1e6
        assert hourly == pytest.approx(s["bill_h"])


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied():
    sides, deployments = set(), set()
    for p in VARIANTS:
        s = ex.solve(p)
        assert s["step_ms"] <= p["tpot_ms"] and s["batch"] >= 16
        assert s["replicas"].value == math.ceil(s["rs_total"] / p["ceiling"])
        assert s["replicas"].value * p["ceiling"] >= s["rs_total"]
        sides.add(tuple(s["levers"]))
        deployments.add((p["model"], p["gpu"], p["tp"], p["precision"]))
    assert sides == {ex.PREFILL_LEVERS, ex.DECODE_LEVERS}
    assert len(deployments) >= 10


def test_templates_render_for_every_variant():
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        text = templating.render(EX.spec().statement_template, p, s)
        assert p["model"] in text and "nan" not in text.lower().split()
        templating.render(EX.spec().solution_template, p, s)


