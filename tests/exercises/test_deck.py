"""The deck of catalog figures to know by heart: generated from the catalog, cited, stable."""
from __future__ import annotations

import dataclasses
import math
import re

import pytest

from exercises import catalog, deck
from exercises.catalog import loader
from exercises.deck import Card, cards

GPU_FIGURES = ("hbm_capacity", "hbm_bandwidth", "bf16_dense", "nvlink", "l2", "sms")
MODEL_FIGURES = ("layers", "hidden", "heads", "params", "kv_bytes_per_token")


def by_id() -> dict[str, Card]:
    return {card.id: card for card in cards()}


def catalog_citations() -> set[str]:
    records = [*catalog.gpus().values(), *catalog.links().values(), *catalog.models().values()]
    return {text for record in records for text in record.sources.values()}


def test_the_deck_is_not_empty_and_every_card_cites_the_catalog():
    deck_cards = cards()
    assert len(deck_cards) > 50
    citations = catalog_citations()
    for card in deck_cards:
        assert card.sources, card.id
        for source in card.sources:
            assert source.text in citations, (card.id, source.text)
            assert source.figures, card.id
        assert card.tolerance_reason, card.id
        assert card.question.endswith("?"), card.id


def test_ids_are_unique_slugs_and_stable_across_calls():
    first, second = [c.id for c in cards()], [c.id for c in cards()]
    assert first == second
    assert len(set(first)) == len(first)
    for card_id in first:
        assert re.fullmatch(r"(gpu|link|model|ratio)/[a-z0-9_.-]+/[a-z0-9_]+", card_id), card_id
    assert cards() == cards()


def test_cards_are_frozen():
    card = cards()[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        card.question = "changed"  # type: ignore[misc]


def test_every_gpu_gets_its_figures_and_only_those_it_has():
    ids = by_id()
    fp8_less = 0
    for name, g in catalog.gpus().items():
        slug = deck._slug(name)
        for figure in GPU_FIGURES:
            assert f"gpu/{slug}/{figure}" in ids, (name, figure)
        assert f"ratio/{slug}/ridge_bf16" in ids
        has_fp8 = g.fp8_dense_tflops is not None
        fp8_less += not has_fp8
        assert (f"gpu/{slug}/fp8_dense" in ids) is has_fp8
        assert (f"ratio/{slug}/ridge_fp8" in ids) is has_fp8
        assert ids[f"gpu/{slug}/hbm_bandwidth"].answer.value == g.hbm_tbps
        assert ids[f"gpu/{slug}/sms"].answer.value == g.sms
        assert ids[f"gpu/{slug}/hbm_capacity"].group == f"GPU: {name}"
    assert fp8_less, "the catalog has a GPU without FP8 (A100): its absence is what is tested"


def test_every_link_and_model_gets_its_cards():
    ids = by_id()
    for name, link in catalog.links().items():
        card = ids[f"link/{deck._slug(name)}/line_rate"]
        bits_per_s = card.answer.value * (8 if card.answer.unit == "GB/s" else 1)
        assert math.isclose(bits_per_s, link.gbit_per_s)
        assert "one direction" in card.question
    for name, m in catalog.models().items():
        slug = deck._slug(name)
        for figure in MODEL_FIGURES:
            assert f"model/{slug}/{figure}" in ids, (name, figure)
        # An MLA model has no KV heads or head dim: no card for a figure the catalog lacks.
        assert (f"model/{slug}/kv_heads" in ids) is (m.kv_heads is not None)
        assert (f"model/{slug}/head_dim" in ids) is (m.head_dim is not None)
        assert ids[f"model/{slug}/layers"].answer.value == m.layers


def test_questions_say_the_catalogs_conventions():
    for card in cards():
        figure = card.id.rsplit("/", 1)[1]
        if figure == "nvlink":
            assert "both directions" in card.question
        if figure in ("bf16_dense", "fp8_dense") or figure.startswith("ridge"):
            assert "dense" in card.question
        if figure == "hbm_capacity":
            assert "decimal GB" in card.question and card.answer.unit == "GB"
        if figure == "kv_bytes_per_token":
            assert "BF16" in card.question


def test_counts_are_exact_and_the_rest_have_a_tolerance():
    for card in cards():
        figure = card.id.rsplit("/", 1)[1]
        if figure in ("sms", "layers", "hidden", "heads", "kv_heads", "head_dim"):
            assert card.tolerance == 0 and card.answer.unit == "", card.id
        else:
            assert card.answer.unit, card.id


def test_llama_70b_kv_bytes_per_token_by_hand():
    card = by_id()["model/llama-3.1-70b/kv_bytes_per_token"]
    m = catalog.model("Llama-3.1-70B")
    in_bytes = card.answer.value * {"KiB": 1024, "B": 1}[card.answer.unit]
    # K and V, 80 layers, 8 KV heads of 128, 2 bytes (BF16): the research notes' 327,680 B.
    assert in_bytes == 2 * 80 * 8 * 128 * 2 == 327_680
    assert in_bytes == 2 * m.layers * m.kv_heads * m.head_dim * 2 == m.kv_bytes_per_token()
    assert card.formula and card.per == "token"
    assert {f for s in card.sources for f in s.figures} == {"layers", "kv_heads", "head_dim"}


def test_deepseek_kv_bytes_per_token_is_the_latent():
    card = by_id()["model/deepseek-v3/kv_bytes_per_token"]
    m = catalog.model("DeepSeek-V3")
    assert card.answer.unit == "B"  # 70,272 B is not a whole number of KiB
    assert card.answer.value == m.layers * (m.kv_lora_rank + m.qk_rope_head_dim) * 2 == 70_272


def test_h100_ridge_by_hand():
    card = by_id()["ratio/h100-sxm/ridge_bf16"]
    g = catalog.gpu("H100 SXM")
    assert card.answer.unit == "FLOP/B"
    assert math.isclose(card.answer.value, 989.4e12 / 3.35e12)
    assert round(card.answer.value) == 295
    assert math.isclose(card.answer.value, g.bf16_flops / g.hbm_bytes_per_s)
    fp8 = by_id()["ratio/h100-sxm/ridge_fp8"]
    assert math.isclose(fp8.answer.value, g.fp8_flops / g.hbm_bytes_per_s)
    assert {f for s in card.sources for f in s.figures} == {"bf16_dense_tflops", "hbm_tbps"}


def test_parameter_cards_count_from_the_config_in_billions():
    for name, m in catalog.models().items():
        card = by_id()[f"model/{deck._slug(name)}/params"]
        assert card.answer.unit == "billion"
        assert math.isclose(card.answer.value * deck.SCALES["billion"], m.params)
        assert card.formula
        assert "layers" in {f for s in card.sources for f in s.figures}


def test_answer_text_is_what_a_person_writes():
    ids = by_id()
    assert ids["gpu/h100-sxm/hbm_bandwidth"].answer_text == "3.35 TB/s"
    assert ids["gpu/h100-sxm/sms"].answer_text == "132"
    assert ids["model/deepseek-v3/kv_bytes_per_token"].answer_text == "70,272 B"


NEW_GPU = """
[sources]
made_up = "a made-up datasheet for this test, long enough to pass as a citation"

[gpus."X100 Test"]
bf16_dense_tflops = { value = 1000.0, source = "made_up" }
hbm_gb = { value = 100.0, source = "made_up" }
hbm_tbps = { value = 4.0, source = "made_up" }
sms = { value = 100, source = "made_up" }
l2_mb = { value = 64.0, source = "made_up" }
nvlink_gbps = { value = 1000.0, source = "made_up" }
"""


def test_adding_a_gpu_to_the_catalog_adds_its_cards(monkeypatch: pytest.MonkeyPatch):
    before = cards()
    real_load = loader._load

    def with_new_gpu(filename: str) -> dict:
        table = dict(real_load(filename))
        if filename == "gpus.toml":
            table.update(loader.parse(NEW_GPU, "gpus.toml"))
        return table

    monkeypatch.setattr(loader, "_load", with_new_gpu)
    after = cards()
    added = {c.id for c in after} - {c.id for c in before}
    # No FP8 rate in the new entry: its six figures and its BF16 ridge, nothing else.
    assert added == {f"gpu/x100-test/{f}" for f in GPU_FIGURES} | {"ratio/x100-test/ridge_bf16"}
    assert len(after) == len(before) + len(added)
    ridge = next(c for c in after if c.id == "ratio/x100-test/ridge_bf16")
    assert math.isclose(ridge.answer.value, 1000.0 / 4.0)
    assert ridge.sources[0].text.startswith("a made-up datasheet")


def test_two_names_that_slugify_alike_are_refused(monkeypatch: pytest.MonkeyPatch):
    real_load = loader._load

    def with_twin(filename: str) -> dict:
        table = dict(real_load(filename))
        if filename == "gpus.toml":
            name = next(iter(table))
            table[name.upper() + " "] = dataclasses.replace(table[name], name=name.upper() + " ")
        return table

    monkeypatch.setattr(loader, "_load", with_twin)
    with pytest.raises(ValueError, match="repeat"):
        cards()


def test_main_prints_the_size_of_each_group(capsys: pytest.CaptureFixture[str]):
    deck.main()
    out = capsys.readouterr().out
    assert f"{len(cards())}  cards in all" in out
    for group, count in deck.groups().items():
        assert re.search(rf"^\s*{count}  {re.escape(group)}$", out, re.MULTILINE), group
