"""The model record: a transformer's config figures and every count derived from them.

Loaded from `models.toml` by `exercises.catalog.loader`; the fields below are also the file's
schema (`exercises.catalog.schema` reads them), so a figure added here is validated on load with no
other edit.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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
