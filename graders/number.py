"""Grader for `number` parts: a number with an optional unit, compared within a tolerance.

Contract: `grade(part, answer_text, ctx)` where `ctx.reference` is a `Quantity` (or a bare float in
the part's unit) and `ctx.mistakes` hold floats (or Quantities) in the part's unit.

Reading. The answer is split by a regular expression into a number (`2.7`, `-1`, `2,684,354,560`,
`1_200`, `1 200` with a thin space, `2.7e9`, `2.7×10^9`, `2.7x10^9`, `10^9`, `$0.44`) and a unit
string, which `graders.units` reads with a strict grammar. A bare number is in the part's unit.
Nothing is evaluated. Unreadable input or a unit of the wrong kind raises `InvalidAnswer` (no
attempt used).

Counts and rates are written as engineers write them. Where the part's unit is a plain count or a
count per time ("", "1/s", "token", "tok/s", "FLOP", ...), and only there:
  * an SI multiplier may follow the number, glued or spaced: k or K (10^3), M (10^6), G (10^9),
    T (10^12), or the words thousand, million, billion, trillion: `44.9k`, `2.29 M`, `1.5G tok/s`.
    `m` (milli) and `B`/`bn` (bytes / ambiguous "billion") are refused with a message saying what
    to write instead. A data, time or money part never reads a lone `G` as a multiplier: `2.7 G`
    there is refused as a prefix without its unit, so it cannot be confused with GB.
  * where the part's unit counts nothing itself ("" or a rate per time), the noun the part counts
    may follow: `1,200 requests`, `7 tokens`, `41 requests/s`, `3 blocks`, `252 all-reduces`. The
    noun is accepted when its singular or plural appears in the part's prompt, and it is not a unit
    of another kind (`7 s` for a count is still the kind message); `req`/`tok` count as the
    words request/token. A word the prompt does not name stays an unknown unit.

Verdicts. x = the answer converted to the part's unit.
  correct   1.0  |x − ref| ≤ max(tolerance·|ref|, abs_tolerance); tolerance 0 = exact (1e-9);
                 or x is the reference rounded as the part allows (`graders.precision`): to two
                 significant figures unless the prompt states the precision, to N where it asks
                 for N, never for exact counts.
                 A correct answer is always correct, whatever mistakes lie near it.
Otherwise the answer is compared with every candidate slip: each authored mistake's value and each
detector's value (the answer the slip would give: the GB/GiB swap of the unit typed, a fraction for
a percentage or the reverse, the right number in the wrong unit, ref × 10^k, 2·ref, ref/2, 8·ref and
ref/8 for data). Nearness is `distance(x, v)`: |x − v| / max(|x|, |v|, abs_tolerance), which orders
same-sign values exactly as |ln(x/v)| does and stays defined at zero and across signs.
  A slip is named only when x is within tolerance of its value AND that value is the nearest to x
  of the reference and all candidates. Then:
  incorrect 0.0  an authored mistake: its feedback (and name);
  partial   0.5  GB/GiB confusion, percent/fraction, right number wrong unit, power of ten;
  incorrect 0.0  factor of 2, factor of 8 (bits vs bytes).
  Coinciding slips: the named slip's group is every candidate within tolerance of x whose value lies
  within tolerance of the nearest one's (or exactly as near). Authored mistakes in the group beat
  detectors (the detector is not claimed as well); two or more authored mistakes with different
  feedback give one message that asserts neither ("N different slips give this value ... It may be
  either of these: (1) ... (2) ..."), with their names joined by "|" as `mistake`. Detectors alone
  in a group go by the order above (a fraction for a percentage before ref/100 as a power of ten).
  incorrect 0.0  "Close, but outside the tolerance: check the rounding" when x is within 3× the
                 tolerance and no candidate is nearer to x than the reference; otherwise
                 "Not the expected value."
Kinds. A named slip reports its kind(s) in `GradeResult.kinds` (exercises.mistake_kinds): an
authored mistake its own (every one of a group), a detector its fixed one: gb_vs_gib for the
GB/GiB swap; unit_slip for percent/fraction, the wrong unit and a power of ten; miscounted_term for
a factor of 2; bits_vs_bytes for a factor of 8. An answer that names no slip has no kind.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import pint

from exercises.coinciding import one_message, slips_in
from exercises.spec import Mistake, PartSpec, Quantity
from graders.base import GradeContext, GradeResult, InvalidAnswer, Verdict, read_input
from graders.precision import is_rounding_of
from graders.units import (
    ParsedUnit,
    compatible,
    conversion_factor,
    has_information,
    kind_of,
    parse_unit,
    swap_binary_prefixes,
    uses_binary_prefix,
)

MAX_CHARS = 2000
PARTIAL = 0.5
# Tolerance 0 means "exact", up to float noise from unit conversion.
EXACT_REL = 1e-9
# "Close" is anything within this many tolerances that still failed.
CLOSE_FACTOR = 3.0
MAX_POWER_OF_TEN = 18

_EXP = r"[+\-−]?[0-9]{1,3}"
_SUP = r"[⁺⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]{1,3}"
_TIMES = r"\s*[x×*·]\s*"
_NUMBER = re.compile(
    rf"""
    (?P<sign>[+\-−])?\s*
    (?P<dollar>\$)?\s*
    (?:
        10\s*(?:\^|\*\*)\s*(?P<p1>{_EXP})                   # 10^9
      | 10(?P<p2>{_SUP})                                   # 10⁹
      | (?P<mant>(?:[0-9]{{1,3}}(?:,[0-9]{{3}})+|[0-9]+)(?:\.[0-9]*)?|\.[0-9]+)
        (?:
            [eE](?P<e1>{_EXP})                             # 2.7e9
          | {_TIMES}10\s*(?:\^|\*\*)\s*(?P<e2>{_EXP})      # 2.7 × 10^9
          | {_TIMES}10(?P<e3>{_SUP})                        # 2.7×10⁹
        )?
    )
    """,
    re.VERBOSE,
)
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")
_APPROX = re.compile(r"^(?:~|≈|about\s)\s*", re.IGNORECASE)
# Thousands groups written with an underscore (Python's 1_200) or a thin / narrow no-break space
# (typeset 1 200): rewritten as commas before anything else reads the text, because read_input
# turns every exotic space into a plain one and "2 3" must stay unreadable. Only a group of exactly
# three digits counts, so "12_34" is left alone and then refused.
_GROUP_SEPARATOR = re.compile(r"(?<=[0-9])[_\u2009\u202f](?=[0-9]{3}(?![0-9]))")

# SI multipliers after a count: the symbol must end where a word would (end, space or "/"), so
# "2.7 Gz" or "3 Mtok" are read as units, not as a multiplier and a remainder.
_MULTIPLIERS = {
    "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12,
}
_MULTIPLIER = re.compile(r"^(thousand|million|billion|trillion|[kKMGT])(?=$|[\s/])")
_BAD_MULTIPLIER = re.compile(r"^(m|B|bn|b)(?=$|[\s/])")
_LONE_PREFIX = re.compile(r"^[kKMGTPE]$")
_NOUN = re.compile(r"^([A-Za-z](?:[A-Za-z'\-]*[A-Za-z])?)(?=$|[\s/])")
# Units whose quantities are counts of things: a count or a rate of these may take a multiplier.
_COUNT_BASES = frozenset({"token", "request", "transfer", "FLOP"})
_TIME_BASES = frozenset({"second", "minute", "hour", "day"})
# Prompt words that are never the thing counted, so "7 the" or "3 per" is not read as a noun.
_NOT_NOUNS = frozenset(
    "a an and any are as at be by can do does each every for from give how in into is it its many "
    "much number of on one or per that the their them then there these this those to was what "
    "when which while who why will with would you your".split()
)


@dataclass(frozen=True)
class ReadNumber:
    """An answer as read: the number (any SI multiplier applied), its unit (None for a bare number),
    and, for the echo, the multiplier and the count noun that were read and set aside."""

    value: float
    unit: ParsedUnit | None
    multiplier: str = ""
    noun: str = ""
    typed: str = ""


def _split(text: str) -> tuple[float, str, str]:
    """(number, the text after it, the whole answer as typed). Raises `InvalidAnswer`."""
    text = _APPROX.sub("", text.strip())
    if not text:
        raise InvalidAnswer("Type a number, for example 2.7 or 2.7 GB.")
    m = _NUMBER.match(text)
    if m is None:
        raise InvalidAnswer(
            f"Start the answer with a number (for example 2.7, 2.7e9 or 2.7 GB); could not read {_clip(text)!r}."
        )
    value = _number_value(m)
    rest = text[m.end():].strip()
    if rest.startswith(",") or rest.startswith("."):
        raise InvalidAnswer(
            "Use a dot for decimals (2.7, not 2,7); commas may only group thousands (2,684,354,560)."
        )
    if m.group("dollar"):
        rest = "$" + (rest if rest.startswith("/") or not rest else " " + rest)
    return value, rest, text


def read_number(text: str) -> ReadNumber:
    """Split an answer into a number and a unit, strictly (no multiplier, no noun: those depend on
    the part, see `read_answer`). Raises `InvalidAnswer` when it cannot."""
    value, rest, typed = _split(text)
    return ReadNumber(value, parse_unit(rest) if rest else None, typed=typed)


def read_answer(text: str, part: PartSpec, target: ParsedUnit) -> ReadNumber:
    """Read an answer for this part: the strict reading when its unit fits the part, else (for a
    count or rate part) a multiplier and the part's own noun. Raises `InvalidAnswer`."""
    value, rest, typed = _split(text)
    if not rest:
        return ReadNumber(value, None, typed=typed)
    unit: ParsedUnit | None = None
    error: InvalidAnswer | None = None
    try:
        unit = parse_unit(rest)
    except InvalidAnswer as exc:
        error = exc
    if unit is not None and compatible(unit, target):
        return ReadNumber(value, unit, typed=typed)
    if _counts_things(target):
        read = _read_count(value, rest, typed, part, target)
        if read is not None:
            return read
        bad = _BAD_MULTIPLIER.match(rest)
        if bad and (unit is None or not compatible(unit, target)):
            raise InvalidAnswer(_bad_multiplier_message(bad.group(1)))
    elif _LONE_PREFIX.match(rest):
        raise InvalidAnswer(
            f"{rest!r} on its own is only a prefix: write the unit too (this part wants "
            f"{kind_of(target)}, e.g. {target.text})."
        )
    if error is not None:
        noun = _NOUN.match(rest)
        if noun and _counts_things(target) and not _has_count_base(target):
            # Say why a word was refused: nouns are read, but only the question's own.
            raise InvalidAnswer(f"{error} After a count you may name what it counts, in the "
                                f"question's own word (for example 1,200 requests).") from None
        raise error
    assert unit is not None
    raise InvalidAnswer(_kind_message(unit, target))


def _read_count(value: float, rest: str, typed: str, part: PartSpec, target: ParsedUnit
                ) -> ReadNumber | None:
    """`44.9k`, `2.29M tok/s`, `1,200 requests`, `41 requests/s` for a count or rate part; None when
    the text is none of these (the caller then reports the strict reading's error)."""
    multiplier = ""
    m = _MULTIPLIER.match(rest)
    if m:
        multiplier = m.group(1)
        # Rounded to 15 digits so 44.9k is 44900, not 44900.000000000007, for exact parts.
        value = float(f"{value * _MULTIPLIERS[multiplier]:.15g}")
        rest = rest[m.end():].strip()
        if not rest:
            return ReadNumber(value, None, multiplier, typed=typed)
        try:
            unit = parse_unit(rest)
        except InvalidAnswer:
            unit = None
        if unit is not None and compatible(unit, target):
            return ReadNumber(value, unit, multiplier, typed=typed)
    n = _NOUN.match(rest)
    if n is None or not _names_the_count(n.group(1), part, target):
        return None
    tail = rest[n.end():].strip()
    unit = parse_unit(tail) if tail else None  # "41 requests/parsec": the tail's own error
    if unit is not None and not compatible(unit, target):
        return None
    return ReadNumber(value, unit, multiplier, n.group(1), typed=typed)


def _counts_things(target: ParsedUnit) -> bool:
    """A plain count or a count per time: "", "1/s", "token", "tok/s", "FLOP", "req/min"."""
    counts = [f for f in target.factors if f.base in _COUNT_BASES and f.power == 1]
    per_time = [f for f in target.factors if f.base in _TIME_BASES and f.power == -1]
    return len(counts) <= 1 and len(per_time) <= 1 and len(counts) + len(per_time) == len(target.factors)


def _has_count_base(target: ParsedUnit) -> bool:
    return any(f.base in _COUNT_BASES for f in target.factors)


def _names_the_count(word: str, part: PartSpec, target: ParsedUnit) -> bool:
    """Whether `word` may be set aside as the noun this part counts (see the module docstring)."""
    if _has_count_base(target):
        return False  # "7 blocks" for a token count is not 7 tokens
    if word.lower() in _NOT_NOUNS:
        return False
    key = _noun_key(word)
    return key is not None and key in _prompt_nouns(part.prompt)


def _noun_key(word: str) -> str | None:
    """The word's singular, or for a registry count unit ("req", "tokens") its base name; None for a
    unit of another kind ("s", "GB", "ms"), which is never a noun."""
    try:
        unit = parse_unit(word)
    except InvalidAnswer:
        return _singular(word.lower())
    if len(unit.factors) == 1:
        f = unit.factors[0]
        if f.base in _COUNT_BASES and f.power == 1 and f.prefix == "":
            return f.base.lower()
    return None


@lru_cache(maxsize=512)
def _prompt_nouns(prompt: str) -> frozenset[str]:
    words = re.findall(r"[A-Za-z](?:[A-Za-z'\-]*[A-Za-z])?", prompt)
    return frozenset(
        key for w in words if w.lower() not in _NOT_NOUNS and (key := _noun_key(w)) is not None
    )


def _singular(word: str) -> str:
    """A plain English singular, good enough to match "blocks"/"block", "copies"/"copy"."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 1:
        return word[:-1]
    return word


def _bad_multiplier_message(symbol: str) -> str:
    if symbol == "m":
        return ("'m' would mean milli (a thousandth); for thousands or millions write k or M "
                "(44.9k, 2.29M) or use e-notation (2.29e6).")
    return (f"{symbol!r} is not read as billion here (B is bytes, b bits); write G or e-notation "
            "for billions (1.5G, 1.5e9).")


def _number_value(m: re.Match[str]) -> float:
    mant = (m.group("mant") or "1").replace(",", "")
    exp_text = next((g for g in (m.group(k) for k in ("p1", "p2", "e1", "e2", "e3")) if g), "0")
    exp = int(exp_text.translate(_SUPERSCRIPTS).replace("−", "-"))
    sign = "-" if m.group("sign") in ("-", "−") else ""
    value = float(f"{sign}{mant}e{exp}")
    if not math.isfinite(value):
        raise InvalidAnswer("That number is too large.")
    return value


def _clip(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[:n] + "…"


# --- tolerance and nearness ------------------------------------------------------------------


@dataclass(frozen=True)
class Tolerance:
    """|x − target| ≤ max(rel·|target|, abs)."""

    rel: float
    abs: float

    @staticmethod
    def of(part: PartSpec) -> Tolerance:
        rel = part.tolerance if part.tolerance and part.tolerance > 0 else EXACT_REL
        return Tolerance(rel, max(part.abs_tolerance or 0.0, 0.0))

    def matches(self, x: float, target: float, widen: float = 1.0) -> bool:
        return abs(x - target) <= widen * max(self.rel * abs(target), self.abs)

    def coincide(self, a: float, b: float) -> bool:
        """Two slip values the tolerance cannot tell apart (either lies in the other's window)."""
        return self.matches(a, b) or self.matches(b, a)


def distance(x: float, v: float, abs_tolerance: float = 0.0) -> float:
    """How far the answer x is from a value v, relatively: |x − v| / max(|x|, |v|, abs_tolerance).

    For x, v of the same sign this is 1 − min/max = 1 − exp(−|ln(x/v)|), so it ranks candidates
    exactly as the log distance does (a slip 2× too big is as far as one 2× too small); unlike
    the log it is defined at zero and across signs (> 1), and the absolute tolerance keeps values
    near zero from looking infinitely far apart."""
    scale = max(abs(x), abs(v), abs_tolerance)
    return 0.0 if scale == 0 else abs(x - v) / scale


@dataclass(frozen=True)
class _Slip:
    """A candidate wrong answer: an authored mistake or a detector's value, in the part's unit."""

    value: float
    feedback: str
    score: float = 0.0
    name: str = ""  # an authored mistake's name; "" for a detector
    authored: bool = False
    rank: int = 0  # among coinciding detectors, the lower rank speaks
    kind: str = ""  # exercises.mistake_kinds id(s), "|"-joined for an entry of coinciding slips


# --- grading --------------------------------------------------------------------------------


def grade(part: PartSpec, answer_text: str, ctx: GradeContext) -> GradeResult:
    """Grade a number answer; see the module docstring for the verdicts."""
    target = _part_unit(part)
    ref = _in_part_unit(ctx.reference, target, part)
    if isinstance(answer_text, str):
        answer_text = _GROUP_SEPARATOR.sub(",", answer_text)
    text = read_input(answer_text, max_chars=MAX_CHARS, what="number")
    got = read_answer(text, part, target)
    unit = got.unit or target
    if not compatible(unit, target):  # pragma: no cover - read_answer only returns fitting units
        raise InvalidAnswer(_kind_message(unit, target))
    x = got.value * conversion_factor(unit, target)
    if not math.isfinite(x):  # finite as typed, past a float once in this part's unit
        raise InvalidAnswer(f"That number is too large in {target.text or 'this part'}.")
    tol = Tolerance.of(part)
    sig = _significant_digits(part)
    echo = _echo(got, x, target, sig)
    extra = {"value": x, "unit": target.text}

    def result(score: float, verdict: Verdict, feedback: str, mistake: str = "",
               kinds: tuple[str, ...] = ()) -> GradeResult:
        return GradeResult(score, verdict, feedback, echo=echo, mistake=mistake, kinds=kinds,
                           extra=extra)

    if tol.matches(x, ref) or is_rounding_of(part, x, ref):
        return result(1.0, "correct", f"Correct: {_with_unit(format_value(ref, sig), target)}.")
    slips = [*_authored(ctx.mistakes, target), *_detectors(got, x, ref, target)]
    group = _named_slips(x, ref, slips, tol)
    if group:
        authored = [s for s in group if s.authored]
        if authored:
            return result(0.0, "incorrect", _mistake_feedback(authored),
                          "|".join(dict.fromkeys(s.name or "mistake" for s in authored)),
                          _kinds(authored))
        speaker = min(group, key=lambda s: s.rank)
        verdict: Verdict = "partial" if speaker.score > 0 else "incorrect"
        return result(speaker.score, verdict, speaker.feedback, kinds=_kinds([speaker]))
    d_ref = distance(x, ref, tol.abs)
    nearer = any(distance(x, s.value, tol.abs) < d_ref for s in slips)
    if not nearer and _is_close(x, ref, tol):
        return result(0.0, "incorrect",
                      "Close, but outside the tolerance: check the rounding of intermediate values.")
    return result(0.0, "incorrect", "Not the expected value.")


def _named_slips(x: float, ref: float, slips: list[_Slip], tol: Tolerance) -> list[_Slip]:
    """The slips the answer names (see the module docstring), nearest first; [] for none."""
    if not slips:
        return []
    dist = {id(s): distance(x, s.value, tol.abs) for s in slips}
    nearest = min(slips, key=lambda s: dist[id(s)])
    d_best = dist[id(nearest)]
    # Strictly nearer than the reference, and within tolerance of the answer: a slip the answer
    # is no nearer to than to the right value is not the slip it shows.
    if not d_best < distance(x, ref, tol.abs) or not tol.matches(x, nearest.value):
        return []
    group = [s for s in slips if tol.matches(x, s.value)
             and (tol.coincide(s.value, nearest.value) or math.isclose(dist[id(s)], d_best))]
    return sorted(group, key=lambda s: dist[id(s)])


def _kinds(slips: list[_Slip]) -> tuple[str, ...]:
    """Every kind the named slips stand for, each once, in order."""
    return tuple(dict.fromkeys(k for s in slips for k in s.kind.split("|") if k))


def _mistake_feedback(authored: list[_Slip]) -> str:
    """One authored mistake's feedback, or one message for several that asserts none of them."""
    texts = [text for s in authored for text in slips_in(s.feedback)]
    return authored[0].feedback if len(set(texts)) == 1 else one_message(texts)


def _authored(mistakes: tuple[Mistake, ...] | list[Mistake], target: ParsedUnit) -> list[_Slip]:
    out = []
    for mistake in mistakes:
        value = _mistake_value(mistake, target)
        if value is not None and math.isfinite(value):
            out.append(_Slip(value, mistake.feedback, 0.0, mistake.name or "mistake", True,
                             kind=mistake.kind))
    return out


def _part_unit(part: PartSpec) -> ParsedUnit:
    try:
        return parse_unit(part.unit or "")
    except InvalidAnswer as exc:  # an authoring error, not the student's: a plain ValueError
        raise ValueError(f"part {part.id!r}: unit {part.unit!r} cannot be read: {exc}") from None


def _in_part_unit(ref: object, target: ParsedUnit, part: PartSpec) -> float:
    """The reference as a float in the part's unit. Raises ValueError for a malformed reference."""
    if isinstance(ref, Quantity):
        try:
            unit = parse_unit(ref.unit or "")
            return float(ref.value) * conversion_factor(unit, target)
        except (InvalidAnswer, pint.DimensionalityError) as exc:
            raise ValueError(f"part {part.id!r}: reference {ref!r} is not in {target.text!r}") from exc
    if isinstance(ref, int | float) and not isinstance(ref, bool):
        return float(ref)
    raise ValueError(f"part {part.id!r}: reference {ref!r} is not a Quantity or a number")


def _mistake_value(mistake: Mistake, target: ParsedUnit) -> float | None:
    answer = mistake.answer
    if isinstance(answer, Quantity):
        try:
            return float(answer.value) * conversion_factor(parse_unit(answer.unit or ""), target)
        except (InvalidAnswer, pint.DimensionalityError):
            return None
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        return float(answer)
    return None


def _kind_message(unit: ParsedUnit, target: ParsedUnit) -> str:
    if not target.text:
        return f"This part wants a plain number without a unit; {unit.text!r} is {kind_of(unit)}."
    return f"This part wants {kind_of(target)}, e.g. {target.text}; {unit.text!r} is {kind_of(unit)}."


# --- detectors: the value each known slip would give, with its feedback ----------------------
# A detector only proposes a value; whether it speaks is decided by nearness in `_named_slips`.


def _detectors(got: ReadNumber, x: float, ref: float, target: ParsedUnit) -> list[_Slip]:
    out = [
        *_binary_prefix_slip(got, ref, target),
        *_percent_slip(got, ref, target),
        *_unit_slip(got, ref, target),
        *_power_of_ten_slip(x, ref, target),
    ]
    if ref != 0:
        out += [
            # A bare factor of 2 is a term counted twice or half of one left out.
            _Slip(2 * ref, "Off by a factor of 2: your answer is twice the expected value.", rank=4,
                  kind="miscounted_term"),
            _Slip(ref / 2, "Off by a factor of 2: your answer is half the expected value.", rank=4,
                  kind="miscounted_term"),
        ]
        if has_information(target):
            out += [_Slip(v, "Off by a factor of 8: bits vs bytes?", rank=5, kind="bits_vs_bytes")
                    for v in (8 * ref, ref / 8)]
    # A "slip" at the reference's own value is no slip (e.g. a unit whose factor is 1).
    return [s for s in out if s.value != ref and math.isfinite(s.value)]


def _binary_prefix_slip(got: ReadNumber, ref: float, target: ParsedUnit) -> list[_Slip]:
    """The number is right for the other byte convention: GB written for a GiB figure or back."""
    label = got.unit or target
    other = swap_binary_prefixes(label)
    if other is None or not compatible(other, target):
        return []
    # The answer had the student meant `other`: got.value·f(other) = ref, i.e. x = ref·f(label)/f(other).
    value = ref * conversion_factor(label, target) / conversion_factor(other, target)
    number = format_value(got.value, 4)
    binary, decimal = (label, other) if uses_binary_prefix(label) else (other, label)
    wrote = f"you wrote {label.text}" if got.unit else f"this part wants {target.text}"
    feedback = (
        f"{decimal.text} vs {binary.text}: {number} is the figure in {other.text}, but {wrote}. "
        + _prefixes_explained(decimal, binary)
    )
    return [_Slip(value, feedback, PARTIAL, rank=0, kind="gb_vs_gib")]


def _prefixes_explained(decimal: ParsedUnit, binary: ParsedUnit) -> str:
    """ "1 GB = 10^9 bytes; 1 GiB = 2^30 bytes ≈ 1.074 GB." for the first prefixed data factor."""
    levels = ("kilo", "mega", "giga", "tera", "peta", "exa")
    for dec, bin_ in zip(decimal.factors, binary.factors, strict=True):
        if dec.prefix in levels and dec.prefix != bin_.prefix:
            n = levels.index(dec.prefix) + 1
            word = f"{dec.base}s"
            return (
                f"1 {dec.symbol} = 10^{3 * n} {word}; "
                f"1 {bin_.symbol} = 2^{10 * n} {word} ≈ {1.024**n:.3f} {dec.symbol}."
            )
    return ""


def _percent_slip(got: ReadNumber, ref: float, target: ParsedUnit) -> list[_Slip]:
    """A fraction typed for a percentage (0.7 for 70 %), or a percentage for a fraction."""
    if got.unit is not None or not target.is_dimensionless or ref == 0:
        return []
    scale = conversion_factor(target, parse_unit(""))
    if math.isclose(scale, 0.01):
        feedback = f"This part wants a percentage: did you mean {format_value(got.value * 100, 4)} %?"
        return [_Slip(ref / 100, feedback, PARTIAL, rank=1, kind="unit_slip")]
    if math.isclose(scale, 1.0):
        feedback = (
            f"This part wants a fraction: did you mean {format_value(got.value / 100, 4)} "
            f"(= {format_value(got.value, 4)} %)? You can also type the % sign."
        )
        return [_Slip(ref * 100, feedback, PARTIAL, rank=1, kind="unit_slip")]
    return []


def _unit_slip(got: ReadNumber, ref: float, target: ParsedUnit) -> list[_Slip]:
    """The number alone is right in the part's unit, but another unit was typed after it."""
    if got.unit is None:
        return []
    factor = conversion_factor(got.unit, target)
    if math.isclose(factor, 1.0, rel_tol=1e-12):
        return []
    feedback = (
        f"{format_value(got.value, 4)} is the right number in {target.text}, "
        f"but you wrote {got.unit.text}: check the unit."
    )
    return [_Slip(ref * factor, feedback, PARTIAL, rank=2, kind="unit_slip")]


def _power_of_ten_slip(x: float, ref: float, target: ParsedUnit) -> list[_Slip]:
    if ref == 0 or x == 0:
        return []
    k = round(math.log10(abs(x)) - math.log10(abs(ref)))  # x / ref itself can overflow
    if k == 0 or abs(k) > MAX_POWER_OF_TEN:
        return []
    size = "too large" if k > 0 else "too small"
    advice = "" if target.is_dimensionless else " Check the unit and its prefix (k, M, G, T)."
    feedback = f"Right digits, wrong power of ten: your answer is 10^{abs(k)} times {size}.{advice}"
    return [_Slip(ref * 10.0**k, feedback, PARTIAL, rank=3, kind="unit_slip")]


def _is_close(x: float, ref: float, tol: Tolerance) -> bool:
    if tol.rel <= EXACT_REL and tol.abs == 0:
        return False  # exact parts: no "close"
    return tol.matches(x, ref, widen=CLOSE_FACTOR)


# --- formatting -----------------------------------------------------------------------------


def _significant_digits(part: PartSpec) -> int | None:
    """Digits worth showing for this tolerance: 2 % -> 3; exact parts -> None (all of them)."""
    if not part.tolerance or part.tolerance <= 0:
        return None
    return min(max(math.ceil(-math.log10(part.tolerance)) + 1, 3), 10)


def format_value(x: float, sig: int | None = 4) -> str:
    """A human-sized rendering: "2.68", "2,684,354,560" (exact integers), "2.68e9", "0.0012"."""
    if not math.isfinite(x):
        return str(x)
    if sig is None:
        if x == int(x) and abs(x) < 1e15:
            return f"{int(x):,}"
        sig = 12
    if x == 0:
        return "0"
    exp = math.floor(math.log10(abs(x)))
    if -3 <= exp < 6:
        decimals = max(sig - 1 - exp, 0)
        text = f"{x:,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    mant, _, power = f"{x:.{sig - 1}e}".partition("e")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(power)}"


def _with_unit(number: str, unit: ParsedUnit) -> str:
    return f"{number} {unit.text}" if unit.text else number


def _echo(got: ReadNumber, x: float, target: ParsedUnit, sig: int | None) -> str:
    if got.multiplier or got.noun:  # "44.9k = 44,900", "1,200 requests = 1,200": say what counted
        return f"{got.typed} = {_with_unit(format_value(x, sig or 6), target)}"
    typed = format_value(got.value, None if got.value == int(got.value) else 12)
    if got.unit is None:
        return _with_unit(typed, target)
    shown = _with_unit(typed, got.unit) if got.unit.factors else f"{typed}{got.unit.text}"
    if got.unit.text == target.text or got.unit.factors == target.factors:
        return shown
    return f"{shown} = {_with_unit(format_value(x, sig or 6), target)}"
