"""The tolerance policy for `number` parts, and the audit that holds every exercise to it.

The policy (DESIGN.md §3; issue 18 item 2):
- A number part accepts the reference within its tolerance and, unless its prompt states the
  precision it wants ("to 3 significant figures", "an exact count", "to the nearest ms"), the
  reference rounded to two significant figures: an engineer who writes 2.7 GB for 2.68 GB is right.
- A part with tolerance 0 (an exact count) must say so in its prompt once its reference can be 100
  or more: below 100 a whole number rounded to two figures is itself, above it "252" rounded is
  "250", and a student must know which one is wanted.
- No listed mistake may be accepted: not its value, not its value as the student would type it
  rounded as the part allows (two figures, or the figures the prompt asks for). Nor may the "no
  effect" answer (a ratio of 1) on a part about a speedup, a slowdown or a ratio.
- An exact count that `solve()` got by rounding a real number (it says so by returning that number
  as `<part id>_unrounded`) must not sit within 0.5 % of the rounding boundary: a student working
  from the statement's rounded figures lands on the other side of it.

- A figure that the title, summary or a prompt quotes, and that is a part's canonical reference
  as written, is accepted for that part.

`graders.precision.accepts()` is the acceptance rule the number grader applies; `audit()` checks
the rest over many variants of one exercise and returns what breaks it. The test suite runs it
over 300 variants of every exercise (tests/graders/test_tolerance_policy.py). No Django here.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pint

from exercises import registry
from exercises.spec import ExerciseSpec, Mistake, PartSpec, Quantity
from graders.base import InvalidAnswer
from graders.precision import accepts, round_sig, rounding_sig, states_precision
from graders.units import conversion_factor, parse_unit

SMALLEST_ROUNDABLE_COUNT = 100
BOUNDARY_MARGIN = 0.005
UNROUNDED_SUFFIX = "_unrounded"
# Parts whose point is an effect: a ratio of 1 there says "nothing changes".
_EFFECT = re.compile(r"speed-?up|slow-?down|faster|slower|\bratio\b|\bfactor\b|\bT1/T2\b",
                     re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    """One way a variant breaks the policy."""

    part: str
    variant: str | int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.part} (variant {self.variant}): {self.rule}: {self.detail}"


def _in_unit(value: object, part: PartSpec) -> float | None:
    """A reference or mistake answer as a float in the part's unit (None if not a number)."""
    if isinstance(value, Quantity):
        try:
            return float(value.value) * conversion_factor(parse_unit(value.unit or ""),
                                                          parse_unit(part.unit or ""))
        except (InvalidAnswer, pint.DimensionalityError):
            return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _no_effect_values(part: PartSpec) -> tuple[float, ...]:
    """The answer that says "nothing changes" (a ratio of 1) for a part about an effect."""
    if not _EFFECT.search(part.prompt):
        return ()
    try:
        unit = parse_unit(part.unit or "")
    except InvalidAnswer:
        return ()
    if not unit.is_dimensionless:
        return ()
    return (1.0 / conversion_factor(unit, parse_unit("")),)


def audit_variant(spec: ExerciseSpec, params: dict[str, Any], variant: str | int
                  ) -> list[Finding]:
    """Every policy rule, for every number part of one variant."""
    found: list[Finding] = []
    solution = registry.solve(spec, params)
    all_mistakes = registry.mistakes(spec, params)
    for part in spec.parts:
        if part.type != "number":
            continue
        ref = _in_unit(solution[part.id], part)
        if ref is None:
            continue

        def flag(rule: str, detail: str, part: PartSpec = part) -> None:
            found.append(Finding(part.id, variant, rule, detail))

        exact = part.tolerance == 0
        if exact and abs(ref) >= SMALLEST_ROUNDABLE_COUNT and not states_precision(part.prompt):
            flag("precision", f"an exact count of {ref:,.0f} with a prompt that does not say so")
        if not exact and not states_precision(part.prompt) and not accepts(
                part, round_sig(ref, 2), ref):
            flag("two figures", f"{round_sig(ref, 2):g} (the reference {ref:.6g} to two "
                                "figures) is graded wrong and the prompt states no precision")
        for m in (m for m in all_mistakes if m.part == part.id):
            _audit_mistake(part, m, ref, flag)
        if ref != 0:
            for none in _no_effect_values(part):
                if ref != none and accepts(part, none, ref):
                    flag("no effect", f"{none:g} (no effect) is accepted for {ref:.6g}")
        raw = solution.get(part.id + UNROUNDED_SUFFIX)
        if exact and isinstance(raw, int | float) and math.isfinite(raw) and raw != 0:
            below, above = math.floor(raw), math.floor(raw) + 1
            gap = min(raw - below, above - raw) if raw != below else 0.0
            if raw != below and gap < BOUNDARY_MARGIN * abs(raw):
                flag("boundary", f"{raw:.6f} rounds to {ref:,.0f} but is within "
                                 f"{BOUNDARY_MARGIN:.1%} of the next whole number")
    return found


def _audit_mistake(part: PartSpec, m: Mistake, ref: float, flag: Any) -> None:
    value = _in_unit(m.answer, part)
    if value is None or not math.isfinite(value):
        return
    label = m.name or m.feedback[:40]
    sig = rounding_sig(part)
    if accepts(part, value, ref):
        flag("mistake accepted", f"{label!r} = {value:.6g} is within the tolerance of {ref:.6g}")
    elif sig is not None and accepts(part, round_sig(value, sig), ref):
        flag("mistake accepted", f"{label!r} = {value:.6g}, typed to {sig} figures "
                                 f"({round_sig(value, sig):g}), is accepted for {ref:.6g}")


# A figure quoted in prose: a number with an optional unit or multiplier after it ("70 %",
# "2.5×", "8.6 s", "2.7 GB", "6K-token").
_QUOTED = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s?(%|×|x\b|[kKM]\b|[kKM]-|"
                     r"[a-zA-Zµ]{1,4}\b)?")
_MULTIPLIERS = {"k": 1e3, "K": 1e3, "M": 1e6}


def quoted_figures(text: str) -> list[tuple[float, int, str]]:
    """(value, significant digits as written, unit text) for each figure quoted in `text`."""
    out = []
    for m in _QUOTED.finditer(text):
        digits, unit = m.group(1).replace(",", ""), (m.group(2) or "").rstrip("-")
        sig = len(digits.replace(".", "").lstrip("0").rstrip("0" if "." not in digits else "")
                  ) or 1
        value = float(digits)
        if not unit:
            continue  # a bare number in prose is a count, an exponent, "3 significant figures"
        if unit in _MULTIPLIERS:
            value, unit = value * _MULTIPLIERS[unit], ""
        out.append((value, sig, "" if unit in ("×", "x") else unit))
    return out


def audit_quoted(spec: ExerciseSpec) -> list[Finding]:
    """A figure the title, summary or a prompt quotes that is a number part's canonical reference,
    rounded as written, is accepted for that part ("the 70 % rule" must not grade 70 % wrong)."""
    params = registry.params_for(spec, registry.CANONICAL_VARIANT)
    solution = registry.solve(spec, params)
    texts = [("title", spec.title), ("summary", spec.summary)]
    texts += [(f"prompt of {p.id}", p.prompt) for p in spec.parts]
    found = []
    for part in (p for p in spec.parts if p.type == "number"):
        ref = _in_unit(solution[part.id], part)
        if ref is None or ref == 0:
            continue
        for where, text in texts:
            for value, sig, unit in quoted_figures(text):
                x = _in_unit(Quantity(value, unit), part) if unit else value
                if x is None or x == 0 or sig < 1:
                    continue
                if math.isclose(round_sig(ref, sig), x, rel_tol=1e-9) and not accepts(part, x, ref):
                    found.append(Finding(part.id, registry.CANONICAL_VARIANT, "quoted figure",
                                         f"the {where} quotes {value:g} {unit}".rstrip()
                                         + f", the reference {ref:.6g} as written, graded wrong"))
    return found


def audit(spec: ExerciseSpec, variants: int = 300) -> list[Finding]:
    """The canonical variant and `variants` generated ones, every rule."""
    found: list[Finding] = audit_quoted(spec)
    for variant in [registry.CANONICAL_VARIANT, *range(variants)]:
        found.extend(audit_variant(spec, registry.params_for(spec, variant), variant))
    return found
