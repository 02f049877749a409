"""How precise a `number` answer must be: the reference within the part's tolerance, or the
reference rounded as an engineer rounds it.

Unless a part's prompt states the precision it wants, the reference rounded to two significant
figures is correct: 2.7 GB for 2.68 GB. A prompt that asks for N significant figures gets the
reference rounded to N figures instead; one that asks for an exact count, a whole number or the
nearest unit gets no rounding beyond its tolerance. The number grader applies `accepts()`; the
exercise audit (`graders.policy`) holds every exercise's parts and mistakes to the same rule.
"""
from __future__ import annotations

import math
import re

from exercises.rounding import round_sig
from exercises.spec import PartSpec

# A prompt states its precision when it says one of these (case-insensitive).
_PRECISION = re.compile(
    r"significant (?:figure|digit)s?|\bexact(?:ly)?\b|\bwhole\b|\bcount\b|\binteger\b"
    r"|\bround(?:ed)? (?:up|down|to)\b|\bnearest\b|decimal places?",
    re.IGNORECASE,
)
_SIG_FIGS = re.compile(r"\b(\d|one|two|three|four|five|six) significant (?:figure|digit)s?",
                       re.IGNORECASE)
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
DEFAULT_SIG = 2
# Relative tolerance that stands for "exact" (float noise from unit conversion only).
EXACT_REL = 1e-9


def states_precision(prompt: str) -> bool:
    """Whether the prompt says how precise the answer must be."""
    return bool(_PRECISION.search(prompt))


def stated_sig_figs(prompt: str) -> int | None:
    """N when the prompt asks for N significant figures, else None."""
    m = _SIG_FIGS.search(prompt)
    if m is None:
        return None
    word = m.group(1).lower()
    return int(word) if word.isdigit() else _WORDS[word]


def rounding_sig(part: PartSpec) -> int | None:
    """The significant figures a rounded reference is accepted at, or None for no rounding."""
    if part.tolerance == 0:
        return None
    stated = stated_sig_figs(part.prompt)
    if stated is not None:
        return stated
    return None if states_precision(part.prompt) else DEFAULT_SIG


def within(x: float, target: float, rel: float, abs_tol: float) -> bool:
    """|x − target| ≤ max(rel·|target|, abs_tol)."""
    return abs(x - target) <= max(rel * abs(target), abs_tol)


def within_tolerance(part: PartSpec, x: float, target: float, widen: float = 1.0) -> bool:
    rel = part.tolerance if part.tolerance and part.tolerance > 0 else EXACT_REL
    return within(x, target, widen * rel, widen * max(part.abs_tolerance or 0.0, 0.0))


def is_rounding_of(part: PartSpec, x: float, ref: float) -> bool:
    """Whether `x` is the reference rounded to the figures this part accepts."""
    sig = rounding_sig(part)
    return sig is not None and math.isclose(x, round_sig(ref, sig), rel_tol=1e-9)


def accepts(part: PartSpec, x: float, ref: float) -> bool:
    """Whether `x` (in the part's unit) is graded correct against the reference `ref`."""
    return within_tolerance(part, x, ref) or is_rounding_of(part, x, ref)
