/* Roofline charts: evidence plots on the exercise page, progress by topic on the history page,
 * daily activity on "My progress".
 * Plain ES2020, no build step. Load with `defer` after chart.umd.min.js (the pages that chart load both).
 *
 * Markup it looks for (both idempotent: a drawn element gets data-drawn="ok" or "error"):
 *   <div data-evidence-plot="NAME" data-src="/ex/SLUG/evidence/NAME/" data-kind="series|trace"
 *        data-title="…"></div>      -> fetches the JSON (same origin) and draws it inside the div
 *   <canvas data-progress-chart="ID">  -> draws the rows of the json_script element #ID
 *   <canvas data-activity-chart="ID">  -> draws the days of the json_script element #ID
 *
 * Reusable entry points on window.RooflineCharts (e.g. a later roofline plot is a series spec
 * with xType/yType "logarithmic"):
 *   drawSeries(container, spec, opts) -> Chart[]   spec = {x: {label, unit}, series: [{label,
 *                                                  unit, points: [[x, y], …]}]}
 *   drawDistribution(container, spec, unit, opts) -> Chart   a histogram of the y values of the
 *                                                  spec's series in `unit` (20 equal bins from the
 *                                                  lowest to the highest value); evidence asks for
 *                                                  it with spec.histogram = [unit]
 *   drawTrace(container, trace, opts) -> Chart[]   Chrome trace-event JSON {traceEvents: […]}
 *   drawProgress(canvas, rows)        -> Chart     rows = [{topic, parts, solved, tried}]
 *   drawHistogram(canvas, data)       -> Chart     data = {labels, counts, tried, title}
 *                                      (<canvas data-histogram-chart="ID">, instructors' statistics)
 *   drawActivity(canvas, data)        -> Chart     data = [{day, answers, reviews}], oldest first
 *                                      (<canvas data-activity-chart="ID">, "My progress")
 *
 * Text and grid colours are left to Chart.defaults, which static/theme.js sets from the theme
 * (and re-applies on a theme switch); only dataset colours are chosen here.
 */
(() => {
  "use strict";

  // Per series. A line of more points than this is thinned with LTTB before drawing: a chart
  // is a few hundred pixels wide, so more points cost drawing time and show nothing more.
  const MAX_POINTS = 1000;
  // Okabe–Ito colours (readable by colour-blind readers), minus black and yellow, which vanish
  // on one of the two themes.
  const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7",
    "#8c6d31", "#7f7f7f"];
  const SERIES_HEIGHT = 240; // px per chart: room for a legend of two long labels and the axes

  function colour(i, alpha) {
    const hex = PALETTE[i % PALETTE.length];
    if (alpha === undefined) return hex;
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${n >> 16}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
  }

  function withUnit(label, unit) {
    return unit ? `${label} (${unit})` : label;
  }

  function fmt(v) {
    if (typeof v !== "number") return String(v);
    return Number.isInteger(v) ? v.toLocaleString("en") : v.toLocaleString("en", {
      maximumSignificantDigits: 5 });
  }

  // Largest-Triangle-Three-Buckets (Steinarsson 2013): keeps `threshold` points, first and
  // last included, choosing in each bucket the point that best preserves the line's shape, so
  // spikes survive (a plain stride would drop them). Returns exactly min(n, threshold) points.
  function decimate(points, threshold = MAX_POINTS) {
    const n = points.length;
    if (threshold >= n || threshold < 3) return points.slice();
    const out = [points[0]];
    const every = (n - 2) / (threshold - 2);
    let a = 0;
    for (let i = 0; i < threshold - 2; i++) {
      const avgStart = Math.floor((i + 1) * every) + 1;
      const avgEnd = Math.min(Math.floor((i + 2) * every) + 1, n);
      let avgX = 0;
      let avgY = 0;
      for (let j = avgStart; j < avgEnd; j++) {
        avgX += points[j][0];
        avgY += points[j][1];
      }
      const len = Math.max(avgEnd - avgStart, 1);
      avgX /= len;
      avgY /= len;
      const from = Math.floor(i * every) + 1;
      const to = Math.floor((i + 1) * every) + 1;
      let best = from;
      let bestArea = -1;
      const [ax, ay] = points[a];
      for (let j = from; j < to; j++) {
        const area = Math.abs((ax - avgX) * (points[j][1] - ay) - (ax - points[j][0]) * (avgY - ay));
        if (area > bestArea) {
          bestArea = area;
          best = j;
        }
      }
      out.push(points[best]);
      a = best;
    }
    out.push(points[n - 1]);
    return out;
  }

  // A responsive Chart.js canvas needs a sized, relatively positioned parent of its own.
  function addCanvas(container, height, ariaLabel) {
    const box = document.createElement("div");
    box.className = "chart-box";
    box.style.position = "relative";
    box.style.height = `${height}px`;
    box.style.marginBottom = "0.75rem";
    const canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", ariaLabel);
    box.appendChild(canvas);
    container.appendChild(box);
    return canvas;
  }

  // --- series: one chart per y unit, all sharing the x range so they line up -------------

  function drawSeries(container, spec, opts = {}) {
    const maxPoints = opts.maxPoints || MAX_POINTS;
    const x = spec.x || { label: "x", unit: "" };
    const xTitle = withUnit(x.label, x.unit);
    const groups = new Map(); // unit -> series, in order of first appearance
    let xmin = Infinity;
    let xmax = -Infinity;
    for (const s of spec.series || []) {
      const unit = s.unit || "";
      if (!groups.has(unit)) groups.set(unit, []);
      groups.get(unit).push(s);
      for (const p of s.points) {
        if (p[0] < xmin) xmin = p[0];
        if (p[0] > xmax) xmax = p[0];
      }
    }
    const charts = [];
    for (const [unit, series] of groups) {
      // A lone series is named by the chart's title, several by the legend; the y axis
      // carries the unit only (long labels do not fit along it).
      const single = series.length === 1;
      const label = `${opts.title ? opts.title + ": " : ""}${series.map((s) => s.label)
        .join("; ")}${unit ? ` in ${unit}` : ""}, against ${xTitle}`;
      const canvas = addCanvas(container, opts.height || SERIES_HEIGHT, label);
      const datasets = series.map((s, i) => {
        const pts = decimate(s.points, maxPoints);
        return {
          label: s.label,
          unit,
          data: pts.map(([px, py]) => ({ x: px, y: py })),
          borderColor: colour(i),
          backgroundColor: colour(i, 0.5),
          borderWidth: 1.5,
          // A handful of points (one per request) reads better with markers than as a line.
          pointRadius: pts.length <= 60 ? 3 : 0,
          pointHoverRadius: 4,
          pointHitRadius: 6,
          tension: 0,
        };
      });
      charts.push(new Chart(canvas, {
        type: "line",
        data: { datasets },
        options: {
          animation: false,
          parsing: false, // data are {x, y} already: skip Chart.js's parse pass
          responsive: true,
          maintainAspectRatio: false,
          interaction: { mode: "nearest", axis: "x", intersect: false },
          scales: {
            x: {
              type: opts.xType || "linear",
              // Suggested, not fixed: every chart of the spec gets the same round range, so
              // they line up one above the other and end on a round tick.
              suggestedMin: Number.isFinite(xmin) ? xmin : undefined,
              suggestedMax: Number.isFinite(xmax) ? xmax : undefined,
              title: { display: true, text: xTitle },
            },
            y: { type: opts.yType || "linear", title: { display: Boolean(unit), text: unit } },
          },
          plugins: {
            title: { display: single, text: series[0].label, font: { weight: "normal" } },
            legend: { display: !single, labels: { boxWidth: 12 } },
            tooltip: {
              callbacks: {
                title: (items) => items.length
                  ? `${x.label} ${fmt(items[0].parsed.x)}${x.unit ? " " + x.unit : ""}` : "",
                label: (item) => `${item.dataset.label}: ${fmt(item.parsed.y)}${unit ? " " + unit : ""}`,
              },
            },
          },
        },
      }));
    }
    return charts;
  }

  // --- distribution: how a latency series is spread (spec.histogram lists the y units) ----

  const DISTRIBUTION_BINS = 20;

  function drawDistribution(container, spec, unit, opts = {}) {
    const series = (spec.series || []).filter((s) => (s.unit || "") === unit && s.points.length);
    if (!series.length) return null;
    const values = series.map((s) => s.points.map((p) => p[1]).sort((a, b) => a - b));
    const lo = Math.min(...values.map((v) => v[0]));
    const hi = Math.max(...values.map((v) => v[v.length - 1]));
    const bins = hi > lo ? DISTRIBUTION_BINS : 1;
    const width = bins > 1 ? (hi - lo) / bins : 1;
    // The axis names each bin by its middle, to three figures; the tooltip gives its edges.
    const short = (v) => v.toLocaleString("en", { maximumSignificantDigits: 3 });
    const labels = Array.from({ length: bins }, (_, i) => short(bins > 1
      ? lo + (i + 0.5) * width : lo));
    const edges = (i) => (bins > 1 ? `${fmt(lo + i * width)}–${fmt(lo + (i + 1) * width)} ${unit}`
      : `${fmt(lo)} ${unit}`);
    const datasets = series.map((s, i) => {
      const counts = new Array(bins).fill(0);
      for (const y of values[i]) counts[Math.min(bins - 1, Math.floor((y - lo) / width))] += 1;
      return { label: s.label, data: counts, backgroundColor: colour(i, 0.7),
        borderWidth: 0, barPercentage: 1, categoryPercentage: 0.9 };
    });
    // No percentiles are quoted: some exercises ask for one, and reading it is the student's job.
    const what = `${opts.title ? opts.title + ": " : ""}how ${series.map((s) => s.label).join("; ")} `
      + `is spread, in ${unit}, ${bins} bins from ${fmt(lo)} to ${fmt(hi)}`;
    const canvas = addCanvas(container, opts.height || SERIES_HEIGHT, what);
    canvas.dataset.distribution = unit;
    return new Chart(canvas, {
      type: "bar",
      data: { labels, datasets },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { title: { display: true, text: unit } },
          y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "count" } },
        },
        plugins: {
          title: { display: true, text: `Distribution (${unit})`, font: { weight: "normal" } },
          legend: { labels: { boxWidth: 12 } },
          tooltip: { callbacks: { title: (items) => (items.length ? edges(items[0].dataIndex) : "") } },
        },
      },
    });
  }

  // --- trace: a timeline of complete ("X") events, one row per thread and nesting depth ----

  function traceRows(trace) {
    const all = Array.isArray(trace) ? trace : trace.traceEvents || [];
    const procName = new Map();
    const threadName = new Map();
    for (const e of all) {
      if (e.ph !== "M" || !e.args) continue;
      if (e.name === "process_name") procName.set(String(e.pid), e.args.name);
      if (e.name === "thread_name") threadName.set(`${e.pid}:${e.tid}`, e.args.name);
    }
    const events = all.filter((e) => e.ph === "X" && typeof e.ts === "number"
      && typeof e.dur === "number");
    const t0 = events.reduce((m, e) => Math.min(m, e.ts), Infinity);
    const tracks = new Map();
    for (const e of events) {
      const key = `${e.pid}:${e.tid}`;
      if (!tracks.has(key)) tracks.set(key, []);
      tracks.get(key).push(e);
    }
    const rows = []; // {label, key, depth, events}
    const keys = [...tracks.keys()].sort((a, b) => {
      const [pa, ta] = a.split(":").map(Number);
      const [pb, tb] = b.split(":").map(Number);
      return pa - pb || ta - tb;
    });
    for (const key of keys) {
      const list = tracks.get(key).sort((a, b) => a.ts - b.ts || b.dur - a.dur);
      const pid = key.split(":")[0];
      const proc = procName.get(pid) || `pid ${pid}`;
      const thread = threadName.get(key) || `tid ${key.split(":")[1]}`;
      // Nesting depth from a stack of open spans' end times (parents sort before children).
      const stack = [];
      const byDepth = [];
      for (const e of list) {
        while (stack.length && stack[stack.length - 1] <= e.ts + 1e-6) stack.pop();
        const depth = stack.length;
        stack.push(e.ts + e.dur);
        (byDepth[depth] = byDepth[depth] || []).push(e);
      }
      byDepth.forEach((evs, depth) => {
        // The nested rows sit right under their thread's row, so a short tick label will do.
        const label = `${proc}: ${thread}${depth ? ` (nested ${depth})` : ""}`;
        const lines = depth ? [`\u21b3 nested ${depth}`] : [proc, thread];
        rows.push({ label, lines, key, depth, events: evs, nests: byDepth.length > 1 });
      });
    }
    return { rows, t0: Number.isFinite(t0) ? t0 : 0, count: events.length };
  }

  function niceStep(raw) {
    const pow = 10 ** Math.floor(Math.log10(raw));
    for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
    return 10 * pow;
  }

  // Busy share of each time bin for a track whose spans never nest (a GPU stream): the
  // idle stretches between kernels, too thin to see one by one on the timeline, add up here.
  function busySeries(row, t0, span) {
    const binUs = niceStep(Math.max(span / 400, 1));
    const nbins = Math.max(1, Math.ceil(span / binUs));
    const busy = new Float64Array(nbins);
    for (const e of row.events) {
      let s = e.ts - t0;
      const end = s + e.dur;
      while (s < end) {
        const b = Math.min(Math.floor(s / binUs), nbins - 1);
        const edge = Math.min(end, (b + 1) * binUs);
        busy[b] += Math.max(edge - s, 0);
        if (edge <= s) break; // last bin: nothing further to split
        s = edge;
      }
    }
    const points = Array.from(busy, (v, b) => [
      +(((b + 0.5) * binUs) / 1000).toFixed(6), +Math.min(100, (100 * v) / binUs).toFixed(2)]);
    return { label: `${row.label}: busy share of each ${fmt(binUs)} µs`, unit: "%", points };
  }

  function drawTrace(container, trace, opts = {}) {
    const { rows, t0, count } = traceRows(trace);
    if (!count) throw new Error("no complete (ph \"X\") events in this trace");
    const spanUs = Math.max(...rows.flatMap((r) => r.events.map((e) => e.ts + e.dur))) - t0;
    const spanMs = spanUs / 1000;
    const labels = rows.map((r) => r.label);
    const cats = new Map(); // category -> dataset
    rows.forEach((row) => {
      for (const e of row.events) {
        const cat = e.cat || "event";
        if (!cats.has(cat)) {
          const i = cats.size;
          cats.set(cat, {
            label: cat, data: [], borderWidth: 0, backgroundColor: colour(i, 0.85),
            hoverBackgroundColor: colour(i), minBarLength: 1, // a 2 µs kernel still shows
            barPercentage: 0.8, categoryPercentage: 1, grouped: false,
          });
        }
        cats.get(cat).data.push({
          x: [(e.ts - t0) / 1000, (e.ts - t0 + e.dur) / 1000], y: row.label,
          name: e.name, start: e.ts - t0, dur: e.dur,
        });
      }
    });

    // Zoom buttons for the spans that cut the capture into steps: the outer spans of the
    // nesting thread that has a few of them (a decode loop's decode_step#k).
    const steppy = rows.filter((r) => r.depth === 0 && r.nests && r.events.length >= 2
      && r.events.length <= 24);
    const steps = steppy.length ? steppy[0].events : [];
    const charts = [];
    if (steps.length) {
      // Not role="group": Pico styles that as one joined, full-width button bar.
      const bar = document.createElement("div");
      bar.className = "trace-zoom";
      bar.style.display = "flex";
      bar.style.flexWrap = "wrap";
      bar.style.alignItems = "baseline";
      bar.style.gap = "0.4rem";
      bar.style.margin = "0.5rem 0";
      const lead = document.createElement("small");
      lead.textContent = "Zoom to:";
      bar.appendChild(lead);
      const zoom = (min, max, button) => {
        for (const c of charts) {
          c.options.scales.x.min = min;
          c.options.scales.x.max = max;
          c.update("none");
        }
        for (const b of bar.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === button));
      };
      const add = (text, min, max) => {
        const b = document.createElement("button");
        b.type = "button";
        b.className = "secondary outline";
        b.textContent = text;
        b.setAttribute("aria-label", `Zoom the trace charts to ${text}`);
        b.style.width = "auto";
        b.style.padding = "0.15rem 0.6rem";
        b.style.fontSize = "0.8rem";
        b.style.margin = "0";
        b.setAttribute("aria-pressed", String(min === 0 && max === spanMs));
        b.addEventListener("click", () => zoom(min, max, b));
        bar.appendChild(b);
      };
      add("whole capture", 0, spanMs);
      for (const s of steps) add(s.name, (s.ts - t0) / 1000, (s.ts - t0 + s.dur) / 1000);
      container.appendChild(bar);
    }

    const height = Math.max(140, 34 * rows.length + 90);
    const timeline = addCanvas(container, height,
      `${opts.title ? opts.title + ": " : ""}timeline of ${count} trace events on ${rows.length} rows (${labels.join("; ")}), ${fmt(+spanMs.toFixed(3))} ms in all`);
    charts.push(new Chart(timeline, {
      type: "bar",
      data: { labels, datasets: [...cats.values()] },
      options: {
        indexAxis: "y",
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        interaction: { mode: "nearest", intersect: true },
        scales: {
          x: { type: "linear", min: 0, max: spanMs,
            title: { display: true, text: "time since the capture started (ms)" } },
          // Two lines per row label (process, thread) keep the plot wide on a phone.
          // On a narrow screen they are cut short too (the tooltip and aria-label keep them).
          y: { type: "category", ticks: { callback(v) {
            if (!rows[v]) return v;
            const max = this.chart.width < 480 ? 15 : 40;
            return rows[v].lines.map((l) => (l.length > max ? l.slice(0, max - 1) + "\u2026" : l));
          } } },
        },
        plugins: {
          legend: { labels: { boxWidth: 12 } },
          tooltip: {
            callbacks: {
              title: (items) => (items.length ? items[0].raw.name : ""),
              label: (item) => `starts ${fmt(+(item.raw.start / 1000).toFixed(3))} ms, lasts ${fmt(item.raw.dur)} µs`,
            },
          },
        },
      },
    }));

    // Busy share for every row that never nests (GPU streams), sharing the timeline's x range.
    const flat = rows.filter((r) => !r.nests && r.events.length >= 20);
    if (flat.length) {
      const spec = {
        x: { label: "time since the capture started", unit: "ms" },
        series: flat.map((r) => busySeries(r, t0, spanUs)),
      };
      const busy = drawSeries(container, spec, { title: "busy share", height: 200 });
      for (const c of busy) {
        c.options.scales.x.min = 0;
        c.options.scales.x.max = spanMs;
        c.options.scales.y.min = 0;
        c.options.scales.y.max = 100;
        c.update("none");
      }
      charts.push(...busy);
    }
    return charts;
  }

  // --- history: solved / tried / untouched parts per topic -----------------------------------

  function drawProgress(canvas, rows) {
    const labels = rows.map((r) => r.topic);
    const solved = rows.map((r) => r.solved);
    const tried = rows.map((r) => r.tried);
    const rest = rows.map((r) => Math.max(r.parts - r.solved - r.tried, 0));
    canvas.setAttribute("aria-label", "Parts solved per topic: " + rows.map(
      (r) => `${r.topic} ${r.solved} of ${r.parts}`).join("; "));
    const box = canvas.parentElement; // responsive Chart.js sizes the canvas to this box
    box.style.position = "relative";
    box.style.height = `${Math.max(120, 34 * rows.length + 70)}px`;
    const bar = (label, data, bg) => ({ label, data, backgroundColor: bg, borderWidth: 0,
      barPercentage: 0.8, categoryPercentage: 1 });
    return new Chart(canvas, {
      type: "bar",
      data: {
        labels,
        datasets: [
          bar("solved", solved, "#2e9d57"),
          bar("tried, not solved", tried, "#E69F00"),
          bar("not started", rest, "rgba(127, 127, 127, 0.35)"),
        ],
      },
      options: {
        indexAxis: "y",
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { stacked: true, beginAtZero: true, ticks: { precision: 0 },
            title: { display: true, text: "parts" } },
          y: { stacked: true },
        },
        plugins: {
          legend: { labels: { boxWidth: 12 } },
          tooltip: {
            callbacks: {
              footer: (items) => {
                const r = rows[items[0].dataIndex];
                return `${r.solved} of ${r.parts} parts solved`;
              },
            },
          },
        },
      },
    });
  }

  // --- kernel timing: each bench shape on the roofline of the GPU it ran on ---------------

  function drawRoofline(canvas, data) {
    const who = { reference: 0, yours: 1 };
    const fmt = (v) => (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toPrecision(2));
    canvas.setAttribute("aria-label", "Roofline: " + data.points.map(
      (p) => `${p.label}, ${p.who}: ${fmt(p.y)} TFLOP/s at ${fmt(p.x)} FLOP/B`).join("; "));
    const box = canvas.parentElement;
    box.style.position = "relative";
    box.style.height = "260px";
    const datasets = [{
      type: "line", label: `roof: ${fmt(data.bandwidth_gbs)} GB/s, ${fmt(data.peak_tflops)} TFLOP/s`,
      data: data.roof.map(([x, y]) => ({ x, y })), borderColor: "rgba(127, 127, 127, 0.9)",
      borderWidth: 1.5, pointRadius: 0, fill: false,
    }];
    for (const [name, index] of Object.entries(who)) {
      datasets.push({
        type: "scatter", label: name,
        data: data.points.filter((p) => p.who === name).map((p) => ({ x: p.x, y: p.y, p })),
        backgroundColor: colour(index, 0.8), borderColor: colour(index), pointRadius: 5,
      });
    }
    return new Chart(canvas, {
      data: { datasets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: {
          x: { type: "logarithmic", title: { display: true, text: "arithmetic intensity (FLOP/B)" } },
          y: { type: "logarithmic", title: { display: true, text: "TFLOP/s" } },
        },
        plugins: {
          legend: { labels: { boxWidth: 12 } },
          tooltip: {
            callbacks: {
              label: (item) => {
                const p = item.raw.p;
                return p ? `${p.label} (${p.who}): ${p.ms.toPrecision(3)} ms, ${fmt(p.y)} TFLOP/s`
                  : `roof ${fmt(item.raw.y)} TFLOP/s`;
              },
            },
          },
        },
      },
    });
  }

  // --- statistics: each student's best score on a part, in ten bins of 0.1 ------------------

  function drawHistogram(canvas, data) {
    const counts = data.counts || [];
    canvas.setAttribute("aria-label", `${data.title || "Best score per student"}: ` + counts.map(
      (n, i) => `${data.labels[i]}: ${n}`).join("; "));
    const box = canvas.parentElement; // responsive Chart.js sizes the canvas to this box
    box.style.position = "relative";
    box.style.height = "200px";
    const last = counts.length - 1;
    return new Chart(canvas, {
      type: "bar",
      data: {
        labels: data.labels,
        datasets: [{
          label: "students",
          data: counts,
          // The last bin (scores 0.9 to 1, solved included) in the "solved" green of history.
          backgroundColor: counts.map((_, i) => (i === last ? "#2e9d57" : colour(0, 0.8))),
          borderWidth: 0,
          barPercentage: 0.95,
          categoryPercentage: 1,
        }],
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { title: { display: true, text: "best score" } },
          y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "students" } },
        },
        plugins: {
          legend: { display: false },
          tooltip: {
            callbacks: {
              label: (item) => `${item.parsed.y} of ${data.tried} student${data.tried === 1 ? "" : "s"}`,
            },
          },
        },
      },
    });
  }

  // --- my progress: exercise answers and recall reviews per day, stacked ------------------

  function drawActivity(canvas, data) {
    const days = data || [];
    const answers = days.map((d) => d.answers);
    const reviews = days.map((d) => d.reviews);
    const sum = (xs) => xs.reduce((a, b) => a + b, 0);
    const busy = days.filter((d) => d.answers + d.reviews > 0);
    // The text reading of the chart: totals, then each active day (empty days add nothing).
    canvas.setAttribute("aria-label", `Activity over the last ${days.length} days: `
      + `${sum(answers)} exercise answers and ${sum(reviews)} recall reviews`
      + (busy.length ? "; " + busy.map((d) => `${d.day}: ${d.answers} answers, ${d.reviews} reviews`)
        .join("; ") : "; no activity"));
    const box = canvas.parentElement; // responsive Chart.js sizes the canvas to this box
    box.style.position = "relative";
    box.style.height = "220px";
    // Axis labels as "Mar 2": the ISO date stays in the tooltip title.
    const short = (iso) => new Date(`${iso}T00:00:00Z`).toLocaleDateString("en",
      { month: "short", day: "numeric", timeZone: "UTC" });
    const bar = (label, values, i) => ({ label, data: values, backgroundColor: colour(i, 0.8),
      borderColor: colour(i), borderWidth: 0, barPercentage: 0.9, categoryPercentage: 1 });
    return new Chart(canvas, {
      type: "bar",
      data: {
        labels: days.map((d) => short(d.day)),
        datasets: [bar("exercise answers", answers, 0), bar("recall reviews", reviews, 1)],
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { stacked: true, ticks: { maxRotation: 0, autoSkip: true } },
          y: { stacked: true, beginAtZero: true, ticks: { precision: 0 },
            title: { display: true, text: "per day" } },
        },
        plugins: {
          legend: { labels: { boxWidth: 12 } },
          tooltip: {
            callbacks: {
              title: (items) => (items.length ? days[items[0].dataIndex].day : ""),
            },
          },
        },
      },
    });
  }

  // --- mounting ----------------------------------------------------------------------------

  function select(root, selector) {
    const found = [];
    if (root.nodeType === 1 && root.matches(selector)) found.push(root);
    if (root.querySelectorAll) found.push(...root.querySelectorAll(selector));
    return found;
  }

  async function drawEvidence(el) {
    const kind = el.getAttribute("data-kind");
    if (kind !== "series" && kind !== "trace") return; // nothing to draw; the link stays
    el.setAttribute("data-drawn", "pending");
    try {
      const response = await fetch(el.getAttribute("data-src"), {
        credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const data = await response.json();
      const opts = { title: el.getAttribute("data-title") || "" };
      if (kind === "series") {
        drawSeries(el, data, opts);
        for (const unit of data.histogram || []) drawDistribution(el, data, unit, opts);
      } else drawTrace(el, data, opts);
      el.setAttribute("data-drawn", "ok");
    } catch (err) {
      // A chart is a convenience: say so and keep the download link working.
      el.setAttribute("data-drawn", "error");
      const note = document.createElement("small");
      note.textContent = "Could not draw this file here; download it instead.";
      el.appendChild(note);
      console.warn("evidence chart:", err);
    }
  }

  function initAll(root) {
    if (typeof Chart === "undefined") return; // no Chart.js: the links and tables remain
    const scope = root || document;
    for (const el of select(scope, "[data-evidence-plot]:not([data-drawn])")) drawEvidence(el);
    // Canvases drawn from the JSON of the json_script element their attribute names. The box
    // around one (hidden until drawn: an empty box helps nobody) is shown once it is drawn.
    const canvasCharts = [
      ["data-roofline-chart", drawRoofline, "roofline"],
      ["data-progress-chart", drawProgress, "progress"],
      ["data-histogram-chart", drawHistogram, "histogram"],
      ["data-activity-chart", drawActivity, "activity"],
    ];
    for (const [attribute, draw, label] of canvasCharts) {
      for (const canvas of select(scope, `canvas[${attribute}]`)) {
        if (Chart.getChart(canvas)) continue;
        const source = document.getElementById(canvas.getAttribute(attribute));
        if (!source) continue;
        try {
          const data = JSON.parse(source.textContent);
          canvas.closest("[hidden]")?.removeAttribute("hidden");
          draw(canvas, data);
          canvas.setAttribute("data-drawn", "ok");
        } catch (err) {
          console.warn(`${label} chart:`, err);
        }
      }
    }
  }

  window.RooflineCharts = { MAX_POINTS, decimate, drawSeries, drawDistribution, drawTrace,
    drawProgress, drawRoofline, drawHistogram, drawActivity, initAll };

  if (typeof htmx !== "undefined") htmx.onLoad(initAll);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => initAll(document));
  } else {
    initAll(document);
  }
})();
