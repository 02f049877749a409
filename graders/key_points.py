"""Which key points of a text part an answer makes, misses, or gets backwards (no Django).

For each key point the verdict is `covered`, `missing` or `contradicted`, with the sentence of the
answer that decided it and, when not covered, a line saying why not. How:

1. The answer is cut into claims: sentences, and the parts of a sentence joined by "; ", ", but",
   ", whereas" or ", then" outside brackets (so a "not" in one part does not turn the other
   around, and "first X, then Y" is two claims). A leading "No," or "Yes," is dropped. A line that is a list
   of terms (no function words, or comma-separated fragments of one or two words) is not a claim;
   nor is a sentence that repeats the prompt or copies a key point's own wording.
2. Each claim is embedded (graders/text_model.py) and compared, by cosine similarity, with the key
   point, its paraphrases (`also`) and the claims that contradict it (`against`).
3. Embeddings barely see negation ("X does not read every weight" sits next to "X reads every
   weight"), so polarity is counted apart: a claim close to the point or a paraphrase that uses
   mostly the same words with the opposite number of negations contradicts it; one close to an
   `against` claim with the same polarity contradicts it; one that negates an `against` claim in
   its own words affirms the point. Opposite polarity in other words decides nothing: "the
   weights never stay on chip" does make "every weight is read each step", and a "not" in a
   side clause ("so nothing is copied") does not turn the claim around. A claim counts only for
   the key points it is (nearly) closest to.
4. A key point with a `number` counts only if the deciding sentence, or one beside it, states this
   variant's value within the point's tolerance; a sentence whose numbers are all far off gets the
   point marked contradicted (the claim is made with the wrong figure).

The thresholds were set on the labelled answers in the exercises' selftest.toml files
(bench/text_feedback.py prints the agreement they reach).
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from exercises.spec import KeyPoint

Status = Literal["covered", "missing", "contradicted"]

COVER = 0.62  # a claim this close to the point or a paraphrase makes it
AGAINST = 0.70  # this close to an `against` claim, with its polarity, contradicts it
FLIP_OVERLAP = 0.5  # word overlap of two claims of opposite polarity for one to negate the other
MARGIN = 0.03  # a claim covers the points within this of the one it is closest to
NEAR = 0.45  # a claim this close is named as the nearest when the point is missing
PROMPT_ECHO = 0.85  # a claim this close to a sentence of the prompt repeats it
COPIED = 0.85  # word overlap (Jaccard) with a key point's own text: pasted, not said
MIN_WORDS = 4

NEGATIONS = frozenset({
    "not", "no", "never", "none", "nothing", "neither", "nor", "cannot", "nobody", "nowhere",
})
FUNCTION_WORDS = frozenset({
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this",
    "that", "these", "those", "so", "because", "since", "as", "if", "then", "than", "of", "to",
    "in", "on", "at", "by", "for", "with", "from", "into", "per", "each", "every", "which",
    "who", "what", "when", "where", "while", "would", "will", "can", "could", "should", "must",
    "may", "might", "does", "do", "did", "has", "have", "had", "and", "or", "but", "not", "no",
    "only", "all", "more", "less", "most", "we", "you", "they", "there", "here", "their",
    "our", "your", "one", "both", "also", "still", "even", "once", "twice",
})

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+|;\s+|,\s+(?=(?:but|whereas|while|yet|then|and then)\b)|\s+[-*•]\s+")
_WRAPPED = re.compile(r"(?<=[^\s.!?:;])[ \t]*\n[ \t]*(?=[a-z(])")
_ANSWER_WORD = re.compile(r"^(?:no|yes|nope|yeah|right|well)\s*[,.!:;—-]\s*", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
# A number, not part of a name ("Llama-3.1-8B", "H100", "sm_90"), with what follows it.
_NUMBER = re.compile(
    r"(?<![\w.])(?<![\w.]-)([-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"\s*(%|×|x\b|[a-zA-Zµ/]+(?:/[a-zA-Z]+)?)?")
MULTIPLIERS = {"k": 1e3, "K": 1e3, "thousand": 1e3, "M": 1e6, "million": 1e6,
               "billion": 1e9, "trillion": 1e12}


class Encoder(Protocol):
    def encode(self, texts: Sequence[str], *, keep: bool = True) -> np.ndarray: ...


@dataclass(frozen=True)
class PointVerdict:
    """One key point's verdict on one answer."""

    index: int
    status: Status
    sentence: str  # the claim that decided it ("" when no claim came near)
    why: str  # for missing / contradicted: why not, in one line
    similarity: float  # of the deciding claim to the point (or the contradicting claim)


@dataclass(frozen=True)
class Claim:
    text: str
    words: tuple[str, ...]
    negated: bool


# Negation words that do not turn a claim around ("no longer issues" is "stops issuing").
_NOT_NEGATING = re.compile(
    r"\b(?:no longer|no more than|no less than|not only|not just|no matter|for no reason|"
    r"nothing else|all or nothing|whether or not|if not|not least)\b")


def words_of(text: str) -> tuple[str, ...]:
    text = text.lower().replace("’", "'").replace("n't", " not")
    return tuple(_WORD.findall(_NOT_NEGATING.sub(" ", text)))


def is_negated(words: Sequence[str]) -> bool:
    return sum(1 for w in words if w in NEGATIONS) % 2 == 1


def is_claim(text: str, words: Sequence[str]) -> bool:
    """A sentence that asserts something: not a list of terms, not a question."""
    if len(words) < MIN_WORDS or text.rstrip("\"'”)").endswith("?"):
        return False
    function = sum(1 for w in words if w in FUNCTION_WORDS) / len(words)
    pieces = [p for p in re.split(r"[,/|;]", text) if p.strip()]
    listed = len(pieces) >= 3 and sum(len(words_of(p)) for p in pieces) / len(pieces) <= 3.0
    if listed:
        return function >= 0.25  # terms strung with commas: a claim only with real grammar
    # A terse sentence ("Capping concurrency lowers goodput.") asserts; a run of terms without
    # a full stop does not.
    return function > 0 or text.rstrip().endswith(".")


def claims_of(answer: str) -> list[Claim]:
    out = []
    for piece in pieces_of(answer):
        # "No, the GPU is not slow": the answer word is not part of the claim's polarity.
        text = _ANSWER_WORD.sub("", _BULLET.sub("", piece).strip().strip("\"'“”"))
        words = words_of(text)
        if is_claim(text, words):
            out.append(Claim(text, words, is_negated(words)))
    return out


def pieces_of(text: str) -> list[str]:
    """The text cut at sentence ends, line breaks, "; " and ", but" (see _SPLIT), except inside
    brackets: "(one launch; the step drops to 8.6 ms)" stays with its sentence. A line break
    before a lower-case word is a hard wrap inside a sentence, not a cut."""
    text = _WRAPPED.sub(" ", text)
    depth, start, out = 0, 0, []
    cuts = {m.start(): m.end() for m in _SPLIT.finditer(text)}
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
        elif i in cuts and depth == 0:
            out.append(text[start:i])
            start = i = cuts[i]
            continue
        i += 1
    out.append(text[start:])
    return [p for p in out if p.strip()]


def _jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa and sb else 0.0


def _flipped(a: Sequence[str], b: Sequence[str]) -> bool:
    """Two claims of opposite polarity that say nearly the same words: one negates the other
    (rather than saying something else in other words, where a negation count means little)."""
    core_a = [w for w in a if w not in NEGATIONS]
    core_b = [w for w in b if w not in NEGATIONS]
    return _jaccard(core_a, core_b) >= FLIP_OVERLAP


def numbers_in(text: str) -> list[tuple[float, str]]:
    """(value, what followed it) for each number written in the text."""
    out = []
    for m in _NUMBER.finditer(text):
        try:
            value = float(m.group(1).replace(",", ""))
        except ValueError:
            continue
        out.append((value, (m.group(2) or "").strip()))
    return out


def states_value(text: str, value: float, unit: str, tolerance: float) -> bool | None:
    """True if a number in `text` is `value` (in `unit`) within `tolerance`; False if the text
    has numbers that could be it but none is; None if it has none (a number in a unit of
    another kind, "128 µs" where a share is expected, is another figure, not a wrong one)."""
    comparable = False
    for number, after in numbers_in(text):
        readings, same_kind = _readings(number, after, unit)
        if any(math.isclose(r, value, rel_tol=tolerance) or (value == 0 and abs(r) <= tolerance)
               for r in readings):
            return True
        comparable = comparable or same_kind
    return False if comparable else None


def _readings(number: float, after: str, unit: str) -> tuple[list[float], bool]:
    """The values a written number may stand for in `unit` (as written, scaled by a word as in
    "2.3 million" or "82K", as a percentage, converted from a unit of the same kind), and
    whether it could be this figure at all: one written in a unit of another kind ("128 µs"
    where a share is expected) is another figure, so it never makes the point wrong. A unit
    word only half read ("60 FLOP per byte" for FLOP/B) still matches as written."""
    if after in MULTIPLIERS:
        return [number * MULTIPLIERS[after]], True
    readings = [number]
    if after == "%":
        return [number, number / 100], True
    if after and after not in ("×", "x") and unit:
        from graders import units

        try:
            target = units.parse_unit(unit)
            source = units.parse_unit(after)
        except Exception:  # noqa: BLE001 - a word that is not a unit: the number as written
            return readings, True
        if not units.compatible(source, target):
            return readings, False
        readings.append(number * units.conversion_factor(source, target))
    return readings, True


def _prompt_rows(prompt: str, encoder: Encoder) -> np.ndarray:
    sentences = [c.text for c in claims_of(prompt)] or [prompt]
    return encoder.encode(sentences)


def prime(parts: Sequence[tuple[str, Sequence[KeyPoint]]], encoder: Encoder) -> int:
    """Embed every part's prompt, key points and their claims ahead of the first answer (a
    worker's warm-up), so no student waits for them; returns how many strings."""
    texts: list[str] = []
    for prompt, points in parts:
        texts += [c.text for c in claims_of(prompt)] or [prompt]
        for p in points:
            texts += [p.text, *p.also, *p.against]
    encoder.encode(list(dict.fromkeys(texts)))
    return len(texts)


def match(points: Sequence[KeyPoint], answer: str, encoder: Encoder, *, prompt: str = "",
          numbers: dict[int, tuple[float, str, float]] | None = None, rules: bool = True
          ) -> list[PointVerdict]:
    """The verdict on each key point, in order. `numbers[i]` is (value, unit, relative
    tolerance) of point i's `number` in this variant. `rules=False` is the embedding alone
    (every sentence a claim, no polarity, no numbers): the baseline bench/text_feedback.py
    measures the rules against."""
    numbers = numbers or {}
    claims = claims_of(answer) if rules else [
        Claim(t, words_of(t), False) for t in (p.strip() for p in pieces_of(answer)) if t]
    if not claims:
        return [PointVerdict(i, "missing", "", "No sentence of the answer makes a claim.", 0.0)
                for i in range(len(points))]
    rows = encoder.encode([c.text for c in claims], keep=False)
    if prompt and rules:
        echo = (rows @ _prompt_rows(prompt, encoder).T).max(axis=1)
        kept = [i for i, e in enumerate(echo) if e < PROMPT_ECHO]
        claims, rows = [claims[i] for i in kept], rows[kept]
        if not claims:
            return [PointVerdict(i, "missing", "", "The answer repeats the question.", 0.0)
                    for i in range(len(points))]
    pos = [rows @ encoder.encode([p.text, *p.also]).T for p in points]  # claims x anchors
    flips = [_flip_mask(claims, p, rules) for p in points]
    # Each claim's closest key point, among the readings that could count for it: a claim
    # covers only the points it is (nearly) closest to, so "the GPU waits on the host" makes
    # the GPU-is-idle point, not the one next to it.
    closest = (np.max([np.where(f, -1.0, m).max(axis=1) for m, f in zip(pos, flips,
                                                                        strict=True)], axis=0)
               if rules else None)
    return [_verdict(i, point, claims, rows, pos[i], flips[i], closest, encoder,
                     numbers.get(i) if rules else None)
            for i, point in enumerate(points)]


def _flip_mask(claims: list[Claim], point: KeyPoint, rules: bool) -> np.ndarray:
    """claims x anchors: True where the claim negates that anchor (opposite polarity, mostly
    the same words)."""
    anchors = [words_of(a) for a in (point.text, *point.also)]
    mask = np.zeros((len(claims), len(anchors)), dtype=bool)
    if rules:
        for i, claim in enumerate(claims):
            for j, words in enumerate(anchors):
                mask[i, j] = claim.negated != is_negated(words) and _flipped(claim.words, words)
    return mask


def _verdict(index: int, point: KeyPoint, claims: list[Claim], rows: np.ndarray,
             pos_sim: np.ndarray, flipped: np.ndarray, closest: np.ndarray | None,
             encoder: Encoder, number: tuple[float, str, float] | None) -> PointVerdict:
    rules = closest is not None
    against_sim = (rows @ encoder.encode(list(point.against)).T if point.against
                   else np.zeros((len(claims), 0)))
    against_words = [words_of(a) for a in point.against]
    against_neg = [is_negated(w) and rules for w in against_words]
    point_words = words_of(point.text)

    best_cover: tuple[float, int] = (-1.0, -1)
    best_against: tuple[float, int, str] = (-1.0, -1, "")
    nearest: tuple[float, int] = (-1.0, -1)
    for i, claim in enumerate(claims):
        if rules and _jaccard(claim.words, point_words) >= COPIED:
            continue  # the key point pasted back, not said
        for j, sim in enumerate(pos_sim[i]):
            sim = float(sim)
            nearest = max(nearest, (sim, i))
            if flipped[i, j]:
                if sim >= COVER:
                    best_against = max(best_against, (sim, i, "negation"))
            elif sim >= COVER and (closest is None or sim >= closest[i] - MARGIN):
                best_cover = max(best_cover, (sim, i))
        for j, sim in enumerate(against_sim[i]):
            sim = float(sim)
            if sim < AGAINST:
                continue
            if claim.negated == against_neg[j]:
                best_against = max(best_against, (sim, i, "against"))
            elif _flipped(claim.words, against_words[j]):
                best_cover = max(best_cover, (sim, i))  # denies the opposite: affirms the point

    if best_against[1] >= 0 and best_against[0] >= best_cover[0]:
        sim, i, how = best_against
        why = ("says the opposite of this point (the negation turns it around)"
               if how == "negation" else "asserts the opposite of this point")
        return PointVerdict(index, "contradicted", claims[i].text, f"This sentence {why}.", sim)
    if best_cover[1] >= 0:
        sim, i = best_cover
        if number is not None:
            return _with_number(index, claims, i, sim, number)
        return PointVerdict(index, "covered", claims[i].text, "", sim)
    sim, i = nearest
    if i >= 0 and sim >= NEAR:
        return PointVerdict(index, "missing", claims[i].text,
                            "The closest sentence is on the topic but does not make this "
                            "point.", sim)
    return PointVerdict(index, "missing", "", "No sentence makes this point.", max(sim, 0.0))


def _with_number(index: int, claims: list[Claim], i: int, sim: float,
                 number: tuple[float, str, float]) -> PointVerdict:
    """A point that depends on the variant's figure: the claim (or one beside it) must state
    it. The expected figure is not named: it may be the answer to another part."""
    value, unit, tolerance = number
    own = states_value(claims[i].text, value, unit, tolerance)
    if own or any(states_value(claims[k].text, value, unit, tolerance)
                  for k in (i - 1, i + 1, i - 2, i + 2) if 0 <= k < len(claims)):
        return PointVerdict(index, "covered", claims[i].text, "", sim)
    if own is False:
        return PointVerdict(index, "contradicted", claims[i].text,
                            "The point is made with a figure that is not this variant's: check "
                            "the number against your own calculation.", sim)
    return PointVerdict(index, "missing", claims[i].text,
                        "The point depends on this variant's figure: state the number.", sim)
