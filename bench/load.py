"""Load: simulated students against gunicorn + Celery workers on loopback, in one bounded run.

    .venv/bin/python bench/load.py [--duration 120] [--students 50] [--web-workers 3]
                                   [--celery-workers 2] [--think 3] [--drain 180]
                                   [--ratio-seconds 24] [--ratio-concurrency 8] [--keep]

What it starts (all in new process groups, all stopped on exit, Ctrl-C and SIGTERM included):
gunicorn (`practice.wsgi`, sync workers) on a free 127.0.0.1 port, and Celery workers (`-c 1`
each, the first with the beat that runs the sweeper) on the embedded broker, or on Redis when
REDIS_URL is set (give it a database of its own: messages already there would be delivered too).
The database is a private SQLite file under a temporary ROOFLINE_VAR_DIR unless DATABASE_URL is
set; users are named `load-<run>-NN`, so a shared database only gains rows. The settings are
production's (`practice.settings.prod`: DEBUG off, hashed static files after collectstatic,
its password hashing), except the Secure cookie flags, since this client talks plain HTTP.

Each simulated student (httpx, its own cookie jar) logs in (the logins spread over the first
quarter of the run, 30 s at most), then until the duration is up:
opens the catalog, opens an exercise page, and submits one or two answers of that exercise the
way the page's htmx does (HX-Request, X-CSRFToken): number answers (graded inline) and
expression or code answers (queued, graded by a worker), which it follows by polling the status
fragment every 0.5 s, as the page does, until the verdict comes. Answers are the exercises' own
canonical selftest cases (right and wrong; code: the reference and the starter), and every
student is assigned the canonical variant, so each row's score can be checked against the
score the case expects. Between steps it waits a random think time around --think seconds.

Printed: latency percentiles per page kind; submissions graded per second (worker-graded and
inline); lost submissions, i.e. this run's rows still queued or running after the load stops
and the queue has had --drain seconds to empty (must be 0); then a second, closed-loop phase
with --ratio-concurrency logged-in clients and no think time, after a warm-up that opens
every exercise page twice per web worker (as a server that has been up a while has them
rendered), alternating slices of the exercise page and a trivial view (GET /login/, the login
form: no query of its own; not /healthz/, which probes the database and the broker; the
clients are logged in, so both pay the same session and user look-up), which gives the
exercise page's throughput as a ratio to the trivial view's, same server, same concurrency,
same run. The client runs on the same cores as the server, and its cost per request is the
same for both views, so the ratio understates how much heavier the page is.

Exit status 1 when a submission was lost, a request failed (5xx, connection error, timeout)
or a server process died; the temporary folder (logs, database) is then kept and printed.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as `python bench/load.py`: the project's modules
# The students and the report, beside this file (on sys.path when run as a script).
import cpu_use  # noqa: E402
from load_grades import code_phase, in_process_rate  # noqa: E402
from load_report import (  # noqa: E402
    drain,
    grade_rate_report,
    latency_table,
    slowest,
    submission_report,
    timeline,
)
from load_students import (  # noqa: E402
    answer_pool,
    load_phase,
    prepare_database,
    ramp_seconds,
    ratio_phase,
)

from tests.processes import GroupProcess, celery_worker  # noqa: E402

SETTINGS_MODULE = "roofline_load_settings"
# The report also gives the latencies of what was sent this long after the last log-in began.
SETTLE_S = 5.0
# Production settings, but cookies without the Secure flag: over plain HTTP on loopback a
# Secure cookie never comes back from the client, and every request would be anonymous.
SETTINGS_SOURCE = '''"""Written by bench/load.py: production settings for a plain-HTTP loopback run."""
from practice.settings.prod import *  # noqa: F403

SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0
'''
# --- processes -----------------------------------------------------------------------------

class Processes:
    """The servers of one run (gunicorn, Celery workers), each the leader of its own process
    group (tests/processes.py), so stopping one stops its children too."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[GroupProcess] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> GroupProcess:
        proc = GroupProcess(argv, env, self.logs / f"{name}.log")
        self.procs.append(proc)
        return proc

    def dead(self) -> list[str]:
        return [f"{p.name} (exit {p.proc.returncode})" for p in self.procs if not p.alive()]

    def tails(self, lines: int = 15) -> str:
        return "\n".join(f"--- {p.name} ({p.log}) ---\n" + "\n".join(p.text().splitlines()[-lines:])
                         for p in self.procs)

    def stop_all(self, grace_s: float = 15) -> None:
        for p in self.procs:
            if p.alive():
                # The leader only: gunicorn and Celery stop their own children in order.
                p.proc.send_signal(signal.SIGTERM)
        # A Celery worker's warm shutdown waits for the task in hand; past the grace, kill.
        deadline = time.monotonic() + grace_s
        for p in self.procs:
            try:
                p.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs:
            # The leader may be gone while its group lives on (an orphaned sandbox child).
            p.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_log(proc: GroupProcess, needle: str, procs: Processes, timeout_s: float) -> None:
    try:
        proc.wait_for(needle, timeout_s, poll_s=0.2)
    except RuntimeError as exc:
        dead = procs.dead()
        raise RuntimeError(f"died while starting: {', '.join(dead)}" if dead else str(exc)) \
            from None


def wait_for_http(base: str, procs: Processes, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/login/", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if procs.dead():
            raise RuntimeError(f"died while starting: {', '.join(procs.dead())}")
        time.sleep(0.3)
    raise RuntimeError(f"gunicorn did not answer within {timeout_s:.0f} s")


# --- main ----------------------------------------------------------------------------------

def environment(tmp: Path) -> dict[str, str]:
    var = tmp / "var"
    var.mkdir()
    (tmp / f"{SETTINGS_MODULE}.py").write_text(SETTINGS_SOURCE)
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env |= {"DJANGO_SETTINGS_MODULE": SETTINGS_MODULE, "ROOFLINE_VAR_DIR": str(var),
            "PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)]),
            "SECRET_KEY": secrets.token_urlsafe(40), "ALLOWED_HOSTS": "127.0.0.1"}
    env.setdefault("DATABASE_URL", f"sqlite:///{var / 'db.sqlite3'}")
    return env


def start_servers(args: argparse.Namespace, env: dict[str, str], procs: Processes,
                  tmp: Path, port: int) -> None:
    procs.start("gunicorn", [
        sys.executable, "-m", "gunicorn", "practice.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", str(args.web_workers),
        "--worker-class", "sync", "--timeout", "90", "--graceful-timeout", "5",
        # As docker/app/Dockerfile runs it: the workers' heartbeat file in memory, where a
        # disk busy with the database's fsyncs cannot hold up a worker between requests.
        "--worker-tmp-dir", "/dev/shm"], env)
    workers = []
    for i in range(args.celery_workers):
        beat = ["-B", "-s", str(tmp / "celerybeat-schedule")] if i == 0 else []
        workers.append(procs.start(f"celery{i}", celery_worker(f"load{i}-{os.getpid()}", *beat),
                                   env))
    wait_for_http(f"http://127.0.0.1:{port}", procs, 90)
    for worker in workers:
        wait_for_log(worker, "ready.", procs, 120)
    # Each grading child loads the text model in the background as it starts (14 s of CPU at
    # the workers' niceness): a site up a while has it loaded, and its load would otherwise be
    # counted as grading in the figures below.
    from practice.celery import TEXT_WARM_LINE

    for worker in workers:
        wait_for_log(worker, TEXT_WARM_LINE, procs, 300)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=120, help="seconds of load (120)")
    ap.add_argument("--students", type=int, default=50, help="simulated students (50)")
    ap.add_argument("--web-workers", type=int, default=3, help="gunicorn sync workers (3)")
    ap.add_argument("--celery-workers", type=int, default=2, help="Celery workers, -c 1 (2)")
    ap.add_argument("--think", type=float, default=3.0, help="mean think time, seconds (3)")
    ap.add_argument("--drain", type=float, default=180,
                    help="seconds the queue may take to empty after the load (180)")
    ap.add_argument("--ratio-seconds", type=float, default=24,
                    help="closed-loop seconds for the page/trivial throughput ratio (24)")
    ap.add_argument("--ratio-concurrency", type=int, default=8,
                    help="clients in the throughput-ratio phase (8)")
    ap.add_argument("--code-seconds", type=float, default=30,
                    help="closed-loop seconds of code submissions for the grade rate (30)")
    ap.add_argument("--code-clients", type=int, default=16,
                    help="students submitting code in the grade-rate phase (16)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="roofline-load-"))
    env = environment(tmp)
    os.environ.update(env)
    sys.path[:0] = [str(tmp), str(ROOT)]
    procs = Processes(tmp)

    def on_signal(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # run the `finally` below, which stops every process

    # SIGINT too: a shell starts background jobs with SIGINT ignored, and Python then installs
    # no KeyboardInterrupt of its own.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    failed: list[str] = []
    interrupted = False
    try:
        import logging

        import django

        django.setup()
        # The settings' root handler would print a line per request of the client.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        from django.conf import settings

        t0 = time.monotonic()
        pool = answer_pool()
        run = secrets.token_hex(3)
        prefix, password = prepare_database(args.students, run, pool)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        start_servers(args, env, procs, tmp, port)
        db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        broker = "Redis" if settings.REDIS_URL else "embedded (filesystem)"
        print(f"roofline load: {args.students} students for {args.duration:.0f} s against "
              f"{base}: gunicorn {args.web_workers} sync workers, {args.celery_workers} Celery "
              f"workers (-c 1), broker {broker}, database {db}; {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f} before the start (other work on the "
              f"machine slows both views of the ratio alike, not the absolute figures); "
              f"started in {time.monotonic() - t0:.0f} s")
        print(f"answers: {', '.join(f'{len(v)} {k}' for k, v in sorted(pool.items()))} "
              f"(canonical selftest cases; think time ~{args.think:g} s)", flush=True)

        load_start = time.monotonic()
        stats, load_s = asyncio.run(load_phase(args, base, prefix, password, pool))
        lost, waited = drain(prefix, args.drain)
        order = ["login page", "log in (POST)", "catalog", "exercise page",
                 "submit number (inline)", "submit expression (queued)",
                 "submit code (queued)", "status poll"]
        requests = sum(len(v) for v in stats.latency.values()) + stats.failed_requests()
        print(f"\nload: {load_s:.0f} s, {requests} requests = {requests / load_s:.1f}/s "
              f"(logins spread over the first {ramp_seconds(args.duration):.0f} s)")
        print("\n".join(latency_table(stats, order)))
        settled = load_start + ramp_seconds(args.duration) + SETTLE_S
        print(f"  after the logins (sent {ramp_seconds(args.duration) + SETTLE_S:.0f} s into the "
              f"run or later):")
        print("\n".join(latency_table(stats.since(settled), order)[1:]))
        print("\n".join(timeline(stats, "exercise page", load_start)))
        print("\n".join(slowest(stats, "exercise page", load_start, settled)))
        lines, bad_rows = submission_report(stats, prefix, load_s)
        print("\n".join(lines))
        if bad_rows:
            failed.append(f"{bad_rows} submissions scored other than the selftest says")
        print(f"lost: {lost} (rows still queued or running after the drain, which took "
              f"{waited:.0f} s of the {args.drain:.0f} s allowed)", flush=True)
        if lost:
            failed.append(f"{lost} submissions lost")
        if stats.failed_requests():
            failed.append(f"{stats.failed_requests()} requests failed: "
                          + "; ".join(f"{k}: {dict(c)}" for k, c in stats.failures.items()))

        if args.ratio_seconds > 0:
            slugs = sorted({c.slug for cases in pool.values() for c in cases})
            label, done, rstats = asyncio.run(ratio_phase(args, base, prefix, password, slugs))
            ex_rps = done["exercise"][0] / done["exercise"][1]
            tr_rps = done["trivial"][0] / done["trivial"][1]
            print(f"\nthroughput, {args.ratio_concurrency} logged-in clients, no think time, "
                  f"{done['exercise'][1]:.0f} s each in alternating slices:")
            print("\n".join(latency_table(rstats, ["exercise", "trivial"])))
            print(f"  exercise page ({len(slugs)} exercises in turn): {ex_rps:.1f} req/s")
            print(f"  trivial view, {label}: {tr_rps:.1f} req/s")
            print(f"  exercise page / trivial view = {ex_rps / tr_rps:.2f}")
            if rstats.failed_requests():
                failed.append(f"{rstats.failed_requests()} requests failed in the ratio phase")
        if args.code_seconds > 0:
            code_cases = [c for c in pool.get("code", []) if c.score == 1.0] + \
                [c for c in pool.get("code", []) if c.score != 1.0]
            roles = {"web": [p.proc.pid for p in procs.procs if p.name == "gunicorn"],
                     "workers": [p.proc.pid for p in procs.procs if p.name.startswith("celery")]}
            cpu_before: dict[str, float] = {}
            cstats, code_s = asyncio.run(code_phase(
                args, base, prefix, password, code_cases,
                started=lambda: cpu_before.update(cpu_use.snapshot(roles))))
            cpu_lines = cpu_use.per_event_lines(cpu_before, cpu_use.snapshot(roles),
                                                len(cstats.verdict_seen_s), code_s,
                                                os.cpu_count() or 1)
            lost, waited = drain(prefix, args.drain)
            grades, grade_s = in_process_rate(code_cases, min(args.code_seconds, 20))
            lines, problems = grade_rate_report(cstats, code_s, lost, grades, grade_s, args)
            lines[-1:-1] = cpu_lines
            print("\n" + "\n".join(lines), flush=True)
            failed.extend(problems)
        if procs.dead():
            failed.append(f"server processes died: {', '.join(procs.dead())}")
    except KeyboardInterrupt:
        failed.append("interrupted")
        interrupted = True
    except RuntimeError as exc:
        failed.append(str(exc))
    finally:
        procs.stop_all()
    if failed:
        print("\nFAILED: " + "\n".join(failed), file=sys.stderr)
        if not interrupted:
            print(procs.tails(), file=sys.stderr)
        print(f"logs and database kept in {tmp}", file=sys.stderr)
        return 1
    print("\nOK: nothing lost, no failed request")
    if args.keep:
        print(f"kept {tmp}")
    else:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
