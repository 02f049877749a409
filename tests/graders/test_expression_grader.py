"""graders.expression: equivalence in a time-limited child process, mistakes, the error path."""
from __future__ import annotations

import subprocess
import time

import pytest
import sympy

from exercises.spec import Mistake, PartSpec
from graders import expression
from graders.base import GradeContext, GradeResult, InvalidAnswer
from graders.formula import parse_formula

PART = PartSpec(id="f", type="expression", prompt="?", symbols=("S", "T"))
REFERENCE = "1 - ln(100)*S/T"
LN10 = Mistake("f", "1 - ln(10)*S/T", "That is ln(10); the p99 needs ln(100).", "ln10")
# Equal, but sympy needs far longer than a second to show it, and numbers cannot (complex values).
SLOW_A = "sqrt(-S)*((S+T+1)^60 - (S-T+2)^60)/((S+T+1)^30 - (S-T+2)^30)"
SLOW_B = "sqrt(-S)*((S+T+1)^30 + (S-T+2)^30)"


def grade(answer: str, reference: str = REFERENCE, mistakes: tuple[Mistake, ...] = ()) -> GradeResult:
    return expression.grade(PART, answer, GradeContext(reference=reference, mistakes=mistakes))


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """Every child process the grader starts, to check it was killed."""
    started: list[subprocess.Popen[bytes]] = []
    real = subprocess.Popen

    def recording(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc = real(*args, **kwargs)  # type: ignore[call-overload]
        started.append(proc)
        return proc

    monkeypatch.setattr(subprocess, "Popen", recording)
    return started


def test_equivalent_formula_is_correct(children: list[subprocess.Popen[bytes]]) -> None:
    r = grade("(T - S*log(100))/T")
    assert (r.verdict, r.score) == ("correct", 1.0)
    assert r.echo == r"\frac{T - S \ln{\left(100 \right)}}{T}"
    assert len(children) == 1 and children[0].poll() is not None


@pytest.mark.parametrize("answer", ["1 - 2*ln(10)*S/T", "(T - S*(ln(4) + ln(25)))/T",
                                    "1 - log(100, e)*S/T", "1 - S*ln(10)^1*2/T"])
def test_other_equivalent_forms(answer: str) -> None:
    assert grade(answer).verdict == "correct"


def test_not_equivalent() -> None:
    r = grade("1 - ln(10)*S/T")
    assert (r.verdict, r.score, r.mistake) == ("incorrect", 0.0, "")
    assert r.feedback == "Not equivalent to the expected formula."


def test_not_equivalent_names_a_missing_symbol() -> None:
    r = grade("1 - ln(100)*S")
    assert r.verdict == "incorrect" and "depends on T, yours does not" in r.feedback


def test_known_mistake_by_equivalence(children: list[subprocess.Popen[bytes]]) -> None:
    r = grade("(T - S*ln(10))/T", mistakes=(LN10,))
    assert (r.verdict, r.score, r.mistake) == ("incorrect", 0.0, "ln10")
    assert r.feedback == LN10.feedback
    assert all(p.poll() is not None for p in children)


def test_identical_forms_need_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no child process should start")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    assert grade("1 - ln(100)*S/T").verdict == "correct"
    assert grade("1 - S*ln(100)/T").verdict == "correct"  # same after sympy's ordering
    assert grade("1 - ln(10)*S/T", mistakes=(LN10,)).mistake == "ln10"


def test_invalid_answer_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no child process should start")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    for bad in ("__import__('os').system('id')", "S +", "x", "", "S" * 501):
        with pytest.raises(InvalidAnswer):
            grade(bad)


def test_time_limit_gives_error_without_hanging(
    monkeypatch: pytest.MonkeyPatch, children: list[subprocess.Popen[bytes]]
) -> None:
    monkeypatch.setattr(expression, "TIME_LIMIT_S", 0.5)
    start = time.monotonic()
    r = grade(SLOW_A, reference=SLOW_B)
    elapsed = time.monotonic() - start
    assert (r.verdict, r.score) == ("error", 0.0)
    assert "not counted" in r.feedback
    assert elapsed < 10  # interpreter start + 0.5 s, not the ~25 s simplify needs
    assert len(children) == 1 and children[0].poll() is not None  # killed


def test_tiny_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expression, "TIME_LIMIT_S", 0.01)
    assert grade(SLOW_A, reference=SLOW_B).verdict == "error"


def test_child_that_fails_gives_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expression, "_CHILD_CODE", "import sys; sys.exit(3)")
    assert grade("(T - S*log(100))/T").verdict == "error"
    monkeypatch.setattr(expression, "_CHILD_CODE", "print('ready'); print('garbage')")
    assert grade("(T - S*log(100))/T").verdict == "error"


def test_numeric_inconclusive_falls_back_to_simplify() -> None:
    s = ("S", "T")
    a = parse_formula("sqrt(-S)*(S+1)^2", s).expr  # imaginary at every positive point
    same = parse_formula("sqrt(-S)*(S^2 + 2*S + 1)", s).expr
    other = parse_formula("sqrt(-S)*(S^2 + 1)", s).expr
    assert expression.compare(a, [same, other], stop_at_first_equal=False) == ["equal", "different"]


def test_compare_order_and_early_stop() -> None:
    s = ("S", "T")
    a = parse_formula("S*T + S", s).expr
    b = parse_formula("S*(T + 1)", s).expr
    c = parse_formula("S*T", s).expr
    assert expression.compare(a, [c, b]) == ["different", "equal"]
    assert expression.compare(a, [b, c]) == ["equal", None]  # stopped once the reference matched
    assert expression.compare(a, []) == []


def test_near_zero_values_are_not_called_different() -> None:
    s = ("S", "T")
    zero = parse_formula("(S+T)^2 - S^2 - 2*S*T - T^2", s).expr
    assert expression.compare(zero, [sympy.Integer(0)]) == ["equal"]


def test_min_max_abs_evaluate() -> None:
    assert grade("max(S, T) + min(S, T)", reference="S + T").verdict == "correct"
    assert grade("abs(S - T) + S", reference="max(S, T)*2 - T").verdict == "correct"


def test_authoring_errors_are_not_invalid_answers() -> None:
    with pytest.raises(ValueError) as excinfo:
        grade("S", reference="S +")
    assert not isinstance(excinfo.value, InvalidAnswer)
    with pytest.raises(ValueError):
        grade("S", reference="x")  # not one of the part's symbols
    with pytest.raises(ValueError):
        grade("S", mistakes=(Mistake("f", 3.0, "not a formula"),))


# --- where the formulas are compared: counts, the variant's values, a wide range -------------

COUNTS = PartSpec(id="f", type="expression", prompt="?", symbols=("N", "B"),
                  symbol_kinds=(("N", "count"), ("B", "count")))
REALS = PartSpec(id="f", type="expression", prompt="?", symbols=("S", "T"))


def grade_in(part: PartSpec, answer: str, reference: str,
             values: dict[str, float] | None = None) -> GradeResult:
    ctx = GradeContext(reference=reference, symbol_values=values or {})
    return expression.grade(part, answer, ctx)


def agree_on_the_old_range(part: PartSpec, a: str, b: str) -> bool:
    """Whether two formulas agree on a grid over [0.1, 10] (counts: 1..10), the only range the
    grader used to sample: the pairs below must, or they would not test the wider sampling."""
    ea, eb = (parse_formula(f, part.symbols).expr for f in (a, b))
    grid = {"real": (0.1, 0.3, 1.0, 2.5, 7.0, 10.0), "count": (1, 2, 3, 5, 8, 10)}
    points: list[dict[sympy.Symbol, sympy.Expr]] = [{}]
    for name in part.symbols:
        s = sympy.Symbol(name, positive=True)
        points = [p | {s: sympy.nsimplify(v)} for p in points for v in grid[part.symbol_kind(name)]]
    return all(abs(complex(ea.subs(p)) - complex(eb.subs(p))) < 1e-12 for p in points)


@pytest.mark.parametrize(("part", "answer", "reference"), [
    (COUNTS, "min(N, 10.5)*(B-1)", "N*(B-1)"),
    (REALS, "max(S, 0.05)/T", "S/T"),
    (REALS, "abs(S - 0.01) + 0.01", "S"),  # |x| only shows below S = 0.01
    (REALS, "min(S, 100*T)", "S"),  # a piecewise formula written with min
    (REALS, "S*max(1, T/20)", "S"),
    (COUNTS, "N*(B-1)*min(1, 20/B)", "N*(B-1)"),
    (COUNTS, "N*(B-1) + max(0, N - 12)", "N*(B-1)"),
])
def test_formulas_that_differ_outside_the_old_range_are_different(
    part: PartSpec, answer: str, reference: str
) -> None:
    assert agree_on_the_old_range(part, answer, reference)
    r = grade_in(part, answer, reference)
    assert (r.verdict, r.score) == ("incorrect", 0.0)


@pytest.mark.parametrize(("part", "answer", "reference"), [
    (COUNTS, "N*B - N", "N*(B-1)"),  # expanded
    (COUNTS, "(N*B^2 - N)/(B + 1)", "N*(B-1)"),  # factored the other way
    (COUNTS, "N*(B^2 - 2*B + 1)/(B - 1)", "N*(B-1)"),  # undefined at B = 1 only: removable
    (REALS, "1 - (ln(4) + 2*ln(5))*S/T", REFERENCE),  # log identities
    (REALS, "1 - ln(1000)*S/T + ln(10)*S/T", REFERENCE),
    (REALS, "max(S, T) + ln(1 + exp(-abs(S - T)))", "ln(exp(S) + exp(T))"),  # no overflow at 1e7
    (REALS, "(S + T*exp(T - S))/(1 + exp(T - S))", "(exp(S)*S + exp(T)*T)/(exp(S) + exp(T))"),
    (COUNTS, "B*sqrt(ln(N^2))", "B*sqrt(2*ln(N))"),
    (COUNTS, "2*B*N/min(N, B)", "2*max(1, N/B)*B"),
])
def test_true_equivalents_written_differently_are_correct(
    part: PartSpec, answer: str, reference: str
) -> None:
    assert grade_in(part, answer, reference).verdict == "correct"


def test_counts_are_sampled_as_whole_numbers() -> None:
    # (-1)^(2N) is 1 for every whole N and not even real between them.
    assert grade_in(COUNTS, "B*(-1)^(2*N)", "B").verdict == "correct"
    as_reals = PartSpec(id="f", type="expression", prompt="?", symbols=("N", "B"))
    assert grade_in(as_reals, "B*(-1)^(2*N)", "B").verdict == "incorrect"


def test_a_count_that_may_be_zero_is_sampled_at_zero() -> None:
    part = PartSpec(id="f", type="expression", prompt="?", symbols=("N", "i"),
                    symbol_kinds=(("N", "count"), ("i", "count0")))
    assert grade_in(part, "(N - 1 - i)*max(1, i)", "(N - 1 - i)*i").verdict == "incorrect"
    assert grade_in(part, "N - 1 - i", "(N - 1 - i)").verdict == "correct"


def test_an_answer_undefined_where_the_reference_is_defined_is_different() -> None:
    # Equal to S wherever T > S; for T < S not a real number (and not the same complex one).
    assert grade_in(REALS, "S + sqrt(T - S) - sqrt((T - S)^3)/(T - S)", "S").verdict == \
        "incorrect"
    # Equal for every B >= 2, undefined at B = 1 where the reference is 0, and not a removable
    # hole: just above B = 1 the answer runs off to -infinity.
    assert grade_in(COUNTS, "N*(B-1) + min(0, ln(B - 1))", "N*(B-1)").verdict == "incorrect"


def test_the_variants_own_values_are_sampled() -> None:
    # Differs only near T = 1e9 (far past the wide range): the variant's value brings it in.
    part = REALS
    answer, reference = "S*min(1, 2e8/T)", "S"
    assert grade_in(part, answer, reference).verdict == "correct"
    assert grade_in(part, answer, reference, values={"S": 1.0, "T": 1e9}).verdict == "incorrect"


def test_exact_simplification_settles_what_sampling_cannot() -> None:
    # Zero only by cancellation: every sample is noise, so sympy decides.
    s = ("S", "T")
    zero = parse_formula("(S + T)^3 - S^3 - 3*S^2*T - 3*S*T^2 - T^3", s).expr
    assert expression.compare(zero, [sympy.Integer(0)], symbols=s) == ["equal"]


def test_every_exercise_reference_and_mistakes_in_several_variants() -> None:
    """Each expression part: the reference equals a rewritten copy of itself, and each listed
    mistake differs from it, with the part's kinds and the variant's own values."""
    from exercises import registry

    checked = 0
    for spec in registry.load_all().values():
        for part in spec.parts:
            if part.type != "expression":
                continue
            first = part.symbols[0]
            for variant in (registry.CANONICAL_VARIANT, 1, 2):
                params = registry.params_for(spec, variant)
                ref_text = registry.solve(spec, params)[part.id]
                ref = parse_formula(ref_text, part.symbols).expr
                # (x + 1)^2 / (x^2 + 2x + 1) is 1, but sympy does not cancel it while reading.
                copy = parse_formula(f"({ref_text})*({first} + 1)^2/({first}^2 + 2*{first} + 1)",
                                     part.symbols).expr
                assert copy != ref
                mistakes = [parse_formula(m.answer, part.symbols).expr
                            for m in registry.mistakes(spec, params, part.id)]
                values = registry.symbol_values(spec, params).get(part.id, {})
                found = expression.compare(ref, [copy, *mistakes], stop_at_first_equal=False,
                                           symbols=part.symbols, kinds=dict(part.symbol_kinds),
                                           values=values)
                where = f"{spec.slug}.{part.id} variant {variant}"
                assert found == ["equal"] + ["different"] * len(mistakes), (where, found)
                checked += 1
    assert checked >= 14 * 3
