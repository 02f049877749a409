"""Grades a `code` part: the student's Python runs in the sandbox, the checks run here.

The exercise's `code/` folder supplies three trusted modules: `checks.py` (the cases and the
checks), `driver.py` (plays a case against a module) and `reference.py`. The reference's outputs
are computed in this process with the same driver, so hidden expectations never enter the sandbox;
the student's file runs once, in the sandbox, as `submission.py`, with every case on stdin.

`checks.check(cases, got, expected, params)` receives, per case, `{"output": ...}` (what
`driver.run_case` returned) or `{"error": "..."}` (the driver could not produce an output: an
exception outside the student's methods, an oversized output, or no line for the case at all).

If no sandbox is available `SandboxUnavailable` propagates: the pipeline marks the submission
`error`. Student code is never run in this process.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from types import ModuleType
from typing import Any

from exercises.spec import PartSpec
from graders.base import Check, GradeContext, GradeResult, InvalidAnswer

MAX_SOURCE_BYTES = 100_000
STDERR_TAIL_LINES = 20
# stdout and stderr together; the driver's own output is a few hundred kB at most, the rest is
# room for a student's debug prints.
OUTPUT_LIMIT_BYTES = 4 << 20
EXPECTED_CACHE_SIZE = 32

LIMIT_CHECKS = {
    "TLE": "time limit",
    "MLE": "memory limit",
    "OLE": "output limit",
    "RE": "runs without crashing",
}

_lock = threading.Lock()
_modules: dict[tuple[str, int, int], ModuleType] = {}
_expected: OrderedDict[tuple[Any, ...], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = (
    OrderedDict())


def load_module(path: Path) -> ModuleType:
    """Import one trusted exercise file under a name of its own (reloaded when the file changes).

    The module is registered in sys.modules because dataclasses and pickling look it up there.
    """
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    with _lock:
        cached = _modules.get(key)
        if cached is not None:
            return cached
        digest = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        name = f"roofline_exercise_code_{digest}_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        _modules[key] = module
        return module


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
                        mode: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The cases for this mode and the reference's results on them (cached per variant/seed)."""
    checks = load_module(code_dir / "checks.py")
    driver = load_module(code_dir / "driver.py")
    ref = load_module(code_dir.parent / reference)
    key = (id(checks), id(driver), id(ref), json.dumps(params, sort_keys=True, default=str),
           int(seed), mode)
    with _lock:
        hit = _expected.get(key)
        if hit is not None:
            _expected.move_to_end(key)
            return hit
    cases = list(checks.public_cases(params))
    if mode != "run":
        cases += list(checks.hidden_cases(params, seed))
    ids = [c["id"] for c in cases]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{code_dir}/checks.py: case ids are not unique")
    expected = [{"output": driver.run_case(ref, c["input"])} for c in cases]
    with _lock:
        _expected[key] = (cases, expected)
        while len(_expected) > EXPECTED_CACHE_SIZE:
            _expected.popitem(last=False)
    return cases, expected


def _parse_lines(stdout: bytes, ids: set[str]) -> dict[str, dict[str, Any]]:
    """Case id -> {"output": ...} or {"error": ...}; other lines (a student's prints) are skipped."""
    found: dict[str, dict[str, Any]] = {}
    for raw in stdout.decode("utf-8", errors="replace").splitlines():
        raw = raw.strip()
        if not raw.startswith("{"):
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        cid = obj.get("id")
        if not isinstance(cid, str) or cid not in ids or cid in found:
            continue
        if isinstance(obj.get("output"), dict):
            found[cid] = {"output": obj["output"]}
        elif isinstance(obj.get("error"), str):
            found[cid] = {"error": obj["error"]}
    return found


def _stderr_tail(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", errors="replace").rstrip().splitlines()
    return "\n".join(lines[-STDERR_TAIL_LINES:])


def _describe_case(checks: ModuleType, case: dict[str, Any]) -> str:
    describe = getattr(checks, "describe", None)
    if callable(describe):
        return str(describe(case))
    return json.dumps(case["input"])[:400]


def _limit_message(verdict: str, result: Any, spec: Any, stuck: dict[str, Any] | None,
                   done: int, checks: ModuleType) -> str:
    if verdict == "TLE":
        head = (f"Time limit exceeded: the run was stopped after {spec.wall_timeout_s:g} s "
                f"(wall or CPU time) for all cases together. Look for a loop that never ends.")
    elif verdict == "MLE":
        head = (f"Memory limit exceeded ({spec.memory_bytes / 2**20:.0f} MiB). Keep only the text "
                "you still need.")
    elif verdict == "OLE":
        head = (f"Output limit exceeded: more than {spec.output_limit_bytes / 2**20:.0f} MiB of "
                "printed output. Remove debug prints.")
    else:
        exit_info = (f"signal {result.signal}" if result.signal is not None
                     else f"exit code {result.exit_code}")
        head = f"Your code crashed before every case had run ({exit_info})."
    if stuck is not None and done == 0:
        head += f" No case finished; the first was {stuck['id']}: {_describe_case(checks, stuck)}."
    elif stuck is not None:
        head += (f" {done} cases finished; it stopped during case {stuck['id']}: "
                 f"{_describe_case(checks, stuck)}.")
    tail = _stderr_tail(result.stderr)
    if tail:
        head += f"\n\nLast lines of stderr:\n{tail}"
    return head


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
    from runners import get_backend, runtime_python
    from runners.spec import SandboxSpec

    code_dir = Path(ctx.exercise_path) / "code"
    reference = ctx.reference if isinstance(ctx.reference, str) and ctx.reference.endswith(".py") \
        else "code/reference.py"
    cases, expected = _cases_and_expected(code_dir, reference, ctx.params, ctx.seed, ctx.mode)
    checks = load_module(code_dir / "checks.py")
    driver_source = (code_dir / "driver.py").read_bytes()

    stdin = "".join(json.dumps({"id": c["id"], "input": c["input"]}) + "\n" for c in cases)
    spec = SandboxSpec(
        # -I: no user site, no PYTHON* variables; the driver puts its own folder on sys.path.
        argv=[runtime_python(), "-I", "-B", "driver.py"],
        files={"driver.py": driver_source, "submission.py": source},
        stdin=stdin.encode("utf-8"),
        wall_timeout_s=part.time_limit_s,
        cpu_time_s=part.time_limit_s,
        output_limit_bytes=OUTPUT_LIMIT_BYTES,
    )
    result = get_backend().run(spec)  # SandboxUnavailable propagates: never run unsandboxed
    verdict = result.verdict
    ids = [c["id"] for c in cases]
    found = _parse_lines(result.stdout, set(ids))
    extra = {"sandbox": _sandbox_extra(result), "cases": len(cases), "mode": ctx.mode}

    if verdict != "OK" and len(found) < len(ids):
        # The run did not get through the cases: name the limit and where it stopped.
        stuck = next((c for c in cases if c["id"] not in found), None)
        message = _limit_message(verdict, result, spec, stuck, len(found), checks)
        check = Check(LIMIT_CHECKS.get(verdict, verdict), False, message,
                      details={"verdict": verdict, "cases_done": len(found)})
        return GradeResult(score=0.0, verdict="incorrect", feedback=message.split("\n\n")[0],
                           checks=(check,), extra=extra)

    got = [found.get(cid, {"error": f"no output for case {cid} (did your code read stdin or "
                                    "close stdout?)"}) for cid in ids]
    results = list(checks.check(cases, got, expected, ctx.params))
    if not results:
        raise ValueError(f"{code_dir}/checks.py returned no checks")
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
    if verdict != "OK":
        # Every case finished but the process then failed (e.g. an exit hook): worth knowing.
        feedback += f" (The run ended with {verdict} after all cases had finished.)"
    return GradeResult(score=score, verdict=grade_verdict, feedback=feedback,
                       checks=tuple(results), extra=extra)
