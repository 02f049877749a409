"""A safe reader for student formulas: text -> sympy expression, without evaluating any text.

Pipeline (each step rejects what it does not know, with a message naming the offending piece):

1. characters: plain ASCII letters, digits, spaces and `+ - * / ^ ( ) , .`; a few typographic forms
   are mapped (`−` `×` `·` `÷` `π` `²` `³`). Anything else, fullwidth look-alikes included, is
   rejected *before* Python's parser could normalise it.
2. tokens: numbers, names, operators. A name must be one of the part's symbols, a constant (`pi`,
   `e`) or a function (`ln`, `log`, `exp`, `sqrt`, `min`, `max`, `abs`) followed by `(`. Implicit
   multiplication (`2S`, `2(S+T)`, `(a)(b)`) becomes `*`; `^` becomes `**`.
3. `python_ast.parse(..., mode="eval")` (ast.parse under a lock) of the rebuilt token string,
   then a walk that accepts only BinOp (+ − × / **), UnaryOp (+ −), int/float constants, the
   Names above and Calls of the whitelisted functions with positional arguments. Size, depth
   and exponent limits stop towers.
4. The walk builds the sympy expression itself (`sympy.Symbol(name, positive=True)`,
   `sympy.Rational`, `sympy.log`...). `sympify`, `parse_expr`, `eval` and `exec` are never called.

`parse_formula(text, symbols)` returns a `Formula` (the evaluated expression for grading and an
unevaluated one that prints the way it was typed); it raises `InvalidAnswer` for anything else.
"""
from __future__ import annotations

import ast
import cmath
import keyword
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import sympy

from graders import python_ast
from graders.base import InvalidAnswer

MAX_CHARS = 500
MAX_NODES = 200
MAX_DEPTH = 50
MAX_EXPONENT = 100  # |n| for a numeric exponent
MAX_LITERAL = 1e100  # |x| for a number typed in the formula
MAX_BITS = 1100  # numerator/denominator size of any exact number built (about 10^330)

CONSTANTS: dict[str, sympy.Expr] = {"pi": sympy.pi, "e": sympy.E}
# name -> (min args, max args or None)
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "ln": (1, 1),
    "log": (1, 2),
    "exp": (1, 1),
    "sqrt": (1, 1),
    "abs": (1, 1),
    "min": (2, None),
    "max": (2, None),
}

_TYPOGRAPHIC = {
    "−": "-",
    "×": "*",
    "·": "*",
    "⋅": "*",
    "÷": "/",
    "π": " pi ",
    "²": "^2",
    "³": "^3",
}
_ALLOWED_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ \t+-*/^(),."
)
_CHAR_ADVICE = {
    "=": "type only the formula, without '='",
    "[": "use round brackets ( )",
    "]": "use round brackets ( )",
    "{": "use round brackets ( )",
    "}": "use round brackets ( )",
    "'": "text in quotes is not allowed",
    '"': "text in quotes is not allowed",
    "!": "factorials are not supported",
    "%": "'%' is not an operator here",
    ":": "':' is not allowed",
    ";": "';' is not allowed",
    "\\": "write plain text, not LaTeX",
}
_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t]+)
  | (?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|[-+*/^(),])
    """,
    re.VERBOSE,
)
_SYMBOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Formula:
    """A parsed formula: `expr` is sympy's canonical form (used for grading), `display` the same
    formula left unevaluated so it prints the way it was typed; `source` the normalised text."""

    source: str
    expr: sympy.Expr
    display: sympy.Expr

    @property
    def latex(self) -> str:
        # order="none" keeps the terms in the order they were typed; \ln because log is natural.
        try:
            return sympy.latex(self.display, order="none", ln_notation=True)
        except Exception:  # noqa: BLE001 - printing an unevaluated tree can fail; fall back
            return sympy.latex(self.expr, ln_notation=True)


def parse_formula(text: str, symbols: Sequence[str]) -> Formula:
    """Read `text` as a formula in `symbols`. Raises `InvalidAnswer` with a student-facing message.

    Raises `ValueError` (not InvalidAnswer) when `symbols` itself is unusable: an authoring error.
    """
    names = _check_symbols(tuple(symbols))
    if not isinstance(text, str):
        raise InvalidAnswer("The formula must be text.")
    if len(text) > MAX_CHARS:
        raise InvalidAnswer(f"That formula is too long ({len(text):,} characters; at most {MAX_CHARS}).")
    text = _map_characters(text).strip()
    if not text:
        raise InvalidAnswer("Type a formula.")
    tokens = _tokenize(text, names)
    source = " ".join(tokens)
    try:
        tree = python_ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise InvalidAnswer(f"Could not read the formula: {_syntax_message(exc)}.") from None
    except (RecursionError, MemoryError, ValueError):
        raise InvalidAnswer("Could not read the formula: it is too deeply nested.") from None
    node = _Builder(source, names).build(tree.body, depth=0)
    expr, display = node.expr, node.shown
    if expr.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        raise InvalidAnswer("The formula is undefined (a division by zero or log of 0?).")
    return Formula(source=source, expr=expr, display=display)


def symbol(name: str) -> sympy.Symbol:
    """The sympy symbol for a part's symbol name: positive, as every quantity here is."""
    return _symbol(name)


@lru_cache(maxsize=256)
def _symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, positive=True)


@lru_cache(maxsize=64)
def _check_symbols(symbols: tuple[str, ...]) -> frozenset[str]:
    for name in symbols:
        if (
            not isinstance(name, str)
            or not _SYMBOL_NAME.fullmatch(name)
            or keyword.iskeyword(name)
            or name in FUNCTIONS
            or name.startswith("_")
        ):
            raise ValueError(f"unusable formula symbol {name!r}")
    return frozenset(symbols)


# --- step 1 and 2: characters and tokens ----------------------------------------------------


def _map_characters(text: str) -> str:
    out = []
    for ch in text:
        if ch in _TYPOGRAPHIC:
            out.append(_TYPOGRAPHIC[ch])
        elif ch in _ALLOWED_CHARS:
            out.append(ch)
        elif ch in _CHAR_ADVICE:
            raise InvalidAnswer(f"Unexpected character {ch!r}: {_CHAR_ADVICE[ch]}.")
        elif ch in "\n\r":
            out.append(" ")
        else:
            shown = f"character {ch!r}" if ch.isprintable() else "invisible character"
            raise InvalidAnswer(
                f"Unexpected {shown} (U+{ord(ch):04X}); use plain letters, digits and + - * / ^ ( )."
            )
    return "".join(out)


def _tokenize(text: str, names: frozenset[str]) -> list[str]:
    """Vet every token and return them, with `*` inserted for implicit products and `^` as `**`."""
    raw: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            ch = text[pos]
            advice = "a dot may only appear inside a number" if ch == "." else "it is not allowed here"
            raise InvalidAnswer(f"Unexpected {ch!r} in the formula: {advice}.")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind != "ws":
            raw.append((kind, m.group(kind)))
    out: list[str] = []
    parens: list[bool] = []  # one entry per open bracket: True when it opens a function call
    prev: tuple[str, str] | None = None
    for i, (kind, value) in enumerate(raw):
        nxt = raw[i + 1] if i + 1 < len(raw) else None
        if kind == "name":
            kind = _name_kind(value, names, nxt)
        if kind == "num":
            _check_literal(value)
        if prev is not None and _implicit_product(prev, (kind, value)):
            out.append("*")
        if value == "(":
            parens.append(prev is not None and prev[0] == "func")
            if len(parens) > MAX_DEPTH:
                raise InvalidAnswer("Too many nested brackets.")
        elif value == ")":
            if not parens:
                raise InvalidAnswer("A closing bracket ')' has no matching '('.")
            parens.pop()
        elif value == "," and not (parens and parens[-1]):
            raise InvalidAnswer("A comma may only separate the arguments of a function, like log(x, 2).")
        out.append("**" if value in ("^", "**") else value)
        prev = (kind, value)
    if parens:
        raise InvalidAnswer("A bracket '(' is never closed.")
    return out


def _name_kind(value: str, names: frozenset[str], nxt: tuple[str, str] | None) -> str:
    if value in names:
        return "sym"
    if value in FUNCTIONS:
        if nxt != ("op", "("):
            raise InvalidAnswer(f"Write {value} with brackets: {value}(...).")
        return "func"
    if value in CONSTANTS:
        return "const"
    raise InvalidAnswer(_unknown_name(value, names))


def _unknown_name(value: str, names: frozenset[str]) -> str:
    shown = value if len(value) <= 30 else value[:30] + "…"
    close = [n for n in sorted(names) if n.casefold() == value.casefold()]
    hint = f" Did you mean {close[0]}?" if close else ""
    allowed = ", ".join(sorted(names)) or "none"
    return (
        f"Unknown name {shown!r}.{hint} This part's symbols: {allowed}; functions: "
        f"{', '.join(FUNCTIONS)}; constants: pi, e. Write products with * (S*T)."
    )


def _implicit_product(prev: tuple[str, str], cur: tuple[str, str]) -> bool:
    """`2S`, `2 S`, `2(S)`, `(S)(T)`, `S T`, `(S)2`: a product the student meant but did not type."""
    left = prev[0] in ("num", "sym", "const") or prev[1] == ")"
    right = cur[0] in ("num", "sym", "const", "func") or cur[1] == "("
    if prev[0] == "num" and cur[0] == "num":
        raise InvalidAnswer(f"Two numbers in a row ({prev[1]} {cur[1]}): add an operator between them.")
    return left and right


def _check_literal(value: str) -> None:
    mantissa, _, exponent = value.lower().partition("e")
    if len(exponent.lstrip("+-")) > 3 or len(mantissa) > 60:
        raise InvalidAnswer(f"The number {value[:20]!r} is too long.")
    x = float(value)
    if not math.isfinite(x) or abs(x) > MAX_LITERAL:
        raise InvalidAnswer(f"The number {value[:20]!r} is too large (at most 1e100).")


def _syntax_message(exc: SyntaxError) -> str:
    msg = (exc.msg or "invalid syntax").rstrip(".")
    if "never closed" in msg or "unmatched" in msg or "does not match" in msg:
        return "check the brackets"
    if msg.startswith("invalid syntax") or "expected" in msg:
        return "an operator or operand is missing or doubled"
    return msg


# --- step 3 and 4: the AST walk -------------------------------------------------------------

_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_NODE_NAMES: dict[type, str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Lambda: "lambda",
    ast.Compare: "comparisons",
    ast.BoolOp: "and/or",
    ast.Tuple: "tuples",
    ast.List: "lists",
    ast.Starred: "starred arguments",
    ast.IfExp: "if/else",
    ast.FloorDiv: "'//'",
    ast.Mod: "'%'",
    ast.MatMult: "'@'",
    ast.BitXor: "'^' as XOR",
}
# A constant part of a formula may not exceed this size (or underflow to 0 from non-zero parts):
# it keeps every exact number sympy builds small, whatever way it is written.
MAX_MAGNITUDE = 1e300

Approx = complex | None


@dataclass(frozen=True)
class _Node:
    """A built subtree: sympy's evaluated form, the as-typed form, and, for constant subtrees, a
    float estimate used only to refuse huge numbers before sympy computes them."""

    expr: sympy.Expr
    shown: sympy.Expr
    approx: Approx


class _Builder:
    """Walks a vetted AST and builds sympy expressions, node by node, from a whitelist."""

    def __init__(self, source: str, names: frozenset[str]) -> None:
        self.source = source
        self.names = names
        self.nodes = 0

    def build(self, node: ast.AST, depth: int) -> _Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise InvalidAnswer(f"The formula is too long (at most {MAX_NODES} pieces).")
        if depth > MAX_DEPTH:
            raise InvalidAnswer(f"The formula is nested too deeply (at most {MAX_DEPTH} levels).")
        if isinstance(node, ast.Constant):
            return self.constant(node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
            inner = self.build(node.operand, depth + 1)
            if isinstance(node.op, ast.UAdd):
                return inner
            shown = _negated(inner.shown)
            approx = -inner.approx if inner.approx is not None else None
            return _Node(_checked(-inner.expr), shown, approx)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _BINOPS):
            left = self.build(node.left, depth + 1)
            right = self.build(node.right, depth + 1)
            return _binop(node.op, left, right)
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        raise InvalidAnswer(f"{_describe(node)} is not allowed in a formula.")

    def constant(self, node: ast.Constant) -> _Node:
        if type(node.value) not in (int, float):
            raise InvalidAnswer(f"{_describe(node)} is not allowed in a formula.")
        text = ast.get_source_segment(self.source, node) or repr(node.value)
        _check_literal(text)
        try:
            frac = Fraction(text)
        except (ValueError, ZeroDivisionError):
            raise InvalidAnswer(f"Could not read the number {text[:20]!r}.") from None
        value = sympy.Rational(frac.numerator, frac.denominator)
        # Shown as typed: 2.7 stays 2.7 on screen, while grading uses the exact 27/10.
        shown = value if value.is_Integer else sympy.Float(float(text))
        return _Node(_checked(value), shown, complex(float(text)))

    def name(self, node: ast.Name) -> _Node:
        if node.id in self.names:
            s = symbol(node.id)
            return _Node(s, s, None)
        if node.id in CONSTANTS:
            c = CONSTANTS[node.id]
            return _Node(c, c, complex(math.pi if node.id == "pi" else math.e))
        raise InvalidAnswer(_unknown_name(node.id, self.names))

    def call(self, node: ast.Call, depth: int) -> _Node:
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise InvalidAnswer(
                f"{_describe(node.func)} cannot be called; functions: {', '.join(FUNCTIONS)}."
            )
        fname = node.func.id
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise InvalidAnswer(f"{fname}(...) takes plain arguments only.")
        low, high = FUNCTIONS[fname]
        n = len(node.args)
        if n < low or (high is not None and n > high):
            if low == high:
                want = f"{low} argument" + ("s" if low != 1 else "")
            else:
                want = f"{low} or {high} arguments" if high else f"at least {low} arguments"
            raise InvalidAnswer(f"{fname}(...) takes {want}, not {n}.")
        args = [self.build(a, depth + 1) for a in node.args]
        return _call(fname, args)


def _describe(node: ast.AST) -> str:
    op = getattr(node, "op", None)
    for cls, words in _NODE_NAMES.items():
        if isinstance(node, cls) or (op is not None and isinstance(op, cls)):
            return words[:1].upper() + words[1:]
    if isinstance(node, ast.Constant):
        return f"The constant {node.value!r}"[:60]
    return f"A {type(node).__name__} expression"


def _binop(op: ast.operator, a: _Node, b: _Node) -> _Node:
    approx = _approx_binop(op, a.approx, b.approx)
    if isinstance(op, ast.Add):
        return _Node(_checked(a.expr + b.expr), sympy.Add(a.shown, b.shown, evaluate=False), approx)
    if isinstance(op, ast.Sub):
        neg = _negated(b.shown)
        return _Node(_checked(a.expr - b.expr), sympy.Add(a.shown, neg, evaluate=False), approx)
    if isinstance(op, ast.Mult):
        return _Node(_checked(a.expr * b.expr), sympy.Mul(a.shown, b.shown, evaluate=False), approx)
    if isinstance(op, ast.Div):
        if b.expr == 0:
            raise InvalidAnswer("The formula divides by zero.")
        inverse = sympy.Pow(b.shown, sympy.Integer(-1), evaluate=False)
        shown = inverse if a.shown == 1 else sympy.Mul(a.shown, inverse, evaluate=False)
        return _Node(_checked(a.expr / b.expr), shown, approx)
    _check_power(a, b)
    return _Node(_checked(a.expr**b.expr), sympy.Pow(a.shown, b.shown, evaluate=False), approx)


def _negated(shown: sympy.Expr) -> sympy.Expr:
    """-x for display: a negative number stays a number, so "2^-1" does not print as 2^{(-1) 1}."""
    if shown.is_Number:
        return -shown
    return sympy.Mul(sympy.Integer(-1), shown, evaluate=False)


def _approx_binop(op: ast.operator, a: Approx, b: Approx) -> Approx:
    """Float estimate of a constant subtree; raises InvalidAnswer when it is out of range."""
    if a is None or b is None:
        return None
    try:
        if isinstance(op, ast.Add):
            value = a + b
        elif isinstance(op, ast.Sub):
            value = a - b
        elif isinstance(op, ast.Mult):
            value = a * b
        elif isinstance(op, ast.Div):
            value = a / b
        else:
            value = _approx_pow(a, b)
    except OverflowError:
        raise InvalidAnswer("A number in the formula is too large to work with.") from None
    except (ZeroDivisionError, ValueError):
        return None
    # A zero product, quotient or power of non-zero parts is an underflow; a zero sum is fine.
    if isinstance(op, ast.Mult):
        underflow = a != 0 and b != 0
    else:
        underflow = isinstance(op, ast.Div | ast.Pow) and a != 0
    return _in_range(value, underflow=underflow)


def _approx_pow(a: complex, b: complex) -> complex:
    if a.imag == 0 and b.imag == 0 and (a.real > 0 or b.real == int(b.real)):
        return complex(math.pow(a.real, b.real))
    return a**b


def _in_range(value: complex, underflow: bool) -> Approx:
    size = abs(value)
    if math.isnan(size):
        return None
    if size > MAX_MAGNITUDE:
        raise InvalidAnswer("A number in the formula is too large to work with.")
    if size == 0 and underflow:
        raise InvalidAnswer("A number in the formula is too small to work with.")
    return value


def _check_power(base: _Node, exponent: _Node) -> None:
    """Refuse towers (9**9**9**9) and huge exact powers before sympy computes them."""
    exp = exponent.approx
    if exp is not None and abs(exp) > MAX_EXPONENT:
        raise InvalidAnswer(f"An exponent is too large (at most {MAX_EXPONENT}).")
    if exponent.expr.is_Number:
        bits = max(
            (max(abs(r.p).bit_length(), abs(r.q).bit_length()) for r in base.expr.atoms(sympy.Rational)),
            default=0,
        )
        if bits * abs(float(exponent.expr)) > MAX_BITS:
            raise InvalidAnswer("That power is too large a number to work with.")
    if base.expr == 0 and exponent.expr.is_negative:
        raise InvalidAnswer("The formula divides by zero.")


def _check_size(value: sympy.Expr) -> None:
    if value.is_Rational and max(abs(value.p).bit_length(), abs(value.q).bit_length()) > MAX_BITS:
        raise InvalidAnswer("A number in the formula is too large (or too small) to work with.")


def _checked(value: sympy.Expr) -> sympy.Expr:
    _check_size(value)
    return value


_SYMPY_FUNCTIONS: dict[str, Callable[..., sympy.Expr]] = {
    "ln": sympy.log,
    "log": sympy.log,
    "exp": sympy.exp,
    "sqrt": sympy.sqrt,
    "abs": sympy.Abs,
    "min": sympy.Min,
    "max": sympy.Max,
}


def _call(name: str, args: list[_Node]) -> _Node:
    values = [a.expr for a in args]
    if name in ("ln", "log") and values[0] == 0:
        raise InvalidAnswer(f"{name}(0) is undefined.")
    if name == "log" and len(values) == 2 and values[1] in (0, 1):
        raise InvalidAnswer("log(x, b) needs a base b other than 0 and 1.")
    approx = _approx_call(name, [a.approx for a in args])
    value = _checked(_SYMPY_FUNCTIONS[name](*values))
    return _Node(value, _display_call(name, [a.shown for a in args]), approx)


def _approx_call(name: str, args: list[Approx]) -> Approx:
    if any(a is None for a in args):
        return None
    xs = [a for a in args if a is not None]
    try:
        if name in ("ln", "log"):
            value = cmath.log(xs[0]) / (cmath.log(xs[1]) if len(xs) == 2 else 1)
        elif name == "exp":
            value = cmath.exp(xs[0])
        elif name == "sqrt":
            value = cmath.sqrt(xs[0])
        elif name == "abs":
            value = complex(abs(xs[0]))
        elif all(x.imag == 0 for x in xs):
            value = complex((min if name == "min" else max)(x.real for x in xs))
        else:
            return None
    except OverflowError:
        raise InvalidAnswer("A number in the formula is too large to work with.") from None
    except (ValueError, ZeroDivisionError):
        return None
    return _in_range(value, underflow=name == "exp")


def _display_call(name: str, shown: list[sympy.Expr]) -> sympy.Expr:
    if name in ("ln", "log"):
        if len(shown) == 2:
            return sympy.Mul(
                sympy.log(shown[0], evaluate=False),
                sympy.Pow(sympy.log(shown[1], evaluate=False), sympy.Integer(-1), evaluate=False),
                evaluate=False,
            )
        return sympy.log(shown[0], evaluate=False)
    if name == "sqrt":
        return sympy.Pow(shown[0], sympy.Rational(1, 2), evaluate=False)
    if name == "exp":
        return sympy.exp(shown[0], evaluate=False)
    if name == "abs":
        return sympy.Abs(shown[0], evaluate=False)
    fn = sympy.Min if name == "min" else sympy.Max
    return fn(*shown, evaluate=False)
