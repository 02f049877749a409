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
