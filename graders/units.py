"""Units for `number` parts: a small Pint registry of our own and a strict unit-string reader.

The registry is built from the definitions below, not from Pint's defaults: those read `b` as barn,
`Gb` as gilbert and treat bits as dimensionless, all wrong for this site. Here data (bit, byte),
tokens, requests, FLOPs, transfers and money are dimensions of their own, so "tok/s" can never be
confused with "req/s" and a byte count never passes for a plain number. Byte prefixes follow the
SI/IEC convention: kB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024 (and `KB`
is read as kB).

A unit string is read by `parse_unit`, a small recursive-descent parser over whitelisted tokens
(names, integers, `* / ^ ** ( )`, `per`). Each name is looked up on its own with Pint's
`parse_unit_name`; Pint never sees the whole string and nothing is evaluated.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

import pint

from graders.base import InvalidAnswer

_DEFINITIONS = """
kilo- = 1e3 = k- = K-
mega- = 1e6 = M-
giga- = 1e9 = G-
tera- = 1e12 = T-
peta- = 1e15 = P-
exa- = 1e18 = E-
milli- = 1e-3 = m-
micro- = 1e-6 = u-
nano- = 1e-9 = n-
pico- = 1e-12 = p-
kibi- = 2**10 = Ki-
mebi- = 2**20 = Mi-
gibi- = 2**30 = Gi-
tebi- = 2**40 = Ti-
pebi- = 2**50 = Pi-
exbi- = 2**60 = Ei-
second = [time] = s = sec
minute = 60 * second = min
hour = 60 * minute = h = hr
day = 24 * hour = d
bit = [information] = b
byte = 8 * bit = B
token = [token] = tok
request = [request] = req
FLOP = [compute] = _ = flop
transfer = [transfer] = _ = xfer
dollar = [currency] = _ = USD
cent = 0.01 * dollar
joule = [energy] = J
watt = joule / second = W
hertz = 1 / second = Hz
percent = 0.01 = _
"""

ureg = pint.UnitRegistry(None)
for _line in _DEFINITIONS.strip().splitlines():
    ureg.define(_line)

# Decimal and binary prefixes at the same level: the GB/GiB confusion swaps one for the other.
_DECIMAL_TO_BINARY = {
    "kilo": "kibi",
    "mega": "mebi",
    "giga": "gibi",
    "tera": "tebi",
    "peta": "pebi",
    "exa": "exbi",
}
_BINARY_TO_DECIMAL = {v: k for k, v in _DECIMAL_TO_BINARY.items()}
_PREFIX_SYMBOL = {
    "": "",
    "kilo": "k",
    "mega": "M",
    "giga": "G",
    "tera": "T",
    "peta": "P",
    "exa": "E",
    "kibi": "Ki",
    "mebi": "Mi",
    "gibi": "Gi",
    "tebi": "Ti",
    "pebi": "Pi",
    "exbi": "Ei",
    "milli": "m",
    "micro": "µ",
    "nano": "n",
    "pico": "p",
}
_INFORMATION_UNITS = frozenset({"bit", "byte"})
# Sub-unit prefixes make sense for these only; "mb" is a typo for MB or Mb, never millibits.
_SMALL_PREFIX_OK = frozenset({"second", "joule", "watt", "hertz"})
_SMALL_PREFIXES = frozenset({"milli", "micro", "nano", "pico"})

MAX_UNIT_CHARS = 100
MAX_FACTORS = 12
MAX_POWER = 12
MAX_NESTING = 4


@dataclass(frozen=True)
class Factor:
    """One named unit in a product: prefix (Pint's long name, "" for none), base unit, power."""

    prefix: str
    base: str
    power: int

    @property
    def symbol(self) -> str:
        if self.base == "":
            return "x"
        name = {"dollar": "$", "percent": "%"}.get(self.base) or ureg.get_symbol(self.base)
        return _PREFIX_SYMBOL.get(self.prefix, self.prefix) + name


@dataclass(frozen=True)
class ParsedUnit:
    """A unit as typed (`text`), its factors and the Pint unit they multiply to."""

    text: str
    factors: tuple[Factor, ...]

    @cached_property
    def unit(self) -> pint.Unit:
        return _product(self.factors)

    @property
    def is_dimensionless(self) -> bool:
        return not dict(self.unit.dimensionality)


def _product(factors: tuple[Factor, ...]) -> pint.Unit:
    result = ureg.Unit("")
    for f in factors:
        if f.base:
            result = result * ureg.Unit(f.prefix + f.base) ** f.power
    return result


# --- the unit-string reader -----------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<name>[A-Za-zµμ]+|[$%×])|(?P<int>[0-9]+)|(?P<op>\*\*|[*/^()·\-]))",
)
_ALLOWED = re.compile(r"[A-Za-zµμ0-9$%×*/^()·\- ]*")
_FLOPS_RATE = re.compile(r"^(|k|K|M|G|T|P|E)FLOPS$")


def _tokens(text: str) -> list[tuple[str, str]]:
    """Split a unit string into (kind, text) tokens; kind is name, int or op."""
    text = text.replace("−", "-")  # the typographic minus, as in "s^−1"
    bad = next((ch for ch in text if not _ALLOWED.fullmatch(ch)), None)
    if bad is not None:
        raise InvalidAnswer(f"Unexpected character {bad!r} in the unit {text!r}.")
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - _ALLOWED already guarantees a match
            raise InvalidAnswer(f"Could not read the unit {text!r}.")
        kind = m.lastgroup or "op"
        value = m.group(kind)
        if kind == "name" and value == "per":
            kind, value = "op", "/"
        elif value == "·":
            value = "*"
        elif value == "**":
            value = "^"
        out.append((kind, value))
        pos = m.end()
    return out


class _UnitReader:
    """Recursive descent over unit tokens: product := [ '/' ] factor (( '*' | '/' | juxtaposition ) factor)*."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise InvalidAnswer(f"The unit {self.text!r} ends too early.")
        self.i += 1
        return tok

    def read(self) -> tuple[Factor, ...]:
        factors = self.product(depth=0)
        if self.peek() is not None:
            raise InvalidAnswer(f"Could not read the unit {self.text!r} near {self.peek()[1]!r}.")
        return factors

    def product(self, depth: int) -> tuple[Factor, ...]:
        if depth > MAX_NESTING:
            raise InvalidAnswer("Too many nested brackets in the unit.")
        factors: list[Factor] = []
        sign = 1
        if self.peek() == ("op", "/"):  # "/s" after a number: per second
            self.take()
            sign = -1
        while True:
            factors.extend(_scaled(self.factor(depth), sign))
            if len(factors) > MAX_FACTORS:
                raise InvalidAnswer("That unit has too many parts.")
            tok = self.peek()
            if tok is None or tok == ("op", ")"):
                return tuple(factors)
            if tok in (("op", "*"), ("op", "/")):
                self.take()
                sign = -1 if tok[1] == "/" else 1
            elif tok[0] in ("name", "int") or tok == ("op", "("):
                sign = 1  # juxtaposition multiplies: "kW h"
            else:
                raise InvalidAnswer(f"Could not read the unit {self.text!r} near {tok[1]!r}.")

    def factor(self, depth: int) -> tuple[Factor, ...]:
        kind, value = self.take()
        if kind == "name":
            base = _lookup(value)
        elif kind == "int" and value == "1":
            base = ()
        elif value == "(":
            base = self.product(depth + 1)
            self.close_bracket()
        else:
            raise InvalidAnswer(f"Could not read the unit {self.text!r} near {value!r}.")
        if self.peek() == ("op", "^"):
            self.take()
            base = _scaled(base, self.exponent())
        return base

    def close_bracket(self) -> None:
        if self.peek() != ("op", ")"):
            raise InvalidAnswer(f"Unbalanced brackets in the unit {self.text!r}.")
        self.take()

    def exponent(self) -> int:
        bracket = self.peek() == ("op", "(")
        if bracket:
            self.take()
        sign = 1
        if self.peek() == ("op", "-"):
            self.take()
            sign = -1
        kind, value = self.take()
        if kind != "int":
            raise InvalidAnswer(f"A unit exponent must be a whole number, not {value!r}.")
        if bracket:
            self.close_bracket()
        power = sign * int(value[:4])
        if len(value) > 3 or abs(power) > MAX_POWER:
            raise InvalidAnswer(f"The unit exponent {value} is too large.")
        return power


def _scaled(factors: tuple[Factor, ...], power: int) -> tuple[Factor, ...]:
    return tuple(Factor(f.prefix, f.base, f.power * power) for f in factors)


_CASE_HINTS = {
    "gb": "GB",
    "mb": "MB",
    "tb": "TB",
    "kb": "kB",
    "gib": "GiB",
    "mib": "MiB",
    "kib": "KiB",
    "tib": "TiB",
    "flops": "FLOP",
    "tflops": "TFLOP/s",
}


@lru_cache(maxsize=512)
def _lookup(name: str) -> tuple[Factor, ...]:
    """One unit name -> its factors. Pint resolves prefixes and plurals; we vet the result."""
    name = name.replace("µ", "u").replace("μ", "u")
    if name in ("x", "×"):
        return (Factor("", "", 1),)  # "1.8x": a plain ratio
    if name == "$":
        return (Factor("", "dollar", 1),)
    if name == "%":
        return (Factor("", "percent", 1),)
    m = _FLOPS_RATE.match(name)
    if m:  # FLOPS (capital S) is a rate; FLOPs / flops a count
        prefix = _prefix_name(m.group(1)) if m.group(1) else ""
        return (Factor(prefix, "FLOP", 1), Factor("", "second", -1))
    try:
        candidates = ureg.parse_unit_name(name)
    except Exception:  # noqa: BLE001 - Pint may raise several types; all mean "unknown"
        candidates = ()
    if not candidates:
        hint = _CASE_HINTS.get(name.lower())
        tail = f" Did you mean {hint}?" if hint and hint != name else ""
        raise InvalidAnswer(f"Unknown unit {name!r}.{tail}")
    prefix, base, _suffix = candidates[0]
    if prefix in _SMALL_PREFIXES and base not in _SMALL_PREFIX_OK:
        raise InvalidAnswer(
            f"{name!r} would mean milli/micro-{base}s; write it with a capital prefix "
            f"(for example MB for megabytes, Mb for megabits)."
        )
    return (Factor(prefix, base, 1),)


def _prefix_name(symbol: str) -> str:
    return {"k": "kilo", "K": "kilo", "M": "mega", "G": "giga", "T": "tera", "P": "peta", "E": "exa"}[
        symbol
    ]


@lru_cache(maxsize=256)
def parse_unit(text: str) -> ParsedUnit:
    """Read a unit string ("GB", "tok/s", "TFLOP/s", "$/h", "%", "" = dimensionless).

    Raises `InvalidAnswer` naming the problem (unknown unit, bad character, too long).
    """
    stripped = text.strip()
    if len(stripped) > MAX_UNIT_CHARS:
        raise InvalidAnswer("That unit is too long.")
    if stripped == "":
        return ParsedUnit("", ())
    factors = _UnitReader(stripped).read()
    merged = tuple(f for f in factors if f.base)  # drop "1" and "x"
    try:
        _product(merged)
    except Exception as exc:  # noqa: BLE001 - a Pint failure here means an unreadable unit
        raise InvalidAnswer(f"Could not read the unit {stripped!r}.") from exc
    return ParsedUnit(stripped, merged)


def conversion_factor(source: ParsedUnit, target: ParsedUnit) -> float:
    """How many `target` one `source` is; raises `pint.DimensionalityError` if incompatible."""
    return float(ureg.Quantity(1.0, source.unit).to(target.unit).magnitude)


def compatible(a: ParsedUnit, b: ParsedUnit) -> bool:
    return a.unit.dimensionality == b.unit.dimensionality


def swap_binary_prefixes(unit: ParsedUnit) -> ParsedUnit | None:
    """The same unit with decimal and binary data prefixes swapped (GB <-> GiB), or None when the
    unit has no prefixed bit/byte factor."""
    swapped: list[Factor] = []
    changed = False
    for f in unit.factors:
        if f.base in _INFORMATION_UNITS and f.prefix in _DECIMAL_TO_BINARY:
            swapped.append(Factor(_DECIMAL_TO_BINARY[f.prefix], f.base, f.power))
            changed = True
        elif f.base in _INFORMATION_UNITS and f.prefix in _BINARY_TO_DECIMAL:
            swapped.append(Factor(_BINARY_TO_DECIMAL[f.prefix], f.base, f.power))
            changed = True
        else:
            swapped.append(f)
    if not changed:
        return None
    factors = tuple(swapped)
    return ParsedUnit(unit_text(factors), factors)


def uses_binary_prefix(unit: ParsedUnit) -> bool:
    return any(f.base in _INFORMATION_UNITS and f.prefix in _BINARY_TO_DECIMAL for f in unit.factors)


def unit_text(factors: tuple[Factor, ...]) -> str:
    """Write factors back as a compact unit string ("GiB/s")."""
    num = [f for f in factors if f.power > 0]
    den = [f for f in factors if f.power < 0]

    def part(fs: list[Factor]) -> str:
        return "·".join(f.symbol + (f"^{abs(f.power)}" if abs(f.power) != 1 else "") for f in fs)

    top = part(num) or ("1" if den else "")
    if not den:
        return top
    bottom = part(den)
    return f"{top}/({bottom})" if len(den) > 1 else f"{top}/{bottom}"


def has_information(unit: ParsedUnit) -> bool:
    return "[information]" in dict(unit.unit.dimensionality)


# --- naming a kind of quantity, for "this part wants a data size" ---------------------------

_BASE_WORDS = {
    "[time]": "time",
    "[information]": "data",
    "[token]": "tokens",
    "[request]": "requests",
    "[compute]": "FLOPs",
    "[currency]": "money",
    "[energy]": "energy",
    "[transfer]": "transfers",
}
_KINDS: dict[tuple[tuple[str, float], ...], str] = {
    (): "a plain number (a count, ratio or fraction)",
    (("[time]", 1),): "a time",
    (("[information]", 1),): "a data size",
    (("[information]", 1), ("[time]", -1)): "a bandwidth (data per time)",
    (("[token]", 1),): "a number of tokens",
    (("[time]", -1), ("[token]", 1)): "a token rate (tokens per time)",
    (("[request]", 1),): "a number of requests",
    (("[request]", 1), ("[time]", -1)): "a request rate (requests per time)",
    (("[compute]", 1),): "an amount of compute (FLOPs)",
    (("[compute]", 1), ("[time]", -1)): "a compute rate (FLOP/s)",
    (("[time]", -1),): "a rate (per time)",
    (("[currency]", 1),): "an amount of money",
    (("[energy]", 1),): "an energy",
    (("[energy]", 1), ("[time]", -1)): "a power",
    (("[compute]", 1), ("[information]", -1)): "an arithmetic intensity (FLOP per byte)",
    (("[information]", 1), ("[token]", -1)): "a data size per token",
    (("[time]", 1), ("[token]", -1)): "a time per token",
}


def kind_of(unit: ParsedUnit) -> str:
    """A phrase for what a unit measures: "a data size", "a token rate", "data per tokens"."""
    dims = dict(unit.unit.dimensionality)
    key = tuple(sorted((k, v) for k, v in dims.items()))
    if key in _KINDS:
        return _KINDS[key]

    def words(items: list[tuple[str, float]]) -> str:
        out = []
        for k, v in items:
            w = _BASE_WORDS.get(k, k.strip("[]"))
            out.append(w if abs(v) == 1 else f"{w}^{abs(v):g}")
        return " × ".join(out)

    num = [(k, v) for k, v in key if v > 0]
    den = [(k, v) for k, v in key if v < 0]
    if num and den:
        return f"{words(num)} per {words(den)}"
    if num:
        return words(num)
    return f"a rate (per {words(den)})"
