"""practice/roofline_plot.py: a kernel's GPU timing placed on the roofline."""
from __future__ import annotations

import pytest

from practice.roofline_plot import roofline_points


def _result(**case: object) -> dict:
    base = {"id": "b1", "flops": 2 * 4096**3, "bytes": 3 * 4096 * 4096, "ref_ms": 0.2,
            "sub_ms": 0.25, "bandwidth_gbs": 3000.0, "peak_tflops": 1000.0}
    return {"extra": {"timing": {"cases": [{**base, **case}]}}}


def test_points_sit_at_intensity_and_achieved_rate_under_the_roof() -> None:
    plot = roofline_points(_result())
    assert plot is not None
    yours = next(p for p in plot["points"] if p["who"] == "yours")
    assert yours["x"] == pytest.approx(2 * 4096 / 3)
    assert yours["y"] == pytest.approx(2 * 4096**3 / 0.25e-3 / 1e12)
    assert plot["ridge"] == pytest.approx(1000e12 / 3000e9)
    for x, y in plot["roof"]:
        assert y == pytest.approx(min(1000.0, 3000.0 * x / 1e3))
    xs = [x for x, _ in plot["roof"]]
    assert xs[0] < plot["ridge"] < xs[-1] and xs[0] < yours["x"] < xs[-1]


@pytest.mark.parametrize("result", [
    None, {}, {"extra": {}}, {"extra": {"timing": {"cases": []}}},
    _result(bytes=0), _result(peak_tflops="nan"), _result(sub_ms=None, ref_ms=None),
])
def test_nothing_to_draw_without_usable_timing(result: dict | None) -> None:
    assert roofline_points(result) is None
