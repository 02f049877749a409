"""In Chromium: static/charts.js draws every evidence file of every exercise (series and trace)
and the history page's progress by topic, with no console error and no request leaving the
test server."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from exercises import registry
from graders.selftest import answer_text
from practice.actions.exercises import assignment_for
from practice.actions.submissions import submit_answer
from practice.models import Assignment, Exercise, User

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

# Every chart canvas in one evidence box: its datasets' labels and point counts.
CHARTS_IN = """(el) => [...el.querySelectorAll('canvas')].map((c) => {
  const chart = Chart.getChart(c);
  if (!chart) return null;
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let inked = 0;
  for (let i = 3; i < px.length; i += 4) if (px[i]) inked++;
  const sum = (d) => d.data.every((v) => typeof v === 'number')
    ? d.data.reduce((a, b) => a + b, 0) : null;
  return {type: chart.config.type, inked, width: c.width, dist: c.dataset.distribution || null,
          datasets: chart.data.datasets.map((d) => ({label: d.label, n: d.data.length,
                                                     sum: sum(d)}))};
})"""


@pytest.fixture
def plotter(page: Any, live_server: Any) -> Iterator[dict[str, Any]]:
    """A logged-in student (session cookie handed to the browser) and the page's complaints."""
    user = User.objects.create_user("plotter", password="pw-plotter-123")
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: problems.append("outside: " + r.url)
            if not r.url.startswith(live_server.url) and not r.url.startswith("data:") else None)
    page.on("response", lambda r: problems.append(f"{r.status} {r.url}")
            if r.status >= 400 else None)
    yield {"user": user, "problems": problems}
    assert problems == []


def _evidence_exercises() -> list[str]:
    return sorted(slug for slug, spec in registry.load_all().items()
                  if registry.evidence(spec, registry.params_for(spec, registry.CANONICAL_VARIANT)))


def _wait_drawn(page: Any) -> None:
    page.wait_for_function("""() => [...document.querySelectorAll('[data-evidence-plot]')]
        .every((el) => ['ok', 'error'].includes(el.dataset.drawn))""", timeout=20_000)


def test_every_evidence_file_is_drawn(page: Any, live_server: Any,
                                      plotter: dict[str, Any]) -> None:
    slugs = _evidence_exercises()
    assert "batch1_gap_trace" in slugs and "stream_stutter" in slugs
    stutter = registry.get("stream_stutter")
    canonical = registry.params_for(stutter, registry.CANONICAL_VARIANT)
    assert registry.evidence(stutter, canonical)["itl"].data["histogram"] == ["ms"]
    max_points = None
    for slug in slugs:
        spec = registry.get(slug)
        page.goto(f"{live_server.url}/ex/{slug}/")
        _wait_drawn(page)
        max_points = max_points or page.evaluate("RooflineCharts.MAX_POINTS")
        variant = Assignment.objects.get(user=plotter["user"], exercise__slug=slug).variant
        found = registry.evidence(spec, registry.params_for(spec, variant))
        for name, ev in found.items():
            box = page.locator(f'[data-evidence-plot="{name}"]')
            assert box.get_attribute("data-drawn") == "ok", (slug, name)
            charts = box.evaluate(CHARTS_IN)
            assert charts and all(c and c["width"] > 0 and c["inked"] > 0 for c in charts), \
                (slug, name)
            if ev.kind == "series":
                # One chart per y unit; every series drawn, thinned to MAX_POINTS at most.
                lines = [c for c in charts if not c["dist"]]
                assert len(lines) == len({s.get("unit", "") for s in ev.data["series"]})
                drawn = {d["label"]: d["n"] for c in lines for d in c["datasets"]}
                assert drawn == {s["label"]: min(len(s["points"]), max_points)
                                 for s in ev.data["series"]}, (slug, name)
                # A histogram per unit the evidence asks for, counting every point (none
                # thinned).
                dists = {c["dist"]: c for c in charts if c["dist"]}
                assert sorted(dists) == sorted(ev.data.get("histogram", [])), (slug, name)
                for unit, chart in dists.items():
                    counted = {d["label"]: d["sum"] for d in chart["datasets"]}
                    assert counted == {s["label"]: len(s["points"]) for s in ev.data["series"]
                                       if s.get("unit", "") == unit}, (slug, name, unit)
            else:
                # The timeline holds every complete event; the busy-share chart is not empty.
                timeline, *busy = charts
                assert timeline["type"] == "bar"
                complete = [e for e in ev.data["traceEvents"] if e.get("ph") == "X"]
                assert sum(d["n"] for d in timeline["datasets"]) == len(complete)
                assert busy and all(d["n"] > 0 for c in busy for d in c["datasets"])


def test_trace_zooms_to_one_step(page: Any, live_server: Any, plotter: dict[str, Any]) -> None:
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the plot must stay usable
    page.goto(f"{live_server.url}/ex/batch1_gap_trace/")
    _wait_drawn(page)
    box = page.locator('[data-evidence-plot="trace"]')
    plot, canvas = box.evaluate("""(el) => { const c = Chart.getChart(el.querySelector('canvas'));
        return [c.chartArea.width, c.width]; }""")
    assert plot > 0.5 * canvas  # row labels do not eat the timeline
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    steps = box.locator("button")
    assert steps.count() >= 3  # "whole capture" and one per decode step
    whole = box.evaluate("(el) => Chart.getChart(el.querySelector('canvas')).scales.x.max")
    steps.nth(2).click()
    lo, hi = box.evaluate("""(el) => { const s = Chart.getChart(el.querySelector('canvas'))
        .scales.x; return [s.min, s.max]; }""")
    assert 0 < lo < hi < whole and steps.nth(2).get_attribute("aria-pressed") == "true"
    assert "ui.perfetto.dev" in page.locator(".evidence").inner_text()


def test_latency_histogram_bins_every_request(page: Any, live_server: Any,
                                              plotter: dict[str, Any]) -> None:
    slug = "stream_stutter"
    page.goto(f"{live_server.url}/ex/{slug}/")
    _wait_drawn(page)
    spec = registry.get(slug)
    variant = Assignment.objects.get(user=plotter["user"], exercise__slug=slug).variant
    ev = registry.evidence(spec, registry.params_for(spec, variant))["itl"]
    drawn = page.locator('[data-evidence-plot="itl"] canvas[data-distribution="ms"]').evaluate(
        "(c) => Chart.getChart(c).data.datasets.map((d) => [d.label, d.data])")
    ys = [y for s in ev.data["series"] for _, y in s["points"]]
    lo, hi = min(ys), max(ys)
    assert hi > lo
    for series, (label, counts) in zip(ev.data["series"], drawn, strict=True):
        # Twenty equal bins from the lowest to the highest gap; the highest value falls in the
        # last bin.
        want = [0] * 20
        for _, y in series["points"]:
            want[min(19, int((y - lo) / ((hi - lo) / 20)))] += 1
        assert (label, counts) == (series["label"], want)
    # Two peaks, the plain and the mixed step, with empty bins between them.
    counts = drawn[0][1]
    assert counts[0] > 0 and counts[-1] > 0 and 0 in counts


def test_decimation_keeps_the_ends_and_the_count(page: Any, live_server: Any,
                                                 plotter: dict[str, Any]) -> None:
    page.goto(f"{live_server.url}/ex/batch1_gap_trace/")
    out = page.evaluate("""() => {
        const pts = Array.from({length: 5000}, (_, i) => [i, i % 97 === 0 ? 100 : Math.sin(i)]);
        const d = RooflineCharts.decimate(pts, 500);
        return {n: d.length, first: d[0][0], last: d[d.length - 1][0],
                spikes: d.filter((p) => p[1] === 100).length,
                small: RooflineCharts.decimate(pts.slice(0, 10), 500).length};
    }""")
    # 52 spikes in 5,000 points: thinning by 10 keeps each (a stride would keep a few).
    assert out == {"n": 500, "first": 0, "last": 4999, "spikes": 52, "small": 10}


def test_history_draws_progress_by_topic(page: Any, live_server: Any,
                                         plotter: dict[str, Any]) -> None:
    user = plotter["user"]
    spec = registry.get("kv_transfer_disagg")
    ex = Exercise.objects.get(slug=spec.slug)
    part = next(p for p in spec.parts if p.type == "number")
    solution = registry.solve(spec, registry.params_for(
        spec, assignment_for(user, ex).variant))
    submit_answer(user, ex, part.id, answer_text(part, solution[part.id]))

    page.goto(f"{live_server.url}/history/")
    page.locator("canvas[data-progress-chart][data-drawn=ok]").wait_for(timeout=10_000)
    data = page.evaluate("""() => { const c = Chart.getChart(document.getElementById(
        'progress-chart')); return {labels: c.data.labels,
        sets: Object.fromEntries(c.data.datasets.map((d) => [d.label, d.data]))}; }""")
    totals: dict[str, int] = {}
    for s in registry.load_all().values():
        totals[s.topic] = totals.get(s.topic, 0) + len(s.parts)
    assert data["labels"] == sorted(totals)
    solved = dict(zip(data["labels"], data["sets"]["solved"], strict=True))
    assert solved == {t: int(t == spec.topic) for t in totals}
    for i, topic in enumerate(data["labels"]):
        assert sum(d[i] for d in data["sets"].values()) == totals[topic]
    assert page.locator("#progress-chart").is_visible()


def _timed_kernel_result() -> dict[str, Any]:
    """What a GPU worker stores for a kernel part (gpu_sandbox/timed_case.py's shape)."""
    case = {"id": "b32k", "describe": "32K context", "status": "scored", "reasons": [],
            "ref_ms": 0.051, "sub_ms": 0.064, "ratio": 0.051 / 0.064, "floor_ms": 0.040,
            "roofline_fraction": 0.040 / 0.064, "bytes": 134_217_728, "flops": 33_554_432,
            "bandwidth_gbs": 3350.0, "peak_tflops": 989.0}
    return {"score": 1.0, "verdict": "correct", "feedback": "All checks passed.", "checks": [],
            "extra": {"device": "NVIDIA H100 80GB HBM3",
                      "timing": {"status": "scored", "geomean_ratio": case["ratio"],
                                 "cases": [case]}}}


def test_kernel_timing_is_drawn_on_a_roofline(page: Any, live_server: Any,
                                              plotter: dict[str, Any]) -> None:
    from django.utils import timezone

    from practice.models import Submission

    user = plotter["user"]
    slug = next(s for s, spec in sorted(registry.load_all().items())
                if any(p.type == "kernel" for p in spec.parts))
    spec = registry.get(slug)
    ex = Exercise.objects.get(slug=slug)
    part = next(p for p in spec.parts if p.type == "kernel")
    Submission.objects.create(
        user=user, exercise=ex, part_id=part.id, part_type="kernel",
        variant=assignment_for(user, ex).variant, answer="# kernel", status="graded",
        score=1.0, verdict="correct", result=_timed_kernel_result(), started_at=timezone.now(),
        finished_at=timezone.now())
    page.goto(f"{live_server.url}/ex/{slug}/")
    canvas = page.locator("canvas[data-roofline-chart][data-drawn=ok]")
    canvas.wait_for(timeout=10_000)
    chart = canvas.evaluate("""(c) => { const ch = Chart.getChart(c); return {
        x: ch.options.scales.x.type, sets: ch.data.datasets.map((d) => [d.label, d.data.length])};}""")
    assert chart["x"] == "logarithmic"
    assert [name for name, _ in chart["sets"][1:]] == ["reference", "yours"]
    assert all(n == 1 for _, n in chart["sets"][1:])
    assert "3350 GB/s" in chart["sets"][0][0]
    assert page.locator(".roofline-plot table").inner_text().count("32K context") == 1
