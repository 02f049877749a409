"""The code grader through the real sandbox, on Q41's streamer: scores, and the plain verdicts.

Student code only ever runs in the sandbox here. Without a sandbox the tests skip with the reason
on a developer machine and fail on CI (CI=true), where the sandbox is part of what is proven.
The result channel's defences (forged results, /proc, killing the relay) are in
test_result_channel.py.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from exercises import mutants
from exercises.spec import PartSpec
from exercises.stop_strings_stream import exercise as ex
from graders import code as code_grader
from graders.base import GradeContext, GradeResult, InvalidAnswer
from runners.cpuclock import WALL_FACTOR

FOLDER = Path(ex.__file__).resolve().parent
CODE = FOLDER / "code"
REFERENCE = (CODE / "reference.py").read_text(encoding="utf-8")
PART = PartSpec(id="streamer", type="code", prompt="", time_limit_s=10,
                sandbox_modules=("driver_errors",))
PUSH = "    def push(self, token_bytes: bytes) -> str:\n"
# Frames of our own files must never reach a student.
INTERNALS = ("relay.py", "case_loop.py", "driver.py", "/sandbox/", "importlib")


def _on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="module", autouse=True)
def sandbox() -> None:
    try:
        from runners import SandboxUnavailable, get_backend
    except ImportError as exc:
        if _on_ci():
            pytest.fail(f"runners cannot be imported on CI: {exc}")
        pytest.skip(f"runners is missing: {exc}")
    try:
        get_backend()
    except SandboxUnavailable as exc:
        if _on_ci():
            pytest.fail(f"sandbox unavailable on CI: {exc}")
        pytest.skip(f"sandbox unavailable: {exc}")


def _ctx(mode: str = "submit", params: dict | None = None) -> GradeContext:
    return GradeContext(reference="code/reference.py", params=params or dict(ex.CANONICAL),
                        exercise_path=str(FOLDER), mode=mode, seed=12345)  # type: ignore[arg-type]


def _in_push(code: str, imports: str = "") -> str:
    """The reference with `code` at the top of push() (and `imports` after the __future__ line)."""
    body = "".join(f"        {line}\n" for line in code.splitlines())
    source = REFERENCE.replace(PUSH, PUSH + body)
    assert source != REFERENCE
    if imports:
        source = source.replace("from __future__ import annotations\n",
                                f"from __future__ import annotations\n{imports}\n", 1)
    return source


def _stopped(r: GradeResult, check_name: str) -> str:
    """The one failing check of a run that stopped; returns its message."""
    assert (r.score, r.verdict) == (0.0, "incorrect"), r.feedback
    (check,) = r.checks
    assert check.name == check_name and not check.passed, check
    assert check.message.startswith(r.feedback)
    assert not any(name in check.message for name in INTERNALS), check.message
    return check.message


# -- scores --------------------------------------------------------------------------------------

def test_reference_scores_one() -> None:
    start = time.monotonic()
    r = code_grader.grade(PART, REFERENCE, _ctx())
    elapsed = time.monotonic() - start
    assert (r.score, r.verdict) == (1.0, "correct"), r.feedback
    assert all(c.passed for c in r.checks)
    assert r.extra["cases"] > 250
    assert r.extra["relay"] == {"records": r.extra["cases"], "finished": True,
                                "ignored_lines": 0}
    assert r.extra["sandbox"]["verdict"] == "OK"
    assert r.extra["sandbox"]["backend"]
    assert elapsed < 30


def test_reference_scores_one_on_a_variant() -> None:
    import random

    params = ex.generate(random.Random(5))
    r = code_grader.grade(PART, REFERENCE, _ctx(params=params))
    assert r.score == 1.0, r.feedback


def test_a_mutant_scores_below_one_and_names_the_smallest_case() -> None:
    source = mutants.source(CODE, "no_holdback")
    r = code_grader.grade(PART, source, _ctx())
    assert 0 < r.score < 1 and r.verdict == "partial"
    failed = [c for c in r.checks if not c.passed]
    names = {c.name for c in failed}
    assert "never sends text a stop later removes" in names
    for c in failed:
        assert "Smallest:" in c.message and "on tokens [" in c.message and "stops [" in c.message
    assert r.feedback.startswith(f"{len(r.checks) - len(failed)} of {len(r.checks)} checks")


def test_fixed_buffer_fails_only_the_hold_back_check() -> None:
    source = mutants.source(CODE, "fixed_buffer")
    r = code_grader.grade(PART, source, _ctx())
    assert [c.name for c in r.checks if not c.passed] == ["minimal hold-back after every push"]
    assert r.score == pytest.approx(0.9)


def test_starter_scores_zero() -> None:
    r = code_grader.grade(PART, (CODE / "starter.py").read_text(encoding="utf-8"), _ctx())
    assert (r.score, r.verdict) == (0.0, "incorrect")
    assert "NotImplementedError" in r.feedback


def test_run_mode_uses_only_public_cases() -> None:
    r = code_grader.grade(PART, REFERENCE, _ctx(mode="run"))
    assert r.score == 1.0
    assert r.extra["cases"] == 3 and r.extra["mode"] == "run"
    assert "public examples" in r.feedback
    # No public example has an empty stop, so that check is not reported on Run.
    assert "rejects empty stop strings" not in {c.name for c in r.checks}


def test_printing_to_stdout_does_not_break_grading() -> None:
    noisy = _in_push("print('{\"id\": \"example-1\", \"output\": {}}', token_bytes)\n"
                     "sys.__stdout__.write('raw garbage\\n')\n"
                     "os.write(1, b'{not json\\n')\n"
                     "os.write(2, b'to stderr\\n')",
                     "import os\nimport sys")
    noisy += "\nprint('hello from import')\n"
    r = code_grader.grade(PART, noisy, _ctx())
    # Everything the student prints goes to the relay, which counts it and passes it on as
    # output; none of it is read as a result.
    assert r.score == 1.0, r.feedback
    assert r.extra["relay"]["ignored_lines"] == 0


# -- per-case errors carry the student's own traceback -------------------------------------------

def test_exception_in_some_cases_is_a_named_failure() -> None:
    source = REFERENCE.replace(
        "        return self._advance(self._decoder.decode(token_bytes, final=False), final=False)",
        "        if token_bytes == b'':\n"
        "            raise KeyError('empty token')\n"
        "        return self._advance(self._decoder.decode(token_bytes, final=False), final=False)")
    assert source != REFERENCE
    r = code_grader.grade(PART, source, _ctx())
    checks = {c.name: c for c in r.checks}
    message = checks["no crash"].message
    assert not checks["no crash"].passed
    assert "KeyError: 'empty token'" in message
    line = source.splitlines().index("            raise KeyError('empty token')") + 1
    assert f'File "submission.py", line {line}, in push' in message
    assert "raise KeyError('empty token')" in message
    assert not any(name in message for name in INTERNALS), message
    assert checks["reference_output function"].passed
    assert 0 < r.score < 1


def test_zero_division_in_push_shows_the_students_line_only() -> None:
    source = _in_push("if len(token_bytes) > 3:\n    1/0")
    r = code_grader.grade(PART, source, _ctx())
    message = {c.name: c for c in r.checks}["no crash"].message
    line = source.splitlines().index("            1/0") + 1
    assert "ZeroDivisionError: division by zero" in message
    assert f'File "submission.py", line {line}, in push\n    1/0\n' in message
    assert not any(name in message for name in INTERNALS), message


# -- runs that stop: plain verdicts ----------------------------------------------------------------

def test_syntax_error_is_a_runtime_error_with_the_traceback() -> None:
    r = code_grader.grade(PART, "class StopStreamer:\n    def push(self:\n        pass\n", _ctx())
    message = _stopped(r, "runs without crashing")
    assert r.feedback == "Runtime error while loading submission.py, before any case ran."
    assert 'File "submission.py", line 2' in message and "SyntaxError" in message
    assert r.extra["relay"]["stop"]["verdict"] == "RE"


def test_exception_at_import_is_a_runtime_error_with_the_students_frames() -> None:
    source = "import sys\n\ndef helper():\n    return 1/0\n\nprint('loading')\nhelper()\n"
    message = _stopped(code_grader.grade(PART, source, _ctx()), "runs without crashing")
    assert ('Traceback (most recent call last):\n'
            '  File "submission.py", line 7, in <module>\n    helper()\n'
            '  File "submission.py", line 4, in helper\n    return 1/0\n'
            'ZeroDivisionError: division by zero') in message
    assert message.endswith("Your output before it stopped (all of it):\nloading")


def test_exit_at_import_is_a_runtime_error() -> None:
    message = _stopped(code_grader.grade(PART, "import sys\nsys.exit(3)\n", _ctx()),
                       "runs without crashing")
    assert 'File "submission.py", line 2, in <module>' in message and "SystemExit: 3" in message


def test_infinite_loop_at_import_is_a_time_limit() -> None:
    part = replace(PART, time_limit_s=2)
    start = time.monotonic()
    r = code_grader.grade(part, "while True:\n    pass\n", _ctx())
    assert time.monotonic() - start < 15
    _stopped(r, "time limit")
    assert r.feedback == ("Time limit (2 s) exceeded while loading submission.py, before any "
                          "case ran.")


def test_infinite_loop_in_one_case_names_that_case() -> None:
    source = REFERENCE.replace(
        "    def finish(self) -> str:\n",
        "    def finish(self) -> str:\n"
        "        while not self.stopped and self._text.endswith('##'):\n"
        "            pass\n")
    assert source != REFERENCE
    r = code_grader.grade(replace(PART, time_limit_s=3), source, _ctx())
    message = _stopped(r, "time limit")
    case = r.checks[0].details["case"]
    assert re.fullmatch(rf"Time limit \(3 s\) exceeded during case {re.escape(case)} "
                        r"\(\d+ of \d+ cases had finished\)\.", r.feedback), r.feedback
    assert "The case: tokens [" in message


def test_memory_hog_is_the_memory_limit() -> None:
    # A 2 GiB bytearray, touched page by page. Which mechanism stops it depends on the host (an
    # address-space rlimit raises MemoryError, a cgroup's OOM killer kills the process); the
    # student reads the same plain verdict either way.
    source = _in_push("x = bytearray(2 << 30)\nx[::4096] = b'1' * len(x[::4096])")
    r = code_grader.grade(PART, source, _ctx())
    message = _stopped(r, "memory limit")
    assert r.feedback == ("Memory limit (512 MiB) exceeded during case example-1 (no case had "
                          "finished).")
    if "MemoryError" in message:
        assert 'File "submission.py", line' in message and "bytearray(2 << 30)" in message


def test_print_flood_is_output_cut() -> None:
    r = code_grader.grade(PART, _in_push("while True:\n    print('x' * 99)"), _ctx())
    message = _stopped(r, "output limit")
    assert r.feedback == "Output cut at 1 MiB during case example-1 (no case had finished)."
    tail = message.split("Your output before it stopped (last 40 lines):\n", 1)[1].splitlines()
    # The cut falls where the limit does, mid-line here.
    assert len(tail) == 40 and tail[:-1] == ["x" * 99] * 39 and set(tail[-1]) == {"x"}


def test_crash_in_one_case_costs_that_case_only() -> None:
    # The first crash is survived: that case fails, a fresh process runs the rest.
    source = _in_push("if token_bytes == b'\\xac' and not os.path.exists('/tmp/crashed'):\n"
                      "    open('/tmp/crashed', 'w').close()\n"
                      "    os._exit(7)", "import os")
    r = code_grader.grade(PART, source, _ctx())
    assert 0 < r.score < 1, r.feedback
    failed = [c for c in r.checks if not c.passed]
    assert failed and all("your code ended the Python process (exit code 7) during this case"
                          in c.message for c in failed)


def test_second_crash_ends_the_run() -> None:
    r = code_grader.grade(PART, _in_push("if token_bytes == b'#':\n    os._exit(7)", "import os"),
                          _ctx())
    message = _stopped(r, "runs without crashing")
    assert re.fullmatch(r"Runtime error during case \S+ \(\d+ of \d+ cases had finished\)\.",
                        r.feedback), r.feedback
    assert "Your code ended the Python process (exit code 7)." in message
    assert "It had already failed once, during case" in message


# -- limits come from the part (exercise.toml) ---------------------------------------------------

SMALL = replace(PART, time_limit_s=1, memory_mb=128, output_limit_kb=64)


def test_small_limits_reach_the_sandbox_spec() -> None:
    spec = code_grader.sandbox_spec(SMALL, b"pass\n", b"", [], b"k" * 16)
    assert spec.memory_bytes == 128 << 20
    assert spec.cpu_time_s == 1 + code_grader.BACKSTOP_GRACE_S
    # The relay counts CPU time; the wall clock only backstops it, WALL_FACTOR times longer.
    assert spec.wall_timeout_s == WALL_FACTOR * (1 + code_grader.BACKSTOP_GRACE_S)
    assert spec.output_limit_bytes == (64 << 10) + code_grader.RESULTS_BUDGET_BYTES \
        + code_grader.CHANNEL_SLACK_BYTES
    assert sorted(spec.files) == ["case_loop.py", "cpuclock.py", "driver.py", "driver_errors.py",
                                  "relay.py", "submission.py"]
    assert spec.stdin.split(b"\n", 1)[0].split()[1:4] == [b"1", b"65536", b"262144"]


def test_small_limits_still_pass_the_reference() -> None:
    # The results travel apart from the prints, so a 64 KiB print limit does not cut them.
    r = code_grader.grade(SMALL, REFERENCE, _ctx())
    assert r.score == 1.0, r.feedback


def test_small_limits_are_what_the_student_reads() -> None:
    flood = code_grader.grade(SMALL, _in_push("while True:\n    print('x' * 99)"), _ctx())
    _stopped(flood, "output limit")
    assert flood.feedback.startswith("Output cut at 64 KiB during case example-1")

    start = time.monotonic()
    loop = code_grader.grade(SMALL, "while True:\n    pass\n", _ctx())
    assert time.monotonic() - start < 1 + code_grader.BACKSTOP_GRACE_S + 5
    _stopped(loop, "time limit")
    assert loop.feedback.startswith("Time limit (1 s) exceeded")

    hog = code_grader.grade(SMALL, _in_push("x = b'1' * (200 << 20)"), _ctx())
    _stopped(hog, "memory limit")
    assert hog.feedback.startswith("Memory limit (128 MiB) exceeded during case example-1")


@pytest.mark.parametrize(("n", "text"), [
    (1 << 20, "1 MiB"), (512 << 20, "512 MiB"), (64 << 10, "64 KiB"), (1536 << 10, "1.5 MiB"),
    (1000 << 10, "1000 KiB"), (2 << 30, "2 GiB"), (3000 << 20, "3000 MiB"), (100, "100 bytes"),
])
def test_limits_in_words(n: int, text: str) -> None:
    assert code_grader.format_bytes(n) == text


def test_seconds_in_words() -> None:
    assert [code_grader.format_seconds(s) for s in (2, 10.0, 0.5, 1.25)] == \
        ["2 s", "10 s", "0.5 s", "1.25 s"]


# -- what never runs -----------------------------------------------------------------------------

@pytest.mark.parametrize("source", ["", "   \n", "x" * 100_001, "print('\ud800')"])
def test_unreadable_submissions_are_invalid(source: str) -> None:
    with pytest.raises(InvalidAnswer):
        code_grader.grade(PART, source, _ctx())


def test_no_sandbox_means_no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import runners
    from runners import SandboxUnavailable

    def unavailable(name: str | None = None) -> None:
        raise SandboxUnavailable("test: no sandbox here")

    monkeypatch.setattr(runners, "get_backend", unavailable)
    with pytest.raises(SandboxUnavailable):
        code_grader.grade(PART, REFERENCE, _ctx())


def test_what_escapes_run_case_is_an_error_for_that_case_only() -> None:
    # The generic loop (runners/case_loop.py) with a driver of its own: an exception out of
    # run_case, an output that is not JSON, and one over the driver's MAX_OUTPUT_BYTES.
    from runners import get_backend

    driver = b"MAX_OUTPUT_BYTES = 1000\n\ndef run_case(module, case_input):\n" \
             b"    return module.f(case_input)\n"
    source = ("def f(x):\n    if x == 2:\n        raise ValueError('two')\n"
              "    if x == 3:\n        return b'bytes'\n    return 'y' * 2000 if x == 4 else x\n")
    cases = [{"id": str(i), "input": i} for i in (1, 2, 3, 4, 5)]
    key = b"k" * 16
    spec = code_grader.sandbox_spec(PART, source.encode(), driver, cases, key)
    report = code_grader.read_relay(get_backend().run(spec).stdout, key)
    assert report.end is not None and report.end.field == "ok:case:0:-"
    got = [code_grader._got(r) for r in report.cases]
    assert got[0] == {"output": 1} and got[4] == {"output": 5}
    assert got[1] == {"error": "ValueError: two\n  File \"submission.py\", line 3, in f\n"
                               "    raise ValueError('two')\n"}
    assert got[2]["error"].startswith("TypeError: Object of type bytes is not JSON serializable")
    assert not any(name in got[2]["error"] for name in INTERNALS)
    assert got[3]["error"].startswith("the output for this case is too large")


# -- shared modules beside the driver ------------------------------------------------------------

SIM_DRIVER = '''
import engine_sim


def run_case(module, case):
    reqs = [engine_sim.Request(r, 0.0, p, 1) for r, p in case["prompts"]]
    res = engine_sim.simulate(reqs, engine_sim.EngineConfig(token_budget=case["budget"],
                                                            chunked_prefill=False),
                              engine_sim.StepCost(1e12, 1e9), module.order)
    return {r: round(t.ttft, 9) for r, t in res.requests.items()}
'''
SIM_REFERENCE = '''
def order(waiting, now):
    return [w["rid"] for w in sorted(waiting, key=lambda w: w["prefill_left"])]
'''
SIM_CHECKS = '''
from graders.base import Check


def public_cases(params):
    return [{"id": "one", "input": {"prompts": [["long", 900], ["a", 100], ["b", 50]],
                                    "budget": 1000}}]


def hidden_cases(params, seed):
    return []


def check(cases, got, expected, params):
    ok = all(g == e for g, e in zip(got, expected))
    return [Check("ttft", ok, "same TTFTs as the reference" if ok else f"got {got}")]
'''


def _sim_exercise(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    for name, text in (("driver.py", SIM_DRIVER), ("reference.py", SIM_REFERENCE),
                       ("checks.py", SIM_CHECKS)):
        (code / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_a_shared_module_runs_beside_the_driver_in_the_sandbox(tmp_path: Path) -> None:
    folder = _sim_exercise(tmp_path)
    ctx = replace(_ctx(mode="run"), exercise_path=str(folder), params={})
    part = PartSpec(id="policy", type="code", prompt="", sandbox_modules=("engine_sim",))
    assert code_grader.grade(part, SIM_REFERENCE, ctx).score == 1.0
    fcfs = "def order(waiting, now):\n    return [w['rid'] for w in waiting]\n"
    assert code_grader.grade(part, fcfs, ctx).score == 0.0
    # Without the declaration the module is not in the sandbox: the driver cannot import it.
    bare = replace(part, sandbox_modules=())
    r = code_grader.grade(bare, SIM_REFERENCE, ctx)
    assert r.score == 0.0 and r.feedback.startswith("Runtime error")


def test_shared_sandbox_modules_use_the_standard_library_only() -> None:
    import ast
    import sys

    from exercises import registry

    listed = {name for spec in registry.load_all().values() for part in spec.parts
              for name in part.sandbox_modules}
    assert {"engine_sim", "driver_errors"} <= listed
    for name in sorted(listed):
        path = code_grader.shared_module_path(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names}
        roots |= {n.module.split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
        assert roots <= set(sys.stdlib_module_names) | {"__future__"}, (path, roots)
