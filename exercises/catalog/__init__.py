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

This module is the public face; the parts live beside it: `models` (the model record), `hardware`
(GPU, link, drive and NVLink-domain records), `schema` (what a file may say, read off the records'
dataclasses), `model_rules` (rules across a model's figures) and `loader` (reading the files,
lookups by name).
"""
from __future__ import annotations

from exercises.catalog.hardware import GPU, Domain, Drive, Link
from exercises.catalog.loader import (
    CATALOG_DIR,
    MODEL_ALIASES,
    domain,
    domains,
    drive,
    drives,
    gpu,
    gpus,
    link,
    links,
    model,
    models,
    parse,
)
from exercises.catalog.models import Model
from exercises.catalog.schema import CatalogError

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
