"""Grader for `expression` parts: a formula in the part's symbols, checked for equivalence.

Contract: `grade(part, answer_text, ctx)`; `ctx.reference` is a formula string in the safe grammar
(`1 - ln(100)*S/T`), each `Mistake.answer` a formula string too. The answer is read by
`graders.formula.parse_formula` (never sympify/eval); unreadable input raises `InvalidAnswer`.

Equivalence is decided in a separate Python process with a hard time limit (`TIME_LIMIT_S` after
the child is ready; it is killed afterwards), because simplification can take unbounded time. The
child gets already-built sympy objects (pickled by us), never text. It first evaluates both sides
at 8 random positive points (fixed seed, 30 digits, relative tolerance 1e-9); if every point agrees
the formulas are equal, if one point differs they are not; if evaluation is inconclusive (complex
values, overflow) it falls back to `sympy.simplify(a - b) == 0`.

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
from collections.abc import Sequence
from typing import Literal

import sympy

from exercises.spec import PartSpec
from graders.base import GradeContext, GradeResult, InvalidAnswer, read_input
from graders.formula import MAX_CHARS, Formula, parse_formula

# Seconds the child may spend comparing, once it has imported sympy and read its job.
TIME_LIMIT_S = 5.0
# Seconds allowed for the child to start (interpreter + sympy import); not the student's fault.
STARTUP_LIMIT_S = 30.0
MEMORY_LIMIT_BYTES = 2 * 1024**3
SAMPLE_POINTS = 8
SEED = 20240611

Decision = Literal["equal", "different"]

# The child program. It imports nothing of ours: only the standard library and sympy, so it runs
# with `python -I` (no environment, no user site, no current directory on sys.path).
_CHILD_CODE = r"""
import json, math, pickle, random, resource, sys

def limit(memory, cpu):
    for res, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu)):
        try:
            soft, hard = resource.getrlimit(res)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(res, (value, hard))
        except (ValueError, OSError):
            pass

def value_at(sympy, expr, point):
    try:
        c = complex(expr.evalf(30, subs=point))
    except (TypeError, ValueError, ArithmeticError):
        return None
    if not (math.isfinite(c.real) and math.isfinite(c.imag)):
        return None
    if abs(c.imag) > 1e-12 * max(1.0, abs(c.real)):
        return None
    return c.real

def decide(sympy, a, b, points, seed):
    rng = random.Random(seed)
    symbols = sorted(a.free_symbols | b.free_symbols, key=str)
    inconclusive = False
    for _ in range(points):
        point = {s: sympy.Float(math.exp(rng.uniform(-2.3, 2.3)), 30) for s in symbols}
        va, vb = value_at(sympy, a, point), value_at(sympy, b, point)
        if va is None or vb is None:
            inconclusive = True
            continue
        scale = max(abs(va), abs(vb))
        if va == vb or abs(va - vb) <= 1e-9 * scale:
            continue
        if scale < 1e-20:
            inconclusive = True  # both near zero: cancellation noise, not a difference
            continue
        return "different"
    if not inconclusive:
        return "equal"
    return "equal" if sympy.simplify(a - b) == 0 else "different"

def main():
    config = json.loads(sys.argv[1])
    limit(config["memory"], config["cpu"])
    import sympy
    job = pickle.loads(sys.stdin.buffer.read())
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for i, other in enumerate(job["others"]):
        try:
            verdict = decide(sympy, job["answer"], other, job["points"], job["seed"])
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
               mistake: str = "", **extra: object) -> GradeResult:
        return GradeResult(score, verdict, feedback, echo=echo, mistake=mistake, extra=dict(extra))

    # Structurally identical after sympy's canonical ordering: no need for a child process.
    if answer.expr == reference.expr:
        return result(1.0, "correct", "Correct.")
    for mistake, formula in mistakes:
        if answer.expr == formula.expr:
            return result(0.0, "incorrect", mistake.feedback, mistake.name or "mistake")

    decisions = compare(answer.expr, [reference.expr] + [f.expr for _, f in mistakes])
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
            return result(0.0, "incorrect", mistake.feedback, mistake.name or "mistake")
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
) -> list[Decision | None]:
    """Decide, in a child process, whether `answer` equals each of `others` (in order).

    Returns one entry per `others`: "equal", "different", or None when the child did not decide
    it in time (or failed). With `stop_at_first_equal`, the child is stopped as soon as
    `others[0]` is found equal. The child is always killed before this returns.
    """
    limit = TIME_LIMIT_S if time_limit_s is None else time_limit_s
    results: list[Decision | None] = [None] * len(others)
    if not others:
        return results
    payload = pickle.dumps(
        {"answer": answer, "others": list(others), "points": SAMPLE_POINTS, "seed": SEED}
    )
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
