"""Property tests: any text is either graded or rejected with InvalidAnswer, quickly."""
from __future__ import annotations

import math
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exercises.spec import Mistake, Option, PartSpec, Quantity
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


def _log_distance(x: float, v: float) -> float:
    return abs(math.log(x / v))


@FAST
@given(
    ref=st.floats(1e-6, 1e9),
    ratios=st.lists(st.floats(0.3, 3.0), max_size=4),
    pick=st.integers(0, 4),
    wobble=st.floats(0.95, 1.05),
    tolerance=st.sampled_from([0.01, 0.02, 0.05]),
)
def test_number_names_only_the_nearest_mistake(ref: float, ratios: list[float], pick: int,
                                               wobble: float, tolerance: float) -> None:
    """Whenever a mistake's feedback comes back, the answer is within tolerance of it and at least
    as near to it (in log terms) as to the reference and to every other mistake; several mistakes
    come back together only in one message, never joined by "Or:"."""
    mistakes = tuple(Mistake("n", ref * r, f"Feedback {i}.", f"m{i}") for i, r in enumerate(ratios))
    bases = [ref, *(m.answer for m in mistakes)]
    answer = f"{bases[pick % len(bases)] * wobble:.12g}"
    part = PartSpec(id="n", type="number", prompt="?", unit="s", tolerance=tolerance)
    r = number.grade(part, answer, GradeContext(reference=Quantity(ref, "s"), mistakes=mistakes))
    x = r.extra["value"]
    assert "Or:" not in r.feedback
    if r.verdict == "correct" or not r.mistake:
        assert not any(m.feedback in r.feedback for m in mistakes) or r.verdict == "correct"
        if "rounding" in r.feedback:  # said only when no mistake is nearer than the reference
            assert all(_log_distance(x, m.answer) >= _log_distance(x, ref) - 1e-9
                       for m in mistakes)
        return
    named = [m for m in mistakes if m.name in r.mistake.split("|")]
    assert named and all(m.feedback in r.feedback for m in named)
    assert all(abs(x - m.answer) <= tolerance * m.answer * (1 + 1e-9) for m in named)
    nearest = min(_log_distance(x, m.answer) for m in named)
    assert nearest < _log_distance(x, ref) + 1e-9
    assert all(nearest <= _log_distance(x, m.answer) + 1e-9 for m in mistakes)
    if len(named) == 1:
        assert r.feedback == named[0].feedback
    else:
        assert r.feedback.startswith(("Two different slips", "Three different slips",
                                      "Four different slips"))


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
