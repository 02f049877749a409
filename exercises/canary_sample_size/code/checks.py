"""Test cases and checks for the canary sizing functions (runs in the worker, never in the sandbox).

A case input is {"fn": "proportions" | "mean" | "minutes", "args": [...], "known_baseline": bool}.
Each result handed to `check()` is {"output": <driver.run_case dict>} or {"error": "..."};
`expected` holds the reference's results for the same cases. A failing check names the smallest
case it fails on (the smallest expected sample size or time), what was expected and what came
back, and, when the wrong value is what a known slip produces, which slip.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache
from statistics import NormalDist
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

Case = dict[str, Any]
_Z = NormalDist()

# The research notes' worked table (facts-q26-q49 §Q33): (p0, p1, alpha, power, known) and
# (rel_shift, cv, alpha, power).
NOTES_PROPORTIONS: tuple[tuple[float, float, float, float, bool], ...] = (
    (0.01, 0.015, 0.05, 0.8, False),  # 6,105
    (0.01, 0.015, 0.05, 0.8, True),  # 2,830
    (0.01, 0.02, 0.05, 0.8, False),  # 1,826
    (0.001, 0.002, 0.05, 0.8, False),  # 18,519
    (0.01, 0.011, 0.05, 0.8, False),  # 128,470
)
NOTES_MEANS: tuple[tuple[float, float, float, float], ...] = (
    (0.05, 1.0, 0.05, 0.8),  # 4,947
    (0.05, 2.0, 0.05, 0.8),  # 19,785
    (0.10, 1.0, 0.05, 0.8),  # 1,237
    (0.02, 1.0, 0.05, 0.8),  # 30,913
)
EDGE_VALID: tuple[tuple[str, dict[str, Any]], ...] = (
    ("strict-alpha-high-power", {"fn": "proportions", "args": [0.02, 0.03, 0.01, 0.9],
                                 "known_baseline": False}),
    ("strict-alpha-known", {"fn": "proportions", "args": [0.02, 0.03, 0.01, 0.9],
                            "known_baseline": True}),
    ("tiny-rates", {"fn": "proportions", "args": [0.0001, 0.0003, 0.05, 0.8],
                    "known_baseline": False}),
    ("large-rates", {"fn": "proportions", "args": [0.4, 0.6, 0.1, 0.7], "known_baseline": False}),
    ("large-rates-known", {"fn": "proportions", "args": [0.4, 0.6, 0.1, 0.7],
                           "known_baseline": True}),
    ("low-cv", {"fn": "mean", "args": [0.05, 0.3, 0.05, 0.8]}),
    ("big-shift", {"fn": "mean", "args": [0.5, 1.5, 0.1, 0.7]}),
    ("notes-minutes-1pct", {"fn": "minutes", "args": [6105, 200, 0.01]}),
    ("notes-minutes-5pct", {"fn": "minutes", "args": [6105, 200, 0.05]}),
    ("zero-requests", {"fn": "minutes", "args": [0, 200, 0.01]}),
    ("whole-fleet", {"fn": "minutes", "args": [1200, 10, 1.0]}),
)
# Inputs every function must refuse with ValueError (see the starter's docstring).
EDGE_INVALID: tuple[tuple[str, dict[str, Any]], ...] = (
    ("p1-equals-p0", {"fn": "proportions", "args": [0.01, 0.01, 0.05, 0.8],
                      "known_baseline": False}),
    ("p1-below-p0", {"fn": "proportions", "args": [0.02, 0.01, 0.05, 0.8],
                     "known_baseline": True}),
    ("p0-zero", {"fn": "proportions", "args": [0.0, 0.01, 0.05, 0.8], "known_baseline": False}),
    ("p1-one", {"fn": "proportions", "args": [0.5, 1.0, 0.05, 0.8], "known_baseline": False}),
    ("alpha-half", {"fn": "proportions", "args": [0.01, 0.02, 0.5, 0.8],
                    "known_baseline": False}),
    ("power-half", {"fn": "mean", "args": [0.05, 1.0, 0.05, 0.5]}),
    ("power-one", {"fn": "proportions", "args": [0.01, 0.02, 0.05, 1.0],
                   "known_baseline": False}),
    ("zero-shift", {"fn": "mean", "args": [0.0, 1.0, 0.05, 0.8]}),
    ("negative-cv", {"fn": "mean", "args": [0.05, -1.0, 0.05, 0.8]}),
    ("negative-n", {"fn": "minutes", "args": [-1, 200, 0.01]}),
    ("zero-fleet", {"fn": "minutes", "args": [100, 0, 0.01]}),
    ("fraction-zero", {"fn": "minutes", "args": [100, 200, 0.0]}),
    ("fraction-as-percent", {"fn": "minutes", "args": [100, 200, 5.0]}),
)

# Random draws pick from these lists. A seed draws the same cases in every process
# (graders.checkkit.draw leaves out the literals Hypothesis would collect from loaded files).
P0S: tuple[float, ...] = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.008, 0.01, 0.012, 0.015, 0.02,
                          0.025, 0.03, 0.04, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)
LIFTS: tuple[float, ...] = (0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75, 1.0, 1.5, 2.0, 3.0)
ALPHAS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2)
POWERS: tuple[float, ...] = (0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99)
SHIFTS: tuple[float, ...] = (0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3)
CVS: tuple[float, ...] = (0.2, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0)
FRACTIONS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
# A sample size this close to a whole number could round up differently between two correct
# implementations (the order of float operations); such draws are skipped.
CEIL_GUARD = 1e-6


def make_case(case_id: str, case_input: dict[str, Any]) -> Case:
    return {"id": case_id, "input": dict(case_input)}


def _params_inputs(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The variant's own four calls (what the student checks their parts against)."""
    p0, p1 = params.get("p0_pct", 1.0) / 100, params.get("p1_pct", 1.5) / 100
    alpha, power = params.get("alpha", 0.05), params.get("power", 0.8)
    shift, cv = params.get("shift_pct", 5) / 100, params.get("cv", 1.0)
    fleet, frac = params.get("fleet_rps", 200), params.get("canary_pct", 1.0) / 100
    n = _ref_two_arm(p0, p1, alpha, power)
    return [
        ("example-errors", {"fn": "proportions", "args": [p0, p1, alpha, power],
                            "known_baseline": False}),
        ("example-known-baseline", {"fn": "proportions", "args": [p0, p1, alpha, power],
                                    "known_baseline": True}),
        ("example-mean", {"fn": "mean", "args": [shift, cv, alpha, power]}),
        ("example-minutes", {"fn": "minutes", "args": [n, fleet, frac]}),
    ]


def public_cases(params: dict[str, Any]) -> list[Case]:
    """The examples a student can Run: the variant's own four calls."""
    return [make_case(cid, inp) for cid, inp in _params_inputs(params)]


# ---------------------------------------------------------------- the formulas, for diagnosis


def _z(alpha: float, power: float) -> tuple[float, float]:
    return _Z.inv_cdf(1 - alpha), _Z.inv_cdf(power)


def _two_arm_raw(p0: float, p1: float, z_a: float, z_b: float) -> float:
    pbar = (p0 + p1) / 2
    num = z_a * math.sqrt(2 * pbar * (1 - pbar)) + z_b * math.sqrt(p0 * (1 - p0) + p1 * (1 - p1))
    return num * num / (p1 - p0) ** 2


def _known_raw(p0: float, p1: float, z_a: float, z_b: float) -> float:
    return ((z_a * math.sqrt(p0 * (1 - p0)) + z_b * math.sqrt(p1 * (1 - p1))) / (p1 - p0)) ** 2


def _mean_raw(shift: float, cv: float, z_a: float, z_b: float) -> float:
    return 2 * (z_a + z_b) ** 2 * cv**2 / shift**2


def _ref_two_arm(p0: float, p1: float, alpha: float, power: float) -> int:
    return math.ceil(_two_arm_raw(p0, p1, *_z(alpha, power)))


def _raw(inp: dict[str, Any]) -> float:
    """The case's unrounded reference value."""
    a = inp["args"]
    if inp["fn"] == "minutes":
        return a[0] / (a[1] * a[2]) / 60
    z_a, z_b = _z(a[2], a[3])
    if inp["fn"] == "mean":
        return _mean_raw(a[0], a[1], z_a, z_b)
    f = _known_raw if inp["known_baseline"] else _two_arm_raw
    return f(a[0], a[1], z_a, z_b)


def _slips(inp: dict[str, Any]) -> list[tuple[float, str]]:
    """Values the known slips produce for a valid case, each with its explanation."""
    a = inp["args"]
    fn = inp["fn"]
    if fn == "minutes":
        n, rps, f = a
        t = n / (rps * f) / 60
        return [(t * 60, "that is seconds; the function returns minutes"),
                (t / 60, "that is hours; the function returns minutes"),
                (n / rps / 60, "that ignores the canary fraction: only that share of the fleet's "
                               "requests reaches the canary"),
                (t * 100, "that reads canary_fraction as a percentage; 0.01 already means 1 %"),
                (2 * t, "that waits for 2n requests; n is per arm, and the canary is one arm")]
    alpha, power = a[2], a[3]
    z_a, z_b = _z(alpha, power)
    z_a2 = _Z.inv_cdf(1 - alpha / 2)
    z_b_neg = _Z.inv_cdf(1 - power)
    out: list[tuple[float, str]] = []
    if fn == "mean":
        shift, cv = a[0], a[1]
        raw = _mean_raw(shift, cv, z_a, z_b)
        out += [
            (math.ceil(_mean_raw(shift, cv, z_a2, z_b)),
             "a two-sided test gives that (z_{1-alpha/2}); a canary only looks for a regression, "
             "so the test is one-sided, z_{1-alpha}"),
            (math.ceil(2 * (z_a + z_b) ** 2 * cv / shift**2),
             "the CV is not squared there: the variance of the metric is (CV x mean)^2"),
            (math.ceil(raw / 2),
             "the factor 2 is missing: both arms are sampled, so the difference of the means "
             "has twice the variance of one mean"),
            (math.ceil(_mean_raw(shift, cv, z_a, z_b_neg)),
             "z for power has the wrong sign: use z_{power} = inv_cdf(power), which is positive"),
            (2 * math.ceil(raw), "that is both arms together; the answer is per arm"),
        ]
        out += _rounding_slips(raw)
        return out
    p0, p1, known = a[0], a[1], inp["known_baseline"]
    f = _known_raw if known else _two_arm_raw
    raw = f(p0, p1, z_a, z_b)
    out += [
        (math.ceil(f(p0, p1, z_a2, z_b)),
         "a two-sided test gives that (z_{1-alpha/2}); a canary only looks for a regression, so "
         "the test is one-sided, z_{1-alpha}"),
        (math.ceil(f(p0, p1, z_a, z_b_neg)),
         "z for power has the wrong sign: use z_{power} = inv_cdf(power), which is positive"),
        (math.ceil(f(p0, p1, z_a, _Z.inv_cdf(1 - (1 - power) / 2))),
         "z for power uses (1 - power)/2; power is one-sided: z_{power} = inv_cdf(power)"),
    ]
    if known:
        out += [
            (math.ceil(_two_arm_raw(p0, p1, z_a, z_b)),
             "that is the two-arm formula; with a known baseline only the canary is sampled"),
            (math.ceil(((z_a * math.sqrt(p1 * (1 - p1)) + z_b * math.sqrt(p0 * (1 - p0)))
                        / (p1 - p0)) ** 2),
             "the variances are swapped: under H0 (z_{1-alpha}) the rate is p0, under H1 "
             "(z_{power}) it is p1"),
            (math.ceil(((z_a + z_b) * math.sqrt(p0 * (1 - p0)) / (p1 - p0)) ** 2),
             "both terms use p0's variance; the power term needs p1's, p1(1 - p1)"),
        ]
    else:
        pbar = (p0 + p1) / 2
        pooled = ((z_a + z_b) * math.sqrt(2 * pbar * (1 - pbar))) ** 2 / (p1 - p0) ** 2
        unpooled = ((z_a + z_b) * math.sqrt(p0 * (1 - p0) + p1 * (1 - p1))) ** 2 / (p1 - p0) ** 2
        out += [
            (math.ceil(pooled),
             "both terms use the pooled variance 2 pbar(1 - pbar); the power term is computed "
             "under H1, where the arms have their own rates: p0(1 - p0) + p1(1 - p1)"),
            (math.ceil(unpooled),
             "both terms use the unpooled variance; the alpha term is computed under H0, where "
             "both arms share the pooled rate pbar: 2 pbar(1 - pbar)"),
            (math.ceil(_known_raw(p0, p1, z_a, z_b)),
             "that is the known-baseline formula; here the control arm is sampled too"),
            (2 * math.ceil(raw), "that is both arms together; the answer is per arm"),
        ]
    out += _rounding_slips(raw)
    return out


def _rounding_slips(raw: float) -> list[tuple[float, str]]:
    return [(raw, "that is the unrounded value; return math.ceil of it, a whole number of "
                  "requests"),
            (math.floor(raw), "that rounds down; a sample size is rounded up (math.ceil), or "
                              "the test falls short of its power"),
            (round(raw), "that rounds to nearest; a sample size is rounded up (math.ceil)")]


def _diagnose(inp: dict[str, Any], got: float, expected: float) -> str:
    """Name the known slips that produce exactly this wrong value (several can coincide)."""
    whys: list[str] = []
    for value, why in _slips(inp):
        if (value != expected and math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-12)
                and why not in whys):
            whys.append(why)
    if whys:
        return " (" + "; or ".join(whys[:3]) + ")"
    if expected and got:
        return f" (off by a factor of {got / expected:.3g})"
    return ""


# ---------------------------------------------------------------- hidden cases


@st.composite
def _random_proportions(draw: st.DrawFn) -> dict[str, Any]:
    p0 = draw(checkkit.sampled_from(P0S))
    p1 = round(p0 * (1 + draw(checkkit.sampled_from(LIFTS))), 10)
    if p1 >= 0.95:
        p1 = round((p0 + 1) / 2, 10)  # still a regression, still a rate
    return {"fn": "proportions", "args": [p0, p1, draw(checkkit.sampled_from(ALPHAS)),
                                         draw(checkkit.sampled_from(POWERS))],
            "known_baseline": draw(checkkit.booleans())}


@st.composite
def _random_mean(draw: st.DrawFn) -> dict[str, Any]:
    return {"fn": "mean", "args": [draw(checkkit.sampled_from(SHIFTS)),
                                   draw(checkkit.sampled_from(CVS)),
                                   draw(checkkit.sampled_from(ALPHAS)),
                                   draw(checkkit.sampled_from(POWERS))]}


@st.composite
def _random_minutes(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(checkkit.integers(1, 99)) * 10 ** draw(checkkit.integers(0, 5))
    rps = draw(checkkit.integers(1, 99)) * 10 ** draw(checkkit.integers(0, 2))
    return {"fn": "minutes", "args": [n, rps, draw(checkkit.sampled_from(FRACTIONS))]}


# Draws per function: one Hypothesis run each (a single run's sampled_from over the function is far
# from uniform), most of them on the two-proportion formula, which has the most ways to go wrong.
STRATEGIES: dict[str, tuple[Any, int]] = {
    "proportions": (_random_proportions, 70),
    "mean": (_random_mean, 30),
    "minutes": (_random_minutes, 20),
}


def _usable(inp: dict[str, Any]) -> bool:
    if inp["fn"] == "minutes":
        return True
    raw = _raw(inp)
    return raw < 1e9 and abs(raw - round(raw)) > CEIL_GUARD


@lru_cache(maxsize=16)
def _random_inputs(seed: int, fn: str) -> tuple[str, ...]:
    """Hypothesis draws of one function's inputs for this seed, as JSON strings (hashable,
    copied on every use)."""
    strategy, n = STRATEGIES[fn]
    return tuple(json.dumps(d, sort_keys=True) for d in checkkit.draw(strategy(), seed, n))


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """The notes' table, hand-written edges, invalid inputs, then Hypothesis draws for the seed."""
    cases: list[Case] = []
    for i, (p0, p1, alpha, power, known) in enumerate(NOTES_PROPORTIONS):
        cases.append(make_case(f"notes-proportions-{i + 1}", {
            "fn": "proportions", "args": [p0, p1, alpha, power], "known_baseline": known}))
    for i, (shift, cv, alpha, power) in enumerate(NOTES_MEANS):
        cases.append(make_case(f"notes-mean-{i + 1}", {"fn": "mean",
                                                       "args": [shift, cv, alpha, power]}))
    for name, inp in EDGE_VALID + EDGE_INVALID:
        cases.append(make_case(f"edge-{name}", inp))
    drawn = [json.loads(raw) for fn in STRATEGIES for raw in _random_inputs(int(seed), fn)]
    return cases + checkkit.drawn_cases(cases, [inp for inp in drawn if _usable(inp)])


# ---------------------------------------------------------------- checks


def describe(case: Case) -> str:
    inp = case["input"]
    a = inp["args"]
    if inp["fn"] == "proportions":
        return (f"canary_sample_size(p0={a[0]!r}, p1={a[1]!r}, alpha={a[2]!r}, power={a[3]!r}, "
                f"known_baseline={inp['known_baseline']})")
    if inp["fn"] == "mean":
        return f"canary_sample_size_mean(rel_shift={a[0]!r}, cv={a[1]!r}, alpha={a[2]!r}, power={a[3]!r})"
    return f"canary_minutes(n={a[0]!r}, fleet_rps={a[1]!r}, canary_fraction={a[2]!r})"


# name -> (weight, message when every case passes)
CHECKS: tuple[tuple[str, float, str], ...] = (
    ("two-proportion n per arm", 2.0,
     "canary_sample_size matched the reference on every two-arm case."),
    ("known-baseline n", 1.0,
     "canary_sample_size(known_baseline=True) matched the reference on every case."),
    ("means n per arm", 1.0, "canary_sample_size_mean matched the reference on every case."),
    ("collection minutes", 1.0, "canary_minutes matched the reference on every case."),
    ("rejects invalid input", 1.0, "Every invalid input raised ValueError."),
)


def _check_name(inp: dict[str, Any], valid: bool) -> str:
    if not valid:
        return "rejects invalid input"
    if inp["fn"] == "proportions":
        return "known-baseline n" if inp["known_baseline"] else "two-proportion n per arm"
    return {"mean": "means n per arm", "minutes": "collection minutes"}[inp["fn"]]


def _well_formed(result: Any) -> bool:
    """Whether a result has the shape the driver writes (a line can be forged from inside)."""
    out = checkkit.envelope(result)
    if not isinstance(out, dict):
        return out is not None  # a run's error text is well formed; any other shape is not
    if "value" in out:
        v = out["value"]
        return (isinstance(v, int | float) and not isinstance(v, bool)
                and out.get("type") in ("int", "float")
                and (not isinstance(v, float) or math.isfinite(v)))
    return isinstance(out.get("raised"), str) or isinstance(out.get("bad"), str)


def _judge(case: Case, got: Any, exp: dict[str, Any]) -> tuple[str, bool, str, float]:
    """(check name, passed, message, sort key) for one case."""
    inp = case["input"]
    e_out = exp["output"]
    valid = "value" in e_out
    name = _check_name(inp, valid)
    where = describe(case)
    key = float(e_out["value"]) if valid else -1.0
    if not _well_formed(got):
        return name, False, f"the output for {where} is malformed", key
    if "error" in got:
        return name, False, f"{got['error']} — on {where}", key
    g_out = got["output"]
    if not valid:
        if str(g_out.get("raised", "")).split(":", 1)[0].strip() == "ValueError":
            return name, True, "", key
        what = ("raised " + g_out["raised"].strip()) if "raised" in g_out else (
            f"returned {g_out.get('value', g_out.get('bad'))!r}")
        return name, False, (f"{where} should raise ValueError ({_why_invalid(inp)}), but it "
                             f"{what}"), key
    if "raised" in g_out:
        return name, False, f"{where} raised {g_out['raised'].strip()}; expected {e_out['value']!r}", key
    if "bad" in g_out:
        return name, False, f"{where} {g_out['bad']}; expected {e_out['value']!r}", key
    got_v, exp_v = g_out["value"], e_out["value"]
    if inp["fn"] == "minutes":
        ok = math.isclose(got_v, exp_v, rel_tol=1e-9, abs_tol=1e-12)
    else:
        ok = got_v == exp_v
    if ok:
        return name, True, "", key
    return name, False, (f"{where} returned {got_v!r}, expected {exp_v!r}"
                         f"{_diagnose(inp, float(got_v), float(exp_v))}"), key


def _why_invalid(inp: dict[str, Any]) -> str:
    a = inp["args"]
    if inp["fn"] == "minutes":
        return "n >= 0, fleet_rps > 0 and 0 < canary_fraction <= 1"
    if inp["fn"] == "mean":
        return "rel_shift > 0, cv > 0, 0 < alpha < 0.5, 0.5 < power < 1"
    if not a[0] < a[1]:
        return "a canary is tested for a regression, so p1 must exceed p0"
    return "rates in (0, 1), 0 < alpha < 0.5, 0.5 < power < 1"


def check(cases: list[Case], got: list[Any], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure reports the case with the smallest answer."""
    v = checkkit.Verdicts()  # ranked by answer: every row gives its own rank
    for case, g, e in zip(cases, got, expected, strict=True):
        name, ok, message, key = _judge(case, g, e)
        v.add(name, case, ok, message, rank=(key, case["id"]))
    return v.checks(CHECKS)
