"""Q24 (exercises/tp_vs_pp_405b): TP8 vs TP4 x PP2 for Llama-3.1-405B on one node, the canonical
figures of the research notes, and varied variants whose mistakes stay distinct."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from exercises.catalog import domain, model
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("tp_vs_pp_405b")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS = EX.folder, EX.parts
VARIANTS = EX.variants()
spec = EX.spec_fixture()


# --- the canonical variant: research notes facts-q01-q25 §Q24 -----------------------------------


def test_canonical_is_the_notes_setting() -> None:
    p = ex.CANONICAL
    assert p["node"] == "HGX H100" and ex.is_sensible(p)
    assert domain(p["node"]).gpus == 8


def test_canonical_numbers() -> None:
    s = ex.solve(ex.CANONICAL)
    # 2 all-reduces (attention out, MLP down) x 126 layers.
    assert s["allreduces"].value == 252
    # TP8: 2 x 126 layers x 1 head x 128 x 2 B; TP4 x PP2: 2 x 63 x 2 x 128 x 2 B.
    assert s["kv_gpu"].value == 64_512 == 2 * 126 * 1 * 128 * 2 == 2 * 63 * 2 * 128 * 2
    # FP8 405.85 GB / 8 = 50.73 GB per GPU; / 3.35 TB/s = 15.1 ms; two serial stages 30.3 ms.
    assert s["per_gpu_gb"] == pytest.approx(50.73, abs=0.01)
    assert s["tp8_ms"].value == pytest.approx(15.14, abs=0.01)
    assert s["pp_ms"].value == pytest.approx(30.29, abs=0.01)
    assert s["pp_ms"].value == pytest.approx(2 * s["tp8_ms"].value)
    # BF16 811.7 GB > 8 x 80 GB = 640 GB; FP8 fits with the KV budget, BF16 does not.
    assert s["bf16_gb"].value == pytest.approx(811.7, abs=0.05)
    assert s["node_gb"] == 640
    assert s["forcing"] == "bf16"
    # 252 all-reduces at 10 us = 2.52 ms on top of the TP8 floor (notes: 16.4-18.9 ms at 5-15 us).
    assert s["ar_ms"] == pytest.approx(2.52)
    assert 16.4 <= s["tp8_total_ms"] <= 18.9
    # 32 KiB per all-reduce at batch 1; TP8 would lose only at ~60 us more per all-reduce.
    assert s["ar_msg_bytes"] == 32_768
    assert s["breakeven_us"] == pytest.approx(60.1, abs=0.1)
    # Two nodes of H100 in BF16 (TP8 x PP2): 50.7 GB per GPU again, 32,256 B of KV per token.
    assert s["two_node_per_gpu_gb"] == pytest.approx(s["per_gpu_gb"])
    assert s["two_node_kv"] == 32_256


def test_the_forcing_is_gpu_specific() -> None:
    # BF16 405B overflows eight H100s but fits eight H200s or B200s (notes: 101.5 GB per GPU).
    bf16 = model("Llama-3.1-405B").weight_bytes(2)
    assert bf16 > domain("HGX H100").hbm_bytes
    assert bf16 < domain("HGX H200").hbm_bytes < domain("HGX B200").hbm_bytes
    small_kv = dict(ex.CANONICAL, requests=8, context=2048)
    assert ex.solve(dict(small_kv, node="HGX H200"))["forcing"] == "neither"
    assert ex.solve(dict(small_kv, node="HGX H100"))["forcing"] == "bf16"
    assert ex.solve(dict(ex.CANONICAL, requests=64))["forcing"] == "both"


# --- variants --------------------------------------------------------------------------------


def test_variants_are_sensible_varied_and_json_safe() -> None:
    answers = Counter()
    for p in VARIANTS:
        assert p["node"] in ex.NODES and p["ar_us"] in ex.AR_US
        s = ex.solve(p)
        answers[s["forcing"]] += 1
        assert s["allreduces"].value == 252 and s["kv_gpu"].value == 64_512
        assert s["need_bf16_gb"] <= 2 * s["node_gb"]
    # Every real answer of the judgement occurs, so it cannot be guessed from the exercise alone.
    assert set(answers) == {"bf16", "both", "neither"}
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150


def test_mistakes_are_distinct_from_the_reference_and_named() -> None:
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        ms = ex.mistakes(p)
        forcing = [m.answer for m in ms if m.part == "forcing"]
        assert sorted(forcing) == sorted({"bf16", "fp8", "both", "neither"} - {s["forcing"]})


@pytest.mark.parametrize("which", ["statement.md", "solution.md"])
def test_templates_render_for_every_variant(which: str) -> None:
    for text in EX.rendered(which, VARIANTS):
        # No negative quantity slips into the prose (e.g. "memory left" on a node that overflows).
        assert "{{" not in text and not re.search(r"\s-\d", text)


def test_canonical_solution_quotes_the_notes_numbers() -> None:
    EX.assert_solution_quotes([
        "**252 all-reduces", "**64,512 B**", "**15.1 ms**", "**30.3 ms**", "**811.7 GB**", "640 GB",
        "50.73 GB per GPU"
    ])
