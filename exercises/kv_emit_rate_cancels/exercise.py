"""Q08: disaggregated KV transfer. Divide the bytes by the prefill time and the prompt length cancels.

A prefill GPU turns n prompt tokens into n * kappa bytes of KV (kappa = KV bytes per token) in
n * 2P / (F * MFU) seconds (P = active parameters, F = the GPU's dense rate at the prefill
precision; each GPU of a TP-N instance does 1/N of both), so the sustained rate it must ship is

    R = kappa * F * MFU / (2P)        bytes per second per GPU, whatever n and N are.

Attention is the only place n comes back: its causal FLOPs, 2 * L * n^2 * d_q for the prompt, add
2 * L * n * d_q to the per-token cost, so R(n) = kappa * F * MFU / (2P + 2 L n d_q) only FALLS with n.
The parts: the formula (with n and N offered as symbols so the cancellation is visible), the rate
for the team's own deployment, the same with attention at a long prompt, the fastest row of a table
of model x GPU x precision deployments, which rows break the per-GPU link, and which levers raise R.

Every model, GPU and link figure comes from exercises/catalog; the MFU, the prompt length and the
link layout are keys of the variant, printed by the statement.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, link, model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext, check
from exercises.slips import Slips, near, tolerances, unusable
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

ROW_IDS = ("a", "b", "c", "d", "e", "f")

# Models a row may use, with the GPUs per prefill instance the statement shows (a distractor: it
# cancels). Sliding-window models are left out: their KV per token depends on the prompt length.
# DeepSeek-V3's 32 is DeepSeek's own prefill unit (4 nodes, EP32).
INSTANCE_GPUS: dict[str, int] = {
    "Llama-3.1-8B": 1,
    "Llama-2-7B": 1,
    "Qwen3-30B-A3B": 1,
    "Mixtral-8x7B": 2,
    "Llama-3.1-70B": 8,
    "Qwen2.5-72B": 8,
    "Llama-3.1-405B": 8,
    "DeepSeek-V3": 32,
}
# Row A (the team's own deployment) is a dense model with per-head K/V, so its attention FLOPs are
# the plain 2 * L * n^2 * d_q of part 3.
ROW_A_MODELS = ("Llama-3.1-8B", "Llama-2-7B", "Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-405B")
GPUS = ("H100 SXM", "H200 SXM", "B200", "B200 (GB200 NVL72)")
PRECISIONS = ("BF16", "FP8")
# (link, GPUs sharing one port): one NIC per GPU on the HGX rails, or an older Ethernet cluster
# with one 100GbE port per GPU, per two or per four GPUs.
LINKS: tuple[tuple[str, int], ...] = (
    ("ConnectX-7", 1),
    ("ConnectX-8", 1),
    ("100GbE", 1),
    ("100GbE", 2),
    ("100GbE", 4),
)
MFUS = (0.4, 0.45, 0.5, 0.55, 0.6)
LONG_PROMPTS = (16_384, 32_768, 65_536, 131_072)

# The levers of part 6: options that raise the per-GPU rate, and those that do not.
LEVERS_UP = ("fp8", "faster_gpu", "mha", "fewer_active", "better_mfu")
LEVERS_NOT = ("longer_prompt", "more_tp", "fp8_kv", "mla")

CANONICAL: dict[str, Any] = {
    # rows A..F: (model, GPU, prefill GEMM precision); the KV cache is BF16 in every row
    "rows": [
        ["Llama-3.1-70B", "H100 SXM", "BF16"],
        ["DeepSeek-V3", "H100 SXM", "FP8"],
        ["Qwen3-30B-A3B", "H100 SXM", "BF16"],
        ["Llama-2-7B", "H100 SXM", "BF16"],
        ["Qwen3-30B-A3B", "B200", "FP8"],
        ["Llama-2-7B", "B200", "FP8"],
    ],
    "mfu": 0.5,  # prefill MFU, the same for every row [A]
    "link": "ConnectX-7",
    "gpus_per_nic": 1,  # one 400 Gb/s NIC per GPU (HGX rails)
    "long_prompt": 32_768,  # tokens, for part 3
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    pool = [(m, g, pr) for m in INSTANCE_GPUS for g in GPUS for pr in PRECISIONS]

    def draw(rng: random.Random) -> dict[str, Any]:
        first = [rng.choice(ROW_A_MODELS), rng.choice(GPUS), rng.choice(PRECISIONS)]
        others = rng.sample([r for r in pool if list(r) != first], 5)
        link_name, share = rng.choice(LINKS)
        return {
            "rows": [first, *[list(r) for r in others]],
            "mfu": rng.choice(MFUS),
            "link": link_name,
            "gpus_per_nic": share,
            "long_prompt": rng.choice(LONG_PROMPTS),
        }

    return draw_sensible(rng, draw, is_sensible, tries=5000)


def is_sensible(p: dict[str, Any]) -> bool:
    """Rows are distinct; no row sits within 15 % of the link budget (the verdict is not a rounding
    question); some rows break the link and some do not; the fastest row leads the next by 5 %;
    attention moves part 3 at least 5 % away from part 2."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    keys = [tuple(r) for r in p["rows"]]
    if len(set(keys)) != len(keys) or model(keys[0][0]).is_mla:
        return False
    s = solve(p)
    budget = s["budget_gbs"]
    rates = sorted(r["rate_gbs"] for r in s["row_data"])
    if any(abs(math.log(r / budget)) < math.log(1.15) for r in rates):
        return False
    if not 1 <= len(s["breakers"]) <= 5:
        return False
    return rates[-1] >= 1.05 * rates[-2] and s["rate_long"].value <= 0.95 * s["rate_a"].value


# ----------------------------------------------------------------------------------------------
# The reference


def _rate(kappa: int, flops: float, mfu: float, active: float, extra_per_token: float = 0.0) -> float:
    """Bytes per second one prefill GPU produces: kappa bytes per token over the time one token's
    FLOPs take on one GPU (the GPU count cancels: each GPU does 1/N of the bytes and the work)."""
    return kappa * flops * mfu / (2 * active + extra_per_token)


def _row(r: list[str], mfu: float, letter: str) -> dict[str, Any]:
    name, gpu_name, precision = r
    m, g = model(name), gpu(gpu_name)
    flops = g.bf16_flops if precision == "BF16" else g.fp8_flops
    assert flops is not None
    # The statement shows active parameters to 0.01 B; the answers use that figure.
    active_b = round(m.active_params / 1e9, 2)
    total_b = round(m.params / 1e9, 2)
    kappa = m.kv_bytes_per_token(2)
    rate = _rate(kappa, flops, mfu, active_b * 1e9)
    return {
        "letter": letter.upper(),
        "id": letter,
        "model": name,
        "gpu": gpu_name,
        "precision": precision,
        "tflops": flops / 1e12,
        "kappa": kappa,
        "active_b": active_b,
        "total_b": total_b,
        "is_moe": m.is_moe,
        "attention": m.attention.upper(),
        "n_gpus": INSTANCE_GPUS[name],
        "rate_gbs": rate / 1e9,
        "flop_per_byte": 2 * active_b * 1e9 / kappa,
    }


def _fmt_b(x: float) -> str:
    return f"{x:,.2f} B"


def solve(p: dict[str, Any]) -> dict[str, Any]:
    mfu = p["mfu"]
    rows = [_row(r, mfu, ROW_IDS[i]) for i, r in enumerate(p["rows"])]
    nic = link(p["link"])
    budget = nic.bytes_per_s / p["gpus_per_nic"]

    # -- row A, the team's own deployment, and the same with attention at a long prompt ----------
    a = rows[0]
    ma = model(a["model"])
    n = p["long_prompt"]
    attn_per_token = 2 * ma.layers * n * ma.q_dim  # causal: 2·L·n²·d_q over the n tokens
    rate_long = _rate(a["kappa"], a["tflops"] * 1e12, mfu, a["active_b"] * 1e9, attn_per_token)
    rate_8k = _rate(a["kappa"], a["tflops"] * 1e12, mfu, a["active_b"] * 1e9,
                    2 * ma.layers * 8192 * ma.q_dim)
    rate_128k = _rate(a["kappa"], a["tflops"] * 1e12, mfu, a["active_b"] * 1e9,
                      2 * ma.layers * 131_072 * ma.q_dim)
    # The prompt that carries the "gigabytes per request" impression: what row A ships for it.
    request_gb = n * a["kappa"] / 1e9
    prefill_s = n * (2 * a["active_b"] * 1e9 + attn_per_token) / (
        a["n_gpus"] * a["tflops"] * 1e12 * mfu)

    # -- the table ------------------------------------------------------------------------------
    fastest = max(rows, key=lambda r: r["rate_gbs"])
    ranked = sorted(rows, key=lambda r: -r["rate_gbs"])
    breakers = [r["id"] for r in rows if r["rate_gbs"] * 1e9 > budget]
    for r in rows:
        r["share_pct"] = r["rate_gbs"] * 1e9 / budget * 100
        r["verdict"] = "breaks it" if r["id"] in breakers else "fits"

    s: dict[str, Any] = {
        "rate_formula": "kappa*F*M/(2*P)",
        "rate_a": Quantity(a["rate_gbs"], "GB/s"),
        "rate_long": Quantity(rate_long / 1e9, "GB/s"),
        "rate_worst": Quantity(fastest["rate_gbs"], "GB/s"),
        "breakers": breakers,
        "levers": list(LEVERS_UP),
        # givens the statement prints
        "mfu_pct": mfu * 100,
        "link_gbit": nic.gbit_per_s,
        "link_gbs": nic.gb_per_s,
        "budget_gbs": budget / 1e9,
        "link_layout": ("one per GPU" if p["gpus_per_nic"] == 1
                        else f"one port shared by {p['gpus_per_nic']} GPUs"),
        "rows_table": _rows_table(rows),
        "gpu_table": _gpu_table(rows),
        "a_model": a["model"],
        "a_gpu": a["gpu"],
        "a_precision": a["precision"],
        "a_layers": ma.layers,
        "a_q_dim": ma.q_dim,
        "a_q_heads": ma.q_heads,
        "a_head_dim": ma.head_dim,
        "a_n_gpus": a["n_gpus"],
        # intermediates for the solution
        "row_data": rows,
        "a_kappa": a["kappa"],
        "a_active_b": a["active_b"],
        "a_tflops": a["tflops"],
        "a_flop_per_byte": a["flop_per_byte"],
        "a_share_pct": a["share_pct"],
        "a_instance_gbs": a["rate_gbs"] * a["n_gpus"],
        "attn_per_token_g": attn_per_token / 1e9,
        "linear_per_token_g": 2 * a["active_b"],
        "attn_pct": attn_per_token / (2 * a["active_b"] * 1e9) * 100,
        "long_drop_pct": (1 - rate_long / (a["rate_gbs"] * 1e9)) * 100,
        "rate_8k": rate_8k / 1e9,
        "rate_128k": rate_128k / 1e9,
        "request_gb": request_gb,
        "prefill_s": prefill_s,
        "fastest": fastest["letter"],
        "fastest_model": fastest["model"],
        "fastest_gpu": fastest["gpu"],
        "fastest_precision": fastest["precision"],
        "fastest_kappa": fastest["kappa"],
        "fastest_active_b": fastest["active_b"],
        "fastest_tflops": fastest["tflops"],
        "fastest_share_pct": fastest["share_pct"],
        "second": ranked[1]["letter"],
        "second_gbs": ranked[1]["rate_gbs"],
        "slowest": ranked[-1]["letter"],
        "slowest_gbs": ranked[-1]["rate_gbs"],
        "spread": fastest["rate_gbs"] / ranked[-1]["rate_gbs"],
        "verdict_table": _verdict_table(rows, budget / 1e9, mfu),
        "breakers_text": _phrase([r["letter"] for r in rows if r["id"] in breakers], "emits",
                                 "emit"),
        "fits_text": _phrase([r["letter"] for r in rows if r["id"] not in breakers], "fits",
                             "fit"),
    }
    return s


def _phrase(letters: list[str], one: str, many: str) -> str:
    """'row F emits' / 'rows D, E and F emit' ('no row' while generate() filters a draw)."""
    if not letters:
        return f"no row {one}"
    if len(letters) == 1:
        return f"row {letters[0]} {one}"
    return f"rows {', '.join(letters[:-1])} and {letters[-1]} {many}"


def _rows_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| Row | Model | KV per token κ (BF16) | Active parameters P | GPU | Prefill GEMMs | "
        "GPUs per prefill instance |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        moe = f" (of {_fmt_b(r['total_b'])}, MoE)" if r["is_moe"] else ""
        lines.append(
            f"| {r['letter']} | {r['model']} ({r['attention']}) | {r['kappa']:,} B | "
            f"{_fmt_b(r['active_b'])}{moe} | {r['gpu']} | {r['precision']} | {r['n_gpus']} |"
        )
    return "\n".join(lines)


def _gpu_table(rows: list[dict[str, Any]]) -> str:
    names = list(dict.fromkeys(r["gpu"] for r in rows))
    lines = ["| GPU | Dense BF16 | Dense FP8 |", "|---|---|---|"]
    for name in names:
        g = gpu(name)
        lines.append(f"| {name} | {g.bf16_dense_tflops:,g} TFLOPS | {g.fp8_dense_tflops:,g} TFLOPS |")
    return "\n".join(lines)


def _verdict_table(rows: list[dict[str, Any]], budget_gbs: float, mfu: float) -> str:
    lines = [
        "| Row | 2P/κ (FLOP per KV byte) | F·MFU | R = F·MFU / (2P/κ) | Share of the link | "
        "Verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['letter']} | {r['flop_per_byte']:,.0f} | {r['tflops'] * mfu:,.4g} TFLOPS | "
            f"{r['rate_gbs']:.3g} GB/s | {r['share_pct']:.0f} % of {budget_gbs:.3g} GB/s | "
            f"{r['verdict']} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    rows = s["row_data"]
    a = rows[0]
    mfu = p["mfu"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=near, merge=near, merge_floor=1e-9, skip=unusable).add

    # -- the formula ----------------------------------------------------------------------------
    out += [
        Mistake("rate_formula", "n*kappa",
                "That is the bytes one request leaves behind, not a rate. Divide by the prefill "
                "time, n·2P/(F·M) on one GPU, and see what happens to n.", "bytes_not_rate",
                kind="wrong_scope"),
        Mistake("rate_formula", "kappa*F*M/P",
                "A token costs 2 FLOPs per active parameter (a multiply and an add): 2P, not P.",
                "one_flop", kind="flop_counting"),
        Mistake("rate_formula", "kappa*F/(2*P)",
                "You ran the GPU at 100 % of peak. The prefill runs at MFU M, so multiply by M.",
                "no_mfu", kind="peak_vs_achievable"),
        Mistake("rate_formula", "N*kappa*F*M/(2*P)",
                "That is the whole instance. Each of the N GPUs holds 1/N of the KV heads and does "
                "1/N of the FLOPs, so per GPU the N cancels.", "instance", kind="forgot_tp"),
        Mistake("rate_formula", "kappa*F*M/(2*P*N)",
                "You divided by N twice. Each GPU does 1/N of the FLOPs and ships 1/N of the bytes; "
                "the two N cancel.", "double_n", kind="forgot_tp"),
        Mistake("rate_formula", "2*P/(kappa*F*M)",
                "Upside down: that is seconds per byte. The rate is bytes over time.", "inverted",
                kind="inverted"),
        Mistake("rate_formula", "kappa*F*M/(6*P)",
                "6P per token is the training rule (forward and backward). Prefill is a forward "
                "pass: 2P.", "training", kind="flop_counting"),
    ]

    # -- row A ----------------------------------------------------------------------------------
    ra = s["rate_a"].value
    if a["n_gpus"] > 1:
        add("rate_a", ra * a["n_gpus"],
            f"That is the whole {a['n_gpus']}-GPU instance. Per GPU the count cancels: each GPU "
            "produces 1/N of the bytes with 1/N of the work.", "instance", kind="forgot_tp")
        add("rate_a", ra / a["n_gpus"],
            f"You divided the bytes by {a['n_gpus']} GPUs but gave the work to one GPU (or divided "
            "twice). The GPU count cancels.", "double_n", kind="forgot_tp")
    add("rate_a", ra * 8,
        "Eight times the reference: that is gigabits per second. The part asks GB/s.", "gbit",
        kind="bits_vs_bytes")
    add("rate_a", ra / mfu,
        f"You ran prefill at 100 % of peak. The stated MFU is {s['mfu_pct']:.0f} %.", "no_mfu",
        kind="peak_vs_achievable")
    other = 2.0 if a["precision"] == "BF16" else 0.5
    add("rate_a", ra * other,
        f"Row A runs its prefill GEMMs in {a['precision']}; you used the "
        f"{'FP8' if a['precision'] == 'BF16' else 'BF16'} rate (or a sparse datasheet figure).",
        "wrong_precision", kind="wrong_precision")
    add("rate_a", ra * 2,
        "Twice the reference: one FLOP per parameter instead of two, or the sparse tensor rate.",
        "one_flop", kind="flop_counting")
    add("rate_a", ra / 2, "Half the reference: you counted K but not V, or 4 FLOPs per parameter.",
        "half", kind="k_without_v")
    add("rate_a", s["rate_long"].value,
        "That includes attention at the long prompt; this part ignores attention (part 3 adds it).",
        "with_attention", kind="miscounted_term")

    # -- row A with attention -------------------------------------------------------------------
    rl = s["rate_long"].value
    kappa, flops, active = a["kappa"], a["tflops"] * 1e12, a["active_b"] * 1e9
    attn = s["attn_per_token_g"] * 1e9
    add("rate_long", ra,
        "That is the rate without attention. At this prompt length attention adds "
        f"{s['attn_pct']:.0f} % to each token's FLOPs but no bytes, so the rate is lower.",
        "no_attention", kind="miscounted_term")
    add("rate_long", _rate(kappa, flops, mfu, active, 2 * attn) / 1e9,
        "You counted attention as 4·L·n²·d_q, the full square. Causal attention computes only "
        "the lower triangle: 2·L·n²·d_q, so 2·L·n·d_q per token.", "full_square",
        kind="flop_counting")
    add("rate_long", _rate(kappa, flops, mfu, active, attn / 2) / 1e9,
        "You halved attention twice. The causal prompt costs 2·L·n²·d_q in total, which is "
        "2·L·n·d_q per token on average.", "quarter", kind="flop_counting")
    if a["n_gpus"] > 1:
        add("rate_long", rl * a["n_gpus"],
            f"That is the whole {a['n_gpus']}-GPU instance; the part asks per GPU.", "instance",
            kind="forgot_tp")
    add("rate_long", rl / mfu,
        f"You left out the {s['mfu_pct']:.0f} % MFU.", "no_mfu", kind="peak_vs_achievable")
    add("rate_long", rl * 8, "Gigabits, not gigabytes: divide by 8.", "gbit", kind="bits_vs_bytes")

    # -- the fastest row ------------------------------------------------------------------------
    rw = s["rate_worst"].value
    fast = next(r for r in rows if r["letter"] == s["fastest"])
    if fast["n_gpus"] > 1:
        add("rate_worst", rw * fast["n_gpus"],
            f"That is row {fast['letter']}'s whole instance; the link is per GPU.", "instance",
            kind="forgot_tp")
    if fast["precision"] == "FP8":
        add("rate_worst", rw / 2,
            f"Row {fast['letter']} runs FP8 prefill; you used the BF16 rate.", "bf16_rate",
            kind="wrong_precision")
    else:
        add("rate_worst", rw * 2,
            f"Row {fast['letter']} runs BF16 prefill; you used the FP8 (or a sparse) rate.",
            "fp8_rate", kind="wrong_precision")
    if fast["is_moe"]:
        add("rate_worst", rw * fast["active_b"] / fast["total_b"],
            f"You used all {_fmt_b(fast['total_b'])} parameters. A token runs through its active "
            f"ones only, {_fmt_b(fast['active_b'])}.", "total_params", kind="misread_mechanism")
    add("rate_worst", rw / mfu, f"You left out the {s['mfu_pct']:.0f} % MFU.", "no_mfu",
        kind="peak_vs_achievable")
    for r in rows:
        if r is fast:
            continue
        add("rate_worst", r["rate_gbs"],
            f"That is row {r['letter']}. Row {fast['letter']} emits faster: compare κ·F·MFU/(2P) "
            "across every row, not just the biggest GPU or the smallest model.",
            f"row_{r['id']}", kind="misread_mechanism")
    # MoE rows priced at their total parameters: a different row may look fastest.
    totals = {r["id"]: r["rate_gbs"] * (r["active_b"] / r["total_b"] if r["is_moe"] else 1)
              for r in rows}
    top_total = max(totals.values())
    add("rate_worst", top_total,
        "You priced the mixture-of-experts rows at their total parameters. Prefill FLOPs follow "
        "the active parameters.", "moe_total", kind="misread_mechanism")

    # -- which rows break the link ---------------------------------------------------------------
    budget = s["budget_gbs"]
    ref_set = set(s["breakers"])
    alt_sets: list[tuple[list[str], str, str, str]] = [
        ([r["id"] for r in rows if r["rate_gbs"] * r["n_gpus"] > budget],
         "You compared each instance's total emission with one GPU's link. Each GPU ships its own "
         "share over its own NIC (or its share of a port): compare per GPU.", "instance",
         "forgot_tp"),
        ([r["id"] for r in rows if totals[r["id"]] > budget],
         "You used the total parameters for the mixture-of-experts rows, which makes them look "
         "slow. Their few active parameters are what make them emit fast.", "moe_total",
         "misread_mechanism"),
        ([r["id"] for r in rows if r["rate_gbs"] * 1e9 > s["link_gbs"] * 1e9],
         f"You gave each GPU the whole port. Here {p['gpus_per_nic']} GPUs share one, so each "
         f"gets {budget:.3g} GB/s.", "whole_port", "forgot_tp"),
        ([r["id"] for r in rows if r["rate_gbs"] > budget * 8],
         f"You read {s['link_gbit']:g} Gb/s as gigabytes. In bytes it is {s['link_gbs']:g} GB/s.",
         "bits_as_bytes", "bits_vs_bytes"),
    ]
    seen: list[set[str]] = [ref_set]
    for ids, feedback, name, kind in alt_sets:
        if not ids or set(ids) in seen or (name == "whole_port" and p["gpus_per_nic"] == 1):
            continue
        seen.append(set(ids))
        out.append(Mistake("breakers", sorted(ids), feedback, name, kind))
    # Every row: the answer that ticks all of them (bandwidth panic).
    everything = [r["id"] for r in rows]
    if set(everything) not in seen:
        seen.append(set(everything))
        out.append(Mistake("breakers", everything,
                           "Not every row breaks it. Gigabytes per request is not the question; "
                           "the per-GPU rate κ·F·MFU/(2P) is, and it spans two orders of magnitude "
                           "across these rows.", "all", kind="misread_mechanism"))

    # -- the levers ------------------------------------------------------------------------------
    out += [
        Mistake("levers", [*LEVERS_UP, "longer_prompt"],
                "Longer prompts do not raise the rate: the bytes and the linear FLOPs grow "
                "together, and attention adds FLOPs without bytes, so R falls slowly with n.",
                "longer_prompt", kind="misread_mechanism"),
        Mistake("levers", [*LEVERS_UP, "more_tp"],
                "More GPUs per instance do not raise the per-GPU rate: each GPU does 1/N of the "
                "work and ships 1/N of the bytes, so N cancels.", "more_tp", kind="forgot_tp"),
        Mistake("levers", [lv for lv in LEVERS_UP if lv != "fewer_active"],
                "Fewer active parameters at the same KV per token means less work per byte of "
                "KV, so the KV comes out faster (Qwen3-30B-A3B against a dense 30B).",
                "missed_moe", kind="misread_mechanism"),
    ]
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    claims: list[Claim] = []
    for name, gpu_name, precision in p["rows"]:
        m = model(name)
        claims.append(Fits(f"{name} {precision} weights on its prefill instance", gpu_name,
                           INSTANCE_GPUS[name], m.weight_bytes(1 if precision == "FP8" else 2)))
    claims.append(WithinContext(p["rows"][0][0], p["long_prompt"], "row A's long prompt"))
    return claims


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    s = solve(p)
    return {"rate_formula": {"n": p["long_prompt"], "N": s["a_n_gpus"], "kappa": s["a_kappa"],
                             "F": s["a_tflops"] * 1e12, "M": p["mfu"],
                             "P": s["a_active_b"] * 1e9}}
