"""Q41 (stop_strings_stream): the canonical trace, sensible variants, and the code part's own
machinery run in-process on trusted code only (the reference, our mutants, the driver).

The reference streamer is also checked against a brute-force oracle written here from the rules
in the statement, so the hold-back the checks demand is the one the statement promises.
"""
from __future__ import annotations

import codecs
import json
import random
from pathlib import Path
from typing import Any

import pytest

from exercises import templating
from exercises.stop_strings_stream import exercise as ex
from tests.exercises.support import code_part

FOLDER = Path(ex.__file__).resolve().parent
CODE = FOLDER / "code"
SEED = 12345


CODE_PART = code_part("stop_strings_stream")
checks, driver, reference = CODE_PART.checks, CODE_PART.driver, CODE_PART.reference


all_cases, expected = CODE_PART.fixtures(SEED)


# --- an oracle written from the statement's rules -------------------------------------------

def _oracle(tokens: list[bytes], stops: list[str], include: bool) -> tuple[list[str], str, str | None]:
    """Per-push deltas, finish() text and stop reason, by brute force over every prefix."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text, sent, deltas = "", 0, []
    for tok in tokens:
        text += dec.decode(tok)
        matches = [(text.find(s) + len(s), -len(s), s) for s in stops if s in text]
        if matches:
            end, _, stop = min(matches)
            cut = end if include else end - len(stop)
            deltas.append(text[sent:cut])
            return deltas + [""] * (len(tokens) - len(deltas)), "", stop
        held = 0
        if not include:
            held = max([k for s in stops for k in range(len(s)) if k <= len(text)
                        and text.endswith(s[:k])], default=0)
        deltas.append(text[sent:len(text) - held])
        sent = len(text) - held
    text += dec.decode(b"", final=True)
    matches = [(text.find(s) + len(s), -len(s), s) for s in stops if s in text]
    if matches:
        end, _, stop = min(matches)
        return deltas, text[sent:end if include else end - len(stop)], stop
    return deltas, text[sent:], None


def test_reference_passes_every_case(all_cases: list[dict[str, Any]],
                                     expected: list[dict[str, Any]]) -> None:
    for case, exp in zip(all_cases, expected, strict=True):
        out = exp["output"]
        if "stream" not in out:
            assert out["stream_error"].startswith("ValueError"), case
            assert out["reference_output_error"].startswith("ValueError"), case
            continue
        stream = out["stream"]
        # The stream adds up to the whole-text reference (incremental == whole-buffer decoding).
        assert ["".join(stream["deltas"]) + stream["final"], stream["stop_reason"]] == \
            out["reference_output"], case


def test_reference_matches_the_oracle(all_cases: list[dict[str, Any]],
                                      expected: list[dict[str, Any]]) -> None:
    for case, exp in zip(all_cases, expected, strict=True):
        stream = exp["output"].get("stream")
        if stream is None:
            continue
        inp = case["input"]
        tokens = [bytes.fromhex(h) for h in inp["tokens"]]
        deltas, final, reason = _oracle(tokens, inp["stops"], inp["include_stop"])
        assert (stream["deltas"], stream["final"], stream["stop_reason"]) == \
            (deltas, final, reason), case



def test_smallest_failing_case_is_reported(all_cases: list[dict[str, Any]],
                                           expected: list[dict[str, Any]]) -> None:
    # Break exactly two cases of different sizes; the message must name the smaller one.
    got = [dict(e) for e in expected]
    streamy = [i for i, e in enumerate(expected) if "stream" in e["output"]]
    small, big = streamy[5], streamy[-1]
    for i in (small, big):
        out = json.loads(json.dumps(expected[i]["output"]))
        out["stream"]["final"] += "!"
        got[i] = {"output": out}
    results = {c.name: c for c in checks.check(all_cases, got, expected, ex.CANONICAL)}
    msg = results["concatenated output matches"].message
    assert msg.startswith("2 of ")
    assert checks.describe(all_cases[small]) in msg


# --- the hidden cases ------------------------------------------------------------------------

def test_hidden_cases_are_deterministic_per_seed() -> None:
    CODE_PART.assert_hidden_cases_seeded()


def test_hidden_cases_cover_the_edges(all_cases: list[dict[str, Any]]) -> None:
    hidden = checks.hidden_cases(ex.CANONICAL, SEED)
    ids = [c["id"] for c in hidden]
    assert len(ids) == len(set(ids))
    assert len(set(ids) | {c["id"] for c in checks.public_cases(ex.CANONICAL)}) == \
        len(ids) + 3
    for name in ("stop-split-over-three-tokens", "overlapping-stops", "stop-is-suffix-of-another",
                 "non-ascii-stop-split-bytes", "invalid-byte-ff", "truncated-char-at-end",
                 "lone-continuation-byte", "empty-tokens", "stop-at-first-byte",
                 "push-after-stop", "shorter-stop-completes-first", "tie-goes-to-longest"):
        assert f"edge-{name}" in ids and f"edge-{name}-include" in ids, name
    assert "edge-empty-stop-alone" in ids
    n_random = sum(1 for i in ids if i.startswith("random-"))
    assert 150 <= n_random <= 300
    # Smaller cases first, so a failing student sees a small example.
    keys = [checks.size_key(c) for c in hidden]
    assert keys == sorted(keys)
    # The random cases exercise what they are meant to.
    inputs = [c["input"] for c in hidden if c["id"].startswith("random-")]
    assert any(len(i["stops"]) >= 2 for i in inputs)
    assert any(i["include_stop"] for i in inputs) and any(not i["include_stop"] for i in inputs)
    assert any("ff" in "".join(i["tokens"]) for i in inputs)
    assert any("" in i["tokens"] for i in inputs)


def test_public_cases_show_the_trace_both_ways() -> None:
    cases = checks.public_cases(ex.CANONICAL)
    assert [c["input"]["include_stop"] for c in cases[:2]] == [False, True]
    assert cases[0]["input"]["tokens"] == ex.CANONICAL["tokens"]
    variant = ex.generate(random.Random(3))
    vcases = checks.public_cases(variant)
    assert vcases[0]["input"]["tokens"] == variant["tokens"]
    assert vcases[2]["input"]["tokens"] == ex.CANONICAL["tokens"]  # canonical stays public


def test_checks_canonical_matches_the_exercise() -> None:
    assert [t.hex() for t in checks.CANONICAL_TOKENS] == ex.CANONICAL["tokens"]
    assert list(checks.CANONICAL_STOPS) == ex.CANONICAL["stops"]


# --- the canonical trace ---------------------------------------------------------------------

def test_canonical_trace_is_the_facts_table() -> None:
    t = ex.trace(ex.CANONICAL)
    assert t["deltas"] == ["Price:", " 5", "", "€", "", "", "", ""]
    assert t["final"] == ""
    assert t["stopped_after"] == [False] * 6 + [True, True]
    assert t["stop_reason"] == "###"
    assert "".join(t["deltas"]) == "Price: 5€"
    assert t["include_deltas"] == ["Price:", " 5", "", "€", "#", "#", "#", ""]
    s = ex.solve(ex.CANONICAL)
    assert s["received_after"].value == 9
    assert (s["stop_token"], s["stop_start"], s["fixed_at_ask"]) == (7, 9, 8)
    assert s["output_md"] == '`"Price: 5€"`'
    assert s["output_include_md"] == '`"Price: 5€###"`'
    # vLLM's fixed buffer holds "e:" after the first token and "5€" after the fourth (facts note).
    rows = s["table"].splitlines()
    assert rows[2].endswith('`"Pric"` |') and rows[5].endswith('`"Price: "` |')
    wrong = {m.name: m.answer for m in ex.mistakes(ex.CANONICAL) if m.part == "received_after"}
    assert wrong == {"no_holdback": 10, "fixed_buffer": 8, "bytes": 11}


def test_reference_rejects_empty_stops() -> None:
    with pytest.raises(ValueError):
        reference.StopStreamer(["###", ""])
    with pytest.raises(ValueError):
        reference.reference_output([b"a"], [""], False)


# --- variants --------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(60))
def test_variants_are_sensible(seed: int) -> None:
    p = ex.generate(random.Random(seed))
    t = ex.trace(p)
    tokens = [bytes.fromhex(h) for h in p["tokens"]]
    stop = p["stops"][0]
    k = p["ask_after"]
    # Some token cannot be decoded on its own (a character is split) ...
    assert any(_undecodable(tok) for tok in tokens)
    # ... the stop completes, over two or three tokens, and later tokens are dropped.
    at = t["stopped_after"].index(True)
    assert 2 <= at + 1 - (k - 1) <= 3
    assert t["stop_reason"] == stop and at < len(tokens) - 1
    assert t["deltas"][at + 1:] == [""] * (len(tokens) - at - 1)
    # The asked-about token starts the stop, and something is held back there.
    assert stop.startswith(tokens[k - 1].decode())
    s = ex.solve(p)
    assert s["received_chars"] < s["decoded_at_ask_chars"]
    number = [m for m in ex.mistakes(p) if m.part == "received_after"]
    values = [m.answer for m in number]
    assert len(number) >= 2 and len(set(values)) == len(values)
    assert s["received_after"].value not in values


def _undecodable(tok: bytes) -> bool:
    try:
        tok.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_canonical_templates_render() -> None:
    s = ex.solve(ex.CANONICAL)
    statement = templating.render((FOLDER / "statement.md").read_text(encoding="utf-8"),
                                  ex.CANONICAL, s, "statement.md")
    assert '`b"\\xe2\\x82"`' in statement and "token 5" in statement
    solution = templating.render((FOLDER / "solution.md").read_text(encoding="utf-8"),
                                 ex.CANONICAL, s, "solution.md")
    assert "**9 characters**" in solution


# --- the driver's protocol (run on the reference, outside any sandbox: trusted code) ---------

# (The stdin/stdout protocol now lives in runners/relay.py + runners/case_loop.py; printing
# students are covered by tests/graders/test_result_channel.py.)


def test_driver_reports_bad_return_types() -> None:
    class Bad:
        class StopStreamer:
            def __init__(self, stops: list[str], include_stop: bool = False) -> None:
                self.stopped, self.stop_reason = False, None

            def push(self, token_bytes: bytes) -> bytes:
                return token_bytes

            def finish(self) -> str:
                return ""

        @staticmethod
        def reference_output(tokens: list[bytes], stops: list[str], include: bool) -> str:
            return "text"

    out = driver.run_case(Bad, checks.public_cases(ex.CANONICAL)[0]["input"])
    assert out["stream_error"].startswith("TypeError: push() of token 0 returned bytes")
    assert out["reference_output_error"].startswith("TypeError")


def test_forged_or_malformed_lines_count_as_failures(all_cases: list[dict[str, Any]],
                                                     expected: list[dict[str, Any]]) -> None:
    # Student code can write to fd 1 itself; a line of the wrong shape must fail, not crash.
    bad = [{"output": {"stream": {"deltas": 5}}}, {"output": []}, {"error": 3}, "text",
           {"output": {"stream": None, "stream_error": "x", "reference_output": ["a"]}}]
    results = CODE_PART.assert_lines_fail_every_check(bad, all_cases, expected)
    assert "malformed" in results[0].message


def test_every_mutant_failure_names_its_smallest_case() -> None:
    # Each check a mutant (code/mutants.toml) fails names the smallest token list.
    for name, c in CODE_PART.failures():
        assert "Smallest:" in c.message and "tokens [" in c.message, (name, c.message)
