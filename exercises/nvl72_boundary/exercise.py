"""Q25: GB200 NVL72 moves the NVLink boundary from 8 GPUs to 72. What moves inside, what does not.

The Hopper-era layout put every expert-parallel all-to-all and every prefill->decode KV hand-off
beyond 8 GPUs on the NIC. A 72-GPU NVLink domain brings both inside. The parts price that: the
NVLink-to-NIC ratio per GPU inside the rack; how an expert-parallel group inside the rack holds a
DeepSeek-class model (routed plus redundant expert slots per GPU); the all-to-all time per decode
step over NVLink against the NIC; the KV hand-off over NVLink; how few long-context sequences even
13 TB of HBM holds (so KV tiers still cross the NIC); which traffic still leaves the rack; and the
failure mode that comes with a 72-GPU instance.

Domain, GPU, NIC and model figures come from the catalog; batch, prompt, context, expert-group
size and redundant-expert count are variant keys the statement prints.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import domain, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import UNSTATED_WEIGHT_BYTES, Claim, Fits, WithinContext
from exercises.slips import Slips, isclose, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

RACK = "GB200 NVL72"
BEFORE_DOMAINS = ("HGX H100", "HGX H200", "HGX B200")
EP_MODEL = "DeepSeek-V3"  # the expert-parallel story needs a model with hundreds of experts
# Expert-parallel groups that tile the rack AND a set of 8-GPU nodes, so the Hopper-era comparison
# (the same group spread over HGX nodes) is well defined.
EP_GROUPS = (72, 24)
MAX_REDUNDANT = 64
TOKENS_PER_GPU = (64, 96, 128, 192, 256)
KV_DEPLOYMENTS: tuple[tuple[str, int], ...] = (
    ("Llama-3.1-8B", 1), ("Llama-3.1-8B", 2), ("Llama-3.1-70B", 4), ("Llama-3.1-70B", 8),
    ("Qwen2.5-72B", 4), ("Qwen2.5-72B", 8), ("Llama-3.1-405B", 8),
)
PROMPTS = (4096, 8192, 16384, 32768)
LONG_MODELS = ("Llama-3.1-405B", "Llama-3.1-70B")
LONG_CONTEXTS = (65536, 131072)
KV_DTYPE_BYTES = (2, 1)  # BF16 or FP8 cache
SCALE_GROUP = 128  # FP8 dispatch: one FP32 scale per 128 channels (as in the Q21 exercise)

CANONICAL: dict[str, Any] = {
    "before": "HGX H100",
    "ep_group": 72,  # one expert-parallel instance over the whole rack
    "redundant": 32,  # DeepSeek's production count of redundant experts
    "tokens_per_gpu": 128,  # decode tokens per GPU per step
    "kv_model": "Llama-3.1-70B",
    "kv_tp": 8,
    "prompt": 8192,
    "long_model": "Llama-3.1-405B",
    "long_context": 131072,
    "long_kv_bytes": 2,  # BF16 KV cache
}


# ----------------------------------------------------------------------------------------------
# Variants


def redundant_choices(group: int) -> list[int]:
    """Redundant-expert counts that fill every GPU of the group with the same number of slots."""
    experts = model(EP_MODEL).n_routed_experts
    assert experts is not None
    return [r for r in range(MAX_REDUNDANT + 1) if (experts + r) % group == 0]


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        group = rng.choice(EP_GROUPS)
        kv_model, kv_tp = rng.choice(KV_DEPLOYMENTS)
        return {
            **CANONICAL,
            "before": rng.choice(BEFORE_DOMAINS),
            "ep_group": group,
            **choose(rng, {"redundant": redundant_choices(group), "tokens_per_gpu": TOKENS_PER_GPU}),
            "kv_model": kv_model,
            "kv_tp": kv_tp,
            **choose(rng, {"prompt": PROMPTS, "long_model": LONG_MODELS,
                           "long_context": LONG_CONTEXTS, "long_kv_bytes": KV_DTYPE_BYTES}),
        }

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    rack = domain(RACK)
    before = domain(p["before"])
    m = model(EP_MODEL)
    assert m.n_routed_experts is not None
    group = p["ep_group"]
    kv = model(p["kv_model"])
    return (
        rack.gpus % group == 0
        and group % before.gpus == 0 and group > before.gpus  # the old layout crossed the NIC
        and (m.n_routed_experts + p["redundant"]) % group == 0
        and kv.kv_heads is not None and kv.kv_heads % p["kv_tp"] == 0
        and solve(p)["long_ctx"].value >= 10
    )


# ----------------------------------------------------------------------------------------------
# The reference


def ep_bytes_per_token_step(hidden: int, topk: int, moe_layers: int) -> int:
    """Bytes one token sends per decode step through dispatch (FP8 + FP32 scales) and combine
    (BF16), every routed copy counted: the Q21 exercise's per-step figure."""
    dispatch = hidden + (hidden // SCALE_GROUP) * 4
    combine = 2 * hidden
    return moe_layers * topk * (dispatch + combine)


def solve(p: dict[str, Any]) -> dict[str, Any]:
    rack = domain(RACK)
    before = domain(p["before"])
    g_rack = rack.gpu_record
    m = model(EP_MODEL)
    assert m.n_routed_experts is not None and m.experts_per_token is not None

    # -- links -------------------------------------------------------------------------------
    nvl = rack.nvlink_bytes_per_s_one_way
    nic = rack.nic_bytes_per_s
    ratio = nvl / nic
    before_nvl = before.nvlink_bytes_per_s_one_way
    before_nic = before.nic_bytes_per_s
    before_ratio = before_nvl / before_nic

    # -- expert placement ---------------------------------------------------------------------
    group = p["ep_group"]
    slots = m.n_routed_experts + p["redundant"]
    per_gpu = slots // group
    # Routed expert weights per GPU in FP8 (one byte per parameter), every MoE layer.
    expert_gb = per_gpu * m.moe_layers * m.expert_params / 1e9
    routed_params = m.moe_layers * m.n_routed_experts * m.expert_params
    replicated_gb = (m.params - routed_params) / 1e9  # everything else, FP8, on every GPU
    before_nodes = group // before.gpus
    instances = rack.gpus // group

    # -- expert-parallel all-to-all per decode step -------------------------------------------
    per_token = ep_bytes_per_token_step(m.hidden, m.experts_per_token, m.moe_layers)
    gpu_bytes = p["tokens_per_gpu"] * per_token
    ep_nic_s = gpu_bytes / before_nic
    ep_nvl_s = gpu_bytes / nvl

    # -- KV hand-off --------------------------------------------------------------------------
    kv = model(p["kv_model"])
    shard = p["prompt"] * kv.kv_bytes_per_token_per_gpu(p["kv_tp"])
    kv_nic_s = shard / before_nic
    kv_nvl_s = shard / nvl

    # -- long context in the rack's HBM --------------------------------------------------------
    lm = model(p["long_model"])
    seq_bytes = p["long_context"] * lm.kv_bytes_per_token(p["long_kv_bytes"])
    weights = lm.params * 1  # FP8 weights, one copy for the rack
    pool = rack.hbm_bytes - weights
    fits = math.floor(pool / seq_bytes)

    s: dict[str, Any] = {
        "link_ratio": Quantity(ratio, ""),
        "experts_per_gpu": Quantity(per_gpu, ""),
        "ep_step": Quantity(ep_nvl_s * 1e3, "ms"),
        "kv_handoff": Quantity(kv_nvl_s * 1e3, "ms"),
        "long_ctx": Quantity(fits, ""),
        "still_nic": ["ep_beyond", "fleet_cache", "cross_rack_pd"],
        # givens the statement prints
        "rack": RACK,
        "rack_gpus": rack.gpus,
        "rack_gpu": rack.gpu,
        "rack_nic": rack.nic,
        "rack_nvlink_gbs": g_rack.nvlink_gbps,
        "rack_hbm_gb": g_rack.hbm_gb,
        "rack_hbm_tb": rack.hbm_bytes / 1e12,
        "nic_gbit": rack.nic_record.gbit_per_s,
        "before_gpus": before.gpus,
        "before_gpu": before.gpu,
        "before_nic": before.nic,
        "before_nvlink_gbs": before.gpu_record.nvlink_gbps,
        "before_nic_gbit": before.nic_record.gbit_per_s,
        "hidden": m.hidden,
        "topk": m.experts_per_token,
        "experts": m.n_routed_experts,
        "moe_layers": m.moe_layers,
        "kv_layers": kv.layers,
        "kv_heads": kv.kv_heads,
        "kv_head_dim": kv.head_dim,
        "long_layers": lm.layers,
        "long_kv_heads": lm.kv_heads,
        "long_head_dim": lm.head_dim,
        "long_params_b": lm.params / 1e9,
        "long_kv_dtype": "BF16" if p["long_kv_bytes"] == 2 else "FP8",
        # intermediates for the solution
        "nvl_gbs": nvl / 1e9,
        "nic_gbs": nic / 1e9,
        "before_nvl_gbs": before_nvl / 1e9,
        "before_ratio": before_ratio,
        "slots": slots,
        "instances": instances,
        "expert_gb": expert_gb,
        "expert_mparams": m.expert_params / 1e6,
        "domain_growth": rack.gpus / before.gpus,
        "replicated_gb": replicated_gb,
        "gpu_weights_gb": expert_gb + replicated_gb,
        "before_nodes": before_nodes,
        "per_token_bytes": per_token,
        "per_token_mb": per_token / 1e6,
        "gpu_step_gb": gpu_bytes / 1e9,
        "ep_nic_ms": ep_nic_s * 1e3,
        "ep_nvl_ms": ep_nvl_s * 1e3,
        "ep_layer_nvl_us": ep_nvl_s / m.moe_layers * 1e6,
        "kv_per_token_gpu": kv.kv_bytes_per_token_per_gpu(p["kv_tp"]),
        "shard_mb": shard / 1e6,
        "kv_nic_ms": kv_nic_s * 1e3,
        "kv_nvl_ms": kv_nvl_s * 1e3,
        "long_kappa": lm.kv_bytes_per_token(p["long_kv_bytes"]),
        "seq_gb": seq_bytes / 1e9,
        "long_weights_gb": weights / 1e9,
        "pool_tb": pool / 1e12,
        "fits_exact": pool / seq_bytes,
    }
    s["failure"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"One NVLink domain is one failure domain. An instance that spans the rack, EP over "
        f"{p['ep_group']} GPUs with every all-to-all waiting for its slowest rank, stops when any "
        "one GPU, NVLink port or NVSwitch tray fails, and slows to the pace of any straggler. On "
        f"HGX the same fault took out {s['before_gpus']} GPUs; now it takes out up to "
        f"{s['rack_gpus']}, and the repair unit (a compute tray of 4 GPUs, or a switch tray) is "
        "smaller than what has to restart. Mitigations: run several smaller instances per rack "
        "instead of one rack-wide one, and keep spare GPUs in the domain; use redundant experts so "
        "a failed rank's experts can be re-homed and the group shrinks instead of stopping "
        "(elastic EP); detect stragglers and failed links fast and drain only the affected "
        "instance; keep KV and prefix state recoverable outside the GPU; and plan capacity with "
        "a whole rack as the unit you can lose (N+1 racks)."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out,
                accept=isclose, merge=isclose, merge_floor=1e-9, skip=nonpositive).add

    r = s["link_ratio"].value
    add("link_ratio", 2 * r,
        f"You used the {s['rack_nvlink_gbs']:,.0f} GB/s NVLink figure, which sums both directions. "
        f"Per direction it is {s['nvl_gbs']:.0f} GB/s, against a NIC rate that is per direction.",
        "bidirectional", kind="peak_vs_achievable")
    add("link_ratio", 8 * r,
        f"{s['nic_gbit']:.0f} Gb/s is gigabits: {s['nic_gbs']:.0f} GB/s.", "bits",
        kind="bits_vs_bytes")
    add("link_ratio", s["before_ratio"],
        f"That is the {p['before']} ratio. Inside the rack each GPU has "
        f"{s['nvl_gbs']:.0f} GB/s of NVLink per direction.", "before", kind="misread_mechanism")
    add("link_ratio", r * s["rack_gpus"],
        "You compared the whole rack's NVLink with one GPU's NIC. Compare per GPU.", "rack_total",
        kind="forgot_tp")

    e = s["experts_per_gpu"].value
    group = p["ep_group"]
    add("experts_per_gpu", s["experts"] / group,
        f"You left out the {p['redundant']} redundant experts. They take slots too: "
        f"{s['experts']} + {p['redundant']} = {s['slots']} slots.", "no_redundant",
        kind="miscounted_term")
    if group != s["rack_gpus"]:
        add("experts_per_gpu", s["slots"] / s["rack_gpus"],
            f"The instance spans {group} GPUs, not the whole rack of {s['rack_gpus']}.",
            "whole_rack", kind="forgot_tp")
    add("experts_per_gpu", s["slots"] / s["before_gpus"],
        f"That spreads the experts over one {s['before_gpus']}-GPU node.", "one_node",
        kind="forgot_tp")
    add("experts_per_gpu", e * s["moe_layers"],
        f"That counts every MoE layer's copy. Per layer each GPU holds {e:g}; the same slot "
        "repeats in every layer.", "times_layers", kind="one_layer")

    ep = s["ep_step"].value
    add("ep_step", s["ep_nic_ms"],
        f"That is the time over the {s['before_nic_gbit']:.0f} Gb/s NIC, the HGX picture. Inside "
        "the rack the all-to-all runs on NVLink.", "nic", kind="misread_mechanism")
    add("ep_step", ep / 2,
        f"Half the reference: you used {s['rack_nvlink_gbs']:,.0f} GB/s, both directions summed. "
        "Each GPU's outbound copies use one direction.", "bidirectional", kind="peak_vs_achievable")
    add("ep_step", ep / s["moe_layers"],
        f"That is one MoE layer. A decode step runs {s['moe_layers']}.", "one_layer",
        kind="one_layer")
    add("ep_step", ep / p["tokens_per_gpu"],
        f"That is one token. Each GPU sends the copies of all {p['tokens_per_gpu']} of its tokens.",
        "one_token", kind="wrong_scope")
    bf16_pair = 4 * s["hidden"]  # a BF16 dispatch copy plus a BF16 combine copy
    add("ep_step", ep * bf16_pair * s["topk"] * s["moe_layers"] / s["per_token_bytes"],
        "You sent the dispatch in BF16. It goes as FP8 plus FP32 scales.", "bf16_dispatch",
        kind="wrong_precision")

    kv = s["kv_handoff"].value
    add("kv_handoff", s["kv_nic_ms"],
        f"That is the time over the NIC. Within the rack the hand-off runs on NVLink at "
        f"{s['nvl_gbs']:.0f} GB/s.", "nic", kind="misread_mechanism")
    add("kv_handoff", kv * p["kv_tp"],
        f"That is the whole cache through one GPU's link. Each of the {p['kv_tp']} GPUs sends "
        "its own shard in parallel.", "one_link", kind="forgot_tp")
    add("kv_handoff", kv / 2,
        "Half the reference: you used the both-directions NVLink figure, or sent K but not V.",
        "half", kind="peak_vs_achievable")
    add("kv_handoff", kv / 8, "Eight times too fast: a bits-for-bytes slip somewhere.", "bits",
        kind="bits_vs_bytes")

    pool, seq = s["pool_tb"] * 1e12, s["seq_gb"] * 1e9
    add("long_ctx", math.floor(domain(RACK).hbm_bytes / seq),
        f"You forgot the weights: {s['long_weights_gb']:.0f} GB of FP8 weights share the HBM.",
        "no_weights", kind="miscounted_term")
    add("long_ctx", math.floor(pool / (seq / 2)),
        "You halved the cache: every layer stores both K and V.", "k_only", kind="k_without_v")
    other = 1 if p["long_kv_bytes"] == 2 else 2
    add("long_ctx", math.floor(pool / (seq * other / p["long_kv_bytes"])),
        f"The cache is {s['long_kv_dtype']}: {p['long_kv_bytes']} byte(s) per element.", "dtype",
        kind="wrong_precision")
    add("long_ctx", math.floor(s["rack_hbm_gb"] * 1e9 / seq),
        f"That is one GPU's HBM. The question pools all {s['rack_gpus']} GPUs of the rack.",
        "one_gpu", kind="forgot_tp")
    add("long_ctx", math.floor(pool / seq) + 1,
        "One too many: a sequence that does not fit whole does not count. Round down.",
        "rounded_up", kind="rounding")

    out.append(Mistake(
        "still_nic", ["ep_beyond", "fleet_cache", "cross_rack_pd", "ep_in_rack", "tp_in_rack",
                      "kv_same_rack"],
        "That is the Hopper-era picture, where everything beyond 8 GPUs crossed the NIC. Inside "
        "the rack, expert parallelism up to 72 GPUs, tensor parallelism and same-rack KV hand-off "
        "all run on NVLink.", "everything", kind="misread_mechanism"))
    out.append(Mistake(
        "still_nic", ["ep_in_rack", "tp_in_rack", "kv_same_rack"],
        "Those are exactly the transfers the rack brings inside NVLink. What still crosses the NIC "
        "is whatever spans more than one rack.", "reversed", kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    rack, before = domain(RACK), domain(p["before"])
    kv = model(p["kv_model"])
    return [
        Fits("DeepSeek-V3 FP8 weights over the EP group", rack.gpu, p["ep_group"],
             model(EP_MODEL).weight_bytes(1)),
        # The statement gives the KV model's cache precision, not its weights': FP8 at least.
        Fits("the KV model's weights and the prompt's KV", before.gpu, p["kv_tp"],
             kv.weight_bytes(UNSTATED_WEIGHT_BYTES) + kv.kv_bytes_for_tokens(p["prompt"])),
        WithinContext(p["kv_model"], p["prompt"], "the hand-off prompt"),
        WithinContext(p["long_model"], p["long_context"], "a long-context sequence"),
        # How many long sequences the rack holds is the question.
        Fits("the long-context sequences", rack.gpu, rack.gpus, 0.0, asked=True),
    ]
