"""Grading an answer to a deck card (`exercises.deck`) through the site's number grader.

A card is graded as the number part it would be in an exercise: the card's question is the
prompt, its answer the reference, its unit and tolerance the part's. So a card reads units,
rounding and thousands separators exactly as an exercise does, and the number grader's slip
detectors (GB/GiB, bits/bytes, a power of ten, a factor of 2) speak on cards too.

Two readings are the card's own, because the question sets them:
  * a card whose answer counts in billions (`Quantity(70.55, "billion")`) is graded as a plain
    count, and a bare number is read in billions, as the question says ("70.6" = 70.6 billion;
    "70.6 billion", "70.6G" and "70,553,706,496 parameters" are read as written);
  * a figure per token may say so: "320 KiB/token", "320 KiB/tok" and "320 KiB per token" are
    "320 KiB".
After grading, the feedback cites the card's sources (and formula, for a derived card).
"""
from __future__ import annotations

import re
from dataclasses import replace

from exercises.deck import SCALES, Card
from exercises.spec import PartSpec, Quantity
from graders import number
from graders.base import GradeContext, GradeResult, InvalidAnswer, read_input


def part_for(card: Card) -> PartSpec:
    """The number part this card would be in an exercise."""
    scaled = card.answer.unit in SCALES
    return PartSpec(
        id="card",
        type="number",
        prompt=card.question,
        unit="" if scaled else card.answer.unit,
        tolerance=card.tolerance,
        tolerance_reason=card.tolerance_reason,
    )


def reference_for(card: Card) -> Quantity:
    """The card's answer in the part's unit (a count in billions becomes a plain count)."""
    scale = SCALES.get(card.answer.unit)
    return Quantity(card.answer.value * scale, "") if scale else card.answer


def grade_card(card: Card, answer_text: str) -> GradeResult:
    """Grade an answer to `card`; raises `InvalidAnswer` for unreadable input (no attempt used)."""
    # The number grader's own input check first: it bounds the length the readings below see.
    text = _without_per(read_input(answer_text, max_chars=number.MAX_CHARS, what="number"),
                        card.per)
    if card.answer.unit in SCALES and _is_bare(text):
        text = f"{text} {card.answer.unit}"
    result = number.grade(part_for(card), text, GradeContext(reference=reference_for(card)))
    cited = card.source_text
    return replace(
        result,
        feedback=f"{result.feedback} {cited}",
        extra={**result.extra, "card": card.id, "sources": [s.text for s in card.sources],
               "formula": card.formula},
    )


def _without_per(text: str, per: str) -> str:
    """ "320 KiB/token" -> "320 KiB" for a card whose figure is per `per` (nothing else changes)."""
    if not per:
        return text
    # The word or its three-letter short form, as the site writes rates ("tok/s").
    pattern = rf"\s*(?:/|\bper\s+)\s*(?:{re.escape(per)}|{re.escape(per[:3])})s?\s*$"
    return re.sub(pattern, "", text, flags=re.IGNORECASE)


def _is_bare(text: str) -> bool:
    """Whether the answer is a number alone (no unit, multiplier or noun after it)."""
    try:
        return number.read_number(text).unit is None
    except InvalidAnswer:
        return False
