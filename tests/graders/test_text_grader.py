"""graders.text: saved for review, key points shown."""
from __future__ import annotations

import pytest

from exercises.spec import PartSpec
from graders import text
from graders.base import GradeContext, InvalidAnswer

PART = PartSpec(id="why", type="text", prompt="Why?", key_points=("KV is per token", "Decode is memory-bound"))
CTX = GradeContext(reference="A model answer.")


def test_saved_for_review_with_key_points() -> None:
    r = text.grade(PART, "Because decode reads\nthe whole KV cache.\tEach step.", CTX)
    assert (r.verdict, r.score) == ("pending", 0.0)
    assert r.feedback.startswith("Saved for review")
    assert "- KV is per token" in r.feedback and "- Decode is memory-bound" in r.feedback
    assert r.echo == "9 words"


def test_no_key_points() -> None:
    bare = PartSpec(id="why", type="text", prompt="Why?")
    assert text.grade(bare, "x", CTX).feedback == "Saved for review."


@pytest.mark.parametrize(
    ("answer", "message"),
    [("", "Write a short explanation"), ("  \n\t ", "Write a short explanation"),
     ("x" * 5001, "too long"), ("ok\x07", "control"), ("ok\u202eko", "control")],
)
def test_invalid(answer: str, message: str) -> None:
    with pytest.raises(InvalidAnswer, match=message):
        text.grade(PART, answer, CTX)


def test_limits_and_unicode_are_fine() -> None:
    assert text.grade(PART, "x" * 5000, CTX).verdict == "pending"
    assert text.grade(PART, "Ça marche — 70 % 🙂‍↔️", CTX).verdict == "pending"  # emoji ZWJ ok
