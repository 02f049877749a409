"""The kernel run's children are forked from a zygote (gpu_sandbox/zygote.py), not exec'd: what
an exec'd child could not reach, a forked one must not reach either.

Each probe below is a submission whose module-level code looks around and raises what it found,
so the "loads" check's message carries it back; the run is the real harness under bwrap. The
static checks are off here (test_harness.py does the same): they would refuse the probes' os
and gc calls before anything ran.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from exercises.spec import PartSpec
from graders import kernel
from graders.base import GradeContext, GradeResult

FIXTURE = Path(__file__).resolve().parent / "fixture"
REFERENCE = (FIXTURE / "kernel" / "reference.py").read_text(encoding="utf-8")
PART = PartSpec(id="k", type="kernel", prompt="", time_limit_s=30, memory_mb=3072,
                output_limit_kb=64)
SEED = 918_273_645_546
COMPILE = "compiles for sm_90 (H100/H200)"

pytestmark = pytest.mark.usefixtures("sandbox")  # tests/gpu_sandbox/conftest.py


@pytest.fixture(autouse=True)
def no_static_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    from graders import kernel_static as static

    monkeypatch.setattr(static, "check", lambda source, entry: [])


def grade(source: str) -> GradeResult:
    ctx = GradeContext(reference="kernel/reference.py", mistakes=(),
                       params={"sizes": [256, 1000]}, exercise_path=str(FIXTURE),
                       mode="submit", seed=SEED)
    return kernel.grade(PART, source, ctx)


PROBE = f'''
import gc, json, os, sys

SEED = {SEED}
found = {{}}
found["stdin"] = [os.readlink("/proc/self/fd/0"), sys.stdin.read()]
fds = {{}}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = os.readlink(f"/proc/self/fd/{{fd}}")
    except OSError:
        pass  # the listing's own descriptor, closed by now
found["sockets"] = sorted(fd for fd, target in fds.items() if target.startswith("socket:"))
found["fds"] = sorted(int(fd) for fd in fds)
readable = []
pid = os.getpid()
for _ in range(2):  # the zygote, then run.py
    pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
    for what in ("mem", "environ", "fd/0"):
        try:
            with open(f"/proc/{{pid}}/{{what}}", "rb") as f:
                f.read(1)
            readable.append(f"{{pid}}/{{what}}")
        except OSError:
            pass
found["readable"] = readable
names = set()
frame = sys._getframe()
while frame is not None:
    names.update(frame.f_locals)
    frame = frame.f_back
found["secret_locals"] = sorted(names & {{"key", "config", "stdin"}})
found["seed_objects"] = sum(
    1 for o in gc.get_objects()
    if type(o) is dict and o is not globals()
    and any(type(v) is int and v == SEED for v in o.values()))
raise RuntimeError("PROBE " + json.dumps(found) + " END")
'''


def probe() -> dict[str, Any]:
    result = grade(PROBE)
    message = result.checks[0].message
    match = re.search(r"PROBE (\{.*?\}) END", message)  # not the source line quoted above it
    assert match, message
    return json.loads(match.group(1))


def test_a_child_holds_no_secret_of_the_parent_and_no_way_to_it() -> None:
    found = probe()
    # stdin is /dev/null, not the pipe the key and config came through
    assert found["stdin"] == ["/dev/null", ""]
    # its own descriptors only: std streams and the two pipes, no socket to the zygote
    assert found["sockets"] == []
    assert [fd for fd in found["fds"] if fd > 4] in ([], [max(found["fds"])])
    # neither the zygote nor run.py can be read through /proc (both non-dumpable)
    assert found["readable"] == []
    # the zygote was forked before run.py read its stdin: no frame up the child's stack holds
    # the key or the config, and no live object holds the worker's seed
    assert found["secret_locals"] == []
    assert found["seed_objects"] == 0


KILLS_ITS_PARENT = REFERENCE + '''
import os
import signal

os.kill(os.getppid(), signal.SIGKILL)  # the zygote
'''


def test_killing_the_zygote_costs_only_the_students_own_compile_step() -> None:
    result = grade(KILLS_ITS_PARENT)
    checks = {c.name: c for c in result.checks}
    assert checks["whole blocks"].passed and checks["tail"].passed
    assert not checks[COMPILE].passed
    assert "could not be started" in checks[COMPILE].message
    assert result.verdict == "partial"


def test_the_reference_compiles_in_its_own_process_after_an_interpreted_case_child() -> None:
    result = grade(REFERENCE)
    assert result.verdict == "provisional", result.feedback
    compiled = result.extra["compile"]
    assert compiled["ok"] and compiled["launches"] >= 1 and compiled["record_problems"] == []
