"""A grading worker's niceness reaches the scheduler even from a session of its own (Linux
autogroup): practice.celery.lower_own_autogroup, run in throwaway sessions so that the test
runner's own session is never reniced."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AUTOGROUP = Path("/proc/self/autogroup")

pytestmark = pytest.mark.skipif(
    not AUTOGROUP.exists() or Path("/proc/sys/kernel/sched_autogroup_enabled").read_text()
    .strip() != "1", reason="this kernel schedules no autogroups")

# Runs as the leader of a new session. It forks a child (a Celery pool child's place: its
# parent leads the session) and that child a grandchild (whose parent does not); each calls the
# function and reports what it returned and the niceness its autogroup then has.
PROBE = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {root!r})
    from practice.celery import lower_own_autogroup

    def niceness():
        return open("/proc/self/autogroup").read().split()[-1]

    def report(label, nice):
        print(label, lower_own_autogroup(nice), niceness(), flush=True)

    assert os.getsid(0) == os.getpid()
    print("leader-before", niceness(), flush=True)
    child = os.fork()
    if child == 0:
        grandchild = os.fork()
        if grandchild == 0:
            report("grandchild", 3)
            os._exit(0)
        os.waitpid(grandchild, 0)
        report("child", 7)
        print("missing-file", lower_own_autogroup(9, "/nonexistent/autogroup"), flush=True)
        os._exit(0)
    os.waitpid(child, 0)
    print("leader-after", niceness(), flush=True)
""")


def test_a_pool_child_lowers_its_own_sessions_autogroup_and_nothing_else() -> None:
    ours = AUTOGROUP.read_text().split()[-1]
    out = subprocess.run([sys.executable, "-c", PROBE.format(root=str(ROOT))],
                         capture_output=True, text=True, timeout=120, start_new_session=True,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "practice.settings.test"},
                         check=True).stdout.split("\n")
    lines = dict(line.split(" ", 1) for line in out if line)
    assert lines["leader-before"] == "0"
    # Its parent does not lead the session: the session may be shared (the web's): untouched.
    assert lines["grandchild"] == "False 0"
    # A pool child of a worker that leads its session: the whole session now weighs as nice 7.
    assert lines["child"] == "True 7"
    assert lines["leader-after"] == "7"
    # No autogroup file to write (another kernel, a read-only /proc): no error, nothing done.
    assert lines["missing-file"] == "False"
    # And the test runner's own session kept its niceness.
    assert AUTOGROUP.read_text().split()[-1] == ours
