"""Q11 (utilisation_rule): the blurb's numbers, sensible variants, distinct mistakes, and a
Monte-Carlo queue that checks the formulas the exercise teaches.

The simulations use the Lindley recursion for a single FIFO server, W_next = max(0, W + S - A),
where W is a customer's wait, S its service time and A the gap to the next arrival. They are seeded,
so each assertion sees the same sample every run.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import sympy

from exercises import registry, templating
from exercises.spec import ExerciseSpec, Quantity
from exercises.utilisation_rule import exercise as ex

FOLDER = Path(ex.__file__).resolve().parent
NUMBER_PARTS = ("rho_max", "c2_for_target", "rho_lognormal")
VARIANTS = range(200)


@pytest.fixture(scope="module")
def spec() -> ExerciseSpec:
    return registry.load(FOLDER)


def _variants() -> list[dict]:
    return [ex.CANONICAL] + [ex.generate(random.Random(seed)) for seed in VARIANTS]


# --- the blurb's numbers --------------------------------------------------------------------

def test_canonical_reproduces_the_blurb() -> None:
    p = ex.CANONICAL
    s = ex.solve(p)
    # 5,600 tokens of Llama-3.1-70B on 8 x H100 at 50 % MFU: 0.1997 s, shown and used as 0.200 s.
    assert p["S"] == 0.2 and p["T99"] == 3.0
    assert s["S_exact"] == pytest.approx(0.1997, abs=5e-4)
    assert s["rho_max"].value == pytest.approx(0.693, abs=5e-4)
    assert s["k"] == pytest.approx(2.257, abs=5e-4)
    assert s["c2_for_target"].value == pytest.approx(3.51, abs=5e-3)
    assert s["cv_target"] == pytest.approx(1.87, abs=5e-3)
    assert s["c2_table_0"] == pytest.approx(0.82, abs=5e-3)
    assert s["c2_table_1"] == pytest.approx(s["rho_max"].value, rel=1e-12)
    assert s["c2_table_2"] == pytest.approx(0.60, abs=5e-3)
    assert s["c2_table_3"] == pytest.approx(0.53, abs=5e-3)
    # sigma = 1.2 gives C^2 = e^1.44 - 1 = 3.22, and the ceiling lands near the blurb's 50 %.
    assert s["c2_lognormal"] == pytest.approx(3.221, abs=5e-4)
    assert s["rho_lognormal"].value == pytest.approx(0.517, abs=5e-4)
    assert s["lam_max"] == pytest.approx(3.465, abs=5e-3)


def test_spec_loads_and_answers_every_part(spec: ExerciseSpec) -> None:
    assert spec.seed == "Q11"
    assert [q.id for q in spec.parts] == [
        "formula", "rho_max", "c2_for_target", "rho_lognormal", "breaks", "cap_in_practice"]
    solution = registry.solve(spec, ex.CANONICAL)
    for part_id in NUMBER_PARTS:
        assert isinstance(solution[part_id], Quantity)
        assert solution[part_id].unit == spec.part(part_id).unit == ""
    breaks = spec.part("breaks")
    assert breaks.multi and len(breaks.options) == 6
    assert set(solution["breaks"]) <= {o.id for o in breaks.options}
    assert len(solution["breaks"]) == 4
    for case in spec.selftest:
        spec.part(case.part)  # every selftest case names a real part


# --- formulas agree with each other -----------------------------------------------------------

def _formula(text: str, s: float, t: float) -> float:
    # Our own trusted strings only; the student's input goes through the grader's AST whitelist.
    expr = sympy.sympify(text, locals={"ln": sympy.log, "S": sympy.Symbol("S"),
                                       "T": sympy.Symbol("T")})
    return float(expr.subs({"S": s, "T": t}))


def test_formula_reference_matches_the_number() -> None:
    for p in _variants()[:50]:
        s = ex.solve(p)
        assert _formula(s["formula"], p["S"], p["T99"]) == pytest.approx(s["rho_max"].value)


def test_heuristic_is_mm1_at_c2_one_and_inverts() -> None:
    for p in _variants()[:50]:
        k = ex.k_of(p["S"], p["T99"])
        assert ex.rho_heuristic(k, 1.0) == pytest.approx(ex.rho_mm1(p["S"], p["T99"]))
        for c2 in (0.0, 0.5, 2.0, 5.0):
            assert ex.c2_for(k, ex.rho_heuristic(k, c2)) == pytest.approx(c2, abs=1e-9)
        # The heuristic's p99, ln(100) E[T] with E[T] from Pollaczek-Khinchine, hits the target.
        rho, c2 = ex.solve(p)["rho_lognormal"].value, ex.lognormal_c2(p["sigma"])
        mean = p["S"] * (1 + rho * (1 + c2) / (2 * (1 - rho)))
        assert ex.LN100 * mean == pytest.approx(p["T99"])


def test_wait_only_slip_solves_its_equation() -> None:
    rho = ex.rho_wait_only(0.2, 3.0)
    assert rho * math.exp(-(1 - rho) * 3.0 / 0.2) == pytest.approx(0.01, rel=1e-9)


# --- variants ---------------------------------------------------------------------------------

def test_generated_variants_are_sensible() -> None:
    for p in _variants():
        s = ex.solve(p)
        assert p["S"] == round(p["S"], 3) and 0.05 <= p["S"] <= 0.5
        assert 1.0 <= p["T99"] <= 10.0
        # Shown S is the rounded derivation, and answers use the shown value.
        assert abs(s["S_exact"] - p["S"]) <= 0.0005 + 1e-12
        rho, c2, rho_ln = (s[q].value for q in NUMBER_PARTS)
        assert 0.6 <= rho <= 0.9
        assert 1.5 <= c2 <= 10.0  # target below the M/M/1 ceiling, so C^2 > 1
        assert 0.3 <= rho_ln < rho  # C^2 > 1 always lowers the ceiling
        assert 0.4 <= p["rho_target"] <= 0.6 and 1.0 <= p["sigma"] <= 1.4
        assert s["rho_double_s"] > 0


def test_generate_is_deterministic_per_seed() -> None:
    assert ex.generate(random.Random(7)) == ex.generate(random.Random(7))
    assert len({tuple(sorted(ex.generate(random.Random(i)).items())) for i in range(50)}) > 40


def test_templates_render_for_every_variant(spec: ExerciseSpec) -> None:
    for p in _variants():
        s = registry.solve(spec, p)
        statement = templating.render(spec.statement_template, p, s, where="statement.md")
        solution = templating.render(spec.solution_template, p, s, where="solution.md")
        assert "{{" not in statement + solution
    _, sections = templating.split_sections(spec.solution_template)
    assert set(sections) == {q.id for q in spec.parts}


# --- mistakes ---------------------------------------------------------------------------------

def test_mistakes_are_distinct_from_the_reference_and_each_other(spec: ExerciseSpec) -> None:
    for p in _variants():
        s = ex.solve(p)
        found = ex.mistakes(p)
        for part_id in NUMBER_PARTS:
            ref = s[part_id].value
            tol = spec.part(part_id).tolerance
            values = [m.answer for m in found if m.part == part_id]
            assert len(values) >= 2, (part_id, p)
            # Outside the tolerance; graders.policy's audit checks the rounded forms as well.
            for v in values:
                assert abs(v - ref) > tol * abs(ref), (part_id, v, ref)
            for i, a in enumerate(values):
                for b in values[i + 1:]:
                    assert abs(a - b) > tol * max(abs(a), abs(b)), (part_id, a, b)
        for m in found:
            assert m.part in {q.id for q in spec.parts} and m.feedback and m.name
            if m.part == "breaks":
                assert set(m.answer) != set(s["breaks"])
                assert set(m.answer) <= {o.id for o in spec.part("breaks").options}


def test_tolerance_reasons_hold() -> None:
    # rho_max: the ln(10) slip is at least 5 % away; c2_for_target: 1 + C^2 is at least 10 % away.
    for p in _variants():
        s = ex.solve(p)
        rho = s["rho_max"].value
        assert abs(ex.rho_mm1(p["S"], p["T99"], ex.LN10) - rho) / rho >= 0.05
        c2 = s["c2_for_target"].value
        assert 1.0 / c2 >= 0.10 - 1e-12


def test_formula_mistakes_are_not_equivalent() -> None:
    points = [(0.2, 3.0), (0.05, 1.0), (0.5, 10.0)]
    ref = [_formula(ex.FORMULA, s, t) for s, t in points]
    for m in (m for m in ex.mistakes(ex.CANONICAL) if m.part == "formula"):
        got = [_formula(m.answer, s, t) for s, t in points]
        assert any(abs(g - r) > 1e-6 for g, r in zip(got, ref, strict=True)), m.answer


# --- Monte-Carlo: the queue the exercise reasons about ----------------------------------------

def _sojourns(rho: float, mean_s: float, draw: Callable[[random.Random], float], n: int,
              seed: int, warmup: int = 20_000) -> list[float]:
    """Times in system of n customers of a FIFO single-server queue with Poisson arrivals."""
    rng = random.Random(seed)
    lam = rho / mean_s
    wait, out = 0.0, []
    for i in range(n + warmup):
        service = draw(rng)
        if i >= warmup:  # start from an empty queue, so drop the transient
            out.append(wait + service)
        wait = max(0.0, wait + service - rng.expovariate(lam))
    return out


def _p99(xs: list[float]) -> float:
    return sorted(xs)[int(0.99 * len(xs))]


S0, T0 = ex.CANONICAL["S"], ex.CANONICAL["T99"]
RHO0 = ex.solve(ex.CANONICAL)["rho_max"].value


def _exp(rng: random.Random) -> float:
    return rng.expovariate(1.0 / S0)


def _const(rng: random.Random) -> float:
    return S0


def _lognormal(sigma: float) -> Callable[[random.Random], float]:
    mu = math.log(S0) - sigma * sigma / 2  # keeps the mean at S0
    return lambda rng: rng.lognormvariate(mu, sigma)


def test_mm1_p99_at_the_ceiling_is_the_target() -> None:
    times = _sojourns(RHO0, S0, _exp, 300_000, seed=11)
    assert _p99(times) == pytest.approx(T0, rel=0.05)
    assert sum(times) / len(times) == pytest.approx(S0 / (1 - RHO0), rel=0.03)


def test_md1_mean_matches_pollaczek_khinchine() -> None:
    # C^2 = 0: the mean time in system is S (1 + rho / (2 (1 - rho))), exactly.
    times = _sojourns(RHO0, S0, _const, 200_000, seed=12)
    assert sum(times) / len(times) == pytest.approx(S0 * (1 + RHO0 / (2 * (1 - RHO0))), rel=0.03)


def test_more_service_variance_means_a_worse_p99_at_the_same_load() -> None:
    n = 200_000
    p99_const = _p99(_sojourns(RHO0, S0, _const, n, seed=13))
    p99_exp = _p99(_sojourns(RHO0, S0, _exp, n, seed=13))
    p99_lognormal = _p99(_sojourns(RHO0, S0, _lognormal(1.2), n, seed=13))
    assert p99_const < p99_exp < p99_lognormal
    assert p99_lognormal > 1.5 * T0


def test_heuristic_is_optimistic_for_a_lognormal_mix() -> None:
    # solution.md says the p99 at the heuristic's lognormal ceiling lands well above the target.
    rho_ln = ex.solve(ex.CANONICAL)["rho_lognormal"].value
    times = _sojourns(rho_ln, S0, _lognormal(ex.CANONICAL["sigma"]), 200_000, seed=14)
    assert _p99(times) > 1.2 * T0
