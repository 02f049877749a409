"""bench/load.py's simulated students: the answers they submit (the exercises' canonical
selftest cases) and the users they log in as, what each asks of the site and how it is timed
(httpx, a cookie jar each, the page's own htmx headers), and the closed-loop ratio phase.
Imported by bench/load.py (run as a script, so this folder is on sys.path)."""
from __future__ import annotations

import argparse
import asyncio
import random
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

QUEUED_KINDS = ("expression", "code")
# The status fragment's own delay before it asks for itself again ("load delay:400ms"): the
# client waits as long as the page would.
POLL_DELAY = re.compile(r'hx-trigger="load delay:(\d+(?:\.\d+)?)(ms|s)"')
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
SUBMISSION_ID = re.compile(r'id="sub-(\d+)"')
REFUSAL = re.compile(r'class="error" role="alert">(.*?)</p>', re.S)




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
    # when each timed request was sent (time.monotonic()), beside its latency
    sent_at: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    # and its path, to name the slow ones
    paths: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    failures: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    refused: Counter[str] = field(default_factory=Counter)
    submitted: dict[int, Case] = field(default_factory=dict)
    verdict_seen_s: list[float] = field(default_factory=list)
    polls_cut: int = 0  # polls the end of the run stopped before the verdict came

    async def call(self, client: httpx.AsyncClient, kind: str, method: str, url: str,
                   ok: tuple[int, ...] = (200,), **kw: Any) -> httpx.Response | None:
        t0 = time.perf_counter()
        sent = time.monotonic()
        try:
            r = await client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            self.failures[kind][type(exc).__name__] += 1
            return None
        self.latency[kind].append(time.perf_counter() - t0)
        self.sent_at[kind].append(sent)
        self.paths[kind].append(url)
        if r.status_code not in ok:
            self.failures[kind][f"HTTP {r.status_code}"] += 1
            return None
        return r

    def since(self, moment: float) -> Stats:
        """The latencies of the requests sent at `moment` or later (failures not kept)."""
        out = Stats()
        for kind, values in self.latency.items():
            for sent, value, path in zip(self.sent_at[kind], values, self.paths[kind],
                                         strict=True):
                if sent >= moment:
                    out.latency[kind].append(value)
                    out.sent_at[kind].append(sent)
                    out.paths[kind].append(path)
        return out

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
        await asyncio.sleep(poll_delay(r.text))
        s = await stats.call(client, "status poll", "GET", f"/submissions/{sub_id}/status/",
                             headers=htmx_headers(client))
        # A finished submission redraws its whole part in place of the polling fragment.
        if s is not None and ("HX-Retarget" in s.headers
                              or f'hx-get="/submissions/{sub_id}/status/"' not in s.text):
            stats.verdict_seen_s.append(time.monotonic() - t0)
            return
        if s is not None:
            r = s


def poll_delay(fragment: str) -> float:
    """Seconds the status fragment waits before it asks for itself again (its hx-trigger);
    1 s for a response that names none (an error page)."""
    m = POLL_DELAY.search(fragment)
    if m is None:
        return 1.0
    return float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)


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
                # A think cut short by the end of the run wakes every such student at once:
                # their next requests would be a burst of the bench's own making.
                if time.monotonic() >= stop_at:
                    break
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

        # Warm-up, not counted: every exercise page a few times per web worker, so each
        # worker has rendered each variant once (practice/rendered.py keeps it, as a
        # long-running server would have), then a second of each view.
        urls = [f"/ex/{slug}/" for slug in slugs] * (2 * args.web_workers)

        async def warm(client: httpx.AsyncClient) -> None:
            while urls:
                await stats.call(client, "warm-up", "GET", urls.pop())

        await asyncio.gather(*(warm(c) for c in clients))
        for which in ("exercise", "trivial"):
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


