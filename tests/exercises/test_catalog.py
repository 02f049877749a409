"""The fact catalog: every figure cited, derived counts matching the research notes."""
from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import FrozenInstanceError

import pytest

from exercises import catalog
from exercises.catalog import CATALOG_DIR, CatalogError, gpu, link, loader, model, parse, schema

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
        (catalog.drives, ["capacity_tb", "dwpd", "warranty_years", "seq_read_gb_per_s",
                          "seq_write_gb_per_s"]),
        (catalog.domains, ["gpu", "gpus", "nic", "nics_per_gpu"]),
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
    for filename in ("models.toml", "gpus.toml", "links.toml", "drives.toml", "domains.toml"):
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


def test_a_field_added_to_a_record_is_checked_with_no_other_edit(monkeypatch: pytest.MonkeyPatch):
    # The schema is read off the dataclass: a new field is required, typed and cited on load
    # without touching the loader.
    @dataclasses.dataclass(frozen=True)
    class RatedDrive(catalog.Drive):
        rated_iops: int = 0  # a default makes it optional
        form_factor: str | None = None
        pcie_lanes: int | None = None
        power_w: float = dataclasses.field(default=0.0, kw_only=True)

    @dataclasses.dataclass(frozen=True)
    class StrictDrive(catalog.Drive):
        endurance_class: str = dataclasses.field(kw_only=True)  # no default, not Optional: required

    text = (CATALOG_DIR / "drives.toml").read_text(encoding="utf-8")
    first = next(iter(tomllib.loads(text)["drives"]))
    # A figure on the first entry only: insert it right after the entry's table header.
    header = f'[drives."{first}"]\n'
    assert header in text

    def with_figure(line: str) -> str:
        return text.replace(header, header + line + "\n", 1)

    source = next(iter(tomllib.loads(text)["sources"]))
    monkeypatch.setitem(loader.FILES, "drives.toml", (RatedDrive, "drives"))
    plain = parse(text, "drives.toml")[first]
    assert (plain.rated_iops, plain.form_factor, plain.power_w) == (0, None, 0.0)
    loaded = parse(with_figure(f'pcie_lanes = {{ value = 4, source = "{source}" }}'), "drives.toml")
    assert loaded[first].pcie_lanes == 4
    with pytest.raises(CatalogError, match=rf"drives.toml: {first}.pcie_lanes: expected an integer"):
        parse(with_figure(f'pcie_lanes = {{ value = "x4", source = "{source}" }}'), "drives.toml")
    with pytest.raises(CatalogError, match=rf"drives.toml: {first}.form_factor: has no source"):
        parse(with_figure('form_factor = { value = "U.3" }'), "drives.toml")

    monkeypatch.setitem(loader.FILES, "drives.toml", (StrictDrive, "drives"))
    with pytest.raises(CatalogError, match=rf"drives.toml: {first}.endurance_class: missing"):
        parse(text, "drives.toml")


def test_a_field_the_loader_cannot_check_is_refused_by_name():
    @dataclasses.dataclass(frozen=True)
    class Odd(catalog.Link):
        lanes: list[int] | None = None

    with pytest.raises(TypeError, match=r"Odd\.lanes"):
        schema.figures(Odd)


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


# ---------------------------------------------------------------------------------------------
# MLA, MoE and sliding-window models (facts-q01-q25 §0.2, facts-q26-q49 §0.2, Q22, Q42-Q49)

NEW_MODELS = ["DeepSeek-V3", "GPT-OSS-120B", "GPT-OSS-20B", "Llama-2-7B", "Mixtral-8x7B",
              "Qwen3-30B-A3B", "Gemma-2-9B", "Gemma-2-27B", "Gemma-3-12B", "Gemma-3-27B"]


@pytest.mark.parametrize("name", NEW_MODELS)
def test_new_models_quote_every_integer_they_store(name):
    # Each config figure's citation quotes the value it backs, so a typo in the TOML (or a
    # citation attached to the wrong figure) fails here instead of in a student's grade.
    m = model(name)
    for figure, value in vars(m).items():
        if figure in ("name", "sources") or value is None or isinstance(value, bool | str):
            continue
        text = m.source(figure)
        assert str(value) in text.replace(",", ""), (name, figure, value)


@pytest.mark.parametrize("name", NEW_MODELS)
def test_new_models_state_their_attention_kind_with_a_source(name):
    m = model(name)
    assert m.attention in ("gqa", "mha", "mla")
    assert len(m.source("attention")) > 20


def test_deepseek_v3_kv_per_token_is_the_latent():
    ds, llama = model("DeepSeek-V3"), model("Llama-3.1-70B")
    assert ds.attention == "mla" and ds.kv_heads is None and ds.head_dim is None
    assert ds.kv_bytes_per_token_per_layer() == (512 + 64) * 2 == 1_152
    assert ds.kv_bytes_per_token() == 70_272  # ISCA'25 Table 1: 70.272 KB
    assert ds.kv_bytes_per_token(dtype_bytes=1) == 35_136
    assert llama.kv_bytes_per_token() == 327_680
    assert llama.kv_bytes_per_token() / ds.kv_bytes_per_token() == pytest.approx(4.66, abs=0.01)


def test_kv_per_gpu_under_tensor_parallelism():
    llama70, llama8, ds = model("Llama-3.1-70B"), model("Llama-3.1-8B"), model("DeepSeek-V3")
    # GQA splits by KV head: 8 heads over 8 GPUs = 1 head each.
    assert llama70.kv_heads_per_gpu(8) == 1
    assert llama70.kv_bytes_per_token_per_gpu(8) == 40_960
    assert llama70.kv_bytes_per_token_per_gpu(4) == 81_920
    assert llama70.kv_bytes_per_token_per_gpu(1) == llama70.kv_bytes_per_token()
    # Past the head count each head is replicated: still one head per GPU (Q46).
    assert llama70.kv_heads_per_gpu(16) == 1
    assert llama70.kv_bytes_per_token_per_gpu(16) == 40_960
    assert llama8.kv_heads_per_gpu(16) == 1
    assert llama8.kv_bytes_per_token_per_gpu(16) == 2 * 32 * 1 * 128 * 2 == 16_384
    # MLA: the whole latent on every GPU, whatever tp is (Q22's silent 8x copy).
    for tp in (1, 2, 8, 16):
        assert ds.kv_bytes_per_token_per_gpu(tp) == 70_272
    assert ds.kv_bytes_per_token_per_gpu(8) / llama70.kv_bytes_per_token_per_gpu(8) == \
        pytest.approx(1.72, abs=0.01)
    # Q49: one 128K request per GPU at TP8: GQA 5.0 GiB, MLA 8.6 GiB.
    assert 131_072 * llama70.kv_bytes_per_token_per_gpu(8) / 2**30 == 5.0
    assert 131_072 * ds.kv_bytes_per_token_per_gpu(8) / 2**30 == pytest.approx(8.58, abs=0.01)


def test_kv_heads_per_gpu_refuses_what_engines_refuse():
    with pytest.raises(ValueError, match="neither divides"):
        model("Llama-3.1-70B").kv_heads_per_gpu(3)
    with pytest.raises(ValueError, match="tp must be"):
        model("Llama-3.1-70B").kv_heads_per_gpu(0)
    with pytest.raises(ValueError, match="no KV heads"):
        model("DeepSeek-V3").kv_heads_per_gpu(8)
    with pytest.raises(ValueError, match="no KV heads"):
        _ = model("DeepSeek-V3").kv_dim


def test_gpt_oss_sliding_window_kv():
    m = model("GPT-OSS-120B")
    assert (m.local_layers, m.global_layers, m.sliding_window) == (18, 18, 128)
    assert m.layer_kinds[:4] == ("L", "G", "L", "G")  # layer 0 is a sliding-window layer
    assert m.kv_bytes_per_token_per_layer() == 2 * 8 * 64 * 2 == 2_048
    assert m.kv_bytes_per_token() == 73_728 == 72 * 1024  # all layers counted as full
    full = 131_072 * m.kv_bytes_per_token()
    windowed = m.kv_bytes_for_tokens(131_072)
    assert full == 9_663_676_416  # 9.66 GB (the AWS Neuron figure in the notes)
    assert windowed == 2_048 * (18 * 131_072 + 18 * 128) == 4_836_556_800  # 4.84 GB
    assert 1 - windowed / full == pytest.approx(0.4995, abs=1e-4)  # Q47: 49.95 % at 128K
    assert 1 - m.kv_bytes_for_tokens(4_096) / (4_096 * m.kv_bytes_per_token()) == \
        pytest.approx(0.484, abs=1e-3)  # 48.4 % at 4K
    assert m.kv_bytes_per_token_windowed(131_072) == windowed / 131_072
    # Below the window nothing is saved; with tp the windowed figure splits by heads too.
    assert m.kv_bytes_for_tokens(100) == 100 * m.kv_bytes_per_token()
    assert m.kv_bytes_for_tokens(131_072, tp=8) == windowed // 8
    assert m.kv_bytes_for_tokens(0) == 0


def test_gemma_local_global_ratios():
    g3_27, g3_12, g2_9 = model("Gemma-3-27B"), model("Gemma-3-12B"), model("Gemma-2-9B")
    assert (g3_27.local_layers, g3_27.global_layers) == (52, 10)
    assert (g3_12.local_layers, g3_12.global_layers) == (40, 8)
    assert g3_12.layer_kinds[:6] == ("L", "L", "L", "L", "L", "G")
    assert (g2_9.local_layers, g2_9.global_layers, g2_9.sliding_window) == (21, 21, 4096)

    def saving(m, n):
        return 1 - m.kv_bytes_for_tokens(n) / (n * m.kv_bytes_per_token())

    # facts-q26-q49 Q47 and Appendix C 6: 82.7 % (12B, exact 5:1) and 83.2 % (27B) at 128K.
    assert saving(g3_12, 131_072) == pytest.approx(0.827, abs=1e-3)
    assert saving(g3_27, 131_072) == pytest.approx(0.832, abs=1e-3)
    assert saving(g3_27, 32_768) == pytest.approx(0.813, abs=1e-3)
    assert saving(g2_9, 8_192) == pytest.approx(0.25)
    # Dense, no window: windowed equals full.
    llama = model("Llama-3.1-8B")
    assert llama.kv_bytes_for_tokens(1000) == 1000 * llama.kv_bytes_per_token()
    assert llama.local_layers == 0


def test_deepseek_v3_parameter_counts():
    ds = model("DeepSeek-V3")
    assert ds.attn_params_per_layer == 187_105_280
    assert ds.expert_params == 44_040_192
    assert ds.mlp_params_per_layer == 396_361_728 == 9 * ds.expert_params
    assert (ds.dense_layers, ds.moe_layers) == (3, 58)
    assert ds.router_params_per_layer == 256 * 7168 + 256  # gate + correction bias
    # The notes count weight matrices only (671,025,397,760 and 37,551,276,032). `params` adds
    # the 1,006,592 RMSNorm weights and 58 x 256 router correction biases the checkpoint holds.
    assert ds.matrix_params == 671_025_397_760
    assert ds.norm_params == 61 * (2 * 7168 + 1536 + 512) + 7168 == 1_006_592
    assert ds.bias_params == 58 * 256
    assert ds.params == 671_026_419_200
    assert round(ds.params / 1e9, 2) == 671.03
    assert ds.active_params - ds.norm_params - ds.bias_params == 37_551_276_032
    assert round(ds.active_params / 1e9, 2) == 37.55
    # DeepSeek's README_WEIGHTS "36.6 B activated (incl. 0.9 B output head)": without the input
    # embedding lookup.
    assert round((ds.active_params - ds.input_embedding_params) / 1e9, 1) == 36.6
    assert ds.input_embedding_params == 129_280 * 7168 == 926_679_040


def test_moe_parameter_counts_match_the_vendors():
    # OpenAI's model card: 116.83 B / 5.13 B (120B) and 20.91 B / 3.61 B (20B); its active
    # figure leaves out the input embedding, which is a lookup.
    for name, total, active in (("GPT-OSS-120B", 116.83, 5.13), ("GPT-OSS-20B", 20.91, 3.61)):
        m = model(name)
        assert round(m.params / 1e9, 2) == total, name
        assert round((m.active_params - m.input_embedding_params) / 1e9, 2) == active, name
    mixtral = model("Mixtral-8x7B")  # Mistral: 46.7 B total, 12.9 B per token
    assert round(mixtral.params / 1e9, 1) == 46.7
    assert round(mixtral.active_params / 1e9, 1) == 12.9
    qwen = model("Qwen3-30B-A3B")  # Qwen: 30.5 B total, 3.3 B activated; notes: 3.35 B
    assert round(qwen.params / 1e9, 1) == 30.5
    assert round(qwen.active_params / 1e9, 2) == 3.35
    assert qwen.kv_bytes_per_token() == 98_304  # facts-q01-q25 §0.2


def test_dense_additions_match_the_published_counts():
    llama2 = model("Llama-2-7B")
    assert llama2.attention == "mha" and llama2.kv_heads == llama2.q_heads == 32
    assert llama2.params == 6_738_415_616  # Hugging Face's count for Llama-2-7b-hf
    assert llama2.kv_bytes_per_token() == 524_288
    assert llama2.kv_heads_per_gpu(8) == 4
    # Gemma 2 (text models; Hugging Face lists 9.24 B and 27.2 B).
    assert model("Gemma-2-9B").params == 9_241_705_984
    assert model("Gemma-2-27B").params == 27_227_128_320
    # Gemma 3 text decoders; the checkpoints add a ~0.42 B SigLIP tower (27.4 B / 12.2 B listed).
    assert round(model("Gemma-3-27B").params / 1e9, 2) == 27.01
    assert round(model("Gemma-3-12B").params / 1e9, 2) == 11.77


def test_dense_models_keep_their_counts_and_have_no_moe_figures():
    for name in ("Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "Qwen2.5-72B"):
        m = model(name)
        assert m.attention == "gqa" and not m.is_moe and not m.is_mla
        assert m.active_params == m.params
        assert m.params == m.layers * m.params_per_layer + m.embedding_params + m.hidden
        assert m.sliding_window is None and m.layer_pattern is None
    assert model("Llama-3.1-70B").matrix_params == 70_552_387_584  # the notes' convention


def test_figures_that_do_not_apply_raise_instead_of_guessing():
    with pytest.raises(ValueError, match="no dense MLP"):
        _ = model("GPT-OSS-120B").mlp_params_per_layer
    with pytest.raises(ValueError, match="MoE"):
        _ = model("DeepSeek-V3").params_per_layer
    with pytest.raises(ValueError, match="not a mixture-of-experts"):
        _ = model("Llama-3.1-8B").expert_params


def test_deepseek_r1_is_an_alias_of_v3():
    r1, v3 = model("DeepSeek-R1"), model("DeepSeek-V3")
    assert r1.name == "DeepSeek-R1"
    assert r1.kv_bytes_per_token() == v3.kv_bytes_per_token()
    assert r1.params == v3.params
    assert r1.source("kv_lora_rank") == v3.source("kv_lora_rank")
    assert "DeepSeek-R1" not in catalog.models()  # one entry, not two


def test_reported_hbm():
    h200 = gpu("H200 SXM")
    assert h200.hbm_reported_bytes == 143_771 * 2**20
    assert h200.hbm_reported_bytes / 2**30 == pytest.approx(140.4, abs=0.05)
    assert gpu("H100 SXM").hbm_reported_bytes / 2**30 == pytest.approx(79.6, abs=0.05)
    assert gpu("A100 SXM 80GB").hbm_reported_bytes is None


def test_driver_total_hbm_is_what_engines_see():
    # The driver's total sits between the marketed figure and nvidia-smi's: vLLM logs an H100 80GB
    # as total_gpu_memory (79.19GiB), about 85.0e9 B.
    h100 = gpu("H100 SXM")
    assert h100.hbm_driver_total_bytes == 81_090 * 2**20
    assert h100.hbm_driver_total_bytes / 1e9 == pytest.approx(85.03, abs=0.01)
    assert h100.hbm_driver_total_bytes / 2**30 == pytest.approx(79.19, abs=0.005)
    assert gpu("H200 SXM").hbm_driver_total_bytes / 2**30 == pytest.approx(139.80, abs=0.01)
    for name in ("A100 SXM 80GB", "H100 SXM", "H200 SXM", "B200"):
        g = gpu(name)
        assert g.hbm_bytes < g.hbm_driver_total_bytes
        if g.hbm_reported_bytes is not None:
            assert g.hbm_driver_total_bytes < g.hbm_reported_bytes
    assert gpu("A100 SXM 80GB").hbm_driver_total_bytes / 2**30 == pytest.approx(79.15, abs=0.005)
    # No verified reading: asking for one fails instead of falling back to another figure.
    with pytest.raises(ValueError, match="no driver-reported total"):
        _ = gpu("B200 (GB200 NVL72)").hbm_driver_total_bytes


def test_deepseek_v3_routing_groups_and_replicated_latent_projections():
    m = model("DeepSeek-V3")
    assert (m.n_group, m.topk_group) == (8, 4)
    assert m.n_routed_experts // m.n_group == 32
    assert "by expert group, not by node" in m.source("topk_group")
    assert m.latent_proj_params_per_layer == 7168 * (1536 + 512 + 64) == 15_138_816
    assert m.tp_replicates_latent_proj is True
    assert "ReplicatedLinear" in m.source("tp_replicates_latent_proj")
    assert m.attn_params_per_layer_per_gpu(1) == m.attn_params_per_layer
    assert m.attn_params_per_layer_per_gpu(8) == pytest.approx(
        15_138_816 + (187_105_280 - 15_138_816) / 8)
    with pytest.raises(ValueError):
        _ = model("Llama-3.1-70B").latent_proj_params_per_layer


@pytest.mark.parametrize("old, new, message", [
    ('moe_ffn = { value = 32, source = "cfg" }',
     'moe_ffn = { value = 32, source = "cfg" }\nn_group = { value = 3, source = "cfg" }\n'
     'topk_group = { value = 1, source = "cfg" }', "equal groups"),
    ('moe_ffn = { value = 32, source = "cfg" }',
     'moe_ffn = { value = 32, source = "cfg" }\nn_group = { value = 4, source = "cfg" }',
     "group-limited routing names both"),
])
def test_routing_groups_are_checked(old, new, message):
    assert old in MLA_MODEL
    with pytest.raises(CatalogError, match=message):
        parse(MLA_MODEL.replace(old, new), "models.toml")


MLA_MODEL = """
[sources]
cfg = "a config file somewhere, with a path"
[models."TinyMLA"]
attention = { value = "mla", source = "cfg" }
layers = { value = 4, source = "cfg" }
hidden = { value = 64, source = "cfg" }
q_heads = { value = 4, source = "cfg" }
kv_lora_rank = { value = 32, source = "cfg" }
qk_rope_head_dim = { value = 8, source = "cfg" }
qk_nope_head_dim = { value = 16, source = "cfg" }
v_head_dim = { value = 16, source = "cfg" }
ffn = { value = 128, source = "cfg" }
first_dense_layers = { value = 1, source = "cfg" }
n_routed_experts = { value = 8, source = "cfg" }
experts_per_token = { value = 2, source = "cfg" }
moe_ffn = { value = 32, source = "cfg" }
vocab = { value = 100, source = "cfg" }
tied_embeddings = { value = false, source = "cfg" }
qkv_bias = { value = false, source = "cfg" }
"""


def test_a_well_formed_mla_moe_entry_loads():
    tiny = parse(MLA_MODEL, "models.toml")["TinyMLA"]
    assert tiny.kv_bytes_per_token() == (32 + 8) * 2 * 4
    assert tiny.q_lora_rank is None and tiny.n_shared_experts is None
    # q directly from hidden: 64 * 4 * 24; kv_a 64 * 40; kv_b 32 * 4 * 32; o 4 * 16 * 64.
    assert tiny.attn_params_per_layer == 64 * 96 + 64 * 40 + 32 * 128 + 64 * 64


@pytest.mark.parametrize(
    ("text", "old", "new", "message"),
    [
        # New figures obey the same rule: no source, no figure.
        (MLA_MODEL, 'kv_lora_rank = { value = 32, source = "cfg" }', "kv_lora_rank = { value = 32 }",
         "no source"),
        (MLA_MODEL, 'kv_lora_rank = { value = 32, source = "cfg" }', "", "missing"),
        (MLA_MODEL, 'ffn = { value = 128, source = "cfg" }', 'ffn = { value = 128, source = "cfg" }\n'
         'kv_heads = { value = 4, source = "cfg" }', "not allowed"),
        (MLA_MODEL, 'attention = { value = "mla", source = "cfg" }',
         'attention = { value = "mqa", source = "cfg" }', "gqa, mha or mla"),
        (MLA_MODEL, 'moe_ffn = { value = 32, source = "cfg" }', "", "missing"),
        (MLA_MODEL, 'experts_per_token = { value = 2, source = "cfg" }',
         'experts_per_token = { value = 9, source = "cfg" }', "more than"),
        (MLA_MODEL, 'first_dense_layers = { value = 1, source = "cfg" }', "", "not allowed"),
        (MLA_MODEL, 'ffn = { value = 128, source = "cfg" }', "", "missing"),
        (GOOD_MODEL, 'kv_heads = { value = 2, source = "cfg" }', "", "missing"),
        (GOOD_MODEL, 'kv_heads = { value = 2, source = "cfg" }',
         'kv_heads = { value = 3, source = "cfg" }', "GQA needs"),
        (GOOD_MODEL, 'kv_heads = { value = 2, source = "cfg" }',
         'kv_heads = { value = 2, source = "cfg" }\nattention = { value = "mha", source = "cfg" }',
         "MHA needs"),
        (GOOD_MODEL, 'ffn = { value = 128, source = "cfg" }',
         'ffn = { value = 128, source = "cfg" }\nrouter_bias = { value = true, source = "cfg" }',
         "not allowed"),
        (GOOD_MODEL, 'ffn = { value = 128, source = "cfg" }',
         'ffn = { value = 128, source = "cfg" }\nsliding_window = { value = 8, source = "cfg" }',
         "layer_pattern"),
        (GOOD_MODEL, 'ffn = { value = 128, source = "cfg" }',
         'ffn = { value = 128, source = "cfg" }\nlayer_pattern = { value = "LG", source = "cfg" }',
         "sliding_window"),
        (GOOD_MODEL, 'ffn = { value = 128, source = "cfg" }',
         'ffn = { value = 128, source = "cfg" }\nlayer_pattern = { value = "LX", source = "cfg" }',
         "only 'L' and 'G'"),
    ],
)
def test_a_model_of_the_wrong_shape_is_rejected(text, old, new, message):
    assert old in text
    with pytest.raises(CatalogError, match=message):
        parse(text.replace(old, new), "models.toml")


def test_drives_and_nvlink_domains_give_the_notes_figures():
    # Q09: a 3.84 TB, 1-DWPD, 5-year drive is rated for 7,008 TB; at its 5.6 GB/s write ceiling
    # that is 14.5 days, 7.2 with a write amplification of 2.
    d = catalog.drive("Micron 7450 PRO 3.84TB")
    assert d.tbw_bytes == pytest.approx(7008e12)
    days = d.tbw_bytes / (d.seq_write_gb_per_s * 1e9 * 86_400)
    assert days == pytest.approx(14.48, abs=0.01) and days / 2 == pytest.approx(7.24, abs=0.01)
    assert catalog.drive("Micron 7450 MAX 3.2TB").dwpd == 3.0
    # Q25: NVLink per direction over the NIC is 9x on Hopper and 18x on NVL72; the rack holds
    # 72 x 186 GB = 13.39 TB of HBM.
    hopper, rack = catalog.domain("HGX H100"), catalog.domain("GB200 NVL72")
    assert hopper.nvlink_bytes_per_s_one_way / hopper.nic_bytes_per_s == 9
    assert rack.nvlink_bytes_per_s_one_way / rack.nic_bytes_per_s == 18
    assert rack.hbm_bytes == pytest.approx(13.392e12)
    assert link("100GbE").gb_per_s == 12.5 and link("PCIe Gen4 x16").gb_per_s == 32


def test_a_domain_naming_an_unknown_gpu_fails_when_asked_for(monkeypatch: pytest.MonkeyPatch):
    text = """
[sources]
s = "a datasheet with a long enough citation"
[domains."Ghost"]
gpu = { value = "No Such GPU", source = "s" }
gpus = { value = 8, source = "s" }
nic = { value = "ConnectX-7", source = "s" }
nics_per_gpu = { value = 1, source = "s" }
"""
    records = parse(text, "domains.toml")
    real = loader._load
    monkeypatch.setattr(loader, "_load", lambda f: records if f == "domains.toml" else real(f))
    with pytest.raises(KeyError, match="No Such GPU"):
        catalog.domain("Ghost")
