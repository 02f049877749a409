"""Q32 (exercises/region_loss_fleet): the research notes' fleet, the corrected formula, sensible
variants, and the code part's machinery run in-process on trusted code (reference, mutants,
equivalents, driver), with a brute-force oracle for the whole-replica minimum."""
from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.exercises.support import ExerciseUnderTest, code_part, load_by_path, load_file

ex = load_by_path("region_loss_fleet")
EX = ExerciseUnderTest.load(ex)
FOLDER, PARTS = EX.folder, EX.parts
CODE = FOLDER / "code"
VARIANTS = EX.variants()
SEED = 2024
spec = EX.spec_fixture()


CODE_PART = code_part("region_loss_fleet")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference


# --- the calculation parts ---------------------------------------------------------------------


def test_canonical_reproduces_the_notes() -> None:
    # facts-q26-q49 §Q32: D = 1,000 req/s (500/300/200), r = 10, U = 0.7.
    s = ex.solve(ex.CANONICAL)
    assert s["baseline"] == pytest.approx(1000 / 7)  # 142.9
    assert s["fleet"].value == pytest.approx(1500 / 7)  # 214.3 = max(D + d_max, 3D/2) / 7
    assert s["dominant_term"] == pytest.approx(s["balanced_term"])  # d_max = D/(N-1) exactly
    assert s["overhead"].value == pytest.approx(0.5)  # +50 %
    assert s["cap"].value == pytest.approx(500 / 7)  # 71.4: all three regions at the cap
    assert s["placement_table"].count("| 71.4 |") == 3
    assert s["neighbour"].value == pytest.approx(800 / 7)  # us-west >= 114.3
    assert s["shed"].value == 180_000  # 500 req/s x 360 s
    assert s["whole_total"] == 215


@pytest.mark.parametrize(("n", "ratio"), [(2, 2.0), (3, 1.5), (4, 4 / 3), (5, 1.25)])
def test_equal_regions_pay_n_over_n_minus_1(n: int, ratio: float) -> None:
    names = ex.NAMES[:n]
    p = dict(ex.CANONICAL, regions=[[name, 200] for name in names], neighbour=names[1])
    s = ex.solve(p)
    assert s["fleet"].value / s["baseline"] == pytest.approx(ratio)
    # The single-term formula (D + d_max) is wrong here from four regions on (notes: 1.25x).
    if n == 4:
        assert s["dominant_term"] / s["baseline"] == pytest.approx(1.25)


def test_a_dominant_region_gets_no_spare() -> None:
    p = dict(ex.CANONICAL, regions=[["us-east", 800], ["us-west", 100], ["eu-west", 100]])
    s = ex.solve(p)
    assert s["binding"] == "dominant"
    assert s["largest_spare"] == pytest.approx(0, abs=1e-9)
    assert s["cap"].value == pytest.approx(800 / 7)


def test_variants_are_sensible_and_varied() -> None:
    bindings = set()
    for p in VARIANTS:
        s = ex.solve(p)
        bindings.add(s["binding"])
        # The continuous placement meets every constraint, and whole replicas stay within 2 %.
        assert s["cap"].value >= s["own_max"] - 1e-9
        assert abs(s["whole_total"] / s["fleet"].value - 1) < 0.02
    assert {"dominant", "balanced"} <= bindings
    assert len({json.dumps(p, sort_keys=True) for p in VARIANTS}) >= 150


@pytest.mark.parametrize("which", ["statement.md", "solution.md"])
def test_templates_render(which: str) -> None:
    for text in EX.rendered(which, VARIANTS[:60]):
        assert "{{" not in text and "-0.0" not in text


# --- the code part -----------------------------------------------------------------------------


def _brute_force(demands: list[float], r: float, U: float) -> int:
    """The smallest whole-replica total, by trying every placement up to a bound (tiny cases)."""
    q = Fraction(repr(r)) * Fraction(repr(U))
    need = [Fraction(repr(d)) / q for d in demands]
    total_need = sum(need, Fraction(0))
    limit = 2 * math.ceil(total_need) + len(demands) + 2
    for total in range(limit + 1):
        for c in itertools.product(range(total + 1), repeat=len(demands)):
            if sum(c) != total or any(ci < ni for ci, ni in zip(c, need, strict=True)):
                continue
            if all(total - cj >= total_need for cj in c):
                return total
    raise AssertionError("no fleet found")


@pytest.mark.parametrize(("demands", "r", "U"), [
    ([500, 300, 200], 100, 0.7), ([5, 5, 5, 5], 2, 0.5), ([9, 1, 1], 3, 1.0), ([0, 7], 2, 0.5),
    ([1, 1, 1], 10, 0.7), ([13, 8, 4], 5, 0.8), ([6, 6], 4, 0.75), ([10, 2, 3, 1], 3, 0.6)])
def test_reference_total_is_the_brute_force_minimum(demands: list[float], r: float,
                                                    U: float) -> None:
    fleet = reference.min_fleet({f"r{i}": d for i, d in enumerate(demands)}, r, U)
    assert sum(fleet.values()) == _brute_force(demands, r, U)


def test_reference_canonical_placement() -> None:
    fleet = reference.min_fleet({"us-east": 500, "us-west": 300, "eu-west": 200}, 10, 0.7)
    assert list(fleet.items()) == [("us-east", 72), ("us-west", 72), ("eu-west", 71)]
    # Ties go to the region listed first.
    assert reference.min_fleet({"c": 50, "a": 50, "b": 50}, 5, 1.0) == {"c": 15, "a": 15, "b": 15}
    assert list(reference.min_fleet({"c": 50, "a": 50, "b": 49}, 5, 1.0).values()) == [15, 15, 15]


all_cases, expected = CODE_PART.fixtures(SEED)


def _grade(path: Path, name: str, all_cases: list[dict[str, Any]],
           expected: list[dict[str, Any]]) -> list[Any]:
    return CODE_PART.check(load_file(path, name), all_cases, expected)



def test_reference_matches_the_brute_force_on_small_hidden_cases(
        all_cases: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    tried = 0
    for case, exp in zip(all_cases, expected, strict=True):
        inp = case["input"]
        if "fleet" not in exp["output"] or len(inp["regions"]) > 3:
            continue
        total = sum(c for _, c in exp["output"]["fleet"])
        if total > 40:
            continue
        assert total == _brute_force([d for _, d in inp["regions"]], inp["r"], inp["U"]), case
        tried += 1
    assert tried >= 10


def test_survival_message_names_the_lost_region(all_cases: list[dict[str, Any]],
                                                expected: list[dict[str, Any]]) -> None:
    results = {c.name: c for c in CODE_PART.results(
        CODE_PART.module("spare_on_largest"))}
    message = results["survives the loss of any one region"].message
    assert "losing " in message and "req/s under U" in message


def test_driver_reports_bad_return_values() -> None:
    class Bad:
        @staticmethod
        def min_fleet(demands: dict[str, float], r: float, U: float) -> dict[str, float]:
            return {name: 1.5 for name in demands}

    inp = checks.public_cases(ex.CANONICAL)[0]["input"]
    assert "bad" in driver.run_case(Bad, inp)

    class Whole:
        @staticmethod
        def min_fleet(demands: dict[str, float], r: float, U: float) -> dict[str, float]:
            return {name: float(c) for name, c in reference.min_fleet(demands, r, U).items()}

    assert driver.run_case(Whole, inp) == driver.run_case(reference, inp)


def test_driver_errors_and_forged_lines_fail(all_cases: list[dict[str, Any]],
                                             expected: list[dict[str, Any]]) -> None:
    # (An error on every case failing every check is the contract's: test_mutants.py.)
    forged = [{"output": {"fleet": [["x", True]]}} for _ in all_cases]
    assert not any(c.passed for c in checks.check(all_cases, forged, expected, ex.CANONICAL))


def test_hidden_cases_cover_the_edges_and_are_deterministic() -> None:
    a = CODE_PART.assert_hidden_cases_seeded()
    ids = [c["id"] for c in a]
    assert len(ids) == len(set(ids))
    for name in ("canonical", "two-regions", "four-equal-regions", "tiny-regions",
                 "zero-demand-region", "exact-multiples", "ties-in-order", "one-region"):
        assert f"edge-{name}" in ids, name
    keys = [checks.size_key(c) for c in a]
    assert keys == sorted(keys)
    assert 120 <= len(a) <= 200
    for c in a:
        assert c["id"].startswith("edge-") or checks._float_safe(c["input"])


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names the smallest call.
    for name, c in CODE_PART.failures():
        assert "Smallest: min_fleet({" in c.message, (name, c.message)
