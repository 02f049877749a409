"""Test cases and checks for the stop-string streamer (runs in the worker, never in the sandbox).

A case input is {"tokens": [hex, ...], "stops": [str, ...], "include_stop": bool}. Each result
handed to `check()` is {"output": <driver.run_case dict>} or {"error": "..."}; `expected` holds the
reference's results for the same cases. Every check reports the smallest case it fails on.
"""
from __future__ import annotations

import codecs
import json
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from graders import checkkit
from graders.base import Check

# The blurb's trace: "Price:" " 5" then the euro sign in two tokens, then the stop in three.
CANONICAL_TOKENS: tuple[bytes, ...] = (
    b"Price:", b" 5", b"\xe2\x82", b"\xac", b"#", b"#", b"#", b"ignored",
)
CANONICAL_STOPS: tuple[str, ...] = ("###",)

# A stop that completes in the middle of a token, with more text after it in the same token.
MID_TOKEN_TOKENS: tuple[bytes, ...] = (b"Answer: 4", b"2\n", b"\nQ: next?", b" more")
MID_TOKEN_STOPS: tuple[str, ...] = ("\n\nQ:", "END")

# Random cases draw from a small alphabet so stops actually occur: ASCII that stops use, two
# 2-/3-byte characters, a 4-byte emoji and a newline.
ALPHABET: tuple[str, ...] = ("a", "b", "#", "#", " ", "\n", "x", "€", "é", "😀")
# Bytes that are not valid UTF-8 where they land: a never-valid byte, a truncated euro sign, a lone
# continuation byte, a truncated emoji.
INVALID_BYTES: tuple[bytes, ...] = (b"\xff", b"\xe2\x82", b"\x80", b"\xf0\x9f")
RANDOM_CASES = 240
# At most 20 characters of 4 bytes plus two 2-byte injections. A seed gives the same cases in every
# process: graders.checkkit.draw leaves out the literals Hypothesis would collect from the loaded
# source files (its "local constants"), which differ between the worker, the CLI and the tests.
MAX_CHARS = 20

Case = dict[str, Any]


def make_case(case_id: str, tokens: list[bytes] | tuple[bytes, ...], stops: list[str] | tuple[str, ...],
              include_stop: bool) -> Case:
    return {"id": case_id, "input": {"tokens": [t.hex() for t in tokens], "stops": list(stops),
                                     "include_stop": bool(include_stop)}}


def _tokens(case_input: dict[str, Any]) -> list[bytes]:
    return [bytes.fromhex(h) for h in case_input["tokens"]]


def size_key(case: Case) -> tuple[int, int, int, str]:
    """Smaller cases first: total bytes, then tokens, then stop characters."""
    inp = case["input"]
    return (sum(len(h) // 2 for h in inp["tokens"]), len(inp["tokens"]),
            sum(len(s) for s in inp["stops"]), json.dumps(inp, sort_keys=True))


def _params_trace(params: dict[str, Any]) -> tuple[list[bytes], list[str]]:
    if "tokens" in params and "stops" in params:
        return [bytes.fromhex(h) for h in params["tokens"]], list(params["stops"])
    return list(CANONICAL_TOKENS), list(CANONICAL_STOPS)


def public_cases(params: dict[str, Any]) -> list[Case]:
    """The examples a student can Run: the variant's trace both ways, plus one more."""
    tokens, stops = _params_trace(params)
    cases = [make_case("example-1", tokens, stops, False), make_case("example-2", tokens, stops, True)]
    if (tokens, stops) != (list(CANONICAL_TOKENS), list(CANONICAL_STOPS)):
        cases.append(make_case("example-3", CANONICAL_TOKENS, CANONICAL_STOPS, False))
    else:
        cases.append(make_case("example-3", MID_TOKEN_TOKENS, MID_TOKEN_STOPS, False))
    return cases


# Hand-written edge cases: (name, tokens, stops). Each runs with include_stop False and True.
EDGE_CASES: tuple[tuple[str, tuple[bytes, ...], tuple[str, ...]], ...] = (
    ("no-tokens", (), ("###",)),
    ("no-stops", (b"Price:", b" 5", b"\xe2\x82", b"\xac"), ()),
    ("stop-split-over-three-tokens", (b"x", b"#", b"#", b"#", b"y"), ("###",)),
    ("stop-split-over-two-tokens", (b"Hi", b" EN", b"D tail"), ("END",)),
    ("stop-at-first-byte", (b"###rest", b"more"), ("###",)),
    ("stop-mid-token-then-text", (b"x", b"##", b"#yz", b"w"), ("###",)),
    ("stop-never-completes", (b"ab", b"#", b"#"), ("###",)),
    ("prefix-breaks-then-restarts", (b"#", b"#", b"a", b"#", b"##", b"b"), ("###",)),
    ("self-overlapping-prefix", (b"a", b"a", b"a", b"b", b"c"), ("aab",)),
    ("overlapping-stops", (b"xa", b"b", b"cd"), ("abc", "bcd")),
    ("overlapping-stops-one-token", (b"xabcd",), ("bcd", "abc")),
    ("stop-is-suffix-of-another", (b"Hi\nUser: x",), ("User:", "\nUser:")),
    ("stop-is-suffix-of-another-split", (b"Hi", b"\n", b"User", b":"), ("User:", "\nUser:")),
    ("stop-is-prefix-of-another", (b"xab", b"c"), ("abc", "ab")),
    ("shorter-stop-completes-first", (b"Sure.\nUser: hi",), ("\nUser:", "User")),
    ("tie-goes-to-longest", (b"xab", b"!"), ("b", "ab")),
    ("duplicate-stops", (b"a#", b"#b"), ("##", "##")),
    ("non-ascii-stop-split-bytes", (b"5", b"\xe2\x82", b"\xac", b"!"), ("\u20ac",)),
    ("non-ascii-stop-prefix", (b"\xe2\x82\xac", b"ur", b"o!"), ("\u20acuro", "\u20ac!")),
    ("stop-after-split-char", (b"caf\xc3", b"\xa9", b"</", b"s>", b"x"), ("</s>",)),
    ("emoji-over-three-tokens", (b"ok ", b"\xf0\x9f", b"\x98", b"\x80!"), ("\U0001F600",)),
    ("invalid-byte-ff", (b"a\xff", b"b#", b"##c"), ("###",)),
    ("invalid-byte-before-stop", (b"\xff#", b"#"), ("##",)),
    ("truncated-char-at-end", (b"ok", b"\xe2\x82"), ("###",)),
    ("truncated-char-after-held-prefix", (b"#", b"\xe2\x82"), ("##",)),
    ("lone-continuation-byte", (b"\x80a", b"b", b"c"), ("ab",)),
    ("empty-tokens", (b"Hi", b"", b"#", b"", b"##", b""), ("###",)),
    ("only-empty-tokens", (b"", b""), ("a",)),
    ("push-after-stop", (b"a##", b"#", b"more", b"text"), ("###",)),
    ("newline-stop", (b"line one\n", b"\nline two"), ("\n\n",)),
    ("canonical", CANONICAL_TOKENS, CANONICAL_STOPS),
    ("mid-token-stop", MID_TOKEN_TOKENS, MID_TOKEN_STOPS),
)
# Empty stop strings must be rejected (ValueError), whatever else is in the list.
EMPTY_STOP_CASES: tuple[tuple[str, tuple[bytes, ...], tuple[str, ...]], ...] = (
    ("empty-stop-alone", (b"abc",), ("",)),
    ("empty-stop-among-others", (b"a#", b"##"), ("###", "")),
)


@st.composite
def _random_case(draw: st.DrawFn) -> tuple[list[bytes], list[str], bool]:
    text = "".join(draw(checkkit.picks(ALPHABET, max_size=MAX_CHARS)))
    data = bytearray(text.encode("utf-8"))
    for _ in range(draw(checkkit.sampled_from((0, 0, 0, 1, 2)))):
        pos = draw(checkkit.integers(0, len(data)))
        data[pos:pos] = draw(checkkit.sampled_from(INVALID_BYTES))
    assert len(data) < 100  # see MAX_CHARS
    # Cut points at arbitrary byte offsets (so characters split); repeats make empty tokens.
    cuts = sorted(draw(checkkit.lists(checkkit.integers(0, len(data)), max_size=len(data) + 1)))
    bounds = [0, *cuts, len(data)]
    tokens = [bytes(data[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    stops: list[str] = []
    for _ in range(draw(checkkit.integers(0, 3))):
        if text and draw(checkkit.booleans()):
            # A piece of the text itself, so the stop really occurs.
            i = draw(checkkit.integers(0, len(text) - 1))
            j = draw(checkkit.integers(i + 1, min(len(text), i + 4)))
            stops.append(text[i:j])
        else:
            stops.append("".join(draw(checkkit.picks(ALPHABET, min_size=1, max_size=4))))
    return tokens, stops, draw(checkkit.booleans())


@lru_cache(maxsize=16)
def _random_inputs(seed: int, n: int) -> tuple[str, ...]:
    """n Hypothesis draws for this seed, as JSON strings (hashable, and copied on every use)."""
    return tuple(json.dumps(make_case("", tokens, stops, include)["input"], sort_keys=True)
                 for tokens, stops, include in checkkit.draw(_random_case(), seed, n))


def hidden_cases(params: dict[str, Any], seed: int) -> list[Case]:
    """Edge cases plus Hypothesis-generated ones, deterministic for a seed, smallest first."""
    cases: list[Case] = []
    for name, tokens, stops in EDGE_CASES:
        cases.append(make_case(f"edge-{name}", tokens, stops, False))
        cases.append(make_case(f"edge-{name}-include", tokens, stops, True))
    for name, tokens, stops in EMPTY_STOP_CASES:
        cases.append(make_case(f"edge-{name}", tokens, stops, False))
    return checkkit.with_draws(cases, _random_inputs(int(seed), RANDOM_CASES), size_key)


# ---------------------------------------------------------------- checks


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(case: Case) -> str:
    inp = case["input"]
    toks = "[" + ", ".join(repr(t) for t in _tokens(inp)) + "]"
    if len(toks) > 400:
        toks = toks[:397] + "..."
    return f"tokens {toks}, stops {_short(inp['stops'])}, include_stop={inp['include_stop']}"


def _decoded_prefixes(tokens: list[bytes]) -> list[str]:
    """The text an incremental decoder has produced after each push."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out, text = [], ""
    for tok in tokens:
        text += dec.decode(tok, final=False)
        out.append(text)
    return out


def _error_type(message: str) -> str:
    return message.split(":", 1)[0].strip()


# name -> (weight, message when every applicable case passes)
CHECKS: tuple[tuple[str, float, str], ...] = (
    ("no crash", 1.0, "push() and finish() ran on every case without an exception."),
    ("concatenated output matches", 3.0,
     "What push() and finish() returned adds up to the whole-text reference on every case."),
    ("stops at the right token with the right stop_reason", 1.0,
     "`stopped` turned True at the right token and `stop_reason` named the right stop."),
    ("never sends text a stop later removes", 1.0,
     "After every push the text sent so far was a prefix of the final output."),
    ("minimal hold-back after every push", 1.0,
     "After every push you held back exactly the text that could still become a stop."),
    ("nothing after the stop", 1.0, "Tokens after the stop and finish() added nothing."),
    ("reference_output function", 1.0, "reference_output() matched on every case."),
    ("rejects empty stop strings", 1.0, "An empty stop string raised ValueError."),
)


def _is_str_or_none(x: Any) -> bool:
    return x is None or isinstance(x, str)


def well_formed(result: Any, n_tokens: int) -> bool:
    """Whether a result line has the shape the driver writes (lines can be forged from inside)."""
    out = checkkit.envelope(result)
    if not isinstance(out, dict):
        return out is not None  # a run's error text is well formed; any other shape is not
    stream = out.get("stream")
    if stream is None:
        ok = isinstance(out.get("stream_error"), str)
    else:
        ok = (isinstance(stream, dict)
              and isinstance(stream.get("deltas"), list) and len(stream["deltas"]) == n_tokens
              and all(isinstance(d, str) for d in stream["deltas"])
              and isinstance(stream.get("stopped_after"), list)
              and len(stream["stopped_after"]) == n_tokens
              and all(isinstance(b, bool) for b in stream["stopped_after"])
              and isinstance(stream.get("final"), str) and isinstance(stream.get("stopped"), bool)
              and _is_str_or_none(stream.get("stop_reason")))
    ro = out.get("reference_output")
    if ro is None:
        ok = ok and isinstance(out.get("reference_output_error"), str)
    else:
        ok = ok and isinstance(ro, list) and len(ro) == 2 and isinstance(ro[0], str) \
            and _is_str_or_none(ro[1])
    return ok


def _judge_case(case: Case, got: dict[str, Any], exp: dict[str, Any],
                v: checkkit.Verdicts) -> None:
    inp = case["input"]
    tokens = _tokens(inp)
    if not well_formed(got, len(tokens)):
        got = {"error": "the output line for this case is malformed"}
    e_out = exp["output"]
    e_stream = e_out.get("stream")
    where = describe(case)

    if "error" in got:
        # The driver produced nothing usable for this case: every check that applies fails.
        msg = f"{got['error']} — on {where}"
        names = ["reference_output function"]
        names += ([n for n, _, _ in CHECKS[:6]] if e_stream is not None
                  else ["rejects empty stop strings"])
        for name in names:
            v.add(name, case, False, msg)
        return
    g_out = got["output"]
    g_stream = g_out.get("stream")

    # reference_output: value, or the same exception type as the reference.
    if "reference_output" in e_out:
        exp_ro = tuple(e_out["reference_output"])
        if "reference_output" in g_out:
            got_ro = tuple(g_out["reference_output"])
            ok = got_ro == exp_ro
            msg = "" if ok else (f"reference_output returned {_short(got_ro)}, expected "
                                 f"{_short(exp_ro)} — on {where}")
        else:
            ok = False
            msg = f"reference_output raised {g_out.get('reference_output_error')} — on {where}"
        v.add("reference_output function", case, ok, msg, details={"expected": list(exp_ro)})
    else:
        want = _error_type(e_out["reference_output_error"])
        err = g_out.get("reference_output_error")
        ok = err is not None and _error_type(err) == want
        msg = "" if ok else (f"reference_output should raise {want} here, but it "
                             f"{'raised ' + err if err else 'returned ' + _short(g_out.get('reference_output'))}"
                             f" — on {where}")
        v.add("reference_output function", case, ok, msg)

    if e_stream is None:
        # The reference rejected the input (an empty stop string): so must the student.
        want = _error_type(e_out["stream_error"])
        err = g_out.get("stream_error")
        ok = err is not None and _error_type(err) == want
        msg = "" if ok else (f"StopStreamer({_short(inp['stops'])}) should raise {want} (an empty "
                             f"stop would match before every output), but it "
                             f"{'raised ' + err if err else 'was accepted'} — on {where}")
        v.add("rejects empty stop strings", case, ok, msg)
        return

    e_final = "".join(e_stream["deltas"]) + e_stream["final"]
    if g_stream is None:
        msg = f"push()/finish() raised {g_out.get('stream_error')} — on {where}"
        for name, _, _ in CHECKS[:6]:
            v.add(name, case, False, msg)
        return
    v.add("no crash", case, True)

    g_final = "".join(g_stream["deltas"]) + g_stream["final"]
    ok = g_final == e_final
    v.add("concatenated output matches", case, ok,
          "" if ok else f"expected the client to end up with {_short(e_final)}, got "
                        f"{_short(g_final)} — on {where}",
          details={"expected": e_final, "got": g_final})

    # Where the stream stopped, and why.
    e_at = e_stream["stopped_after"].index(True) if True in e_stream["stopped_after"] else None
    g_at = g_stream["stopped_after"].index(True) if True in g_stream["stopped_after"] else None
    problems = []
    if e_at != g_at:
        def at(i: int) -> str:
            return f"after push {i + 1} ({tokens[i]!r})"
        if e_at is None:
            problems.append(f"`stopped` should stay False during the pushes, but it turned True "
                            f"{at(g_at)}")  # type: ignore[arg-type]
        else:
            problems.append(f"`stopped` should turn True {at(e_at)}, but "
                            + ("it never did" if g_at is None else f"it did {at(g_at)}"))
    if g_stream["stopped"] != e_stream["stopped"]:
        problems.append(f"after finish() `stopped` is {g_stream['stopped']}, expected "
                        f"{e_stream['stopped']}")
    if g_stream["stop_reason"] != e_stream["stop_reason"]:
        problems.append(f"stop_reason is {_short(g_stream['stop_reason'])}, expected "
                        f"{_short(e_stream['stop_reason'])}")
    v.add("stops at the right token with the right stop_reason", case, not problems,
          "; ".join(problems) + f" — on {where}" if problems else "")

    # Safety and minimality, push by push, up to the push that completes the stop.
    decoded = _decoded_prefixes(tokens)
    last = len(tokens) if e_at is None else e_at  # pushes before the stop push
    sent_g = sent_e = ""
    leak = hold = ""
    for i in range(len(tokens)):
        sent_g += g_stream["deltas"][i]
        sent_e += e_stream["deltas"][i]
        if not leak and not e_final.startswith(sent_g):
            leak = (f"after push {i + 1} ({tokens[i]!r}) you had sent {_short(sent_g)}, but the "
                    f"final output is {_short(e_final)}: text that is sent cannot be taken back "
                    f"— on {where}")
        if not hold and i < last and sent_g != sent_e:
            held_g = decoded[i][len(sent_g):] if decoded[i].startswith(sent_g) else None
            held_e = decoded[i][len(sent_e):]
            if held_g is None:
                hold = (f"after push {i + 1} ({tokens[i]!r}) you had sent {_short(sent_g)}, which "
                        f"is not a prefix of the decoded text {_short(decoded[i])}")
            else:
                hold = (f"after push {i + 1} ({tokens[i]!r}) the decoded text is "
                        f"{_short(decoded[i])}; you held back {_short(held_g)} but only "
                        f"{_short(held_e)} can still become part of a stop, so the client should "
                        f"have {_short(sent_e)}")
            hold += f" — on {where}"
    v.problem("never sends text a stop later removes", case, leak)
    v.problem("minimal hold-back after every push", case, hold)

    if e_at is not None:
        extra = [(f"push {j + 1} ({tokens[j]!r}) returned {_short(g_stream['deltas'][j])}")
                 for j in range(e_at + 1, len(tokens)) if g_stream["deltas"][j]]
        if g_stream["final"]:
            extra.append(f"finish() returned {_short(g_stream['final'])}")
        msg = ""
        if extra:
            msg = (f"the stop completed at push {e_at + 1} ({tokens[e_at]!r}), so everything after "
                   f"it must be ignored, but {extra[0]} — on {where}")
        v.add("nothing after the stop", case, not extra, msg)


def check(cases: list[Case], got: list[dict[str, Any]], expected: list[dict[str, Any]],
          params: dict[str, Any]) -> list[Check]:
    """Named checks over all cases; each failure names the smallest case it fails on."""
    v = checkkit.Verdicts(size_key)
    for case, g, e in zip(cases, got, expected, strict=True):
        _judge_case(case, g, e, v)
    return v.checks(CHECKS)
