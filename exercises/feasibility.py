"""Could this variant exist? One validator every exercise's `generate()` must pass.

A variant is a story: a model on some GPUs, a prompt, a request that gets preempted. Random draws
can tell stories that cannot happen (a 141 GB model on one 80 GB GPU, a 200K-token prompt to a
model that takes 128K, an MTP draft head on a model that ships none). Each exercise says what its
statement claims, as a list of `Claim`s, from an optional function in its `exercise.py`:

    def constraints(p: dict) -> list[Claim]:
        m = model(p["model"])
        return [
            Fits("BF16 weights and the KV pool", p["gpu"], p["tp"], m.weight_bytes(2) + kv),
            WithinContext(p["model"], p["prompt"] + p["output"], "prompt plus output"),
        ]

and `check(claims)` here does the checking, with figures from `exercises/catalog/`, so the
rules live in one place and an exercise states facts about itself rather than re-deriving limits.
Nothing is guessed from parameter names: an exercise whose part asks whether something fits
declares `Fits(..., asked=True)`, which checks the names but not the capacity.

Standard library and the catalog only (no Django), like the catalog itself.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from exercises.catalog import gpu, model
from exercises.rounding import round_sig

# Conventions for what a statement leaves unsaid. "On H100 GPUs" with no count means one HGX/DGX
# node of eight; a statement that names no weight precision gets the smallest that engines serve
# these models at (FP8, 1 byte per parameter), so only a variant that fits at no precision fails.
NODE_GPUS = 8
UNSTATED_WEIGHT_BYTES = 1

# --------------------------------------------------------------------------------------------
# Claims


@dataclass(frozen=True)
class Fits:
    """`bytes_total` bytes placed across `gpus` GPUs of kind `gpu` fit their marketed HBM.

    The marketed capacity (`GPU.hbm_bytes`, 10^9 B per GB) is the shared convention; `usable`
    scales it where the statement itself keeps a share back (gpu_memory_utilization). `asked`:
    a part asks whether this fits, so not fitting is a legitimate answer and only the names are
    checked.
    """

    what: str
    gpu: str
    gpus: int
    bytes_total: float
    usable: float = 1.0
    asked: bool = False


@dataclass(frozen=True)
class WithinContext:
    """One sequence of `tokens` tokens (prompt plus everything generated) is within the model's
    maximum context (config `max_position_embeddings`, `Model.max_context`)."""

    model: str
    tokens: int
    what: str


@dataclass(frozen=True)
class HasFeature:
    """The statement gives the model a feature it must really ship (see `FEATURES`)."""

    model: str
    feature: str
    what: str = ""


@dataclass(frozen=True)
class Holds:
    """The scenario's own logic (a preemption victim that has not finished; a 'long' prompt that
    is long for its model): `ok` computed by the exercise, `what` says the rule in words."""

    ok: bool
    what: str


Claim = Fits | WithinContext | HasFeature | Holds


# --------------------------------------------------------------------------------------------
# The checks


def fits_memory(gpu_name: str, gpus: int, bytes_total: float, usable: float = 1.0) -> bool:
    """Whether `bytes_total` fits `gpus` GPUs' marketed HBM times `usable`."""
    if gpus < 1:
        return False
    return bytes_total <= gpus * gpu(gpu_name).hbm_bytes * usable


def within_context(model_name: str, tokens: int) -> bool:
    """Whether one sequence of `tokens` fits the model's maximum context. A model the catalog
    gives no maximum for cannot be vouched for, so it fails rather than passing unchecked."""
    limit = model(model_name).max_context
    return limit is not None and 0 <= tokens <= limit


def _has_mtp(name: str) -> bool:
    return bool(model(name).mtp_layers)


def _has_group_routing(name: str) -> bool:
    m = model(name)
    return m.n_group is not None and m.topk_group is not None


FEATURES = {
    # A multi-token-prediction module shipped with the checkpoint (DeepSeek-V3's layer 61).
    "mtp": _has_mtp,
    # Group-limited (node-limited when a group sits on one node) expert routing: the router picks
    # topk_group of n_group expert groups first (DeepSeek-V3: 4 of 8). Plain top-k routers
    # (Mixtral, Qwen3-MoE, GPT-OSS) have no such limit.
    "group_limited_routing": _has_group_routing,
    "moe": lambda name: model(name).is_moe,
    "mla": lambda name: model(name).is_mla,
    "gqa": lambda name: model(name).attention == "gqa",
    "sliding_window": lambda name: model(name).sliding_window is not None,
}


def has_feature(model_name: str, feature: str) -> bool:
    """Whether the model really has `feature` (a key of `FEATURES`); an unknown feature name is a
    mistake in the exercise, so it raises."""
    try:
        test = FEATURES[feature]
    except KeyError:
        raise ValueError(f"unknown feature {feature!r}; known: {', '.join(FEATURES)}") from None
    return test(model_name)


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f} GB"


def check(claims: Iterable[Claim]) -> list[str]:
    """Every claim that fails, as a sentence naming the figures; an empty list means the variant
    could exist. Unknown model or GPU names raise (KeyError from the catalog)."""
    problems: list[str] = []
    for c in claims:
        if isinstance(c, Fits):
            g = gpu(c.gpu)  # the name must exist even when the fit is the question
            if c.asked:
                continue
            if not fits_memory(c.gpu, c.gpus, c.bytes_total, c.usable):
                cap = c.gpus * g.hbm_bytes * c.usable
                problems.append(f"{c.what}: {_gb(c.bytes_total)} on {c.gpus} x {c.gpu} "
                                f"({_gb(cap)} usable)")
        elif isinstance(c, WithinContext):
            if not within_context(c.model, c.tokens):
                limit = model(c.model).max_context
                problems.append(f"{c.what}: {c.tokens:,} tokens, {c.model}'s maximum context is "
                                f"{'unknown to the catalog' if limit is None else f'{limit:,}'}")
        elif isinstance(c, HasFeature):
            if not has_feature(c.model, c.feature):
                problems.append(f"{c.what or c.feature}: {c.model} has no {c.feature}")
        elif isinstance(c, Holds):
            if not c.ok:
                problems.append(c.what)
        else:  # pragma: no cover - a typing slip in an exercise
            raise TypeError(f"not a claim: {c!r}")
    return problems


def declared(module: ModuleType, params: dict[str, Any]) -> list[Claim] | None:
    """The exercise's own claims for a variant, or None when it declares none."""
    fn = getattr(module, "constraints", None)
    if fn is None:
        return None
    return list(fn(dict(params)))


def violations(module: ModuleType, params: dict[str, Any]) -> list[str]:
    """What is impossible about this variant of the exercise whose `exercise.py` is `module`."""
    claims = declared(module, params)
    return [] if claims is None else check(claims)


def slips_show(solution: dict[str, Any], mistakes: Iterable[Any],
               tolerances: dict[str, float], sig: int = 3) -> bool:
    """Every listed slip of these number parts (part id -> the part's relative tolerance) stays
    outside the tolerance, as computed and as typed to `sig` significant figures. In a variant
    where a slip moves the answer by less, a student who made it would be graded right
    (graders.policy holds every exercise to this), so such a variant is not drawn."""
    for m in mistakes:
        tol = tolerances.get(m.part)
        if tol is None or not isinstance(m.answer, int | float):
            continue
        ref = float(getattr(solution[m.part], "value", solution[m.part]))
        for typed in (float(m.answer), round_sig(float(m.answer), sig)):
            if abs(typed - ref) <= tol * abs(ref):
                return False
    return True
