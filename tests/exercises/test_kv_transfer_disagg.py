"""Q23 (exercises/kv_transfer_disagg): the canonical numbers, and sensible variants."""
from __future__ import annotations

import json
import math
import random
import re
import tomllib

import pytest

from exercises import registry
from exercises.spec import Quantity
from tests.exercises.support import (
    ExerciseUnderTest,
    assert_graders_accept_and_name,
    assert_mistakes_distinct,
    close,
    load_by_path,
)

ex = load_by_path("kv_transfer_disagg")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS, NUMBER_PARTS = EX.folder, EX.parts, EX.number_parts
tol = EX.tol


def variants(count: int = 200) -> list[dict]:
    rng = random.Random(20250123)
    return [ex.generate(rng) for _ in range(count)]


VARIANTS = variants()


# ---------------------------------------------------------------------------------------------
# The canonical variant reproduces the blurb and the worked numbers


def test_canonical_is_the_blurb_setting():
    p = ex.CANONICAL
    assert (p["model"], p["gpu"], p["nic"], p["tp"], p["prompt"], p["block"]) == (
        "Llama-3.1-70B", "H100 SXM", "ConnectX-7", 8, 8192, 16)
    assert p["mfu"] == 0.5 and p["tpot_ms"] == 25 and p["output"] == 512
    assert ex.is_sensible(p)


@pytest.mark.parametrize(
    ("key", "expected", "part"),
    [
        ("kv_size", 2.684, "kv_size"),  # the blurb's 2.7 GB
        ("kv_size", 2.7, "kv_size"),
        ("prefill_time_s", 0.314, "emit_rate"),
        ("emit_instance_gbs", 8.54, "emit_rate"),
        ("emit_rate", 1.07, "emit_rate"),
        ("nic_share_pct", 2.1, "emit_rate"),
        ("wire_time", 6.7, "wire_time"),
        ("one_nic_ms", 53.7, "wire_time"),
        ("transfers", 81_920, "transfers"),
        ("post_lo_ms", 81.92, "transfers"),
        ("post_hi_ms", 409.6, "transfers"),
        ("decode_cap", 11.4, "decode_cap"),
        ("prefill_rps", 3.2, "decode_cap"),
        ("balance_ratio", 3.6, "decode_cap"),
        ("hold_ratio", 40, "decode_cap"),
    ],
)
def test_canonical_numbers(key, expected, part):
    s = ex.solve(ex.CANONICAL)
    value = s[key].value if isinstance(s[key], Quantity) else s[key]
    # Each figure as the notes round it: within the tolerance of the part it feeds, or, for a
    # figure quoted to two or three digits, within that rounding.
    rounding = 0.5 * 10 ** (math.floor(math.log10(abs(expected))) - 1) / abs(expected)
    assert close(value, expected, max(tol(part), rounding)), (key, value, expected)


def test_canonical_exact_values():
    s = ex.solve(ex.CANONICAL)
    assert s["kv_bytes"] == 2_684_354_560
    assert s["kv_gib"] == 2.5
    assert s["kappa"] == 327_680
    assert s["transfer_count"] == 81_920 and s["transfers"].value == 81_920
    assert s["transfer_bytes"] == 4096
    assert s["pool_gb"] == 415.0 and s["weights_gb"] == 141.1
    assert s["hold_s"] == pytest.approx(12.8)
    assert s["req_gb"] == pytest.approx(2.852, abs=5e-4)
    assert s["concurrency_whole"] == 145


def test_canonical_which_side_states_the_ratio():
    # Appendix E point 8: at 1:1 prefill compute binds; decode memory binds from about 3.6:1.
    s = ex.solve(ex.CANONICAL)
    assert s["which_side"] == "decode"
    assert ex.solve(dict(ex.CANONICAL, ratio=1))["which_side"] == "prefill"
    assert ex.solve(dict(ex.CANONICAL, ratio=3))["which_side"] == "prefill"
    statement = (FOLDER / "statement.md").read_text(encoding="utf-8")
    assert "{{ p.ratio }}:1" in statement


# ---------------------------------------------------------------------------------------------
# Variants


def test_every_variant_is_sensible_and_its_numbers_positive_and_finite():
    sides = set()
    for p in VARIANTS:
        assert ex.is_sensible(p), p
        s = ex.solve(p)
        sides.add(s["which_side"])
        for key, value in s.items():
            if isinstance(value, Quantity):
                value = value.value
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            assert math.isfinite(value) and value > 0, (key, value, p)
    # Both answers of the judgement occur, so it cannot be guessed from the exercise alone.
    assert sides == {"prefill", "decode"}


def test_variants_are_drawn_from_the_catalog_and_the_stated_ranges():
    seen = {"model": set(), "gpu": set(), "nic": set(), "block": set()}
    for p in VARIANTS:
        assert p["model"] in ex.MODELS and p["gpu"] in ex.GPUS and p["nic"] in ex.NICS
        assert p["tp"] in ex.TP_CHOICES[p["model"]]
        assert p["prompt"] in ex.PROMPTS and 4096 <= p["prompt"] <= 32768
        assert p["prompt"] % p["block"] == 0
        assert 0.4 <= p["mfu"] <= 0.6 and p["mfu"] == round(p["mfu"], 2)
        for k in seen:
            seen[k].add(p[k])
    assert seen["model"] == set(ex.MODELS) and seen["gpu"] == set(ex.GPUS)
    assert seen["nic"] == set(ex.NICS) and seen["block"] == set(ex.BLOCKS)


def test_answers_are_computed_from_the_displayed_values():
    for p in VARIANTS[:50]:
        s = ex.solve(p)
        # The statement shows the weights to 0.1 GB and the pool to the GB; solve uses those.
        assert s["pool_gb"] == round(s["pool_gb"])
        assert s["weights_gb"] == round(s["weights_gb"], 1)
        assert s["pool_gb"] == round(s["hbm_used_gb"] - s["weights_gb"] - s["act_total_gb"])
        assert isinstance(s["transfer_count"], int)
        # A variant survives a JSON round trip (it is stored in the database) unchanged.
        again = ex.solve(json.loads(json.dumps(p)))
        for pid in NUMBER_PARTS:
            assert again[pid] == s[pid]


def test_mistakes_are_distinct_from_the_reference_and_named():
    for p in [ex.CANONICAL, *VARIANTS]:
        s = ex.solve(p)
        ms = ex.mistakes(p)
        assert_mistakes_distinct(EX, p, s, ms)
        options = {o["id"] for o in PARTS["which_side"]["options"]}
        for m in ms:
            if m.part == "which_side":
                assert m.answer in options and m.answer != s["which_side"]


# ---------------------------------------------------------------------------------------------
# Templates

PLACEHOLDER = re.compile(r"\{\{\s*([ps])\.([A-Za-z_]\w*)\s*(?::([^}]*?))?\s*\}\}")

# What the statement may show of solve(): the givens, never an answer or a worked intermediate.
STATEMENT_GIVENS = {
    "layers", "hidden", "q_heads", "kv_heads", "head_dim", "q_dim", "params", "bf16_tflops",
    "hbm_gb", "nic_gbit", "mfu_pct", "mem_util_pct", "weights_gb", "pool_gb", "hbm_used_gb",
    "act_total_gb", "kv_heads_per_gpu",
}


def render(template: str, p: dict, s: dict) -> str:
    def one(match: re.Match) -> str:
        source = p if match.group(1) == "p" else s
        name, spec = match.group(2), (match.group(3) or "").strip()
        if name not in source:
            raise KeyError(f"unresolved placeholder {match.group(0)}")
        return format(source[name], spec)

    out = PLACEHOLDER.sub(one, template)
    assert "{{" not in out and "}}" not in out, "a placeholder the pattern did not catch"
    return out


@pytest.mark.parametrize("which", ["statement.md", "solution.md"])
def test_templates_render_for_every_variant(which):
    for text in EX.rendered(which, VARIANTS):
        assert "nan" not in text.lower().split()


def test_statement_shows_only_givens():
    EX.assert_statement_shows_only_givens(STATEMENT_GIVENS)


def test_canonical_solution_quotes_the_blurb_numbers():
    EX.assert_solution_quotes([
        "2,684,354,560", "2.684 GB", "0.314 s", "8.54 GB/s", "1.07 GB/s", "2.1 %", "6.71 ms",
        "53.7 ms", "81,920", "82–410", "11.4 req/s", "3.18", "3.6"
    ])


def test_selftest_cases_are_well_formed():
    cases = tomllib.loads((FOLDER / "selftest.toml").read_text(encoding="utf-8"))["case"]
    for case in cases:
        assert case["part"] in PARTS
        assert case.get("invalid") or "score" in case or "covered" in case
    # The required kinds are all there: a 2x answer scoring 0, an invalid input, a converted unit.
    parts_with_invalid = {c["part"] for c in cases if c.get("invalid")}
    assert parts_with_invalid
    assert any(c["answer"] == "5.37 GB" and c["score"] == 0 for c in cases)
    assert any(c["answer"] == "2684 MB" and c["score"] == 1 for c in cases)


def test_the_real_graders_accept_each_reference_and_name_each_mistake():
    # The platform's own graders, on many more variants than the selftest's three.
    spec = registry.get("kv_transfer_disagg")
    assert_graders_accept_and_name(
        spec, ex, [ex.CANONICAL, *VARIANTS[:60]], [*NUMBER_PARTS, "which_side"])
