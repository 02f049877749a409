"""graders.formula: the whitelist parser. Hostile input is invalid and runs nothing."""
from __future__ import annotations

import builtins
import os
import subprocess
import time
from collections.abc import Iterator

import pytest
import sympy
import sympy.parsing.sympy_parser

from graders import expression, formula
from graders.base import InvalidAnswer
from graders.formula import parse_formula

SYMBOLS = ("S", "T")
S, T = sympy.Symbol("S", positive=True), sympy.Symbol("T", positive=True)


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fail loudly if parsing reaches a shell, a process, eval/exec, a file or sympy's string parser."""
    called: list[str] = []

    def trap(name: str):  # noqa: ANN202 - a stand-in with any signature
        def stand_in(*args: object, **kwargs: object) -> None:
            called.append(name)
            raise AssertionError(f"{name} was called")

        return stand_in

    monkeypatch.setattr(os, "system", trap("os.system"))
    monkeypatch.setattr(os, "popen", trap("os.popen"))
    monkeypatch.setattr(subprocess, "Popen", trap("subprocess.Popen"))
    monkeypatch.setattr(builtins, "eval", trap("eval"))
    monkeypatch.setattr(builtins, "exec", trap("exec"))
    monkeypatch.setattr(builtins, "open", trap("open"))
    monkeypatch.setattr(sympy, "sympify", trap("sympy.sympify"))
    monkeypatch.setattr(sympy.parsing.sympy_parser, "parse_expr", trap("parse_expr"))
    yield called
    assert called == []


# --- what it accepts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 - ln(100)*S/T", 1 - sympy.log(100) * S / T),
        ("(T - S*log(100))/T", (T - S * sympy.log(100)) / T),
        ("S^2", S**2),
        ("S**2", S**2),
        ("S²", S**2),
        ("-S^2", -(S**2)),
        ("2^-1", sympy.Rational(1, 2)),
        ("0.5*S", S / 2),
        ("2.7e9*S", 2700000000 * S),
        ("1e-3", sympy.Rational(1, 1000)),
        ("2S", 2 * S),
        ("2 S", 2 * S),
        ("2(S+T)", 2 * (S + T)),
        ("(S)(T)", S * T),
        ("S T", S * T),
        ("2pi S", 2 * sympy.pi * S),
        ("πS", sympy.pi * S),
        ("e^S", sympy.exp(S)),
        ("exp(S)", sympy.exp(S)),
        ("sqrt(S*T)", sympy.sqrt(S * T)),
        ("log(S, 2)", sympy.log(S) / sympy.log(2)),
        ("ln(S)", sympy.log(S)),
        ("min(S, T)", sympy.Min(S, T)),
        ("max(S, T, 1)", sympy.Max(S, T, 1)),
        ("abs(S - T)", sympy.Abs(S - T)),
        ("S × T ÷ 2", S * T / 2),
        ("S · T − 1", S * T - 1),
        ("+S", S),
        ("S\nT", S * T),
        ("ln(S)(T)", sympy.log(S) * T),  # a product, not a call on a call
    ],
)
def test_accepted(text: str, expected: sympy.Expr, nothing_runs: list[str]) -> None:
    assert sympy.simplify(parse_formula(text, SYMBOLS).expr - expected) == 0


def test_symbols_are_positive() -> None:
    f = parse_formula("sqrt(S^2)", SYMBOLS)
    assert f.expr == S


def test_latex_echo_keeps_the_typed_order() -> None:
    assert parse_formula("1 - ln(100)*S/T", SYMBOLS).latex == r"1 - \frac{\ln{\left(100 \right)} S}{T}"
    assert parse_formula("0.5*S", SYMBOLS).latex == r"0.5 S"
    assert parse_formula("S^-1", SYMBOLS).latex == r"\frac{1}{S}"
    assert expression.preview("sqrt(S)/pi", SYMBOLS) == r"\frac{\sqrt{S}}{\pi}"
    with pytest.raises(InvalidAnswer):
        expression.preview("S +", SYMBOLS)


def test_multi_letter_symbols() -> None:
    f = parse_formula("rho*S_max/(1 - rho)", ("rho", "S_max"))
    assert {str(s) for s in f.expr.free_symbols} == {"rho", "S_max"}


def test_author_symbols_are_checked() -> None:
    for bad in (["__class__"], ["lambda"], ["ln"], ["2x"], ["a.b"]):
        with pytest.raises(ValueError) as excinfo:
            parse_formula("1", bad)
        assert not isinstance(excinfo.value, InvalidAnswer)


# --- hostile and malformed input: invalid, and nothing runs -----------------------------------

HOSTILE = [
    "__import__('os').system('id')",
    "__import__",
    "().__class__.__bases__",
    "().__class__.__bases__[0].__subclasses__()",
    "lambda: 1",
    "lambda x: x",
    "9**9**9**9",
    "9^9^9^9",
    "x.__class__",
    "S.__class__",
    "S.evalf()",
    "(" * 10000,
    "(" * 60 + "S" + ")" * 60,
    "S" * 1_000_000,
    "1" + "+1" * 1_000_000,
    "ｅｖａｌ('1')",  # fullwidth letters: Python would fold them to eval
    "ｅｘｐ(S)",
    "Ｓ",
    "Ѕ",  # Cyrillic DZE, looks like S
    "eval('1')",
    "exec('import os')",
    "open('/etc/passwd')",
    "open",
    "globals()",
    "getattr(S, 'x')",
    "[S for S in ()]",
    "{S}",
    "S if T else 1",
    "S and T",
    "not S",
    "S == T",
    "S < T",
    "S // T",
    "S % T",
    "S @ T",
    "S | T",
    "~S",
    "S[0]",
    "'S'",
    '"S"',
    "b'x'",
    "f'{S}'",
    "S; import os",
    "S\\\nT",
    "#",
    "S # comment",
    "1j",
    "True",
    "None",
    "...",
    "log(S, base=2)",
    "min(*S)",
    "ln",
    "ln S",
    "sqrt(S, T)",
    "log()",
    "min(S)",
    "S,T",
    "(S,T)",
    "exp(1000)",
    "exp(exp(exp(10)))",
    "10^(10^(10^10))",
    "2^1000",
    "(2^100)^100",
    "exp(1e100*log(2))",
    "1e999",
    "1e-999*1e-999",
    "S^1000",
    "1/0",
    "S/(T-T)",
    "log(0)",
    "log(S, 1)",
    "0^-1",
    "-" * 400 + "S",
    "1" + "+1" * 100,
    "S\u200bT",  # zero-width space
    "S\u202eT",  # right-to-left override
    "S\x00",
    "",
    "   ",
    "S +",
    "* S",
    "S T T T (",
    ")",
    "2 3",
    "1..2",
    "1.2.3",
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:30]))
def test_hostile_input_is_invalid_and_runs_nothing(text: str, nothing_runs: list[str]) -> None:
    start = time.perf_counter()
    with pytest.raises(InvalidAnswer) as excinfo:
        expression.preview(text, SYMBOLS)
    assert time.perf_counter() - start < 1.0
    assert str(excinfo.value)  # a message the student can read


@pytest.mark.parametrize(
    ("text", "piece"),
    [
        ("__import__('os')", "quotes"),
        ("x.__class__", "'.'"),
        ("lambda: 1", "':'"),
        ("open(S)", "Unknown name 'open'"),
        ("eval(S)", "Unknown name 'eval'"),
        ("s + 1", "Did you mean S?"),
        ("ｅｖａｌ", "U+FF45"),
        ("S[0]", "round brackets"),
        ("9**9**9**9", "too large"),
        ("S^1000", "exponent"),
        ("(" * 10000, "too long"),
        ("ln S", "ln(...)"),
        ("1/0", "divides by zero"),
        ("S == T", "without '='"),
        ("min(S)", "at least 2 arguments"),
        ("S,T", "comma"),
        (")", "no matching"),
        ("(S", "never closed"),
        ("1" + "+1" * 100, "nested too deeply"),
    ],
)
def test_messages_name_the_offending_piece(text: str, piece: str) -> None:
    with pytest.raises(InvalidAnswer) as excinfo:
        parse_formula(text, SYMBOLS)
    assert piece in str(excinfo.value)


def test_node_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formula, "MAX_DEPTH", 1000)
    long_sum = "+".join(["S"] * 120)  # 239 nodes
    with pytest.raises(InvalidAnswer, match="too long"):
        parse_formula(long_sum, SYMBOLS)


def test_allowed_sizes_still_work() -> None:
    assert parse_formula("S^100", SYMBOLS).expr == S**100
    assert parse_formula("2^100", SYMBOLS).expr == 2**100
    assert parse_formula("1e100*S", SYMBOLS).expr == 10**100 * S
    assert parse_formula("+".join(["S"] * 40), SYMBOLS).expr == 40 * S
