"""Q03: a 2.5x gap at batch 1, read off one profiler trace.

A single-GPU engine decodes one sequence (batch 1) in eager mode: the host launches every kernel of
the step one by one, waits for the sampled token, detokenises, schedules the next step. The GPU's
floor is the bytes a step must read over the HBM bandwidth; the engine runs about 2.5 times slower.

The exercise does not type the answers in: it builds a model of that engine (kernel list, kernel
durations, host costs), simulates a few decode steps in integer nanoseconds, and hands the student
the result as a Chrome trace (`evidence()`). `solve()` reads every answer from the same simulation,
so what the student measures in the trace is what the parts are graded against:

    step period = floor + slow-kernel excess + small-kernel time + idle inside the step
                  + idle at the step boundary

(the floor is bytes / bandwidth; each kernel's duration splits into its bytes / bandwidth and the
rest). Every hardware and model figure comes from exercises/catalog; the engine's costs are
variant keys the statement prints as assumptions.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import choose, draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext, check
from exercises.slips import Slips, near, tolerances
from exercises.spec import Evidence, Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

# The four places the gap can go, as ids of the ranking part.
SUSPECTS = ("launch_idle", "boundary", "slow_kernels", "small_kernels")

MODELS = ("Llama-3.1-8B", "Llama-2-7B")
GPUS = ("A100 SXM 80GB", "H100 SXM", "H200 SXM", "B200")
CONTEXTS = (512, 1024, 2048, 4096, 8192)
LAUNCH_US = (8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 22.0, 24.0, 26.0, 28.0, 30.0)
SMALL_US = (2.0, 2.5, 3.0, 3.5, 4.0)
EFF_PCT = (65, 70, 75, 80, 85, 90)
SORT_US = (20.0, 30.0, 40.0, 60.0, 80.0)
SCHED_US = tuple(float(x) for x in range(300, 1700, 100))
POST_US = tuple(float(x) for x in range(200, 1300, 100))
STEPS = 3  # decode steps in the trace: enough to see the pattern repeat, small enough to download

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-8B",
    "gpu": "H100 SXM",
    "context": 1024,  # tokens already in the KV cache
    "launch_us": 22.5,  # host time to dispatch and launch one kernel, eager mode [A]
    "small_us": 3.0,  # duration of one small (elementwise, norm, copy) kernel [A]
    "eff_pct": 80,  # share of peak HBM bandwidth the weight-streaming kernels reach [A]
    "sort_us": 40.0,  # the top-p sort over the vocabulary [A]
    "sched_us": 1200.0,  # host scheduling and input preparation before the first launch [A]
    "post_us": 900.0,  # host work after the sync: token to CPU, detokenise, stop checks [A]
    "steps": STEPS,
}


# ----------------------------------------------------------------------------------------------
# The engine model: the kernels of one decode step


@dataclass(frozen=True)
class Kernel:
    name: str
    layer: int  # -1 outside the decoder layers
    weights: bool  # streams weights or KV (a GEMV, the attention, the LM head)
    nbytes: int  # weight or KV bytes it must read (0 for activations-only kernels)
    dur_ns: int


def kernels(p: dict[str, Any]) -> list[Kernel]:
    """One decode step's kernels, in launch order (see `_kernels`)."""
    return list(_kernels(_key(p)))


def simulate(p: dict[str, Any]) -> tuple[list[Span], list[Span]]:
    """(cpu spans, gpu kernel spans) for `steps` decode steps (see `_simulate`)."""
    cpu, gpu_spans = _simulate(_key(p))
    return list(cpu), list(gpu_spans)


def _key(p: dict[str, Any]) -> str:
    # The simulation is pure in the variant; grading calls solve() and mistakes() many times per
    # answer, so it is memoised on the variant's canonical JSON.
    return json.dumps(p, sort_keys=True)


@lru_cache(maxsize=256)
def _kernels(key: str) -> tuple[Kernel, ...]:
    """One decode step's kernels, in launch order, with their durations.

    A weight-streaming kernel takes its bytes over (peak bandwidth x efficiency); the attention
    kernel adds one small-kernel latency on top (at batch 1 it has far too few blocks to be
    bandwidth-bound at short context). Every other kernel takes `small_us`, the top-p sort
    `sort_us`. The RMSNorm kernels read their weight vector, so the bytes of all kernels add up to
    exactly the floor's bytes.
    """
    p = json.loads(key)
    m = model(p["model"])
    bw = gpu(p["gpu"]).hbm_bytes_per_s * p["eff_pct"] / 100
    small = round(p["small_us"] * 1000)
    h, w = m.hidden, 2  # BF16

    def stream(nbytes: int, extra_ns: int = 0) -> int:
        return round(nbytes / bw * 1e9) + extra_ns

    kv_layer = p["context"] * m.kv_bytes_per_token_per_layer(w)
    qkv = (m.q_dim + 2 * m.kv_dim) * h * w
    o = m.q_dim * h * w
    assert m.ffn is not None
    gate_up = 2 * m.ffn * h * w
    down = m.ffn * h * w
    norm = h * w
    out = [Kernel("embedding", -1, False, 0, small)]
    for layer in range(m.layers):
        out += [
            Kernel("rms_norm", layer, False, norm, small),
            Kernel("qkv_proj", layer, True, qkv, stream(qkv)),
            Kernel("rotary_emb", layer, False, 0, small),
            Kernel("kv_cache_write", layer, False, 0, small),
            Kernel("attention", layer, True, kv_layer, stream(kv_layer, small)),
            Kernel("o_proj", layer, True, o, stream(o)),
            Kernel("residual_add", layer, False, 0, small),
            Kernel("rms_norm", layer, False, norm, small),
            Kernel("gate_up_proj", layer, True, gate_up, stream(gate_up)),
            Kernel("silu_and_mul", layer, False, 0, small),
            Kernel("down_proj", layer, True, down, stream(down)),
            Kernel("residual_add", layer, False, 0, small),
        ]
    lm_head = m.vocab * h * w
    out += [
        Kernel("rms_norm", -1, False, norm, small),
        Kernel("lm_head", -1, True, lm_head, stream(lm_head)),
        Kernel("logits_to_fp32", -1, False, 0, small),
        Kernel("softmax", -1, False, 0, small),
        Kernel("top_p_sort", -1, False, 0, round(p["sort_us"] * 1000)),
        Kernel("sample", -1, False, 0, small),
        Kernel("memcpy_dtoh", -1, False, 0, small),
    ]
    return tuple(out)


@dataclass(frozen=True)
class Span:
    name: str
    start_ns: int
    dur_ns: int
    step: int
    kernel: Kernel | None = None


@lru_cache(maxsize=256)
def _simulate(key: str) -> tuple[tuple[Span, ...], tuple[Span, ...]]:
    """(cpu spans, gpu kernel spans) for `steps` decode steps, in integer nanoseconds.

    Every step begins with the GPU idle (the previous step ended in a sync), so the steps are
    identical: one step is simulated and repeated every `period` nanoseconds.
    """
    p = json.loads(key)
    cpu1, gpu1, period = _one_step(key)
    cpu: list[Span] = []
    gpu_spans: list[Span] = []
    for step in range(p["steps"]):
        off = step * period
        for c in cpu1:
            name = f"decode_step#{step}" if c.name == "decode_step" else c.name
            cpu.append(Span(name, c.start_ns + off, c.dur_ns, step))
        gpu_spans += [Span(g.name, g.start_ns + off, g.dur_ns, step, g.kernel) for g in gpu1]
    return tuple(cpu), tuple(gpu_spans)


@lru_cache(maxsize=256)
def _one_step(key: str) -> tuple[tuple[Span, ...], tuple[Span, ...], int]:
    """One decode step from t = 0: (cpu spans, gpu spans, period in ns).

    The host schedules, then launches each kernel (launch_us apiece); a kernel starts when it has
    been launched and the previous kernel has finished (one stream). After the last launch the
    host blocks until the GPU is done (the sampled token is needed on the CPU), then spends
    post_us before the next step's scheduling begins.
    """
    p = json.loads(key)
    ks = _kernels(key)
    launch = round(p["launch_us"] * 1000)
    sched = round(p["sched_us"] * 1000)
    post = round(p["post_us"] * 1000)
    cpu: list[Span] = [Span("schedule_batch", 0, sched, 0)]
    gpu_spans: list[Span] = []
    t = sched
    gpu_free = 0
    for k in ks:
        cpu.append(Span(f"launch {k.name}", t, launch, 0))
        t += launch
        start = max(t, gpu_free)
        gpu_spans.append(Span(k.name, start, k.dur_ns, 0, k))
        gpu_free = start + k.dur_ns
    done = max(t, gpu_free)
    cpu.append(Span("cudaStreamSynchronize", t, done - t, 0))
    cpu.append(Span("detokenize_and_stop_check", done, post, 0))
    period = done + post
    cpu.append(Span("decode_step", 0, period, 0))
    return tuple(cpu), tuple(gpu_spans), period


# ----------------------------------------------------------------------------------------------
# Variants


def generate(rng: random.Random) -> dict[str, Any]:
    """A sensible variant: a 1.8-3.5x gap whose four parts are far enough apart to rank."""
    return draw_sensible(rng, lambda rng: {**CANONICAL, **choose(rng, {
        "model": MODELS, "gpu": GPUS, "context": CONTEXTS, "launch_us": LAUNCH_US,
        "small_us": SMALL_US, "eff_pct": EFF_PCT, "sort_us": SORT_US, "sched_us": SCHED_US,
        "post_us": POST_US,
    })}, is_sensible, tries=2000)


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    if check(constraints(p)):  # a story that could not happen: see exercises/feasibility.py
        return False
    s = solve(p)
    values = sorted(s["suspect_ms"].values())
    return (
        1.8 <= s["ratio"] <= 3.5
        # every suspect is real (at least 0.1 ms a step) ...
        and values[0] >= 0.1
        # ... and each is at least 15 % above the next, so the ranking is not a coin toss
        and all(b >= 1.15 * a for a, b in zip(values, values[1:], strict=False))
    )


# ----------------------------------------------------------------------------------------------
# The reference


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    bw = g.hbm_bytes_per_s
    ks = kernels(p)

    # -- the floor: bytes a step must read over peak bandwidth -----------------------------------
    weight_bytes = (m.params - m.input_embedding_params) * 2
    kv_bytes = p["context"] * m.kv_bytes_per_token(2)
    floor_bytes = weight_bytes + kv_bytes
    assert floor_bytes == sum(k.nbytes for k in ks)  # the kernels read exactly the floor's bytes
    floor_ns = floor_bytes / bw * 1e9
    floor_emb_ns = (m.params * 2 + kv_bytes) / bw * 1e9  # the embedding table wrongly counted

    # -- what one step looks like in the trace (every step is the same) -------------------------
    _, step0, period_ns = _one_step(_key(p))
    busy_ns = sum(s.dur_ns for s in step0)
    intra_ns = sum(b.start_ns - (a.start_ns + a.dur_ns) for a, b in zip(step0, step0[1:],
                                                                         strict=False))
    # From the last kernel of one step to the first kernel of the next (one period later).
    boundary_ns = period_ns + step0[0].start_ns - (step0[-1].start_ns + step0[-1].dur_ns)
    assert busy_ns + intra_ns + boundary_ns == period_ns

    # -- split the busy time: bytes / bandwidth, and the rest -------------------------------------
    def ideal(k: Kernel) -> float:
        return k.nbytes / bw * 1e9

    slow_ns = sum(k.dur_ns - ideal(k) for k in ks if k.weights)
    small_ns = sum(k.dur_ns - ideal(k) for k in ks if not k.weights)
    weights_dur_ns = sum(k.dur_ns for k in ks if k.weights)
    lm = next(k for k in ks if k.name == "lm_head")
    lm_excess_ns = lm.dur_ns - ideal(lm)
    attn_excess_ns = sum(k.dur_ns - ideal(k) for k in ks if k.name == "attention")
    gap_ns = period_ns - floor_ns
    n_kernels = len(ks)
    n_small = sum(1 for k in ks if not k.weights)
    cpu_launch_ns = n_kernels * round(p["launch_us"] * 1000)

    # per-layer figures the solution shows
    layer0 = [k for k in ks if k.layer == 0]
    by_name = {k.name: k for k in layer0}
    gemv_names = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")

    suspect_ms = {
        "launch_idle": intra_ns / 1e6,
        "boundary": boundary_ns / 1e6,
        "slow_kernels": slow_ns / 1e6,
        "small_kernels": small_ns / 1e6,
    }
    ranking = sorted(SUSPECTS, key=lambda k: -suspect_ms[k])
    # What CUDA graphs buy: one launch per step, so the GPU runs the kernels back to back and the
    # idle inside the step disappears; the host's work between steps stays.
    graphed_ns = period_ns - intra_ns
    # And overlapping the host's between-step work with the GPU (async scheduling) on top of that.
    overlapped_ns = graphed_ns - boundary_ns

    s: dict[str, Any] = {
        # part answers
        "floor_ms": Quantity(floor_ns / 1e6, "ms"),
        "gap_ms": Quantity(gap_ns / 1e6, "ms"),
        "boundary_ms": Quantity(boundary_ns / 1e6, "ms"),
        "launch_idle_ms": Quantity(intra_ns / 1e6, "ms"),
        "slow_kernels_ms": Quantity(slow_ns / 1e6, "ms"),
        "suspects": ranking,
        # givens the statement prints
        "params": m.params,
        "layers": m.layers,
        "hidden": m.hidden,
        "q_heads": m.q_heads,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "ffn": m.ffn,
        "vocab": m.vocab,
        "hbm_tbps": g.hbm_tbps,
        "observed_tok_s": 1e9 / period_ns,
        "ratio": period_ns / floor_ns,
        "n_kernels": n_kernels,
        # intermediates for the solution
        "embedding_params": m.input_embedding_params,
        "read_params": m.params - m.input_embedding_params,
        "weight_gb": weight_bytes / 1e9,
        "kappa": m.kv_bytes_per_token(2),
        "kv_gb": kv_bytes / 1e9,
        "floor_gb": floor_bytes / 1e9,
        "floor_tok_s": 1e9 / floor_ns,
        "floor_emb_ms": floor_emb_ns / 1e6,
        "period_ms": period_ns / 1e6,
        "busy_ms": busy_ns / 1e6,
        "idle_ms": (intra_ns + boundary_ns) / 1e6,
        "idle_pct": (intra_ns + boundary_ns) / period_ns * 100,
        "busy_pct": busy_ns / period_ns * 100,
        "small_kernels_ms": small_ns / 1e6,
        "weights_dur_ms": weights_dur_ns / 1e6,
        "lm_excess_us": lm_excess_ns / 1e3,
        "attn_excess_ms": attn_excess_ns / 1e6,
        "n_small": n_small,
        "n_weight_kernels": n_kernels - n_small,
        "cpu_launch_ms": cpu_launch_ns / 1e6,
        "gpu_per_layer_us": sum(k.dur_ns for k in layer0) / 1e3,
        "cpu_per_layer_us": len(layer0) * p["launch_us"],
        "kernels_per_layer": len(layer0),
        "gate_up_mb": by_name["gate_up_proj"].nbytes / 1e6,
        "gate_up_us": by_name["gate_up_proj"].dur_ns / 1e3,
        "gate_up_ideal_us": ideal(by_name["gate_up_proj"]) / 1e3,
        "gemv_layer_mb": sum(by_name[n].nbytes for n in gemv_names) / 1e6,
        "achieved_tbps": g.hbm_tbps * p["eff_pct"] / 100,
        "suspect_ms": suspect_ms,
        "rank1": ranking[0],
        "graphed_ms": graphed_ns / 1e6,
        "graphed_tok_s": 1e9 / graphed_ns,
        "graphed_ratio": graphed_ns / floor_ns,
        "overlapped_ms": overlapped_ns / 1e6,
        "overlapped_tok_s": 1e9 / overlapped_ns,
        "overlapped_ratio": overlapped_ns / floor_ns,
        "host_share_pct": (intra_ns + boundary_ns) / gap_ns * 100,
        "gpu_share_pct": (slow_ns + small_ns) / gap_ns * 100,
    }
    s["ranking_text"] = " > ".join(ranking)
    s["ranking_labels"] = "; ".join(
        f"{i}. {LABELS[k]}: {suspect_ms[k]:.2f} ms" for i, k in enumerate(ranking, 1))
    s["what_to_fix"] = _model_answer(p, s)
    return s


LABELS = {
    "launch_idle": "GPU idle between kernels inside the step",
    "boundary": "GPU idle at the step boundary",
    "slow_kernels": "weight-streaming kernels below peak bandwidth",
    "small_kernels": "small kernels",
}


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    order = ", then ".join(f"{LABELS[k]} ({s['suspect_ms'][k]:.2f} ms)" for k in s["suspects"])
    return (
        f"The GPU is not slow: its floor is {s['floor_ms'].value:.2f} ms a step and the weight "
        f"kernels stream at {p['eff_pct']} % of peak. Of the {s['gap_ms'].value:.2f} ms gap, "
        f"{s['host_share_pct']:.0f} % is the GPU waiting for the host and "
        f"{s['gpu_share_pct']:.0f} % is kernel inefficiency. In order: {order}. "
        "First fix the host: capture the step in a CUDA graph (one launch replaces "
        f"{s['n_kernels']} launches; the step drops to {s['graphed_ms']:.2f} ms, "
        f"{s['graphed_tok_s']:.0f} tok/s), then overlap scheduling, sampling and detokenisation "
        f"with the GPU's next step (async scheduling; {s['overlapped_ms']:.2f} ms, "
        f"{s['overlapped_tok_s']:.0f} tok/s). Then the kernels: fuse the small ones (norm + "
        "residual, RoPE + KV write, activation into the GEMV) and use M=1-specialised GEMV "
        "kernels (split-K) that reach 85-90 % of bandwidth. A faster GPU would shrink only the "
        "floor; the host costs stay the same, so the ratio would get worse."
    )


# ----------------------------------------------------------------------------------------------
# Evidence: the trace the student reads


def evidence(p: dict[str, Any]) -> dict[str, Evidence]:
    cpu, gpu_spans = simulate(p)

    def us(ns: int) -> float:
        return round(ns / 1000, 3)

    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "host (python)"}},
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "main thread"}},
        {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": f"GPU 0 ({p['gpu']})"}},
        {"name": "thread_name", "ph": "M", "pid": 2, "tid": 7, "args": {"name": "stream 7"}},
    ]
    for c in cpu:
        cat = "cuda_runtime" if c.name.startswith(("launch", "cuda")) else "python"
        ev: dict[str, Any] = {"name": c.name, "cat": cat, "ph": "X", "ts": us(c.start_ns),
                              "dur": us(c.dur_ns), "pid": 1, "tid": 1}
        if c.name.startswith("decode_step#"):
            ev["args"] = {"step": c.step}
        events.append(ev)
    for gs in gpu_spans:
        k = gs.kernel
        assert k is not None
        args: dict[str, Any] = {"step": gs.step}
        if k.layer >= 0:
            args["layer"] = k.layer
        if k.weights:
            args["bytes"] = k.nbytes
        events.append({"name": k.name, "cat": "kernel", "ph": "X", "ts": us(gs.start_ns),
                       "dur": us(gs.dur_ns), "pid": 2, "tid": 7, "args": args})
    events.sort(key=lambda e: (e["pid"], e.get("ts", -1.0)))
    return {
        "trace": Evidence(
            title=f"Profiler trace: {p['steps']} decode steps, batch 1",
            filename="q03_trace.json",
            kind="trace",
            data={"traceEvents": events, "displayTimeUnit": "ms"},
            caption=(
                "Chrome trace-event JSON (times in µs). Open it in ui.perfetto.dev or "
                "chrome://tracing, or load it with Python's json module. Weight-streaming "
                "kernels carry the bytes they must read in args.bytes."
            ),
        )
    }


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near, merge_floor=1e-9).add

    floor = s["floor_ms"].value
    add("floor_ms", s["floor_emb_ms"],
        "You counted the input embedding table. A decode step looks up one row of it, so its "
        f"{s['embedding_params']:,} parameters are not streamed; only the LM head reads a "
        "vocabulary-sized matrix.", "embedding", kind="miscounted_term")
    add("floor_ms", 2 * floor,
        "Twice the reference: the weights and the cache are BF16, 2 bytes per value, not 4.",
        "fp32", kind="wrong_precision")
    add("floor_ms", s["weight_gb"] * 1e9 / (s["hbm_tbps"] * 1e12) * 1e3,
        f"You left out the KV cache: attention reads {p['context']:,} tokens of K and V in every "
        "layer.", "no_kv", kind="miscounted_term")
    add("floor_ms", floor / (p["eff_pct"] / 100),
        f"You ran the floor at {p['eff_pct']} % of peak. The floor is the ideal: bytes over the "
        "full bandwidth; the shortfall is part of the gap you are explaining.", "efficiency",
        kind="peak_vs_achievable")

    period = s["period_ms"]
    add("gap_ms", period,
        "That is the whole step time. The gap is the step time minus the floor.", "period",
        kind="wrong_scope")
    add("gap_ms", s["busy_ms"] - floor,
        "You used the GPU's busy time (the kernel durations added up) as the step time. The idle "
        "stretches between kernels and between steps are part of the step too.", "busy",
        kind="misread_mechanism")
    add("gap_ms", period - s["floor_emb_ms"],
        "Your floor counts the input embedding table, which a step does not stream.", "embedding",
        kind="miscounted_term")

    bd = s["boundary_ms"].value
    add("boundary_ms", (p["sched_us"] + p["launch_us"]) / 1e3,
        "You measured the idle stretch before the first kernel of the trace. Between two steps "
        "the host also finishes the previous step (sync, detokenise) first; measure from the last "
        "kernel of one step to the first kernel of the next.", "leading", kind="misread_mechanism")
    add("boundary_ms", p["post_us"] / 1e3,
        "You measured the idle stretch after the last kernel of the trace. Between two steps the "
        "host also schedules the next one and launches its first kernel; measure from the last "
        "kernel of one step to the first kernel of the next.", "trailing", kind="misread_mechanism")
    add("boundary_ms", bd * (p["steps"] - 1),
        f"You added up the boundaries of the whole trace. The part asks for one boundary; the "
        f"trace has {p['steps'] - 1} between its {p['steps']} steps.", "summed", kind="wrong_scope")

    intra = s["launch_idle_ms"].value
    add("launch_idle_ms", intra + bd,
        "You included the step-boundary gap. Count only the gaps between kernels of the same "
        "step.", "with_boundary", kind="miscounted_term")
    add("launch_idle_ms", intra * p["steps"],
        f"You added up all {p['steps']} steps of the trace. The part asks for one step.",
        "summed", kind="wrong_scope")
    add("launch_idle_ms", s["cpu_launch_ms"],
        "That is the host's launch time (the launch row of the CPU thread). The part asks how "
        "long the GPU sat idle inside the step.", "cpu_time", kind="misread_mechanism")

    slow = s["slow_kernels_ms"].value
    add("slow_kernels_ms", s["weights_dur_ms"],
        "That is how long the weight-streaming kernels run in total. Subtract what their bytes "
        "need at peak bandwidth; the excess is what they lose.", "duration", kind="miscounted_term")
    add("slow_kernels_ms", slow + s["small_kernels_ms"],
        "You took all kernels' time minus the floor, which includes the small kernels. Count "
        "only the kernels that stream weights or KV (those with args.bytes).", "all_kernels",
        kind="miscounted_term")
    add("slow_kernels_ms", slow - s["lm_excess_us"] / 1e3,
        "You left out the LM head, the largest single kernel of the step.", "no_lm_head",
        kind="miscounted_term")
    add("slow_kernels_ms", slow - s["attn_excess_ms"],
        "You left out the attention kernels: they stream the KV cache and carry args.bytes too.",
        "no_attention", kind="miscounted_term")

    folklore = ["slow_kernels", "small_kernels", "launch_idle", "boundary"]
    if folklore != s["suspects"]:
        out.append(Mistake(
            "suspects", folklore,
            # The measured times are not printed: three of them are parts 3-5's answers.
            "That is the order you would guess if the GPU were the problem. Rank by what you "
            "measured in the trace: parts 3 to 5 measure three of the four suspects.",
            "gpu_first", kind="misread_mechanism"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    m = model(p["model"])
    seq = p["context"] + p["steps"]  # the cached context, then one token per captured step
    return [
        Fits("BF16 weights and the request's KV cache", p["gpu"], 1,
             m.weight_bytes(2) + m.kv_bytes_for_tokens(seq)),
        WithinContext(p["model"], seq, "the cached context plus the captured steps"),
    ]
