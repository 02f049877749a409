"""A kernel submission's timing as a roofline plot: what static/charts.js draws under it.

The GPU run (gpu_sandbox/timed_case.py) stores, per bench shape, the FLOPs and the minimum bytes
of the operation, the medians of the reference kernel and the student's, and the bandwidth and
peak it measured on that GPU. The plot puts each shape at its arithmetic intensity (FLOPs per
byte) and achieved rate (FLOPs over the median time), under the roof min(peak, bandwidth ×
intensity): a point on the roof runs at the floor the shape allows.
"""
from __future__ import annotations

import math
from typing import Any

ROOF_POINTS = 48


def _positive(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def roofline_points(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """{"roof": [[x, y], ...], "points": [{"label", "who", "x", "y", "ms"}], "ridge", ...} in
    FLOP/B and TFLOP/s, or None when the result holds no usable timing."""
    timing = ((result or {}).get("extra") or {}).get("timing") or {}
    cases = [c for c in timing.get("cases") or [] if isinstance(c, dict)]
    points: list[dict[str, Any]] = []
    bandwidth = peak = None
    for case in cases:
        flops, nbytes = _positive(case.get("flops")), _positive(case.get("bytes"))
        bw, pk = _positive(case.get("bandwidth_gbs")), _positive(case.get("peak_tflops"))
        if not (flops and nbytes and bw and pk):
            continue
        bandwidth, peak = bw, pk
        label = str(case.get("describe") or case.get("id") or "shape")[:80]
        for who, key in (("reference", "ref_ms"), ("yours", "sub_ms")):
            ms = _positive(case.get(key))
            if ms:
                points.append({"label": label, "who": who, "x": flops / nbytes,
                               "y": flops / (ms * 1e-3) / 1e12, "ms": ms})
    if not points or bandwidth is None or peak is None:
        return None
    ridge = peak * 1e3 / bandwidth  # FLOP/B where bandwidth × intensity meets the peak
    xs = [p["x"] for p in points] + [ridge]
    lo, hi = min(xs) / 4, max(xs) * 4
    roof = []
    for i in range(ROOF_POINTS):
        x = lo * (hi / lo) ** (i / (ROOF_POINTS - 1))
        roof.append([x, min(peak, bandwidth * x / 1e3)])
    return {"roof": roof, "points": points, "ridge": ridge, "bandwidth_gbs": bandwidth,
            "peak_tflops": peak}
