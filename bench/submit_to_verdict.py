"""Submit → verdict for the Q41 code part, through a real worker, against the bare grade.

    .venv/bin/python bench/submit_to_verdict.py [--n 10] [--brokers redis,embedded]

Uses its own SQLite database and broker folder under a temporary directory. For each broker it
starts one real Celery worker, submits the reference solution N times one after another, and
takes the median time from `submit_answer` returning to the row being graded. The baseline is the
same grade run in this process (`graders.grade_answer`: sandbox + checks, no queue), measured in
the same run; the figures printed are medians and their ratio to that baseline.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
TMP = Path(tempfile.mkdtemp(prefix="roofline-bench-"))
os.environ["DJANGO_SETTINGS_MODULE"] = "practice.settings.dev"
os.environ["ROOFLINE_VAR_DIR"] = str(TMP)
os.environ["DATABASE_URL"] = f"sqlite:///{TMP / 'bench.sqlite3'}"
os.environ.pop("REDIS_URL", None)

import django  # noqa: E402

django.setup()

from conftest import Worker, redis_test_url, reset_producers  # noqa: E402
from django.core.management import call_command  # noqa: E402

import graders  # noqa: E402
from exercises import registry  # noqa: E402
from practice.actions.submissions import submit_answer  # noqa: E402
from practice.celery import app  # noqa: E402
from practice.models import Exercise, Submission, User  # noqa: E402
from practice.variants import hidden_seed  # noqa: E402

SLUG = "stop_strings_stream"


def bare(n: int, source: str, part_id: str) -> list[float]:
    spec = registry.get(SLUG)
    params = registry.params_for(spec, "canonical")
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = graders.grade_answer(spec, part_id, source, params, seed=hidden_seed(spec.uuid, "1"))
        times.append(time.perf_counter() - t0)
        assert r.score == 1.0, r.feedback
    return times


def through_worker(broker: str, n: int, source: str, part_id: str) -> list[float]:
    if broker == "redis":
        url = redis_test_url()
        if url is None:
            print("redis: not reachable, skipped")
            return []
        import redis

        redis.Redis.from_url(url).flushdb()
        app.conf.update(broker_url=url, broker_transport_options={"visibility_timeout": 300})
        env_broker = url
    else:
        q, c = TMP / "broker" / "queue", TMP / "broker" / "control"
        q.mkdir(parents=True, exist_ok=True)
        c.mkdir(parents=True, exist_ok=True)
        app.conf.update(broker_url="filesystem://", broker_transport_options={
            "data_folder_in": str(q), "data_folder_out": str(q), "control_folder": str(c),
            "polling_interval": 0.1})
        env_broker = "embedded"
    reset_producers(app)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env |= {"DJANGO_SETTINGS_MODULE": "practice.settings.dev", "PYTHONPATH": str(ROOT)}
    if env_broker != "embedded":
        env["REDIS_URL"] = env_broker
    worker = Worker(env, TMP / f"worker-{broker}.log")
    worker.wait_ready()
    user, _ = User.objects.get_or_create(username=f"bench-{broker}")
    ex = Exercise.objects.get(slug=SLUG)
    times = []
    try:
        for _ in range(n + 1):  # the first warms the worker's child up and is dropped
            t0 = time.perf_counter()
            sub = submit_answer(user, ex, part_id, source)
            while not Submission.objects.get(pk=sub.pk).finished:
                time.sleep(0.01)
            times.append(time.perf_counter() - t0)
            assert Submission.objects.get(pk=sub.pk).score == 1.0
    finally:
        worker.stop()
    return times[1:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--brokers", default="redis,embedded")
    args = ap.parse_args()
    call_command("migrate", verbosity=0)
    spec = registry.get(SLUG)
    part = next(p for p in spec.parts if p.type == "code")
    source = (spec.code_dir / "reference.py").read_text()
    base = statistics.median(bare(args.n, source, part.id))
    print(f"bare grade (sandbox + checks, in process): median {base * 1000:.0f} ms")
    for broker in args.brokers.split(","):
        t = through_worker(broker, args.n, source, part.id)
        if t:
            m = statistics.median(t)
            print(f"{broker:>8}: submit → verdict median {m * 1000:.0f} ms over {len(t)} "
                  f"(min {min(t) * 1000:.0f}, max {max(t) * 1000:.0f}); "
                  f"ratio to bare {m / base:.2f}×")


if __name__ == "__main__":
    main()
