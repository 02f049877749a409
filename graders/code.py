"""Grades a `code` part: the student's Python runs in the sandbox, the checks run here.

The exercise's `code/` folder supplies three trusted modules: `checks.py` (the cases and the
checks), `driver.py` (`run_case(module, case_input)` plays one case) and `reference.py`. The
reference's outputs are computed in this process with the same driver, so hidden expectations
never enter the sandbox; checks.py, reference.py and the mutants are never copied in.

Inside the sandbox (runners/relay.py has the whole picture):

    this worker --stdin: key, limits, case inputs--> relay.py --fd 3: one case--> case_loop.py
                <--stdout: sealed records---------            <--fd 4: one reply--  driver.py
                <--stderr: the student's prints---            <--fd 1+2: prints--  submission.py

Only the relay's stdout is believed: each line carries a keyed BLAKE2b seal over its sequence
number and body, with a key made here per run and read by the relay before any student code
started. Lines without a valid seal, out of order or repeated are ignored, and a run whose
"end" record is missing counts for nothing. The relay accepts exactly one reply per case, in
order (carrying the nonce that case was sent with, of a known kind, bounded in size) and records
it under the case's index; the payload is parsed here, as strict JSON, and an error report's
shape is checked. So what the student prints or writes to any fd cannot become a result, and
the most any code in the sandbox can decide is the output of the case it is being asked.

`checks.check(cases, got, expected, params)` receives, per case, `{"output": ...}` (what
`driver.run_case` returned; for a case checks.py marks `"timed"`, also `"cpu_s"`: the CPU
seconds the relay measured for it, and the reference's in `expected`) or `{"error": "..."}`
(no output: an exception outside the student's methods, an oversized output, a crash the run
recovered from, or an output outside the limits every exercise shares: a non-finite number, an
integer beyond 64 bits, deep nesting; see graders/outputs.py, which also keeps a checks.py that
raises on a malformed output from turning it into an error verdict).

A run that cannot get through the cases (time, memory or output limit, a crash, a tampered
channel) scores 0 with one plainly worded check naming the case it stopped on, the limit's value
from exercise.toml, the student's own traceback and the tail of what it printed.

If no sandbox is available `SandboxUnavailable` propagates: the pipeline marks the submission
`error`. Student code is never run in this process.
"""
from __future__ import annotations

import binascii
import gc
import hashlib
import hmac
import json
import secrets
import signal
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from exercises.file_module import load_file
from exercises.registry import expose_shared_modules, shared_module_path
from exercises.spec import PartSpec
from graders import fixed_cases, outputs
from graders.base import Check, GradeContext, GradeResult, InvalidAnswer

MAX_SOURCE_BYTES = 100_000
EXPECTED_CACHE_SIZE = 32
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

# The relay's protocol limits. One reply (one case's output) and all replies together; the
# student's prints have their own limit (PartSpec.output_limit_kb), enforced by the relay.
MAX_REPLY_BYTES = 256 * KiB
RESULTS_BUDGET_BYTES = 16 * MiB
# The sandbox's own output cap sits above prints + results + one end record (its payload, an
# exception report, is at most one reply, base64 in the line); only output written around the
# relay (e.g. through /proc/1/fd/2 where the worker's pipe is reachable) can reach it.
CHANNEL_SLACK_BYTES = MAX_REPLY_BYTES * 4 // 3 + 4 * KiB
# The relay times the cases itself, in CPU seconds (runners/cpuclock.py); the sandbox's wall
# clock is a backstop above the relay's own (WALL_FACTOR x the limit) that also covers bwrap's
# and the interpreters' start-up.
BACKSTOP_GRACE_S = 2.0
# A timed case's reference is timed this many times and its least figure kept (run_and_time).
REFERENCE_TIMINGS = 3
# ... but only when the submission's own time on the case is above this many times the
# reference's first timing (graders.code.retimed). Every speed check's bound is 20x the
# reference; tests/graders/test_code_retime.py holds each at 5x this or more.
RETIME_ABOVE = 2.0
# A run the relay stopped as starved of a core ("busy") is run again this many times, then
# given up as MachineBusy: the machine's fault, never the student's TLE.
BUSY_RETRIES = 1
# A crash (or tampering) in one case costs that case; the child is restarted once, not more.
RESTARTS = 1
SEAL_BYTES = 16
# What a stopped run shows of the student's prints.
TAIL_LINES = 40
TAIL_BYTES = 4 * KiB
TRACE_FRAMES = 20
# Any one piece of student-made text (an exception message, a frame) in a message.
MAX_SHOWN_CHARS = 2000
# relay.py exits with this when its own set-up fails (nothing of the student's ran yet).
RELAY_SETUP_FAILED = 3
STUDENT_FILE = "submission.py"

LIMIT_CHECKS = {
    "TLE": "time limit",
    "MLE": "memory limit",
    "OLE": "output limit",
    "RE": "runs without crashing",
}

_lock = threading.Lock()
_expected: OrderedDict[tuple[Any, ...], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = (
    OrderedDict())
# The reference's result on each case every seed draws (public and edge cases), per variant, by
# the case's input as canonical JSON.
_seedless: OrderedDict[tuple[Any, ...], dict[str, dict[str, Any]]] = OrderedDict()


def load_module(path: Path) -> ModuleType:
    """Import one trusted exercise file under a name of its own (reloaded when the file changes:
    the name carries its path, mtime and size), through exercises.file_module.load_file."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    digest = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
    return load_file(f"roofline_exercise_code_{digest}_{path.stem}", path)


def _source_bytes(answer_text: str) -> bytes:
    if not answer_text.strip():
        raise InvalidAnswer("the submission is empty")
    try:
        data = answer_text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidAnswer("the submission is not valid UTF-8 text") from exc
    if len(data) > MAX_SOURCE_BYTES:
        raise InvalidAnswer(f"the submission is {len(data):,} bytes; the limit is "
                            f"{MAX_SOURCE_BYTES:,}")
    if "\x00" in answer_text:
        raise InvalidAnswer("the submission contains a NUL character")
    return data


def _cases_and_expected(code_dir: Path, reference: str, params: dict[str, Any], seed: int,
                        mode: str, sandbox_modules: tuple[str, ...] = ()
                        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The cases for this mode and the reference's results on them (cached per variant and
    seed). Submit's hidden cases are drawn with the submission's own seed (practice.variants.
    hidden_seed), so the seed is part of the key; Run's public cases depend on the variant only,
    so every Run of a variant shares one entry whatever seed it was given."""
    checks = load_module(code_dir / "checks.py")
    expose_shared_modules(sandbox_modules)
    driver = load_module(code_dir / "driver.py")
    ref = load_module(code_dir.parent / reference)
    key = (id(checks), id(driver), id(ref), json.dumps(params, sort_keys=True, default=str),
           int(seed) if mode != "run" else 0, mode)
    with _lock:
        hit = _expected.get(key)
        if hit is not None:
            _expected.move_to_end(key)
            return hit
    cases = list(checks.public_cases(params))
    public = len(cases)
    if mode != "run":
        cases += list(checks.hidden_cases(params, seed))
    ids = [c["id"] for c in cases]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{code_dir}/checks.py: case ids are not unique")
    expected = _reference_results(key[:4], checks, driver, ref, params, cases, public)
    with _lock:
        _expected[key] = (cases, expected)
        while len(_expected) > EXPECTED_CACHE_SIZE:
            _expected.popitem(last=False)
    return cases, expected


def _reference_results(variant_key: tuple[Any, ...], checks: ModuleType, driver: ModuleType,
                       ref: ModuleType, params: dict[str, Any], cases: list[dict[str, Any]],
                       public: int) -> list[dict[str, Any]]:
    """The reference's result on each case. Timed once: the least of REFERENCE_TIMINGS only
    matters to a slow submission, and `retimed` adds the other timings for that one (they were
    a fifth of some grades). An untimed case that every seed draws (the first `public` cases,
    and those fixed_cases.fixed_ids finds, by id and input) has the same result for every
    submission of the variant, so it is run once per process: up to a sixth of the reference's
    time over the code exercises, half of it in some (their edge cases are whole simulations)."""
    seedless = {c["id"]: fixed_cases.input_key(c) for c in cases[:public]}
    if len(cases) > public:
        seedless.update(fixed_cases.fixed_ids(checks, params))
    with _lock:
        known = _seedless.get(variant_key)
        if known is None:
            known = _seedless[variant_key] = {}
            while len(_seedless) > EXPECTED_CACHE_SIZE:
                _seedless.popitem(last=False)
        _seedless.move_to_end(variant_key)
    expected = []
    for case in cases:
        # By id first: a key for every drawn case costs as much as the runs it would save.
        input_key = seedless.get(case["id"])
        if input_key is not None and not case.get("timed") \
                and fixed_cases.input_key(case) == input_key:
            hit = known.get(input_key)
            if hit is None:
                hit = known[input_key] = run_and_time(driver, ref, case, timings=1)
            expected.append(hit)
        else:
            expected.append(run_and_time(driver, ref, case, timings=1))
    return expected


def run_and_time(driver: ModuleType, ref: ModuleType, case: dict[str, Any],
                 timings: int = REFERENCE_TIMINGS) -> dict[str, Any]:
    """A trusted module's result on one case (the reference's, here); for a timed case
    (`"timed": True` in checks.py) also its CPU seconds, timed like the student's: the whole
    `run_case`, in CPU time (this thread's: a worker's other threads must not count), as the
    relay times the child's (runners/relay.py). The least of `timings` runs: CPU time on a
    shared VM still varies by +-50 % run to run, and noise can only add to a figure, so the
    least is the one closest to the code's own cost. A slow solution then cannot pass because
    its reference happened to be timed at a bad moment, and an honest one keeps all of the
    check's headroom (the bound is 20x) for noise in its own single run. Tests time mutants
    with it (timings=1: a mutant is the slow side)."""
    if not case.get("timed"):
        return {"output": driver.run_case(ref, case["input"])}
    # A worker's heap is far bigger than a fresh sandbox's: a full collection set off by the
    # case's allocations would scan all of it, so the collector is off during the timing. (No
    # gc.collect() first: with the collector off nothing collects inside the timing anyway, and
    # a full collection of a worker's heap costs more than the reference's whole run.)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(max(1, timings)):
            start = time.thread_time()
            output = driver.run_case(ref, case["input"])
            best = min(best, time.thread_time() - start)
    finally:
        if was_enabled:
            gc.enable()
    return {"output": output, "cpu_s": best}


def retimed(code_dir: Path, reference: str, cases: list[dict[str, Any]],
            got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`expected` with the reference timed REFERENCE_TIMINGS times in all (its least time kept)
    on each timed case where the submission's CPU time is above RETIME_ABOVE times the
    reference's single timing. Below that, more timings could only lower the reference's
    figure by noise, and a bound of 20x it would still pass the submission unless one timing
    had been inflated more than 20 / RETIME_ABOVE times over. A new list: the cached one is
    shared by later grades of the seed."""
    out = expected
    for i, (case, mine, exp) in enumerate(zip(cases, got, expected, strict=False)):
        ref_cpu, own_cpu = exp.get("cpu_s"), mine.get("cpu_s")
        if not (case.get("timed") and isinstance(ref_cpu, float)
                and isinstance(own_cpu, float) and own_cpu > RETIME_ABOVE * ref_cpu):
            continue
        driver = load_module(code_dir / "driver.py")
        ref = load_module(code_dir.parent / reference)
        again = run_and_time(driver, ref, case, timings=REFERENCE_TIMINGS - 1)
        if out is expected:
            out = list(expected)
        out[i] = {**exp, "cpu_s": min(ref_cpu, again["cpu_s"])}
    return out


def _describe_case(checks: ModuleType, case: dict[str, Any]) -> str:
    describe = getattr(checks, "describe", None)
    if callable(describe):
        return str(describe(case))
    return json.dumps(case["input"])[:400]


# -- limits in words ----------------------------------------------------------------------------

def format_bytes(n: int) -> str:
    """1048576 -> "1 MiB", 1536 KiB -> "1.5 MiB", 1000 KiB -> "1000 KiB": the largest unit that
    shows the value exactly with at most one decimal."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            value = n / size
            text = f"{value:.1f}".rstrip("0").rstrip(".")
            if float(text) == value:
                return f"{text} {unit}"
    return f"{n / KiB:.1f} KiB" if n >= KiB else f"{n} bytes"


def format_seconds(s: float) -> str:
    return f"{s:g} s"


# -- the relay's channel ------------------------------------------------------------------------

@dataclass
class Record:
    """One sealed line from the relay (see runners/relay.py for the layout)."""

    kind: str  # ready | output | error | failed | end
    index: int
    field: str
    payload: bytes


@dataclass
class RelayReport:
    """What the relay reported, in order: only sealed lines with the next sequence number."""

    cases: list[Record] = field(default_factory=list)  # output/error/failed, one per case
    ready: bool = False  # submission.py was imported (at least once)
    end: Record | None = None  # None: the relay never finished (killed, or a sandbox limit)
    ignored_lines: int = 0


def seal(key: bytes, body: bytes) -> bytes:
    """The seal relay.py puts before each record (same construction; a test keeps them in step)."""
    return hashlib.blake2b(body, key=key, digest_size=SEAL_BYTES).hexdigest().encode("ascii")


def read_relay(stdout: bytes, key: bytes) -> RelayReport:
    """Parse the relay's stdout. A line counts only if its seal verifies and its sequence number
    is the next one: forged lines fail the seal, replayed ones the sequence, and once a line is
    lost (e.g. garbage written into the middle of it) nothing after it counts."""
    report = RelayReport()
    seq = 0
    for line in stdout.split(b"\n"):
        parts = line.split(b" ")
        body = line[len(parts[0]) + 1:]
        if len(parts) != 6 or not hmac.compare_digest(parts[0], seal(key, body)):
            report.ignored_lines += bool(line)
            continue
        try:
            number, kind, index = int(parts[1]), parts[2].decode("ascii"), int(parts[3])
            record = Record(kind, index, parts[4].decode("ascii"),
                            binascii.a2b_base64(parts[5], strict_mode=True))
        except (ValueError, binascii.Error):
            report.ignored_lines += 1
            continue
        if number != seq:
            report.ignored_lines += 1
            continue
        seq += 1
        if kind == "end":
            report.end = record
            break
        if kind == "ready":
            report.ready = True
        else:
            report.cases.append(record)
    return report


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_payload(payload: bytes) -> Any:
    """A payload the child wrote (so the student could have written it): strict JSON or None."""
    try:
        return json.loads(payload, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None


# -- what the student sees ----------------------------------------------------------------------

def _printable(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """Student-made text as it may be stored and shown: bounded (the child bounds it, but a
    forged reply need not), no NUL (PostgreSQL jsonb refuses it), no lone surrogates."""
    if len(text) > limit:
        text = text[:limit] + " ..."
    return text.replace("\x00", "\\x00").encode("utf-8", "replace").decode("utf-8")


def _own_frames(frames: Any, dropped: Any = 0) -> list[str]:
    """The frames of the student's own file in Python's layout, repeats collapsed, innermost
    kept: the relay's, the child loop's and the driver's frames say nothing to the student.
    `dropped`: outer frames the child already left out (a deep recursion)."""
    # case_loop.py names the student's file plain "submission.py"; ours keep their full paths.
    own = [f for f in frames if isinstance(f, list) and len(f) == 4
           and f[0] == STUDENT_FILE] if isinstance(frames, list) else []
    lines: list[str] = []
    previous: tuple[Any, ...] | None = None
    repeats = 0

    def flush_repeats() -> None:
        if repeats >= 3:
            lines.append(f"  [Previous line repeated {repeats - 2} more times]")

    for _, lineno, name, text in own:
        here = (lineno, name)
        if here == previous:
            repeats += 1
            if repeats >= 3:
                continue  # a deep recursion: say how deep instead of listing it
        else:
            flush_repeats()
            previous, repeats = here, 0
        lines.append(_printable(f'  File "{STUDENT_FILE}", line {lineno}, in {name}', 200))
        if text:
            lines.append(_printable(f"    {str(text).strip()}", 200))
    flush_repeats()
    if len(lines) > 2 * TRACE_FRAMES or (own and isinstance(dropped, int) and dropped > 0):
        lines = ["  ... (outer frames left out)", *lines[-2 * TRACE_FRAMES:]]
    return lines


def student_traceback(report: Any) -> str:
    """An exception report from the child, trimmed to submission.py's frames, then the
    exception line(s) (a SyntaxError's own 'File "submission.py", line N' included)."""
    if not isinstance(report, dict):
        return ""
    exc = _printable(str(report.get("exception") or ""))
    own = _own_frames(report.get("frames"), report.get("dropped"))
    lines = (["Traceback (most recent call last):", *own] if own else []) + ([exc] if exc else [])
    return "\n".join(lines)


def output_tail(stderr: bytes) -> tuple[str, bool]:
    """The last TAIL_LINES lines (at most TAIL_BYTES) of the student's prints; True if cut."""
    text = stderr.decode("utf-8", errors="replace")
    cut = False
    if len(text) > TAIL_BYTES:
        text, cut = text[-TAIL_BYTES:], True
    lines = text.rstrip("\n").splitlines()
    if len(lines) > TAIL_LINES:
        lines, cut = lines[-TAIL_LINES:], True
    return _printable("\n".join(lines), TAIL_BYTES), cut


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _how(how: str) -> str:
    """The relay's `exit=N` / `signal=N` / `rejected=WHY` in words."""
    what, _, value = how.partition("=")
    if what == "exit":
        return f"your code ended the Python process (exit code {value})"
    if what == "signal" and value.isdigit():
        return f"your code's process was ended by {_signal_name(int(value))}"
    return {
        "nonce": "your code wrote to the grader's result channel: a reply that was not for the "
                 "case being run",
        "size": "your code wrote an oversized reply to the grader's result channel",
        "kind": "your code wrote a malformed reply to the grader's result channel",
        "frame": "the process ended in the middle of a reply",
        "closed": "your code closed the grader's result channel",
    }.get(value, f"the run failed ({how})")


def _got(record: Record) -> dict[str, Any]:
    """What checks.py gets for one case: {"output": ...} or {"error": "..."}."""
    if record.kind == "output":
        # Range and shape limits every exercise shares (graders/outputs.py): what fails them
        # is the student's wrong output, reported as that case's failure.
        try:
            got: dict[str, Any] = {"output": outputs.parse_output(record.payload)}
        except outputs.Malformed as exc:
            return {"error": f"your output for this case {exc}"}
        if record.field.startswith("cpu="):
            # A timed case: the CPU seconds the relay measured (outside the student's reach).
            got["cpu_s"] = float(record.field[len("cpu="):])
        return got
    if record.kind == "error":
        report = _json_payload(record.payload)
        if not isinstance(report, dict) or not isinstance(report.get("error"), str):
            return {"error": "the error report for this case is malformed"}
        error = _printable(report["error"])
        own = _own_frames(report.get("frames"), report.get("dropped"))
        # Ends with a newline so whatever a check appends starts on a line of its own.
        return {"error": "\n".join([error, *own]) + "\n" if own else error}
    return {"error": f"{_how(record.field)} during this case; the cases after it ran in a "
                     "fresh process"}


@dataclass
class Stopped:
    """A run that did not get through the cases, in the worker's terms."""

    verdict: str  # TLE | MLE | OLE | RE
    phase: str  # import | case
    done: int  # cases with a record
    reason: str  # the relay's reason (time, cpu, prints, results, memory, import, exit=N, ...)
    report: Any = None  # the child's exception report, if any
    restarted_after: int | None = None  # the case that already failed once
    cut_short: str = ""  # the relay itself was stopped: how


def _stopped(report: RelayReport, result: Any) -> Stopped | None:
    """None when every case has a record; else why and where the run stopped."""
    failed = next((r.index for r in report.cases if r.kind == "failed"), None)
    if report.end is None:
        # The relay never wrote its end record: the sandbox stopped it at a limit, or something
        # inside killed or stopped it. Either way nothing of this run counts.
        verdict = result.verdict if result.verdict in ("TLE", "MLE", "OLE") else "RE"
        how = ""
        if verdict == "RE":
            how = (f"was ended by {_signal_name(result.signal)}" if result.signal is not None
                   else f"exited with code {result.exit_code}")
        return Stopped(verdict, "case" if report.ready else "import", len(report.cases),
                       "sandbox", restarted_after=failed, cut_short=how)
    verdict, phase, _, reason = (report.end.field.split(":", 3) + ["", "", "", ""])[:4]
    if verdict == "ok":
        return None
    stop = Stopped(verdict if verdict in LIMIT_CHECKS else "RE", phase, report.end.index, reason,
                   _json_payload(report.end.payload) if report.end.payload else None,
                   restarted_after=failed)
    if stop.reason == "import" and isinstance(stop.report, dict) \
            and str(stop.report.get("exception", "")).startswith("MemoryError"):
        stop.verdict = "MLE"
    if stop.reason == f"signal={int(signal.SIGKILL)}" and result.oom_killed:
        stop.verdict = "MLE"  # the cgroup's OOM killer picked the child, not the whole sandbox
    return stop


_WHY = {
    "TLE": "All cases share this limit. Look for a loop that never ends, or work that grows "
           "faster than it should.",
    "MLE": "Keep only the data you still need.",
    "OLE": "Your code printed more than that (stdout and stderr together). Remove debug "
           "prints, or print less per case.",
}


def _stop_message(stop: Stopped, part: PartSpec, cases: list[dict[str, Any]],
                  checks: ModuleType, stderr: bytes) -> tuple[str, str]:
    """(feedback, check message): the limit with its value, the case, the student's traceback
    and the tail of what the student printed."""
    head = {
        "TLE": f"Time limit ({format_seconds(part.time_limit_s)}) exceeded",
        "MLE": f"Memory limit ({format_bytes(part.memory_mb * MiB)}) exceeded",
        "OLE": f"Output cut at {format_bytes(part.output_limit_kb * KiB)}",
    }.get(stop.verdict, "Runtime error")
    total = len(cases)
    case = cases[stop.done] if stop.phase == "case" and stop.done < total else None
    if stop.phase == "import" and stop.done == 0:
        where = "while loading submission.py, before any case ran"
    elif stop.phase == "import":
        where = f"while loading submission.py again, after {stop.done} of {total} cases"
    elif case is not None:
        finished = (f"{stop.done} of {total} cases had finished" if stop.done
                    else "no case had finished")
        where = f"during case {case['id']} ({finished})"
    else:
        where = f"after all {total} cases had finished"
    first = f"{head} {where}."
    lines = [first]
    if stop.cut_short:
        lines.append(f"The grading process in the sandbox {stop.cut_short} before it had "
                     "reported every case, so nothing of this run counts. This happens when "
                     "code signals, stops or kills processes other than its own.")
    elif stop.verdict == "OLE" and stop.reason == "results":
        lines.append("The values your code returned are too large to send back.")
    elif stop.verdict in _WHY:
        lines.append(_WHY[stop.verdict])
    elif stop.reason not in ("import", "sandbox"):
        how = _how(stop.reason)
        lines.append(how[0].upper() + how[1:] + ".")
    if stop.verdict == "RE" and stop.restarted_after is not None \
            and stop.restarted_after < total:
        earlier = cases[stop.restarted_after]["id"]
        lines.append(f"It had already failed once, during case {earlier}, and was restarted; a "
                     "second failure ends the run.")
    if case is not None:
        lines.append(f"The case: {_describe_case(checks, case)}")
    message = "\n".join(lines)
    trace = student_traceback(stop.report)
    if trace:
        message += "\n\n" + trace
    tail, cut = output_tail(stderr)
    if tail:
        label = f"last {TAIL_LINES} lines" if cut else "all of it"
        message += f"\n\nYour output before it stopped ({label}):\n{tail}"
    return first, message


# -- the run ------------------------------------------------------------------------------------

def sandbox_spec(part: PartSpec, source: bytes, driver_source: bytes,
                 cases: list[dict[str, Any]], key: bytes) -> Any:
    """The one sandbox run: relay.py as the entry point, what it needs beside it, nothing else
    (checks.py, reference.py and mutants stay here). Limits are the part's, from exercise.toml;
    the sandbox's own wall clock and output cap are backstops above the relay's."""
    import runners
    from runners import runtime_python
    from runners.cpuclock import WALL_FACTOR
    from runners.spec import SandboxSpec

    here = Path(runners.__file__).resolve().parent
    output_limit = part.output_limit_kb * KiB
    # key, time limit, print limit, max reply, results budget, restarts, the cases the relay
    # times (relay.main reads these)
    timed = ",".join(str(i) for i, c in enumerate(cases) if c.get("timed")) or "-"
    config = f"{key.hex()} {part.time_limit_s!r} {output_limit} {MAX_REPLY_BYTES} " \
             f"{RESULTS_BUDGET_BYTES} {RESTARTS} {timed}\n"
    # One input per line; json.dumps never writes a raw newline. The ids stay here: records
    # come back by index.
    stdin = config + "".join(json.dumps(c["input"]) + "\n" for c in cases)
    return SandboxSpec(
        # -S: the relay needs the standard library only, and starts faster without site.
        argv=[runtime_python(), "-I", "-B", "-S", "relay.py"],
        files={"relay.py": (here / "relay.py").read_bytes(),
               "cpuclock.py": (here / "cpuclock.py").read_bytes(),
               "case_loop.py": (here / "case_loop.py").read_bytes(),
               "driver.py": driver_source, STUDENT_FILE: source,
               **{f"{name}.py": shared_module_path(name).read_bytes()
                  for name in part.sandbox_modules}},
        stdin=stdin.encode("utf-8"),
        wall_timeout_s=WALL_FACTOR * (part.time_limit_s + BACKSTOP_GRACE_S),
        # Each process's RLIMIT_CPU backstops the relay's budget (the same CPU seconds for the
        # whole tree), so the relay's own "time" is what normally ends a slow run.
        cpu_time_s=part.time_limit_s + BACKSTOP_GRACE_S,
        memory_bytes=part.memory_mb * MiB,
        output_limit_bytes=output_limit + RESULTS_BUDGET_BYTES + CHANNEL_SLACK_BYTES,
    )


def _sandbox_extra(result: Any) -> dict[str, Any]:
    return {"verdict": result.verdict, "wall_s": round(result.wall_s, 3),
            "cpu_s": round(result.cpu_s, 3), "backend": result.backend,
            "memory_isolation": result.memory_isolation}


def grade(part: PartSpec, answer_text: str, ctx: GradeContext) -> GradeResult:
    """Run the submission on the cases in the sandbox and score it with the exercise's checks."""
    if part.language != "python":
        raise InvalidAnswer(f"this grader runs Python, not {part.language}")
    source = _source_bytes(answer_text)
    # Imported here so loading graders (e.g. for inline number parts) never needs the sandbox.
    from runners import get_backend
    from runners.base import MachineBusy

    code_dir = Path(ctx.exercise_path) / "code"
    reference = ctx.reference if isinstance(ctx.reference, str) and ctx.reference.endswith(".py") \
        else "code/reference.py"
    cases, expected = _cases_and_expected(code_dir, reference, ctx.params, ctx.seed, ctx.mode,
                                          part.sandbox_modules)
    checks = load_module(code_dir / "checks.py")
    driver = (code_dir / "driver.py").read_bytes()
    for _ in range(BUSY_RETRIES + 1):
        key = secrets.token_bytes(16)  # per run: a seal from another run is worth nothing
        spec = sandbox_spec(part, source, driver, cases, key)
        result = get_backend().run(spec)  # SandboxUnavailable propagates: never unsandboxed
        report = read_relay(result.stdout, key)
        if not (report.end is not None and report.end.field.startswith("TLE:")
                and report.end.field.endswith(":busy")):
            break
    else:
        raise MachineBusy("the machine was too busy to run the cases in their time limit "
                          f"({BUSY_RETRIES + 1} tries); the attempt is not counted")
    extra: dict[str, Any] = {
        "sandbox": _sandbox_extra(result), "cases": len(cases), "mode": ctx.mode,
        "relay": {"records": len(report.cases), "finished": report.end is not None,
                  "ignored_lines": report.ignored_lines}}

    if report.end is not None and report.end.field.startswith("internal:"):
        raise RuntimeError("the sandbox relay failed: "
                           + report.end.payload.decode("utf-8", "replace"))
    if report.end is None and not report.ready and result.exit_code == RELAY_SETUP_FAILED:
        # The relay's own set-up failed (prctl, config): a sandbox problem, not the student's.
        raise RuntimeError(f"the sandbox relay could not start: {result.stderr[-500:]!r}")
    if [r.index for r in report.cases] != list(range(len(report.cases))) \
            or len(report.cases) > len(cases):
        raise RuntimeError("the sandbox relay reported cases out of order")
    stop = _stopped(report, result)
    if stop is None and len(report.cases) != len(cases):
        raise RuntimeError("the sandbox relay ended without a record for every case")

    if stop is not None:
        feedback, message = _stop_message(stop, part, cases, checks, result.stderr)
        extra["relay"]["stop"] = {"verdict": stop.verdict, "phase": stop.phase,
                                  "done": stop.done, "reason": stop.reason}
        details: dict[str, Any] = {"verdict": stop.verdict, "cases_done": stop.done}
        if stop.phase == "case" and stop.done < len(cases):
            details["case"] = cases[stop.done]["id"]
        check = Check(LIMIT_CHECKS[stop.verdict], False, message, details=details)
        return GradeResult(score=0.0, verdict="incorrect", feedback=feedback, checks=(check,),
                           extra=extra)

    got = [_got(r) for r in report.cases]
    expected = retimed(code_dir, reference, cases, got, expected)
    results, refused = outputs.run_checks(checks.check, cases, got, expected, ctx.params)
    if refused:  # the checks raised on these; an operator should make them robust
        extra["refused_outputs"] = refused[:20]
    if not results:
        raise ValueError(f"{code_dir}/checks.py returned no checks")
    if ctx.mode != "run" and not all(c.passed for c in results):
        # A hidden case every submission gets is never shown with its expected output.
        results = fixed_cases.retell(checks.check, cases, got, expected, ctx.params, results,
                                     fixed_cases.fixed_inputs(checks, ctx.params))
    weights = [c.weight if part.weight_checks else 1.0 for c in results]
    total = sum(weights)
    score = sum(w for c, w in zip(results, weights, strict=True) if c.passed) / total
    score = round(score, 6)
    passed = sum(1 for c in results if c.passed)
    where = "the public examples" if ctx.mode == "run" else f"{len(cases)} cases"
    if passed == len(results):
        feedback = f"All {len(results)} checks passed on {where}."
        grade_verdict = "correct"
        score = 1.0
    else:
        first = next(c for c in results if not c.passed)
        feedback = (f"{passed} of {len(results)} checks passed on {where}; first failure: "
                    f"{first.name}: {first.message}")
        grade_verdict = "partial" if score > 0 else "incorrect"
    return GradeResult(score=score, verdict=grade_verdict, feedback=feedback,
                       checks=tuple(results), extra=extra)
