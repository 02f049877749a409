"""Q33: size a canary from the regression it must catch, then the minutes that sample takes.

The canary takes a share of a fleet's traffic; the control is the rest. The parts ask for the
requests per arm a one-sided two-proportion test needs to catch an error-rate rise p0 -> p1, the
smaller count when the baseline rate is known exactly, the count for a relative shift in mean
TTFT with a given coefficient of variation, and the minutes the canary needs to collect the first
sample; then how to test a p99 (as a proportion of requests above the control's p99), the three
functions as code, and the staging plan.

Conventions (stated in the statement): one-sided tests; exact standard-normal quantiles
(statistics.NormalDist), so z_0.95 = 1.6449 and z_0.80 = 0.8416; every sample size rounded up.
The research notes' table (facts-q26-q49 §Q33) is reproduced by the canonical variant: 6,105 per
arm for 1.0 % -> 1.5 %, 2,830 against a known baseline, 4,947 for +5 % mean TTFT at CV 1, and 51
minutes at 1 % of 200 req/s.
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from statistics import NormalDist
from types import ModuleType
from typing import Any

from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Holds
from exercises.file_module import load_file
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

HERE = Path(__file__).resolve().parent

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

FLEET_RPS = (100, 150, 200, 250, 300, 400, 500, 800, 1000)
CANARY_PCT = (0.5, 1.0, 2.0, 5.0)
P0_PCT = (0.2, 0.5, 1.0, 2.0)
LIFTS = (0.25, 0.5, 1.0)  # p1 = p0 x (1 + lift)
ALPHAS = (0.05, 0.025, 0.01)
POWERS = (0.8, 0.9)
SHIFT_PCT = (2, 5, 10)
CVS = (0.5, 1.0, 1.5, 2.0)
TOKENS = (200, 300, 500, 800)

CANONICAL: dict[str, Any] = {
    "fleet_rps": 200,  # requests per second across the fleet
    "canary_pct": 1.0,  # share of the traffic the canary gets
    "p0_pct": 1.0,  # baseline error rate
    "p1_pct": 1.5,  # the regression the canary must catch
    "alpha": 0.05,  # one-sided false-alarm rate
    "power": 0.8,  # chance of catching the regression when it is real
    "shift_pct": 5,  # relative rise in mean TTFT to catch
    "cv": 1.0,  # TTFT standard deviation / mean
    "tokens_per_req": 300,  # output tokens per request (the trap of counting tokens)
}

_Z = NormalDist()


def _reference() -> ModuleType:
    """code/reference.py, the one implementation the answers and the code part share."""
    return load_file("roofline_canary_sample_size_reference", HERE / "code" / "reference.py")


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        p0 = rng.choice(P0_PCT)
        return {
            **choose(rng, {"fleet_rps": FLEET_RPS, "canary_pct": CANARY_PCT}),
            "p0_pct": p0,
            "p1_pct": round(p0 * (1 + rng.choice(LIFTS)), 3),
            **choose(rng, {"alpha": ALPHAS, "power": POWERS, "shift_pct": SHIFT_PCT, "cv": CVS,
                           "tokens_per_req": TOKENS}),
        }

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """A canary stage that takes between a few minutes and a working day, and samples big enough
    that rounding conventions cannot matter."""
    s = solve(p)
    return (
        3 <= s["minutes"].value <= 8 * 60
        and s["n_mean"].value >= 50
        and s["n_known"].value >= 50
    )


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    ref = _reference()
    p0, p1 = p["p0_pct"] / 100, p["p1_pct"] / 100
    alpha, power = p["alpha"], p["power"]
    shift, cv = p["shift_pct"] / 100, p["cv"]
    frac = p["canary_pct"] / 100
    z_a, z_b = _Z.inv_cdf(1 - alpha), _Z.inv_cdf(power)
    pbar = (p0 + p1) / 2

    n_errors = ref.canary_sample_size(p0, p1, alpha, power)
    n_known = ref.canary_sample_size(p0, p1, alpha, power, known_baseline=True)
    n_mean = ref.canary_sample_size_mean(shift, cv, alpha, power)
    minutes = ref.canary_minutes(n_errors, p["fleet_rps"], frac)
    canary_rps = p["fleet_rps"] * frac
    # p99 as a proportion: the canary's p99 sliding to the control's p98 is 1 % -> 2 % above it.
    n_p99 = ref.canary_sample_size(0.01, 0.02, alpha, power)

    s: dict[str, Any] = {
        "n_errors": Quantity(n_errors, ""),
        "n_known": Quantity(n_known, ""),
        "n_mean": Quantity(n_mean, ""),
        "minutes": Quantity(minutes, "min"),
        "p99_method": "exceed",
        "sizing": "code/reference.py",
        # givens and intermediates
        "alpha_pct": alpha * 100,
        "power_pct": power * 100,
        "beta": 1 - power,
        "z_a": z_a,
        "z_b": z_b,
        "z_a_two": _Z.inv_cdf(1 - alpha / 2),
        "pbar_pct": pbar * 100,
        "delta_pct": (p1 - p0) * 100,
        "lift_pct": (p1 / p0 - 1) * 100,
        "var_h0": 2 * pbar * (1 - pbar),
        "var_h1": p0 * (1 - p0) + p1 * (1 - p1),
        "sd_h0": math.sqrt(2 * pbar * (1 - pbar)),
        "sd_h1": math.sqrt(p0 * (1 - p0) + p1 * (1 - p1)),
        "sd_p0": math.sqrt(p0 * (1 - p0)),
        "sd_p1": math.sqrt(p1 * (1 - p1)),
        "n_errors_raw": _two_arm(p0, p1, z_a, z_b),
        "n_known_raw": _known(p0, p1, z_a, z_b),
        "n_mean_raw": _mean(shift, cv, z_a, z_b),
        "known_pct": n_known / n_errors * 100,
        "n_two_sided": math.ceil(_two_arm(p0, p1, _Z.inv_cdf(1 - alpha / 2), z_b)),
        "canary_rps": canary_rps,
        "seconds": minutes * 60,
        "errors_expected": n_errors * p0,
        "errors_expected_p1": n_errors * p1,
        "mean_minutes": n_mean / canary_rps / 60,
        "n_p99": n_p99,
        "p99_minutes": n_p99 / canary_rps / 60,
        "minutes_at_5pct": n_errors / (p["fleet_rps"] * 0.05) / 60,
        "minutes_at_25pct": n_errors / (p["fleet_rps"] * 0.25) / 60,
        "tokens_per_min": canary_rps * 60 * p["tokens_per_req"],
    }
    s["staging"] = _model_answer(p, s)
    return s


def _two_arm(p0: float, p1: float, z_a: float, z_b: float) -> float:
    pbar = (p0 + p1) / 2
    num = z_a * math.sqrt(2 * pbar * (1 - pbar)) + z_b * math.sqrt(p0 * (1 - p0) + p1 * (1 - p1))
    return num * num / (p1 - p0) ** 2


def _known(p0: float, p1: float, z_a: float, z_b: float) -> float:
    return ((z_a * math.sqrt(p0 * (1 - p0)) + z_b * math.sqrt(p1 * (1 - p1))) / (p1 - p0)) ** 2


def _mean(shift: float, cv: float, z_a: float, z_b: float) -> float:
    return 2 * (z_a + z_b) ** 2 * cv**2 / shift**2


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"Hold each stage until it has the sample for the smallest regression it must catch. At "
        f"{p['canary_pct']:g} % of {p['fleet_rps']} req/s the canary gets {s['canary_rps']:g} "
        f"req/s, so catching {p['p0_pct']:g} % -> {p['p1_pct']:g} % errors takes "
        f"{s['n_errors'].value:,} requests, {s['minutes'].value:.0f} minutes; at 5 % it would "
        f"take {s['minutes_at_5pct']:.0f}. I would run {p['canary_pct']:g} % with hard guardrails "
        "for gross failures, then 5 %, 25 % and 100 %, each held until its n is in. Verdicts go "
        "wrong if I peek and stop at the first significant look (use fixed looks or a sequential "
        "test with alpha spending). They also go wrong if I count tokens instead of requests (a "
        "request's tokens are correlated), or if the two arms see different traffic: compare against a concurrent "
        "control, matched or stratified by prompt length. Latency gets its own sizing: a mean "
        f"shift of {p['shift_pct']} % at CV {p['cv']:g} needs {s['n_mean'].value:,} per arm, and "
        f"a p99 is a proportion test on requests above the control's p99 ({s['n_p99']:,} per arm "
        "to see 1 % become 2 %)."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    p0, p1 = p["p0_pct"] / 100, p["p1_pct"] / 100
    power = p["power"]
    shift, cv = p["shift_pct"] / 100, p["cv"]
    frac = p["canary_pct"] / 100
    z_a, z_b = s["z_a"], s["z_b"]
    z_a2 = s["z_a_two"]
    z_b_half = _Z.inv_cdf(1 - (1 - power) / 2)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near).add

    two_sided = ("That is a two-sided test (z_{1-α/2}). A canary only asks whether things got "
                 "worse, so the test is one-sided: z_{1-α}.")
    n = s["n_errors"].value
    add("n_errors", math.ceil(_two_arm(p0, p1, z_a2, z_b)), two_sided, "two_sided",
        kind="mean_vs_tail")
    add("n_errors", s["n_known"].value,
        "That is the known-baseline formula. Here the control is a sample too, so its noise "
        "counts: use the two-arm formula with the pooled variance under H0.", "known_baseline",
        kind="mean_vs_tail")
    add("n_errors", 2 * n, "That is both arms together. The part asks for each arm.", "both_arms",
        kind="wrong_scope")
    add("n_errors", math.ceil(_two_arm(p0, p1, z_a, z_b_half)),
        "z for power is one-sided: z_{power} = z_{1-β}, not z_{1-β/2}.", "power_half",
        kind="mean_vs_tail")
    add("n_errors", math.ceil(_two_arm(p0, p1, z_a, -z_b)),
        "z for power has the wrong sign: z_{1-β} is positive (0.84 at 80 % power).", "power_sign",
        kind="mean_vs_tail")

    nk = s["n_known"].value
    add("n_known", n,
        "That is the two-arm count. With the baseline known exactly, only the canary is sampled: "
        "n = ((z_{1-α}·√(p0(1−p0)) + z_{1-β}·√(p1(1−p1))) / (p1 − p0))².", "two_arm",
        kind="mean_vs_tail")
    add("n_known", math.ceil(_known(p0, p1, z_a2, z_b)), two_sided, "two_sided",
        kind="mean_vs_tail")
    add("n_known", math.ceil(((z_a * s["sd_p1"] + z_b * s["sd_p0"]) / (p1 - p0)) ** 2),
        "The variances are swapped: under H0 (the z_{1-α} term) the rate is p0; under H1 (the "
        "z_{1-β} term) it is p1.", "swapped", kind="mean_vs_tail")
    add("n_known", math.ceil(((z_a + z_b) * s["sd_p0"] / (p1 - p0)) ** 2),
        "Both terms use p0's variance. The power term is computed where the canary's rate is "
        "p1, so it needs p1(1 − p1).", "p0_both", kind="mean_vs_tail")

    nm = s["n_mean"].value
    add("n_mean", math.ceil(_mean(shift, cv, z_a2, z_b)), two_sided, "two_sided",
        kind="mean_vs_tail")
    add("n_mean", math.ceil(_mean(shift, cv, z_a, z_b) / 2),
        "The factor 2 is missing: both arms are sampled, so the difference of two means has "
        "twice the variance of one.", "one_arm", kind="mean_vs_tail")
    add("n_mean", math.ceil(2 * (z_a + z_b) ** 2 * cv / shift**2),
        "The CV must be squared: the variance is (CV × mean)², so n grows with CV².",
        "cv_not_squared", kind="mean_vs_tail")
    add("n_mean", 2 * nm, "That is both arms together. The part asks for each arm.", "both_arms",
        kind="wrong_scope")

    t = s["minutes"].value
    add("minutes", t * 60, "That is the time in seconds; the part asks for minutes.", "seconds",
        kind="unit_slip")
    add("minutes", n / p["fleet_rps"] / 60,
        f"That uses the whole fleet's rate. The canary gets only {p['canary_pct']:g} % of it.",
        "whole_fleet", kind="wrong_scope")
    add("minutes", t / p["tokens_per_req"],
        "That counts tokens as samples. The unit of the test is the request: a request's tokens "
        "share its prompt, its batch and its GPU, so they are not independent.", "tokens",
        kind="mean_vs_tail")
    add("minutes", 2 * t,
        "That waits for both arms' samples at the canary's rate. The control gets the other "
        f"{100 - p['canary_pct']:g} % of the traffic and fills its arm long before the canary.",
        "both_arms", kind="wrong_scope")
    add("minutes", nk / (p["fleet_rps"] * frac) / 60,
        "That collects the known-baseline sample. Part 1's two-arm count is the one to wait for.",
        "known_n", kind="wrong_scope")
    add("minutes", t * 100,
        f"The canary share is {p['canary_pct']:g} %, i.e. {frac:g} of the traffic, not "
        f"{p['canary_pct']:g}.", "percent", kind="unit_slip")

    out += [
        Mistake("p99_method", "ttest",
                "A mean test does not see the tail: the p99 can double while the mean barely "
                "moves. Turn the p99 into a proportion, the share of requests above the control's "
                "p99, and test that.", "ttest", kind="mean_vs_tail"),
        Mistake("p99_method", "p99_diff",
                "A per-minute p99 from a few hundred requests rests on a handful of samples and "
                "swings from minute to minute; comparing it over and over is peeking. Test the "
                "share of requests above the control's p99 with a sized sample.", "p99_diff",
                kind="mean_vs_tail"),
        Mistake("p99_method", "tokens",
                "Tokens of one request are not independent samples (same prompt, batch and GPU), "
                "and TTFT is one number per request anyway. The unit is the request.", "tokens",
                kind="mean_vs_tail"),
    ]
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [Holds(p["p1_pct"] > p["p0_pct"], "the regression raises the error rate"),
            Holds(0 < p["canary_pct"] < 100, "the canary takes a share of the traffic")]
