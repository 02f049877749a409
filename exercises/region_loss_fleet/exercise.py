"""Q32: the smallest fleet that survives losing any one region, and where its spare goes.

Regions i = 1..N have peak demands d_i (req/s), D = sum of d_i; a replica serves r req/s at full
load and is run at most at utilisation U, so it counts for r·U req/s. Any region may serve any
traffic after a loss, but each region serves its own peak in normal operation. The continuous
optimum (research notes facts-q26-q49 §Q32, with the notes' correction) is

    C* = max(D + d_max, N·D/(N−1)) / (r·U),

both terms being lower bounds: the largest region holds at least d_max/(rU), and it holds at least
C/N while the rest must carry D/(rU). Every region must stay within [d_i/(rU), C* − D/(rU)]. The
parts ask for C*, the overhead over the no-failover fleet, the per-region cap, the capacity a
single named neighbour needs when it is the only failover target of the largest region, the
requests lost during replica start-up with no spare at all, and (code part) the whole-replica
version with an exact placement rule.
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from types import ModuleType
from typing import Any

from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Holds
from exercises.file_module import load_file
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

HERE = Path(__file__).resolve().parent

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

NAMES = ("us-east", "us-west", "eu-west", "eu-central", "ap-south", "ap-northeast", "sa-east")
REGION_COUNTS = (3, 3, 4, 4, 5)
DEMANDS = tuple(range(100, 1210, 10))
R_PER_REPLICA = (4, 5, 6, 8, 10, 12)
UTILS = (0.6, 0.65, 0.7, 0.75, 0.8)
START_MIN = (4, 5, 6, 8, 10)

CANONICAL: dict[str, Any] = {
    # (region, peak req/s), largest first; the notes' example
    "regions": [["us-east", 500], ["us-west", 300], ["eu-west", 200]],
    "r": 10,  # req/s one replica serves at full load
    "U": 0.7,  # utilisation ceiling
    "start_min": 6,  # minutes for a new replica to start serving
    "neighbour": "us-west",  # the largest region's only failover target in part 4
}


def _reference() -> ModuleType:
    """code/reference.py: the whole-replica solution the code part is graded against."""
    return load_file("roofline_region_loss_fleet_reference", HERE / "code" / "reference.py")


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        n = rng.choice(REGION_COUNTS)
        names = rng.sample(NAMES, n)
        if rng.random() < 0.5:
            # One region dominates: the D + d_max term tends to bind.
            demands = [rng.choice(DEMANDS[60:])] + [rng.choice(DEMANDS[:40]) for _ in range(n - 1)]
        else:
            demands = [rng.choice(DEMANDS[20:70]) for _ in range(n)]
        demands.sort(reverse=True)
        regions = [[name, d] for name, d in zip(names, demands, strict=True)]
        p = {
            "regions": regions,
            "r": rng.choice(R_PER_REPLICA),
            "U": rng.choice(UTILS),
            "start_min": rng.choice(START_MIN),
            "neighbour": rng.choice(names[1:]),
        }
        return p

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """A fleet big enough that whole replicas change the answers by well under the tolerance,
    a single largest region, and a neighbour that is not the largest region."""
    demands = [d for _, d in p["regions"]]
    s = solve(p)
    return (
        len(demands) >= 3
        and demands[0] > demands[1]
        and p["neighbour"] in [n for n, _ in p["regions"][1:]]
        and s["baseline"] >= 100
    )


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    regions = [(name, float(d)) for name, d in p["regions"]]
    names = [n for n, _ in regions]
    demands = [d for _, d in regions]
    n = len(regions)
    q = p["r"] * p["U"]  # req/s a replica may carry under the ceiling
    total = sum(demands)
    big_name, d_max = max(regions, key=lambda x: x[1])
    nb = p["neighbour"]
    d_nb = dict(regions)[nb]

    own = [d / q for d in demands]
    baseline = total / q
    dominant_term = (total + d_max) / q
    balanced_term = n * total / (n - 1) / q
    fleet = max(dominant_term, balanced_term)
    cap = fleet - baseline
    binding = "dominant" if dominant_term > balanced_term * (1 + 1e-12) else (
        "balanced" if balanced_term > dominant_term * (1 + 1e-12) else "both")
    # One smallest placement: fill the emptiest regions up to a common level, never past the cap.
    placed = _level_fill(own, fleet, cap)
    spare = [max(0.0, c - o) for c, o in zip(placed, own, strict=True)]

    shed = d_max * p["start_min"] * 60
    whole = _reference().min_fleet({name: d for name, d in p["regions"]}, p["r"], p["U"])
    whole_total = sum(whole.values())

    s: dict[str, Any] = {
        "fleet": Quantity(fleet, ""),
        "overhead": Quantity(fleet / baseline - 1, ""),
        "cap": Quantity(cap, ""),
        "neighbour": Quantity((d_nb + d_max) / q, ""),
        "shed": Quantity(shed, ""),
        "fleet_code": "code/reference.py",
        # givens
        "n_regions": n,
        "total": total,
        "q": q,
        "big_name": big_name,
        "d_max": d_max,
        "d_nb": d_nb,
        "start_s": p["start_min"] * 60,
        "region_table": "\n".join(f"| {name} | {d:,.0f} |" for name, d in regions),
        # intermediates
        "baseline": baseline,
        "own_max": d_max / q,
        "own_nb": d_nb / q,
        "dominant_term": dominant_term,
        "balanced_term": balanced_term,
        "d_share_pct": d_max / total * 100,
        "threshold": total / (n - 1),
        "binding": binding,
        "binding_text": {
            "dominant": f"{big_name}'s loss sets it: d_max = {d_max:,.0f} req/s is more than "
                        f"D/(N−1) = {total / (n - 1):,.1f}",
            "balanced": f"the N/(N−1) term sets it: d_max = {d_max:,.0f} req/s is less than "
                        f"D/(N−1) = {total / (n - 1):,.1f}",
            "both": f"both terms agree: d_max = {d_max:,.0f} req/s equals D/(N−1) exactly",
        }[binding],
        "equal_ratio": n / (n - 1),
        "overhead_pct": (fleet / baseline - 1) * 100,
        "placement_table": "\n".join(
            f"| {name} | {o:.1f} | {c:.1f} | {sp:.1f} |"
            for name, o, c, sp in zip(names, own, placed, spare, strict=True)),
        "spare_total": fleet - baseline,
        "largest_spare": spare[names.index(big_name)],
        "nb_spare": d_max / q,
        "shed_no_u": max(0.0, d_max - (total - d_max) * (1 / p["U"] - 1)) * p["start_min"] * 60,
        "headroom_rps": (total - d_max) * (1 / p["U"] - 1),
        "whole_table": "\n".join(f"| {name} | {math.ceil(d / q)} | {whole[name]} |"
                                 for name, d in regions),
        "whole_total": whole_total,
        "whole_b": math.ceil(total / q),
        "whole_cap": whole_total - math.ceil(total / q),
        "equal_overheads": ", ".join(f"N = {k}: {k / (k - 1):.2f}×" for k in (2, 3, 4, 5)),
    }
    s["design"] = _model_answer(p, s)
    return s


def _level_fill(own: list[float], fleet: float, cap: float) -> list[float]:
    """Raise the emptiest regions to a common level L (c_i = min(cap, max(own_i, L))) so the
    total is `fleet`; found by bisection on L (the total rises with L)."""
    lo, hi = 0.0, cap
    for _ in range(200):
        mid = (lo + hi) / 2
        if sum(min(cap, max(o, mid)) for o in own) < fleet:
            lo = mid
        else:
            hi = mid
    return [min(cap, max(o, hi)) for o in own]


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"A replica takes {p['start_min']} minutes to come up, so an autoscaler that reacts to "
        f"the loss of {s['big_name']} leaves {s['d_max']:,.0f} req/s unserved for that long, "
        f"{s['shed'].value:,.0f} failed requests; the spare must already be running. The smallest "
        f"fleet is max(D + d_max, N·D/(N−1)) / (r·U) = {s['fleet'].value:.1f} replicas, "
        f"{s['overhead_pct']:.0f} % above the {s['baseline']:.1f} needed without failover; "
        f"{s['binding_text']}. No region may hold more than {s['cap'].value:.1f}, so the spare "
        f"goes to the regions that must absorb the loss, not to {s['big_name']} itself; with latency "
        "limits on failover the spare must sit in the failed region's neighbours: if only "
        f"{p['neighbour']} is close enough to take {s['big_name']}'s traffic, {p['neighbour']} "
        f"alone needs {s['neighbour'].value:.1f}. Before trusting it I would add correlated "
        "failures (a bad release hits every region), non-coincident peaks across time zones, a "
        "degraded mode that sheds low-priority traffic instead of paying for full spare, and "
        f"whole replicas ({s['whole_total']} here)."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    q, n = s["q"], s["n_regions"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near).add

    fleet, base = s["fleet"].value, s["baseline"]
    add("fleet", s["dominant_term"],
        f"(D + d_max)/(r·U) is only one of two lower bounds. With {n} regions, whichever region "
        "holds the most capacity (at least C/N of it) can fail, so the rest must still carry D: "
        f"C ≥ N·D/((N−1)·r·U) = {s['balanced_term']:.1f}.", "dmax_only", kind="miscounted_term")
    add("fleet", s["balanced_term"],
        f"N·D/(N−1) assumes balanced regions. {s['big_name']} is large enough to bind: it "
        "must hold its own peak, and after its loss the rest still need D/(r·U): "
        f"C ≥ (D + d_max)/(r·U) = {s['dominant_term']:.1f}.", "balanced_only",
        kind="miscounted_term")
    add("fleet", base,
        "That is the fleet for normal operation. After a region loss the survivors must carry its "
        "traffic too, and a new replica takes minutes to start.", "no_spare",
        kind="miscounted_term")
    add("fleet", 2 * base,
        "That doubles the fleet (a full mirror). Any surviving region may take the lost traffic, "
        "so the spare can be shared.", "mirror", kind="misread_mechanism")
    add("fleet", fleet * p["U"],
        f"That counts r req/s per replica. Under the {p['U']:g} ceiling a replica carries only "
        f"r·U = {q:g} req/s.", "no_U", kind="peak_vs_achievable")

    ov = s["overhead"].value
    add("overhead", s["equal_ratio"] - 1 if s["binding"] == "dominant" else s["d_max"] / s["total"],
        "That is the other term's overhead. It is max(d_max/D, 1/(N−1)): here "
        + ("the largest region dominates." if s["binding"] == "dominant" else
           "the regions are balanced enough that N/(N−1) binds."), "other_term", kind="wrong_scope")
    add("overhead", ov + 1,
        "That is the ratio of the two fleets. The part asks how much larger, the ratio minus 1.",
        "ratio", kind="wrong_scope")
    add("overhead", 1.0, "A full mirror doubles the fleet; shared spare needs less.", "mirror",
        kind="misread_mechanism")

    add("cap", s["own_max"] if s["binding"] != "dominant" else fleet / n,
        "The cap is C* − D/(r·U): losing a region must leave at least D/(r·U) behind. "
        + ("That is only the largest region's own need; with balanced regions every region sits "
           "at the cap, C*/N." if s["binding"] != "dominant" else
           "That is an even split, C*/N; the largest region holds exactly its own need."),
        "wrong_cap", kind="misread_mechanism")
    add("cap", base,
        "That is what must remain after a loss, D/(r·U). The cap on one region is the fleet minus "
        "that.", "survivors", kind="wrong_scope")
    add("cap", fleet,
        "No single region may hold the whole fleet: losing it would leave nothing.", "whole",
        kind="misread_mechanism")

    nbv = s["neighbour"].value
    add("neighbour", s["nb_spare"],
        f"That is the spare alone. {p['neighbour']} still serves its own "
        f"{s['d_nb']:,.0f} req/s, so it needs its own {s['own_nb']:.1f} replicas as well.",
        "spare_only", kind="miscounted_term")
    add("neighbour", s["own_nb"] + s["nb_spare"] / (n - 1),
        f"That spreads {s['big_name']}'s traffic over every other region. Only "
        f"{p['neighbour']} is within reach, so it must hold all of it.", "spread",
        kind="misread_mechanism")
    add("neighbour", nbv * p["U"],
        f"That counts r req/s per replica; under the ceiling a replica carries r·U = {q:g}.",
        "no_U", kind="peak_vs_achievable")

    shed = s["shed"].value
    add("shed", shed / 60, "That multiplies by minutes; the demand is per second.", "minutes",
        kind="unit_slip")
    add("shed", s["total"] * s["start_s"],
        "That is the whole fleet's traffic. Only the lost region's requests have nowhere to go.",
        "whole_fleet", kind="wrong_scope")
    if s["shed_no_u"] > 0:
        add("shed", s["shed_no_u"],
            f"That runs the survivors past the {p['U']:g} ceiling to absorb part of the load. "
            "Above U the latency SLO breaks, so the statement counts that capacity as unusable.",
            "headroom", kind="peak_vs_achievable")
    add("shed", s["d_max"] * 60,
        "That is one minute of the lost region's traffic; replicas take "
        f"{p['start_min']} minutes to start.", "one_minute", kind="wrong_scope")
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    names = [name for name, _ in p["regions"]]
    return [Holds(p["neighbour"] in names[1:], "the failover target is another region"),
            Holds(0 < p["U"] < 1, "the utilisation ceiling is a fraction")]
