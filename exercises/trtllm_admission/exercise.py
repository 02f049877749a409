"""Q28: TensorRT-LLM today: the backend it accepts and the admission policy it defaults to.

The outdated answer builds a TensorRT engine per GPU and batch shape. Today (the documentation's
"Migration Guide: TensorRT Backend Removed") PyTorch is the only execution backend: a Hugging Face
checkpoint loads directly, `trtllm-serve <hf_model>` needs no build. And the default capacity
scheduler policy, GUARANTEED_NO_EVICT ("Useful Runtime Options"; the SchedulerConfig reference),
admits a request only if KV blocks for its prompt plus its max_tokens can be reserved, so clients
that send a generous max_tokens halve the concurrency the pool could carry.

The parts: what you deploy today, what the default policy reserves, three concurrency figures
(the reservation, admission on the current length at steady state, and the no-preemption figure
for the real reply length), the lever that recovers the capacity without giving up the guarantee,
and when TensorRT-LLM is still the right engine.

The pool is given in tokens (the operator caps it with KvCacheConfig.max_tokens; blocks of
`tokens_per_block`, 32 by default per the KvCacheConfig reference). Real replies have a fixed
length in each variant, so the steady-state formula is exact up to block rounding.
"""
from __future__ import annotations

import bisect
import math
import random
from typing import Any

from exercises import engine_sim
from exercises.catalog import gpu, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, Holds, WithinContext
from exercises.slips import Slips, near, tolerances, unusable
from exercises.spec import Evidence, Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

GIB = 2**30
# (model, GPU, tensor-parallel degree, bytes per weight): layouts people run with TensorRT-LLM.
DEPLOYMENTS: tuple[tuple[str, str, int, int], ...] = (
    ("Llama-3.1-8B", "H100 SXM", 1, 2), ("Llama-3.1-8B", "H200 SXM", 1, 2),
    ("Llama-3.1-70B", "H100 SXM", 4, 1), ("Llama-3.1-70B", "H100 SXM", 8, 2),
    ("Llama-3.1-70B", "H200 SXM", 2, 1), ("Llama-3.1-70B", "H200 SXM", 4, 2),
    ("Qwen2.5-72B", "H100 SXM", 4, 1), ("Qwen2.5-72B", "H200 SXM", 4, 2),
)
POOLS = (61_440, 81_920, 98_304, 122_880, 163_840, 196_608, 245_760, 327_680)
BLOCKS = (32, 32, 64)
PROMPTS = (512, 768, 1024, 1536, 2048, 3072)
MAX_TOKENS = (1024, 2048, 4096, 8192)
REPLY_SHARE = (0.25, 0.375, 0.5)  # real reply length / max_tokens

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-8B",
    "gpu": "H100 SXM",
    "tp": 1,
    "wbytes": 2,  # BF16 weights
    "pool_tokens": 122_880,  # KvCacheConfig.max_tokens set by the operator
    "block": 32,  # tokens_per_block, TensorRT-LLM's default
    "prompt": 1024,
    "max_tokens": 2048,  # what clients send
    "reply": 1024,  # what the model actually generates
    "eta": 0.8,  # HBM efficiency of a decode step (timeline only) [A]
}


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    def draw(rng: random.Random) -> dict[str, Any]:
        name, g, tp, wb = rng.choice(DEPLOYMENTS)
        mt = rng.choice(MAX_TOKENS)
        return {**CANONICAL, "model": name, "gpu": g, "tp": tp, "wbytes": wb,
                **choose(rng, {"pool_tokens": POOLS, "block": BLOCKS, "prompt": PROMPTS}),
                "max_tokens": mt, "reply": round(mt * rng.choice(REPLY_SHARE))}

    return draw_sensible(rng, draw, is_sensible, tries=2000)


def is_sensible(p: dict[str, Any]) -> bool:
    if p["pool_tokens"] % p["block"] or not 1 <= p["reply"] <= p["max_tokens"]:
        return False
    m, g = model(p["model"]), gpu(p["gpu"])
    if m.kv_heads % p["tp"]:
        return False
    # The capped pool must fit next to this GPU's share of the weights.
    free = 0.9 * (g.hbm_gb * 1e9 - m.weight_bytes(p["wbytes"]) / p["tp"])
    if pool_gib(p) * GIB > free:
        return False
    s = solve(p)
    # The reservation really bites, and the three answers are apart.
    return (s["conc_gne"].value >= 8 and s["conc_current"].value >= 1.4 * s["conc_gne"].value
            and s["conc_actual"].value > 1.1 * s["conc_gne"].value)


# ----------------------------------------------------------------------------------------------
# The reference


def _blocks(tokens: int, block: int) -> int:
    return -(-tokens // block)


def kv_per_gpu(p: dict[str, Any]) -> int:
    return model(p["model"]).kv_bytes_per_token_per_gpu(p["tp"], 2)


def pool_gib(p: dict[str, Any]) -> float:
    return p["pool_tokens"] * kv_per_gpu(p) / GIB


def solve(p: dict[str, Any]) -> dict[str, Any]:
    B, P, mt, R = p["block"], p["prompt"], p["max_tokens"], p["reply"]
    pool_blocks = p["pool_tokens"] // B
    gne_blocks = _blocks(P + mt, B)
    conc_gne = pool_blocks // gne_blocks
    footprint = P + R / 2  # time-averaged tokens held over a reply of R tokens
    conc_current = p["pool_tokens"] / footprint
    actual_blocks = _blocks(P + R, B)
    conc_actual = pool_blocks // actual_blocks
    realistic_mt = R  # clients sending the real length
    return {
        "backend": "pytorch",
        "gne_reserve": "prompt_plus_max",
        "conc_gne": Quantity(conc_gne, ""),
        "conc_current": Quantity(conc_current, ""),
        "conc_actual": Quantity(conc_actual, ""),
        "lever": "client_max_tokens",
        "when_right": MODEL_ANSWER,
        # givens
        "pool_blocks": pool_blocks,
        "pool_gib": pool_gib(p),
        "kv_per_gpu": kv_per_gpu(p),
        "wdtype": "BF16" if p["wbytes"] == 2 else "FP8",
        "gpus_word": "one" if p["tp"] == 1 else f"{p['tp']}",
        "gpu_plural": "" if p["tp"] == 1 else "s",
        # intermediates
        "gne_tokens": P + mt,
        "gne_blocks": gne_blocks,
        "gne_frac": pool_blocks / gne_blocks,
        "footprint": footprint,
        "actual_tokens": P + R,
        "actual_blocks": actual_blocks,
        "ratio_pct": conc_gne / conc_current * 100,
        "lost_pct": (1 - conc_gne / conc_current) * 100,
        "reserved_unused_pct": (mt - R) / (P + mt) * 100,
        "realistic_gne": pool_blocks // _blocks(P + realistic_mt, B),
        "max_over_reply": mt / R,
    }


MODEL_ANSWER = """\
TensorRT-LLM is still the right engine when the fleet is NVIDIA-only and the goal is the last
stretch of latency or throughput from NVIDIA's own kernels and formats: FP8 and NVFP4 on Hopper
and Blackwell, the DeepSeek-style MLA, multi-token-prediction and wide expert-parallel paths NVIDIA
optimises first, and when it comes inside Dynamo or NIM with enterprise support. It fits
latency-critical deployments of a few models that change rarely, where the team can track its
release notes. It is a poor choice for mixed hardware (AMD, TPU, older GPUs), for fast-moving open
models that need day-0 support, or for teams that depend on the vLLM/SGLang ecosystem (their
scheduling features, structured outputs, plugins). Either way, the "engine per GPU and batch
shape" story is gone: it serves Hugging Face checkpoints through its PyTorch backend. Capacity
planning has to account for GUARANTEED_NO_EVICT reserving prompt + max_tokens.
"""


# ----------------------------------------------------------------------------------------------
# Evidence: the same stream of requests under both admission rules


def _cost(p: dict[str, Any]) -> engine_sim.StepCost:
    """Step time at block granularity: one simulated token is one block of B real tokens, so a
    simulated decode step stands for B real ones (weights and KV read B times) and a simulated
    prefill token for B real tokens."""
    m, g, B = model(p["model"]), gpu(p["gpu"]), p["block"]
    bw = g.hbm_bytes_per_s * p["eta"]  # per GPU; each reads its own shard in parallel
    return engine_sim.StepCost(
        flops_per_s=p["tp"] * g.bf16_flops * 0.5,
        flops_per_token=2 * m.params * B,
        attn_coeff=4 * m.layers * m.q_dim * B * B,
        decode_step_s=B * m.weight_bytes(p["wbytes"]) / p["tp"] / bw,
        kv_read_s_per_token=B * B * kv_per_gpu(p) / bw,
    )


def decode_step_s(p: dict[str, Any], n: float) -> float:
    """One real decode step with n requests at the mean context (prompt + reply / 2)."""
    m, g = model(p["model"]), gpu(p["gpu"])
    bw = g.hbm_bytes_per_s * p["eta"]
    ctx = p["prompt"] + p["reply"] / 2
    return (m.weight_bytes(p["wbytes"]) / p["tp"] + n * ctx * kv_per_gpu(p)) / bw


def stream(p: dict[str, Any]) -> tuple[list[engine_sim.Request], float]:
    """Arrivals evenly spaced at 1.3 x what current-length admission can serve, for five reply
    lifetimes: both policies run saturated, so the running counts are their capacities."""
    s = solve(p)
    B, P = p["block"], p["prompt"]
    n_cur = s["conc_current"].value
    rate = 1.3 * n_cur / (p["reply"] * decode_step_s(p, n_cur))
    horizon = 5 * p["reply"] * decode_step_s(p, n_cur)
    ps = _blocks(P, B)
    out = _blocks(P + p["reply"] - 1, B) - ps + 1
    cap = max(_blocks(P + p["max_tokens"], B) - ps, out)
    reqs = [engine_sim.Request(f"r{i:04d}", i / rate, ps, out, cap)
            for i in range(int(rate * horizon))]
    return reqs, horizon


def run(p: dict[str, Any], admission: str) -> engine_sim.SimResult:
    reqs, _ = stream(p)
    cfg = engine_sim.EngineConfig(token_budget=10**9, max_seqs=2048,
                                  kv_blocks=p["pool_tokens"] // p["block"], block_size=1,
                                  admission=admission)  # type: ignore[arg-type]
    return engine_sim.simulate(reqs, cfg, _cost(p))


def held_blocks(res: engine_sim.SimResult, prompt_blocks: int) -> list[int]:
    """Blocks of the pool that hold tokens after each step, for a run with no preemption (the
    reservation): every running request's prompt and the tokens fed back so far, not the rest of
    its reservation. A request holds prompt + generated - 1 (the last sampled token is not yet
    fed back) from the step that gives its first token until the one that gives its last."""
    lives = [(r.token_times, r.output) for r in res.requests.values() if r.token_times]
    out = []
    for st in res.steps:
        end = st.start + st.duration
        held = 0
        for times, output in lives:
            if times[0] <= end:
                g = bisect.bisect_right(times, end)
                if g < output:
                    held += prompt_blocks + g - 1
        out.append(held)
    return out


def evidence(p: dict[str, Any]) -> dict[str, Evidence]:
    """The KV pool under each rule, in % of its blocks: what the reservation books and what holds
    tokens under it, and what current-length admission fills. No running count: the reservation's
    would plateau at part 3's answer (exercises/evidence_leaks.py); the student gets the
    concurrencies back from the shares, the pool and a request's footprint."""
    _, horizon = stream(p)
    blocks = p["pool_tokens"] // p["block"]
    series = []
    gne = run(p, "reserve_max")
    steps = [st for st in gne.steps if st.start <= horizon]
    held = held_blocks(gne, _blocks(p["prompt"], p["block"]))
    label = "GUARANTEED_NO_EVICT"
    series.append({"label": f"KV blocks reserved (prompt + max_tokens each): {label}",
                   "unit": "%", "points": [[round(st.start, 3), round(100 * st.used_blocks / blocks, 1)]
                                          for st in steps]})
    series.append({"label": f"KV blocks holding tokens: {label}", "unit": "%",
                   "points": [[round(st.start, 3), round(100 * h / blocks, 1)]
                              for st, h in zip(steps, held, strict=False)]})
    cur = run(p, "current_length")
    series.append({"label": "KV blocks holding tokens: current-length admission (vLLM-style, "
                            "recompute)", "unit": "%",
                   "points": [[round(st.start, 3), round(100 * st.used_blocks / blocks, 1)]
                              for st in cur.steps if st.start <= horizon]})
    return {
        "kv_pool": Evidence(
            title="One request stream, two admission rules: the KV pool",
            filename="admission_timeline.json",
            kind="series",
            data={"x": {"label": "time", "unit": "s"}, "series": series},
            caption=(f"Requests of {p['prompt']:,} prompt tokens asking for max_tokens = "
                     f"{p['max_tokens']:,} and generating {p['reply']:,} arrive evenly, faster "
                     "than either rule can serve, so both run full. Simulated at block "
                     f"granularity ({p['block']}-token blocks), one point per "
                     f"{p['block']} decode steps; shares of the {p['pool_tokens']:,}-token pool."),
        )
    }


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    B, P, mt, R, T = p["block"], p["prompt"], p["max_tokens"], p["reply"], p["pool_tokens"]
    nb = s["pool_blocks"]
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, accept=near, merge=near, merge_floor=1e-9, skip=unusable).add

    add("conc_gne", nb // _blocks(P + R, B),
        f"You reserved for the real reply ({R:,} tokens). The scheduler cannot know it; it "
        f"reserves for the max_tokens the client sent ({mt:,}).", "real_reply",
        kind="misread_mechanism")
    add("conc_gne", nb // _blocks(mt, B),
        f"You left out the prompt: the reservation covers prompt + max_tokens = {P + mt:,} "
        "tokens.", "no_prompt", kind="miscounted_term")
    add("conc_gne", nb // _blocks(P, B),
        "That counts only the prompt, which is what current-length admission asks for. "
        "GUARANTEED_NO_EVICT reserves the whole possible reply up front.", "prompt_only",
        kind="miscounted_term")
    add("conc_gne", math.ceil(nb / s["gne_blocks"]),
        f"{nb:,} / {s['gne_blocks']} = {s['gne_frac']:.2f}: round down; a request either gets "
        "its whole reservation or waits.", "rounded_up", kind="rounding")

    add("conc_current", T / (P + R),
        f"That counts every request at the end of its reply ({P:,} + {R:,}). At steady state the "
        f"running requests are at all stages of their replies, so on average each holds "
        f"{P:,} + {R:,}/2 tokens.", "end_of_life", kind="mean_vs_tail")
    add("conc_current", T / P,
        "That counts prompts only: true for an instant after admission, but each request keeps "
        "growing by a token per step.", "prompt_only", kind="miscounted_term")
    add("conc_current", T / (R / 2),
        f"You left out the prompt: each request holds its {P:,} prompt tokens for its whole life.",
        "no_prompt", kind="miscounted_term")
    add("conc_current", T / (P + mt / 2),
        f"You averaged over max_tokens ({mt:,}); current-length admission follows what requests "
        f"really generate ({R:,}).", "max_average", kind="mean_vs_tail")

    add("conc_actual", s["conc_gne"].value,
        "That is the reservation for max_tokens again. The part asks what a no-preemption cap "
        f"sized by the real reply ({R:,} tokens) would allow.", "gne_again", kind="wrong_scope")
    add("conc_actual", int(T / s["footprint"]),
        f"That is the time-averaged figure. With no preemption allowed, every request must fit "
        f"at the end of its reply: {P:,} + {R:,} tokens.", "average", kind="mean_vs_tail")
    add("conc_actual", nb // _blocks(R, B),
        f"You left out the prompt: at the end of its reply a request holds {P:,} + {R:,} tokens.",
        "no_prompt", kind="miscounted_term")

    out += [
        Mistake("backend", "engine_per_shape",
                "That is the old workflow. The TensorRT engine backend has been removed "
                "(\"Migration Guide: TensorRT Backend Removed\"): PyTorch is the only backend, "
                "trtllm-build and convert_checkpoint.py are gone, and HF checkpoints load "
                "directly.", "engine_per_shape", kind="misread_mechanism"),
        Mistake("backend", "engine_optional",
                "Not any more: the TensorRT engine backend has been removed, not kept for "
                "production; PyTorch is the sole execution backend.", "engine_optional",
                kind="misread_mechanism"),
        Mistake("backend", "onnx",
                "TensorRT-LLM never served LLMs from an ONNX export, and today it has no engine "
                "build at all: the PyTorch backend loads the HF checkpoint.", "onnx",
                kind="misread_mechanism"),
        Mistake("gne_reserve", "prompt_only",
                "That is current-length admission (vLLM, or TensorRT-LLM's MAX_UTILIZATION). "
                "GUARANTEED_NO_EVICT must guarantee the request never pauses, so it reserves "
                "for prompt + max_tokens.", "prompt_only", kind="miscounted_term"),
        Mistake("gne_reserve", "predicted",
                "The scheduler has no output-length predictor; it knows only what the client "
                "asked for, max_tokens.", "predicted", kind="misread_mechanism"),
        Mistake("gne_reserve", "max_seq_len",
                "It reserves per request from that request's own max_tokens, not the engine's "
                "maximum sequence length (which only bounds max_tokens).", "max_seq_len",
                kind="misread_mechanism"),
        Mistake("lever", "max_utilization",
                "MAX_UTILIZATION does recover the concurrency, but it gives up the guarantee: "
                "requests can be paused when the pool runs out, which costs tail latency. The "
                "question asks for the lever that keeps the guarantee.", "max_utilization",
                kind="misread_mechanism"),
        Mistake("lever", "memory_fraction",
                "A bigger pool raises both figures by the same factor: the reservation still "
                "wastes the same share of it.", "memory_fraction", kind="misread_mechanism"),
        Mistake("lever", "max_batch_size",
                "The batch-size cap is not what binds: the KV reservation is. Raising it admits "
                "nobody extra.", "max_batch_size", kind="misread_mechanism"),
    ]
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    return [
        Fits("weights and the capped pool", p["gpu"], p["tp"],
             m.weight_bytes(p["wbytes"]) + p["tp"] * pool_gib(p) * GIB),
        WithinContext(p["model"], p["prompt"] + p["max_tokens"], "prompt plus max_tokens"),
        Holds(1 <= p["reply"] <= p["max_tokens"], "the reply stops within max_tokens"),
    ]
