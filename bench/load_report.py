"""bench/load.py's report after the load: the queue drained, latency percentiles per page
kind, submissions graded per second, lost rows and scores checked against the selftest."""
from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from typing import Any

from load_students import QUEUED_KINDS, Stats

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


def timeline(stats: Stats, kind: str, start: float, window_s: float = 5.0) -> list[str]:
    """`kind`'s latency by when each request was sent, in windows of `window_s` from `start`
    (time.monotonic()), beside every request sent in the window: where in the run the slow
    ones fall (the log-in ramp, a worker's start, a burst of grading)."""
    mine: dict[int, list[float]] = defaultdict(list)
    everything: Counter[int] = Counter()
    for k, sent in stats.sent_at.items():
        for at, latency in zip(sent, stats.latency[k], strict=True):
            slot = int((at - start) // window_s)
            everything[slot] += 1
            if k == kind:
                mine[slot].append(latency * 1000)
    rows = [f"  {kind} by when it was sent (ms):"]
    for slot in sorted(everything):
        v = mine.get(slot, [])
        figures = (f"n {len(v):>3}  p50 {pct(v, 50):>6.0f}  p99 {pct(v, 99):>6.0f}" if v
                   else f"n {0:>3}")
        rows.append(f"  {slot * window_s:>5.0f}-{(slot + 1) * window_s:<4.0f}s  {figures}"
                    f"  (all requests sent: {everything[slot]})")
    return rows


def slowest(stats: Stats, kind: str, start: float, settled: float, count: int = 5
            ) -> list[str]:
    """`kind`'s `count` slowest requests sent at `settled` or later: their path, when each was
    sent (seconds from `start`), and how many requests of the same path the run had sent before
    it (0: the first, so no web worker had made that page's evidence yet)."""
    seen: Counter[str] = Counter()
    rows: list[tuple[float, float, str, int]] = []
    for at, latency, path in sorted(zip(stats.sent_at[kind], stats.latency[kind],
                                        stats.paths[kind], strict=True)):
        if at >= settled:
            rows.append((latency * 1000, at - start, path, seen[path]))
        seen[path] += 1
    out = [f"  slowest {kind}s after the logins (ms, sent at, path, earlier requests of it):"]
    out += [f"    {ms:6.0f}  {at:5.1f} s  {path}  {before}"
            for ms, at, path, before in sorted(rows, reverse=True)[:count]]
    return out


def submission_report(stats: Stats, prefix: str, load_s: float) -> tuple[list[str], int]:
    """Figures from the rows themselves: graded per second, phases, errors, score checks; and
    how many rows scored other than the selftest says."""
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
    checked = 0
    differ: list[int] = []
    for pk, case in stats.submitted.items():
        score = scores.get(pk)
        if score is None:
            continue
        checked += 1
        if abs(score - case.score) > max(case.tolerance, 1e-6):
            differ.append(pk)
    out.append(f"scores as the selftest expects: {checked - len(differ)} of {checked}"
               + (f" ({len(differ)} differ)" if differ else ""))
    out.extend(differing_scores(stats, differ))
    out.append(f"grading errors (status error): {len(errors)}")
    return out, len(differ)


def differing_scores(stats: Stats, pks: list[int]) -> list[str]:
    """Each row whose score is not the selftest's: what was answered and what the grade said
    (a right answer marked wrong, or the reverse, is the worst bug the site can have)."""
    from django.db import connections

    from practice.models import Submission

    out = []
    for sub in Submission.objects.filter(pk__in=pks).select_related("exercise"):
        case = stats.submitted[sub.pk]
        result = sub.result or {}
        failed = [c for c in result.get("checks", []) if not c.get("passed")]
        out.append(f"  DIFFERS #{sub.pk} {case.slug}/{case.part_id} ({case.kind}, seed of the "
                   f"row): expected {case.score}, got {sub.score} ({sub.verdict}); answer "
                   f"{case.answer[:80]!r}; {result.get('feedback', '')[:300]}")
        for check in failed[:2]:
            out.append(f"    {check.get('name')}: {str(check.get('message'))[:1500]}")
    connections.close_all()
    return out




def _worker_times(rows: dict[int, dict[str, Any]]) -> list[str]:
    """Where a site grade's time goes, from its row: waiting in the queue, then in a worker
    (claim, grade, record: started_at to finished_at)."""
    done = [r for r in rows.values() if r["started_at"] and r["finished_at"]]
    if not done:
        return []
    waits = [(r["started_at"] - r["queued_at"]).total_seconds() for r in done]
    runs = [(r["finished_at"] - r["started_at"]).total_seconds() * 1000 for r in done]
    return [f"  in a worker (claim, grade, record): p50 {pct(runs, 50):.0f} ms, mean "
            f"{sum(runs) / len(runs):.0f} ms; queue wait p50 {pct(waits, 50):.2f} s"]


def grade_rate_report(stats: Stats, phase_s: float, lost: int, grades: int, grade_s: float,
                      args: Any) -> tuple[list[str], list[str]]:
    """The grade-rate phase's lines, and its problems (lost rows, failed requests, a score
    other than the selftest's)."""
    from django.db import connections

    from practice.models import Submission

    rows = {r["pk"]: r for r in Submission.objects.filter(pk__in=list(stats.submitted))
            .values("pk", "status", "score", "queued_at", "started_at", "finished_at")}
    connections.close_all()
    seen = len(stats.verdict_seen_s)
    wrong = sum(1 for pk, case in stats.submitted.items()
                if rows.get(pk, {}).get("status") == Submission.Status.GRADED
                and abs((rows[pk]["score"] or 0.0) - case.score) > max(case.tolerance, 1e-6))
    errors = sum(1 for r in rows.values() if r["status"] == Submission.Status.ERROR)
    site = seen / phase_s
    alone = grades / grade_s
    out = [f"grade rate, {args.code_clients} students submitting code in a closed loop for "
           f"{phase_s:.0f} s, {args.celery_workers} Celery workers:",
           *latency_table(stats, ["submit code (queued)", "status poll"]),
           f"  graded through the site: {seen} verdicts = {site:.2f}/s (submit → verdict p50 "
           f"{pct(stats.verdict_seen_s, 50):.2f} s)" if seen else "  no verdict seen",
           f"  graded in this process alone, one after another: {grades} in {grade_s:.0f} s "
           f"= {alone:.2f}/s ({grade_s / max(grades, 1) * 1000:.0f} ms a grade)",
           *_worker_times(rows),
           f"  site / in-process = {site / alone:.2f}; lost {lost}; grading errors {errors}; "
           f"scores other than the selftest's {wrong}; refused by the site "
           f"{sum(stats.refused.values())}"]
    problems = []
    if lost:
        problems.append(f"grade phase: {lost} submissions lost")
    if stats.failed_requests():
        problems.append(f"grade phase: {stats.failed_requests()} requests failed")
    if wrong or errors:
        problems.append(f"grade phase: {wrong} wrong scores, {errors} grading errors")
    return out, problems
