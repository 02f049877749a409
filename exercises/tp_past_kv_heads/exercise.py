"""Q46: tensor parallelism past the KV-head count.

A model with H KV heads is served on 2H GPUs. Three layouts use them all: one replica tensor
parallel across all 2H GPUs ("wide TP"), one replica tensor parallel over H GPUs with two pipeline
stages, and two independent replicas of TP = H. Past TP = H a KV head cannot be split any further,
so vLLM stores each head on T/H GPUs: the wide layout halves the weights per GPU and leaves the KV
bytes per token per GPU exactly where TP = H had them, and half of its KV memory is a copy. The
parts derive that, price the copy, compare the layouts' KV capacity and ask for the pick.

Conventions (stated in the statement): GPU capacity is the catalog's marketed figure read as 10^9
bytes (research notes facts-q01-q25 §0.3; the Q46 notes use 80 GiB, see the tests); weights are
split evenly over the GPUs of a replica (the wide layout really holds a little more: its K/V
projection weights are replicated like the cache; the solution prices that); activation and
other reserved memory is the same per GPU in every layout.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, Holds
from exercises.slips import Slips, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

KV_DTYPES = {2: "BF16", 1: "FP8"}  # bytes per cached element -> the name the statement shows
BLOCK = 16  # vLLM's default block size
LAYOUTS = ("tp_wide", "tp_pp", "dp")

# (model, GPU, bytes per weight). The GPU count is twice the model's KV heads: 16 GPUs (two 8-GPU
# nodes) for the 8-KV-head models, 8 GPUs (one node) for Qwen3-30B-A3B's 4 KV heads. Every layout
# must fit with room for KV (is_sensible checks it); FP8 weights only where the GPU has FP8 cores.
DEPLOYMENTS: tuple[tuple[str, str, int], ...] = (
    ("Llama-3.1-70B", "H100 SXM", 2),
    ("Llama-3.1-70B", "H200 SXM", 2),
    ("Llama-3.1-70B", "B200", 2),
    ("Llama-3.1-70B", "A100 SXM 80GB", 2),
    ("Llama-3.1-70B", "H100 SXM", 1),
    ("Qwen2.5-72B", "H100 SXM", 2),
    ("Qwen2.5-72B", "H200 SXM", 2),
    ("Qwen2.5-72B", "A100 SXM 80GB", 2),
    ("Llama-3.1-405B", "H100 SXM", 1),
    ("Llama-3.1-405B", "H200 SXM", 1),
    ("Llama-3.1-405B", "B200", 1),
    ("Llama-3.1-405B", "H200 SXM", 2),
    ("Llama-3.1-405B", "B200", 2),
    ("Qwen3-30B-A3B", "H100 SXM", 2),
    ("Qwen3-30B-A3B", "H200 SXM", 2),
    ("Qwen3-30B-A3B", "A100 SXM 80GB", 2),
)
UTILS = (0.85, 0.9, 0.92, 0.95)
OTHER_GB = (2.0, 2.5, 3.0, 3.5, 4.0)  # activation peak + non-torch memory, per GPU
KV_BYTES = (2, 2, 1)  # BF16 KV twice as often as FP8 KV (FP8 only where the GPU has FP8 cores)
GPUS_PER_NODE = 8  # HGX boards: eight GPUs on NVLink, one NIC each to the next node

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "weight_bytes": 2,  # BF16
    "util": 0.9,
    "other_gb": 3.0,  # [A, research notes Q46: "3 GiB other per GPU"]
    "kv_bytes": 2,  # BF16 KV cache
}


# ----------------------------------------------------------------------------------------------
# The arithmetic of one layout (pure; the tests replay the research notes' table with it)


def kv_bytes_per_token_gpu(layers: int, kv_heads: int, head_dim: int, tp: int, pp: int = 1,
                           dtype_bytes: int = 2) -> int:
    """K and V for the heads one GPU holds, max(1, H/T), in the layers its stage holds, L/P."""
    heads_gpu = max(1, kv_heads // tp)
    return 2 * (layers // pp) * heads_gpu * head_dim * dtype_bytes


def layout_tokens(hbm_bytes: float, util: float, weight_bytes: float, gpus_per_replica: int,
                  other_bytes: float, kv_gpu: int, block: int = BLOCK) -> tuple[float, int]:
    """(per-GPU KV budget in bytes, tokens one replica holds): the budget cut into whole blocks."""
    budget = util * hbm_bytes - weight_bytes / gpus_per_replica - other_bytes
    blocks = max(0, math.floor(budget / (block * kv_gpu)))
    return budget, blocks * block


# ----------------------------------------------------------------------------------------------
# Variants


def _weights_gb(p: dict[str, Any]) -> float:
    return round(model(p["model"]).weight_bytes(p["weight_bytes"]) / 1e9, 1)


def _layouts(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    h = m.kv_heads
    n = 2 * h
    w = _weights_gb(p) * 1e9
    other = p["other_gb"] * 1e9
    out: dict[str, dict[str, Any]] = {}
    for name, tp, pp, replicas in (("tp_wide", n, 1, 1), ("tp_pp", h, 2, 1), ("dp", h, 1, 2)):
        kv_gpu = kv_bytes_per_token_gpu(m.layers, h, m.head_dim, tp, pp, p["kv_bytes"])
        budget, tokens = layout_tokens(g.hbm_gb * 1e9, p["util"], w, tp * pp, other, kv_gpu)
        out[name] = {
            "tp": tp,
            "pp": pp,
            "replicas": replicas,
            "kv_gpu": kv_gpu,
            "weights_gpu_gb": w / (tp * pp) / 1e9,
            "budget_gb": budget / 1e9,
            "tokens_replica": tokens,
            "tokens_total": tokens * replicas,
        }
    return out


def is_sensible(p: dict[str, Any]) -> bool:
    m = model(p["model"])
    if m.kv_heads is None or m.sliding_window is not None or m.layers % 2:
        return False
    if p["kv_bytes"] == 1 and gpu(p["gpu"]).fp8_dense_tflops is None:
        return False  # no FP8 KV cache on a GPU without FP8 support (A100)
    lay = _layouts(p)
    if any(v["budget_gb"] < 4 for v in lay.values()):  # every layout fits with a real pool
        return False
    totals = sorted(v["tokens_total"] for v in lay.values())
    # The ranking must not hinge on rounding: neighbours at least 5 % apart.
    return all(b >= 1.05 * a for a, b in zip(totals, totals[1:], strict=False))


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        name, gpu_name, wbytes = rng.choice(DEPLOYMENTS)
        return {"model": name, "gpu": gpu_name, "weight_bytes": wbytes,
                **choose(rng, {"util": UTILS, "other_gb": OTHER_GB, "kv_bytes": KV_BYTES})}

    return draw_sensible(rng, draw, is_sensible)


# ----------------------------------------------------------------------------------------------
# The reference

FORMULA = "2*L*max(1, H/T)*d*b"


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    h = m.kv_heads
    n = 2 * h
    lay = _layouts(p)
    wide, pipe, dp = lay["tp_wide"], lay["tp_pp"], lay["dp"]

    # The catalog's own rule agrees with the layout arithmetic (max(1, H // T) heads per GPU).
    assert wide["kv_gpu"] == m.kv_bytes_per_token_per_gpu(n, p["kv_bytes"])
    assert dp["kv_gpu"] == m.kv_bytes_per_token_per_gpu(h, p["kv_bytes"])

    # The duplicate: at TP = 2H each head sits on 2 GPUs, so a fraction 1 - H/T of every byte of
    # KV stored is a second copy. Priced on the full pool of the wide layout, all GPUs together.
    dup_fraction = 1 - h / n
    pool_all_gb = n * wide["tokens_replica"] * wide["kv_gpu"] / 1e9
    dup_gb = pool_all_gb * dup_fraction
    unique_per_token = m.kv_bytes_per_token(p["kv_bytes"])
    stored_per_token = n * wide["kv_gpu"]

    ranking = sorted(LAYOUTS, key=lambda k: -lay[k]["tokens_total"])
    nodes = max(1, n // GPUS_PER_NODE)

    # What the even split leaves out at TP = 2H: each GPU holds one KV head's K and V projection
    # weights, not half of one.
    kv_proj_params = 2 * m.layers * m.hidden * h * m.head_dim
    kv_proj_extra_gb = (kv_proj_params / h - kv_proj_params / n) * p["weight_bytes"] / 1e9

    names = {
        "tp_wide": f"TP{n}",
        "tp_pp": f"TP{h} × PP2",
        "dp": f"2 × TP{h}",
    }
    s: dict[str, Any] = {
        # part answers
        "kv_gpu": Quantity(wide["kv_gpu"], "B"),
        "formula": FORMULA,
        "cap_tp": Quantity(wide["tokens_replica"], "token"),
        "dup_gb": Quantity(dup_gb, "GB"),
        "cap_pp": Quantity(pipe["tokens_replica"], "token"),
        "rank": ranking,
        # givens the statement prints
        "n_gpus": n,
        "nodes": nodes,
        "node_text": ("one node of 8 GPUs" if nodes == 1 else
                      f"{nodes} nodes of {GPUS_PER_NODE} GPUs (NVLink inside a node, one NIC per "
                      "GPU between nodes)"),
        "layers": m.layers,
        "half_layers": m.layers // 2,
        "q_heads": m.q_heads,
        "kv_heads": h,
        "head_dim": m.head_dim,
        "hidden": m.hidden,
        "weights_gb": _weights_gb(p),
        "weight_dtype": "FP8" if p["weight_bytes"] == 1 else "BF16",
        "kv_dtype": KV_DTYPES[p["kv_bytes"]],
        "kv_bytes_text": "1 byte" if p["kv_bytes"] == 1 else f"{p['kv_bytes']} bytes",
        "fp8_note": ("FP8 KV would halve the bytes in every layout" if p["kv_bytes"] == 2 else
                     "the cache is already FP8, so that lever is spent"),
        "hbm_gb": g.hbm_gb,
        "util_pct": p["util"] * 100,
        "block": BLOCK,
        "wide_name": names["tp_wide"],
        "pp_name": names["tp_pp"],
        "dp_name": names["dp"],
        # intermediates for the solution
        "requested_gb": p["util"] * g.hbm_gb,
        "kv_gpu_half": dp["kv_gpu"],
        "kv_gpu_pp": pipe["kv_gpu"],
        "kv_model": unique_per_token,
        "kv_model_kib": unique_per_token / 1024,
        "kv_gpu_kib": wide["kv_gpu"] / 1024,
        "kv_gpu_pp_kib": pipe["kv_gpu"] / 1024,
        "naive_kv_gpu": unique_per_token // n,
        "q_heads_gpu": m.q_heads // n,
        "wide_weights_gb": wide["weights_gpu_gb"],
        "wide_budget_gb": wide["budget_gb"],
        "pp_weights_gb": pipe["weights_gpu_gb"],
        "pp_budget_gb": pipe["budget_gb"],
        "dp_weights_gb": dp["weights_gpu_gb"],
        "dp_budget_gb": dp["budget_gb"],
        "dp_tokens_replica": dp["tokens_replica"],
        "dp_tokens_total": dp["tokens_total"],
        "wide_tokens": wide["tokens_replica"],
        "pp_tokens": pipe["tokens_replica"],
        "stored_per_token": stored_per_token,
        "stored_per_token_kib": stored_per_token / 1024,
        "dup_fraction_pct": dup_fraction * 100,
        "pool_all_gb": pool_all_gb,
        "dup_gpus": dup_gb / (wide["budget_gb"]),
        "pp_over_wide": pipe["tokens_replica"] / wide["tokens_replica"],
        "dp_over_wide": dp["tokens_total"] / wide["tokens_replica"],
        "ranking_text": " > ".join(f"{names[k]} ({lay[k]['tokens_total'] / 1e6:.2f} M)"
                                   for k in ranking),
        "all_reduces": 2 * m.layers,
        "kv_proj_extra_gb": kv_proj_extra_gb,
        "kv_proj_extra_pct": kv_proj_extra_gb / wide["budget_gb"] * 100,
        "cross_node": nodes > 1,
        "wide_traffic": (f"and its {2 * m.layers} all-reduces per step cross the node boundary "
                         "over the NICs" if nodes > 1 else
                         f"and its {2 * m.layers} all-reduces per step now span all {n} GPUs"),
    }
    s["pick"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"Not {s['wide_name']}. Past TP{s['kv_heads']} the weights per GPU keep halving but the KV "
        f"per token per GPU stays at {s['kv_gpu'].value:,} B, because each KV head is stored on "
        f"two GPUs: half of its {s['pool_all_gb']:.0f} GB of KV ({s['dup_gb'].value:.0f} GB) is a "
        f"copy, {s['wide_traffic']}. {s['pp_name']} stores every head once and gives each GPU "
        f"half the layers, so it holds the most KV ({s['pp_tokens'] / 1e6:.2f} M tokens); it "
        "suits long contexts and big batches, at the cost of pipeline bubbles at small batch and "
        f"no latency gain over TP{s['kv_heads']}. {s['dp_name']} keeps each replica inside its "
        "GPU group with no traffic between them, doubles throughput, and fails independently, but "
        "stores the weights twice and splits the KV into two pools, so one very long request sees "
        "only half of it. If the workload is capacity-bound (long contexts, many concurrent "
        f"sessions) I pick {s['pp_name']}; if it fits comfortably I pick {s['dp_name']}. If the "
        "wide tensor-parallel group is needed for latency, decode context parallelism lets the "
        "ranks that share a head split the tokens instead of copying them."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    g = gpu(p["gpu"])
    h = m.kv_heads
    n = 2 * h
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge_floor=1e-9, skip=nonpositive).add

    # -- kv_gpu --------------------------------------------------------------------------------------
    kv = s["kv_gpu"].value
    add("kv_gpu", s["naive_kv_gpu"],
        f"You split {h} KV heads over {n} GPUs, half a head each. A head cannot be split: every "
        "GPU that runs its query heads needs the whole K and V, so each GPU keeps one head and "
        "each head is stored twice.", "half_head", kind="q_vs_kv_heads")
    add("kv_gpu", s["kv_model"],
        "That is the whole model's KV per token; each GPU holds only its own head.", "whole_model",
        kind="forgot_tp")
    add("kv_gpu", kv * 2,
        f"Twice the reference: the cache is {KV_DTYPES[p['kv_bytes']]}, {p['kv_bytes']} "
        f"byte{'s' if p['kv_bytes'] > 1 else ''} per element.", "dtype", kind="wrong_precision")
    add("kv_gpu", kv * m.q_heads / h,
        f"You counted query heads ({s['q_heads_gpu']} per GPU); only KV heads are cached.",
        "q_heads", kind="q_vs_kv_heads")
    add("kv_gpu", kv // m.layers,
        f"That is one layer; all {m.layers} layers keep their own K and V.", "one_layer",
        kind="one_layer")

    # -- cap_tp ----------------------------------------------------------------------------------------
    cap = s["cap_tp"].value
    budget_b = s["wide_budget_gb"] * 1e9
    add("cap_tp", budget_b / s["naive_kv_gpu"],
        f"You let TP{n} split the heads in half. Each GPU holds a whole head, so each token costs "
        f"as many bytes per GPU as at TP{h}: divide by the per-GPU KV bytes of part 1.",
        "half_head", kind="q_vs_kv_heads")
    add("cap_tp", cap * n,
        f"The {n} pools are not added: every token lives on all {n} GPUs at once.", "summed_gpus",
        kind="forgot_tp")
    add("cap_tp", budget_b / s["kv_model"],
        "You divided one GPU's budget by the whole model's KV per token.", "whole_model_kv",
        kind="forgot_tp")
    add("cap_tp", (g.hbm_gb - s["wide_weights_gb"] - p["other_gb"]) * 1e9 / kv,
        f"You used all {g.hbm_gb:.0f} GB; the engine takes {p['util']} of it.", "no_util",
        kind="peak_vs_achievable")
    add("cap_tp", s["dp_budget_gb"] * 1e9 / kv,
        f"At TP{n} each GPU holds 1/{n} of the weights, not 1/{h}.", "weights_half",
        kind="forgot_tp")

    # -- dup_gb ------------------------------------------------------------------------------------------
    dup = s["dup_gb"].value
    add("dup_gb", dup / n,
        f"That is one GPU's share. Price the copy across all {n} GPUs.", "one_gpu",
        kind="forgot_tp")
    add("dup_gb", s["pool_all_gb"],
        "That is the whole KV pool. Only the second copy of each head is waste: half of it.",
        "whole_pool", kind="wrong_scope")
    add("dup_gb", n * g.hbm_gb * s["dup_fraction_pct"] / 100,
        "Only the KV pool holds copies of the cache, not the whole of every GPU's memory.",
        "whole_memory", kind="wrong_scope")

    # -- cap_pp -------------------------------------------------------------------------------------------
    cap_pp = s["cap_pp"].value
    pp_budget_b = s["pp_budget_gb"] * 1e9
    add("cap_pp", pp_budget_b / kv,
        f"Each pipeline stage stores KV only for its own {s['half_layers']} layers: "
        f"{s['kv_gpu_pp']:,} B per token per GPU.", "all_layers", kind="one_layer")
    add("cap_pp", s["dp_budget_gb"] * 1e9 / s["kv_gpu_pp"],
        f"With two stages each GPU holds half the layers' weights too: 1/{n} of the weights, "
        f"not 1/{h}.", "weights_half", kind="forgot_tp")
    add("cap_pp", cap_pp * 2,
        "The two stages hold the same tokens (different layers of them); their pools do not "
        "add up.", "summed_stages", kind="forgot_tp")
    add("cap_pp", cap_pp * n,
        f"Every token is spread over all {n} GPUs; the pools do not add.", "summed_gpus",
        kind="forgot_tp")

    # -- formula -----------------------------------------------------------------------------------------
    out += [
        Mistake("formula", "2*L*H/T*d*b",
                "Right while T is at most H. Past it each GPU still holds one whole head: "
                "max(1, H/T).", "no_max", kind="q_vs_kv_heads"),
        Mistake("formula", "2*L*H*d*b",
                "That is the whole model's KV per token; tensor parallelism splits the heads.",
                "no_split", kind="forgot_tp"),
        Mistake("formula", "L*max(1, H/T)*d*b",
                "K and V are both cached: a factor 2.", "k_only", kind="k_without_v"),
        Mistake("formula", "2*L*min(1, H/T)*d*b",
                "min caps a GPU at one head; the cap works the other way. A GPU holds H/T heads "
                "while T < H and never fewer than one.", "min_not_max", kind="inverted"),
    ]

    # -- rank ---------------------------------------------------------------------------------------------
    ref = s["rank"]
    candidates = [
        (["tp_wide", *[k for k in ref if k != "tp_wide"]],
         f"TP{n} has the fewest weights per GPU, but its KV per token per GPU is no smaller than "
         f"TP{h}'s and half its pool is copies: it holds {s['wide_tokens'] / 1e6:.2f} M tokens."),
        (["dp", *[k for k in ref if k != "dp"]],
         f"Two replicas store the weights twice over the same GPUs ({s['dp_weights_gb']:.1f} GB "
         f"per GPU against {s['pp_weights_gb']:.1f}), which costs KV: {s['dp_tokens_total'] / 1e6:.2f} "
         f"M tokens in all against {s['pp_tokens'] / 1e6:.2f} M for {s['pp_name']}."),
    ]
    for order, feedback in candidates:
        if order != ref:
            out.append(Mistake("rank", order, feedback, f"{order[0]}_first", kind="forgot_tp"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    h = model(p["model"]).kv_heads
    assert h is not None
    # The data-parallel layout runs a whole replica on H GPUs: the tightest of the three.
    return [
        Fits("weights of a TP=H replica inside gpu_memory_utilization", p["gpu"], h,
             _weights_gb(p) * 1e9, usable=p["util"]),
        Holds(all(v["tokens_replica"] > 0 for v in _layouts(p).values()),
              "every layout leaves KV room"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    s = solve(p)
    return {"formula": {"L": s["layers"], "H": s["kv_heads"], "d": s["head_dim"],
                        "b": p["kv_bytes"], "T": s["n_gpus"]}}
