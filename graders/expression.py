"""Grader for `expression` parts: a formula in the part's symbols, checked for equivalence.

Contract: `grade(part, answer_text, ctx)`; `ctx.reference` is a formula string in the safe grammar
(`1 - ln(100)*S/T`), each `Mistake.answer` a formula string too. The answer is read by
`graders.formula.parse_formula` (never sympify/eval); unreadable input raises `InvalidAnswer`.

Equivalence is decided in a separate Python process with a hard time limit (`TIME_LIMIT_S` after
the child is ready; it is killed afterwards), because simplification can take unbounded time. The
child gets already-built sympy objects (pickled by us), never text. Two formulas are equal only if
they agree everywhere both are defined, so the child evaluates them (in the reals, 50 digits, each
value with a first-order rounding-error bound) at `SAMPLE_POINTS` fixed-seed points per symbol kind
(`PartSpec.symbol_kinds`: positive reals by default, counts as whole numbers >= 1 or >= 0): the
variant's own values (`GradeContext.symbol_values`) and around them (x 0.5..2), every symbol over
a wide log range (reals 1e-4..1e7, counts 1..1e7 with 0..3 often), and corners where some symbols
are tiny and others huge. So `min(N, 10.5)*(B-1)` is not `N*(B-1)`, though the two agree on
[0.1, 10].

- a - b that sympy already reduces to 0: equal.
- one point where both are real and differ by more than 1e-9 relative plus their error bounds:
  different (a point whose error bound swamps its value, cancellation noise, is skipped).
- undefined points: where the reference is undefined the point is skipped. Where the reference is
  defined and the answer is not, the point is moved a hair (each symbol by a different relative
  1e-7): if the answer is defined there and agrees, it was a removable hole ((B^2-1)/(B-1) at
  B = 1) and is forgiven; otherwise (log(N - 1) at N = 1, a sqrt that is only real for T > S) the
  answer lacks part of the reference's domain and is different unless the exact step below
  proves a - b = 0.
- agreement at `MIN_AGREE` points or more, with nothing unforgiven: equal.
- otherwise (too few usable points, or unforgiven holes): `sympy.simplify(a - b) == 0`, with counts
  declared integers, within a share of the time limit: equal if so, different if not, undecided if
  it ran out of time. Sampling comes first because it settles nearly every case in milliseconds,
  where simplify on two formulas that differ can take seconds per listed mistake.

Verdicts: correct 1.0 (equivalent to the reference); incorrect 0.0 (not equivalent; a known
mistake's feedback when equivalent to that mistake's formula); error 0.0 when the child could not
decide in time (the caller must not count that attempt). No partial credit.

`preview(text, symbols)` returns the LaTeX echo for the page's live preview, or raises
`InvalidAnswer`; it does no equivalence work.
"""
from __future__ import annotations

import json
import os
import pickle
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Literal

import sympy

from exercises.spec import Mistake, PartSpec, SymbolKind
from graders.base import GradeContext, GradeResult, InvalidAnswer, read_input
from graders.formula import MAX_CHARS, Formula, parse_formula

# Seconds the child may spend comparing, once it has imported sympy and read its job.
TIME_LIMIT_S = 5.0
# Seconds allowed for the child to start (interpreter + sympy import); not the student's fault.
STARTUP_LIMIT_S = 30.0
MEMORY_LIMIT_BYTES = 2 * 1024**3
# Where the child evaluates both formulas: the variant and around it (x 0.5..2), each symbol over
# a wide log range (reals 1e-4..1e7, counts 1..1e7 with 0..3 often), and tiny/huge corners.
SAMPLE_PLAN = {"near": 16, "wide": 28, "corner": 16}
SAMPLE_POINTS = sum(SAMPLE_PLAN.values())
# Points where both sides are defined and agree before sampling alone may call them equal.
MIN_AGREE = 10
# Of TIME_LIMIT_S, what one exact `simplify` may take when sampling could not decide, so a slow
# proof against one mistake does not starve the others.
EXACT_SHARE = 0.5
SEED = 20240611

Decision = Literal["equal", "different"]

# The child program. It imports nothing of ours: only the standard library and sympy (with its
# mpmath), so it runs with `python -I` (no environment, no user site, no current directory).
_CHILD_CODE = r"""
import json, math, pickle, random, resource, signal, sys

def limit(memory, cpu):
    for res, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu)):
        try:
            soft, hard = resource.getrlimit(res)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(res, (value, hard))
        except (ValueError, OSError):
            pass

# --- where to look: points drawn per symbol kind --------------------------------------------

LOWEST = {"real": None, "count": 1, "count0": 0}

def log_uniform(rng, low, high):
    return math.exp(rng.uniform(math.log(low), math.log(high)))

def as_kind(kind, x):
    if kind == "real":
        return x
    return max(LOWEST[kind], int(round(x)))

def small_count(rng, kind):
    return rng.randint(LOWEST[kind], 3)

def draw_points(rng, names, kinds, values, plan):
    # The variant itself and its neighbourhood (a formula must hold where this variant lives),
    # then every symbol across a wide log range, then corners where some symbols are tiny and
    # others huge: a min/max/abs that only bites outside [0.1, 10] is found in the last two.
    points = []
    def point(pick):
        return {n: pick(n, kinds.get(n, "real")) for n in names}
    def near(n, kind):
        if n not in values:
            return as_kind(kind, math.exp(rng.uniform(-2.3, 2.3)))  # about [0.1, 10]
        v = values[n]
        if v == 0:  # a count0 at 0, or a real the variant sets to nothing: just above it
            return small_count(rng, kind) if kind != "real" else log_uniform(rng, 1e-4, 1e-2)
        return as_kind(kind, v * log_uniform(rng, 0.5, 2.0))
    def own(n, kind):
        if n in values and (values[n] or kind != "real"):
            return values[n]
        return near(n, kind)
    def wide(n, kind):
        if kind != "real" and rng.random() < 0.2:
            return small_count(rng, kind)  # 1, 2, 3 (and 0): where counts most often break
        return as_kind(kind, log_uniform(rng, 1e-4 if kind == "real" else 1, 1e7))
    def corner(n, kind):
        if rng.random() < 0.5:
            return small_count(rng, kind) if kind != "real" else log_uniform(rng, 1e-5, 1e-2)
        return as_kind(kind, log_uniform(rng, 1e4, 1e8))
    if values:
        points.append(point(own))
    while len(points) < plan["near"]:
        points.append(point(near))
    points += [point(wide) for _ in range(plan["wide"])]
    points += [point(corner) for _ in range(plan["corner"])]
    return points

# --- evaluation in the reals, with an error bound ------------------------------------------

class Undefined(Exception):
    # Not a real number here: log of a non-positive number, a fractional power of a negative
    # one, a division by zero, I, or a magnitude past BITS (treated as overflow).
    pass

DIGITS = 50
BITS = 6e7  # |log2| of the largest magnitude evaluated (about 10^(1.8e7))

# Each node gives (value, err): err bounds the absolute rounding error to first order, carried
# up the tree, so a result that is tiny only because terms cancelled (1 - 474 * (1/474)) is
# judged against its own noise, not against a fixed floor. EPS is one rounding at DIGITS.

def real(sympy, mp, e, env, eps):
    if e.is_Symbol:
        return env[e.name], mp.mpf(0)
    if e.is_Integer:
        return mp.mpf(int(e)), mp.mpf(0)
    if e.is_Rational:
        v = mp.mpf(int(e.p)) / int(e.q)
        return v, eps * abs(v)
    if e.is_Add:
        parts = [real(sympy, mp, a, env, eps) for a in e.args]
        v = checked(mp, mp.fsum([x for x, _ in parts]))
        return v, mp.fsum([err for _, err in parts]) + eps * mp.fsum([abs(x) for x, _ in parts])
    if e.is_Mul:
        v, err = mp.mpf(1), mp.mpf(0)
        for arg in e.args:
            x, ex = real(sympy, mp, arg, env, eps)
            product = checked(mp, v * x)
            err = abs(v) * ex + abs(x) * err + err * ex + eps * abs(product)
            v = product
        return v, err
    if e.is_Pow:
        return power(mp, real(sympy, mp, e.base, env, eps), real(sympy, mp, e.exp, env, eps), eps)
    if isinstance(e, sympy.exp):
        x, ex = real(sympy, mp, e.args[0], env, eps)
        if abs(x) > BITS * 0.69:
            raise Undefined()
        v = mp.exp(x)
        return v, v * (ex + eps)
    if isinstance(e, sympy.log) and len(e.args) == 1:
        x, ex = real(sympy, mp, e.args[0], env, eps)
        if x <= 0:
            raise Undefined()
        v = mp.log(x)
        return v, ex / x + eps * abs(v)
    if isinstance(e, sympy.Abs):
        x, ex = real(sympy, mp, e.args[0], env, eps)
        return abs(x), ex
    if isinstance(e, (sympy.Min, sympy.Max)):
        xs = [real(sympy, mp, a, env, eps) for a in e.args]
        pick = min if isinstance(e, sympy.Min) else max
        return pick(x for x, _ in xs), max(err for _, err in xs)
    if e is sympy.pi:
        return +mp.pi, eps * 4
    if e is sympy.E:
        return +mp.e, eps * 3
    if e.is_Float:
        return mp.mpf(e._mpf_), mp.mpf(0)
    if e is sympy.I:
        raise Undefined()
    v = by_evalf(sympy, mp, e, env)  # anything else sympy built: slow but exact rules
    return v, eps * abs(v) * 10

def by_evalf(sympy, mp, e, env):
    subs = {s: sympy.Float(str(env[s.name]), DIGITS) for s in e.free_symbols}
    v = e.evalf(DIGITS, subs=subs)
    if not (v.is_Number and v.is_real and v.is_finite):
        raise Undefined()
    return mp.mpf(str(v))

def checked(mp, x):
    if x and abs(mp.mag(x)) > BITS:
        raise Undefined()
    return x

def power(mp, base, exponent, eps):
    (x, ex), (y, ey) = base, exponent
    if x == 0:
        if y <= 0:
            raise Undefined()
        return mp.mpf(0), ex
    whole = mp.isint(y) and ey == 0
    if x < 0 and not whole:
        raise Undefined()
    if abs(y * mp.mag(x)) > BITS:
        raise Undefined()
    if x < 0:
        v = (-1 if int(y) % 2 else 1) * mp.power(-x, y)
    else:
        v = mp.power(x, y)
    # d(x^y) = x^y (y dx / x + ln|x| dy); repeated squaring adds a few roundings (log2 y).
    rounding = eps * (2 + mp.log(abs(y) + 1, 2))
    return v, abs(v) * (abs(y) * ex / abs(x) + abs(mp.log(abs(x))) * ey + rounding)

NOISE = 100  # how far past the first-order bound rounding may go before a gap counts

def value_at(sympy, mp, expr, point):
    # (value, error bound) or None where the formula is not a real number here.
    try:
        with mp.workdps(DIGITS):
            v, err = real(sympy, mp, expr, point, mp.mpf(10) ** -DIGITS)
            return v, err * NOISE
    except (Undefined, ZeroDivisionError, ValueError, OverflowError, TypeError):
        return None

def agree(mp, x, y):
    # True / False, or None where cancellation noise is too large to tell.
    with mp.workdps(DIGITS):
        (va, ea), (vb, eb) = x, y
        scale = max(abs(va), abs(vb))
        noise = ea + eb
        if noise > scale * mp.mpf("1e-6"):
            return None
        return abs(va - vb) <= scale * mp.mpf("1e-9") + noise

def nudged(mp, point):
    # The point moved off any isolated singularity (B = 1 in (B^2 - 1)/(B - 1), S = T in a
    # removable 1/(S - T)): every symbol moves by a different tiny relative step, counts too.
    names = sorted(point)
    with mp.workdps(DIGITS):
        return {n: point[n] * (1 + mp.mpf("1e-7") * (i + 1)) if point[n] else
                mp.mpf("1e-7") * (i + 1) for i, n in enumerate(names)}

# --- the decision ---------------------------------------------------------------------------

def sample(sympy, mp, a, b, points, a_values, min_agree):
    # "different": the two disagree at a point where both are real numbers.
    # "holes": they never disagree, but the answer `a` is undefined at a point where `b` is
    #   defined and stays undefined (or disagrees) a hair away, so it is not a removable
    #   singularity: `a` is missing part of `b`'s domain (e.g. log(N - 1) at N = 1).
    # "equal": they agree at `min_agree` points or more and the rest are removable holes or
    #   points where `b` itself is undefined; "unknown" otherwise (too few usable points).
    agreed, holes = 0, False
    for i, point in enumerate(points):
        vb = value_at(sympy, mp, b, point)
        if vb is None:
            continue  # the reference is not defined here: nothing to hold the answer to
        va = a_values[i]
        if va is None:
            moved = nudged(mp, point)
            wa, wb = value_at(sympy, mp, a, moved), value_at(sympy, mp, b, moved)
            if wb is None:
                continue
            if wa is None or agree(mp, wa, wb) is False:
                holes = True
            continue
        same = agree(mp, va, vb)
        if same is False:
            return "different"
        if same:
            agreed += 1
    if holes:
        return "holes"
    return "equal" if agreed >= min_agree else "unknown"

class OutOfTime(Exception):
    pass

def on_alarm(signum, frame):
    raise OutOfTime()

def exactly_equal(sympy, a, b, kinds, budget):
    # sympy.simplify(a - b) == 0 with counts declared integers, within `budget` seconds (an
    # alarm interrupts sympy, which is pure Python); None when it ran out of time.
    names = {s.name: s for s in (a.free_symbols | b.free_symbols)}
    swap = {}
    for name, kind in kinds.items():
        if name in names and kind == "count":
            swap[names[name]] = sympy.Symbol(name, integer=True, positive=True)
        elif name in names and kind == "count0":
            swap[names[name]] = sympy.Symbol(name, integer=True, nonnegative=True)
    diff = (a - b).xreplace(swap)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        return sympy.simplify(diff) == 0
    except OutOfTime:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)

def decide(sympy, mp, a, b, points, a_values, job):
    if a - b == 0:  # sympy's own evaluation already made them one expression
        return "equal"
    found = sample(sympy, mp, a, b, points, a_values, job["min_agree"])
    if found in ("different", "equal"):
        return found
    # Sampling could not settle it (too few usable points, or only holes): an exact proof of
    # a - b == 0 wins; anything else is a difference, and running out of time is undecided.
    exact = exactly_equal(sympy, a, b, job["kinds"], job["exact_budget"])
    if exact is None:
        return None
    return "equal" if exact else "different"

def main():
    config = json.loads(sys.argv[1])
    limit(config["memory"], config["cpu"])
    import sympy
    import mpmath as mp
    job = pickle.loads(sys.stdin.buffer.read())
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    answer = job["answer"]
    names = set(job["symbols"])
    for e in [answer] + job["others"]:
        names |= {s.name for s in e.free_symbols}
    rng = random.Random(job["seed"])
    raw = draw_points(rng, sorted(names), job["kinds"], job["values"], job["plan"])
    with mp.workdps(DIGITS):
        points = [{n: mp.mpf(v) for n, v in p.items()} for p in raw]
    a_values = [value_at(sympy, mp, answer, p) for p in points]
    for i, other in enumerate(job["others"]):
        try:
            verdict = decide(sympy, mp, answer, other, points, a_values, job)
        except Exception:
            verdict = None
        sys.stdout.write(json.dumps({"i": i, "verdict": verdict}) + "\n")
        sys.stdout.flush()

main()
"""


def grade(part: PartSpec, answer_text: str, ctx: GradeContext) -> GradeResult:
    """Grade a formula answer; see the module docstring for the verdicts."""
    reference = _authored(ctx.reference, part, "reference")
    mistakes = [(m, _authored(m.answer, part, f"mistake {m.name or m.feedback[:30]!r}")) for m in ctx.mistakes]
    text = read_input(answer_text, max_chars=MAX_CHARS, what="formula")
    answer = parse_formula(text, part.symbols)
    echo = answer.latex

    def result(score: float, verdict: Literal["correct", "incorrect", "error"], feedback: str,
               mistake: Mistake | None = None, **extra: object) -> GradeResult:
        if mistake is None:
            return GradeResult(score, verdict, feedback, echo=echo, extra=dict(extra))
        return GradeResult(score, verdict, feedback, echo=echo, mistake=mistake.name or "mistake",
                           kinds=mistake.kinds, extra=dict(extra))

    # Structurally identical after sympy's canonical ordering: no need for a child process.
    if answer.expr == reference.expr:
        return result(1.0, "correct", "Correct.")
    for mistake, formula in mistakes:
        if answer.expr == formula.expr:
            return result(0.0, "incorrect", mistake.feedback, mistake)

    decisions = compare(answer.expr, [reference.expr] + [f.expr for _, f in mistakes],
                        symbols=part.symbols, kinds=dict(part.symbol_kinds),
                        values=ctx.symbol_values)
    if decisions[0] is None:
        return result(
            0.0,
            "error",
            "Could not decide in time whether your formula equals the expected one; this attempt "
            "is not counted. Try writing it in a simpler form.",
            reason="undecided",
        )
    if decisions[0] == "equal":
        return result(1.0, "correct", "Correct.")
    for (mistake, _), decision in zip(mistakes, decisions[1:], strict=True):
        if decision == "equal":
            return result(0.0, "incorrect", mistake.feedback, mistake)
    return result(0.0, "incorrect", _not_equivalent(answer, reference))


def preview(text: str, symbols: Sequence[str]) -> str:
    """LaTeX of the formula as it was read, for the live echo; raises `InvalidAnswer`."""
    return parse_formula(read_input(text, max_chars=MAX_CHARS, what="formula"), symbols).latex


def _authored(formula: object, part: PartSpec, what: str) -> Formula:
    """Parse an author's formula; failures are authoring errors (ValueError), not the student's."""
    if not isinstance(formula, str):
        raise ValueError(f"part {part.id!r}: {what} must be a formula string, not {formula!r}")
    try:
        return parse_formula(formula, part.symbols)
    except InvalidAnswer as exc:
        raise ValueError(f"part {part.id!r}: {what} {formula!r} cannot be read: {exc}") from None


def _not_equivalent(answer: Formula, reference: Formula) -> str:
    missing = sorted(str(s) for s in reference.expr.free_symbols - answer.expr.free_symbols)
    extra = sorted(str(s) for s in answer.expr.free_symbols - reference.expr.free_symbols)
    hints = []
    if missing:
        hints.append(f"the expected formula depends on {', '.join(missing)}, yours does not")
    if extra:
        hints.append(f"yours depends on {', '.join(extra)}, the expected one does not")
    tail = f" ({'; '.join(hints)})" if hints else ""
    return f"Not equivalent to the expected formula{tail}."


# --- the child process ----------------------------------------------------------------------


def compare(
    answer: sympy.Expr,
    others: Sequence[sympy.Expr],
    *,
    time_limit_s: float | None = None,
    stop_at_first_equal: bool = True,
    symbols: Sequence[str] = (),
    kinds: Mapping[str, SymbolKind] | None = None,
    values: Mapping[str, float] | None = None,
) -> list[Decision | None]:
    """Decide, in a child process, whether `answer` equals each of `others` (in order).

    `symbols` are the part's names (the formulas' own free symbols are added), `kinds` say which
    are counts (default: positive reals), `values` the variant's value of each, sampled around.
    Returns one entry per `others`: "equal", "different", or None when the child did not decide
    it in time (or failed). With `stop_at_first_equal`, the child is stopped as soon as
    `others[0]` is found equal. The child is always killed before this returns.
    """
    limit = TIME_LIMIT_S if time_limit_s is None else time_limit_s
    results: list[Decision | None] = [None] * len(others)
    if not others:
        return results
    payload = pickle.dumps({
        "answer": answer,
        "others": list(others),
        "symbols": list(symbols),
        "kinds": dict(kinds or {}),
        "values": {k: float(v) for k, v in (values or {}).items()},
        "plan": SAMPLE_PLAN,
        "min_agree": MIN_AGREE,
        "exact_budget": max(0.01, limit * EXACT_SHARE),
        "seed": SEED,
    })
    config = {"memory": MEMORY_LIMIT_BYTES, "cpu": int(STARTUP_LIMIT_S + limit) + 2}
    with tempfile.TemporaryFile() as job:
        job.write(payload)
        job.seek(0)
        proc = subprocess.Popen(  # a fixed program: our own interpreter, no shell
            [sys.executable, "-I", "-c", _CHILD_CODE, json.dumps(config)],
            stdin=job,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
    try:
        assert proc.stdout is not None
        reader = _LineReader(proc.stdout.fileno())
        if reader.next_line(time.monotonic() + STARTUP_LIMIT_S) != "ready":
            return results
        deadline = time.monotonic() + limit
        while any(r is None for r in results):
            line = reader.next_line(deadline)
            if line is None:
                break
            index, decision = _decode(line, len(others))
            if index is None:
                break
            results[index] = decision
            if decision is None:  # the child failed on this one: it will not be decided
                continue
            if index == 0 and decision == "equal" and stop_at_first_equal:
                break
    finally:
        _stop(proc)
    return results


def _decode(line: str, n: int) -> tuple[int | None, Decision | None]:
    try:
        data = json.loads(line)
        index = int(data["i"])
        verdict = data["verdict"]
    except (ValueError, KeyError, TypeError):
        return None, None
    if not 0 <= index < n:
        return None, None
    return index, verdict if verdict in ("equal", "different") else None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed process always exits
        pass
    if proc.stdout is not None:
        proc.stdout.close()


class _LineReader:
    """Reads newline-terminated lines from a pipe with deadlines (select + os.read)."""

    MAX_LINE = 4096

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def next_line(self, deadline: float) -> str | None:
        """The next line without its newline, or None on timeout, end of stream or garbage."""
        while b"\n" not in self.buffer:
            if self.closed or len(self.buffer) > self.MAX_LINE:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self.closed = True
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace").strip()
