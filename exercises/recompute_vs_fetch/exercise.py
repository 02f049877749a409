"""Q04: recompute a cached prefix, or fetch its KV? One ratio decides.

Recomputing a prefix costs about 2P FLOPs per token (P = active parameters), spread over the
replica's GPUs at some MFU. Fetching it costs kappa bytes of KV per token, each GPU pulling its own
shard over its own host link. The GPU count cancels, leaving
    R = t_recompute / t_fetch = (2P / kappa) / (F * MFU / BW_link),
FLOPs the cache saves per byte, over FLOPs the GPU does in the time a byte arrives. Fetch wins when
R > 1, by a factor of R, and the break-even link rate per GPU is kappa * F * MFU / (2P). The parts
compute both per-token costs, the ratio over PCIe, the break-even bandwidth, the ratio for a slower
shared tier, and ask for the situations where fetching still loses.

Every hardware and model figure comes from exercises/catalog; every assumption is a key of the
variant, printed by the statement.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, link, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits
from exercises.slips import Slips, near, tolerances, unusable
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# Models and the tensor-parallel degrees a replica of each may use (dividing its KV heads).
TP_CHOICES: dict[str, tuple[int, ...]] = {
    "Llama-3.1-8B": (1, 2),
    "Llama-3.1-70B": (4, 8),
    "Llama-3.1-405B": (8,),
    "Qwen2.5-72B": (4, 8),
    "Llama-2-7B": (1, 2),
    "Mixtral-8x7B": (2, 4),
    "Qwen3-30B-A3B": (1, 2),
}
# GPUs whose host link is PCIe Gen5 x16 (A100 is Gen4, not in the catalog).
GPUS = ("H100 SXM", "H200 SXM", "B200")
HOST_LINK = "PCIe Gen5 x16"
MFUS = (0.4, 0.45, 0.5, 0.55, 0.6)
# Read bandwidth of the slow tier for the whole replica, GB/s [A]: one or a few NVMe drives, or
# a network store, as measured by the storage team.
SLOW_TIER_GBS = (2, 3, 4, 5, 7, 10, 14, 20, 28)

# Options of the `loses` part, as in exercise.toml; the first three are the situations.
LOSES = ("slow_tier", "short_prefix", "contention")
LOSE_OPTIONS = (*LOSES, "long_prefix", "more_gpus", "gqa", "fp8_kv")

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "tp": 8,
    "mfu": 0.5,  # prefill MFU [A]
    "slow_gbs": 7,  # one NVMe drive's reads, shared by the replica's 8 GPUs [A]
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        name = rng.choice(tuple(TP_CHOICES))
        return {"model": name, **choose(rng, {"gpu": GPUS, "tp": TP_CHOICES[name], "mfu": MFUS,
                                              "slow_gbs": SLOW_TIER_GBS})}

    return draw_sensible(rng, draw, is_sensible, tries=2000)


def is_sensible(p: dict[str, Any]) -> bool:
    """The BF16 weights fit the replica with room for KV, fetching over PCIe wins, and the slow
    tier's verdict is not a rounding question (its ratio at least 15 % from 1)."""
    m = model(p["model"])
    g = gpu(p["gpu"])
    if m.weight_bytes(2) / p["tp"] > 0.7 * g.hbm_bytes:
        return False
    s = solve(p)
    return s["ratio"].value >= 1.5 and abs(math.log(s["slow_ratio"].value)) >= math.log(1.15)


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    pcie = link(HOST_LINK)
    tp, mfu = p["tp"], p["mfu"]
    assert pcie.effective_gb_per_s is not None
    link_bps = pcie.effective_gb_per_s * 1e9

    p_active = m.active_params
    kappa = m.kv_bytes_per_token(2)
    flops_per_token = 2 * p_active
    replica_flops = tp * g.bf16_flops * mfu

    recompute_s = flops_per_token / replica_flops
    fetch_s = kappa / (tp * link_bps)  # each GPU pulls its own 1/tp of every token's KV
    ratio = recompute_s / fetch_s
    saved_flop_per_byte = flops_per_token / kappa
    gpu_flop_per_link_byte = g.bf16_flops * mfu / link_bps
    breakeven = kappa * g.bf16_flops * mfu / flops_per_token  # B/s per GPU

    slow_bps = p["slow_gbs"] * 1e9
    slow_per_gpu = slow_bps / tp
    slow_fetch_s = kappa / slow_bps
    slow_ratio = recompute_s / slow_fetch_s

    s: dict[str, Any] = {
        "recompute_us": Quantity(recompute_s * 1e6, "us"),
        "fetch_us": Quantity(fetch_s * 1e6, "us"),
        "ratio": Quantity(ratio, ""),
        "breakeven_bw": Quantity(breakeven / 1e9, "GB/s"),
        "slow_ratio": Quantity(slow_ratio, ""),
        "loses": list(LOSES),
        # givens
        "params": m.params,
        "active_params": p_active,
        "active_b": p_active / 1e9,
        "is_moe": m.is_moe,
        "params_text": (f"{m.params:,} parameters, mixture-of-experts: each token runs "
                        f"through {p_active:,} of them (its active parameters)"
                        if m.is_moe else
                        f"{m.params:,} parameters, dense: all of them active for every token"),
        "all_gpus": "the one GPU" if tp == 1 else f"all {tp} GPUs together",
        "shared_by": "its one GPU" if tp == 1 else f"its {tp} GPUs",
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "attention_kind": "multi-head" if m.attention == "mha" else "grouped-query",
        "bf16_tflops": g.bf16_dense_tflops,
        "link_gbs": pcie.effective_gb_per_s,
        "link_raw_gbs": pcie.gb_per_s,
        "mfu_pct": mfu * 100,
        # intermediates
        "kappa": kappa,
        "kappa_per_gpu": kappa / tp,
        "flops_per_token_g": flops_per_token / 1e9,
        "replica_tflops": replica_flops / 1e12,
        "saved_flop_per_byte": saved_flop_per_byte,
        "gpu_flop_per_link_byte": gpu_flop_per_link_byte,
        "slow_per_gpu_gbs": slow_per_gpu / 1e9,
        "slow_fetch_us": slow_fetch_s * 1e6,
        "slow_winner": "fetching" if slow_ratio > 1 else "recomputing",
        "slow_word": "above" if slow_ratio > 1 else "below",
        # A worked 8K-token prefix for the solution's sense of scale.
        "demo_tokens": 8192,
        "demo_recompute_ms": 8192 * recompute_s * 1e3,
        "demo_fetch_ms": 8192 * fetch_s * 1e3,
        "demo_slow_ms": 8192 * slow_fetch_s * 1e3,
        # Tokens whose recompute costs as much as a 1 ms fixed fetch overhead [A], the
        # short-prefix case.
        "tokens_per_ms": 1e-3 / recompute_s,
    }
    return s


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    tp, mfu = p["tp"], p["mfu"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=near, merge=near, merge_floor=1e-9, skip=unusable).add

    rc = s["recompute_us"].value
    add("recompute_us", rc * tp,
        f"That is one GPU doing all the work. The replica's {tp} GPUs share the recompute.",
        "one_gpu", kind="forgot_tp")
    add("recompute_us", rc * mfu,
        f"You ran at 100 % of peak. The stated MFU is {s['mfu_pct']:.0f} %.", "no_mfu",
        kind="peak_vs_achievable")
    add("recompute_us", rc / 2,
        "Half the reference: a token costs 2 FLOPs per parameter (multiply and add), or you used "
        "the sparse or FP8 rate instead of dense BF16.", "half", kind="flop_counting")
    add("recompute_us", rc * 3,
        "Three times the reference: 6P per token is the training rule (forward and backward). "
        "Recomputing a prefix is a forward pass only, 2P.", "training_6p", kind="flop_counting")
    if m.is_moe:
        add("recompute_us", rc * m.params / m.active_params,
            "You used the total parameter count. Each token only runs through its active "
            f"experts: {s['active_params']:,} parameters.", "total_params",
            kind="misread_mechanism")

    fe = s["fetch_us"].value
    add("fetch_us", fe * tp,
        f"That pushes the whole token's KV through one link. Each of the {tp} GPUs fetches its "
        "own shard over its own link, in parallel.", "one_link", kind="forgot_tp")
    add("fetch_us", fe / 2, "Half the reference: the cache holds K and V.", "k_only",
        kind="k_without_v")
    add("fetch_us", fe * s["link_gbs"] / s["link_raw_gbs"],
        f"You used the raw {s['link_raw_gbs']:g} GB/s of the link. The statement's effective "
        f"rate is {s['link_gbs']:g} GB/s.", "raw_rate", kind="peak_vs_achievable")
    if tp > 1:
        add("fetch_us", fe / tp,
            f"You divided by {tp} twice: the per-GPU shard already is 1/{tp} of the token's KV.",
            "double_split", kind="forgot_tp")

    r = s["ratio"].value
    add("ratio", 1 / r,
        "Upside down: the ratio is recompute time over fetch time, so above 1 means fetching "
        "wins.", "inverted", kind="inverted")
    if tp > 1:
        add("ratio", r / tp,
            f"You spread the recompute over {tp} GPUs but pushed the fetch through one link. "
            "Both sides scale with the GPU count, which is why it cancels.", "one_link",
            kind="forgot_tp")
        add("ratio", r * tp,
            f"You split the fetch over {tp} links but gave the recompute one GPU. Both sides "
            "scale with the GPU count.", "one_gpu", kind="forgot_tp")
    add("ratio", r * mfu, f"You left out the {s['mfu_pct']:.0f} % MFU.", "no_mfu",
        kind="peak_vs_achievable")
    add("ratio", r * 2, "Twice the reference: you fetched K but not V.", "k_only",
        kind="k_without_v")

    be = s["breakeven_bw"].value
    add("breakeven_bw", be * tp,
        f"That is the whole replica. The question asks per GPU; each of the {tp} GPUs has its "
        "own link.", "replica", kind="forgot_tp")
    add("breakeven_bw", be / mfu,
        f"You assumed 100 % MFU. At {s['mfu_pct']:.0f} % the GPU recomputes more slowly, so a "
        "slower link already ties.", "no_mfu", kind="peak_vs_achievable")
    add("breakeven_bw", be / 2, "Half the reference: the cache holds K and V.", "k_only",
        kind="k_without_v")
    add("breakeven_bw", be * 8,
        "Eight times the reference: a gigabit/gigabyte slip.", "bits", kind="bits_vs_bytes")

    sr = s["slow_ratio"].value
    add("slow_ratio", sr * tp,
        f"You gave every GPU the tier's full {p['slow_gbs']} GB/s. The whole replica shares it: "
        f"{s['slow_per_gpu_gbs']:.3g} GB/s per GPU.", "not_shared", kind="forgot_tp")
    add("slow_ratio", 1 / sr,
        "Upside down: recompute time over fetch time, so below 1 means recomputing wins.",
        "inverted", kind="inverted")
    add("slow_ratio", r,
        "That is the PCIe ratio. The slow tier feeds the GPUs far more slowly than host memory "
        "does.", "pcie", kind="wrong_scope")

    out.append(Mistake(
        "loses", [*LOSES, "long_prefix"],
        "A long prefix favours fetching even more: both costs are per token, and recomputing also "
        "pays attention over the whole prefix, which grows with its length.", "long_prefix",
        kind="misread_mechanism"))
    out.append(Mistake(
        "loses", [*LOSES, "more_gpus"],
        "More GPUs do not change the verdict: each also brings its own link and fetches its own "
        "shard, so the GPU count cancels from the ratio.", "more_gpus", kind="forgot_tp"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [Fits("BF16 weights on the replica", p["gpu"], p["tp"],
                 model(p["model"]).weight_bytes(2))]
