"""Property tests: any text is either graded or rejected with InvalidAnswer, quickly."""
from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exercises.spec import Option, PartSpec, Quantity
from graders import choice, number, text
from graders.base import GradeContext, GradeResult, InvalidAnswer
from graders.formula import parse_formula
from graders.units import parse_unit

LIMIT_S = 1.0
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NUMBER_PART = PartSpec(id="n", type="number", prompt="?", unit="GB")
NUMBER_CTX = GradeContext(reference=Quantity(2.68435456, "GB"))
CHOICE_PART = PartSpec(id="c", type="ranking", prompt="?",
                       options=(Option("a", "Alpha"), Option("b", "Beta"), Option("c", "Gamma")))
CHOICE_CTX = GradeContext(reference=["b", "a", "c"])
TEXT_PART = PartSpec(id="t", type="text", prompt="?", key_points=("k",))

# Text built from the pieces each reader knows, so the examples go deep rather than fail at once.
number_like = st.lists(
    st.sampled_from(["2", "7", ".", ",", "e", "-", "+", "×", "x", "10", "^", "⁹", " ", "GB", "GiB",
                     "/", "s", "%", "$", "(", ")", "*", "tok", "per", "K", "µ", "b", "9", "0"]),
    max_size=20,
).map("".join)
formula_like = st.lists(
    st.sampled_from(["S", "T", "e", "pi", "1", "2", "9", "0.5", "1e9", "+", "-", "*", "/", "^", "**",
                     "(", ")", ",", " ", "ln(", "log(", "exp(", "sqrt(", "min(", "max(", "abs(",
                     ".", "_", "x", "__", "lambda", ":", "[", "'"]),
    max_size=30,
).map("".join)


def graded_or_invalid(fn, *args: object) -> object:  # noqa: ANN001 - any grader-like callable
    start = time.perf_counter()
    try:
        result = fn(*args)
    except InvalidAnswer as exc:
        assert str(exc)
        result = None
    assert time.perf_counter() - start < LIMIT_S
    return result


@FAST
@given(st.one_of(st.text(max_size=200), number_like))
def test_number_grader_total(answer: str) -> None:
    r = graded_or_invalid(number.grade, NUMBER_PART, answer, NUMBER_CTX)
    assert r is None or (isinstance(r, GradeResult) and 0.0 <= r.score <= 1.0)


@FAST
@given(st.one_of(st.text(max_size=100), number_like))
def test_unit_reader_total(unit: str) -> None:
    graded_or_invalid(parse_unit, unit)


@FAST
@given(st.one_of(st.text(max_size=200), formula_like))
def test_formula_parser_total(formula: str) -> None:
    graded_or_invalid(parse_formula, formula, ("S", "T"))


@FAST
@given(st.one_of(st.text(max_size=200),
                 st.lists(st.sampled_from(["a", "b", "c", "1", "2", ">", ",", " ", "Alpha", "x"]),
                          max_size=10).map("".join)))
def test_choice_grader_total(answer: str) -> None:
    r = graded_or_invalid(choice.grade, CHOICE_PART, answer, CHOICE_CTX)
    assert r is None or (isinstance(r, GradeResult) and 0.0 <= r.score <= 1.0)


@FAST
@given(st.text(max_size=300))
def test_text_grader_total(answer: str) -> None:
    r = graded_or_invalid(text.grade, TEXT_PART, answer, GradeContext(reference=""))
    assert r is None or (isinstance(r, GradeResult) and r.verdict == "pending")
