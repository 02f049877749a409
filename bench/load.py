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
with --ratio-concurrency logged-in clients and no think time, alternating slices of the
exercise page and a trivial view (GET /login/, the login form: no query of its own; not
/healthz/, which probes the database and the broker; the clients are logged in, so both pay the
same session and user look-up), which gives the exercise page's throughput as a ratio to the
trivial view's, same server, same concurrency, same run. The client runs on the same cores as
the server, and its cost per request is the same for both views, so the ratio understates how
much heavier the page is.

Exit status 1 when a submission was lost, a request failed (5xx, connection error, timeout)
or a server process died; the temporary folder (logs, database) is then kept and printed.
"""
from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as `python bench/load.py`: the project's modules
from tests.processes import GroupProcess, celery_worker  # noqa: E402

SETTINGS_MODULE = "roofline_load_settings"
# Production settings, but cookies without the Secure flag: over plain HTTP on loopback a
# Secure cookie never comes back from the client, and every request would be anonymous.
SETTINGS_SOURCE = '''"""Written by bench/load.py: production settings for a plain-HTTP loopback run."""
from practice.settings.prod import *  # noqa: F403

SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0
'''
QUEUED_KINDS = ("expression", "code")
POLL_EVERY_S = 0.5  # the status fragment asks for itself after 400 ms; plus the round trip
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
SUBMISSION_ID = re.compile(r'id="sub-(\d+)"')
REFUSAL = re.compile(r'class="error" role="alert">(.*?)</p>', re.S)


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


# --- the site's data -----------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One answer a student may submit, and the score the exercise's selftest says it earns."""

    slug: str
    part_id: str
    kind: str  # number | expression | code
    answer: str
    score: float
    tolerance: float


def answer_pool() -> dict[str, list[Case]]:
    """Right and wrong answers for the canonical variant, by part type. Code parts get only the
    reference and the starter: they are deterministic and quick, where a mutant's score may
    hang on a speed check that a loaded machine can tip either way."""
    from exercises import registry

    pool: dict[str, list[Case]] = defaultdict(list)
    for slug, spec in sorted(registry.load_all().items()):
        for c in spec.selftest:
            part = spec.part(c.part)
            if c.variant != registry.CANONICAL_VARIANT or c.invalid or c.score is None:
                continue
            if part.type == "number" or part.type == "expression":
                pool[part.type].append(Case(slug, part.id, part.type, c.answer, c.score,
                                            c.tolerance))
        for part in spec.parts:
            if part.type == "code":
                for name, score in (("reference.py", 1.0), ("starter.py", 0.0)):
                    source = (spec.code_dir / name).read_text(encoding="utf-8")
                    pool["code"].append(Case(slug, part.id, "code", source, score, 1e-9))
    return dict(pool)


def prepare_database(students: int, run: str, pool: dict[str, list[Case]]) -> tuple[str, str]:
    """Migrate, collect static files, sync exercises, and create the students with the canonical
    variant of every exercise the pool uses. Returns the username prefix and the password."""
    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command
    from django.db import connections

    from practice.actions.exercises import sync_exercises
    from practice.models import Assignment, Exercise, User

    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    sync_exercises()
    prefix, password = f"load-{run}-", f"load-{run}-password"
    # One hash (the site's first hasher, memory-hard) for all: hashing each password would cost
    # as much as the logins themselves, and it is the logins' checking that we measure.
    hashed = make_password(password)
    User.objects.bulk_create(
        [User(username=f"{prefix}{i:02d}", password=hashed) for i in range(students)])
    users = list(User.objects.filter(username__startswith=prefix))
    slugs = {c.slug for cases in pool.values() for c in cases}
    exercises = list(Exercise.objects.filter(slug__in=slugs, active=True))
    Assignment.objects.bulk_create([Assignment(user=u, exercise=e, variant="canonical")
                                    for u in users for e in exercises])
    connections.close_all()  # no connection of ours open while the servers write
    return prefix, password


# --- the simulated students ----------------------------------------------------------------

@dataclass
class Stats:
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    failures: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    refused: Counter[str] = field(default_factory=Counter)
    submitted: dict[int, Case] = field(default_factory=dict)
    verdict_seen_s: list[float] = field(default_factory=list)
    polls_cut: int = 0  # polls the end of the run stopped before the verdict came

    async def call(self, client: httpx.AsyncClient, kind: str, method: str, url: str,
                   ok: tuple[int, ...] = (200,), **kw: Any) -> httpx.Response | None:
        t0 = time.perf_counter()
        try:
            r = await client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            self.failures[kind][type(exc).__name__] += 1
            return None
        self.latency[kind].append(time.perf_counter() - t0)
        if r.status_code not in ok:
            self.failures[kind][f"HTTP {r.status_code}"] += 1
            return None
        return r

    def failed_requests(self) -> int:
        return sum(sum(c.values()) for c in self.failures.values())


async def log_in(client: httpx.AsyncClient, stats: Stats, username: str, password: str) -> bool:
    page = await stats.call(client, "login page", "GET", "/login/")
    if page is None:
        return False
    if not (m := CSRF_FIELD.search(page.text)):
        stats.failures["login page"]["no CSRF token in the form"] += 1
        return False
    # A refused log-in re-renders the form (200, counted as a failure); success redirects.
    r = await stats.call(client, "log in (POST)", "POST", "/login/", ok=(302,),
                         data={"username": username, "password": password,
                               "csrfmiddlewaretoken": m.group(1)})
    if r is not None and "/login/" in r.headers.get("location", ""):
        stats.failures["log in (POST)"]["redirected back to the login page"] += 1
        return False
    return r is not None


def htmx_headers(client: httpx.AsyncClient) -> dict[str, str]:
    return {"HX-Request": "true", "X-CSRFToken": client.cookies.get("csrftoken", "")}


async def submit(client: httpx.AsyncClient, stats: Stats, case: Case, stop_at: float
                 ) -> None:
    queued = case.kind in QUEUED_KINDS
    kind = f"submit {case.kind}" + (" (queued)" if queued else " (inline)")
    t0 = time.monotonic()
    r = await stats.call(client, kind, "POST", f"/ex/{case.slug}/{case.part_id}/submit/",
                         data={"answer": case.answer, "mode": "submit"},
                         headers=htmx_headers(client))
    if r is None:
        return
    refusal = REFUSAL.search(r.text)
    if refusal:  # a rate limit or in-flight cap: nothing saved, by design
        stats.refused[" ".join(refusal.group(1).split())[:90]] += 1
        return
    ids = SUBMISSION_ID.findall(r.text)
    if not ids:
        stats.failures[kind]["no submission in the response"] += 1
        return
    sub_id = int(ids[0])
    stats.submitted[sub_id] = case
    if not queued:
        return
    while True:
        if time.monotonic() >= stop_at:
            stats.polls_cut += 1
            return
        await asyncio.sleep(POLL_EVERY_S)
        s = await stats.call(client, "status poll", "GET", f"/submissions/{sub_id}/status/",
                             headers=htmx_headers(client))
        # A finished submission redraws its whole part in place of the polling fragment.
        if s is not None and ("HX-Retarget" in s.headers
                              or f'hx-get="/submissions/{sub_id}/status/"' not in s.text):
            stats.verdict_seen_s.append(time.monotonic() - t0)
            return


async def student(i: int, n: int, base: str, username: str, password: str,
                  pool: dict[str, list[Case]], stats: Stats, start: float, ramp_s: float,
                  stop_at: float, think_s: float) -> None:
    rng = random.Random(i)

    async def think(scale: float = 1.0) -> None:
        await asyncio.sleep(min(max(0.0, stop_at - time.monotonic()),
                                think_s * scale * rng.uniform(0.5, 1.5)))

    by_slug: dict[str, list[Case]] = defaultdict(list)
    for cases in pool.values():
        for c in cases:
            by_slug[c.slug].append(c)
    # Number parts are the most common kind of part, code the heaviest to grade.
    kinds, weights = zip(*[(k, w) for k, w in (("number", 5), ("expression", 2), ("code", 2))
                           if pool.get(k)], strict=True)
    await asyncio.sleep(start + ramp_s * i / max(1, n) - time.monotonic())
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        if not await log_in(client, stats, username, password):
            return  # counted as a failure by log_in
        while time.monotonic() < stop_at:
            if rng.random() < 0.5:
                await stats.call(client, "catalog", "GET", "/")
                await think(0.5)
            first = rng.choice(pool[rng.choices(kinds, weights)[0]])
            await stats.call(client, "exercise page", "GET", f"/ex/{first.slug}/")
            await think()
            todo = [first]
            if rng.random() < 0.5:  # another part of the same exercise, or another try
                todo.append(rng.choice(by_slug[first.slug]))
            for case in todo:
                if time.monotonic() >= stop_at:
                    break
                await submit(client, stats, case, stop_at)
                await think()


def ramp_seconds(duration: float) -> float:
    # Logins spread out, as a class arriving: a log-in costs a memory-hard password hash, and
    # 50 at once would measure that storm rather than the browsing that follows.
    return min(30.0, duration / 4)


async def load_phase(args: argparse.Namespace, base: str, prefix: str, password: str,
                     pool: dict[str, list[Case]]) -> tuple[Stats, float]:
    stats = Stats()
    start = time.monotonic()
    ramp_s = ramp_seconds(args.duration)
    stop_at = start + args.duration
    await asyncio.gather(*(
        student(i, args.students, base, f"{prefix}{i:02d}", password, pool, stats, start,
                ramp_s, stop_at, args.think) for i in range(args.students)))
    return stats, time.monotonic() - start


async def ratio_phase(args: argparse.Namespace, base: str, prefix: str, password: str,
                      slugs: list[str]) -> tuple[str, dict[str, tuple[int, float]], Stats]:
    """Closed loop, no think time: alternating slices of the exercise page and the trivial
    view, so whatever else the machine does lands on both alike."""
    stats = Stats()
    trivial = ("/login/", "GET /login/ (the login form)")
    clients = [httpx.AsyncClient(base_url=base, timeout=60)
               for _ in range(args.ratio_concurrency)]
    count = {"exercise": 0, "trivial": 0}
    seconds = {"exercise": 0.0, "trivial": 0.0}
    try:
        users = [f"{prefix}{i % args.students:02d}" for i in range(len(clients))]
        logged = await asyncio.gather(*(log_in(c, stats, u, password)
                                        for c, u in zip(clients, users, strict=True)))
        if not all(logged):
            raise RuntimeError("ratio phase: a client could not log in")
        # Short slices, many rounds: a burst of other work on the machine then falls on both
        # views instead of on one slice of one of them.
        slice_s = min(2.0, args.ratio_seconds / 2)
        rounds = max(1, round(args.ratio_seconds / (2 * slice_s)))
        counter = iter(range(10**9))

        async def loop(client: httpx.AsyncClient, which: str, until: float) -> None:
            while time.monotonic() < until:
                url = (f"/ex/{slugs[next(counter) % len(slugs)]}/" if which == "exercise"
                       else trivial[0])
                if await stats.call(client, which, "GET", url) is not None:
                    count[which] += 1

        for which in ("exercise", "trivial"):  # warm-up, not counted
            await asyncio.gather(*(loop(c, which, time.monotonic() + 1) for c in clients))
        count = {"exercise": 0, "trivial": 0}
        stats = Stats()
        for _ in range(rounds):
            for which in ("exercise", "trivial"):
                t0 = time.monotonic()
                await asyncio.gather(*(loop(c, which, t0 + slice_s) for c in clients))
                seconds[which] += time.monotonic() - t0
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    return trivial[1], {k: (count[k], seconds[k]) for k in count}, stats


# --- after the load --------------------------------------------------------------------------

def drain(prefix: str, drain_s: float) -> tuple[int, float]:
    """Wait for this run's queued and running rows to be graded. Returns how many are left
    (lost) and how long the wait took."""
    from django.db import connections

    from practice.models import Submission

    pending = Submission.objects.filter(user__username__startswith=prefix,
                                        status__in=[Submission.Status.QUEUED,
                                                    Submission.Status.RUNNING])
    t0 = time.monotonic()
    left = pending.count()
    while left and time.monotonic() - t0 < drain_s:
        time.sleep(1)
        left = pending.count()
    connections.close_all()
    return left, time.monotonic() - t0


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def latency_table(stats: Stats, order: list[str]) -> list[str]:
    kinds = [k for k in order if k in stats.latency or k in stats.failures]
    kinds += sorted(set(stats.latency) - set(kinds))
    rows = [f"  {'page (ms)':<26}{'n':>6}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}{'failed':>8}"]
    for k in kinds:
        v = [x * 1000 for x in stats.latency.get(k, [])]
        failed = sum(stats.failures.get(k, Counter()).values())
        if v:
            rows.append(f"  {k:<26}{len(v):>6}{pct(v, 50):>8.0f}{pct(v, 90):>8.0f}"
                        f"{pct(v, 99):>8.0f}{max(v):>8.0f}{failed:>8}")
        else:
            rows.append(f"  {k:<26}{0:>6}{'':>32}{failed:>8}")
    return rows


def submission_report(stats: Stats, prefix: str, load_s: float) -> tuple[list[str], int]:
    """Figures from the rows themselves: graded per second, phases, errors, score checks."""
    from django.db import connections

    from practice.models import Submission

    rows = list(Submission.objects.filter(user__username__startswith=prefix)
                .values("pk", "part_type", "status", "score", "queued_at", "started_at",
                        "finished_at", "deliveries"))
    connections.close_all()
    out: list[str] = []
    by_type = Counter(r["part_type"] for r in rows)
    out.append("submissions: " + ", ".join(f"{n} {t}" for t, n in sorted(by_type.items()))
               + f" ({len(rows)} rows; {sum(stats.refused.values())} refused by the site)")
    for msg, n in stats.refused.most_common(3):
        out.append(f"  refused {n}×: {msg}")
    queued = [r for r in rows if r["part_type"] in QUEUED_KINDS]
    graded = [r for r in queued if r["status"] == Submission.Status.GRADED]
    errors = [r for r in queued if r["status"] == Submission.Status.ERROR]
    if graded:
        first = min(r["queued_at"] for r in queued)
        last = max(r["finished_at"] for r in graded)
        span = (last - first).total_seconds()
        in_load = sum(1 for r in graded if (r["finished_at"] - first).total_seconds() <= load_s)
        waits = [(r["started_at"] - r["queued_at"]).total_seconds() for r in graded]
        runs = [(r["finished_at"] - r["started_at"]).total_seconds() for r in graded]
        out.append(f"worker-graded: {len(graded)} in {span:.0f} s from the first submit to the "
                   f"last verdict = {len(graded) / max(span, 1e-9):.2f}/s "
                   f"({in_load / load_s:.2f}/s during the load)")
        out.append(f"  queue wait p50 {pct(waits, 50):.2f} s, p90 {pct(waits, 90):.2f} s; "
                   f"grading p50 {pct(runs, 50):.2f} s, p90 {pct(runs, 90):.2f} s; "
                   f"redelivered {sum(1 for r in graded if r['deliveries'] > 1)}")
    if stats.verdict_seen_s:
        v = stats.verdict_seen_s
        out.append(f"  submit → verdict seen by the student: p50 {pct(v, 50):.2f} s, "
                   f"p90 {pct(v, 90):.2f} s, p99 {pct(v, 99):.2f} s "
                   f"({len(v)} seen, {stats.polls_cut} polls cut by the end of the run)")
    inline = [r for r in rows if r["part_type"] not in QUEUED_KINDS]
    out.append(f"inline-graded: {len(inline)} in {load_s:.0f} s = {len(inline) / load_s:.2f}/s")
    scores = {r["pk"]: r["score"] for r in rows}
    checked = mismatched = 0
    for pk, case in stats.submitted.items():
        score = scores.get(pk)
        if score is None:
            continue
        checked += 1
        mismatched += abs(score - case.score) > max(case.tolerance, 1e-6)
    out.append(f"scores as the selftest expects: {checked - mismatched} of {checked}"
               + (f" ({mismatched} differ)" if mismatched else ""))
    out.append(f"grading errors (status error): {len(errors)}")
    return out, len(errors)


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
        "--worker-class", "sync", "--timeout", "90", "--graceful-timeout", "5"], env)
    workers = []
    for i in range(args.celery_workers):
        beat = ["-B", "-s", str(tmp / "celerybeat-schedule")] if i == 0 else []
        workers.append(procs.start(f"celery{i}", celery_worker(f"load{i}-{os.getpid()}", *beat),
                                   env))
    wait_for_http(f"http://127.0.0.1:{port}", procs, 90)
    for worker in workers:
        wait_for_log(worker, "ready.", procs, 120)


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

        stats, load_s = asyncio.run(load_phase(args, base, prefix, password, pool))
        lost, waited = drain(prefix, args.drain)
        order = ["login page", "log in (POST)", "catalog", "exercise page",
                 "submit number (inline)", "submit expression (queued)",
                 "submit code (queued)", "status poll"]
        requests = sum(len(v) for v in stats.latency.values()) + stats.failed_requests()
        print(f"\nload: {load_s:.0f} s, {requests} requests = {requests / load_s:.1f}/s "
              f"(logins spread over the first {ramp_seconds(args.duration):.0f} s)")
        print("\n".join(latency_table(stats, order)))
        lines, _ = submission_report(stats, prefix, load_s)
        print("\n".join(lines))
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
