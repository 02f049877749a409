"""Grader for `number` parts: a number with an optional unit, compared within a tolerance.

Contract: `grade(part, answer_text, ctx)` where `ctx.reference` is a `Quantity` (or a bare float in
the part's unit) and `ctx.mistakes` hold floats (or Quantities) in the part's unit.

Reading. The answer is split by a regular expression into a number (`2.7`, `-1`, `2,684,354,560`,
`2.7e9`, `2.7×10^9`, `2.7x10^9`, `10^9`, `$0.44`) and a unit string, which `graders.units` reads
with a strict grammar. A bare number is in the part's unit. Nothing is evaluated. Unreadable input
or a unit of the wrong kind raises `InvalidAnswer` (no attempt used).

Verdicts, in the order they are tried (x = the answer converted to the part's unit):
  correct   1.0  |x − ref| ≤ max(tolerance·|ref|, abs_tolerance); tolerance 0 = exact (1e-9)
  incorrect 0.0  x matches a known mistake (same tolerance): that mistake's feedback
  partial   0.5  GB/GiB (or kB/KiB, MB/MiB...) confusion; a percentage typed as a fraction or
                 the reverse; the right number with the wrong unit; off by an exact power of ten
  incorrect 0.0  off by a factor of 2 (or 8: bits vs bytes); close (within 3× the tolerance);
                 otherwise plain "not the expected value"
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pint

from exercises.spec import Mistake, PartSpec, Quantity
from graders.base import GradeContext, GradeResult, InvalidAnswer, Verdict, read_input
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


@dataclass(frozen=True)
class ReadNumber:
    """An answer as read: the number typed, and its unit (None for a bare number)."""

    value: float
    unit: ParsedUnit | None


def read_number(text: str) -> ReadNumber:
    """Split an answer into a number and a unit. Raises `InvalidAnswer` when it cannot."""
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
    unit = parse_unit(rest) if rest else None
    return ReadNumber(value, unit)


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


# --- tolerance ------------------------------------------------------------------------------


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


# --- grading --------------------------------------------------------------------------------


def grade(part: PartSpec, answer_text: str, ctx: GradeContext) -> GradeResult:
    """Grade a number answer; see the module docstring for the verdicts."""
    target = _part_unit(part)
    ref = _in_part_unit(ctx.reference, target, part)
    text = read_input(answer_text, max_chars=MAX_CHARS, what="number")
    got = read_number(text)
    unit = got.unit or target
    if not compatible(unit, target):
        raise InvalidAnswer(_kind_message(unit, target))
    x = got.value * conversion_factor(unit, target)
    tol = Tolerance.of(part)
    sig = _significant_digits(part)
    echo = _echo(got, x, target, sig)
    extra = {"value": x, "unit": target.text}

    def result(score: float, verdict: Verdict, feedback: str, mistake: str = "") -> GradeResult:
        return GradeResult(score, verdict, feedback, echo=echo, mistake=mistake, extra=extra)

    if tol.matches(x, ref):
        return result(1.0, "correct", f"Correct: {_with_unit(format_value(ref, sig), target)}.")
    for mistake in ctx.mistakes:
        value = _mistake_value(mistake, target)
        if value is not None and tol.matches(x, value):
            return result(0.0, "incorrect", mistake.feedback, mistake.name or "mistake")
    for hint in (_binary_prefix_hint, _percent_hint, _unit_hint, _power_of_ten_hint):
        feedback = hint(got, x, ref, target, tol)
        if feedback:
            return result(PARTIAL, "partial", feedback)
    for hint in (_factor_hint, _close_hint):
        feedback = hint(got, x, ref, target, tol)
        if feedback:
            return result(0.0, "incorrect", feedback)
    return result(0.0, "incorrect", "Not the expected value.")


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


# Each hint returns feedback when it applies, else "".


def _binary_prefix_hint(got: ReadNumber, x: float, ref: float, target: ParsedUnit, tol: Tolerance) -> str:
    """The number is right for the other byte convention: GB written for a GiB figure or back."""
    label = got.unit or target
    other = swap_binary_prefixes(label)
    if other is None or not compatible(other, target):
        return ""
    if not tol.matches(got.value * conversion_factor(other, target), ref):
        return ""
    number = format_value(got.value, 4)
    binary, decimal = (label, other) if uses_binary_prefix(label) else (other, label)
    wrote = f"you wrote {label.text}" if got.unit else f"this part wants {target.text}"
    return (
        f"{decimal.text} vs {binary.text}: {number} is the figure in {other.text}, but {wrote}. "
        + _prefixes_explained(decimal, binary)
    )


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


def _percent_hint(got: ReadNumber, x: float, ref: float, target: ParsedUnit, tol: Tolerance) -> str:
    """A fraction typed for a percentage (0.7 for 70 %), or a percentage for a fraction."""
    if got.unit is not None or not target.is_dimensionless or ref == 0:
        return ""
    scale = conversion_factor(target, parse_unit(""))
    if math.isclose(scale, 0.01) and tol.matches(x, ref / 100):
        return f"This part wants a percentage: did you mean {format_value(got.value * 100, 4)} %?"
    if math.isclose(scale, 1.0) and tol.matches(x, ref * 100):
        return (
            f"This part wants a fraction: did you mean {format_value(got.value / 100, 4)} "
            f"(= {format_value(got.value, 4)} %)? You can also type the % sign."
        )
    return ""


def _unit_hint(got: ReadNumber, x: float, ref: float, target: ParsedUnit, tol: Tolerance) -> str:
    """The number alone is right in the part's unit, but another unit was typed after it."""
    if got.unit is None or math.isclose(conversion_factor(got.unit, target), 1.0, rel_tol=1e-12):
        return ""
    if not tol.matches(got.value, ref):
        return ""
    return (
        f"{format_value(got.value, 4)} is the right number in {target.text}, "
        f"but you wrote {got.unit.text}: check the unit."
    )


def _power_of_ten_hint(got: ReadNumber, x: float, ref: float, target: ParsedUnit, tol: Tolerance) -> str:
    if ref == 0 or x == 0:
        return ""
    k = round(math.log10(abs(x / ref)))
    if k == 0 or abs(k) > MAX_POWER_OF_TEN or not tol.matches(x, ref * 10.0**k):
        return ""
    size = "too large" if k > 0 else "too small"
    advice = "" if target.is_dimensionless else " Check the unit and its prefix (k, M, G, T)."
    return f"Right digits, wrong power of ten: your answer is 10^{abs(k)} times {size}.{advice}"


def _factor_hint(got: ReadNumber, x: float, ref: float, target: ParsedUnit, tol: Tolerance) -> str:
    if ref == 0:
        return ""
    if tol.matches(x, 2 * ref):
        return "Off by a factor of 2: your answer is twice the expected value."
    if tol.matches(x, ref / 2):
        return "Off by a factor of 2: your answer is half the expected value."
    if has_information(target) and (tol.matches(x, 8 * ref) or tol.matches(x, ref / 8)):
        return "Off by a factor of 8: bits vs bytes?"
    return ""


def _close_hint(got: ReadNumber, x: float, ref: float, target: ParsedUnit, tol: Tolerance) -> str:
    if tol.rel <= EXACT_REL and tol.abs == 0:
        return ""  # exact parts: no "close"
    if tol.matches(x, ref, widen=CLOSE_FACTOR):
        return "Close, but outside the tolerance: check the rounding of intermediate values."
    return ""


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
    typed = format_value(got.value, None if got.value == int(got.value) else 12)
    if got.unit is None:
        return _with_unit(typed, target)
    shown = _with_unit(typed, got.unit) if got.unit.factors else f"{typed}{got.unit.text}"
    if got.unit.text == target.text or got.unit.factors == target.factors:
        return shown
    return f"{shown} = {_with_unit(format_value(x, sig or 6), target)}"
