"""The fact catalog: every figure cited, derived counts matching the research notes."""
from __future__ import annotations

import math
from dataclasses import FrozenInstanceError

import pytest

from exercises import catalog
from exercises.catalog import CATALOG_DIR, CatalogError, gpu, link, model, parse

# ---------------------------------------------------------------------------------------------
# Every figure has a source


@pytest.mark.parametrize(
    ("records", "figures"),
    [
        (
            catalog.models,
            ["layers", "hidden", "q_heads", "kv_heads", "head_dim", "ffn", "vocab",
             "tied_embeddings", "qkv_bias"],
        ),
        (
            catalog.gpus,
            ["bf16_dense_tflops", "hbm_gb", "hbm_tbps", "sms", "l2_mb", "nvlink_gbps"],
        ),
        (catalog.links, ["kind", "gbit_per_s"]),
    ],
)
def test_every_figure_has_a_citation(records, figures):
    for name, record in records().items():
        for figure in figures:
            text = record.source(figure)
            assert isinstance(text, str) and len(text) > 20, (name, figure)
        # Optional figures that are present carry a source too; absent ones are None.
        for figure, value in vars(record).items():
            if figure in ("name", "sources") or value is None:
                continue
            assert figure in record.sources, (name, figure)


def test_the_real_files_parse_and_every_source_key_is_used():
    for filename in ("models.toml", "gpus.toml", "links.toml"):
        text = (CATALOG_DIR / filename).read_text(encoding="utf-8")
        records = parse(text, filename)
        used = {c for r in records.values() for c in r.sources.values()}
        import tomllib

        declared = set(tomllib.loads(text)["sources"].values())
        assert declared == used, f"{filename}: unused sources {declared - used}"


GOOD_MODEL = """
[sources]
cfg = "a config file somewhere, with a path"
[models."Tiny"]
layers = { value = 2, source = "cfg" }
hidden = { value = 64, source = "cfg" }
q_heads = { value = 4, source = "cfg" }
kv_heads = { value = 2, source = "cfg" }
head_dim = { value = 16, source = "cfg" }
ffn = { value = 128, source = "cfg" }
vocab = { value = 100, source = "cfg" }
tied_embeddings = { value = true, source = "cfg" }
qkv_bias = { value = false, source = "cfg" }
"""


def test_a_well_formed_entry_loads():
    tiny = parse(GOOD_MODEL, "models.toml")["Tiny"]
    assert tiny.kv_bytes_per_token() == 2 * 2 * 2 * 16 * 2
    assert tiny.source("ffn").startswith("a config file")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # The rule the catalog exists for: a figure with no source is refused.
        ('ffn = { value = 128, source = "cfg" }', "ffn = { value = 128 }", "no source"),
        ('ffn = { value = 128, source = "cfg" }', "ffn = 128", "source"),
        ('ffn = { value = 128, source = "cfg" }', 'ffn = { value = 128, source = "" }', "no source"),
        ('ffn = { value = 128, source = "cfg" }', 'ffn = { value = 128, source = "nope" }',
         "not in [sources]"),
        ('cfg = "a config file somewhere, with a path"', 'cfg = ""', "no citation"),
        ('ffn = { value = 128, source = "cfg" }', "", "missing"),
        ('ffn = { value = 128, source = "cfg" }', 'ffn = { value = "128", source = "cfg" }',
         "integer"),
        ('ffn = { value = 128, source = "cfg" }', 'ffn = { value = 128.5, source = "cfg" }',
         "integer"),
        ('ffn = { value = 128, source = "cfg" }', 'ffn = { value = true, source = "cfg" }',
         "integer"),
        ('ffn = { value = 128, source = "cfg" }', 'ffn = { value = -1, source = "cfg" }',
         "positive"),
        ('ffn = { value = 128, source = "cfg" }',
         'ffn = { value = 128, source = "cfg", note = "x" }', "only"),
        ('ffn = { value = 128, source = "cfg" }',
         'ffn = { value = 128, source = "cfg" }\nmoe = { value = 1, source = "cfg" }', "unknown"),
    ],
)
def test_a_broken_entry_is_rejected(old, new, message):
    assert old in GOOD_MODEL
    with pytest.raises(CatalogError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse(GOOD_MODEL.replace(old, new), "models.toml")


def test_an_optional_gpu_figure_may_be_absent_but_not_unsourced():
    text = (CATALOG_DIR / "gpus.toml").read_text(encoding="utf-8")
    assert parse(text, "gpus.toml")["A100 SXM 80GB"].fp8_dense_tflops is None
    broken = text.replace(
        'fp8_dense_tflops = { value = 1978.9, source = "klockwood_h100" }',
        "fp8_dense_tflops = { value = 1978.9 }",
    )
    with pytest.raises(CatalogError, match="no source"):
        parse(broken, "gpus.toml")


def test_records_are_frozen_and_unknown_names_say_what_exists():
    with pytest.raises(FrozenInstanceError):
        model("Llama-3.1-70B").layers = 81  # type: ignore[misc]
    with pytest.raises(KeyError, match="Llama-3.1-70B"):
        model("Llama-3-70B")


# ---------------------------------------------------------------------------------------------
# Derived numbers against the research notes (facts-q01-q25.md §0.2, Appendix C)


@pytest.mark.parametrize(
    ("name", "kv_bytes"),
    [("Llama-3.1-8B", 131_072), ("Llama-3.1-70B", 327_680), ("Llama-3.1-405B", 516_096),
     ("Qwen2.5-72B", 327_680)],
)
def test_kv_bytes_per_token(name, kv_bytes):
    m = model(name)
    assert m.kv_bytes_per_token() == kv_bytes
    assert m.kv_bytes_per_token(dtype_bytes=1) == kv_bytes // 2


@pytest.mark.parametrize(
    ("name", "params"),
    # The notes' table; Qwen's model card says 72.7 B.
    [("Llama-3.1-8B", 8.030e9), ("Llama-3.1-70B", 70.552e9), ("Llama-3.1-405B", 405.849e9),
     ("Qwen2.5-72B", 72.7e9)],
)
def test_params_match_the_notes(name, params):
    assert math.isclose(model(name).params, params, rel_tol=1e-3)


def test_exact_parameter_counts():
    # Hugging Face reports 8,030,261,248 for Llama-3.1-8B (norm weights included). The notes'
    # 70,552,387,584 for 70B leaves out the 161 RMSNorm vectors (161 * 8192 = 1,318,912).
    assert model("Llama-3.1-8B").params == 8_030_261_248
    assert model("Llama-3.1-70B").params - 161 * 8192 == 70_552_387_584


def test_kv_for_the_q23_prompt():
    # The blurb's 2.7 GB: 8,192 tokens of Llama-3.1-70B in BF16.
    assert 8192 * model("Llama-3.1-70B").kv_bytes_per_token() == 2_684_354_560


def test_gpu_and_link_figures():
    h100 = gpu("H100 SXM")
    assert h100.bf16_flops == pytest.approx(989.4e12)
    assert h100.hbm_bytes == 80e9  # the decimal-GB convention (§0.3)
    assert h100.ridge_bf16 == pytest.approx(295.3, abs=0.1)
    assert gpu("H200 SXM").ridge_bf16 == pytest.approx(206.1, abs=0.1)
    assert gpu("B200").fp8_flops == pytest.approx(2 * gpu("B200").bf16_flops)
    assert gpu("A100 SXM 80GB").fp8_flops is None
    assert link("ConnectX-7").gb_per_s == 50.0
    assert link("ConnectX-8").bytes_per_s == 100e9
    assert link("PCIe Gen5 x16").gb_per_s == 64.0
    assert link("PCIe Gen5 x16").effective_gb_per_s == 50.0
