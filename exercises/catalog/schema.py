"""What a catalog file may say about a record, read off the record's dataclass.

A record's fields are its schema: each field but `name` and `sources` is a figure. A figure's type
is the field's type hint with `| None` removed (int, float, bool or str); it is optional when the
hint admits None or the field has a default, required otherwise. Deriving this rather than keeping a
table means a field added to a record is checked on load with no other edit, and the two cannot
disagree.
"""
from __future__ import annotations

import types
import typing
from dataclasses import MISSING, dataclass, fields
from functools import cache
from typing import Any


class CatalogError(ValueError):
    """A catalog file breaks the rules (a figure without a source, a wrong type, ...)."""


# Fields every record has that are not figures of the file: the entry's table key and the citations.
_NOT_FIGURES = frozenset({"name", "sources"})
_KINDS = (bool, int, float, str)


@dataclass(frozen=True)
class Figure:
    """One field a catalog entry may set."""

    name: str
    kind: type  # int, float, bool or str
    required: bool
    has_default: bool  # absent and optional: the record's default applies, else None


@cache
def figures(record_type: type) -> tuple[Figure, ...]:
    """The figures of `record_type`, in field order. Raises TypeError for a field whose type the
    loader cannot check (a bug in the record, caught the first time its file is read)."""
    hints = typing.get_type_hints(record_type)
    out = []
    for f in fields(record_type):
        if f.name in _NOT_FIGURES:
            continue
        hint = hints[f.name]
        members = typing.get_args(hint) if _is_union(hint) else (hint,)
        kinds = [m for m in members if m is not type(None)]
        if len(kinds) != 1 or kinds[0] not in _KINDS:
            raise TypeError(f"{record_type.__name__}.{f.name}: a catalog figure must be one of "
                            f"int, float, bool, str (optionally | None), not {hint!r}")
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        optional = len(kinds) < len(members) or has_default
        out.append(Figure(f.name, kinds[0], not optional, has_default))
    return tuple(out)


def _is_union(hint: Any) -> bool:
    # `int | None` evaluates to types.UnionType; typing.Optional[int] to typing.Union.
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def coerce(value: Any, kind: type, where: str) -> Any:
    """`value` as a figure of type `kind`, or CatalogError naming `where` (file: record.figure)."""
    # bool is a subclass of int in Python, so test it first: `layers = true` must not pass.
    if kind is bool:
        if not isinstance(value, bool):
            raise CatalogError(f"{where}: expected true/false, got {value!r}")
        return value
    if isinstance(value, bool):
        expected = "an integer" if kind is int else f"a {kind.__name__}"
        raise CatalogError(f"{where}: expected {expected}, got {value!r}")
    if kind is int:
        if not isinstance(value, int):
            raise CatalogError(f"{where}: expected an integer, got {value!r}")
        if value <= 0:
            raise CatalogError(f"{where}: expected a positive integer, got {value!r}")
        return value
    if kind is float:
        if not isinstance(value, int | float):
            raise CatalogError(f"{where}: expected a number, got {value!r}")
        if not value > 0:
            raise CatalogError(f"{where}: expected a positive number, got {value!r}")
        return float(value)
    if kind is str:
        if not isinstance(value, str) or not value.strip():
            raise CatalogError(f"{where}: expected a non-empty string, got {value!r}")
        return value
    raise CatalogError(f"{where}: unsupported type {kind!r}")  # a schema bug, not a data bug
