"""The result channel: what a submission can see, and what it cannot forge (issue item 3).

The sandboxed runs below are hostile on purpose: they write made-up results to every fd, reach
for the relay through /proc, kill or stop it, replay another case's reply, and look for the files
the grade depends on. Each must end with no credit it did not earn. The channel's parser is also
tested directly with forged, replayed and corrupted lines, since the route those take (the
worker's stdout pipe, reachable through /proc/1/fd/1 when the worker is not root) is closed on a
root worker and cannot be exercised here.

Like test_code_grader.py these skip without a sandbox on a developer machine and fail on CI.
"""
from __future__ import annotations

import binascii
import json
import os
from pathlib import Path
from typing import Any

import pytest

from exercises.spec import PartSpec
from exercises.stop_strings_stream import exercise as ex
from graders import code as code_grader
from graders.base import GradeContext, GradeResult

FOLDER = Path(ex.__file__).resolve().parent
CODE = FOLDER / "code"
REFERENCE = (CODE / "reference.py").read_text(encoding="utf-8")
STARTER = (CODE / "starter.py").read_text(encoding="utf-8")
PART = PartSpec(id="streamer", type="code", prompt="", time_limit_s=10,
                sandbox_modules=("driver_errors",))
PUSH = "    def push(self, token_bytes: bytes) -> str:\n"
KEY = bytes(range(16))


@pytest.fixture(scope="module")
def sandbox() -> None:
    from runners import SandboxUnavailable, get_backend

    try:
        get_backend()
    except SandboxUnavailable as exc:
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(f"sandbox unavailable on CI: {exc}")
        pytest.skip(f"sandbox unavailable: {exc}")


def _ctx(mode: str = "submit") -> GradeContext:
    return GradeContext(reference="code/reference.py", params=dict(ex.CANONICAL),
                        exercise_path=str(FOLDER), mode=mode, seed=12345)  # type: ignore[arg-type]


def _in_push(code: str, imports: str = "import os\nimport struct\nimport sys") -> str:
    body = "".join(f"        {line}\n" for line in code.splitlines())
    source = REFERENCE.replace(PUSH, PUSH + body)
    assert source != REFERENCE
    return source.replace("from __future__ import annotations\n",
                          f"from __future__ import annotations\n{imports}\n", 1)


def _probe(code: str, part: PartSpec = PART) -> dict[str, Any]:
    """Run `code` at import in the sandbox; it fills `found`, which comes back in the message."""
    source = ("import json, os, sys\nfound = {}\n" + code
              + "\nprint('PROBE ' + json.dumps(found, sort_keys=True))\nraise SystemExit(0)\n")
    r = code_grader.grade(part, source, _ctx("run"))
    (check,) = r.checks
    line = next(x for x in check.message.splitlines() if x.startswith("PROBE "))
    return json.loads(line[len("PROBE "):])


# Opens `path` as `mode` and, for a read, reads a little; records the errno name or "ok".
TRY = """
import errno
def attempt(path, flags=os.O_RDONLY, data=None):
    try:
        fd = os.open(path, flags)
        try:
            os.write(fd, data) if data is not None else os.read(fd, 64)
        finally:
            os.close(fd)
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
"""


# -- the parser: only sealed, in-order lines count ----------------------------------------------

def _line(seq: int, kind: str, index: int, field: str = "-", payload: bytes = b"",
          key: bytes = KEY) -> bytes:
    body = b" ".join([str(seq).encode(), kind.encode(), str(index).encode(), field.encode(),
                      binascii.b2a_base64(payload, newline=False)])
    return code_grader.seal(key, body) + b" " + body + b"\n"


def test_the_relay_seals_as_the_worker_checks(capfd: pytest.CaptureFixture[bytes]) -> None:
    # Same construction on both sides; the relay writes straight to fd 1.
    from runners import relay

    channel = relay.Channel(KEY, budget=1 << 20)
    channel.emit(b"ready", 0)
    channel.emit(b"output", 0, payload=b'{"a": 1}')
    channel.emit(b"end", 1, b"ok:case:0:-")
    out = capfd.readouterr().out
    assert out.encode() == _line(0, "ready", 0) + _line(1, "output", 0, payload=b'{"a": 1}') \
        + _line(2, "end", 1, "ok:case:0:-")
    report = code_grader.read_relay(out.encode(), KEY)
    assert report.ready and [r.payload for r in report.cases] == [b'{"a": 1}']
    assert report.end is not None and report.end.field == "ok:case:0:-"


def test_forged_replayed_and_foreign_lines_are_ignored() -> None:
    good = [_line(0, "ready", 0), _line(1, "output", 0, payload=b"1"),
            _line(2, "output", 1, payload=b"2"), _line(3, "end", 2, "ok:case:0:-")]
    forged = [
        b'{"id": "example-1", "output": {}}\n',  # the old protocol
        b"0" * 32 + b" 1 output 0 - MQ==\n",  # the right shape, no key
        _line(1, "output", 0, payload=b"99", key=b"x" * 16),  # another run's key
        good[1],  # a replay of an earlier line
    ]
    stream = good[0] + forged[0] + good[1] + forged[1] + forged[2] + forged[3] + good[2] \
        + forged[3] + good[3] + _line(4, "output", 5, payload=b"after the end")
    report = code_grader.read_relay(stream, KEY)
    assert [r.payload for r in report.cases] == [b"1", b"2"]
    assert report.end is not None and report.ignored_lines == 5


def test_a_lost_line_loses_everything_after_it() -> None:
    # Bytes written into the middle of a record break its seal; the sequence then has a gap.
    lines = [_line(0, "ready", 0), _line(1, "output", 0, payload=b"1"),
             _line(2, "output", 1, payload=b"2"), _line(3, "end", 2, "ok:case:0:-")]
    corrupted = lines[1][:40] + b"garbage" + lines[1][40:]
    report = code_grader.read_relay(lines[0] + corrupted + lines[2] + lines[3], KEY)
    assert report.cases == [] and report.end is None


# -- forged results ------------------------------------------------------------------------------

def _forgeries() -> bytes:
    """Every result a student might try to slip in, each carrying the *right* output for every
    public case (as if the student knew the answers): whatever counted would pass."""
    code_grader.expose_shared_modules(PART.sandbox_modules)
    driver = code_grader.load_module(CODE / "driver.py")
    reference = code_grader.load_module(CODE / "reference.py")
    cases = code_grader.load_module(CODE / "checks.py").public_cases(ex.CANONICAL)
    outputs = [json.dumps(driver.run_case(reference, c["input"])).encode() for c in cases]
    lines = [json.dumps({"id": c["id"], "output": json.loads(o)}).encode() + b"\n"
             for c, o in zip(cases, outputs, strict=True)]
    lines += [_line(i + 1, "output", i, payload=o, key=b"\0" * 16)
              for i, o in enumerate(outputs)]
    lines.append(_line(len(cases) + 1, "end", len(cases), "ok:case:0:-", key=b"\0" * 16))
    return b"".join(lines)


def _forging_starter(fds: str) -> str:
    """The starter (which scores 0), writing the forgeries to `fds` at import and at every push.
    It also writes child-loop frames with made-up nonces wherever a frame could be read."""
    forged = _forgeries()
    return STARTER.replace("from __future__ import annotations\n", f"""\
from __future__ import annotations
import os
import struct

FORGED = {forged!r}


def forge():
    frame = b"0" * 16 + b"O" + FORGED[:200]
    for fd in {fds}:
        for data in (FORGED, struct.pack(">I", len(frame)) + frame):
            try:
                os.write(fd, data)
            except OSError:
                pass
    for path in ("/proc/1/fd/1", f"/proc/{{os.getppid()}}/fd/1"):
        try:
            fd = os.open(path, os.O_WRONLY)
            os.write(fd, FORGED)
            os.close(fd)
        except OSError:
            pass


forge()
""", 1).replace("        raise NotImplementedError\n",
                "        forge()\n        raise NotImplementedError\n")


def test_forged_results_on_every_fd_earn_nothing(sandbox: None) -> None:
    r = code_grader.grade(PART, _forging_starter("range(21)"), _ctx("run"))
    assert r.score == 0.0, r.feedback
    # What reached fd 4 was refused (not a frame for the case being run) and ended the run.
    (check,) = r.checks
    assert check.name == "runs without crashing"
    assert "to the grader's result channel" in check.message


def test_forged_results_on_stdout_and_stderr_earn_nothing(sandbox: None) -> None:
    r = code_grader.grade(PART, _forging_starter("(0, 1, 2, 3)"), _ctx("run"))
    honest = code_grader.grade(PART, STARTER, _ctx("run"))
    assert r.score == honest.score == 0.0
    assert [(c.name, c.passed) for c in r.checks] == [(c.name, c.passed) for c in honest.checks]
    assert "NotImplementedError" in r.feedback
    assert r.extra["relay"]["records"] == 3


def test_a_reply_for_another_case_is_refused(sandbox: None) -> None:
    # The student's push() finds the loop's nonce for the current case on the stack, and in the
    # next case sends a (correct-looking) reply under the previous case's nonce.
    source = _in_push("""\
frame = sys._getframe()
while frame is not None and "nonce" not in frame.f_locals:
    frame = frame.f_back
nonce = frame.f_locals["nonce"]
previous = globals().setdefault("PREVIOUS", [])
if previous and previous[-1] != nonce:
    data = previous[-1] + b'O{"stream": {}}'
    os.write(4, struct.pack(">I", len(data)) + data)
previous.append(nonce)""")
    # Run mode: example-1 records its nonce, example-2 forges and is refused, and the fresh
    # process that plays example-3 has nothing to replay yet.
    r = code_grader.grade(PART, source, _ctx("run"))
    assert r.score == 0.0 and r.extra["relay"]["records"] == 3
    refusal = ("your code wrote to the grader's result channel: a reply that was not for the "
               "case being run during this case")
    assert all(refusal in c.message and "include_stop=True" in c.message
               for c in r.checks if not c.passed)
    # Submit mode: it forges again after the restart, and a second refusal ends the run.
    r = code_grader.grade(PART, source, _ctx())
    (check,) = r.checks
    assert check.name == "runs without crashing" and r.score == 0.0
    assert "Your code wrote to the grader's result channel: a reply that was not for the case " \
        "being run." in check.message
    assert "It had already failed once, during case example-2" in check.message


def test_closing_the_result_channel_is_an_error(sandbox: None) -> None:
    r = code_grader.grade(PART, _in_push("os.close(4)"), _ctx("run"))
    assert r.score == 0.0
    (check,) = r.checks
    # Whether the relay sees the closed pipe or the child's exit first, it is a plain runtime
    # error, and the child loop's own traceback is not in the student's output.
    assert r.feedback.startswith("Runtime error during case example-")
    assert "case_loop.py" not in check.message and "Bad file descriptor" not in check.message


def test_killing_the_relay_is_an_error_not_a_pass(sandbox: None) -> None:
    r = code_grader.grade(PART, _in_push("os.kill(os.getppid(), 9)"), _ctx())
    assert (r.score, r.verdict) == (0.0, "incorrect")
    (check,) = r.checks
    assert check.name == "runs without crashing"
    assert r.feedback.startswith("Runtime error during case example-1")
    assert "The grading process in the sandbox was ended by SIGKILL" in check.message
    assert r.extra["relay"]["finished"] is False


def test_the_child_gets_no_exit_hook_after_the_last_case(sandbox: None) -> None:
    # The relay SIGKILLs the child once the last reply is in, so an exit hook never runs (here
    # it would kill the relay before its end record).
    source = REFERENCE + "\nimport atexit, os\natexit.register(os.kill, os.getppid(), 9)\n"
    r = code_grader.grade(PART, source, _ctx("run"))
    assert r.score == 1.0 and r.extra["relay"]["finished"] is True, r.feedback


def test_every_case_without_the_end_record_counts_for_nothing() -> None:
    from runners.spec import SandboxResult

    lines = _line(0, "ready", 0) + _line(1, "output", 0, payload=b"1")
    report = code_grader.read_relay(lines, KEY)
    result = SandboxResult(exit_code=None, signal=9, stdout=lines, stderr=b"", wall_s=0.1,
                           cpu_s=0.1, timed_out=False, output_truncated=False, oom_killed=False,
                           backend="test", memory_isolation="cgroup")
    stop = code_grader._stopped(report, result)
    assert stop is not None and (stop.verdict, stop.done) == ("RE", 1)
    assert stop.cut_short == "was ended by SIGKILL"


def test_stopping_the_relay_is_an_error_not_a_pass(sandbox: None) -> None:
    part = PartSpec(id="streamer", type="code", prompt="", time_limit_s=1,
                sandbox_modules=("driver_errors",))
    r = code_grader.grade(part, _in_push("os.kill(os.getppid(), 19)"), _ctx("run"))  # SIGSTOP
    assert r.score == 0.0 and r.extra["relay"]["finished"] is False
    assert r.feedback.startswith("Time limit (1 s) exceeded")


# -- what the submission can reach ---------------------------------------------------------------

def test_the_relay_is_out_of_reach(sandbox: None) -> None:
    found = _probe(TRY + """
ppid = os.getppid()
for n in range(6):
    found[f"fd/{n}"] = attempt(f"/proc/{ppid}/fd/{n}")
    found[f"fd/{n} write"] = attempt(f"/proc/{ppid}/fd/{n}", os.O_WRONLY, b"x")
for name in ("mem", "environ", "maps"):
    found[name] = attempt(f"/proc/{ppid}/{name}")
try:
    os.listdir(f"/proc/{ppid}/fd")
    found["listdir fd"] = "ok"
except OSError as exc:
    found["listdir fd"] = errno.errorcode[exc.errno]
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
found["ptrace"] = libc.ptrace(16, ppid, None, None)  # PTRACE_ATTACH
found["ptrace errno"] = errno.errorcode.get(ctypes.get_errno())
""")
    for n in range(6):
        assert found[f"fd/{n}"] == found[f"fd/{n} write"] == "EACCES", found
    assert found["mem"] == found["environ"] == found["maps"] == "EACCES", found
    assert found["listdir fd"] == "EACCES"
    assert (found["ptrace"], found["ptrace errno"]) == (-1, "EPERM")


def test_the_submission_sees_only_its_own_files(sandbox: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # A secret in the worker's environment must not reach the sandbox.
    monkeypatch.setenv("ROOFLINE_TEST_WORKER_SECRET", "do-not-leak")
    root = Path(__file__).resolve().parents[2]
    targets = {
        "checks": CODE / "checks.py", "reference": CODE / "reference.py",
        "mutants": CODE / "mutants.toml", "database": root / "var" / "db.sqlite3",
        "settings": root / "practice" / "settings" / "base.py",
        "grader": Path(code_grader.__file__),
    }
    found = _probe(TRY + f"""
found["sandbox"] = sorted(os.listdir("/sandbox"))
found["cwd"] = os.getcwd()
for name, path in {json.dumps({k: str(v) for k, v in targets.items()})}.items():
    found[name] = attempt(path)
    found[name + " in sandbox"] = attempt("/sandbox/" + os.path.basename(path))
found["env"] = sorted(os.environ)
try:
    with open("/proc/1/environ", "rb") as fh:
        names = [v.split(b"=")[0].decode() for v in fh.read().split(b"\\0") if v]
    found["environ of pid 1"] = sorted(names)
except OSError as exc:
    found["environ of pid 1"] = errno.errorcode[exc.errno]
found["write /sandbox"] = attempt("/sandbox/new.py", os.O_WRONLY | os.O_CREAT, b"x")
found["write submission"] = attempt("/sandbox/submission.py", os.O_WRONLY, b"x")
found["tmp left over"] = os.path.exists("/tmp/left-over")
with open("/tmp/left-over", "w") as fh:
    fh.write("from an earlier run")
""")
    # Ours (the relay, the case loop, the driver and its shared module) and the submission.
    assert found["sandbox"] == ["case_loop.py", "cpuclock.py", "driver.py", "driver_errors.py",
                                "relay.py", "submission.py"]
    assert found["cwd"] == "/sandbox"
    for name in targets:
        assert found[name] == found[name + " in sandbox"] == "ENOENT", (name, found)
    assert "ROOFLINE_TEST_WORKER_SECRET" not in found["env"]
    # PID 1 is bwrap's init: started with an empty environment, or not readable at all.
    assert found["environ of pid 1"] in ([], "EACCES"), found["environ of pid 1"]
    assert not any(k.startswith(("DATABASE", "SECRET", "DJANGO", "REDIS", "CELERY"))
                   for k in found["env"]), found["env"]
    assert found["write /sandbox"] == "EROFS"
    assert found["write submission"] in ("EROFS", "EACCES")
    # /tmp is a fresh tmpfs per run: what this run leaves there is gone for the next one.
    again = _probe("found['tmp left over'] = os.path.exists('/tmp/left-over')")
    assert found["tmp left over"] is False and again["tmp left over"] is False


def test_grade_result_of_a_probe_is_a_runtime_error(sandbox: None) -> None:
    # What a probe's stop looks like to a student: plain, with its prints, no internals.
    r: GradeResult = code_grader.grade(PART, "print('hi')\nraise SystemExit(0)\n", _ctx("run"))
    (check,) = r.checks
    assert r.feedback == "Runtime error while loading submission.py, before any case ran."
    assert check.message.endswith("SystemExit: 0\n\nYour output before it stopped (all of it):\nhi")


@pytest.mark.parametrize("source, end", [(REFERENCE, "ok:case:0:-"),
                                         (_in_push("while True:\n    pass"), "TLE:case:0:time"),
                                         (_in_push("os._exit(3)"), "RE:case:1:exit=3")])
def test_the_relay_works_without_pidfds(sandbox: None, source: str, end: str) -> None:
    # A kernel or seccomp profile without pidfd_open: the relay polls for the child's exit.
    from runners import get_backend

    cases = code_grader.load_module(CODE / "checks.py").public_cases(ex.CANONICAL)
    part = PartSpec(id="streamer", type="code", prompt="", time_limit_s=2,
                sandbox_modules=("driver_errors",))
    spec = code_grader.sandbox_spec(part, source.encode(), (CODE / "driver.py").read_bytes(),
                                    cases, KEY)
    relay = spec.files["relay.py"]
    spec.files["relay.py"] = relay.replace(b"def main() -> int:\n",
                                           b"def main() -> int:\n    del os.pidfd_open\n")
    assert spec.files["relay.py"] != relay
    report = code_grader.read_relay(get_backend().run(spec).stdout, KEY)
    assert report.end is not None and report.end.field == end
