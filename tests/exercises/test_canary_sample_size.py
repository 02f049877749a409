"""Q33 (exercises/canary_sample_size): the research notes' sample sizes, sensible variants, and the
code part's machinery run in-process on trusted code only (reference, mutants, driver)."""
from __future__ import annotations

import json
import math
from statistics import NormalDist
from typing import Any

import pytest

from exercises import templating
from tests.exercises.support import ExerciseUnderTest, code_part, load_by_path

ex = load_by_path("canary_sample_size")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS = EX.folder, EX.parts
CODE = FOLDER / "code"
VARIANTS = EX.variants()
SEED = 4242
spec = EX.spec_fixture()


CODE_PART = code_part("canary_sample_size")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference


# --- the calculation parts ---------------------------------------------------------------------


def test_parts_and_tolerances_agree_with_the_module() -> None:
    s = ex.solve(ex.CANONICAL)
    assert s["sizing"] == "code/reference.py"


def test_canonical_reproduces_the_notes() -> None:
    # facts-q26-q49 §Q33, exact quantiles z_0.95 = 1.6449, z_0.80 = 0.8416, rounded up.
    s = ex.solve(ex.CANONICAL)
    assert s["n_errors"].value == 6105  # 1.0 % -> 1.5 %, two arms, one-sided
    assert s["n_two_sided"] == 7750  # the same two-sided
    assert s["n_known"].value == 2830  # known baseline
    assert s["n_mean"].value == 4947  # +5 % mean TTFT, CV 1
    assert s["n_p99"] == 1826  # p99 -> old p98: 1 % -> 2 % exceedances
    # 6,105 requests at 1 % of 200 req/s = 2 req/s: 3,052.5 s = 50.9 min ("51 minutes").
    assert s["minutes"].value == pytest.approx(50.875)
    assert round(s["minutes"].value) == 51
    assert round(s["minutes_at_5pct"]) == 10  # notes: 5 % -> 10 min


@pytest.mark.parametrize(("args", "expected"), [
    ((0.01, 0.02), 1826), ((0.001, 0.002), 18519), ((0.01, 0.011), 128470)])
def test_notes_table_proportions(args: tuple[float, float], expected: int) -> None:
    assert reference.canary_sample_size(*args) == expected


@pytest.mark.parametrize(("shift", "cv", "expected"), [
    (0.05, 2.0, 19785), (0.10, 1.0, 1237), (0.02, 1.0, 30913)])
def test_notes_table_means(shift: float, cv: float, expected: int) -> None:
    assert reference.canary_sample_size_mean(shift, cv) == expected


def test_three_decimal_z_values_land_inside_the_tolerance() -> None:
    # The notes: with 1.645 / 0.842 each n comes out about 0.04 % larger (6,107 and 4,949).
    pbar = 0.0125
    n = (1.645 * math.sqrt(2 * pbar * (1 - pbar))
         + 0.842 * math.sqrt(0.01 * 0.99 + 0.015 * 0.985)) ** 2 / 0.005**2
    assert math.ceil(n) == 6107
    assert abs(6107 / 6105 - 1) < EX.tol("n_errors")


def test_variants_are_sensible_and_varied() -> None:
    for p in VARIANTS:
        assert p["p1_pct"] > p["p0_pct"]
        s = ex.solve(p)
        assert 3 <= s["minutes"].value <= 480
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150


@pytest.mark.parametrize("which", ["statement.md", "solution.md"])
def test_templates_render(which: str) -> None:
    template = (FOLDER / which).read_text(encoding="utf-8")
    for p in [ex.CANONICAL, *VARIANTS[:50]]:
        assert "{{" not in templating.render(template, p, ex.solve(p), which)
    text = templating.render(template, ex.CANONICAL, ex.solve(ex.CANONICAL), which)
    if which == "solution.md":
        for figure in ("**6,105 requests per arm**", "**2,830 requests**",
                       "**4,947 requests per arm**", "**50.9", "**1,826 per arm**"):
            assert figure in text, figure


# --- the code part -----------------------------------------------------------------------------


all_cases, expected = CODE_PART.fixtures(SEED)


def test_public_cases_are_the_variants_own_numbers() -> None:
    for p in [ex.CANONICAL, *VARIANTS[:20]]:
        s = ex.solve(p)
        outs = [driver.run_case(reference, c["input"])["value"] for c in checks.public_cases(p)]
        assert outs == [s["n_errors"].value, s["n_known"].value, s["n_mean"].value,
                        pytest.approx(s["minutes"].value)]


def test_reference_against_an_oracle(all_cases: list[dict[str, Any]],
                                     expected: list[dict[str, Any]]) -> None:
    # Written from the statement's formulas, with its own z-values.
    z = NormalDist().inv_cdf
    for case, exp in zip(all_cases, expected, strict=True):
        inp, out = case["input"], exp["output"]
        if "raised" in out:
            assert out["raised"].startswith("ValueError"), case
            continue
        a = inp["args"]
        if inp["fn"] == "minutes":
            assert out["value"] == pytest.approx(a[0] / (a[1] * a[2]) / 60, rel=1e-12)
            continue
        za, zb = z(1 - a[2]), z(a[3])
        if inp["fn"] == "mean":
            raw = 2 * (za + zb) ** 2 * a[1] ** 2 / a[0] ** 2
        elif inp["known_baseline"]:
            raw = (za * math.sqrt(a[0] * (1 - a[0])) + zb * math.sqrt(a[1] * (1 - a[1]))) ** 2 \
                / (a[1] - a[0]) ** 2
        else:
            pb = (a[0] + a[1]) / 2
            raw = (za * math.sqrt(2 * pb * (1 - pb))
                   + zb * math.sqrt(a[0] * (1 - a[0]) + a[1] * (1 - a[1]))) ** 2 / (a[1] - a[0]) ** 2
        assert out == {"value": math.ceil(raw), "type": "int"}, case


def test_failures_name_the_slip(all_cases: list[dict[str, Any]],
                                expected: list[dict[str, Any]]) -> None:
    module = CODE_PART.module("two_sided")
    results = {c.name: c for c in CODE_PART.check(module, all_cases, expected)}
    message = results["two-proportion n per arm"].message
    assert "two-sided" in message and "expected" in message


def test_an_improvement_is_rejected() -> None:
    # A hand-written edge: p1 below p0 is not a regression to size a canary for.
    with pytest.raises(ValueError):
        reference.canary_sample_size(0.02, 0.01)
    with pytest.raises(ValueError):
        reference.canary_minutes(10, 200, 5.0)  # 5 means 500 %, not 5 %
    assert reference.canary_minutes(0, 200, 0.01) == 0


def test_driver_reports_bad_return_types() -> None:
    class Bad:
        @staticmethod
        def canary_sample_size(*args: Any, **kwargs: Any) -> str:
            return "6105"

        @staticmethod
        def canary_minutes(*args: Any) -> float:
            return float("nan")

    assert "bad" in driver.run_case(Bad, {"fn": "proportions", "args": [0.01, 0.015, 0.05, 0.8],
                                          "known_baseline": False})
    assert "bad" in driver.run_case(Bad, {"fn": "minutes", "args": [1, 1, 1.0]})


def test_driver_error_results_fail_every_check(all_cases: list[dict[str, Any]],
                                               expected: list[dict[str, Any]]) -> None:
    # (An error on every case failing every check is the contract's: test_mutants.py.)
    forged = [{"output": {"value": True, "type": "int"}} for _ in all_cases]
    results = checks.check(all_cases, forged, expected, ex.CANONICAL)
    assert not any(c.passed for c in results)


def test_hidden_cases_cover_the_edges_and_are_deterministic() -> None:
    a = CODE_PART.assert_hidden_cases_seeded()
    ids = [c["id"] for c in a]
    assert len(ids) == len(set(ids))
    for name in ("p1-equals-p0", "p1-below-p0", "alpha-half", "power-one", "zero-requests",
                 "fraction-as-percent", "large-rates-known"):
        assert f"edge-{name}" in ids, name
    fns = [c["input"]["fn"] for c in a if c["id"].startswith("random-")]
    assert fns.count("proportions") >= 40 and fns.count("mean") >= 15 and fns.count("minutes") >= 10
    assert 100 <= len(a) <= 200


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names its smallest canary.
    for name, c in CODE_PART.failures():
        assert "Smallest: canary_" in c.message, (name, c.message)
