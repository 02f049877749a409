"""The deck: catalog figures an interviewer expects a candidate to know by heart, as cards.

Every card is generated from `exercises.catalog` (nothing here types a figure): per GPU its HBM
size and bandwidth, dense BF16 and FP8 rates, NVLink rate, L2 size and SM count (those the catalog
has for it); each link's line rate; per model its shape, parameters and KV bytes per token; and the
ridge points derived from the GPU figures. A card carries its question, its answer as a
`Quantity`, the tolerance it is graded at and why, and the catalog's citation for every figure it
rests on (a derived card also names its formula). `graders/card.py` grades an answer to a card
through the number grader.

Units are the ones people say, and the questions state the catalog's conventions: capacity is the
marketed decimal GB, NVLink is both directions summed, FLOP rates are dense, link rates are per
direction. Parameter counts are in billions: `Quantity(70.55, "billion")`, where "billion" is a
count scale (not a unit the unit reader knows); the grader turns it into a plain count.

    python -m exercises.deck    # cards per group
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from exercises import catalog
from exercises.catalog import GPU, Link, Model
from exercises.spec import Quantity

# Count scales a card's answer may be in: the unit names a count of things in these multiples.
SCALES: dict[str, float] = {"billion": 1e9}

# The site's default relative tolerance for a quoted figure (PartSpec.tolerance).
DEFAULT_TOLERANCE = 0.02

_QUOTED = ("2 %: a quoted figure, accepted as people round it (and, as on every number part, "
           "rounded to two significant figures)")
_COUNT = "0: a count from the config or the datasheet, exact like the exercises' counts"


@dataclass(frozen=True)
class Source:
    """One citation from the catalog and the figures (catalog field names) it supports."""

    figures: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Card:
    """One fact to know by heart.

    `answer` is in the unit people say it in; `tolerance` is relative (0 = exact), as on a number
    part. `formula` is empty for a figure read straight from the catalog, else the derivation in
    words; `sources` cite every figure the answer rests on. `per` names what the figure is per
    ("token" for KV bytes), so an answer may say it ("320 KiB/token").
    """

    id: str
    group: str
    question: str
    answer: Quantity
    tolerance: float
    tolerance_reason: str
    sources: tuple[Source, ...]
    formula: str = ""
    per: str = ""

    @property
    def exact(self) -> bool:
        return self.tolerance == 0

    @property
    def answer_text(self) -> str:
        """The answer as a person writes it: "3.35 TB/s", "80 GB", "132", "70,272 B"."""
        number = _format(self.answer.value, self.exact)
        return f"{number} {self.answer.unit}" if self.answer.unit else number

    @property
    def source_text(self) -> str:
        """The formula (for a derived card) and every citation, for showing after an answer."""
        cited = "; ".join(s.text for s in self.sources)
        return f"{self.formula}. Sources: {cited}" if self.formula else f"Source: {cited}"


def cards() -> list[Card]:
    """Every card, in a fixed order: GPUs, links and models in catalog file order, then ratios.

    Raises ValueError if two cards would share an id (two catalog names that slugify alike).
    """
    deck = [
        *(card for g in catalog.gpus().values() for card in _gpu_cards(g)),
        *(_link_card(link) for link in catalog.links().values()),
        *(card for m in catalog.models().values() for card in _model_cards(m)),
        *(card for g in catalog.gpus().values() for card in _ratio_cards(g)),
    ]
    repeated = [card_id for card_id, n in Counter(c.id for c in deck).items() if n > 1]
    if repeated:
        raise ValueError(f"deck card ids repeat: {repeated}")
    return deck


@cache
def by_id() -> dict[str, Card]:
    """Every card by its id, built once per process: the site looks cards up on every answer,
    and the catalog they come from changes only with a deploy."""
    return {card.id: card for card in cards()}


def groups() -> dict[str, int]:
    """Cards per group, in deck order."""
    return dict(Counter(card.group for card in cards()))


# --- GPUs --------------------------------------------------------------------------------------


def _gpu_cards(g: GPU) -> list[Card]:
    group = f"GPU: {g.name}"

    def card(figure: str, key: str, question: str, answer: Quantity,
             tolerance: float = DEFAULT_TOLERANCE, reason: str = _QUOTED) -> Card:
        return Card(_card_id("gpu", g.name, key), group, f"{g.name}: {question}", answer,
                    tolerance, reason, _cite(g.sources, (figure,)))

    out = [
        card("hbm_gb", "hbm_capacity", "HBM capacity (the marketed figure, decimal GB)?",
             Quantity(g.hbm_gb, "GB"), reason=f"{_QUOTED}; the same number in GiB is the "
             "GB/GiB slip, 7 % away"),
        card("hbm_tbps", "hbm_bandwidth", "HBM bandwidth?", Quantity(g.hbm_tbps, "TB/s")),
        card("bf16_dense_tflops", "bf16_dense", "dense BF16 tensor-core rate (no sparsity)?",
             Quantity(g.bf16_dense_tflops, "TFLOP/s")),
    ]
    if g.fp8_dense_tflops is not None:
        out.append(card("fp8_dense_tflops", "fp8_dense",
                        "dense FP8 tensor-core rate (no sparsity)?",
                        Quantity(g.fp8_dense_tflops, "TFLOP/s")))
    out += [
        card("nvlink_gbps", "nvlink", "NVLink bandwidth per GPU, both directions summed?",
             Quantity(g.nvlink_gbps, "GB/s")),
        # Quoted as MB, reported by the device in MiB (the catalog's note on l2_mb): an answer in
        # either reading is right, and 2^20/10^6 is 4.9 % apart.
        card("l2_mb", "l2", "L2 cache size?", Quantity(g.l2_mb, "MB"), 0.05,
             "5 %: quoted in MB while the device reports MiB (1 MiB = 1.049 MB), so either "
             "reading is right"),
        card("sms", "sms", "how many SMs?", Quantity(g.sms, ""), 0, _COUNT),
    ]
    return out


def _ratio_cards(g: GPU) -> list[Card]:
    """Ridge points: the arithmetic intensity (FLOP/B) where dense compute and HBM balance."""
    out = [_ridge("BF16", g, "bf16_dense_tflops", g.bf16_dense_tflops, g.ridge_bf16)]
    if g.fp8_dense_tflops is not None and g.fp8_flops is not None:
        out.append(_ridge("FP8", g, "fp8_dense_tflops", g.fp8_dense_tflops,
                          g.fp8_flops / g.hbm_bytes_per_s))
    return out


def _ridge(dtype: str, g: GPU, figure: str, tflops: float, ridge: float) -> Card:
    return Card(
        _card_id("ratio", g.name, f"ridge_{dtype.lower()}"),
        "Ratios",
        f"{g.name}: ridge point for dense {dtype}, in FLOP per byte of HBM traffic?",
        Quantity(ridge, "FLOP/B"),
        DEFAULT_TOLERANCE,
        "2 %: a ratio of two quoted figures, accepted to the nearest FLOP/B or two significant "
        "figures",
        _cite(g.sources, (figure, "hbm_tbps")),
        formula=(f"Dense {dtype} FLOP/s divided by HBM bytes/s: {_format(tflops, False)} "
                 f"TFLOP/s / {_format(g.hbm_tbps, False)} TB/s"),
    )


# --- links -------------------------------------------------------------------------------------


def _link_card(link: Link) -> Card:
    cite = _cite(link.sources, ("gbit_per_s",))
    if link.kind == "nic":
        # NICs are marketed in bits per second ("a 400G NIC").
        return Card(_card_id("link", link.name, "line_rate"), f"NIC: {link.name}",
                    f"{link.name}: line rate, one direction?", Quantity(link.gbit_per_s, "Gb/s"),
                    DEFAULT_TOLERANCE, _QUOTED, cite)
    # Host links (PCIe) are spoken of in bytes per second ("64 GB/s for Gen5 x16").
    return Card(_card_id("link", link.name, "line_rate"), f"Host link: {link.name}",
                f"{link.name}: raw rate in one direction (before encoding overhead)?",
                Quantity(link.gb_per_s, "GB/s"), DEFAULT_TOLERANCE, _QUOTED, cite,
                formula=f"The line rate in bits per second divided by 8: "
                        f"{_format(link.gbit_per_s, False)} Gb/s / 8")


# --- models ------------------------------------------------------------------------------------

# The config figures `Model.params` reads (the rest, such as context or RoPE, do not change it).
_PARAM_FIGURES = (
    "attention", "layers", "hidden", "q_heads", "kv_heads", "head_dim", "ffn", "vocab",
    "tied_embeddings", "qkv_bias", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
    "v_head_dim", "q_lora_rank", "n_routed_experts", "n_shared_experts", "moe_ffn",
    "first_dense_layers", "o_bias", "attention_sinks", "qk_norm", "expert_bias", "router_bias",
    "post_norms",
)
# Shape figures asked one by one: (field, id key, question). MLA has no KV heads or head dim.
_SHAPE = (
    ("layers", "layers", "how many layers?"),
    ("hidden", "hidden", "hidden size (model dimension)?"),
    ("q_heads", "heads", "how many attention (query) heads?"),
    ("kv_heads", "kv_heads", "how many KV heads?"),
    ("head_dim", "head_dim", "head dimension?"),
)


def _model_cards(m: Model) -> list[Card]:
    group = f"Model: {m.name}"
    out = [
        Card(_card_id("model", m.name, key), group, f"{m.name}: {question}",
             Quantity(getattr(m, figure), ""), 0, _COUNT, _cite(m.sources, (figure,)))
        for figure, key, question in _SHAPE
        if getattr(m, figure) is not None
    ]
    total = "total parameters, every expert counted," if m.is_moe else "total parameters,"
    out.append(Card(
        _card_id("model", m.name, "params"), group, f"{m.name}: {total} in billions?",
        Quantity(m.params / SCALES["billion"], "billion"), DEFAULT_TOLERANCE,
        "2 %: counted from the config to the parameter; accepts the billions people quote",
        _cite(m.sources, _PARAM_FIGURES),
        formula="Counted from the config: every weight matrix, embedding table, norm and bias "
                "vector of the main model (Model.params)",
    ))
    out.append(_kv_card(m, group))
    return out


def _kv_card(m: Model, group: str) -> Card:
    kv = m.kv_bytes_per_token()
    if m.is_mla:
        figures: tuple[str, ...] = ("layers", "kv_lora_rank", "qk_rope_head_dim")
        formula = (f"layers x (latent width + RoPE key width) x 2 bytes: {m.layers} x "
                   f"({m.kv_lora_rank} + {m.qk_rope_head_dim}) x 2")
    else:
        figures = ("layers", "kv_heads", "head_dim")
        formula = (f"2 (K and V) x layers x KV heads x head dim x 2 bytes: 2 x {m.layers} x "
                   f"{m.kv_heads} x {m.head_dim} x 2")
    window = ", every layer counted as full (no sliding window)" if m.sliding_window else ""
    # Whole KiB is how these are said (320 KiB); otherwise the exact byte count (70,272 B).
    answer = Quantity(kv // 1024, "KiB") if kv % 1024 == 0 else Quantity(kv, "B")
    return Card(
        _card_id("model", m.name, "kv_bytes_per_token"), group,
        f"{m.name}: KV-cache bytes per token in BF16, all layers{window}?",
        answer, 0, "0: an exact count of bytes from integer config figures, as the exercises "
        "ask it; the same number in kB is the KiB/kB slip",
        _cite(m.sources, figures), formula=formula, per="token",
    )


# --- helpers -----------------------------------------------------------------------------------


def _cite(sources: Mapping[str, str], figures: tuple[str, ...]) -> tuple[Source, ...]:
    """The citations of `figures` (those the record has), one per distinct text, in order."""
    by_text: dict[str, list[str]] = {}
    for figure in figures:
        text = sources.get(figure)
        if text is not None:
            by_text.setdefault(text, []).append(figure)
    if not by_text:
        raise ValueError(f"no catalog source for any of {figures}")
    return tuple(Source(tuple(names), text) for text, names in by_text.items())


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_.]+", "-", text.lower()).strip("-")


def _card_id(kind: str, name: str, figure: str) -> str:
    """A stable id from what the card is about: "gpu/h100-sxm/hbm_bandwidth"."""
    return f"{kind}/{_slug(name)}/{figure}"


def _format(value: float, exact: bool) -> str:
    """A figure as people write it: whole numbers with thousands commas, others to 4 figures
    (every digit for an exact card, whose answer must be typed in full)."""
    if value == int(value):
        return f"{int(value):,}"
    if exact:
        return repr(float(value))
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def main() -> None:
    """`python -m exercises.deck`: how many cards each group holds."""
    sizes = groups()
    for name, count in sizes.items():
        print(f"{count:3d}  {name}")
    print(f"{sum(sizes.values()):3d}  cards in all")


if __name__ == "__main__":
    main()
