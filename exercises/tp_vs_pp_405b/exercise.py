"""Q24: Llama-3.1-405B on eight GPUs, TP8 against TP4 × PP2, and the precision that forces PP.

Both layouts put one eighth of the weights and exactly the same KV bytes per token on every GPU
(TP8: all 126 layers, 1 of 8 KV heads; TP4 × PP2: 63 layers, 2 of 8 KV heads). TP8 runs two
all-reduces per layer; TP4 × PP2 reads each layer's weights with four GPUs instead of eight and
walks a token through its two stages one after the other, so at batch 1 it takes twice as long.
The last number part and the choice find when the weights plus a KV budget no longer fit one node,
which forces a second node and, because the NIC is far slower than NVLink, a pipeline boundary at
the node edge. Which precision does that depends on the GPU: BF16 405B overflows eight H100s but
not eight H200s or B200s.

Conventions (stated in the statement): weights FP8 (1 byte per parameter) in the two layouts, KV
cache BF16; the parameter count is the catalog's (every tensor of the checkpoint, norms included);
HBM is the marketed figure read as 10^9 bytes, all of it counted (nothing kept back for
activations); decode floors use the full HBM bandwidth.
"""
from __future__ import annotations

import random
from typing import Any

from exercises.catalog import domain, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext
from exercises.slips import Slips, near, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

MODEL = "Llama-3.1-405B"
NODES = ("HGX H100", "HGX H200", "HGX B200")
REQUESTS = (8, 16, 24, 32, 48, 64, 96, 128)
CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536)
AR_US = tuple(range(5, 16))  # per small all-reduce on NVLink [A, research notes §0.1: 5-15 µs]
# Closer than this to a node's capacity and the fit would hinge on conventions (usable memory,
# activation reserve) that the exercise deliberately leaves out.
FIT_MARGIN = 0.03

CANONICAL: dict[str, Any] = {
    "node": "HGX H100",
    "requests": 32,  # concurrent requests the KV budget must hold [A]
    "context": 8192,  # tokens each of them may reach [A]
    "ar_us": 10,  # one 8-way all-reduce of a batch-1 activation [A]
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    return draw_sensible(rng, lambda rng: choose(rng, {
        "node": NODES, "requests": REQUESTS, "context": CONTEXTS, "ar_us": AR_US,
    }), is_sensible)


def is_sensible(p: dict[str, Any]) -> bool:
    """The KV budget is real, nothing sits on a node's edge, and two nodes always suffice."""
    s = solve(p)
    node = s["node_gb"]
    return (
        s["kv_budget_gb"] >= 10
        and abs(s["need_fp8_gb"] / node - 1) >= FIT_MARGIN
        and abs(s["need_bf16_gb"] / node - 1) >= FIT_MARGIN
        and s["need_bf16_gb"] <= 2 * node * (1 - FIT_MARGIN)
    )


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(MODEL)
    d = domain(p["node"])
    g = d.gpu_record
    n_gpus = d.gpus
    assert n_gpus == 8, "the exercise is about one eight-GPU node"
    assert m.kv_heads is not None and m.head_dim is not None
    layers, kv_heads = m.layers, m.kv_heads
    bw = g.hbm_bytes_per_s

    # -- all-reduces: one after attention's output projection, one after the MLP's down
    # projection (both row-parallel), in every layer.
    allreduces = 2 * layers
    ar_ms = allreduces * p["ar_us"] / 1e3
    ar_msg_bytes = m.hidden * 2  # one BF16 activation vector at batch 1

    # -- KV per token per GPU: TP8 holds every layer and one KV head; TP4 x PP2 half the layers
    # and two heads.
    kv_tp8 = m.kv_bytes_per_token_per_gpu(8)
    kv_pp = m.kv_bytes_per_token_per_gpu(4) // 2
    assert kv_tp8 == kv_pp == 2 * layers * (kv_heads // 8) * m.head_dim * 2
    kv_total = m.kv_bytes_per_token()

    # -- weights and the batch-1 floors
    fp8_bytes = m.weight_bytes(1)
    bf16_bytes = m.weight_bytes(2)
    per_gpu = fp8_bytes / n_gpus  # both layouts: one eighth of the model on every GPU
    tp8_s = per_gpu / bw  # all eight GPUs read their share at once
    stage_s = (fp8_bytes / 2) / 4 / bw  # one stage: half the model over four GPUs
    pp_s = 2 * stage_s  # a token crosses both stages one after the other

    # -- the fit check: weights + KV budget against one node's HBM
    kv_tokens = p["requests"] * p["context"]
    kv_budget = kv_tokens * kv_total
    node_bytes = d.hbm_bytes
    need_fp8 = fp8_bytes + kv_budget
    need_bf16 = bf16_bytes + kv_budget
    fp8_fits, bf16_fits = need_fp8 <= node_bytes, need_bf16 <= node_bytes
    forcing = "neither" if bf16_fits else ("bf16" if fp8_fits else "both")
    # When BF16 needs two nodes: TP8 inside each node, PP2 across them.
    two_node_per_gpu = bf16_bytes / (2 * n_gpus)
    two_node_kv = m.kv_bytes_per_token_per_gpu(8) // 2

    nvlink = d.nvlink_bytes_per_s_one_way
    nic = d.nic_bytes_per_s

    s: dict[str, Any] = {
        "allreduces": Quantity(allreduces, ""),
        "kv_gpu": Quantity(kv_tp8, "B"),
        "tp8_ms": Quantity(tp8_s * 1e3, "ms"),
        "pp_ms": Quantity(pp_s * 1e3, "ms"),
        "bf16_gb": Quantity(bf16_bytes / 1e9, "GB"),
        "forcing": forcing,
        # givens the statement prints
        "gpu": g.name,
        "n_gpus": n_gpus,
        "params": m.params,
        "params_b": m.params / 1e9,
        "layers": layers,
        "hidden": m.hidden,
        "q_heads": m.q_heads,
        "kv_heads": kv_heads,
        "head_dim": m.head_dim,
        "ffn": m.ffn,
        "hbm_gb": g.hbm_gb,
        "hbm_tbps": g.hbm_tbps,
        "nvlink_gbs_one_way": nvlink / 1e9,
        "nic_name": d.nic,
        "nic_gbs": nic / 1e9,
        "kv_tokens": kv_tokens,
        # intermediates for the solution
        "layers_per_stage": layers // 2,
        "kv_heads_tp8": kv_heads // 8,
        "kv_heads_tp4": kv_heads // 4,
        "kv_total": kv_total,
        "ar_ms": ar_ms,
        "ar_msg_bytes": ar_msg_bytes,
        "ar_msg_kib": ar_msg_bytes / 1024,
        "fp8_gb": fp8_bytes / 1e9,
        "per_gpu_gb": per_gpu / 1e9,
        "bf16_per_gpu_gb": bf16_bytes / n_gpus / 1e9,
        "stage_ms": stage_s * 1e3,
        "tp8_total_ms": tp8_s * 1e3 + ar_ms,
        "pp_total_ms": pp_s * 1e3 + ar_ms,  # also 2 all-reduces per layer, 4-way
        "tp8_tok_s": 1 / (tp8_s + ar_ms / 1e3),
        "pp_tok_s": 1 / (pp_s + ar_ms / 1e3),
        "breakeven_us": (pp_s - tp8_s) / allreduces * 1e6,
        "kv_budget_gb": kv_budget / 1e9,
        "node_gb": node_bytes / 1e9,
        "need_fp8_gb": need_fp8 / 1e9,
        "need_bf16_gb": need_bf16 / 1e9,
        "fp8_share_pct": fp8_bytes / node_bytes * 100,
        "bf16_share_pct": bf16_bytes / node_bytes * 100,
        "h100_node_gb": domain("HGX H100").hbm_bytes / 1e9,
        "h200_node_gb": domain("HGX H200").hbm_bytes / 1e9,
        "b200_node_gb": domain("HGX B200").hbm_bytes / 1e9,
        "fp8_verdict": "fits" if fp8_fits else "does not fit",
        "bf16_verdict": "fits" if bf16_fits else "does not fit",
        "two_node_per_gpu_gb": two_node_per_gpu / 1e9,
        "two_node_kv": two_node_kv,
        "two_node_ms": 2 * (two_node_per_gpu / bw) * 1e3,
        "nvlink_over_nic": nvlink / nic,
        "forcing_text": {
            "bf16": "BF16 forces the second node: FP8 weights and the KV budget fit in one node, "
                    "BF16 weights and the same budget do not",
            "both": "even FP8 does not fit: the KV budget pushes both precisions onto two nodes",
            "neither": "neither precision forces it here: BF16 weights and the KV budget fit in "
                       "one node",
        }[forcing],
    }
    s["judgement"] = _model_answer(s)
    return s


def _model_answer(s: dict[str, Any]) -> str:
    return (
        f"Both layouts store {s['per_gpu_gb']:.1f} GB of FP8 weights and {s['kv_gpu'].value:,} B "
        "of KV per token on every GPU, so capacity does not decide. At batch 1 TP8 reads a "
        f"token's weights in {s['tp8_ms'].value:.1f} ms with all eight GPUs at once; TP4 × PP2 "
        f"needs {s['pp_ms'].value:.1f} ms because its two stages run one after the other. The "
        f"{s['allreduces'].value} all-reduces cost TP8 about {s['ar_ms']:.1f} ms, and TP4 × PP2 "
        "runs as many (4-way), so for a latency SLO I run TP8. TP4 × PP2 can match TP8's "
        "throughput only with two or more micro-batches in flight to keep both stages busy, at "
        "twice the per-user latency. If the model needs two nodes, the node edge must be a "
        f"pipeline boundary: the NIC is about {s['nvlink_over_nic']:.0f} times slower than NVLink "
        "and a tensor-parallel group across it would put every per-layer all-reduce on it, while "
        "a pipeline edge sends one activation per token per micro-batch. Here, "
        f"{s['forcing_text']}."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near, merge_floor=1e-9).add

    layers = s["layers"]
    add("allreduces", layers,
        "One per layer is half of it: attention's output projection and the MLP's down "
        "projection are both row-parallel, and each ends in its own all-reduce.", "one_per_layer",
        kind="miscounted_term")
    add("allreduces", 4 * layers,
        "The column-parallel projections (QKV, gate/up) need no communication: each GPU keeps its "
        "slice of the output. Only the two row-parallel ones end in an all-reduce.", "every_matmul",
        kind="forgot_tp")
    add("allreduces", 2 * layers * s["n_gpus"],
        "That counts each GPU's part in every collective. One all-reduce is one collective, "
        "however many GPUs take part.", "per_gpu", kind="forgot_tp")
    add("allreduces", 2 * layers + 1,
        "The part leaves out the embedding (vocab-parallel, one more all-reduce in vLLM and "
        "Megatron) and the LM head; count the layers only.", "embedding", kind="miscounted_term")

    kv = s["kv_gpu"].value
    add("kv_gpu", s["kv_total"],
        "That is the whole model's KV per token. Each GPU holds only its KV heads (TP8) or its "
        "layers and heads (TP4 × PP2).", "whole_model", kind="forgot_tp")
    add("kv_gpu", 2 * kv,
        "That is TP4's two KV heads in all the layers. With two pipeline stages each GPU holds "
        "only its stage's half of the layers.", "tp4_all_layers", kind="one_layer")
    add("kv_gpu", kv / 2, "Half the reference: you counted K but not V, or used one byte per "
        "element. The cache stores K and V, in BF16.", "k_only", kind="k_without_v")
    add("kv_gpu", kv * s["q_heads"] // s["kv_heads"],
        f"You used the {s['q_heads']} query heads. With grouped-query attention only the "
        f"{s['kv_heads']} KV heads are cached.", "q_heads", kind="q_vs_kv_heads")

    tp8 = s["tp8_ms"].value
    add("tp8_ms", 2 * tp8,
        "Twice the reference: the weights are FP8, one byte per parameter, not BF16. (Or you "
        "split them over four GPUs: in TP8 all eight read at once.)", "bf16_or_four",
        kind="wrong_precision")
    add("tp8_ms", s["n_gpus"] * tp8,
        "That is one GPU reading all the weights. In TP8 each GPU reads only its eighth, and all "
        "eight do it at the same time.", "one_gpu", kind="forgot_tp")
    add("tp8_ms", tp8 + s["ar_ms"],
        "That adds the all-reduce time. The part asks for the weight-read floor alone; the "
        "all-reduces come on top, and the solution adds them.", "with_allreduce",
        kind="miscounted_term")

    pp = s["pp_ms"].value
    add("pp_ms", pp / 2,
        "That is one stage. For a single token the stages cannot overlap: stage 2 needs stage "
        "1's output, so the token waits for both in turn.", "stages_overlap", kind="forgot_tp")
    add("pp_ms", 2 * pp, "Twice the reference: the weights are FP8, one byte per parameter.",
        "bf16", kind="wrong_precision")
    add("pp_ms", 4 * pp,
        "That puts each stage's half of the model on a single GPU. Each stage is split over four "
        "GPUs (TP4), which read their shares in parallel.", "stage_on_one_gpu", kind="forgot_tp")

    bf16 = s["bf16_gb"].value
    add("bf16_gb", bf16 / 2, "That is the FP8 size. BF16 stores 2 bytes per parameter.", "fp8",
        kind="wrong_precision")
    add("bf16_gb", bf16 * 2, "Twice the reference: BF16 is 2 bytes per parameter, not 4.", "fp32",
        kind="wrong_precision")
    add("bf16_gb", bf16 / s["n_gpus"],
        "That is one GPU's share. The part asks for the whole model.", "per_gpu", kind="forgot_tp")
    add("bf16_gb", s["need_bf16_gb"],
        "That adds the KV budget. The part asks for the weights alone.", "with_kv",
        kind="wrong_scope")

    why = (f"One node holds {s['node_gb']:,.0f} GB. Weights plus the "
           f"{s['kv_budget_gb']:,.1f} GB KV budget: FP8 needs {s['need_fp8_gb']:,.1f} GB "
           f"({s['fp8_verdict']}), BF16 needs {s['need_bf16_gb']:,.1f} GB ({s['bf16_verdict']}).")
    for option in ("bf16", "fp8", "both", "neither"):
        if option != s["forcing"]:
            out.append(Mistake("forcing", option, why, f"forcing_{option}",
                               kind="wrong_precision"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    d = domain(p["node"])
    m = model("Llama-3.1-405B")
    return [
        Fits("FP8 weights on the node", d.gpu, d.gpus, m.weight_bytes(1)),
        # Whether FP8 or BF16 weights plus the KV budget fit one node is what the parts ask.
        Fits("weights and the KV budget", d.gpu, d.gpus, 0.0, asked=True),
        WithinContext("Llama-3.1-405B", p["context"], "a request's context"),
    ]
