"""Q01 (exercises/physics_or_marketing): the canonical numbers, and sensible variants."""
from __future__ import annotations

import math
import re

import pytest

from exercises import templating
from exercises.spec import Quantity
from tests.exercises.support import ExerciseUnderTest, load_by_path

ex = load_by_path("physics_or_marketing")
EX = ExerciseUnderTest.load(ex)
VARIANTS = EX.variants()
spec = EX.spec_fixture()


def test_parts_and_tolerances_agree_with_the_module():
    s = ex.solve(ex.CANONICAL)
    options = [o["id"] for o in EX.parts["conditions"]["options"]]
    assert tuple(options) == ex.OPTIONS
    assert set(s["conditions"]) <= set(options)


def test_canonical_is_the_notes_setting():
    p = ex.CANONICAL
    assert (p["model"], p["precision"], p["gpu"], p["claim"]) == (
        "Llama-3.1-70B", "FP8", "H100 SXM", 400)


def test_canonical_numbers():
    s = ex.solve(ex.CANONICAL)
    # 3.35e12 B/s / (70,553,706,496 params x 1 B) = 47.48 tok/s (notes: 47.5).
    assert s["ceiling"].value == pytest.approx(47.48, abs=0.01)
    # 400 / 47.48 = 8.42x short (notes: 8.4x).
    assert s["gap"] == pytest.approx(8.42, abs=0.01)
    # B >= 400 x 70.55e9 / (3.35e12 - 400 x 1,024 x 327,680) = 8.78 -> 9 users (notes: >= 9).
    assert s["users_exact"] == pytest.approx(8.776, abs=0.001)
    assert s["users_needed"].value == 9
    # TP8 without communication: 8 x 47.48 = 379.9 tok/s (notes: 380, "still < 400").
    assert s["server_ideal"] == pytest.approx(379.85, abs=0.01)
    # With 160 all-reduces at 10 us: 1 / (2.633 ms + 1.6 ms) = 236.3 tok/s, inside the notes'
    # appendix E range of 200-290.
    assert s["server_ceiling"].value == pytest.approx(236.26, abs=0.01)
    # tau = 400 / 236.3 = 1.69, inside the notes' 1.4-2.0 (1.053 without the all-reduces).
    assert s["tau_needed"].value == pytest.approx(1.693, abs=0.001)
    assert s["tau_ideal"] == pytest.approx(1.053, abs=0.001)
    # INT4 on one GPU: 95 tok/s (notes: 95).
    assert s["int4_rate"] == pytest.approx(94.96, abs=0.01)
    # The unstated condition: a total over users, or a server plus speculation.
    assert s["conditions"] == ["batch", "server_spec"]


def test_every_variant_is_sensible_and_finite():
    answer_sets = set()
    for p in VARIANTS:
        s = ex.solve(p)
        assert p["claim"] >= 2 * s["ceiling"].value
        assert s["tau_needed"].value > 1
        assert s["conditions"] and "engine" not in s["conditions"]
        assert "short" not in s["conditions"]
        assert isinstance(s["users_needed"].value, int)
        for key, value in s.items():
            v = value.value if isinstance(value, Quantity) else value
            if isinstance(v, float):
                assert math.isfinite(v) and v > 0, (key, v, p)
        answer_sets.add(tuple(s["conditions"]))
    # The multi-choice answer is not the same in every variant.
    assert len(answer_sets) >= 3, answer_sets


def test_users_needed_is_the_smallest_batch_reaching_the_claim():
    for p in [ex.CANONICAL, *VARIANTS[:60]]:
        s = ex.solve(p)
        b = s["users_needed"].value
        bw, w, kv = s["bw_gbs"] * 1e9, s["weights_gb"] * 1e9, s["kv_user_gb"] * 1e9
        totals = [n * bw / (w + n * kv) for n in (b - 1, b)]
        assert totals[1] >= p["claim"] > totals[0], p


def test_variants_differ_and_use_the_catalog():
    assert len({tuple(sorted(p.items())) for p in VARIANTS}) >= 150
    setups = {(p["model"], p["precision"], p["gpu"]) for p in VARIANTS}
    assert setups <= set(ex.SETUPS) and len(setups) >= 8


def test_templates_render_and_the_statement_shows_no_answer():
    for p in [ex.CANONICAL, *VARIANTS[:40]]:
        s = ex.solve(p)
        statement = templating.render((EX.folder / "statement.md").read_text(), p, s)
        templating.render((EX.folder / "solution.md").read_text(), p, s)
        assert f"{s['ceiling'].value:.1f}" not in statement
    used = set(re.findall(r"\{\{\s*s\.(\w+)", (EX.folder / "statement.md").read_text()))
    assert used <= {"params", "params_b", "layers", "kv_heads", "head_dim", "hbm_tbps", "hbm_gb",
                    "weight_bytes_each"}, used


