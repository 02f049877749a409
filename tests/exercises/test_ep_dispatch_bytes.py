"""Q21 (exercises/ep_dispatch_bytes): the canonical numbers, sensible variants, distinct mistakes."""
from __future__ import annotations

import json
import math
import random

import pytest

from exercises.catalog import model
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("ep_dispatch_bytes")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants()
spec = EX.spec_fixture()


# ---------------------------------------------------------------------------------------------
# The canonical variant reproduces facts-q01-q25.md §Q21


def test_canonical_is_deepseek_ep144() -> None:
    p = ex.CANONICAL
    assert (p["model"], p["nodes"], p["node_limit"], p["scale_group"]) == ("DeepSeek-V3", 18, 4, 128)
    m = model("DeepSeek-V3")
    # The catalog's config: hidden 7168, top-8, 61 layers of which 3 dense -> 58 MoE layers.
    assert (m.hidden, m.experts_per_token, m.layers, m.moe_layers) == (7168, 8, 61, 58)


def test_canonical_numbers() -> None:
    s = ex.solve(ex.CANONICAL)
    # 7,168 FP8 bytes + 7,168/128 = 56 FP32 scales (224 B) = 7,392 B; BF16 combine 14,336 B.
    assert s["dispatch_copy"].value == 7392 and s["combine_copy"] == 14_336
    # 8 x (7,392 + 14,336) = 173,824 B per MoE layer; x 58 = 10,081,792 B per token per step.
    assert s["per_layer_bytes"] == 173_824
    assert s["per_step_bytes"] == 10_081_792
    assert s["per_step"].value == pytest.approx(10.081792)
    # Uniform over 18 nodes: 17/18 crosses the NIC = 9.52 MB; NVLink 7/144 = 0.49 MB.
    assert s["nic_share"].value == pytest.approx(9.52, abs=0.005)
    assert s["nvlink_mb"] == pytest.approx(0.49, abs=0.005)
    # Node-limited: 58 x 4 x 21,728 = 5,040,896 B, exactly half of 10,081,792 (-50 %).
    assert s["bound_bytes"] == 5_040_896 and s["saving_pct"] == 50.0
    # 13.3 MB if both directions were BF16.
    assert s["bf16_both_mb"] == pytest.approx(13.3, abs=0.05)
    # 128 tokens x 9.52 MB / 50 GB/s = 24.4 ms; with every copy remote 128 x 10.08 MB = 1.29 GB
    # -> 25.8 ms (the figure Q25 compares with NVLink).
    assert s["nic_time"].value == pytest.approx(24.38, abs=0.01)
    assert 128 * s["per_step_bytes"] / 50e9 * 1e3 == pytest.approx(25.81, abs=0.01)


def test_notes_table_of_nic_and_nvlink_shares() -> None:
    # facts §Q21 table: nodes -> (NIC MB, NVLink MB) per token per step.
    table = {2: (5.04, 4.41), 4: (7.56, 2.21), 8: (8.82, 1.10), 18: (9.52, 0.49)}
    for nodes, (nic_mb, nvl_mb) in table.items():
        s = ex.solve(dict(ex.CANONICAL, nodes=nodes))
        assert s["nic_share"].value == pytest.approx(nic_mb, abs=0.006)
        assert s["nvlink_mb"] == pytest.approx(nvl_mb, abs=0.006)


# ---------------------------------------------------------------------------------------------
# Variants


def test_variants_are_sensible_and_varied() -> None:
    seen: dict[str, set] = {"model": set(), "domain": set(), "node_limit": set(), "tokens": set()}
    for p in VARIANTS:
        s = ex.solve(p)
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value > 0
        # The story holds: the NIC carries most of it, and the bound is below per-expert sending.
        assert s["nic_share"].value > s["node_limited"].value
        assert s["nic_share"].value > 0.7 * s["per_step"].value
        seen["model"].add(p["model"])
        seen["domain"].add(p["domain"])
        seen["node_limit"].add(p["node_limit"])
        seen["tokens"].add(p["tokens_per_gpu"])
    assert seen["model"] == set(ex.MODELS) and seen["domain"] == set(ex.DOMAINS)
    # M is DeepSeek-V3's own topk_group, not a free draw (a router the model does not have).
    assert seen["node_limit"] == {4} and seen["tokens"] == set(ex.TOKENS_PER_GPU)
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150


def test_generate_is_deterministic() -> None:
    assert ex.generate(random.Random(7)) == ex.generate(random.Random(7))


def test_dispatch_copy_is_an_integer_count() -> None:
    for p in VARIANTS:
        value = ex.solve(p)["dispatch_copy"].value
        assert isinstance(value, int)


# ---------------------------------------------------------------------------------------------
# Templates and graders

GIVENS = {"hidden", "topk", "layer_desc", "shared_desc", "experts", "gpn",
          "gpus", "nic_name", "nic_gbit"}


def test_statement_shows_only_givens() -> None:
    EX.assert_statement_shows_only_givens(GIVENS)


def test_canonical_solution_quotes_the_notes_figures() -> None:
    EX.assert_solution_quotes([
        "7,392 B", "14,336", "173,824", "10,081,792", "10.08 MB", "9.52", "0.49", "5,040,896",
        "5.04 MB", "50 %", "13.3 MB", "24.4 ms"
    ])


