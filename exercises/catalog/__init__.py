"""Hardware and model facts shared by every exercise, each figure with its source.

The facts live in `models.toml`, `gpus.toml`, `links.toml`, `drives.toml` (SSDs) and
`domains.toml` (NVLink domains) next to this file. Each figure is an
inline table `{ value = ..., source = "<key>" }` and the key must name an entry of the file's
`[sources]` table (a config file, a datasheet, a paper). Loading refuses a figure that has no source,
an unknown source key, a missing or unknown field, or a value of the wrong type, so a fact cannot
enter an exercise without a citation.

    from exercises.catalog import gpu, link, model
    m = model("Llama-3.1-70B")
    m.kv_bytes_per_token()        # 327,680 (BF16: 2 bytes per element)
    gpu("H100 SXM").bf16_flops    # 9.894e14 FLOP/s, dense
    link("ConnectX-7").bytes_per_s  # 5e10 B/s per direction

Attention kinds, MoE and sliding windows (see `Model`):

    ds = model("DeepSeek-V3")                 # MLA + MoE; "DeepSeek-R1" is an alias
    ds.kv_bytes_per_token()                   # 70,272: (512 + 64) * 2 B * 61 layers
    ds.kv_bytes_per_token_per_gpu(tp=8)       # 70,272: the latent is on every GPU
    m.kv_bytes_per_token_per_gpu(tp=8)        # 40,960: 1 of 8 KV heads per GPU (tp=16: still 1)
    ds.params, ds.active_params               # 671.03e9, 37.55e9 (convention: Model.active_params)
    oss = model("GPT-OSS-120B")               # GQA + MoE, layers alternate 128-token window / full
    oss.kv_bytes_per_token()                  # 73,728 = 72 KiB, every layer counted as full
    oss.kv_bytes_for_tokens(131_072)          # 4,836,556,800: window layers keep 128 tokens

Only the standard library is used (no Django), so graders, tests and the command line can import it.
"""
from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

CATALOG_DIR = Path(__file__).resolve().parent


class CatalogError(ValueError):
    """A catalog file breaks the rules (a figure without a source, a wrong type, ...)."""


# ----------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer: GQA/MHA or MLA attention, a dense or MoE gated MLP.

    Counts are derived from the config fields rather than stored, so the marketing name ("70B")
    never leaks into arithmetic. A field that does not apply to a model is None (an MLA model has no
    `kv_heads`/`head_dim`; a model whose every layer is MoE has no dense `ffn`), so using it by
    mistake fails loudly instead of producing a plausible wrong number.

    Layer layout. Layers `0 .. first_dense_layers-1` use the dense MLP (`ffn`); the rest use the MoE
    block when `n_routed_experts` is set. `layer_pattern` is a string of "L" (sliding-window, keeps
    the last `sliding_window` tokens) and "G" (global, keeps every token) repeated from layer 0:
    GPT-OSS and Gemma 2 are "LG", Gemma 3 is "LLLLLG". No pattern means every layer is global.
    """

    name: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int | None  # None for MLA: the cache holds one latent per token, not heads
    head_dim: int | None  # None for MLA (q/k are nope+rope wide, v is v_head_dim)
    ffn: int | None  # dense MLP intermediate size; None when every layer is MoE
    vocab: int
    tied_embeddings: bool
    qkv_bias: bool
    # --- attention kind; "gqa" covers every model stored before MLA/MoE were added ---------------
    attention: str = "gqa"  # "gqa" | "mha" | "mla"
    # --- MLA (DeepSeek-V2/V3) ------------------------------------------------------------------
    kv_lora_rank: int | None = None  # width of the cached latent c_KV
    qk_rope_head_dim: int | None = None  # decoupled RoPE key, cached once per token (shared by heads)
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    q_lora_rank: int | None = None  # None: queries projected directly from the hidden state
    # Engines keep the down-projections q_a and kv_a (hidden -> q_lora_rank, hidden -> kv_lora_rank
    # + rope) whole on every tensor-parallel rank instead of splitting them (vLLM, SGLang).
    tp_replicates_latent_proj: bool | None = None
    # --- MoE ----------------------------------------------------------------------------------
    n_routed_experts: int | None = None
    n_shared_experts: int | None = None  # None: no shared expert (Mixtral, Qwen3-MoE, GPT-OSS)
    experts_per_token: int | None = None  # routed experts each token uses (top-k)
    moe_ffn: int | None = None  # intermediate size of ONE expert (shared experts use it too)
    first_dense_layers: int | None = None  # leading layers with a dense MLP (DeepSeek-V3: 3)
    # Group-limited routing (DeepSeek-V3: n_group 8, topk_group 4): the routed experts form n_group
    # equal groups and a token picks its experts inside its topk_group best groups. A limit on
    # groups, which is a limit on nodes only when each group sits on one node.
    n_group: int | None = None
    topk_group: int | None = None
    # --- sliding window and context ------------------------------------------------------------
    sliding_window: int | None = None  # tokens a local ("L") layer keeps
    layer_pattern: str | None = None  # "L"/"G" cycle from layer 0; None = all global
    max_context: int | None = None  # config max_position_embeddings
    # RoPE base (config rope_theta): pair i of a head turns by position * rope_theta^(-2i/head_dim).
    rope_theta: float | None = None
    # --- small tensors that only matter for exact parameter counts ------------------------------
    # None (absent from the file) means the model has no such tensor; a model that has one says
    # `true` with a source. None rather than False so an unstated flag is not a sourceless figure.
    o_bias: bool | None = None  # output-projection bias (GPT-OSS)
    attention_sinks: bool | None = None  # one learned sink logit per query head per layer (GPT-OSS)
    qk_norm: bool | None = None  # RMSNorm over each Q and K head, head_dim wide (Qwen3, Gemma 3)
    expert_bias: bool | None = None  # biases on every expert projection (GPT-OSS)
    router_bias: bool | None = None  # a bias per routed expert (GPT-OSS; DeepSeek's correction bias)
    post_norms: bool | None = None  # Gemma 2/3: RMSNorm after attention and after the MLP too
    # Multi-token-prediction modules shipped with the checkpoint (DeepSeek-V3: 1, stored as layer
    # 61). Not part of `params`/`active_params`: the main model runs without them.
    mtp_layers: int | None = None
    # field name -> citation text; excluded from equality and hashing (a dict is not hashable).
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    # ---------------------------------------------------------------------------------------------
    # Shape helpers

    @property
    def is_mla(self) -> bool:
        return self.attention == "mla"

    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts is not None

    def _gqa_dims(self) -> tuple[int, int]:
        # MLA has no per-head K/V: any GQA formula applied to it would be a wrong number.
        if self.kv_heads is None or self.head_dim is None:
            raise ValueError(f"{self.name} uses {self.attention} attention: it has no KV heads")
        return self.kv_heads, self.head_dim

    @property
    def q_dim(self) -> int:
        """Width of the query projection output (q_heads * head_dim; MLA: q_heads * (nope+rope))."""
        if self.is_mla:
            return self.q_heads * self._mla_qk_head_dim
        return self.q_heads * self._gqa_dims()[1]

    @property
    def kv_dim(self) -> int:
        """Width of the K (or the V) projection output (kv_heads * head_dim). Not defined for MLA."""
        kv_heads, head_dim = self._gqa_dims()
        return kv_heads * head_dim

    @property
    def _mla_qk_head_dim(self) -> int:
        assert self.qk_nope_head_dim is not None and self.qk_rope_head_dim is not None
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def dense_layers(self) -> int:
        """Layers with the dense MLP: all of them for a dense model, `first_dense_layers` for MoE."""
        if not self.is_moe:
            return self.layers
        return self.first_dense_layers or 0

    @property
    def moe_layers(self) -> int:
        """Layers with the MoE block (DeepSeek-V3: 61 - 3 = 58)."""
        return self.layers - self.dense_layers

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """Per layer, "L" (sliding window) or "G" (global), from layer 0."""
        pattern = self.layer_pattern or "G"
        return tuple(pattern[i % len(pattern)] for i in range(self.layers))

    @property
    def local_layers(self) -> int:
        """Sliding-window layers (GPT-OSS-120B: 18 of 36; Gemma-3-27B: 52 of 62)."""
        return self.layer_kinds.count("L")

    @property
    def global_layers(self) -> int:
        """Layers that keep every token."""
        return self.layers - self.local_layers

    # ---------------------------------------------------------------------------------------------
    # Parameter counts

    @property
    def attn_params_per_layer(self) -> int:
        """Attention weights of one layer (projections, their biases, sinks); norm vectors excluded.

        GQA: Q, K, V and output projections (plus biases where the model has them). MLA (DeepSeek-V3,
        187,105,280): q_a (hidden -> q_lora_rank), q_b (-> q_heads * (nope+rope)), kv_a
        (hidden -> kv_lora_rank + rope), kv_b (kv_lora_rank -> q_heads * (nope + v)) and the output
        projection (q_heads * v -> hidden). The q_a / kv_a RMSNorms are counted in `norm_params`.
        """
        if self.is_mla:
            assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
            assert self.qk_nope_head_dim is not None and self.v_head_dim is not None
            qk = self._mla_qk_head_dim
            if self.q_lora_rank is None:
                q = self.hidden * self.q_heads * qk
            else:
                q = self.hidden * self.q_lora_rank + self.q_lora_rank * self.q_heads * qk
            kv_a = self.hidden * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv_b = self.kv_lora_rank * self.q_heads * (self.qk_nope_head_dim + self.v_head_dim)
            o = self.q_heads * self.v_head_dim * self.hidden
            return q + kv_a + kv_b + o
        weights = self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim + self.q_dim * self.hidden
        return weights + self._attn_vectors_per_layer

    @property
    def latent_proj_params_per_layer(self) -> int:
        """MLA's down-projections of one layer: q_a (hidden -> q_lora_rank, absent without a query
        latent) and kv_a (hidden -> kv_lora_rank + rope). DeepSeek-V3: 15,138,816."""
        if not self.is_mla:
            raise ValueError(f"{self.name} uses {self.attention} attention: it has no latent")
        assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
        return self.hidden * ((self.q_lora_rank or 0) + self.kv_lora_rank + self.qk_rope_head_dim)

    def attn_params_per_layer_per_gpu(self, tp: int) -> float:
        """Attention weights of one layer held by ONE GPU at tensor parallelism `tp`.

        Everything splits by head (1/tp each) except, where `tp_replicates_latent_proj`, MLA's
        down-projections, which every rank holds whole. DeepSeek-V3 at TP8: 15.14 M + 171.97 M / 8
        = 36.63 M, not 187.11 M / 8 = 23.39 M.
        """
        if tp < 1:
            raise ValueError(f"tp must be >= 1, got {tp}")
        whole = self.latent_proj_params_per_layer if self.tp_replicates_latent_proj else 0
        return whole + (self.attn_params_per_layer - whole) / tp

    @property
    def _attn_vectors_per_layer(self) -> int:
        # Bias and sink vectors inside attention (none for MLA in the models stored).
        if self.is_mla:
            return 0
        bias = (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0
        bias += self.hidden if self.o_bias else 0
        bias += self.q_heads if self.attention_sinks else 0
        return bias

    @property
    def mlp_params_per_layer(self) -> int:
        """Gate, up and down projections of the DENSE gated MLP (3 * hidden * ffn).

        Raises for a model whose every layer is MoE (no dense MLP exists).
        """
        if self.ffn is None:
            raise ValueError(f"{self.name} has no dense MLP (every layer is MoE)")
        return 3 * self.hidden * self.ffn

    @property
    def expert_params(self) -> int:
        """One expert: gate, up, down (3 * hidden * moe_ffn; DeepSeek-V3 44,040,192), plus biases."""
        if self.moe_ffn is None:
            raise ValueError(f"{self.name} is not a mixture-of-experts model")
        bias = (2 * self.moe_ffn + self.hidden) if self.expert_bias else 0
        return 3 * self.hidden * self.moe_ffn + bias

    @property
    def router_params_per_layer(self) -> int:
        """The router (gate) of one MoE layer: n_routed_experts x hidden, plus its bias."""
        if self.n_routed_experts is None:
            raise ValueError(f"{self.name} is not a mixture-of-experts model")
        return self.n_routed_experts * self.hidden + (self.n_routed_experts if self.router_bias else 0)

    @property
    def moe_params_per_layer(self) -> int:
        """One MoE block: every routed and shared expert plus the router."""
        assert self.n_routed_experts is not None
        experts = self.n_routed_experts + (self.n_shared_experts or 0)
        return experts * self.expert_params + self.router_params_per_layer

    @property
    def norm_params_per_layer(self) -> int:
        """RMSNorm weight vectors of one layer (pre/post norms, QK-norms, MLA's q_a/kv_a norms)."""
        # Two pre-norms (before attention, before the MLP); Gemma 2/3 add two post-norms.
        n = (4 if self.post_norms else 2) * self.hidden
        if self.qk_norm:
            n += 2 * self._gqa_dims()[1]
        if self.is_mla:
            n += (self.q_lora_rank or 0) + (self.kv_lora_rank or 0)
        return n

    @property
    def norm_params(self) -> int:
        """Every RMSNorm weight vector, the final norm included (DeepSeek-V3: 1,006,592)."""
        return self.layers * self.norm_params_per_layer + self.hidden

    @property
    def bias_params(self) -> int:
        """Every bias and sink vector (QKV/O biases, sinks, expert and router biases)."""
        n = self.layers * self._attn_vectors_per_layer
        if self.is_moe:
            assert self.n_routed_experts is not None and self.moe_ffn is not None
            experts = self.n_routed_experts + (self.n_shared_experts or 0)
            if self.expert_bias:
                n += self.moe_layers * experts * (2 * self.moe_ffn + self.hidden)
            if self.router_bias:
                n += self.moe_layers * self.n_routed_experts
        return n

    @property
    def params_per_layer(self) -> int:
        """One decoder layer of a DENSE model: attention, MLP and its norm vectors.

        Raises for an MoE model, whose layers differ (use `params` / `active_params`).
        """
        if self.is_moe:
            raise ValueError(f"{self.name} is MoE: its layers differ, use params/active_params")
        return self.attn_params_per_layer + self.mlp_params_per_layer + self.norm_params_per_layer

    @property
    def embedding_params(self) -> int:
        """Input embedding plus the LM head (one table when the two are tied)."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def input_embedding_params(self) -> int:
        """The input embedding table alone (a lookup, not a matmul: some vendors leave it out of
        "active parameters", e.g. OpenAI's 5.1 B for GPT-OSS-120B)."""
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        """Every weight of the main model, counted from the config: what the checkpoint holds,
        norm vectors and biases included, speculative/MTP modules and vision towers excluded.

        Llama-3.1-8B: 8,030,261,248 (Hugging Face's count). DeepSeek-V3: 671,026,419,200; the
        research notes' 671,025,397,760 leaves out norm vectors and the router correction bias,
        i.e. `params - norm_params - bias_params` (see `matrix_params`).
        """
        total = self.layers * (self.attn_params_per_layer + self.norm_params_per_layer)
        if self.dense_layers:
            total += self.dense_layers * self.mlp_params_per_layer
        if self.moe_layers:
            total += self.moe_layers * self.moe_params_per_layer
        return total + self.embedding_params + self.hidden

    @property
    def active_params(self) -> int:
        """Weights one token uses: all attention, dense MLPs, routers, norms, BOTH embedding tables,
        and per MoE layer only `experts_per_token` routed experts plus the shared ones.

        Counting convention (research notes facts-q01-q25 §0.2): the input embedding and the LM
        head are both counted, so DeepSeek-V3 gives 37.55 B (matrices only: 37,551,276,032).
        DeepSeek's README says 36.6-36.7 B and OpenAI's card 5.13 B for GPT-OSS-120B: those leave
        out one embedding-sized table (`active_params - input_embedding_params`). A dense model's
        active count equals `params`.
        """
        if not self.is_moe:
            return self.params
        assert self.experts_per_token is not None and self.n_routed_experts is not None
        inactive = self.n_routed_experts - self.experts_per_token
        return self.params - self.moe_layers * inactive * self.expert_params

    @property
    def matrix_params(self) -> int:
        """`params` without norm vectors and bias/sink vectors: the notes' convention for
        DeepSeek-V3 (671,025,397,760). For Llama-3.1-70B this is the notes' 70,552,387,584."""
        return self.params - self.norm_params - self.bias_params

    def weight_bytes(self, dtype_bytes: float = 2) -> float:
        """Bytes of weights at `dtype_bytes` per parameter (2 = BF16, 1 = FP8)."""
        return self.params * dtype_bytes

    # ---------------------------------------------------------------------------------------------
    # KV cache

    def kv_bytes_per_token_per_layer(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token adds in ONE layer.

        GQA/MHA: K and V for every KV head, 2 * kv_heads * head_dim * dtype_bytes (GPT-OSS: 2,048).
        MLA: one latent plus the shared RoPE key, (kv_lora_rank + qk_rope_head_dim) * dtype_bytes,
        no factor 2 and no head count (DeepSeek-V3: 1,152 B in BF16).
        """
        if self.is_mla:
            assert self.kv_lora_rank is not None and self.qk_rope_head_dim is not None
            return (self.kv_lora_rank + self.qk_rope_head_dim) * dtype_bytes
        kv_heads, head_dim = self._gqa_dims()
        return 2 * kv_heads * head_dim * dtype_bytes

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token adds across ALL layers, as if every layer kept every token.

        GQA: 2 * layers * kv_heads * head_dim * dtype_bytes; 327,680 B for Llama-3.1-70B in BF16.
        MLA: (kv_lora_rank + qk_rope_head_dim) * layers * dtype_bytes; 70,272 B for DeepSeek-V3.
        Sliding-window layers are counted as full here (GPT-OSS-120B: 73,728 B = 72 KiB); use
        `kv_bytes_for_tokens` for what a windowed cache actually holds.
        """
        return self.layers * self.kv_bytes_per_token_per_layer(dtype_bytes)

    def kv_heads_per_gpu(self, tp: int) -> int:
        """KV heads each GPU stores at tensor parallelism `tp`.

        kv_heads // tp while tp <= kv_heads; past that each KV head is REPLICATED on tp / kv_heads
        GPUs, so every GPU still holds one head (vLLM: max(1, num_kv_heads // tp)). MLA has no
        heads to split: see `kv_bytes_per_token_per_gpu`.
        """
        kv_heads, _ = self._gqa_dims()
        if tp < 1:
            raise ValueError(f"tp must be >= 1, got {tp}")
        # vLLM refuses layouts where neither divides the other; so do we, rather than round.
        if kv_heads % tp and tp % kv_heads:
            raise ValueError(f"tp={tp} neither divides nor is a multiple of {kv_heads} KV heads")
        return max(1, kv_heads // tp)

    def kv_bytes_per_token_per_layer_per_gpu(self, tp: int, dtype_bytes: int = 2) -> int:
        """One layer's KV bytes per token on ONE GPU at tensor parallelism `tp`."""
        if self.is_mla:
            # Every TP rank runs some of the query heads, and every head needs the whole latent:
            # the full latent sits on every GPU (the "silent tp-fold copy").
            return self.kv_bytes_per_token_per_layer(dtype_bytes)
        _, head_dim = self._gqa_dims()
        return 2 * self.kv_heads_per_gpu(tp) * head_dim * dtype_bytes

    def kv_bytes_per_token_per_gpu(self, tp: int, dtype_bytes: int = 2) -> int:
        """KV bytes per token on ONE GPU at tensor parallelism `tp`, all layers, none windowed.

        GQA: 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes (Llama-3.1-70B at TP8 and
        at TP16: 40,960 B). MLA: the full latent, unchanged by tp (DeepSeek-V3: 70,272 B).
        """
        return self.layers * self.kv_bytes_per_token_per_layer_per_gpu(tp, dtype_bytes)

    def kv_bytes_for_tokens(self, n_tokens: int, dtype_bytes: int = 2, tp: int = 1) -> int:
        """KV bytes one sequence of `n_tokens` holds, on one GPU at tensor parallelism `tp`
        (tp=1: the whole model), with sliding-window layers keeping only min(n, window) tokens.

        This is the ideal figure: an allocator that frees blocks as they leave the window (vLLM's
        hybrid KV cache manager, roughly; block granularity adds up to one block per layer). With the
        hybrid manager off, vLLM stores every token in every layer: use `n * kv_bytes_per_token`.
        GPT-OSS-120B at 131,072 tokens: 4,836,556,800 B vs 9,663,676,416 B all-full.
        """
        if n_tokens < 0:
            raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
        per_layer = self.kv_bytes_per_token_per_layer_per_gpu(tp, dtype_bytes)
        if self.sliding_window is None:
            return self.layers * n_tokens * per_layer
        local_tokens = min(n_tokens, self.sliding_window)
        return per_layer * (self.global_layers * n_tokens + self.local_layers * local_tokens)

    def kv_bytes_per_token_windowed(self, context: int, dtype_bytes: int = 2, tp: int = 1) -> float:
        """Average KV bytes per token for a sequence of `context` tokens with sliding windows applied
        (`kv_bytes_for_tokens(context) / context`); equals `kv_bytes_per_token` without windows."""
        if context <= 0:
            raise ValueError(f"context must be positive, got {context}")
        return self.kv_bytes_for_tokens(context, dtype_bytes, tp) / context

    def source(self, figure: str) -> str:
        """The citation behind one figure (e.g. "layers").

        A core figure the model's kind rules out (kv_heads/head_dim of an MLA model, ffn of a
        model with no dense layer) answers with why it is absent, citing the figure that rules
        it out, rather than a KeyError: every model can be asked about every core figure.
        """
        if figure in self.sources:
            return self.sources[figure]
        if figure in ("kv_heads", "head_dim") and self.is_mla:
            return (f"not applicable: {self.name} uses MLA, which caches one latent per token "
                    f"(kv_lora_rank + qk_rope_head_dim) and has no KV heads; "
                    f"attention kind from: {self.sources['attention']}")
        if figure == "ffn" and self.is_moe and self.dense_layers == 0:
            return (f"not applicable: every layer of {self.name} is MoE (expert size moe_ffn), "
                    f"so it has no dense MLP; from: {self.sources['n_routed_experts']}")
        raise KeyError(figure)


@dataclass(frozen=True)
class GPU:
    """One accelerator. FLOP rates are dense (no 2:4 sparsity); capacity is the marketed size."""

    name: str
    bf16_dense_tflops: float
    fp8_dense_tflops: float | None  # None where the part has no FP8 tensor cores (A100)
    hbm_gb: float
    hbm_tbps: float
    sms: int
    l2_mb: float
    nvlink_gbps: float  # per GPU, both directions summed
    # Total memory nvidia-smi reports, in MiB (H100 SXM 81,559; H200 143,771): more than the
    # marketed GB. None where the catalog has no verified reading.
    hbm_reported_mib: float | None = None
    # Total memory the CUDA driver gives a process (cudaMemGetInfo), in MiB (H100 SXM 81,090): what
    # an engine sizes its pools from and prints. None where the catalog has no verified reading.
    hbm_driver_total_mib: float | None = None
    # Non-tensor FP32 rate (CUDA-core FMAs, 2 FLOPs each), TFLOP/s: what work done outside the
    # tensor cores runs at (H100 SXM 66.9). None where the catalog has no sourced figure.
    fp32_tflops: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def fp32_flops(self) -> float | None:
        """Non-tensor (CUDA-core) FP32 rate in FLOP/s, or None."""
        return None if self.fp32_tflops is None else self.fp32_tflops * 1e12

    @property
    def bf16_flops(self) -> float:
        """Dense BF16 tensor-core rate in FLOP/s."""
        return self.bf16_dense_tflops * 1e12

    @property
    def fp8_flops(self) -> float | None:
        """Dense FP8 tensor-core rate in FLOP/s, or None."""
        return None if self.fp8_dense_tflops is None else self.fp8_dense_tflops * 1e12

    @property
    def hbm_bytes(self) -> float:
        """Capacity under the shared convention: the marketed GB read as 10^9 bytes."""
        return self.hbm_gb * 1e9

    @property
    def hbm_reported_bytes(self) -> float | None:
        """What the driver reports as total memory, in bytes (MiB * 2^20), or None.

        The alternative to `hbm_bytes` for exercises that size pools from real memory: an H200
        reports 143,771 MiB = 150.75e9 B = 140.4 GiB, against the marketed 141 GB.
        """
        return None if self.hbm_reported_mib is None else self.hbm_reported_mib * 2**20

    @property
    def hbm_driver_total_bytes(self) -> float:
        """Total memory as the CUDA driver reports it to a process, in bytes (MiB * 2^20).

        What vLLM multiplies by gpu_memory_utilization and logs as total_gpu_memory: an H100 80GB
        gives 81,090 MiB = 85.03e9 B = 79.19 GiB, below nvidia-smi's 81,559 MiB and above the
        marketed 80e9 B. Raises for a GPU without a verified reading rather than guessing one.
        """
        if self.hbm_driver_total_mib is None:
            raise ValueError(f"{self.name}: the catalog has no driver-reported total memory "
                             "(hbm_driver_total_mib); add a sourced reading before using it")
        return self.hbm_driver_total_mib * 2**20

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_tbps * 1e12

    @property
    def ridge_bf16(self) -> float:
        """Arithmetic intensity (FLOP/B) where dense BF16 compute and HBM bandwidth balance."""
        return self.bf16_flops / self.hbm_bytes_per_s

    def source(self, figure: str) -> str:
        return self.sources[figure]


@dataclass(frozen=True)
class Link:
    """A NIC or host link. Rates are per direction."""

    name: str
    kind: str  # "nic" or "host"
    gbit_per_s: float  # marketed line rate, 10^9 bit/s, one direction
    effective_gb_per_s: float | None  # an achievable rate where the catalog states one, else None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def gb_per_s(self) -> float:
        """Line rate in GB/s (10^9 B/s) per direction: bits divided by 8."""
        return self.gbit_per_s / 8

    @property
    def bytes_per_s(self) -> float:
        return self.gb_per_s * 1e9

    def source(self, figure: str) -> str:
        return self.sources[figure]


@dataclass(frozen=True)
class Drive:
    """A data-centre SSD: the figures a KV tier on flash is sized and worn out by."""

    name: str
    capacity_tb: float  # decimal TB (10^12 B), as marketed
    dwpd: float  # rated drive writes per day over the warranty
    warranty_years: float
    seq_read_gb_per_s: float  # rated sequential read, 10^9 B/s
    seq_write_gb_per_s: float  # rated sequential write, 10^9 B/s
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def capacity_bytes(self) -> float:
        return self.capacity_tb * 1e12

    @property
    def tbw_bytes(self) -> float:
        """Rated endurance: capacity x DWPD x 365 x warranty years, in bytes."""
        return self.capacity_bytes * self.dwpd * 365 * self.warranty_years

    def source(self, figure: str) -> str:
        return self.sources[figure]


@dataclass(frozen=True)
class Domain:
    """A scale-up (NVLink) domain: the GPUs that talk over NVLink, and the NIC each one has for
    everything beyond it."""

    name: str
    gpu: str  # a gpus.toml name
    gpus: int  # GPUs in one NVLink domain
    nic: str  # a links.toml name: each GPU's scale-out NIC
    nics_per_gpu: int
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def gpu_record(self) -> GPU:
        return gpu(self.gpu)

    @property
    def nic_record(self) -> Link:
        return link(self.nic)

    @property
    def nvlink_bytes_per_s_one_way(self) -> float:
        """Per GPU, one direction: half the catalog's both-directions NVLink figure."""
        return self.gpu_record.nvlink_gbps / 2 * 1e9

    @property
    def nic_bytes_per_s(self) -> float:
        """Per GPU, one direction, all of its NICs together."""
        return self.nics_per_gpu * self.nic_record.bytes_per_s

    @property
    def hbm_bytes(self) -> float:
        """The domain's HBM under the marketed-GB convention."""
        return self.gpus * self.gpu_record.hbm_bytes

    def source(self, figure: str) -> str:
        return self.sources[figure]


# ----------------------------------------------------------------------------------------------
# Schema: the figures each record takes, their type, and whether they may be absent.

_REQUIRED = True
_OPTIONAL = False

_SCHEMAS: dict[str, tuple[type, str, dict[str, tuple[type, bool]]]] = {
    "models.toml": (
        Model,
        "models",
        {
            "layers": (int, _REQUIRED),
            "hidden": (int, _REQUIRED),
            "q_heads": (int, _REQUIRED),
            # kv_heads, head_dim and ffn are required unless the model's kind rules them out
            # (MLA; every layer MoE): `_check_model` enforces that after parsing.
            "kv_heads": (int, _OPTIONAL),
            "head_dim": (int, _OPTIONAL),
            "ffn": (int, _OPTIONAL),
            "vocab": (int, _REQUIRED),
            "tied_embeddings": (bool, _REQUIRED),
            "qkv_bias": (bool, _REQUIRED),
            "attention": (str, _OPTIONAL),
            "kv_lora_rank": (int, _OPTIONAL),
            "qk_rope_head_dim": (int, _OPTIONAL),
            "qk_nope_head_dim": (int, _OPTIONAL),
            "v_head_dim": (int, _OPTIONAL),
            "q_lora_rank": (int, _OPTIONAL),
            "n_routed_experts": (int, _OPTIONAL),
            "n_shared_experts": (int, _OPTIONAL),
            "experts_per_token": (int, _OPTIONAL),
            "moe_ffn": (int, _OPTIONAL),
            "first_dense_layers": (int, _OPTIONAL),
            "n_group": (int, _OPTIONAL),
            "topk_group": (int, _OPTIONAL),
            "tp_replicates_latent_proj": (bool, _OPTIONAL),
            "sliding_window": (int, _OPTIONAL),
            "layer_pattern": (str, _OPTIONAL),
            "max_context": (int, _OPTIONAL),
            "rope_theta": (float, _OPTIONAL),
            "o_bias": (bool, _OPTIONAL),
            "attention_sinks": (bool, _OPTIONAL),
            "qk_norm": (bool, _OPTIONAL),
            "expert_bias": (bool, _OPTIONAL),
            "router_bias": (bool, _OPTIONAL),
            "post_norms": (bool, _OPTIONAL),
            "mtp_layers": (int, _OPTIONAL),
        },
    ),
    "gpus.toml": (
        GPU,
        "gpus",
        {
            "bf16_dense_tflops": (float, _REQUIRED),
            "fp8_dense_tflops": (float, _OPTIONAL),
            "hbm_gb": (float, _REQUIRED),
            "hbm_tbps": (float, _REQUIRED),
            "sms": (int, _REQUIRED),
            "l2_mb": (float, _REQUIRED),
            "nvlink_gbps": (float, _REQUIRED),
            "hbm_reported_mib": (float, _OPTIONAL),
            "hbm_driver_total_mib": (float, _OPTIONAL),
            "fp32_tflops": (float, _OPTIONAL),
        },
    ),
    "links.toml": (
        Link,
        "links",
        {
            "kind": (str, _REQUIRED),
            "gbit_per_s": (float, _REQUIRED),
            "effective_gb_per_s": (float, _OPTIONAL),
        },
    ),
    "drives.toml": (
        Drive,
        "drives",
        {
            "capacity_tb": (float, _REQUIRED),
            "dwpd": (float, _REQUIRED),
            "warranty_years": (float, _REQUIRED),
            "seq_read_gb_per_s": (float, _REQUIRED),
            "seq_write_gb_per_s": (float, _REQUIRED),
        },
    ),
    "domains.toml": (
        Domain,
        "domains",
        {
            "gpu": (str, _REQUIRED),
            "gpus": (int, _REQUIRED),
            "nic": (str, _REQUIRED),
            "nics_per_gpu": (int, _REQUIRED),
        },
    ),
}


def _coerce(value: Any, kind: type, where: str) -> Any:
    # bool is a subclass of int in Python, so test it first: `layers = true` must not pass.
    if kind is bool:
        if not isinstance(value, bool):
            raise CatalogError(f"{where}: expected true/false, got {value!r}")
        return value
    if isinstance(value, bool):
        expected = "an integer" if kind is int else f"a {kind.__name__}"
        raise CatalogError(f"{where}: expected {expected}, got {value!r}")
    if kind is int:
        if not isinstance(value, int):
            raise CatalogError(f"{where}: expected an integer, got {value!r}")
        if value <= 0:
            raise CatalogError(f"{where}: expected a positive integer, got {value!r}")
        return value
    if kind is float:
        if not isinstance(value, int | float):
            raise CatalogError(f"{where}: expected a number, got {value!r}")
        if not value > 0:
            raise CatalogError(f"{where}: expected a positive number, got {value!r}")
        return float(value)
    if kind is str:
        if not isinstance(value, str) or not value.strip():
            raise CatalogError(f"{where}: expected a non-empty string, got {value!r}")
        return value
    raise CatalogError(f"{where}: unsupported type {kind!r}")  # a schema bug, not a data bug


def parse(text: str, filename: str) -> dict[str, Any]:
    """Parse one catalog file's text into records; raise CatalogError on any rule broken.

    `filename` picks the schema ("models.toml", "gpus.toml" or "links.toml"). Exposed so tests can
    feed it a broken file without touching the real ones.
    """
    try:
        record_type, section, schema = _SCHEMAS[filename]
    except KeyError:
        raise CatalogError(f"no catalog schema for {filename!r}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{filename}: {exc}") from exc

    citations = data.get("sources", {})
    if not isinstance(citations, dict):
        raise CatalogError(f"{filename}: [sources] must be a table of key = \"citation\"")
    for key, text_ in citations.items():
        if not isinstance(text_, str) or not text_.strip():
            raise CatalogError(f"{filename}: source {key!r} has no citation text")

    unknown_sections = set(data) - {"sources", section}
    if unknown_sections:
        raise CatalogError(f"{filename}: unknown top-level tables {sorted(unknown_sections)}")

    entries = data.get(section, {})
    if not entries:
        raise CatalogError(f"{filename}: no [{section}.\"...\"] entries")

    defaults = {f.name for f in fields(record_type) if f.default is not MISSING}
    records: dict[str, Any] = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            raise CatalogError(f"{filename}: {section}.{name} must be a table")
        unknown = set(entry) - set(schema)
        if unknown:
            raise CatalogError(f"{filename}: {name}: unknown figures {sorted(unknown)}")
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for figure, (kind, required) in schema.items():
            where = f"{filename}: {name}.{figure}"
            if figure not in entry:
                if required:
                    raise CatalogError(f"{where}: missing")
                # An absent optional figure takes the record's default where it has one
                # (Model.attention = "gqa"), else None.
                if figure not in defaults:
                    values[figure] = None
                continue
            cell = entry[figure]
            # A bare value (`layers = 80`) has nowhere to put a source, so it is refused outright.
            if not isinstance(cell, dict) or "value" not in cell:
                raise CatalogError(f"{where}: write it as {{ value = ..., source = \"<key>\" }}")
            if set(cell) - {"value", "source"}:
                raise CatalogError(f"{where}: only 'value' and 'source' are allowed")
            key = cell.get("source")
            if not isinstance(key, str) or not key.strip():
                raise CatalogError(f"{where}: has no source")
            if key not in citations:
                raise CatalogError(f"{where}: source {key!r} is not in [sources]")
            values[figure] = _coerce(cell["value"], kind, where)
            sources[figure] = citations[key]
        if record_type is Model:
            _check_model(filename, name, entry)
        records[name] = record_type(name=name, sources=MappingProxyType(sources), **values)
    return records


_MLA_FIGURES = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
_MOE_FIGURES = ("n_routed_experts", "experts_per_token", "moe_ffn")


def _check_model(filename: str, name: str, entry: Mapping[str, Any]) -> None:
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


@cache
def _load(filename: str) -> dict[str, Any]:
    # Cached: the files are read once per process; callers get fresh dict copies below.
    return parse((CATALOG_DIR / filename).read_text(encoding="utf-8"), filename)


# Other names for a stored entry. DeepSeek-R1 was trained from the DeepSeek-V3 base and ships the
# same config (architecture, dims, experts), so every figure of the V3 entry holds for it.
MODEL_ALIASES: Mapping[str, str] = MappingProxyType({"DeepSeek-R1": "DeepSeek-V3"})


def _get(filename: str, name: str) -> Any:
    table = _load(filename)
    try:
        return table[name]
    except KeyError:
        raise KeyError(f"{name!r} is not in {filename}; known: {', '.join(table)}") from None


def model(name: str) -> Model:
    """A model by its catalog name, e.g. "Llama-3.1-70B", or an alias ("DeepSeek-R1").

    An alias returns the target's record under the alias's name (same figures, same sources).
    """
    if name in MODEL_ALIASES:
        return replace(_get("models.toml", MODEL_ALIASES[name]), name=name)
    return _get("models.toml", name)


def gpu(name: str) -> GPU:
    """A GPU by its catalog name, e.g. "H100 SXM"."""
    return _get("gpus.toml", name)


def link(name: str) -> Link:
    """A NIC or host link by its catalog name, e.g. "ConnectX-7"."""
    return _get("links.toml", name)


def models() -> dict[str, Model]:
    """Every model, by name, in file order."""
    return dict(_load("models.toml"))


def gpus() -> dict[str, GPU]:
    """Every GPU, by name, in file order."""
    return dict(_load("gpus.toml"))


def links() -> dict[str, Link]:
    """Every link, by name, in file order."""
    return dict(_load("links.toml"))


def drive(name: str) -> Drive:
    """An SSD by its catalog name, e.g. "Micron 7450 PRO 3.84TB"."""
    return _get("drives.toml", name)


def drives() -> dict[str, Drive]:
    return dict(_load("drives.toml"))


def domain(name: str) -> Domain:
    """An NVLink domain by its catalog name, e.g. "GB200 NVL72"; its GPU and NIC must exist."""
    d: Domain = _get("domains.toml", name)
    gpu(d.gpu), link(d.nic)  # noqa: B018 - fail here, naming the missing entry
    return d


def domains() -> dict[str, Domain]:
    return {name: domain(name) for name in _load("domains.toml")}


__all__ = [
    "CATALOG_DIR",
    "GPU",
    "Domain",
    "Drive",
    "domain",
    "domains",
    "drive",
    "drives",
    "MODEL_ALIASES",
    "CatalogError",
    "Link",
    "Model",
    "gpu",
    "gpus",
    "link",
    "links",
    "model",
    "models",
    "parse",
]
