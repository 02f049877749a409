"""Q25 (exercises/nvl72_boundary): the canonical numbers, sensible variants, distinct mistakes."""
from __future__ import annotations

import json
import math

import pytest

from exercises.catalog import domain, model
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("nvl72_boundary")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()
spec = EX.spec_fixture()


# ---------------------------------------------------------------------------------------------
# The canonical variant reproduces facts-q01-q25.md §Q25


def test_catalog_domains_behind_the_exercise() -> None:
    rack, hgx = domain("GB200 NVL72"), domain("HGX H100")
    assert rack.gpus == 72 and rack.gpu == "B200 (GB200 NVL72)" and hgx.gpus == 8
    # 13.39 TB of HBM: 72 x 186 GB.
    assert rack.hbm_bytes == pytest.approx(13.392e12)


def test_canonical_numbers() -> None:
    s = ex.solve(ex.CANONICAL)
    # 900 / 50 = 18x per direction on the rack; 450 / 50 = 9x on HGX H100.
    assert s["link_ratio"].value == 18 and s["before_ratio"] == 9
    # 256 routed + 32 redundant = 288 slots = exactly 4 per GPU over 72.
    assert s["slots"] == 288 and s["experts_per_gpu"].value == 4
    # 128 tokens x 10,081,792 B = 1.29 GB per GPU per step: 25.8 ms over the NIC, 1.43 ms on NVLink.
    assert s["gpu_step_gb"] == pytest.approx(1.2905, abs=1e-4)
    assert s["ep_nic_ms"] == pytest.approx(25.8, abs=0.05)
    assert s["ep_step"].value == pytest.approx(1.43, abs=0.005)
    # Llama-3.1-70B TP8, 8K prompt: 335.5 MB per GPU -> 6.7 ms over the NIC, 0.37 ms on NVLink.
    assert s["shard_mb"] == pytest.approx(335.5, abs=0.05)
    assert s["kv_nic_ms"] == pytest.approx(6.71, abs=0.005)
    assert s["kv_handoff"].value == pytest.approx(0.373, abs=0.0005)
    # Llama-3.1-405B at 128K = 67.6 GB per sequence; ~190 fit after FP8 weights (191.97 -> 191).
    assert s["seq_gb"] == pytest.approx(67.65, abs=0.01)
    assert s["long_ctx"].value == 191 and s["fits_exact"] == pytest.approx(191.97, abs=0.01)
    # Appendix E point 10: EP placement, not an even spread, gives roughly 27-29 GB per GPU.
    assert 25 < s["gpu_weights_gb"] < 30


def test_ep_bytes_match_the_q21_formula() -> None:
    m = model("DeepSeek-V3")
    assert ex.ep_bytes_per_token_step(m.hidden, m.experts_per_token, m.moe_layers) == 10_081_792


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied() -> None:
    seen: dict[str, set] = {k: set() for k in ("before", "ep_group", "kv_model", "long_model")}
    for p in VARIANTS:
        s = ex.solve(p)
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value > 0
        assert s["experts_per_gpu"].value == s["slots"] / p["ep_group"]
        assert s["ep_step"].value < s["ep_nic_ms"] and s["kv_handoff"].value < s["kv_nic_ms"]
        for key in seen:
            seen[key].add(p[key])
    assert seen["before"] == set(ex.BEFORE_DOMAINS) and seen["ep_group"] == set(ex.EP_GROUPS)
    assert len(seen["kv_model"]) >= 3 and seen["long_model"] == set(ex.LONG_MODELS)
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150


def test_long_ctx_tolerance_admits_no_listed_slip_and_both_roundings() -> None:
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        ref = s["long_ctx"].value
        assert abs(round(s["fits_exact"]) - ref) <= EX.tol("long_ctx") * ref


# ---------------------------------------------------------------------------------------------
# Templates and graders

GIVENS = {"rack", "rack_gpus", "rack_gpu", "rack_nic", "rack_nvlink_gbs", "rack_hbm_gb",
          "nic_gbit", "before_gpus", "before_gpu", "before_nic", "before_nvlink_gbs",
          "before_nic_gbit", "hidden", "topk", "experts", "moe_layers", "per_token_bytes",
          "kv_layers", "kv_heads", "kv_head_dim", "long_layers", "long_kv_heads", "long_head_dim",
          "long_params_b", "long_kv_dtype"}


def test_statement_shows_only_givens() -> None:
    EX.assert_statement_shows_only_givens(GIVENS)


def test_canonical_solution_quotes_the_notes_figures() -> None:
    EX.assert_solution_quotes([
        "18×", "9×", "288", "4 per GPU", "25.8 ms", "1.43 ms", "6.71 ms", "0.373 ms", "67.6 GB",
        "191 sequences", "13.392 TB"
    ])


