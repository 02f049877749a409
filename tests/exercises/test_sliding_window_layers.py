"""Q47 (exercises/sliding_window_layers): the canonical numbers, sensible variants, distinct
mistakes, and the formula against the catalog's windowed KV figure."""
from __future__ import annotations

import importlib.util
import math
import random
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import sympy

import graders
from exercises import registry, templating
from exercises.catalog import model
from exercises.spec import Mistake, Quantity
from graders.selftest import answer_text

FOLDER = Path(__file__).resolve().parents[2] / "exercises" / "sliding_window_layers"


def _load() -> ModuleType:
    # Loaded by path, as the registry does: exercise folders are not packages.
    spec = importlib.util.spec_from_file_location("sliding_window_layers_exercise",
                                                  FOLDER / "exercise.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ex = _load()
TOML = tomllib.loads((FOLDER / "exercise.toml").read_text(encoding="utf-8"))
PARTS = {p["id"]: p for p in TOML["parts"]}
NUMBER_PARTS = [pid for pid, p in PARTS.items() if p["type"] == "number"]
VARIANTS = [ex.generate(random.Random(seed)) for seed in range(200)]


def tol(part: str) -> float:
    return PARTS[part].get("tolerance", 0.02)


def close(value: float, ref: float, rel: float) -> bool:
    return value == ref if rel == 0 else abs(value - ref) <= rel * abs(ref)


def saving_at(name: str, length: int) -> float:
    s = ex.solve({"model": name, "context": length, "short": length, "pool_gb": 100})
    return s["saving_pct"]


# ---------------------------------------------------------------------------------------------
# The canonical variant and the notes' worked numbers (facts-q26-q49.md, Q47)


def test_canonical_reproduces_the_notes():
    p = ex.CANONICAL
    s = ex.solve(p)
    assert (p["model"], p["context"], p["short"]) == ("GPT-OSS-120B", 131072, 4096)
    assert ex.is_sensible(p)
    # "all-full 72 KiB/token -> 131,072 tokens = 9.66 GB; hybrid 4.84 GB" (an AWS Neuron doc
    # quotes the same 9.66 GB for a 131k-token GPT-OSS-120B sequence in BF16)
    assert s["per_token_full"] == 72 * 1024 and s["b"] == 2048
    assert s["kv_all_full"].value == pytest.approx(9.66, abs=5e-3)
    assert s["kv_windowed"].value == pytest.approx(4.84, abs=5e-3)
    assert s["windowed_bytes"] == 4_836_556_800
    # "saving 49.95 % at 128K, 48.4 % at 4K"
    assert s["saving_pct"] == pytest.approx(49.95, abs=5e-3)
    assert s["saving_short"].value == pytest.approx(48.4, abs=0.05)
    # "with max_num_batched_tokens = 8,192 a W = 128 layer still counts ~8.3K tokens"
    assert s["worst_tokens"] == 8336
    assert s["concurrency"].value == 12 and s["count_all_full"] == 6


def test_other_models_match_the_notes():
    # "Gemma 3 (5:1, W = 1,024): 82.7 % at 128K, 80.7 % at 32K" for a layer count divisible by 6
    # (Gemma-3-12B); Appendix C: Gemma-3-27B gives 83.2 % / 81.3 %.
    assert saving_at("Gemma-3-12B", 131072) == pytest.approx(82.7, abs=0.05)
    assert saving_at("Gemma-3-12B", 32768) == pytest.approx(80.7, abs=0.05)
    assert saving_at("Gemma-3-27B", 131072) == pytest.approx(83.2, abs=0.05)
    assert saving_at("Gemma-3-27B", 32768) == pytest.approx(81.3, abs=0.05)
    # "Gemma 2 (1:1, W = 4,096) at 8K: 25 %"
    assert saving_at("Gemma-2-9B", 8192) == pytest.approx(25.0)
    assert saving_at("Gemma-2-27B", 8192) == pytest.approx(25.0)
    # The layer counts behind them (vLLM's hybrid-allocator doc: Gemma-3-27B has 52 + 10).
    assert (model("Gemma-3-27B").local_layers, model("Gemma-3-27B").global_layers) == (52, 10)
    assert (model("GPT-OSS-120B").local_layers, model("GPT-OSS-120B").global_layers) == (18, 18)


def test_formula_matches_the_catalog_figure():
    f_sym, w_sym, l_sym = sympy.symbols("f W L")
    expr = sympy.sympify(ex.SAVING_FORMULA, locals={"f": f_sym, "W": w_sym, "L": l_sym})
    for p in VARIANTS[:60]:
        s = ex.solve(p)
        m = model(p["model"])
        for length in (p["context"], p["short"]):
            value = float(expr.subs({f_sym: s["f"], w_sym: s["window"], l_sym: length}))
            catalog = 1 - m.kv_bytes_for_tokens(length) / (m.kv_bytes_per_token() * length)
            assert value == pytest.approx(catalog, rel=1e-12)
        assert s["saving_short"].value == pytest.approx(
            100 * float(expr.subs({f_sym: s["f"], w_sym: s["window"], l_sym: p["short"]})))


def test_formula_mistakes_are_not_equivalent():
    points = [(0.5, 128.0, 4096.0), (0.8333, 1024.0, 32768.0), (0.3, 2.0, 7.0)]
    ref = [(lambda f, w, x: f * (1 - w / x))(*pt) for pt in points]
    syms = {n: sympy.Symbol(n) for n in ("f", "W", "L")}
    for m in (m for m in ex.mistakes(ex.CANONICAL) if m.part == "saving_formula"):
        expr = sympy.sympify(m.answer, locals=syms)
        got = [float(expr.subs(dict(zip(syms.values(), pt, strict=True)))) for pt in points]
        assert any(abs(g - r) > 1e-6 for g, r in zip(got, ref, strict=True)), m.answer


# ---------------------------------------------------------------------------------------------
# Shape and variants


def test_parts_and_tolerances_agree_with_the_module():
    assert list(PARTS) == ["kv_all_full", "kv_windowed", "saving_formula", "saving_short",
                           "concurrency", "allocator", "why"]
    s = ex.solve(ex.CANONICAL)
    for pid, part in PARTS.items():
        assert pid in s, pid
        if part["type"] == "number":
            assert isinstance(s[pid], Quantity) and s[pid].unit == part.get("unit", "")
            assert ex.TOLERANCE[pid] == tol(pid), pid
            if tol(pid) != 0.02:
                assert part.get("tolerance_reason"), pid
        if part["type"] == "choice":
            assert set(s[pid]) <= {o["id"] for o in part["options"]}
        if part["type"] == "text":
            assert part["key_points"] and isinstance(s[pid], str)


def test_variants_are_sensible_and_differ():
    seen, models = set(), set()
    for p in VARIANTS:
        assert ex.is_sensible(p), p
        m = model(p["model"])
        s = ex.solve(p)
        assert m.sliding_window < p["short"] < p["context"] <= m.max_context
        assert 0 < s["kv_windowed"].value < s["kv_all_full"].value
        assert 0 < s["saving_short"].value < s["saving_pct"] < 100 * s["f"]
        assert isinstance(s["concurrency"].value, int)
        assert s["concurrency"].value >= s["count_all_full"] >= 2
        # The count is the floor of the exact ratio, from the displayed pool size.
        assert s["concurrency"].value == math.floor(p["pool_gb"] * 1e9 / s["windowed_bytes"])
        seen.add(tuple(sorted(p.items())))
        models.add(p["model"])
    assert len(seen) > 180
    assert models == set(ex.MODELS)


# ---------------------------------------------------------------------------------------------
# Mistakes


def test_mistakes_are_distinct_from_the_reference_and_each_other():
    options = {o["id"] for o in PARTS["allocator"]["options"]}
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        ms = ex.mistakes(p)
        assert all(isinstance(m, Mistake) and m.feedback and m.name for m in ms)
        for pid in NUMBER_PARTS:
            values = [float(m.answer) for m in ms if m.part == pid]
            assert len(values) >= 2, (pid, p)
            ref = float(s[pid].value)
            for v in values:
                assert math.isfinite(v) and v > 0
                assert not close(v, ref, tol(pid)), (pid, v, ref, p)
            values.sort()
            for a, b in zip(values, values[1:], strict=False):
                assert not close(a, b, max(tol(pid), 1e-9)), (pid, a, b)
        for m in ms:
            if m.part == "allocator":
                assert set(m.answer) <= options and set(m.answer) != set(s["allocator"])


# ---------------------------------------------------------------------------------------------
# Templates, selftest file, real graders


@pytest.mark.parametrize("which", ["statement.md", "solution.md"])
def test_templates_render_for_every_variant(which):
    template = (FOLDER / which).read_text(encoding="utf-8")
    for p in [ex.CANONICAL, *VARIANTS]:
        text = templating.render(template, p, ex.solve(p), where=which)
        for word in ("nan", "inf"):
            assert text.lower().count(word) == template.lower().count(word), word


def test_solution_has_one_section_per_part_in_order():
    _, sections = templating.split_sections((FOLDER / "solution.md").read_text(encoding="utf-8"))
    assert list(sections) == list(PARTS)


def test_canonical_solution_quotes_the_worked_numbers():
    text = templating.render((FOLDER / "solution.md").read_text(encoding="utf-8"), ex.CANONICAL,
                             ex.solve(ex.CANONICAL))
    for figure in ["9.664", "4.837", "49.95 %", "48.44", "2,048", "8,336", "12.41", "6.21",
                   "6 requests instead of 12"]:
        assert figure in text, figure


def test_selftest_cases_are_well_formed():
    cases = tomllib.loads((FOLDER / "selftest.toml").read_text(encoding="utf-8"))["case"]
    for case in cases:
        assert case["part"] in PARTS
        assert case.get("invalid") or "score" in case
    assert any(c.get("invalid") for c in cases)
    assert any(c["answer"] == "19.33 GB" and c["score"] == 0 for c in cases)  # off by 2x
    assert any(c["answer"] == "9 GiB" and c["score"] == 1 for c in cases)  # converted unit


def test_the_real_graders_accept_each_reference_and_name_each_mistake():
    spec = registry.load(FOLDER)
    for p in [ex.CANONICAL, *VARIANTS[:30]]:
        s = ex.solve(p)
        for pid in (*NUMBER_PARTS, "allocator"):
            r = graders.grade_answer(spec, pid, answer_text(spec.part(pid), s[pid]), p, seed=1)
            assert r.score == 1.0, (pid, r.feedback, p)
        for m in ex.mistakes(p):
            if m.part == "saving_formula":
                continue  # the expression grader spawns a process; the selftest covers these
            r = graders.grade_answer(spec, m.part, answer_text(spec.part(m.part), m.answer), p,
                                     seed=1)
            assert r.score < 1.0 and r.feedback == m.feedback, (m.name, r.feedback, p)
