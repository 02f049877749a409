"""Grader for `text` parts: a short explanation saved for an instructor to grade on key points.

Contract: `grade(part, answer_text, ctx)` returns verdict "pending" with score 0.0 (the instructor's
rubric score replaces it later) and feedback listing the part's key points, which the student sees
once they have submitted. Empty or whitespace-only answers, answers over `MAX_CHARS` characters and
answers with control characters raise `InvalidAnswer`.
"""
from __future__ import annotations

from exercises.spec import PartSpec
from graders.base import GradeContext, GradeResult, InvalidAnswer, read_input

MAX_CHARS = 5000


def grade(part: PartSpec, answer_text: str, ctx: GradeContext) -> GradeResult:
    """Store a text answer for review; see the module docstring."""
    text = read_input(answer_text, max_chars=MAX_CHARS, what="answer", multiline=True)
    if not text:
        raise InvalidAnswer("Write a short explanation before submitting.")
    words = len(text.split())
    return GradeResult(
        score=0.0,
        verdict="pending",
        feedback=review_feedback(part),
        echo=f"{words} word{'s' if words != 1 else ''}",
        extra={"key_points": list(part.key_points)},
    )


def review_feedback(part: PartSpec) -> str:
    """ "Saved for review" and the key points an instructor grades on, one per line."""
    if not part.key_points:
        return "Saved for review."
    points = "\n".join(f"- {p}" for p in part.key_points)
    return f"Saved for review. Key points a strong answer covers:\n{points}"
