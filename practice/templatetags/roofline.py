"""{% roofline_figure sub %}: a kernel submission's GPU timing as a roofline plot and a table."""
from __future__ import annotations

from typing import Any

from django import template

from practice.roofline_plot import roofline_points

register = template.Library()


@register.inclusion_tag("practice/partials/roofline.html")
def roofline_figure(sub: Any) -> dict[str, Any]:
    result = sub.result if isinstance(sub.result, dict) else {}
    plot = roofline_points(result)
    timing = (result.get("extra") or {}).get("timing") or {}
    return {"plot": plot, "plot_id": f"roofline-{sub.pk}", "cases": timing.get("cases") or [],
            "device": (result.get("extra") or {}).get("device", "")}
