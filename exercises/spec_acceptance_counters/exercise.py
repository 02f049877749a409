"""Q20: acceptance from counter snapshots, and a fair baseline.

A scraper saves the engine's cumulative speculative-decoding counters (drafts D, draft tokens T,
accepted tokens A, accepted per draft position) every ten minutes. One window holds a benchmark
run; the others hold the usual trouble: a window whose steps proposed fewer than k tokens, a
window with no drafts at all, a window across a restart (in some variants the restart hides
behind counters that kept rising) and an ordinary window. The parts: acceptance rate and mean
acceptance length of the benchmark window from the deltas; which windows must be thrown away;
steps per request without the EOS trap; the calculator as code; and what a matched-load baseline
must hold equal and measure.

The whole series is part of the variant, so the statement's table, the code part's public example
and the answers all come from the same numbers.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import model
from exercises.drawing import draw_sensible
from exercises.feasibility import NODE_GPUS, UNSTATED_WEIGHT_BYTES, Claim, Fits, HasFeature, check
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

START = 1_717_000_000.0  # process start time of the first process (Unix seconds)
T0 = START + 20_000  # the first scrape (Unix seconds)
INTERVAL = 600  # seconds between scrapes
RESTART_AFTER = 240  # the restart happens this long after the scrape that opens its window
WINDOW_KINDS = ("bench", "short", "zero", "reset", "clean")
WINDOW_IDS = ("w1", "w2", "w3", "w4", "w5")

MODELS = ("Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B")
GPUS = ("H100 SXM", "H200 SXM", "B200")
# No model above ships an MTP module (DeepSeek-V3 does), so an MTP drafter is not among them.
DRAFTERS = ("EAGLE-3 head", "small draft model")

# The facts note's window: k = 3, dD = 10,000, dT = 30,000, dA = 18,000 (alpha 0.60, tau 2.80);
# a shortfall of 600 draft tokens; D falling from 1.2 M to 40 k across a restart. The benchmark is
# 2,000 short-answer requests (5 verify steps each) whose clients received 27,600 tokens.
RESTART = T0 + 3 * INTERVAL + RESTART_AFTER  # the canonical restart, inside W4

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "drafter": "EAGLE-3 head",
    "k": 3,
    "order": ["bench", "short", "zero", "reset", "clean"],
    "n_requests": 2000,
    "client_tokens": 27600,
    "snapshots": [
        {"t": T0 + 0, "start_time": START, "drafts": 1_180_000, "draft_tokens": 3_538_200,
         "accepted": 1_947_000, "accepted_per_pos": [780_000, 650_000, 517_000]},
        {"t": T0 + 600, "start_time": START, "drafts": 1_190_000, "draft_tokens": 3_568_200,
         "accepted": 1_965_000, "accepted_per_pos": [787_500, 656_000, 521_500]},
        {"t": T0 + 1200, "start_time": START, "drafts": 1_200_000, "draft_tokens": 3_597_600,
         "accepted": 1_982_000, "accepted_per_pos": [794_700, 661_600, 525_700]},
        {"t": T0 + 1800, "start_time": START, "drafts": 1_200_000, "draft_tokens": 3_597_600,
         "accepted": 1_982_000, "accepted_per_pos": [794_700, 661_600, 525_700]},
        {"t": T0 + 2400, "start_time": RESTART, "drafts": 40_000, "draft_tokens": 119_700,
         "accepted": 70_000, "accepted_per_pos": [29_000, 23_000, 18_000]},
        {"t": T0 + 3000, "start_time": RESTART, "drafts": 52_000, "draft_tokens": 155_700,
         "accepted": 89_800, "accepted_per_pos": [37_400, 29_600, 22_800]},
    ],
}


# ----------------------------------------------------------------------------------------------
# Building a series


def split_per_position(accepted: int, drafts: int, k: int) -> list[int]:
    """Accepted drafts per position, non-increasing, each <= drafts, summing to `accepted`.

    Uses one conditional acceptance rate c for every position (dA_j = dD * c^(j+1)), found by
    bisection, then rounds down and hands the remainder to the first positions.
    """
    assert 0 <= accepted <= k * drafts
    lo, hi = 0.0, 1.0
    for _ in range(60):
        c = (lo + hi) / 2
        if sum(drafts * c ** (j + 1) for j in range(k)) < accepted:
            lo = c
        else:
            hi = c
    per = [math.floor(drafts * lo ** (j + 1)) for j in range(k)]
    rest = accepted - sum(per)
    j = 0
    while rest > 0:
        if per[j] < drafts and (j == 0 or per[j] < per[j - 1]):
            per[j] += 1
            rest -= 1
        j = (j + 1) % k
    return per


def _add(s: dict[str, Any], t: float, dd: int, dt: int, da: int, k: int) -> dict[str, Any]:
    per = split_per_position(da, dd, k) if dd else [0] * k
    return {"t": t, "start_time": s["start_time"], "drafts": s["drafts"] + dd,
            "draft_tokens": s["draft_tokens"] + dt, "accepted": s["accepted"] + da,
            "accepted_per_pos": [a + b for a, b in zip(s["accepted_per_pos"], per, strict=True)]}


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        p = _draw(rng)
        return p

    return draw_sensible(rng, draw, is_sensible)


def _draw(rng: random.Random) -> dict[str, Any]:
    k = rng.choice((2, 3, 4))
    order = ["bench", *rng.sample(["short", "zero", "reset", "clean"], 4)]
    if rng.random() < 0.35:
        # The restart comes first, right after a deployment: the old process had drafted little,
        # so the new one's counters are already higher and only start_time shows the restart.
        rest = [w for w in order if w != "reset"]
        order = ["reset", *rest]
    steps = rng.choice((4, 5, 6, 8))
    n = rng.choice((1000, 1500, 2000, 2500))
    bench_d = steps * n
    alpha = rng.choice((0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8))
    hidden = order[0] == "reset"
    if hidden:
        d0 = rng.choice((1500, 2000, 3000, 4000))
    else:
        d0 = rng.randrange(80, 160) * 10_000
    alpha0 = min(0.85, max(0.3, alpha + rng.choice((-0.08, -0.06, 0.06, 0.08))))
    t0 = k * d0 - (0 if hidden else rng.choice((0, 1800, 4200)))
    a0 = round(alpha0 * t0)
    snaps = [{"t": T0 + 0, "start_time": START, "drafts": d0, "draft_tokens": t0, "accepted": a0,
              "accepted_per_pos": split_per_position(a0, d0, k)}]
    bench_a = round(alpha * k * bench_d)
    discard_mean = rng.choice((0.6, 0.8, 1.0, 1.2, 1.4, 1.6))
    client_tokens = n + bench_d + bench_a - round(discard_mean * n)
    for i, kind in enumerate(order):
        s, t = snaps[-1], T0 + (i + 1) * INTERVAL
        if kind == "bench":
            snaps.append(_add(s, t, bench_d, k * bench_d, bench_a, k))
        elif kind == "zero":
            snaps.append({**s, "t": t, "accepted_per_pos": list(s["accepted_per_pos"])})
        elif kind in ("short", "clean"):
            dd = rng.randrange(6, 25) * 1000
            a = rng.choice((0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8))
            missing = rng.choice((300, 600, 900, 1200)) if kind == "short" else 0
            dt = k * dd - missing
            snaps.append(_add(s, t, dd, dt, round(a * dt), k))
        else:  # reset: the new process's counters since it started
            if hidden:
                dd = rng.randrange(2, 6) * 1000 + s["drafts"]
            else:
                dd = rng.randrange(2, 8) * 10_000
            a = rng.choice((0.5, 0.55, 0.6, 0.65, 0.7))
            dt = k * dd - rng.choice((0, 300))
            da = round(a * dt)
            restart = T0 + i * INTERVAL + RESTART_AFTER
            snaps.append({"t": t, "start_time": restart, "drafts": dd, "draft_tokens": dt,
                          "accepted": da, "accepted_per_pos": split_per_position(da, dd, k)})
    return {
        "model": rng.choice(MODELS),
        "gpu": rng.choice(GPUS),
        "drafter": rng.choice(DRAFTERS),
        "k": k,
        "order": order,
        "n_requests": n,
        "client_tokens": client_tokens,
        "snapshots": snaps,
    }


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    s = solve(p)
    snaps = p["snapshots"]
    ok = all(b["drafts"] >= 0 for b in snaps) and s["discarded_mean"] >= 0.3
    # The bench window's numbers differ from the cumulative ones, so that slip is visible.
    ok = ok and abs(s["cum_rate"] / s["acceptance_rate"].value - 1) > 0.04
    ok = ok and abs(s["cum_length"] / s["accept_length"].value - 1) > 0.04
    # The token-based step estimates are visibly off (the EOS lesson is not lost in rounding).
    steps = s["steps_per_request"].value
    ok = ok and abs(s["naive_steps"] / steps - 1) > 0.01 and abs(s["no_prefill_steps"] / steps
                                                                 - 1) > 0.02
    # The restart is a real restart: either the counters drop or (hidden) they all rise.
    r = p["order"].index("reset")
    before, after = snaps[r], snaps[r + 1]
    ok = ok and (_rising(before, after) == (r == 0))
    return ok


# ----------------------------------------------------------------------------------------------
# The reference


def _rising(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether no counter went down from a to b (per-position counters included)."""
    return all(b[c] >= a[c] for c in ("drafts", "draft_tokens", "accepted")) and all(
        y >= x for x, y in zip(a["accepted_per_pos"], b["accepted_per_pos"], strict=True))


def _window(a: dict[str, Any], b: dict[str, Any]) -> dict[str, int]:
    return {c: b[c] - a[c] for c in ("drafts", "draft_tokens", "accepted")}


def solve(p: dict[str, Any]) -> dict[str, Any]:
    k, snaps, order = p["k"], p["snapshots"], p["order"]
    n, g = p["n_requests"], p["client_tokens"]
    idx = {kind: i for i, kind in enumerate(order)}
    b = idx["bench"]
    w = _window(snaps[b], snaps[b + 1])
    dd, dt, da = w["drafts"], w["draft_tokens"], w["accepted"]
    alpha = da / dt
    tau = 1 + da / dd
    after = snaps[b + 1]
    cum_rate = after["accepted"] / after["draft_tokens"]
    cum_length = 1 + after["accepted"] / after["drafts"]
    steps = dd / n
    discarded = n + dd + da - g  # tokens the counters accepted that no client received
    per_pos = [x - y for x, y in zip(snaps[b + 1]["accepted_per_pos"],
                                     snaps[b]["accepted_per_pos"], strict=True)]
    cond, prev = [], dd
    for x in per_pos:
        cond.append(x / prev)
        prev = x

    sh = _window(snaps[idx["short"]], snaps[idx["short"] + 1])
    missing = k * sh["drafts"] - sh["draft_tokens"]
    r = idx["reset"]
    hidden = _rising(snaps[r], snaps[r + 1])
    discard = sorted(WINDOW_IDS[i] for i, kind in enumerate(order) if kind in ("zero", "reset"))

    rows = ["| snapshot | scraped at | process start (Unix s) | drafts D | draft tokens T | accepted A | "
            "accepted per position |",
            "|---|---|---|---|---|---|---|"]
    for i, s in enumerate(snaps):
        per = " / ".join(f"{x:,}" for x in s["accepted_per_pos"])
        rows.append(f"| s{i} | +{s['t'] - T0:,.0f} s | {s['start_time']:.0f} | {s['drafts']:,} | "
                    f"{s['draft_tokens']:,} | {s['accepted']:,} | {per} |")

    wrows = ["| window | dD | dT | dA | verdict |", "|---|---|---|---|---|"]
    verdicts = {
        "bench": "kept: the benchmark run",
        "short": f"kept, flagged: dT is {missing:,} short of k·dD",
        "zero": "**discarded**: dD = 0, acceptance undefined",
        "reset": ("**discarded**: start_time changed (counters rose anyway)" if hidden
                  else "**discarded**: start_time changed and the counters fell"),
        "clean": "kept",
    }
    for i, kind in enumerate(order):
        ww = _window(snaps[i], snaps[i + 1])
        wrows.append(f"| W{i + 1} (s{i} → s{i + 1}) | {ww['drafts']:,} | {ww['draft_tokens']:,} | "
                     f"{ww['accepted']:,} | {verdicts[kind]} |")

    return {
        # Part answers.
        "acceptance_rate": Quantity(alpha, ""),
        "accept_length": Quantity(tau, ""),
        "discard": discard,
        "steps_per_request": Quantity(steps, ""),
        "calculator": "code/reference.py",
        "baseline": MODEL_ANSWER,
        # Givens the statement prints.
        "table": "\n".join(rows),
        "n_snapshots": len(snaps),
        "bench_window": f"W{b + 1}",
        "bench_from": f"s{b}",
        "bench_to": f"s{b + 1}",
        # Intermediates for the solution.
        "dd": dd, "dt": dt, "da": da,
        "alpha": alpha, "alpha_pct": alpha * 100, "tau": tau,
        "per_pos_deltas": " / ".join(f"{x:,}" for x in per_pos),
        "per_pos_cond": " / ".join(f"{x:.3f}" for x in cond),
        "cum_rate": cum_rate, "cum_length": cum_length,
        "after_a": after["accepted"], "after_t": after["draft_tokens"], "after_d": after["drafts"],
        "window_table": "\n".join(wrows),
        "discard_md": ", ".join(w.upper() for w in discard),
        "short_window": f"W{idx['short'] + 1}",
        "short_dd": sh["drafts"], "short_dt": sh["draft_tokens"], "short_kdd": k * sh["drafts"],
        "missing": missing,
        "missing_steps_min": math.ceil(missing / (k - 1)),
        "short_steps_md": (
            f"exactly {missing:,} steps proposed one token instead of two" if k == 2 else
            f"between {math.ceil(missing / (k - 1)):,} and {missing:,} steps were short"),
        "zero_window": f"W{idx['zero'] + 1}",
        "reset_window": f"W{r + 1}",
        "reset_hidden": hidden,
        "reset_note": (
            "Every counter *rose* across it, so a check for negative deltas alone would have "
            "kept it; only the process start time gives the restart away."
            if hidden else
            f"D fell from {snaps[r]['drafts']:,} to {snaps[r + 1]['drafts']:,}: a negative "
            "delta, and the process start time changed as well."),
        "clean_window": f"W{idx['clean'] + 1}",
        "steps": steps,
        "discarded": discarded,
        "discarded_mean": discarded / n,
        "step_tokens": dd + da,
        "delivered": g - n,
        "delivered_per_step": (g - n) / dd,
        "naive_steps": g / (n * tau),
        "no_prefill_steps": (g - n) / (n * tau),
        "tokens_per_request": g / n,
    }


# One sentence per line: the key-point matcher cuts answers at line breaks.
MODEL_ANSWER = """\
**Hold everything equal except speculation.** Same GPUs and model weights, same engine version and flags, same sampling settings (temperature and top-p change acceptance), the same prompts, and the same output lengths: fix them with `ignore_eos` and `max_tokens`, or replay the recorded outputs, otherwise one side does less work.
Drive both with the same arrival process (the same request-rate trace or the same concurrency) and exclude the warm-up.
Give both the same memory budget: the drafter's weights and KV come out of the target's KV pool, so report the smaller pool (it caps the batch).

**Measure what users feel, across load.** TPOT or inter-token latency at p50 and p99, TTFT at p50 and p99, output tokens per second per GPU, and goodput at the latency SLO, at several request rates from light to saturated.
Speculation wins most at small batches and its gain shrinks (or turns into a loss) as the batch grows and the GPU becomes compute-bound, so one number at one load is not a speedup claim.

**Report acceptance from the same run.** Snapshot the counters before and after each run, take the deltas, drop windows across restarts, and quote the acceptance rate and mean acceptance length next to the latency numbers, so a later regression can be traced to the drafter or to the load.
"""


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    k = p["k"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near, merge_floor=1e-9).add

    dd, dt, da = s["dd"], s["dt"], s["da"]
    add("acceptance_rate", s["cum_rate"],
        f"That is A/T from the totals at {s['bench_to']}, which mixes in every request since the "
        "process started. The counters are cumulative: take the differences over the window.",
        "cumulative", kind="misread_mechanism")
    add("acceptance_rate", da / dd,
        "That is accepted tokens per draft (per verify step). The acceptance rate is per drafted "
        "token: dA / dT.", "per_draft", kind="wrong_scope")
    add("acceptance_rate", (da + dd) / (dt + dd),
        "You counted the bonus token as an accepted draft. It is produced by the target model on "
        "every step, whatever the drafter proposed: the rate is dA / dT.", "bonus_in_rate",
        kind="miscounted_term")
    add("acceptance_rate", 1 - s["alpha"],
        "That is the share of draft tokens that were rejected.", "rejection_rate", kind="inverted")

    add("accept_length", da / dd,
        "You left out the bonus token: every verify step emits the accepted drafts plus one token "
        "from the target model, so the length is 1 + dA / dD.", "no_bonus", kind="miscounted_term")
    add("accept_length", 1 + s["alpha"],
        f"1 + α would be right only if each step drafted one token. With k = {k} the length is "
        "1 + dA / dD (tokens accepted per step, plus the bonus).", "one_plus_alpha",
        kind="misread_mechanism")
    add("accept_length", s["cum_length"],
        f"That uses the totals at {s['bench_to']}, not the window's deltas.", "cumulative",
        kind="misread_mechanism")
    add("accept_length", s["delivered_per_step"],
        "That is what the clients received per step. The counters also count drafts accepted "
        "after the stop token, which were thrown away; the mean acceptance length is the "
        "engine's count, 1 + dA / dD.", "delivered", kind="misread_mechanism")

    n, g = p["n_requests"], p["client_tokens"]
    add("steps_per_request", s["naive_steps"],
        "Dividing the tokens the clients received by τ is biased twice: the first token of "
        "each reply comes from prefill, not a verify step, and τ counts drafts accepted after "
        "the stop token that never reached the client. Every step drafts, so use dD / N.",
        "tokens_over_tau", kind="miscounted_term")
    add("steps_per_request", s["no_prefill_steps"],
        "You removed the prefill token, but τ still counts the accepted drafts the stop threw "
        "away, so dividing delivered tokens by τ undercounts the steps. Every step drafts once "
        "per request: dD / N.", "eos_bias", kind="misread_mechanism")
    add("steps_per_request", g / n,
        "That is tokens per request, not verify steps: each step emits about τ tokens.",
        "tokens_per_request", kind="wrong_scope")
    add("steps_per_request", dt / n,
        f"That is draft tokens per request; each verify step drafts up to k = {k} of them.",
        "draft_tokens", kind="wrong_scope")
    add("steps_per_request", (g - n) / n / (k + 1),
        f"That assumes every step emits k + 1 = {k + 1} tokens, i.e. every draft accepted.",
        "all_accepted", kind="mean_vs_tail")

    ref = s["discard"]
    sw, zw, rw = s["short_window"].lower(), s["zero_window"].lower(), s["reset_window"].lower()
    choice: list[tuple[list[str], str, str]] = [
        (sorted({*ref, sw}),
         f"{s['short_window']} is short by {s['missing']:,} draft tokens, which is a flag (steps "
         "near max_tokens or the context limit proposed fewer than k), not a reason to drop it: "
         "dA / dT and 1 + dA / dD are still well defined.", "drop_short"),
        (sorted(set(ref) - {rw}),
         f"{s['reset_window']} spans a restart: the process start time changed"
         + (", even though every counter rose, so the later snapshot counts a different "
            "process." if s["reset_hidden"] else ", and the counters fell.")
         + " Its deltas mean nothing.", "keep_reset"),
        (sorted(set(ref) - {zw}),
         f"{s['zero_window']} has no drafts (dD = 0). Acceptance there is 0/0, undefined, not "
         "zero; reporting it would drag an average down.", "keep_zero"),
    ]
    r = p["order"].index("reset")
    if r + 1 < len(p["order"]) and p["order"][r + 1] in ("clean", "short", "bench"):
        nxt = WINDOW_IDS[r + 1]
        choice.append((sorted({*ref, nxt}),
                       f"{nxt.upper()} starts after the restart: both of its snapshots come from "
                       "the new process, so its deltas are clean.", "drop_after_reset"))
    seen: list[list[str]] = [ref]
    for answer, feedback, name in choice:
        if answer and answer not in seen:  # e.g. the window after the restart is the short one
            seen.append(answer)
            # Keeping the 0/0 window averages in an undefined rate; the others misread the counters.
            kind = "mean_vs_tail" if name == "keep_zero" else "misread_mechanism"
            out.append(Mistake("discard", answer, feedback, name, kind=kind))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    claims: list[Claim] = [
        Fits("the target's weights", p["gpu"], NODE_GPUS,
             model(p["model"]).weight_bytes(UNSTATED_WEIGHT_BYTES)),
    ]
    if p["drafter"] == "MTP module":
        claims.append(HasFeature(p["model"], "mtp", "an MTP drafter"))
    return claims
