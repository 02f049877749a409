"""Q01: one division tells you whether a headline decode speed is physics or marketing.

A vendor slide quotes a per-user decode speed for a model "on" a GPU. Single-stream decode reads
every weight once per token, so one GPU's ceiling is its HBM bandwidth divided by the weight bytes.
The parts run that division, then price the conditions the slide may have left out: the figure is
a total over concurrent users (how many it takes), or it is a whole 8-GPU server run
tensor-parallel (whose all-reduces cap it well below 8x) plus speculative decoding (how many
tokens per target step it would need). The multi-choice part asks which conditions, each on its
own, make the claim physically possible; the text part asks what to request from the vendor.

Every hardware and model figure comes from exercises/catalog; every assumption is a key of the
variant, printed by the statement.
"""
from __future__ import annotations

import math
import random
from typing import Any

from exercises.catalog import gpu, model
from exercises.drawing import draw_sensible
from exercises.feasibility import Claim, Fits, WithinContext
from exercises.slips import Slips, near, tolerances, unusable
from exercises.spec import Mistake, Quantity

TOLERANCE = tolerances(__file__)  # the number parts' tolerances, from exercise.toml

PRECISION_BYTES: dict[str, float] = {"BF16": 2.0, "FP8": 1.0}

# (model, weight precision, GPU): combinations whose weights fit on ONE GPU of the catalog with
# room left for some KV (at most 90 % of the marketed HBM), so "one GPU" is a real deployment.
# FP8 is not offered on A100, which has no FP8 tensor cores.
SETUPS: tuple[tuple[str, str, str], ...] = (
    ("Llama-3.1-70B", "FP8", "H100 SXM"),
    ("Llama-3.1-70B", "FP8", "H200 SXM"),
    ("Llama-3.1-70B", "FP8", "B200"),
    ("Llama-3.1-70B", "BF16", "B200"),
    ("Qwen2.5-72B", "FP8", "H200 SXM"),
    ("Qwen2.5-72B", "FP8", "B200"),
    ("Llama-3.1-8B", "BF16", "A100 SXM 80GB"),
    ("Llama-3.1-8B", "BF16", "H100 SXM"),
    ("Llama-3.1-8B", "BF16", "H200 SXM"),
    ("Llama-3.1-8B", "BF16", "B200"),
    ("Llama-3.1-8B", "FP8", "H100 SXM"),
    ("Llama-3.1-8B", "FP8", "H200 SXM"),
)
SERVER_GPUS = 8  # an HGX/DGX board: what "on H100" may silently mean
AR_US = (5, 8, 10, 12, 15)  # small-message NCCL all-reduce on one NVLink node [A]
TAU_TYP = (1.8, 2.0, 2.5, 3.0)  # tokens per target forward with a good drafter [A]
CONTEXTS = (512, 1024, 2048, 4096)  # mean tokens in each user's KV cache [A]
# The claim as a multiple of the one-GPU ceiling, before rounding to a "slide" number.
CLAIM_FACTORS = (3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0)

# Options of the `conditions` part, as in exercise.toml.
OPTIONS = ("batch", "int4", "spec_one", "server", "server_spec", "engine", "short")

CANONICAL: dict[str, Any] = {
    "model": "Llama-3.1-70B",
    "precision": "FP8",  # the weights, as the slide says
    "gpu": "H100 SXM",
    "claim": 400,  # tokens/s "per user", from the slide
    "server_gpus": SERVER_GPUS,
    "ar_us": 10,  # µs per all-reduce at TP8 [A]
    "tau_typ": 2.0,  # tokens per target forward with speculation [A]
    "context": 1024,  # mean tokens cached per user for the batch part [A]
}


# ----------------------------------------------------------------------------------------------
# Variants


def _slide_number(x: float) -> int:
    """Round a speed the way a slide would: two significant figures, on a 5 or 10 grid."""
    step = 10 ** max(0, math.floor(math.log10(x)) - 1)
    step = step * 5 if x >= 1000 else step
    return int(round(x / step) * step)


def generate(rng: random.Random) -> dict[str, Any]:
    """Draw a sensible variant: the claim is well above the one-GPU ceiling, every condition is
    clearly true or clearly false (at least 10 % from the claim, and a batch that fits in HBM or
    clearly does not)."""
    def draw(rng: random.Random) -> dict[str, Any]:
        name, precision, gpu_name = rng.choice(SETUPS)
        p = dict(CANONICAL)
        p.update(model=name, precision=precision, gpu=gpu_name, ar_us=rng.choice(AR_US),
                 tau_typ=rng.choice(TAU_TYP), context=rng.choice(CONTEXTS))
        ceiling = _ceiling(p)
        p["claim"] = _slide_number(ceiling * rng.choice(CLAIM_FACTORS) * rng.uniform(0.9, 1.1))
        return p

    return draw_sensible(rng, draw, is_sensible, tries=2000)


def is_sensible(p: dict[str, Any]) -> bool:
    """The checks generate() applies; the tests apply them to every variant too."""
    g = gpu(p["gpu"])
    if _weight_bytes(p) > 0.9 * g.hbm_bytes:
        return False
    s = solve(p)
    claim = p["claim"]
    if claim < 2 * s["ceiling_value"]:  # a slide worth questioning
        return False
    if s["tau_needed"].value < 1.15 or s["tau_needed"].value > 6:  # a server alone is not enough
        return False
    if not math.isfinite(s["users_exact"]):
        return False
    # The user count clear of a whole number by 0.5 % (the tolerance policy's boundary rule).
    x = s["users_exact"]
    if x != math.floor(x) and min(x - math.floor(x), math.ceil(x) - x) < 0.005 * x:
        return False
    # The batch either fits in HBM or clearly does not (5 % either side of the marketed size).
    if abs(math.log(s["hbm_at_users_gb"] / s["hbm_gb"])) < math.log(1.05):
        return False
    if s["users_needed"].value > 64 or not s["conditions"]:
        return False
    # Every threshold at least 10 % from the claim, so no option hinges on rounding.
    for key in ("int4_rate", "spec_one_rate", "server_rate", "server_spec_rate"):
        if abs(math.log(s[key] / claim)) < math.log(1.1):
            return False
    return True


# ----------------------------------------------------------------------------------------------
# The reference


def _weight_bytes(p: dict[str, Any]) -> float:
    return model(p["model"]).params * PRECISION_BYTES[p["precision"]]


def _ceiling(p: dict[str, Any]) -> float:
    return gpu(p["gpu"]).hbm_bytes_per_s / _weight_bytes(p)


def users_for(claim: float, bw: float, weights: float, kv_per_user: float) -> float:
    """The (real-valued) batch B at which B users together reach `claim` tokens/s on one GPU:
    B * bw / (weights + B * kv_per_user) = claim, so B = claim * weights / (bw - claim * kv).
    Infinite when the KV traffic alone would use the whole bandwidth."""
    room = bw - claim * kv_per_user
    return math.inf if room <= 0 else claim * weights / room


def solve(p: dict[str, Any]) -> dict[str, Any]:
    m = model(p["model"])
    g = gpu(p["gpu"])
    claim, n_srv, ctx = p["claim"], p["server_gpus"], p["context"]
    wb = PRECISION_BYTES[p["precision"]]
    weights = m.params * wb
    bw = g.hbm_bytes_per_s

    # -- the one division ------------------------------------------------------------------------
    step_s = weights / bw
    ceiling = 1 / step_s
    gap = claim / ceiling

    # -- condition 1: the figure is a total over concurrent users --------------------------------
    kappa = m.kv_bytes_per_token(2)  # BF16 cache
    kv_user = ctx * kappa
    users_exact = users_for(claim, bw, weights, kv_user)
    users = math.ceil(users_exact - 1e-9)
    step_at_users_s = (weights + users * kv_user) / bw
    per_user_at_users = 1 / step_at_users_s
    hbm_at_users = weights + users * kv_user
    batch_fits = hbm_at_users <= g.hbm_bytes

    # -- condition 2: a whole server, tensor-parallel, with and without speculation --------------
    allreduces = 2 * m.layers  # one after attention, one after the MLP, in every layer
    shard_s = weights / (n_srv * bw)
    comm_s = allreduces * p["ar_us"] * 1e-6
    server_step_s = shard_s + comm_s
    server_ceiling = 1 / server_step_s
    server_ideal = n_srv * ceiling  # what "8x the bandwidth" promises before communication
    tau_needed = claim / server_ceiling

    # -- the other conditions ----------------------------------------------------------------------
    int4_rate = bw / (m.params * 0.5)
    spec_one_rate = p["tau_typ"] * ceiling
    server_spec_rate = p["tau_typ"] * server_ceiling
    truth = {
        "batch": bool(batch_fits),
        "int4": int4_rate >= claim,
        "spec_one": spec_one_rate >= claim,
        "server": server_ceiling >= claim,
        "server_spec": server_spec_rate >= claim,
        "engine": False,  # software cannot beat bytes / bandwidth
        "short": False,  # the ceiling already assumes an empty context
    }
    conditions = [o for o in OPTIONS if truth[o]]

    s: dict[str, Any] = {
        # part answers
        "ceiling": Quantity(ceiling, "tok/s"),
        "users_needed": Quantity(users, ""),
        "users_needed_unrounded": users_exact,  # before the ceil (policy: boundary rule)
        "server_ceiling": Quantity(server_ceiling, "tok/s"),
        "tau_needed": Quantity(tau_needed, ""),
        "conditions": conditions,
        # givens the statement prints
        "params": m.params,
        "params_b": m.params / 1e9,
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "hbm_tbps": g.hbm_tbps,
        "hbm_gb": g.hbm_gb,
        "weight_bytes_each": wb,
        # intermediates for the solution
        "weights_gb": weights / 1e9,
        "step_ms": step_s * 1e3,
        "ceiling_value": ceiling,
        "gap": gap,
        "kappa": kappa,
        "kv_user_gb": kv_user / 1e9,
        "users_exact": users_exact,
        "users_no_kv": math.ceil(gap - 1e-9),
        "claim_kv_gbs": claim * kv_user / 1e9,
        "bw_gbs": bw / 1e9,
        "room_gbs": (bw - claim * kv_user) / 1e9,
        "step_at_users_ms": step_at_users_s * 1e3,
        "per_user_at_users": per_user_at_users,
        "aggregate_at_users": users * per_user_at_users,
        "hbm_at_users_gb": hbm_at_users / 1e9,
        "batch_fits": batch_fits,
        "allreduces": allreduces,
        "shard_ms": shard_s * 1e3,
        "comm_ms": comm_s * 1e3,
        "comm_pct": comm_s / server_step_s * 100,
        "server_step_ms": server_step_s * 1e3,
        "server_ideal": server_ideal,
        "tau_ideal": claim / server_ideal,
        "int4_rate": int4_rate,
        "spec_one_rate": spec_one_rate,
        "spec_one_tau": claim / ceiling,
        "server_rate": server_ceiling,
        "server_spec_rate": server_spec_rate,
    }
    s["batch_fit_text"] = (
        "they fit, so a batch of users on one GPU can produce the slide's total."
        if batch_fits else
        "they do not fit, so this GPU cannot even hold the batch the claim needs.")
    s["tau_reach_text"] = (
        f"{tau_needed:.2f} is within reach, so \"a server with speculation\" is a plausible "
        "reading of the slide."
        if server_spec_rate >= claim else
        f"{tau_needed:.2f} is more than drafters usually deliver, so even a server with "
        "speculation is a stretch.")
    s["server_ideal_vs_claim"] = "already falls short of" if server_ideal < claim else "exceeds"
    for o in OPTIONS:
        s[f"is_{o}"] = "**possible**" if truth[o] else "not enough"
    s["ask_vendor"] = _model_answer(p, s)
    return s


def _model_answer(p: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"One {p['gpu']} cannot do it for one user: {p['precision']} weights are "
        f"{s['weights_gb']:.1f} GB, read once per token, so {s['hbm_tbps']:g} TB/s caps a "
        f"single stream at {s['ceiling_value']:.0f} tok/s, {s['gap']:.1f}x short of "
        f"{p['claim']}. The number is real only if it is a total over about "
        f"{s['users_needed'].value:.0f} or more concurrent users, or if it came from a whole "
        f"{p['server_gpus']}-GPU server with speculative decoding accepting at least "
        f"{s['tau_needed'].value:.1f} tokens per step. I would ask for: the number and type of "
        "GPUs and the parallelism; the precision of the weights and of the KV cache; the "
        "concurrency during the run and whether the figure is per user or aggregate; the input "
        "and output lengths; whether speculative decoding was on, with which drafter, and its "
        "acceptance on which data and temperature; which statistic of inter-token latency "
        "(mean, p50, p99) and whether TTFT is included; and the exact model revision and engine "
        "version, ideally a reproducible benchmark command or a third-party measurement."
    )


# ----------------------------------------------------------------------------------------------
# Known mistakes


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    m = model(p["model"])
    g = gpu(p["gpu"])
    claim, n_srv = p["claim"], p["server_gpus"]
    wb = PRECISION_BYTES[p["precision"]]
    other_bytes = 2.0 if wb == 1.0 else 1.0
    other_name = "BF16 (2 bytes)" if wb == 1.0 else "FP8 (1 byte)"
    out: list[Mistake] = []

    add = Slips(s, TOLERANCE, out, merge=near, merge_floor=1e-9, skip=unusable).add

    ceiling = s["ceiling_value"]
    bw = g.hbm_bytes_per_s
    add("ceiling", ceiling * wb / other_bytes,
        f"You sized the weights in {other_name}. The slide's weights are {p['precision']}, "
        f"{wb:g} byte(s) per parameter.", "wrong_precision", kind="wrong_precision")
    add("ceiling", ceiling * 8,
        f"Eight times the reference: that divides by bits, not bytes. {s['weights_gb']:.1f} GB "
        "of weights must be read every token.", "bits", kind="bits_vs_bytes")
    add("ceiling", g.bf16_flops / (2 * m.params),
        "That is the compute ceiling (FLOP/s over 2 FLOPs per parameter). At one user the GPU "
        "waits on memory, not on arithmetic: divide bandwidth by bytes.", "compute_bound",
        kind="misread_mechanism")
    add("ceiling", ceiling * n_srv,
        f"That is {n_srv} GPUs' bandwidth. This part asks what ONE {p['gpu']} can do.",
        "server", kind="forgot_tp")

    add("users_needed", float(s["users_no_kv"]),
        f"You left out the KV cache. Each user adds {s['kv_user_gb']:.2f} GB of KV that is "
        "read every step too, so the step slows as users are added.", "no_kv",
        kind="miscounted_term")
    add("users_needed", float(math.floor(s["users_exact"])),
        f"You rounded down. {s['users_exact']:.2f} users is not enough; the count must reach "
        "the claim, so round up.", "round_down", kind="rounding")
    add("users_needed", float(math.ceil(users_for(claim, bw, s["weights_gb"] * 1e9,
                                                  s["kv_user_gb"] * 1e9 / 2) - 1e-9)),
        "You counted K but not V: each cached token stores both.", "k_only", kind="k_without_v")
    add("users_needed", float(math.ceil(users_for(claim, bw, m.params * other_bytes,
                                                  s["kv_user_gb"] * 1e9) - 1e-9)),
        f"You sized the weights in {other_name}; the slide says {p['precision']}.",
        "wrong_precision", kind="wrong_precision")

    server = s["server_ceiling"].value
    add("server_ceiling", s["server_ideal"],
        f"You left out the {s['allreduces']} all-reduces per token (two per layer). At "
        f"{p['ar_us']} µs each they add {s['comm_ms']:.2f} ms to a {s['shard_ms']:.2f} ms step.",
        "no_allreduce", kind="miscounted_term")
    add("server_ceiling", 1 / (s["shard_ms"] / 1e3 + m.layers * p["ar_us"] * 1e-6),
        "One all-reduce per layer is too few: tensor parallelism needs one after attention "
        "and one after the MLP.", "one_per_layer", kind="miscounted_term")
    add("server_ceiling", 1 / (s["shard_ms"] / 1e3 + 2 * m.layers * p["ar_us"] * 1e-6 * n_srv),
        f"The all-reduces run once per step for the whole server, not once per GPU: do not "
        f"multiply their time by {n_srv}.", "ar_per_gpu", kind="forgot_tp")
    add("server_ceiling", server * wb / other_bytes,
        f"You sized the weights in {other_name}; the slide says {p['precision']}.",
        "wrong_precision", kind="wrong_precision")

    tau = s["tau_needed"].value
    add("tau_needed", s["tau_ideal"],
        "That divides by the rate of a server without communication. Divide by the ceiling of "
        "part 3, which counts the all-reduces: it is lower, so speculation must cover more.",
        "no_allreduce", kind="miscounted_term")
    add("tau_needed", s["gap"],
        f"That is the shortfall on one GPU. The question is about the {n_srv}-GPU server.",
        "one_gpu", kind="forgot_tp")
    add("tau_needed", tau - 1,
        "Tokens per target step count the token the target model produces itself: the answer is "
        "the whole ratio, not the extra drafted tokens.", "minus_one", kind="miscounted_term")

    # The conditions: the two slips a reader of the slide makes most often.
    right = s["conditions"]
    if "server" not in right:
        out.append(Mistake(
            "conditions", sorted([*right, "server"], key=OPTIONS.index),
            f"The server alone is not enough: with its {s['allreduces']} all-reduces per token, "
            f"the {n_srv}-GPU ceiling of part 3 stays below the slide's figure.",
            "server_alone", kind="misread_mechanism"))
    if "engine" not in right:
        out.append(Mistake(
            "conditions", sorted([*right, "engine"], key=OPTIONS.index),
            "No engine beats the division: every weight byte crosses the HBM bus once per step "
            "whatever the kernels, so software only approaches the ceiling.", "engine",
            kind="peak_vs_achievable"))
    return out


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    return [
        Fits(f"{p['precision']} weights on one GPU", p["gpu"], 1, _weight_bytes(p)),
        WithinContext(p["model"], p["context"], "each user's cached context"),
    ]
