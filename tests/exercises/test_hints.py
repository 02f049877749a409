"""Hint markers in statement.md (exercises/hints.py): the parser, and every exercise's statement.

Every statement marks at least one hint, and a converted statement's practice mode must be the
statement as it was before its markers were added: OLD_STATEMENTS holds the sha256 of each one's
text from before its conversion (all 49 at the time).
"""
from __future__ import annotations

import hashlib

import pytest

from exercises import hints, registry, templating

# slug -> sha256 of statement.md before hint markers were added (git show <commit>:...).
OLD_STATEMENTS = {
    "max_concurrency": "29302ba3a3c55483e4887abb2663483be5ce0ab3ed48abe84bb95c61c1f6928d",
    "canary_sample_size": "1831658bfefc85d8270c9a3a5b2b33e0641fc69553038bacc193955965d33b16",
    "kv_page_ledger": "0f159621d8e11148bf8b40fbc7eef6ce4cdf9c1e364c85c0fa32ca3013959d98",
    "decode_crossover_batch": "29d8b22d26723a8e4feda73b465805a0f22e28e0d2eff4131c1ac90427dab6ec",
    "recompute_vs_fetch": "8cad308002de0a0bc4a5bd61d8fdbc45b2848418cd4ca224fb2db848c5a757d1",
    "reasoning_kv_growth": "6cc91ca61278329c9eb7eaf64e967f7d379a36290ef305d64646597aef4a735f",
    "two_batch_overlap": "40bf29fbd4f7f61d8dcff24c553f8b2abc2fa6991f9af6780d8ce557bc2c130a",
    "l2_kv_pinning": "3e2e3eca2e8615db0acdb7d2df565411b83cffd48689444e294307d10204632d",
    "sliding_window_layers": "4ec54533b3efb38cc0c3987c654a8a7e6b9974d899701343ad452d11ea1f1a7f",
    "tp_past_kv_heads": "a0fa1ada218fabd60ceb11034425adc0deb13d8273cef63da3d12d57e4bfb4aa",
    "moe_calibration_coverage": "60ebb65ca3a9e81eef2e50e9b6d4c9e5bbebc82e6b3f9277b7dc01dd5600ae91",
    "mtp_free_drafter": "b5ffa496770dbac6cee7acc4800c19fa8123b8891f297b4f2161b6acd665febb",
    "stream_stutter": "7d6a35df4c2b9ce857beaab2f5cb5deee58ad76cd110412915bcae0810f7b808",
    "stranded_prefix_blocks": "86605f71b833b3487790d6517a220fc17454d21c1de369f47a6e73caf939b562",
    "paging_waste_bound": "a32ab8b8507cd0cf6472185738a915cf1ede177cf6ff0279ea78d6939e7312c1",
    "gqa_vs_mla_tp": "62b23f3c31b65a69cd70a18bc6665c726606a9a407744ff58354a1f2c0fdcebd",
    "mla_tp_copy": "afb2dfafdddad881b9ea078018e3578dc443fd4e10bd68915eeeab05fc404feb",
    "fp8_kv_scales": "e95ceff1e96a3f3bb47067c423130227fda1ff3ab71d7d11fcaeb8ca8f6dc678",
    "memory_beyond_kv": "0203f52bd6e6a9ae50ff300bb0f3382e49eab1bb3d0ed0a96e8e2cb6134b5618",
    "kv_emit_rate_cancels": "cee736b491197058ebd9864f6c8d3170c8689fb1e1f4f45442555bb81c9770ec",
    "physics_or_marketing": "53a9f8167c8afc48e360fc8fb0b7b81a95589d79443289920ce48e42871f15d3",
    "spec_decode_policy": "2652d7fba75310ca2f1e2fbb52a15f757fe968fea26d78578dd24e52d2c1406f",
    "utilisation_rule": "3c02b162ac76d56e6d1d99662523f445e2f1122f1cd0bc57a6645ab2ab3eca6b",
    "tp_vs_pp_405b": "3d9bf5d90b38dea5a0bf3ca3d2e9d8f8064368c35d8145753e24d7a97f13ea43",
    "capacity_cost_split": "6dea0356c2b56ddef076fb5f8bf272a0a59025a20af0e15ebb911a5d4afc90d4",
    "ep_dispatch_bytes": "0f45ead7ff70178e72e9f9cb98bc54c00675b2830aa074e527a7c7b2c169a940",
    "nvl72_boundary": "252bb4ebc8439fc0a50efdafb1ef8921edddb95f95e9beea685b74d79983da66",
    "region_loss_fleet": "779203eed65cbefd97b408da636dc72bcf0c125c830c3c6ef856a37ce67a1c5f",
    "kv_tier_value": "8b0f1f26ad877a6c9e619f2fbd328e345a03daf8ecbc3a168c60a6404fd26b37",
    "kv_transfer_disagg": "14a9fa5100ef991752c6b33010b8d5a2ecd0d34da0439c2378f574bcdfb4e219",
    "batch1_gap_trace": "ee7e4737b901561674dd288a367501c6ce7af0bdad5c0d825e81dc34cc14523f",
    "chunked_prefill_lockout": "046b741ef48b77cc0d229df8614c06685fd266be1417210939b2261fffbab263",
    "mla_absorption": "4a5e41113d1df933c838513e4b105b12b23be1030a5630316bfaec8e16edbbbb",
    "preemption_policies": "28307a2b4af74888c992363959403305889ec433eee405e15e2d1389e779a057",
    "split_kv_decode": "8c599f70c3d90730c4dca58afdf4b4df31e56843051195b9bea401858edfedaa",
    "block_sharing_cow": "6fd749d6c6157e2081e4661049675af4c33d26fa862701f96072b65e099fff03",
    "fused_rope_positions": "fadeb73b6c7dd17e7cc8bd2fa69371e9e9f8153bd72ab327185b7ba27db1137b",
    "latency_period_owner": "940505cd595def276481deaea2fbc80dbd14b13dd81e6cbe08ed0eefcadc0ac4",
    "spec_acceptance_counters": "f594cc9512934ad6629c4f4ea628166f22f4de26ae0fafd393cef1a28e7c11ba",
    "trtllm_admission": "835d54dc79012da0febbc09d368f7cfbaf77064d7266c1bba14f2dafe14b9928",
    "fp8_blockscaled_gemm": "629dc6ca9ba6ea85ef11ab88046031dd74c4b0221297bdf5e6b46c2e11b5cc3d",
    "hol_blocking_policy": "10158e8fe9100b065003c9ee7ad9f13078f86ad3f44361289b9b2bbc7c1fcc93",
    "overload_rejection_rule": "ca24c1b468081bd28fbd68e6aa264c2c88f05deb4b7381495cf5b63422632357",
    "block_pool_hash_chain": "d7ebf553d2ae3d438508c41d81a439cf13cd37996552535c2338c5b0df3b2653",
    "chained_block_hash": "41ebb737456459cff0e39688e758b2dca9636eaa92a7cdd9aae81cc50cebe0aa",
    "continuous_batching_scheduler": "fb2436eb87b31e6b47cccfb8c226d8d6d466b7991ec15b6fa295bb923ea8ba49",
    "prefix_boundary_diagnosis": "48ccd96763dac48261d473ccbe8ec18d4ca1d8946fd99719a283fd42e28387b7",
    "radix_prefix_trie": "599c66790dbe95956e86170085c33b52d070fbcd355f90e7546889008ad665d7",
    "stop_strings_stream": "0c490c8e4964c35ddd60e554493194112023e7ed9e28d01aca533980766c7ee5",
}

STATEMENT = """Intro.

| | |
|---|---|
<!-- hint: the GPU's HBM bandwidth | parts: a, b | cost: 0.25 -->
| GPU | 3.35 TB/s |
<!-- /hint -->
| Model | 8B |

<!-- hint: the profile run | parts: b | cost: free | id: profile -->
- measured peak 4 GB
<!-- /hint -->

### Part 1

What is the budget?
"""


def test_round_trip() -> None:
    parsed = hints.parse(STATEMENT, ("a", "b"))
    assert parsed.practice == "".join(line for line in STATEMENT.splitlines(keepends=True)
                                      if "<!--" not in line)
    assert "3.35" not in parsed.interview and "measured" not in parsed.interview
    assert "| Model | 8B |" in parsed.interview and "### Part 1" in parsed.interview
    first, second = parsed.hints
    assert (first.id, first.title, first.parts, first.cost, first.free) == (
        "h1", "the GPU's HBM bandwidth", ("a", "b"), 0.25, False)
    assert first.body == "| GPU | 3.35 TB/s |"
    assert (second.id, second.cost, second.free, second.body) == (
        "profile", 0.0, True, "- measured peak 4 GB")


def test_no_markers_is_unchanged() -> None:
    text = "A statement.\n\n| | |\n|---|---|\n| x | 1 |\n<!-- part: other comment -->\n"
    parsed = hints.parse(text, ("a",))
    assert parsed.practice == parsed.interview == text and parsed.hints == ()


def test_a_table_left_without_rows_is_dropped() -> None:
    text = "### Known\n\n| | |\n|---|---|\n<!-- hint: t | parts: a | cost: 0.5 -->\n| x | 1 |\n" \
           "<!-- /hint -->\n\nAfter.\n"
    parsed = hints.parse(text, ("a",))
    assert "|" not in parsed.interview and "After." in parsed.interview
    assert hints.body_markdown(parsed.hints[0]) == "| | |\n|---|---|\n| x | 1 |"


def test_a_section_left_empty_loses_its_heading() -> None:
    text = ("## Scenario\n\nText.\n\n### What you know\n\n"
            "<!-- hint: t | parts: a | cost: 0.5 -->\n- a fact\n<!-- /hint -->\n\n"
            "### Assumptions\n\n- kept\n\n### Only sub\n\n#### Deeper\n\n"
            "<!-- hint: u | parts: a | cost: free -->\nx\n<!-- /hint -->\n\n"
            "```\n# a comment, not a heading\n```\n\n### Last\n\n"
            "<!-- hint: v | parts: a | cost: free -->\ny\n<!-- /hint -->\n")
    interview = hints.parse(text, ("a",)).interview
    assert "What you know" not in interview and "### Last" not in interview
    # A heading with text, a heading whose subsection has code, and the code stay.
    for kept in ("## Scenario", "### Assumptions", "- kept", "### Only sub", "#### Deeper",
                 "# a comment, not a heading"):
        assert kept in interview


def _empty_headings(markdown: str) -> list[str]:
    lines = [line for line in markdown.splitlines() if line.strip()]
    heading = [len(line) - len(line.lstrip("#")) if line.startswith("#") else 0
               for line in lines]
    return [line for i, line in enumerate(lines) if heading[i] and (
        i + 1 == len(lines) or 0 < heading[i + 1] <= heading[i])]


@pytest.mark.parametrize(("text", "message"), [
    ("<!-- hint: t | parts: a | cost: 0.5 -->\nx\n", "never closed"),
    ("x\n<!-- /hint -->\n", "without an open hint"),
    ("<!-- hint: t | parts: a | cost: 0.5 -->\n<!-- hint: u | parts: a | cost: 0.5 -->\n",
     "opens inside"),
    ("<!-- hint t | parts: a -->\nx\n<!-- /hint -->\n", "malformed"),
    ("<!-- hint: t | parts: a | cost: 0.5 --> trailing\nx\n<!-- /hint -->\n", "malformed"),
    ("<!-- hint: t | parts: a -->\nx\n<!-- /hint -->\n", "no cost"),
    ("<!-- hint: t | cost: 0.5 -->\nx\n<!-- /hint -->\n", "no parts"),
    ("<!-- hint: | parts: a | cost: 0.5 -->\nx\n<!-- /hint -->\n", "needs a title"),
    ("<!-- hint: t | parts: a | cost: 0.5 | colour: red -->\nx\n<!-- /hint -->\n", "colour"),
    ("<!-- hint: t | parts: zz | cost: 0.5 -->\nx\n<!-- /hint -->\n", "unknown part(s) zz"),
    ("<!-- hint: t | parts: a | cost: 0 -->\nx\n<!-- /hint -->\n", "outside (0, 1]"),
    ("<!-- hint: t | parts: a | cost: 1.5 -->\nx\n<!-- /hint -->\n", "outside (0, 1]"),
    ("<!-- hint: t | parts: a | cost: -0.1 -->\nx\n<!-- /hint -->\n", "outside (0, 1]"),
    ("<!-- hint: t | parts: a | cost: lots -->\nx\n<!-- /hint -->\n", "not a number"),
    ("<!-- hint: t | parts: a | cost: 0.5 -->\n\n<!-- /hint -->\n", "is empty"),
    ("<!-- hint: t | parts: a | cost: 0.5 | id: x -->\ny\n<!-- /hint -->\n"
     "<!-- hint: u | parts: a | cost: 0.5 | id: x -->\ny\n<!-- /hint -->\n", "share an id"),
])
def test_malformed_markers_are_refused(text: str, message: str) -> None:
    with pytest.raises(hints.HintError, match="ex/statement.md") as err:
        hints.parse(text, ("a",), "ex/statement.md")
    assert message in str(err.value)


def test_cost_one_is_allowed_and_penalty_caps() -> None:
    text = ("<!-- hint: t | parts: a | cost: 1 -->\nx\n<!-- /hint -->\n"
            "<!-- hint: u | parts: a, b | cost: 0.5 -->\ny\n<!-- /hint -->\n"
            "<!-- hint: v | parts: b | cost: free -->\nz\n<!-- /hint -->\n")
    found = hints.parse(text, ("a", "b")).hints
    assert hints.penalty(found, {"h1", "h2", "h3"}, "a") == 1.0
    assert hints.penalty(found, {"h2", "h3"}, "b") == 0.5
    assert hints.penalty(found, {"h3"}, "b") == 0.0
    assert hints.credited(0.3, 0.5) == 0.0 and hints.credited(1.0, 0.25) == 0.75


def test_share_label() -> None:
    found = hints.parse(STATEMENT, ("a", "b")).hints
    assert hints.share_label(found[0], {"a": 2, "b": 3}) == "costs 25% of parts 2 and 3"
    assert hints.share_label(found[1], {"a": 2, "b": 3}) == "free"


def test_the_registry_names_the_exercise(tmp_path) -> None:
    import shutil

    folder = tmp_path / "max_concurrency"
    shutil.copytree(registry.get("max_concurrency").path, folder)
    statement = folder / "statement.md"
    statement.write_text(statement.read_text().replace("parts: ceiling", "parts: nope"))
    with pytest.raises(registry.ExerciseError, match=r"max_concurrency/statement.md.*nope"):
        registry.load(folder)


SPECS = registry.load_all()


@pytest.mark.parametrize("slug", sorted(SPECS))
def test_every_statement_parses(slug: str) -> None:
    spec = SPECS[slug]
    parsed = hints.parse(spec.statement_template, tuple(p.id for p in spec.parts), slug)
    # Every statement is converted: interview mode has something to hold back everywhere.
    assert parsed.hints, f"{slug}: statement.md marks no hint (exercises/README.md, Hints)"
    if slug in OLD_STATEMENTS:
        digest = hashlib.sha256(parsed.practice.encode()).hexdigest()
        assert digest == OLD_STATEMENTS[slug], f"{slug}: practice mode changed the statement"
    for variant in ("canonical", 1, 2, 3):
        params = registry.params_for(spec, variant)
        solution = registry.solve(spec, params)
        rendered = hints.parse(templating.render(spec.statement_template, params, solution))
        # Markers are whole lines no placeholder touches: rendering then stripping is the old
        # statement rendered.
        assert rendered.practice == templating.render(parsed.practice, params, solution)
        assert [h.id for h in rendered.hints] == [h.id for h in parsed.hints]
        # Interview mode never shows a heading over nothing (a section that was all hints).
        assert not _empty_headings(rendered.interview), slug
