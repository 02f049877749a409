"""Rounding to significant figures as people round (half away from zero), shared by the grading
rule (graders.precision) and the variant checks (exercises.feasibility)."""
from __future__ import annotations

import math


def round_sig(x: float, sig: int) -> float:
    """`x` rounded to `sig` significant figures, half away from zero as people round."""
    if x == 0 or not math.isfinite(x):
        return x
    exp = math.floor(math.log10(abs(x))) - sig + 1
    # The small guard keeps 2.65, stored as 2.6499999..., rounding up as it is written.
    digits = math.floor(abs(x) / 10.0**exp + 0.5 + 1e-9)
    return math.copysign(digits * 10.0**exp, x)
