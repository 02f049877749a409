"""Grader for `text` parts: instant key-point feedback, saved for an instructor's grade.

Contract: `grade(part, answer_text, ctx)` returns verdict "pending" with score 0.0: the grade is
the instructor's (their rubric score replaces it). What comes at once is automatic feedback from
graders/key_points.py: one check per key point, in the order of `key_points`, named by its index
("0", "1", ...), passed when covered, its message saying covered / missing / contradicted with
the deciding sentence and why not; `extra["automatic"]` holds the covered share ("automatic: 4 of
6 key points") for the page to show as provisional. If the model cannot be loaded, the answer is
saved for review as before, with a notice. Empty or whitespace-only answers, answers over
`MAX_CHARS` characters and answers with control characters raise `InvalidAnswer`.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from exercises.spec import PartSpec
from graders import key_points, text_model
from graders.base import Check, GradeContext, GradeResult, InvalidAnswer, read_input

MAX_CHARS = 5000


def grade(part: PartSpec, answer_text: str, ctx: GradeContext) -> GradeResult:
    """Key-point feedback on a text answer, saved for review; see the module docstring."""
    text = read_answer(answer_text)
    words = len(text.split())
    echo = f"{words} word{'s' if words != 1 else ''}"
    extra: dict[str, Any] = {"key_points": list(part.key_points)}
    if not checkable(part):
        return GradeResult(score=0.0, verdict="pending", feedback=review_feedback(part),
                           echo=echo, extra=extra)
    try:
        encoder = text_model.encoder()
    except text_model.ModelUnavailable as exc:
        extra["automatic"] = {"unavailable": str(exc)}
        return GradeResult(
            score=0.0, verdict="pending", echo=echo, extra=extra,
            feedback="Automatic feedback is unavailable right now; your answer is saved for an "
                     "instructor's review.\n" + review_feedback(part))
    verdicts = key_points.match(part.key_point_specs, text, encoder, prompt=part.prompt,
                                numbers=ctx.key_numbers)
    checks = tuple(_check(part, v) for v in verdicts)
    covered = sum(1 for v in verdicts if v.status == "covered")
    total = len(verdicts)
    extra["automatic"] = {
        "covered": covered, "total": total, "score": round(covered / total, 6),
        "model": text_model.MODEL_NAME,
        "points": [asdict(v) | {"similarity": round(v.similarity, 4)} for v in verdicts],
    }
    return GradeResult(score=0.0, verdict="pending", feedback=_feedback(part, verdicts),
                       checks=checks, echo=echo, extra=extra)


def automatic_reading(result: dict[str, Any] | None) -> dict[str, Any]:
    """The automatic reading `grade` stored in a result's JSON (`extra["automatic"]`: covered,
    total, and per key point its status, sentence and why), or {} when there is none."""
    return ((result or {}).get("extra") or {}).get("automatic") or {}


def read_answer(answer_text: str) -> str:
    """The answer, stripped; InvalidAnswer (no attempt used) when it is empty, over MAX_CHARS
    characters, or holds control or invisible characters. Also run in the request, before a
    text answer is queued (practice/actions/submissions.py)."""
    text = read_input(answer_text, max_chars=MAX_CHARS, what="answer", multiline=True)
    if not text:
        raise InvalidAnswer("Write a short explanation before submitting.")
    return text


def checkable(part: PartSpec) -> bool:
    """Whether the part's key points carry what the matcher checks them by (paraphrases,
    contradicting claims or a number): bare rubric lines get no automatic verdicts, since the
    labelled answers that calibrate it are written with those."""
    return any(p.also or p.against or p.number for p in part.key_point_specs)


def _check(part: PartSpec, v: key_points.PointVerdict) -> Check:
    point = part.key_points[v.index]
    message = f"{v.status}: {point}"
    if v.sentence:
        message += f"\n  Your sentence: “{v.sentence}”"
    if v.why:
        message += f"\n  Why not: {v.why}"
    return Check(str(v.index), v.status == "covered", message,
                 details={"status": v.status, "sentence": v.sentence, "why": v.why})


def _feedback(part: PartSpec, verdicts: list[key_points.PointVerdict]) -> str:
    covered = sum(1 for v in verdicts if v.status == "covered")
    contradicted = sum(1 for v in verdicts if v.status == "contradicted")
    head = f"Automatic: {covered} of {len(verdicts)} key points covered"
    if contradicted:
        head += f", {contradicted} contradicted"
    lines = [head + ". This is an automatic reading, not your grade: the answer is saved for "
             "an instructor's review, whose grade replaces it."]
    marks = {"covered": "✓", "missing": "·", "contradicted": "✗"}
    for v in verdicts:
        lines.append(f"{marks[v.status]} {v.status}: {part.key_points[v.index]}")
    return "\n".join(lines)


def review_feedback(part: PartSpec) -> str:
    """ "Saved for review" and the key points an instructor grades on, one per line."""
    if not part.key_points:
        return "Saved for review."
    points = "\n".join(f"- {p}" for p in part.key_points)
    return f"Saved for review. Key points a strong answer covers:\n{points}"
