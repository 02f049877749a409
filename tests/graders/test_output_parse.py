"""graders/outputs.parse_output reads most replies with the C parser alone and counts their
depth on the bytes; parse_walked checks every value in Python. Whatever a reply holds, both give
the same value or the same message."""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graders import outputs

LEAVES = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
          | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
          | st.sampled_from(["\x00", "\ud800", "a\udfffb", "é", "1" * 19, "[{", "\\u0000"]))
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=3), inner, max_size=4), max_leaves=30)


def _outcome(parse: Any, payload: bytes) -> tuple[str, Any]:
    try:
        return "value", json.dumps(parse(payload), sort_keys=True)
    except outputs.Malformed as exc:
        return "malformed", str(exc)


def _same(payload: bytes) -> None:
    assert _outcome(outputs.parse_output, payload) == _outcome(outputs.parse_walked, payload)


def _nested(depth: int, inner: str = "1") -> bytes:
    text = inner
    for i in range(depth):
        text = f'{{"k{i}": {text}}}' if i % 2 else f"[{text}, \"]\"]"
    return text.encode()


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES, st.booleans())
def test_any_value_reads_the_same_both_ways(value: Any, ascii_only: bool) -> None:
    _same(json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


@settings(max_examples=300)
@given(st.binary(max_size=40) | st.text(alphabet='[]{}",:\\u0dD89 -+eE.1NaIfity', max_size=40)
       .map(str.encode))
def test_any_bytes_read_the_same_both_ways(payload: bytes) -> None:
    _same(payload)


@pytest.mark.parametrize("depth", [1, 31, 32, 33, 40, 2000])
def test_the_depth_limit_is_the_same_both_ways(depth: int) -> None:
    _same(_nested(depth))
    fast = _outcome(outputs.parse_output, _nested(depth))
    assert (fast[0] == "value") == (depth <= outputs.MAX_DEPTH)


@pytest.mark.parametrize("payload", [
    b"9223372036854775807", b"9223372036854775808", b"-9223372036854775809", b"1e308",
    b"1e309", b"-1E+400", b"1e-400", b"[NaN]", b'{"a": Infinity}', b'"\\u0000"',
    b'"\\ud83d\\ude00"', b'"\\uD800"', b'"\\\\u0000"', b"", b" [1] ", b"[1,]", b'"\xc3\xa9"',
    b"\x00[\x00]", b"123456789012345678.5e99"])
def test_the_edges_of_every_range_check_read_the_same_both_ways(payload: bytes) -> None:
    _same(payload)


def test_brackets_inside_strings_are_not_levels() -> None:
    shallow = json.dumps([["[", "{{", "]", '\\"['] for _ in range(20)]).encode()
    _same(shallow)
    assert outputs.parse_output(shallow)[0] == ["[", "{{", "]", '\\"[']


def test_a_large_plain_output_is_read_whole() -> None:
    value = [{"step": i, "running": list(range(i % 7)), "name": f"r{i}"} for i in range(3000)]
    assert outputs.parse_output(json.dumps(value).encode()) == value
