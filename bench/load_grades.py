"""bench/load.py's grade-throughput phase: how many code submissions the workers grade per
second when there is always one waiting, beside how many one process grades in a loop.

Closed loop through the site: --code-clients logged-in students (distinct accounts, so the
per-student caps of a real class apply to each), each submitting a code answer the way the page
does and polling its status fragment until the verdict, then the next; no think time. The rate
is the verdicts the clients saw per second of the phase; the rows are then checked (graded,
score as the selftest expects, none left queued). The in-process rate grades the same answers
with graders.grade_answer in this process, one after another, on the same sandbox backend, each
with a fresh seed as each submission has (so its hidden cases are drawn and the reference is run
on them every time): the work of a grade without the site, the broker, the worker or the
polling, on one core at a time.
Imported by bench/load.py (run as a script, so this folder is on sys.path)."""
from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections.abc import Callable

import httpx
from load_students import Case, Stats, log_in, submit


async def code_phase(args: argparse.Namespace, base: str, prefix: str, password: str,
                     cases: list[Case], started: Callable[[], None] = lambda: None
                     ) -> tuple[Stats, float]:
    """Verdicts of code submissions in a closed loop for --code-seconds. Returns the stats
    (submitted rows, time to each verdict) and the phase's length, which starts once every
    client has logged in (`started` is called then)."""
    stats = Stats()
    clients = [httpx.AsyncClient(base_url=base, timeout=60) for _ in range(args.code_clients)]
    try:
        users = [f"{prefix}{i % args.students:02d}" for i in range(len(clients))]
        logged = await asyncio.gather(*(log_in(c, stats, u, password)
                                        for c, u in zip(clients, users, strict=True)))
        if not all(logged):
            raise RuntimeError("grade phase: a client could not log in")
        started()
        start = time.monotonic()
        stop_at = start + args.code_seconds
        turn = itertools.count()

        async def loop(client: httpx.AsyncClient) -> None:
            while time.monotonic() < stop_at:
                await submit(client, stats, cases[next(turn) % len(cases)], stop_at)

        await asyncio.gather(*(loop(c) for c in clients))
        return stats, time.monotonic() - start
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))


def in_process_rate(cases: list[Case], seconds: float) -> tuple[int, float]:
    """(grades, seconds) of graders.grade_answer over `cases` in turn, in this process, for
    about `seconds`; each grade's score is checked against its case. The heap is settled as a
    grading child's is (practice.heap.settle_grading_heap), and put back after."""
    import gc

    import graders
    from exercises import registry
    from practice.heap import settle_grading_heap

    seeds = itertools.count(1)

    def grade(case: Case) -> None:
        spec = registry.get(case.slug)
        params = registry.params_for(spec, registry.CANONICAL_VARIANT)
        # A seed of its own each time, as each submission has (practice.variants.hidden_seed):
        # the hidden cases are drawn and the reference run on them for every grade.
        result = graders.grade_answer(spec, case.part_id, case.answer, params,
                                      seed=next(seeds))
        if abs(result.score - case.score) > max(case.tolerance, 1e-6):
            raise RuntimeError(f"in-process grade of {case.slug}/{case.part_id} scored "
                               f"{result.score}, the selftest says {case.score}")

    for case in cases:  # each exercise's first grade loads its modules: not counted
        grade(case)
    threshold = gc.get_threshold()
    settle_grading_heap()
    try:
        done = 0
        start = time.monotonic()
        for case in itertools.cycle(cases):
            grade(case)
            done += 1
            if time.monotonic() - start >= seconds:
                break
        return done, time.monotonic() - start
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
