"""One message for slips that give the same number in a variant.

When two known mistakes of a part land on the same value, the number alone cannot say which one
the student made, so the feedback must not assert either. Exercises that merge coinciding
mistakes (their `mistakes()` keep one entry per value) build the merged text here, so every
exercise words it the same way and none joins two contradicting claims.
"""
from __future__ import annotations

_HEAD = ("In your variant more than one slip gives this same number, so it alone cannot say "
         "which one you made. It may be this: ")
_MORE = " Or it may be this: "


def coinciding(first: str, second: str) -> str:
    """The feedback for an answer that matches both `first` and `second` (each a slip's own
    feedback, or an earlier merge)."""
    if second in first:
        return first
    head = first if first.startswith(_HEAD) else _HEAD + first
    return head + _MORE + second
