"""Rules across a model entry's figures: which ones its kind (attention, MoE, windows) needs and
which it must not have. Per-figure types come from `schema`; these are what types cannot say."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from exercises.catalog.schema import CatalogError

_MLA_FIGURES = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
_MOE_FIGURES = ("n_routed_experts", "experts_per_token", "moe_ffn")


def check_model(filename: str, name: str, entry: Mapping[str, Any]) -> None:
    """Rules across figures: which ones a model of this kind must have, and which it must not.

    A figure that does not apply is left out (it becomes None), so it cannot feed a formula by
    mistake; a figure that does apply cannot be forgotten.
    """
    def value(figure: str) -> Any:
        cell = entry.get(figure)
        return None if cell is None else cell["value"]

    def need(figures: Sequence[str], why: str) -> None:
        for figure in figures:
            if figure not in entry:
                raise CatalogError(f"{filename}: {name}.{figure}: missing ({why})")

    def forbid(figures: Sequence[str], why: str) -> None:
        for figure in figures:
            if figure in entry:
                raise CatalogError(f"{filename}: {name}.{figure}: not allowed ({why})")

    where = f"{filename}: {name}"
    kind = value("attention") or "gqa"
    if kind not in ("gqa", "mha", "mla"):
        raise CatalogError(f"{where}.attention: expected gqa, mha or mla, got {kind!r}")
    if kind == "mla":
        need(_MLA_FIGURES, "MLA caches a latent")
        # The MLA parameter count has no bias or sink terms: refuse them rather than drop them.
        forbid(("kv_heads", "head_dim", "qk_norm", "o_bias", "attention_sinks"),
               "MLA has no KV heads, and its count has no attention biases or sinks")
        if value("qkv_bias"):
            raise CatalogError(f"{where}.qkv_bias: MLA entries with biases are not modelled")
    else:
        need(("kv_heads", "head_dim"), f"{kind.upper()} attention")
        forbid((*_MLA_FIGURES, "q_lora_rank", "tp_replicates_latent_proj"),
               f"{kind.upper()} attention has no latent")
        kv_heads, q_heads = value("kv_heads"), value("q_heads")
        if kind == "mha" and kv_heads != q_heads:
            raise CatalogError(f"{where}.kv_heads: MHA needs kv_heads == q_heads")
        if kind == "gqa" and (kv_heads >= q_heads or q_heads % kv_heads):
            raise CatalogError(f"{where}.kv_heads: GQA needs fewer KV heads dividing q_heads")

    if any(figure in entry for figure in _MOE_FIGURES):
        need(_MOE_FIGURES, "a mixture-of-experts model")
        if "n_group" in entry or "topk_group" in entry:
            need(("n_group", "topk_group"), "group-limited routing names both")
            groups, keep = value("n_group"), value("topk_group")
            if value("n_routed_experts") % groups or not 1 <= keep <= groups:
                raise CatalogError(f"{where}.topk_group: needs equal groups and 1 <= "
                                   "topk_group <= n_group")
        if value("experts_per_token") > value("n_routed_experts"):
            raise CatalogError(f"{where}.experts_per_token: more than n_routed_experts")
        if "first_dense_layers" in entry:
            need(("ffn",), "its first layers are dense")
            if value("first_dense_layers") >= value("layers"):
                raise CatalogError(f"{where}.first_dense_layers: not fewer than layers")
        else:
            forbid(("ffn",), "every layer is MoE, so there is no dense MLP")
    else:
        need(("ffn",), "a dense model")
        forbid(("n_shared_experts", "first_dense_layers", "expert_bias", "router_bias", "n_group",
                "topk_group"), "a dense model")

    pattern = value("layer_pattern")
    if pattern is not None:
        if set(pattern) - {"L", "G"}:
            raise CatalogError(f"{where}.layer_pattern: only 'L' and 'G' allowed, got {pattern!r}")
        if "L" in pattern:
            need(("sliding_window",), "the layer pattern has local layers")
    if "sliding_window" in entry and (pattern is None or "L" not in pattern):
        raise CatalogError(f"{where}.sliding_window: say which layers use it (layer_pattern)")
