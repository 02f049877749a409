"""Hardware and model facts shared by every exercise, each figure with its source.

The facts live in `models.toml`, `gpus.toml` and `links.toml` next to this file. Each figure is an
inline table `{ value = ..., source = "<key>" }` and the key must name an entry of the file's
`[sources]` table (a config file, a datasheet, a paper). Loading refuses a figure that has no source,
an unknown source key, a missing or unknown field, or a value of the wrong type, so a fact cannot
enter an exercise without a citation.

    from exercises.catalog import gpu, link, model
    m = model("Llama-3.1-70B")
    m.kv_bytes_per_token()        # 327,680 (BF16: 2 bytes per element)
    gpu("H100 SXM").bf16_flops    # 9.894e14 FLOP/s, dense
    link("ConnectX-7").bytes_per_s  # 5e10 B/s per direction

Only the standard library is used (no Django), so graders, tests and the command line can import it.
"""
from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    """A dense decoder-only transformer with grouped-query attention and a gated (SwiGLU) MLP.

    Counts are derived from the config fields rather than stored, so the marketing name ("70B")
    never leaks into arithmetic.
    """

    name: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied_embeddings: bool
    qkv_bias: bool
    # field name -> citation text; excluded from equality and hashing (a dict is not hashable).
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def q_dim(self) -> int:
        """Width of the query projection output (q_heads * head_dim)."""
        return self.q_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the K (or the V) projection output (kv_heads * head_dim)."""
        return self.kv_heads * self.head_dim

    @property
    def attn_params_per_layer(self) -> int:
        """Q, K, V and output projections (plus the QKV biases where the model has them)."""
        weights = self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim + self.q_dim * self.hidden
        bias = (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0
        return weights + bias

    @property
    def mlp_params_per_layer(self) -> int:
        """Gate, up and down projections of the SwiGLU MLP."""
        return 3 * self.hidden * self.ffn

    @property
    def params_per_layer(self) -> int:
        """One decoder layer: attention, MLP and its two RMSNorm weight vectors."""
        return self.attn_params_per_layer + self.mlp_params_per_layer + 2 * self.hidden

    @property
    def embedding_params(self) -> int:
        """Input embedding plus the LM head (one table when the two are tied)."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def params(self) -> int:
        """Every weight, counted from the config (Llama-3.1-8B: 8,030,261,248)."""
        return self.layers * self.params_per_layer + self.embedding_params + self.hidden

    def weight_bytes(self, dtype_bytes: float = 2) -> float:
        """Bytes of weights at `dtype_bytes` per parameter (2 = BF16, 1 = FP8)."""
        return self.params * dtype_bytes

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token adds: K and V, every layer, every KV head.

        2 * layers * kv_heads * head_dim * dtype_bytes; 327,680 B for Llama-3.1-70B in BF16.
        """
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    def source(self, figure: str) -> str:
        """The citation behind one figure (e.g. "layers")."""
        return self.sources[figure]


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
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

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
            "kv_heads": (int, _REQUIRED),
            "head_dim": (int, _REQUIRED),
            "ffn": (int, _REQUIRED),
            "vocab": (int, _REQUIRED),
            "tied_embeddings": (bool, _REQUIRED),
            "qkv_bias": (bool, _REQUIRED),
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
        records[name] = record_type(name=name, sources=MappingProxyType(sources), **values)
    return records


@cache
def _load(filename: str) -> dict[str, Any]:
    # Cached: the files are read once per process; callers get fresh dict copies below.
    return parse((CATALOG_DIR / filename).read_text(encoding="utf-8"), filename)


def _get(filename: str, name: str) -> Any:
    table = _load(filename)
    try:
        return table[name]
    except KeyError:
        raise KeyError(f"{name!r} is not in {filename}; known: {', '.join(table)}") from None


def model(name: str) -> Model:
    """A model by its catalog name, e.g. "Llama-3.1-70B"."""
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


__all__ = [
    "CATALOG_DIR",
    "GPU",
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
