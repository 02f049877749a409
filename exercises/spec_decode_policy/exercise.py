"""Q38: speculative decoding turns into a slowdown, and a per-request policy instead of a switch.

The speedup E(alpha, k) / cost has two inputs that move: the acceptance rate alpha (per request,
over time) and the verify cost (per moment: it grows once batch x (k + 1) tokens pass the
roofline knee). The parts: the speedup of a low-acceptance request at the variant's batch (below
1), the break-even acceptance, the time per token of a request whose drafts are nearly never
accepted (who owns the p99), reading alpha from vLLM's counters correctly, the policy as code, and
the judgement.

Every number is computed by the reference in code/reference.py, the same code the code part is
graded against. The cost model (roofline step time with a knee, a draft cost c per draft
position) is the notes' (facts-q26-q49 §Q38) and is stated in the statement as assumptions.
"""
from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType
from typing import Any

from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Holds
from exercises.file_module import load_file
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

HERE = Path(__file__).resolve().parent

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# The notes' worked example: T_mem 20 ms, knee 256 tokens, c = 0.05, k = 4, batch 64. At
# alpha = 0.3 the speedup is 1.425 / 1.45 = 0.98 (a slowdown); break-even alpha 0.312; a request
# whose drafts are never accepted pays the whole 29 ms step per token. Counter window: 10,000
# drafts at alpha 0.8 with k = 4.
CANONICAL: dict[str, Any] = {
    "batch": 64,
    "k": 4,
    "c": 0.05,  # one draft position costs this fraction of a plain step [A]
    "t_mem_ms": 20.0,  # memory-bound decode step [A]
    "n_knee": 256,  # tokens per step where the roofline turns compute-bound [A]
    "alpha_low": 0.3,
    "alpha_high": 0.8,
    "alpha_tail": 0.0,
    "drafts": 10_000,  # counter window: verify steps that drafted
    "alpha_true": 0.8,  # acceptance behind the counter window
}

BATCHES = (48, 64, 80, 96, 128)
KS = (3, 4, 5, 6)
CS = (0.03, 0.04, 0.05, 0.06)
KNEES = (192, 256, 320)
T_MEMS = (15.0, 20.0, 25.0, 30.0)
ALPHA_LOWS = (0.2, 0.25, 0.3, 0.35, 0.4)
ALPHA_TAILS = (0.0, 0.05, 0.1)
ALPHA_TRUES = (0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)
DRAFTS = (8_000, 10_000, 12_000, 16_000, 20_000, 25_000)


def _reference() -> ModuleType:
    return load_file("roofline_spec_decode_policy_reference", HERE / "code" / "reference.py")


def generate(rng: random.Random) -> dict[str, Any]:
    return draw_sensible(rng, lambda rng: {**CANONICAL, **choose(rng, {
        "batch": BATCHES, "k": KS, "c": CS, "t_mem_ms": T_MEMS, "n_knee": KNEES,
        "alpha_low": ALPHA_LOWS, "alpha_tail": ALPHA_TAILS, "drafts": DRAFTS,
        "alpha_true": ALPHA_TRUES,
    })}, is_sensible, tries=2000)


def is_sensible(p: dict[str, Any]) -> bool:
    """The story holds: a plain step is memory-bound, the speculative one is past the knee,
    the low-acceptance request is slowed down, the high one still gains clearly."""
    b, k, knee = p["batch"], p["k"], p["n_knee"]
    if b > knee or b * (k + 1) <= knee:
        return False
    s = solve(p)
    return (0.75 <= s["speedup_low"].value < 0.99
            and s["speedup_high"] >= 1.3
            and s["alpha_low"] < s["be_alpha"] < 0.8)


def _break_even(k: int, cost: float) -> float:
    """The alpha at which E(alpha, k) equals the step cost (E rises with alpha)."""
    ref = _reference()
    if cost <= 1:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if ref.expected_tokens(mid, k) < cost:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def counters(p: dict[str, Any]) -> dict[str, int]:
    """The counter deltas of the window: drafts, draft tokens, accepted tokens, and accepted at
    each position (position j is accepted in about drafts x alpha^(j+1) steps)."""
    d, a, k = p["drafts"], p["alpha_true"], p["k"]
    per_pos = [round(d * a ** (j + 1)) for j in range(k)]
    return {"drafts": d, "draft_tokens": d * k, "accepted": sum(per_pos),
            "pos0": per_pos[0], "pos1": per_pos[1], "per_pos": per_pos}  # type: ignore[dict-item]


def solve(p: dict[str, Any]) -> dict[str, Any]:
    ref = _reference()
    b, k, c, t, knee = p["batch"], p["k"], p["c"], p["t_mem_ms"], p["n_knee"]
    cost = ref.step_cost(k, b, c, t, knee)
    verify = cost - k * c
    e_low = ref.expected_tokens(p["alpha_low"], k)
    e_high = ref.expected_tokens(p["alpha_high"], k)
    e_tail = ref.expected_tokens(p["alpha_tail"], k)
    s_low = e_low / cost
    plain_ms = t * max(1.0, b / knee)
    step_ms = cost * plain_ms
    be = _break_even(k, cost)
    cnt = counters(p)
    alpha_measured = cnt["pos0"] / cnt["drafts"]

    # The notes' table: batch 1, the variant's batch, twice it.
    rows = []
    for bb in (1, b, 2 * b):
        cc = ref.step_cost(k, bb, c, t, knee)
        rows.append(
            f"| {bb} | {bb * (k + 1):,} | {cc:.2f} | "
            + " | ".join(f"{ref.speedup(a, k, bb, c, t, knee):.2f}"
                         for a in (p["alpha_low"], 0.5, p["alpha_high"]))
            + f" | {_break_even(k, cc):.3f} | {ref.best_k(p['alpha_high'], bb, c, t, knee)} |")
    table = "\n".join(rows)

    return {
        # part answers
        "speedup_low": Quantity(s_low, ""),
        "break_even": Quantity(be * 100, "%"),
        "tail_ms": Quantity(step_ms / e_tail, "ms"),
        "alpha_measured": Quantity(alpha_measured, ""),
        "policy": "code/reference.py",
        "p99": MODEL_ANSWER,
        "speedup_low_x": s_low,
        "tail_ms_x": step_ms / e_tail,
        "alpha_measured_x": alpha_measured,
        # givens
        "verify_tokens": b * (k + 1),
        "draft_ms": c * t,
        "cnt_drafts": cnt["drafts"],
        "cnt_draft_tokens": cnt["draft_tokens"],
        "cnt_accepted": cnt["accepted"],
        "cnt_pos0": cnt["pos0"],
        "cnt_pos1": cnt["pos1"],
        # intermediates
        "alpha_low": p["alpha_low"],
        "cost": cost,
        "verify": verify,
        "draft_part": k * c,
        "e_low": e_low,
        "e_high": e_high,
        "e_tail": e_tail,
        "speedup_high": e_high / cost,
        "speedup_low_flat": e_low / (1 + k * c),
        "plain_ms": plain_ms,
        "step_ms": step_ms,
        "draft_total_ms": k * c * t,
        "verify_ms": verify * plain_ms,
        "high_ms": step_ms / e_high,
        "low_ms": step_ms / e_low,
        "tail_slowdown_pct": (step_ms / e_tail / plain_ms - 1) * 100,
        "be_alpha": be,
        "be_pct": be * 100,
        "be_batch1": _break_even(k, ref.step_cost(k, 1, c, t, knee)) * 100,
        "naive_ratio": cnt["accepted"] / cnt["draft_tokens"],
        "mean_accepted": cnt["accepted"] / cnt["drafts"],
        "tau": 1 + cnt["accepted"] / cnt["drafts"],
        "alpha_measured_pct": alpha_measured * 100,
        "alpha_pos1": (cnt["pos1"] / cnt["pos0"]),
        "table": table,
        "knee_batch": knee // (k + 1),
    }


MODEL_ANSWER = """\
The step is shared: at this batch every request pays the same longer step (drafting plus a verify
pass past the roofline knee), but only requests whose drafts are accepted get more than one token
out of it. High-acceptance requests (code, templated or repetitive text, low temperature) speed
up; low-acceptance ones (high temperature, creative or unfamiliar text) get fewer tokens per
unit time than with no speculation, and the geometric number of tokens per step makes their
streams bursty. So the p99 time per token belongs to the low-acceptance requests, and the
average speedup hides it. A switch cannot fix this: off wastes the gain of the good requests, on
taxes the bad ones. I would keep a per-request acceptance estimate (an EWMA over the positions
the target actually judged, starting from a prior), price each step with a cost model that grows
with the tokens the target verifies, give each request the draft length that maximises goodput,
refuse drafts to any request whose own predicted speedup is below 1 plus a margin, and add
hysteresis so decisions do not flap. As a fallback, cap the draft length by batch size
(TensorRT-LLM's draft_len_schedule) and disable speculation when a rolling acceptance falls
below a threshold. Measure alpha from the first-position counter, not accepted over drafted
tokens, and watch p99 TPOT by request class, not only the mean.
"""


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    k, c, t, knee = p["k"], p["c"], p["t_mem_ms"], p["n_knee"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near).add

    a = p["alpha_low"]
    add("speedup_low", s["e_low"] / (1 + k * c),
        f"You priced the verify pass as free. The step feeds {s['verify_tokens']:,} tokens to the "
        f"target, past the {knee}-token knee, so it takes {s['verify']:.2f} plain steps.",
        "flat_verify", kind="misread_mechanism")
    add("speedup_low", (1 + k * a) / s["cost"],
        "1 + kα counts every draft as judged on its own. The target stops at the first rejection, "
        "so draft j counts only if all before it were accepted: 1 + α + … + α^k.", "linear_e",
        kind="mean_vs_tail")
    add("speedup_low", s["e_low"] / s["verify"],
        f"You left out drafting: {k} drafts at {c:g} of a step each.", "no_draft",
        kind="miscounted_term")
    add("speedup_low", (1 + a) / s["cost"],
        f"That is one draft's worth of tokens (1 + α). With k = {k} drafts the expected tokens are "
        f"1 + α + … + α^{k}.", "one_draft", kind="wrong_scope")

    be = s["break_even"].value
    add("break_even", _break_even(k, 1 + k * c) * 100,
        "That is the break-even with a free verify pass (batch 1). At this batch the verify pass "
        "is past the knee and costs more, so the break-even acceptance is higher.", "flat_verify",
        kind="misread_mechanism")
    add("break_even", (s["cost"] - 1) * 100,
        f"Solving 1 + α = cost treats the step as one draft. With k = {k}, solve "
        f"1 + α + … + α^{k} = {s['cost']:.2f}.", "one_draft", kind="wrong_scope")
    add("break_even", (s["cost"] - 1) / k * 100,
        "Solving 1 + kα = cost assumes every draft is judged on its own; acceptance stops at the "
        "first rejection.", "linear_e", kind="mean_vs_tail")
    add("break_even", be / 2, "Half the reference: solve E(α, k) = step cost directly.", "half",
        kind="misread_mechanism")

    add("tail_ms", s["plain_ms"],
        "That is the plain step. With speculation on, this request pays the whole longer step "
        "and still gets about one token from it.", "plain", kind="misread_mechanism")
    add("tail_ms", t * (1 + k * c) / s["e_tail"],
        "You left out the growth of the verify pass: past the knee it costs more than a plain "
        "step.", "flat_verify", kind="misread_mechanism")
    add("tail_ms", s["step_ms"] / (k + 1),
        f"That assumes all {k} drafts are accepted. This request's drafts almost never are.",
        "all_accepted", kind="mean_vs_tail")
    add("tail_ms", s["high_ms"],
        "That is the time per token of a high-acceptance request; the question is about the one "
        "whose drafts are rejected.", "high_alpha", kind="wrong_scope")

    add("alpha_measured", s["naive_ratio"],
        "accepted / draft tokens is not α: positions after the first rejection are drafted but "
        "never judged, so they pull the ratio down. Use the first-position counter over the "
        "drafts.", "naive_ratio", kind="mean_vs_tail")
    add("alpha_measured", s["mean_accepted"],
        "accepted / drafts is the mean number of accepted drafts per step, E − 1, not the "
        "per-token acceptance probability.", "mean_accepted", kind="mean_vs_tail")
    add("alpha_measured", s["tau"],
        "1 + accepted / drafts is the mean acceptance length τ (tokens per step), not α.", "tau",
        kind="mean_vs_tail")
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [Holds(p["alpha_low"] < p["alpha_high"], "the low acceptance is below the high one")]
