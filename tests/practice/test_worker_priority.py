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
    # Empty when this process is in the boot session's autogroup (a runner started under a
    # container's init, as CI is): the probe's new session gets an autogroup of its own anyway.
    ours = AUTOGROUP.read_text()
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
    assert AUTOGROUP.read_text() == ours


def test_a_write_the_kernel_turns_away_for_now_is_tried_again(monkeypatch, tmp_path) -> None:
    """Without CAP_SYS_ADMIN the kernel takes one autogroup write a tenth of a second and
    answers EAGAIN to the others; the file here stands in for /proc to count the tries."""
    from practice import celery

    target = tmp_path / "autogroup"
    refusals = iter([True, True, False])
    real_open = open

    def open_busy(path, *args, **kwargs):
        if next(refusals):
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(celery, "open", open_busy, raising=False)
    monkeypatch.setattr(celery, "AUTOGROUP_RETRY_S", 0)
    monkeypatch.setattr(celery.os, "getsid", lambda pid: celery.os.getppid())
    assert celery.lower_own_autogroup(4, str(target))
    assert target.read_text() == "4\n"
    # Turned away every time: it gives up, saying so.
    monkeypatch.setattr(celery, "open", lambda *a, **k: (_ for _ in ()).throw(
        BlockingIOError(11, "busy")), raising=False)
    assert not celery.lower_own_autogroup(4, str(target))
