"""Q16 (exercises/l2_kv_pinning): the canonical numbers, sensible variants, distinct mistakes."""
from __future__ import annotations

import json
import math

import pytest

from exercises.spec import Quantity
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("l2_kv_pinning")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
VARIANTS = EX.variants(200)


def test_canonical_is_the_notes_setting():
    p = ex.CANONICAL
    # Research notes Q16 and Appendix E point 11: batch 64 at 4K context, 2,048-token prefix.
    assert (p["model"], p["gpu"], p["batch"], p["context"], p["prefix"]) == (
        "Llama-3.1-8B", "H100 SXM", 64, 4096, 2048)


def test_canonical_numbers():
    s = ex.solve(ex.CANONICAL)
    # Weights streamed: (8,030,261,248 - 128,256 x 4,096) x 2 B = 15,009,849,344 B. KV:
    # 64 x 4,096 x 131,072 = 34,359,738,368 B. Step 49,369,587,712 B. (The notes' 50.4 GB also
    # streams the input embedding table, 1.05 GB, which a lookup does not read.)
    assert s["step_gb"].value * 1e9 == pytest.approx(49_369_587_712)
    assert s["step_ms"] == pytest.approx(14.737, abs=1e-3)
    # Set-aside 75 % of 50 MiB = 37.5 MiB = 39,321,600 B (the notes' 39.3 MB): 0.0796 % of the step.
    assert s["setaside_bytes"] == 39_321_600
    assert s["setaside_pct"].value == pytest.approx(0.0796, abs=1e-4)
    assert s["setaside_saving_us"] == pytest.approx(11.7, abs=0.1)  # the notes' "~12 us"
    # One layer's prefix: 2,048 x 4,096 B = 8,388,608 B = 8.39 MB (the notes' figure, exact).
    assert s["prefix_layer_bytes"] == 8_388_608
    assert s["prefix_layer_mb"].value == pytest.approx(8.388608)
    # Redundant reads: 63 x 2,048 x 131,072 = 16,911,433,728 B = 16.9 GB (the notes' figure).
    assert s["redundant_gb"].value * 1e9 == pytest.approx(16_911_433_728)
    # / 3.35 TB/s = 5.05 ms (the notes' "~5 ms of 15 ms"); 34 % of the step.
    assert s["redundant_ms"].value == pytest.approx(5.048, abs=1e-3)
    assert s["redundant_share_pct"] == pytest.approx(34.25, abs=0.01)
    assert s["where_pays"] == "prefix_layer"


def test_the_lesson_holds_in_every_variant():
    for p in VARIANTS:
        s = ex.solve(p)
        # What fits is tiny against the step; one layer's prefix fits; all layers' prefix does not.
        assert s["setaside_pct"].value < 1
        assert s["prefix_layer_bytes"] <= s["setaside_bytes"]
        assert s["prefix_all_over_setaside"] > 1
        assert s["redundant_share_pct"] >= 10
        for pid in NUMBER_PARTS:
            assert math.isfinite(s[pid].value) and s[pid].value > 0


def test_variants_are_drawn_from_the_catalog_and_the_stated_ranges():
    seen: dict[str, set] = {"model": set(), "gpu": set(), "setaside_pct": set()}
    for p in VARIANTS:
        assert p["model"] in ex.MODELS and p["gpu"] in ex.GPUS
        assert p["batch"] in ex.BATCHES and p["context"] in ex.CONTEXTS
        assert p["prefix"] in ex.PREFIXES and p["context"] - p["prefix"] >= 512
        for k in seen:
            seen[k].add(p[k])
    assert seen["model"] == set(ex.MODELS) and seen["gpu"] == set(ex.GPUS)
    assert seen["setaside_pct"] == set(ex.SETASIDE_PCTS)


def test_mistakes_are_distinct_from_the_reference_and_named():
    options = {o["id"] for o in PARTS["where_pays"]["options"]}
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        ms = ex.mistakes(p)
        wrong = {m.answer for m in ms if m.part == "where_pays"}
        assert wrong == options - {s["where_pays"]}


STATEMENT_GIVENS = {"layers", "hidden", "q_heads", "kv_heads", "head_dim", "vocab", "params",
                    "hbm_gb", "hbm_tbps", "l2_mib", "attention_kind"}


def test_statement_shows_only_givens():
    EX.assert_statement_shows_only_givens(STATEMENT_GIVENS)


def test_canonical_solution_quotes_the_numbers():
    EX.assert_solution_quotes([
        "49.37 GB", "0.080 %", "37.5 MiB", "8.39 MB", "16.91 GB", "5.05 ms", "34 %", "12 µs"
    ])


def test_answers_survive_a_json_round_trip():
    for p in VARIANTS[:30]:
        again = ex.solve(json.loads(json.dumps(p)))
        s = ex.solve(p)
        for pid in NUMBER_PARTS:
            assert isinstance(again[pid], Quantity) and again[pid] == s[pid]
