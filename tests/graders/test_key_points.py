"""graders.key_points and graders.text on the real model: what is covered, what is not, and
what cannot fool it. The per-exercise labelled answers are checked by the selftest; these pin the
rules those rest on, on a part made here."""
from __future__ import annotations

import pytest

from exercises.spec import KeyPoint, PartSpec
from graders import key_points, text, text_model
from graders.base import GradeContext, InvalidAnswer

POINTS = (
    KeyPoint("Batch-1 decode reads every weight once per generated token.",
             also=("Each decode step streams all the weights from HBM.",
                   "Every token has to load the whole model from memory."),
             against=("The weights stay in the cache between decode steps.",)),
    KeyPoint("A faster GPU makes the ratio worse, because the host costs stay the same.",
             also=("A faster GPU only lowers the floor while the host overhead stays the same.",),
             against=("A faster GPU would close the gap.",)),
    KeyPoint("The idle time inside the step is the largest loss.",
             also=("Most of the lost time is the GPU idling between kernels inside the step.",),
             number="idle_ms", number_tolerance=0.1),
)
PART = PartSpec(id="why", type="text", prompt="Why is batch-1 decode slow, and would a faster "
                "GPU help?", key_points=tuple(p.text for p in POINTS), key_point_specs=POINTS)
CTX = GradeContext(reference="", key_numbers={2: (2.68, "ms", 0.1)})


@pytest.fixture(scope="module")
def encoder() -> text_model.Encoder:
    return text_model.encoder()


def statuses(answer: str, encoder: text_model.Encoder) -> list[str]:
    return [v.status for v in key_points.match(POINTS, answer, encoder, prompt=PART.prompt,
                                               numbers=CTX.key_numbers)]


def test_a_strong_answer_covers_each_point(encoder: text_model.Encoder) -> None:
    answer = ("Each decode step has to stream all of the weights from HBM. The GPU idles "
              "between kernels inside the step for 2.7 ms, the biggest loss. A faster GPU only "
              "lowers the floor; the host overhead stays the same, so the ratio gets worse.")
    assert statuses(answer, encoder) == ["covered", "covered", "covered"]


def test_an_answer_asserting_the_opposite_is_contradicted(encoder: text_model.Encoder) -> None:
    answer = ("Batch-1 decode does not read every weight per generated token. "
              "A faster GPU would close the gap.")
    assert statuses(answer, encoder)[:2] == ["contradicted", "contradicted"]


def test_denying_a_contradicting_claim_affirms_the_point(encoder: text_model.Encoder) -> None:
    assert statuses("A faster GPU would not close the gap.", encoder)[1] == "covered"


@pytest.mark.parametrize("answer", [
    "weights, HBM, bandwidth, faster GPU, host overhead, idle time, ratio",
    "decode; weights; memory bandwidth; GPU; host; floor",
    "I like hiking in the mountains. My favourite food is pasta, and the weather is nice.",
    "Why is batch-1 decode slow, and would a faster GPU help?",
    "Is each weight read once per token? Would a faster GPU help?",
])
def test_lists_questions_echoes_and_essays_cover_nothing(answer: str,
                                                         encoder: text_model.Encoder) -> None:
    assert "covered" not in statuses(answer, encoder)


def test_a_pasted_key_point_is_not_a_claim_of_ones_own(encoder: text_model.Encoder) -> None:
    assert statuses(POINTS[0].text, encoder)[0] != "covered"


@pytest.mark.parametrize(("figure", "status"), [
    ("2.7 ms", "covered"), ("2680 µs", "covered"), ("2,700 us", "covered"),
    ("2680 ms", "contradicted"), ("27 ms", "contradicted"),
])
def test_a_point_with_a_number_needs_this_variants_figure(figure: str, status: str,
                                                         encoder: text_model.Encoder) -> None:
    answer = f"Most of the lost time is the GPU idling between kernels inside the step, {figure}."
    assert statuses(answer, encoder)[2] == status


def test_without_the_figure_the_point_is_missing_and_says_why(
        encoder: text_model.Encoder) -> None:
    answer = "Most of the lost time is the GPU idling between kernels inside the step."
    verdict = key_points.match(POINTS, answer, encoder, numbers=CTX.key_numbers)[2]
    assert (verdict.status, verdict.sentence) == ("missing", answer)
    assert "state the number" in verdict.why


def test_a_not_in_one_clause_does_not_turn_the_other_around(
        encoder: text_model.Encoder) -> None:
    answer = ("The weights are not cached on chip, but each decode step streams all the "
              "weights from HBM.")
    assert statuses(answer, encoder)[0] == "covered"


def test_brackets_stay_with_their_sentence() -> None:
    assert key_points.pieces_of("Use a graph (one launch; 8.6 ms). Then fuse.") == [
        "Use a graph (one launch; 8.6 ms).", "Then fuse."]


def test_the_grader_reports_one_check_per_key_point_in_order(
        encoder: text_model.Encoder) -> None:
    r = text.grade(PART, "A faster GPU would close the gap.", CTX)
    assert (r.verdict, r.score) == ("pending", 0.0)
    assert [c.name for c in r.checks] == ["0", "1", "2"]
    assert [c.passed for c in r.checks] == [False, False, False]
    assert r.checks[1].message.startswith("contradicted: ")
    assert r.extra["automatic"]["covered"] == 0 and r.extra["automatic"]["total"] == 3
    assert r.feedback.startswith("Automatic: 0 of 3 key points covered, 1 contradicted.")


def test_an_unloadable_model_falls_back_to_review(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> text_model.Encoder:
        raise text_model.ModelUnavailable("the text model failed to load: no weights")

    monkeypatch.setattr(text_model, "encoder", broken)
    r = text.grade(PART, "Each decode step streams all the weights from HBM.", CTX)
    assert (r.verdict, r.score, r.checks) == ("pending", 0.0, ())
    assert r.feedback.startswith("Automatic feedback is unavailable right now")
    assert "- Batch-1 decode reads every weight" in r.feedback


@pytest.mark.parametrize(("answer", "message"), [
    ("x " * 2501, "too long"), ("binary \x00\x01 junk", "control"), ("   ", "Write a short"),
])
def test_bad_input_is_refused_before_the_model(answer: str, message: str) -> None:
    with pytest.raises(InvalidAnswer, match=message):
        text.grade(PART, answer, CTX)
