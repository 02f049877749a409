"""graders.choice: single, multi (PrairieLearn partial credit) and ranking (Kendall distance)."""
from __future__ import annotations

import pytest

from exercises.spec import Mistake, Option, PartSpec
from graders import choice
from graders.base import GradeContext, GradeResult, InvalidAnswer

OPTIONS = (
    Option("prefill", "Prefill compute"),
    Option("decode", "Decode memory"),
    Option("network", "The network"),
    Option("disk", "Disk"),
)


def part(kind: str = "choice", multi: bool = False, options: tuple[Option, ...] = OPTIONS) -> PartSpec:
    return PartSpec(id="c", type=kind, prompt="?", options=options, multi=multi)  # type: ignore[arg-type]


def grade(answer: str, reference: object, *, kind: str = "choice", multi: bool = False,
          mistakes: tuple[Mistake, ...] = ()) -> GradeResult:
    return choice.grade(part(kind, multi), answer,
                        GradeContext(reference=reference, mistakes=mistakes))


# --- single --------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["decode", "DECODE", " Decode ", "2", "Decode memory",
                                    "decode   MEMORY"])
def test_single_correct_by_id_number_or_label(answer: str) -> None:
    r = grade(answer, "decode")
    assert (r.verdict, r.score) == ("correct", 1.0)
    assert r.echo == "Decode memory"
    assert r.extra["answer"] == ["decode"]


def test_single_wrong() -> None:
    r = grade("prefill", "decode")
    assert (r.verdict, r.score) == ("incorrect", 0.0)


def test_single_mistake_feedback() -> None:
    m = Mistake("c", "prefill", "Prefill is compute-bound, but the question is decode.", "prefill")
    r = grade("1", "decode", mistakes=(m,))
    assert (r.verdict, r.score, r.mistake) == ("incorrect", 0.0, "prefill")
    assert r.feedback.startswith("Prefill is compute-bound")


@pytest.mark.parametrize(
    ("answer", "message"),
    [("gpu", "Unknown option 'gpu'. Valid options: prefill, decode, network, disk"),
     ("5", "Unknown option '5'"),
     ("0", "Unknown option '0'"),
     ("prefill, decode", "exactly one option"),
     ("", "Pick an option"),
     ("\x00", "control")],
)
def test_single_invalid(answer: str, message: str) -> None:
    with pytest.raises(InvalidAnswer, match=message):
        grade(answer, "decode")


# --- multi ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "score", "verdict"),
    [
        ("prefill, network", 1.0, "correct"),
        ("network,prefill", 1.0, "correct"),
        ("prefill network", 1.0, "correct"),  # spaces separate too
        ("1, 3", 1.0, "correct"),
        ("Prefill compute, The network", 1.0, "correct"),  # labels with spaces
        ("prefill", 0.5, "partial"),
        ("prefill, network, decode", 0.5, "partial"),  # (2 - 1) / 2
        ("prefill, decode", 0.0, "incorrect"),  # (1 - 1) / 2
        ("decode, disk", 0.0, "incorrect"),  # max(0, ...)
        ("prefill, prefill", 0.5, "partial"),  # repeats count once
    ],
)
def test_multi_partial_credit(answer: str, score: float, verdict: str) -> None:
    r = grade(answer, ["prefill", "network"], multi=True)
    assert r.score == pytest.approx(score)
    assert r.verdict == verdict


def test_multi_feedback_counts_without_naming() -> None:
    r = grade("prefill, decode", ["prefill", "network"], multi=True)
    assert "1 of 2 right options picked, 1 wrong pick" in r.feedback
    assert "network" not in r.feedback


def test_multi_mistake_is_the_same_set() -> None:
    m = Mistake("c", ["decode", "prefill"], "Decode is not the bottleneck here.", "with_decode")
    r = grade("prefill, decode", ["prefill", "network"], multi=True, mistakes=(m,))
    # The feedback comes with the score the set earns anyway (1 right − 1 wrong = 0 here).
    assert (r.mistake, r.score, r.verdict) == ("with_decode", 0.0, "incorrect")
    assert r.feedback.startswith("Decode is not the bottleneck here.")
    assert "1 of 2 right options picked, 1 wrong pick" in r.feedback
    assert grade("decode", ["prefill", "network"], multi=True, mistakes=(m,)).mistake == ""


def test_multi_mistake_never_takes_partial_credit_away() -> None:
    # Four of five right options and nothing wrong, listed as a known mistake: still 0.8, as the
    # same set scores unlisted, and more than the worse set that matches no mistake.
    ref = ["a", "b", "c", "d", "e"]
    part = PartSpec(id="c", type="choice", prompt="?", multi=True,
                    options=tuple(Option(i, i.upper()) for i in [*ref, "x", "y"]))
    m = Mistake("c", ["a", "b", "c", "d"], "Forgot e: it counts too.", "no_e")
    listed = choice.grade(part, "a, b, c, d", GradeContext(reference=ref, mistakes=(m,)))
    unlisted = choice.grade(part, "a, b, c, d", GradeContext(reference=ref))
    worse = choice.grade(part, "a, b, x", GradeContext(reference=ref, mistakes=(m,)))
    assert listed.score == unlisted.score == pytest.approx(0.8)
    assert listed.mistake == "no_e" and "Forgot e" in listed.feedback
    assert worse.score == pytest.approx(0.2)
    assert worse.score < listed.score


def test_multi_invalid() -> None:
    with pytest.raises(InvalidAnswer, match="Unknown option 'gpu'"):
        grade("prefill, gpu", ["prefill"], multi=True)
    with pytest.raises(InvalidAnswer, match="Pick"):
        grade(" , ", ["prefill"], multi=True)


# --- ranking -------------------------------------------------------------------------------

ORDER = ["decode", "prefill", "network", "disk"]


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("decode > prefill > network > disk", 1.0),
        ("decode, prefill, network, disk", 1.0),
        ("2 > 1 > 3 > 4", 1.0),
        ("decode prefill network disk", 1.0),
        ("prefill > decode > network > disk", 1 - 1 / 6),  # one adjacent swap
        ("decode > prefill > disk > network", 1 - 1 / 6),
        ("disk > network > prefill > decode", 0.0),  # reversed
        ("prefill > network > decode > disk", 1 - 2 / 6),
    ],
)
def test_ranking_kendall(answer: str, score: float) -> None:
    r = grade(answer, ORDER, kind="ranking")
    assert r.score == pytest.approx(score)
    assert r.verdict == ("correct" if score == 1 else "partial" if score > 0 else "incorrect")


def test_ranking_echo_and_feedback() -> None:
    r = grade("prefill > decode > network > disk", ORDER, kind="ranking")
    assert r.echo == "Prefill compute > Decode memory > The network > Disk"
    assert "5 of 6 pairs in the right order" in r.feedback


def test_ranking_mistake_is_the_same_order() -> None:
    m = Mistake("c", ["prefill", "decode", "network", "disk"], "Prefill first is the trap.", "pf")
    r = grade("prefill > decode > network > disk", ORDER, kind="ranking", mistakes=(m,))
    assert (r.mistake, r.score) == ("pf", pytest.approx(1 - 1 / 6))
    assert r.feedback == "Prefill first is the trap. 5 of 6 pairs in the right order."


@pytest.mark.parametrize(
    ("answer", "message"),
    [("decode > prefill > network", "missing: disk"),
     ("decode > prefill > network > disk > decode", "more than once"),
     ("decode > prefill > network > gpu", "Unknown option 'gpu'"),
     ("", "Pick an order")],
)
def test_ranking_must_be_a_permutation(answer: str, message: str) -> None:
    with pytest.raises(InvalidAnswer, match=message):
        grade(answer, ORDER, kind="ranking")


def test_kendall_distance() -> None:
    assert choice.kendall_distance(["a", "b", "c"], ["a", "b", "c"]) == 0
    assert choice.kendall_distance(["c", "b", "a"], ["a", "b", "c"]) == 3
    assert choice.kendall_distance(["b", "a", "c"], ["a", "b", "c"]) == 1


def test_bad_reference_is_an_authoring_error() -> None:
    with pytest.raises(ValueError) as excinfo:
        grade("decode", "gpu")
    assert not isinstance(excinfo.value, InvalidAnswer)
    with pytest.raises(ValueError):
        grade("decode > prefill > network > disk", ["decode", "prefill"], kind="ranking")
