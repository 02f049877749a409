"""Q42: max concurrency: the one-line formula, and the memory budget around it.

A vLLM deployment (one model, `tp` GPUs, tensor parallel) sizes its KV pool at start-up: it takes
`gpu_memory_utilization` of each GPU's total memory, subtracts what it measured for the weights, the
profile run's activation peak and the memory allocated outside PyTorch, and cuts the rest into
16-token blocks. The start-up log then prints the pool in tokens and a "maximum concurrency" for
requests of `max_model_len` tokens. The parts walk that budget: KV bytes per token per GPU (where
tensor parallelism stops splitting heads), the per-GPU budget, the pool, the logged concurrency,
the one-line formula, and why the count is a ceiling.

Conventions (stated in the statement): GPU memory is the total the driver reports (the catalog's
hbm_driver_total_mib, shown to 0.01 GB), because that is what vLLM multiplies by
gpu_memory_utilization and what its log prints; the Q42 notes use 80 GiB instead, see the tests;
weights are split evenly over the tensor-parallel GPUs; CUDA graphs are not in the budget (they are
captured after the pool is sized, as vLLM does with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0).
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.deployment import deployment
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, Holds, WithinContext
from exercises.slips import Slips, nonpositive, tolerances
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

KV_DTYPE_BYTES = 2  # the KV cache is BF16 in every variant
BLOCK = 16  # vLLM's default block size on CUDA (vllm/config/cache.py, DEFAULT_BLOCK_SIZE)

# Deployments a variant may use: (model, GPU, tensor-parallel degree, bytes per weight). Every one
# is a layout people run: the weights fit with room for KV, tp divides or is a multiple of the KV
# heads (vLLM refuses anything else), and FP8 weights only on GPUs with FP8 tensor cores.
# Qwen3-30B-A3B at TP8 has 4 KV heads on 8 GPUs: the variants where the max(1, .) bites.
DEPLOYMENTS: tuple[tuple[str, str, int, int], ...] = (
    ("Llama-3.1-8B", "H100 SXM", 1, 2),
    ("Llama-3.1-8B", "A100 SXM 80GB", 1, 2),
    ("Llama-3.1-8B", "H200 SXM", 1, 2),
    ("Llama-3.1-8B", "B200", 1, 2),
    ("Llama-3.1-8B", "H100 SXM", 2, 2),
    ("Llama-2-7B", "H100 SXM", 1, 2),
    ("Llama-2-7B", "A100 SXM 80GB", 1, 2),
    ("Llama-2-7B", "A100 SXM 80GB", 2, 2),
    ("Llama-3.1-70B", "H100 SXM", 4, 2),
    ("Llama-3.1-70B", "H100 SXM", 8, 2),
    ("Llama-3.1-70B", "A100 SXM 80GB", 4, 2),
    ("Llama-3.1-70B", "A100 SXM 80GB", 8, 2),
    ("Llama-3.1-70B", "H200 SXM", 2, 2),
    ("Llama-3.1-70B", "H200 SXM", 4, 2),
    ("Llama-3.1-70B", "H200 SXM", 8, 2),
    ("Llama-3.1-70B", "B200", 2, 2),
    ("Llama-3.1-70B", "B200", 4, 2),
    ("Llama-3.1-70B", "H100 SXM", 2, 1),
    ("Llama-3.1-70B", "H100 SXM", 4, 1),
    ("Qwen2.5-72B", "H100 SXM", 4, 2),
    ("Qwen2.5-72B", "H100 SXM", 8, 2),
    ("Qwen2.5-72B", "H200 SXM", 4, 2),
    ("Llama-3.1-405B", "H200 SXM", 8, 2),
    ("Llama-3.1-405B", "B200", 8, 2),
    ("Llama-3.1-405B", "H100 SXM", 8, 1),
    ("Llama-3.1-405B", "H200 SXM", 8, 1),
    ("Qwen3-30B-A3B", "H100 SXM", 1, 2),
    ("Qwen3-30B-A3B", "H100 SXM", 2, 2),
    ("Qwen3-30B-A3B", "H100 SXM", 8, 2),
    ("Qwen3-30B-A3B", "A100 SXM 80GB", 8, 2),
    ("Qwen3-30B-A3B", "H200 SXM", 8, 2),
    ("Mixtral-8x7B", "H100 SXM", 2, 2),
    ("Mixtral-8x7B", "H100 SXM", 4, 2),
    ("Mixtral-8x7B", "A100 SXM 80GB", 4, 2),
)

# --max-model-len choices, all multiples of the block size. Models whose catalog entry carries
# max_position_embeddings are capped by it in _max_lens(); the catalog has no context figure for
# Llama 3.1 (128K = 131,072 tokens on Meta's model cards) or Qwen2.5-72B (32,768 in its config), so
# these two lists are written out and stay at or below those figures.
MAX_LENS: dict[str, tuple[int, ...]] = {
    "Llama-3.1-8B": (32768, 65536, 131072),
    "Llama-3.1-70B": (32768, 65536, 131072),
    "Llama-3.1-405B": (32768, 65536, 131072),
    "Qwen2.5-72B": (16384, 32768),
    "Llama-2-7B": (2048, 4096),
    "Qwen3-30B-A3B": (16384, 32768, 40960),
    "Mixtral-8x7B": (16384, 32768),
}
UTILS = (0.85, 0.9, 0.92, 0.95)
ACT_GB = (1.0, 1.5, 2.0, 2.5, 3.0)  # the profile run's activation peak, per GPU
NONTORCH_GB = (0.5, 1.0, 1.5)  # memory allocated outside PyTorch during start-up, per GPU
AVG_TOKENS = (1000, 1500, 2000, 3000, 4096, 6000, 8192)  # mean request, prompt + output

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "gpu": "H100 SXM",
    "tp": 8,
    "weight_bytes": 2,  # BF16 weights
    "util": 0.9,  # --gpu-memory-utilization
    "act_gb": 2.0,  # profiled activation peak per GPU [A, research notes Q42]
    "nontorch_gb": 1.0,  # non-torch memory per GPU [A, research notes Q42]
    "max_model_len": 131072,
    "avg_tokens": 8192,  # mean prompt + output of the real traffic (the notes' "@8K" column)
}


# ----------------------------------------------------------------------------------------------
# The ledger (pure arithmetic, also used by the tests to replay the research notes' table)


def total_memory_gb(gpu_name: str) -> float:
    """One GPU's total memory as the driver reports it to vLLM, in GB, rounded as displayed."""
    return round(gpu(gpu_name).hbm_driver_total_bytes / 1e9, 2)


def kv_budget_bytes(hbm_bytes: float, util: float, weight_bytes_per_gpu: float,
                    reserved_bytes: float) -> float:
    """What one GPU leaves for KV: utilisation x TOTAL memory, minus weights and the rest."""
    return util * hbm_bytes - weight_bytes_per_gpu - reserved_bytes


def num_blocks(budget_bytes: float, kv_bytes_per_token_gpu: int, block: int = BLOCK) -> int:
    """vLLM: int(available // page_size // num_layers); one page is block tokens of one layer on
    one GPU, so this is floor(budget / (block x per-token bytes on this GPU))."""
    return max(0, math.floor(budget_bytes / (block * kv_bytes_per_token_gpu)))


def max_concurrency(blocks: int, max_model_len: int, block: int = BLOCK) -> float:
    """vLLM's log: num_blocks / cdiv(max_model_len, block) for a full-attention model."""
    return blocks / math.ceil(max_model_len / block)


# ----------------------------------------------------------------------------------------------
# Variants


def _weights_gb(p: dict[str, Any]) -> float:
    # Shown to 0.1 GB in the statement, so the answers use that rounded figure.
    return round(model(p["model"]).weight_bytes(p["weight_bytes"]) / 1e9, 1)


def _max_num_seqs(gpu_name: str) -> int:
    # vLLM's get_batch_defaults (engine/arg_utils.py): GPUs with >= 70 GiB that are not A100 get
    # max_num_seqs 1024; the rest 256.
    return 256 if "A100" in gpu_name else 1024


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    m = model(p["model"])
    if p["max_model_len"] % BLOCK or p["avg_tokens"] * 2 > p["max_model_len"]:
        return False
    if m.max_context is not None and p["max_model_len"] > m.max_context:
        return False
    if m.kv_heads % p["tp"] and p["tp"] % m.kv_heads:
        return False
    s = solve(p)
    return (
        s["kv_budget"].value >= 5  # a pool worth the name, not a sliver
        and s["max_conc"].value >= 2  # at least two full-length requests (vLLM refuses < 1)
        and s["weights_per_gpu_gb"] < s["requested_gb"]  # the weights fit
    )


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a deployment and a start-up profile; redraw until the variant is sensible."""
    def draw(rng: random.Random) -> dict[str, Any]:
        name, gpu_name, tp, wbytes = rng.choice(DEPLOYMENTS)
        return {"model": name, "gpu": gpu_name, "tp": tp, "weight_bytes": wbytes,
                **choose(rng, {"util": UTILS, "act_gb": ACT_GB, "nontorch_gb": NONTORCH_GB,
                               "max_model_len": MAX_LENS[name], "avg_tokens": AVG_TOKENS})}

    return draw_sensible(rng, draw, is_sensible)


# ----------------------------------------------------------------------------------------------
# The reference

FORMULA = "(u*M - W/T - A) / (2*L*max(1, H/T)*d*b*S)"
CEILING = ["last_block", "growth", "caps"]


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m, g, tp = deployment(p)

    heads_gpu = m.kv_heads_per_gpu(tp)
    kv_gpu = m.kv_bytes_per_token_per_gpu(tp, KV_DTYPE_BYTES)
    kv_model = m.kv_bytes_per_token(KV_DTYPE_BYTES)

    weights_gb = _weights_gb(p)
    weights_gpu_gb = weights_gb / tp
    # vLLM multiplies the total the driver reports (torch.cuda.mem_get_info), not the marketed
    # size: an "80 GB" H100 gives 85.03e9 B. Shown to 0.01 GB, and the answers use the shown value.
    total_gb = total_memory_gb(p["gpu"])
    requested_gb = p["util"] * total_gb
    reserved_gb = p["act_gb"] + p["nontorch_gb"]
    budget_gb = kv_budget_bytes(total_gb * 1e9, p["util"], weights_gpu_gb * 1e9,
                                reserved_gb * 1e9) / 1e9

    blocks = num_blocks(budget_gb * 1e9, kv_gpu)
    tokens = blocks * BLOCK
    conc = max_concurrency(blocks, p["max_model_len"])
    blocks_per_req = math.ceil(p["max_model_len"] / BLOCK)

    # The real workload: pool over mean request (blocks rounded up per request) is the ceiling.
    avg_blocks = math.ceil(p["avg_tokens"] / BLOCK)
    avg_ceiling = blocks // avg_blocks
    avg_naive = tokens / p["avg_tokens"]

    replicated = tp > m.kv_heads
    s: dict[str, Any] = {
        # part answers
        "kv_gpu": Quantity(kv_gpu, "B"),
        "kv_budget": Quantity(budget_gb, "GB"),
        "pool_tokens": Quantity(tokens, "token"),
        "max_conc": Quantity(conc, ""),
        "formula": FORMULA,
        "ceiling": list(CEILING),
        # givens the statement prints
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "q_heads": m.q_heads,
        "head_dim": m.head_dim,
        "attention": m.attention.upper(),
        "params_b": m.params / 1e9,
        "weights_gb": weights_gb,
        "weight_dtype": "FP8" if p["weight_bytes"] == 1 else "BF16",
        "hbm_gb": g.hbm_gb,
        "total_gb": total_gb,
        "total_gib": total_gb * 1e9 / 2**30,
        "total_mib": g.hbm_driver_total_mib,
        "util_pct": p["util"] * 100,
        "block": BLOCK,
        "max_num_seqs": _max_num_seqs(p["gpu"]),
        "setup": (f"one {p['gpu']}" if tp == 1 else
                  f"{tp} × {p['gpu']}, tensor parallel across all of them (TP{tp})"),
        "weights_note": ("All the weights sit on the one GPU." if tp == 1 else
                         f"The weights are split evenly over the {tp} GPUs."),
        # intermediates for the solution
        "kv_model": kv_model,
        "kv_model_kib": kv_model / 1024,
        "kv_gpu_kib": kv_gpu / 1024,
        "kv_per_layer_gpu": kv_gpu // m.layers,
        "heads_gpu": heads_gpu,
        "replicated": replicated,
        "replicas": tp // m.kv_heads if replicated else 1,
        "head_split": (f"each KV head is stored on {tp // m.kv_heads} GPUs, so every GPU still "
                       "holds one head" if replicated else
                       f"the {m.kv_heads} KV heads split {heads_gpu} per GPU"),
        "weights_per_gpu_gb": weights_gpu_gb,
        "requested_gb": requested_gb,
        "reserved_gb": reserved_gb,
        "outside_gb": total_gb - requested_gb,
        "marketed_budget_gb": p["util"] * g.hbm_gb - weights_gpu_gb - reserved_gb,
        "budget_bytes": budget_gb * 1e9,
        "block_bytes": BLOCK * kv_gpu,
        "block_kib": BLOCK * kv_gpu / 1024,
        "blocks": blocks,
        "tokens_exact": budget_gb * 1e9 / kv_gpu,
        "blocks_per_req": blocks_per_req,
        "req_gb_gpu": p["max_model_len"] * kv_gpu / 1e9,
        "req_gb_all": p["max_model_len"] * kv_gpu * tp / 1e9,
        "avg_blocks": avg_blocks,
        "avg_ceiling": avg_ceiling,
        "avg_naive": avg_naive,
        "avg_waste_tokens": avg_blocks * BLOCK - p["avg_tokens"],
        "rounding_note": ("" if avg_ceiling == round(avg_naive) else
                          f" ({avg_ceiling} once each request is rounded up to whole "
                          f"{BLOCK}-token blocks)"),
        "padding_note": ("which it fills exactly" if avg_blocks * BLOCK == p["avg_tokens"] else
                         f"the last one with {avg_blocks * BLOCK - p['avg_tokens']} empty slots"),
        "pool_gb_all": budget_gb * tp,
        "weights_trap": ("The weights are the largest item; leaving them out is the classic slip."
                         if tp == 1 else f"Each GPU holds 1/{tp} of the weights, not all of them."),
        "spread_note": (
            "With one GPU the pool is simply that GPU's." if tp == 1 else
            f"The count is for the whole deployment, not per GPU: each token's KV is spread over "
            f"all {tp} GPUs, every GPU holding its own heads, so the {tp} per-GPU pools "
            f"({budget_gb * tp:.0f} GB together) hold the same {tokens:,} tokens, not {tp} times "
            "as many. With several workers vLLM gives every rank the same block count, the "
            "smallest any rank can afford."),
    }
    s["explain"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"Neither reading is right. The {s['max_conc'].value:.2f}x in the log assumes every request "
        f"is {p['max_model_len']:,} tokens long, so for traffic averaging {p['avg_tokens']:,} "
        "tokens it understates what fits. Dividing the pool by the mean instead, "
        f"{s['pool_tokens'].value:,.0f} / {p['avg_tokens']:,} = {s['avg_naive']:.0f}"
        f"{s['rounding_note']}, gives "
        "a ceiling, not a plan: requests grow a token per step after they are admitted, so running "
        "the pool full means preempting and recomputing requests; lengths vary, so the long ones "
        f"take more than their share; max_num_seqs ({s['max_num_seqs']}) and the prefill budget cap "
        "the batch on their own. Only prefix sharing lets you beat the formula. The pool itself is "
        f"what is left of {s['util_pct']:.0f} % of each GPU after the weights "
        f"({s['weights_per_gpu_gb']:.2f} GB per GPU) and the profiled activations and buffers; "
        "raising TP shrinks the weights per GPU and splits the KV heads until TP reaches the KV-head "
        "count, after which the heads are copied rather than split. I would promise a number "
        "measured in a load test at the target latency, with headroom for growth, and watch KV "
        "usage and the preemption counter in production."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m, g, tp = deployment(p)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge_floor=1e-9, skip=nonpositive).add

    # -- kv_gpu ------------------------------------------------------------------------------------
    kv_gpu = s["kv_gpu"].value
    naive_split = 2 * m.layers * m.kv_heads / tp * m.head_dim * KV_DTYPE_BYTES
    add("kv_gpu", naive_split,
        f"You divided the {m.kv_heads} KV heads by {tp} GPUs. A head cannot be split: past "
        "TP = KV heads each GPU still holds one whole head (vLLM replicates it), so the bytes per "
        "GPU stop falling.", "split_past_heads", kind="q_vs_kv_heads")
    add("kv_gpu", s["kv_model"],
        f"That is the whole model's KV per token. At TP{tp} each GPU stores only its own KV heads "
        f"({s['heads_gpu']} per layer).", "whole_model", kind="forgot_tp")
    add("kv_gpu", kv_gpu / 2, "Half the reference: you counted K but not V.", "k_only",
        kind="k_without_v")
    add("kv_gpu", kv_gpu * 2, "Twice the reference: the cache is BF16, 2 bytes per element.",
        "fp32", kind="wrong_precision")
    add("kv_gpu", kv_gpu * m.q_heads / m.kv_heads,
        f"You used the {m.q_heads} query heads; only the {m.kv_heads} KV heads are cached.",
        "q_heads", kind="q_vs_kv_heads")
    add("kv_gpu", s["kv_per_layer_gpu"],
        f"That is one layer. All {m.layers} layers keep their own K and V.", "one_layer",
        kind="one_layer")

    # -- kv_budget -----------------------------------------------------------------------------------
    budget = s["kv_budget"].value
    w_gpu, req, res = s["weights_per_gpu_gb"], s["requested_gb"], s["reserved_gb"]
    total = s["total_gb"]
    add("kv_budget", total - w_gpu - res,
        f"You used all {total:.2f} GB. The engine takes only gpu_memory_utilization = "
        f"{p['util']} of it: {req:.1f} GB.", "no_util", kind="peak_vs_achievable")
    add("kv_budget", p["util"] * g.hbm_gb - w_gpu - res,
        f"You started from the marketed {g.hbm_gb:.0f} GB. vLLM multiplies the total the driver "
        f"reports, {total:.2f} GB.", "marketed", kind="peak_vs_achievable")
    add("kv_budget", p["util"] * (total - w_gpu) - res,
        "gpu_memory_utilization is a fraction of the GPU's TOTAL memory, applied before anything "
        "is subtracted, not a fraction of what the weights leave.", "util_after_weights",
        kind="peak_vs_achievable")
    add("kv_budget", req - w_gpu,
        f"You left out the profile run's activation peak and the non-torch memory "
        f"({res:.1f} GB per GPU): the engine reserves them before sizing the pool.", "no_reserved",
        kind="miscounted_term")
    add("kv_budget", req - res,
        f"You forgot the weights: {w_gpu:.2f} GB on each GPU come out of the budget first.",
        "no_weights", kind="miscounted_term")
    add("kv_budget", req - s["weights_gb"] - res,
        f"Each GPU holds 1/{tp} of the weights, not all of them.", "weights_not_split",
        kind="forgot_tp")
    add("kv_budget", budget - s["outside_gb"],
        f"You took the {s['outside_gb']:.1f} GB above the utilisation line off twice: using "
        f"u × total memory already leaves it out.", "headroom_twice", kind="miscounted_term")
    add("kv_budget", budget * tp,
        f"That is all {tp} GPUs together. The part asks for one GPU's budget.", "all_gpus",
        kind="forgot_tp")

    # -- pool_tokens ------------------------------------------------------------------------------------
    tokens = s["pool_tokens"].value
    budget_b = s["budget_bytes"]
    add("pool_tokens", budget_b / s["kv_model"],
        "You divided one GPU's budget by the whole model's KV per token. Each GPU stores only its "
        "share of every token: divide by the per-GPU KV bytes of part 1.", "whole_model_kv",
        kind="forgot_tp")
    add("pool_tokens", tokens * tp,
        f"The {tp} GPUs' pools are not added: every token lives on all {tp} GPUs at once (each "
        "holds its heads), so the pool holds as many tokens as one GPU's share allows.",
        "summed_gpus", kind="forgot_tp")
    add("pool_tokens", budget_b / naive_split,
        f"You split the {m.kv_heads} KV heads over {tp} GPUs as if a head could be halved; past "
        "TP = KV heads each GPU keeps a whole head, so each token costs more per GPU.",
        "split_past_heads", kind="q_vs_kv_heads")
    add("pool_tokens", tokens * 2, "Twice the reference: you counted K but not V.", "k_only",
        kind="k_without_v")
    add("pool_tokens", (req - res) * 1e9 / kv_gpu,
        "You forgot the weights in the budget.", "no_weights", kind="miscounted_term")
    add("pool_tokens", (total - w_gpu - res) * 1e9 / kv_gpu,
        f"You sized the pool from all {total:.2f} GB; the engine uses {p['util']} of it.",
        "no_util", kind="peak_vs_achievable")
    add("pool_tokens", (p["util"] * g.hbm_gb - w_gpu - res) * 1e9 / kv_gpu,
        f"You sized the pool from the marketed {g.hbm_gb:.0f} GB. vLLM multiplies the total the "
        f"driver reports, {total:.2f} GB.", "marketed", kind="peak_vs_achievable")

    # -- max_conc -----------------------------------------------------------------------------------------
    conc = s["max_conc"].value
    add("max_conc", tokens / p["avg_tokens"],
        f"That divides by the {p['avg_tokens']:,}-token average request. The log line assumes "
        f"every request is max_model_len = {p['max_model_len']:,} tokens.", "used_average",
        kind="mean_vs_tail")
    add("max_conc", conc * tp,
        f"The {tp} GPUs' pools are not added: each request's KV is spread over all of them.",
        "summed_gpus", kind="forgot_tp")
    add("max_conc", budget_b / s["kv_model"] / p["max_model_len"],
        "You used the whole model's KV per token against one GPU's budget.", "whole_model_kv",
        kind="forgot_tp")
    add("max_conc", conc * 2, "Twice the reference: you counted K but not V.", "k_only",
        kind="k_without_v")
    add("max_conc", s["blocks"],
        "That is the number of blocks. Divide by the blocks one max-length request needs.",
        "blocks", kind="unit_slip")

    # -- formula ---------------------------------------------------------------------------------------
    den = "(2*L*max(1, H/T)*d*b*S)"
    out += [
        Mistake("formula", "(u*M - W/T - A) / (2*L*(H/T)*d*b*S)",
                "Right while TP is at most the KV-head count. Past it the heads are replicated, not "
                "split: a GPU never holds less than one head, hence max(1, H/T).", "no_max",
                kind="q_vs_kv_heads"),
        Mistake("formula", f"(M - W/T - A) / {den}",
                "The engine may use only u (gpu_memory_utilization) of each GPU's memory.",
                "no_util", kind="peak_vs_achievable"),
        Mistake("formula", f"(u*(M - W/T) - A) / {den}",
                "u multiplies the total memory M, before the weights come off, not what is left.",
                "util_after_weights", kind="peak_vs_achievable"),
        Mistake("formula", f"(u*M - W - A) / {den}",
                "Each GPU holds W/T of the weights, not all of them.", "weights_not_split",
                kind="forgot_tp"),
        Mistake("formula", f"(u*M - W/T) / {den}",
                "You left out A, the activation peak and non-torch memory reserved before the "
                "pool is sized.", "no_reserved", kind="miscounted_term"),
        Mistake("formula", "(u*M - W/T - A) / (L*max(1, H/T)*d*b*S)",
                "The cache holds K and V: a factor 2 in the bytes per token.", "k_only",
                kind="k_without_v"),
        Mistake("formula", "(u*M - W/T - A) / (2*L*H*d*b*S)",
                "That charges every KV head to every GPU. Each GPU holds H/T of them (at least "
                "one).", "kv_not_split", kind="forgot_tp"),
    ]

    # -- ceiling -----------------------------------------------------------------------------------------
    out += [
        Mistake("ceiling", [*CEILING, "prefix"],
                "Prefix sharing works the other way: requests that share a prefix share its "
                "blocks, so it is the one thing that can push concurrency ABOVE the formula.",
                "prefix_costs_more", kind="inverted"),
        Mistake("ceiling", [*CEILING, "tp_copy"],
                "Under tensor parallelism a GPU holds only its own KV heads of each token; the "
                "per-GPU bytes per token already account for that. Dividing again counts it "
                "twice.", "tp_copy", kind="forgot_tp"),
        Mistake("ceiling", [*CEILING, "log_avg"],
                "The logged figure does not average anything: it assumes every request is "
                "max_model_len tokens long, which is why it understates concurrency for short "
                "requests.", "log_averages", kind="mean_vs_tail"),
    ]
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [
        Fits("weights inside gpu_memory_utilization", p["gpu"], p["tp"], _weights_gb(p) * 1e9,
             usable=p["util"]),
        # vLLM refuses a --max-model-len beyond the model's max_position_embeddings.
        WithinContext(p["model"], p["max_model_len"], "--max-model-len"),
        Holds(p["avg_tokens"] <= p["max_model_len"], "the mean request fits max_model_len"),
    ]


# ----------------------------------------------------------------------------------------------
# The formula part's symbols in this variant: graders.expression tests equivalence around them
# as well as over a wide range (their kinds are in exercise.toml's symbol_kinds).

def symbol_values(p: dict[str, Any]) -> dict[str, dict[str, float]]:
    s = solve(p)
    return {"formula": {"u": p["util"], "M": s["total_gb"] * 1e9, "W": s["weights_gb"] * 1e9,
                        "T": p["tp"], "A": s["reserved_gb"] * 1e9, "L": s["layers"],
                        "H": s["kv_heads"], "d": s["head_dim"], "b": 2, "S": p["avg_tokens"]}}
