"""Reading the catalog files into records, and looking records up by name.

Each file maps to one record type and one top-level table (`FILES`); what an entry may set is read
off the record's dataclass (`schema.figures`). Every figure is an inline table
`{ value = ..., source = "<key>" }` whose key names an entry of the file's `[sources]` table.
"""
from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from exercises.catalog.hardware import GPU, Domain, Drive, Link
from exercises.catalog.model_rules import check_model
from exercises.catalog.models import Model
from exercises.catalog.schema import CatalogError, coerce, figures

CATALOG_DIR = Path(__file__).resolve().parent

# File name -> (the record each entry becomes, the top-level table its entries sit in).
FILES: dict[str, tuple[type, str]] = {
    "models.toml": (Model, "models"),
    "gpus.toml": (GPU, "gpus"),
    "links.toml": (Link, "links"),
    "drives.toml": (Drive, "drives"),
    "domains.toml": (Domain, "domains"),
}


def parse(text: str, filename: str) -> dict[str, Any]:
    """Parse one catalog file's text into records; raise CatalogError on any rule broken.

    `filename` picks the record type (a key of `FILES`). Exposed so tests can feed it a broken file
    without touching the real ones.
    """
    try:
        record_type, section = FILES[filename]
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

    schema = figures(record_type)
    known = {figure.name for figure in schema}
    records: dict[str, Any] = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            raise CatalogError(f"{filename}: {section}.{name} must be a table")
        unknown = set(entry) - known
        if unknown:
            raise CatalogError(f"{filename}: {name}: unknown figures {sorted(unknown)}")
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for spec in schema:
            figure = spec.name
            where = f"{filename}: {name}.{figure}"
            if figure not in entry:
                if spec.required:
                    raise CatalogError(f"{where}: missing")
                # An absent optional figure takes the record's default where it has one
                # (Model.attention = "gqa"), else None.
                if not spec.has_default:
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
            values[figure] = coerce(cell["value"], spec.kind, where)
            sources[figure] = citations[key]
        if record_type is Model:
            check_model(filename, name, entry)
        records[name] = record_type(name=name, sources=MappingProxyType(sources), **values)
    return records


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

