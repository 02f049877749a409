"""graders.units: our own Pint registry and the strict unit-string reader."""
from __future__ import annotations

import math

import pint
import pytest

from graders.base import InvalidAnswer
from graders.units import (
    compatible,
    conversion_factor,
    kind_of,
    parse_unit,
    swap_binary_prefixes,
    ureg,
)


def factor(a: str, b: str) -> float:
    return conversion_factor(parse_unit(a), parse_unit(b))


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ("GB", "B", 1e9),  # decimal
        ("kB", "B", 1e3),
        ("KB", "B", 1e3),  # KB is read as kB
        ("MB", "B", 1e6),
        ("TB", "GB", 1e3),
        ("KiB", "B", 1024),  # binary
        ("MiB", "B", 2**20),
        ("GiB", "B", 2**30),
        ("TiB", "B", 2**40),
        ("GiB", "GB", 1.073741824),
        ("B", "b", 8),  # b is a bit, never a barn
        ("Gb/s", "GB/s", 1 / 8),  # bits!
        ("TB/s", "GB/s", 1e3),
        ("ms", "s", 1e-3),
        ("us", "s", 1e-6),
        ("µs", "s", 1e-6),  # micro sign
        ("μs", "s", 1e-6),  # Greek mu
        ("ns", "us", 1e-3),
        ("min", "s", 60),
        ("h", "min", 60),
        ("%", "", 0.01),
        ("percent", "", 0.01),
        ("tokens", "tok", 1),
        ("token/s", "tok/s", 1),
        ("tokens per second", "tok/s", 1),
        ("Mtok", "tok", 1e6),
        ("req/min", "req/s", 1 / 60),
        ("request", "req", 1),
        ("TFLOP/s", "FLOP/s", 1e12),
        ("TFLOPS", "TFLOP/s", 1),  # capital S: a rate
        ("PFLOPS", "TFLOP/s", 1e3),
        ("GFLOPs", "FLOP", 1e9),  # small s: a plural count
        ("flop", "FLOP", 1),
        ("1/s", "Hz", 1),
        ("s^-1", "1/s", 1),
        ("s^(-1)", "1/s", 1),
        ("s**-1", "1/s", 1),
        ("s^−1", "1/s", 1),  # typographic minus
        ("/s", "1/s", 1),
        ("GB/(tok)", "GB/tok", 1),
        ("kW h", "J", 3.6e6),
        ("W", "J/s", 1),
        ("$", "cent", 100),
        ("$/h", "USD/min", 1 / 60),
        ("transfer/s", "xfer/s", 1),
        ("x", "", 1),
        ("", "", 1),
    ],
)
def test_conversions(source: str, target: str, expected: float) -> None:
    assert math.isclose(factor(source, target), expected, rel_tol=1e-12)


@pytest.mark.parametrize(
    ("a", "b"),
    [("tok/s", "req/s"), ("GB", ""), ("GB", "tok"), ("s", "GB"), ("FLOP", "FLOP/s"), ("%", "s"),
     ("TFLOPS", "TFLOP")],
)
def test_different_dimensions_do_not_convert(a: str, b: str) -> None:
    assert not compatible(parse_unit(a), parse_unit(b))
    with pytest.raises(pint.DimensionalityError):
        factor(a, b)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gb", "Did you mean GB?"),
        ("mb", "capital prefix"),  # millibits are never meant
        ("kg", "Unknown unit 'kg'"),
        ("barn", "Unknown unit"),
        ("GB;", "Unexpected character ';'"),
        ("GB\\s", "Unexpected character"),
        ("s^1000", "too large"),
        ("s^x", "whole number"),
        ("(GB", "brackets"),
        ("GB)", "Could not read"),
        ("GB 5", "Could not read"),
        ("G" * 200, "too long"),
        ("((((((GB))))))", "nested"),
        ("__class__", "Unexpected character '_'"),
        ("GB.real", "Unexpected character '.'"),
        ("ｇB", "Unexpected character"),  # fullwidth g
    ],
)
def test_unreadable_units(text: str, message: str) -> None:
    with pytest.raises(InvalidAnswer, match=message.replace("(", r"\(")):
        parse_unit(text)


def test_registry_is_our_own() -> None:
    # Pint's defaults read "b" as barn and make bits dimensionless; ours must not.
    assert "[information]" in dict(ureg.Unit("bit").dimensionality)
    assert "[token]" in dict(ureg.Unit("token").dimensionality)


@pytest.mark.parametrize(
    ("unit", "kind"),
    [
        ("GB", "a data size"),
        ("s", "a time"),
        ("ms", "a time"),
        ("GB/s", "a bandwidth"),
        ("tok/s", "a token rate"),
        ("req/s", "a request rate"),
        ("TFLOP/s", "a compute rate"),
        ("", "a plain number"),
        ("%", "a plain number"),
        ("1/s", "a rate"),
        ("FLOP/B", "arithmetic intensity"),
        ("tok/GB", "tokens per data"),
    ],
)
def test_kind_names(unit: str, kind: str) -> None:
    assert kind in kind_of(parse_unit(unit))


def test_swap_binary_prefixes() -> None:
    assert swap_binary_prefixes(parse_unit("GB")).text == "GiB"
    assert swap_binary_prefixes(parse_unit("MiB/s")).text == "MB/s"
    assert swap_binary_prefixes(parse_unit("Gb/s")).text == "Gib/s"
    assert swap_binary_prefixes(parse_unit("B")) is None
    assert swap_binary_prefixes(parse_unit("ms")) is None
    assert swap_binary_prefixes(parse_unit("ktok")) is None  # only data has binary prefixes
