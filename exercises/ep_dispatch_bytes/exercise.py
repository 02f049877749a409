"""Q21: what expert parallelism moves per token, and which link carries it.

Every MoE layer sends a token's hidden state to each of its top-k routed experts (dispatch) and
brings k results back (combine). The scenario is DeepSeek's production choice: dispatch in FP8 with
one FP32 scale per `scale_group` channels, combine in BF16. The parts walk the blurb's argument:
the bytes of one dispatch copy; the bytes per token per decode step over every MoE layer and both
all-to-alls; the share that crosses the NIC when experts sit uniformly on N nodes; the NIC bound
under node-limited routing (each token reaches at most M nodes, crosses the NIC once per node and
fans out over NVLink); the NIC time this costs a GPU per step; and why the decode kernels give up
the node-aware saving anyway.

Model figures (hidden size, top-k, MoE layer count, expert count) come from the catalog; the node
count, node limit, tokens per GPU and the scale group are variant keys the statement prints.
"""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import domain, link, model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits, HasFeature, check
from exercises.slips import Slips, isclose, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# MoE models whose hidden size splits into whole 128-channel scale groups (GPT-OSS's 2,880 does
# not, and Mixtral's 8 experts fit inside one node, so neither makes an expert-parallel story).
# Node-limited routing (part 4) needs a router that limits groups: DeepSeek-V3's picks 4 of 8
# expert groups. Qwen3-MoE and Mixtral route plain top-k, so they have no M to vary.
MODELS = ("DeepSeek-V3",)
DOMAINS = ("HGX H100", "HGX H200", "HGX B200")
TOKENS_PER_GPU = (16, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512)
SCALE_BYTES = 4  # one FP32 scale per group
DISPATCH_ELEM_BYTES = 1  # FP8 E4M3
COMBINE_ELEM_BYTES = 2  # BF16

CANONICAL: dict[str, Any] = {
    "model": "DeepSeek-V3",
    "domain": "HGX H100",  # 8 GPUs per node, one ConnectX-7 per GPU
    "nodes": 18,  # DeepSeek's EP144 decode deployment: 18 nodes x 8 GPUs
    "node_limit": 4,  # M: topk_group, 4 of 8 expert groups; 4 nodes when a group sits on one node
    "scale_group": 128,  # channels per FP32 scale in the FP8 dispatch (DeepEP's layout)
    "tokens_per_gpu": 128,  # decode tokens per GPU per step (the DeepEP benchmark's batch)
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a model, a node count its experts can fill, a binding node limit and a batch."""
    def draw(rng: random.Random) -> dict[str, Any]:
        name = rng.choice(MODELS)
        gpn = domain(DOMAINS[0]).gpus
        max_nodes = model(name).n_routed_experts // gpn  # at least one expert per GPU
        p = dict(CANONICAL)
        p.update(
            model=name,
            domain=rng.choice(DOMAINS),
            nodes=rng.randint(4, min(max_nodes, 18)),
            # M is the router's own group limit (topk_group), read as nodes: one group per node.
            node_limit=model(name).topk_group,
            tokens_per_gpu=rng.choice(TOKENS_PER_GPU),
        )
        return p

    return draw_sensible(rng, draw, is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    m = model(p["model"])
    d = domain(p["domain"])
    return (
        m.is_moe
        and m.hidden % p["scale_group"] == 0
        and m.n_routed_experts >= p["nodes"] * d.gpus  # every GPU holds an expert
        # the node limit binds: fewer nodes than experts per token, and fewer than the nodes
        and 2 <= p["node_limit"] < min(m.experts_per_token, p["nodes"])
    )


# ----------------------------------------------------------------------------------------------
# The reference


def copy_bytes(hidden: int, scale_group: int) -> tuple[int, int]:
    """Bytes of one dispatch copy (FP8 plus FP32 scales) and one combine copy (BF16)."""
    dispatch = hidden * DISPATCH_ELEM_BYTES + (hidden // scale_group) * SCALE_BYTES
    combine = hidden * COMBINE_ELEM_BYTES
    return dispatch, combine


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    d = domain(p["domain"])
    nic = link(d.nic)
    n, gpn, limit, k = p["nodes"], d.gpus, p["node_limit"], m.experts_per_token
    layers = m.moe_layers

    dispatch, combine = copy_bytes(m.hidden, p["scale_group"])
    scales = m.hidden // p["scale_group"]
    pair = dispatch + combine  # one expert's round trip
    per_layer = k * pair
    per_step = layers * per_layer  # bytes per token per decode step, every copy counted

    # Experts spread evenly over n nodes: a copy leaves the node with probability (n-1)/n, stays
    # on another GPU of the node with (gpn-1)/(gpn n), and on the token's own GPU with 1/(gpn n).
    remote = (n - 1) / n
    nic_bytes = remote * per_step
    nvlink_bytes = (gpn - 1) / (gpn * n) * per_step
    own_gpu_bytes = per_step / (gpn * n)

    # Node-limited routing: at most `limit` nodes, one NIC crossing each way per node (the
    # combine is summed on the node before it crosses back). Counting every selected node as
    # remote makes it an upper bound.
    bound = limit * layers * pair
    saving = 1 - bound / per_step
    saving_vs_uniform = 1 - bound / nic_bytes

    # One GPU's NIC per step: its tokens' remote dispatch copies out, and (balanced load) as many
    # combine copies out for tokens it served; the same again inbound, on the other direction.
    gpu_bytes = p["tokens_per_gpu"] * nic_bytes
    nic_s = gpu_bytes / nic.bytes_per_s
    bound_gpu_s = p["tokens_per_gpu"] * bound / nic.bytes_per_s

    if m.dense_layers:
        layer_desc = (f"{m.layers} layers: the first {m.dense_layers} dense, the other "
                      f"{layers} MoE")
    else:
        layer_desc = f"{m.layers} layers, all MoE"
    if m.n_shared_experts:
        shared_desc = (f"{m.n_shared_experts} shared expert per MoE layer, replicated on every "
                       "GPU")
    else:
        shared_desc = "no shared expert"

    s: dict[str, Any] = {
        "dispatch_copy": Quantity(dispatch, "B"),
        "per_step": Quantity(per_step / 1e6, "MB"),
        "nic_share": Quantity(nic_bytes / 1e6, "MB"),
        "node_limited": Quantity(bound / 1e6, "MB"),
        "nic_time": Quantity(nic_s * 1e3, "ms"),
        "decode_tradeoff": "latency",
        # givens the statement prints
        "hidden": m.hidden,
        "topk": k,
        "layers": m.layers,
        "dense_layers": m.dense_layers,
        "moe_layers": layers,
        "experts": m.n_routed_experts,
        "shared": m.n_shared_experts or 0,
        "layer_desc": layer_desc,
        "shared_desc": shared_desc,
        "gpn": gpn,
        "gpus": n * gpn,
        "experts_per_gpu": m.n_routed_experts / (n * gpn),
        "nic_name": d.nic,
        "nic_gbit": nic.gbit_per_s,
        "nic_gbs": nic.gb_per_s,
        # intermediates for the solution
        "scales": scales,
        "scale_bytes": scales * SCALE_BYTES,
        "combine_copy": combine,
        "pair_bytes": pair,
        "per_layer_bytes": per_layer,
        "per_step_bytes": per_step,
        "bf16_both_mb": layers * k * 2 * combine / 1e6,
        "remote_pct": remote * 100,
        "nic_mb": nic_bytes / 1e6,
        "nvlink_mb": nvlink_bytes / 1e6,
        "own_gpu_mb": own_gpu_bytes / 1e6,
        "bound_bytes": bound,
        "saving_pct": saving * 100,
        "saving_vs_uniform_pct": saving_vs_uniform * 100,
        "gpu_step_gb": gpu_bytes / 1e9,
        "bound_gpu_ms": bound_gpu_s * 1e3,
        "per_layer_us": nic_s / layers * 1e6,
    }
    return s


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    n, k, limit, layers = p["nodes"], s["topk"], p["node_limit"], s["moe_layers"]
    disp, comb = s["dispatch_copy"].value, s["combine_copy"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out,
                accept=isclose, merge=isclose, merge_floor=1e-9, skip=nonpositive).add

    h = s["hidden"]
    add("dispatch_copy", h,
        f"You left out the scales. FP8 needs one FP32 scale per {p['scale_group']} channels: "
        f"{s['scales']} × 4 B on top of the {h:,} payload bytes.", "no_scales",
        kind="miscounted_term")
    add("dispatch_copy", 2 * h,
        "That is a BF16 copy. The dispatch is sent in FP8, one byte per channel, plus scales.",
        "bf16", kind="wrong_precision")
    add("dispatch_copy", h + s["scales"],
        "You gave each scale one byte. The scales are FP32: 4 bytes each.", "one_byte_scales",
        kind="wrong_precision")
    add("dispatch_copy", h + 2 * s["scales"],
        "You gave each scale two bytes. The scales are FP32: 4 bytes each.", "bf16_scales",
        kind="wrong_precision")
    add("dispatch_copy", disp + comb,
        "That is a dispatch copy and a combine copy together. The part asks for one dispatch copy.",
        "round_trip", kind="wrong_scope")

    mb = 1e6
    add("per_step", layers * k * disp / mb,
        "That is the dispatch alone. Every layer also combines: k BF16 results come back.",
        "dispatch_only", kind="miscounted_term")
    add("per_step", layers * k * 2 * comb / mb,
        "You sent both directions in BF16. The dispatch is FP8 with FP32 scales.", "all_bf16",
        kind="wrong_precision")
    add("per_step", m.layers * k * (disp + comb) / mb,
        f"You counted all {m.layers} layers. The first {s['dense_layers']} are dense and have no "
        "all-to-all: only the MoE layers count.", "all_layers", kind="one_layer")
    add("per_step", layers * k * (h + comb) / mb,
        "You left out the FP32 scales that travel with each FP8 dispatch copy.", "no_scales",
        kind="miscounted_term")
    if s["shared"]:
        add("per_step", layers * (k + s["shared"]) * (disp + comb) / mb,
            "The shared expert runs on the token's own GPU (every GPU holds a copy), so it sends "
            "nothing over the all-to-all.", "shared_expert", kind="misread_mechanism")
    add("per_step", s["per_layer_bytes"] / mb,
        f"That is one MoE layer. A decode step runs all {layers} of them.", "one_layer",
        kind="one_layer")

    share = s["nic_share"].value
    per_step = s["per_step"].value
    add("nic_share", per_step,
        f"That counts every copy as crossing the NIC. With experts spread evenly over {n} nodes, "
        f"1/{n} of them sit on the token's own node and travel over NVLink.", "all_remote",
        kind="misread_mechanism")
    add("nic_share", s["nvlink_mb"],
        "That is the NVLink share: copies to the other GPUs of the token's own node. The NIC "
        "carries the copies to other nodes.", "nvlink_share", kind="wrong_scope")
    add("nic_share", per_step / n,
        f"That is the share that stays on the token's own node (1/{n}). The NIC carries the "
        f"other (N − 1)/N.", "local_share", kind="inverted")
    add("nic_share", layers * k * disp * (n - 1) / n / mb,
        "You counted the dispatch only. The combine results cross the NIC on their way back too.",
        "dispatch_only", kind="miscounted_term")

    bound = s["node_limited"].value
    add("node_limited", (limit - 1) * layers * (disp + comb) / mb,
        f"You assumed one of the {limit} nodes is the token's own. It need not be, so the bound "
        f"counts all {limit} as remote.", "own_node_excluded", kind="misread_mechanism")
    add("node_limited", limit * layers * disp / mb,
        "That is the dispatch alone. The combine crosses the NIC once per node on the way back.",
        "dispatch_only", kind="miscounted_term")
    add("node_limited", limit * per_step,
        "You multiplied by the node limit AND the experts per token. With forwarding, a token "
        "crosses the NIC once per node, not once per expert.", "per_expert_per_node",
        kind="miscounted_term")
    add("node_limited", per_step,
        "That is per-expert sending, with no saving. With NVLink forwarding a token crosses the "
        "NIC once per selected node, however many of its experts sit there.", "no_forwarding",
        kind="misread_mechanism")
    add("node_limited", bound / layers,
        f"That is one MoE layer. The step runs {layers}.", "one_layer", kind="one_layer")

    t = s["nic_time"].value
    add("nic_time", t / 8,
        f"Eight times too fast: {s['nic_gbit']:.0f} Gb/s is gigabits, {s['nic_gbs']:.0f} GB/s in "
        "bytes.", "bits_as_bytes", kind="bits_vs_bytes")
    add("nic_time", t * per_step / share,
        "You sent every copy over the NIC. Copies to the token's own node use NVLink.",
        "all_remote", kind="misread_mechanism")
    add("nic_time", t * s["gpn"],
        f"You pushed the whole node's traffic through one NIC. Each of the {s['gpn']} GPUs has "
        "its own.", "one_nic_per_node", kind="forgot_tp")
    add("nic_time", t / 2,
        "Half the reference: did you read the NIC rate as both directions summed? It is per "
        "direction, and one direction carries this GPU's outbound dispatch and combine copies.",
        "bidirectional", kind="peak_vs_achievable")
    add("nic_time", t * bound / share,
        "That is the node-limited bound's time. The part asks for per-expert sending with uniform "
        "placement.", "node_limited", kind="wrong_scope")

    wrong = {
        "nvlink_slower": "NVLink is several times faster than the NIC per GPU (DeepSeek quote "
        "about 160 GB/s against 50 GB/s on their nodes); forwarding does not bottleneck on it.",
        "fp8": "Nothing stops FP8 bytes crossing NVLink; the prefill kernels forward FP8 that way.",
        "bytes_same": f"The {k} experts do not always sit on {k} different nodes: at {n} nodes "
        "some share a node, and the node limit caps the count anyway. The bytes do differ; decode "
        "gives up the saving for another reason.",
    }
    for option, feedback in wrong.items():
        kind = "wrong_precision" if option == "fp8" else "misread_mechanism"
        out.append(Mistake("decode_tradeoff", option, feedback, option, kind=kind))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    d = domain(p["domain"])
    return [
        Fits("FP8 weights over the expert-parallel GPUs", d.gpu, p["nodes"] * d.gpus,
             model(p["model"]).weight_bytes(1)),
        HasFeature(p["model"], "group_limited_routing", "node-limited routing (part on M)"),
    ]
