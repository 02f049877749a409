"""Q41: stop strings in a token stream.

A byte-level tokenizer hands the server a few bytes per token. The server must turn them into text
deltas for the client while (a) a multi-byte character can arrive split across tokens and (b) a
stop string can arrive split across tokens, after its first part would already have been sent.
The answer: decode with an incremental UTF-8 decoder, hold back exactly the longest suffix that
is still a proper prefix of some stop, cut at the stop that completes first, and ignore everything
after it.

A variant is one generated trace: a short text with one multi-byte character cut inside its
bytes, then one stop string cut into two or three tokens, then a token or two the engine produced
after the stop. The number part asks how much text the client has right after the first piece
of the stop arrives; the simulations below give the reference and the counts each known mistake
produces. Everything is computed by the reference streamer in `code/reference.py`.
"""
from __future__ import annotations

import codecs
import random
from pathlib import Path
from types import ModuleType
from typing import Any

from exercises.feasibility import Claim
from exercises.file_module import load_file
from exercises.spec import Mistake, Quantity

HERE = Path(__file__).resolve().parent

# The blurb's trace (facts note Q41): the euro sign is E2 82 AC, cut after its second byte; the
# stop "###" arrives one character per token; "ignored" was generated after the stop.
CANONICAL: dict[str, Any] = {
    "tokens": [t.hex() for t in (b"Price:", b" 5", b"\xe2\x82", b"\xac", b"#", b"#", b"#",
                                 b"ignored")],
    "stops": ["###"],
    "include_stop": False,
    "ask_after": 5,
}

# Texts for variants, already cut into tokens; exactly one piece holds a multi-byte character,
# which generate() cuts inside its bytes. They end in a character no stop below starts with.
CONTEXTS: tuple[tuple[str, ...], ...] = (
    ("Price:", " 5", "€"),
    ("Total", ":", " 12", "€"),
    ("Caf", "é", " au", " lait"),
    ("Score", ":", " 9", " 😀"),
    ("Na", "ï", "ve", " Bayes"),
    ("Temp", ":", " 21", "°C"),
    ("Mood", ":", " 😀"),
    ("Danke", " sch", "ön"),
    ("Fare", ":", " 30", " €"),
)
# Stop strings of three or more characters: the first piece of the stop is then shorter than
# (longest stop - 1), so a fixed buffer holds back more than the minimum. No "|" (it would break
# the Markdown tables) and no newline (it would not show in the statement).
STOPS: tuple[str, ...] = ("###", "END", "</s>", "<eos>", "STOP")
AFTER_STOP: tuple[tuple[str, ...], ...] = (("ignored",), (" extra",), (" more", " text"),
                                           (" and", " so", " on"))


def _reference() -> ModuleType:
    """The reference streamer, loaded from code/reference.py (one implementation for both)."""
    return load_file("roofline_stop_strings_stream_reference", HERE / "code" / "reference.py")


def _split_inside_char(piece: str, rng: random.Random) -> list[bytes]:
    """Cut a piece's bytes into tokens, at least once inside its multi-byte character."""
    data = piece.encode("utf-8")
    # Byte offsets that fall inside a character (not on a character boundary).
    inside = [i for i in range(1, len(data)) if (data[i] & 0xC0) == 0x80]
    first = rng.choice(inside)
    cuts = {first}
    # A 4-byte emoji may arrive in three pieces.
    others = [i for i in inside if i != first]
    if others and rng.random() < 0.5:
        cuts.add(rng.choice(others))
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def generate(rng: random.Random) -> dict[str, Any]:
    context = rng.choice(CONTEXTS)
    tokens: list[bytes] = []
    for piece in context:
        if any(ord(ch) > 127 for ch in piece):
            tokens += _split_inside_char(piece, rng)
        else:
            tokens.append(piece.encode("utf-8"))
    stop = rng.choice(STOPS)
    # First piece: 1 .. len-2 characters; the rest in one or two more tokens.
    first = rng.randint(1, len(stop) - 2)
    rest = stop[first:]
    pieces = [stop[:first]]
    if len(rest) >= 2 and rng.random() < 0.5:
        cut = rng.randint(1, len(rest) - 1)
        pieces += [rest[:cut], rest[cut:]]
    else:
        pieces.append(rest)
    ask_after = len(tokens) + 1  # 1-based: the token carrying the stop's first piece
    tokens += [p.encode("utf-8") for p in pieces]
    tokens += [t.encode("utf-8") for t in rng.choice(AFTER_STOP)]
    return {"tokens": [t.hex() for t in tokens], "stops": [stop], "include_stop": False,
            "ask_after": ask_after}


# ------------------------------------------------------------------ display helpers


def q(text: str) -> str:
    """A string as a double-quoted literal, escapes visible."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'


def token_literal(tok: bytes) -> str:
    """A token the way the statement shows it: text if it decodes on its own, else bytes."""
    try:
        return q(tok.decode("utf-8"))
    except UnicodeDecodeError:
        body = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\x{b:02x}"
                       for b in tok)
        return f'b"{body}"'


def span(text: str) -> str:
    """Markdown inline code."""
    return f"`{text}`"


# ------------------------------------------------------------------ simulations


def _decoded_prefixes(tokens: list[bytes]) -> tuple[list[str], list[int]]:
    """Decoded text after each push, and how many bytes the decoder is still waiting on."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out, pending, text = [], [], ""
    for tok in tokens:
        text += dec.decode(tok)
        out.append(text)
        pending.append(len(dec.getstate()[0]))
    return out, pending


def trace(p: dict[str, Any]) -> dict[str, Any]:
    """Run the reference streamer over the variant and collect what each push did."""
    ref = _reference()
    tokens = [bytes.fromhex(h) for h in p["tokens"]]
    stops = list(p["stops"])
    streamer = ref.StopStreamer(stops, include_stop=p["include_stop"])
    deltas, stopped_after = [], []
    for tok in tokens:
        deltas.append(streamer.push(tok))
        stopped_after.append(streamer.stopped)
    final = streamer.finish()
    decoded, pending = _decoded_prefixes(tokens)
    include = ref.StopStreamer(stops, include_stop=True)
    include_deltas = [include.push(t) for t in tokens]
    return {"tokens": tokens, "deltas": deltas, "stopped_after": stopped_after, "final": final,
            "stop_reason": streamer.stop_reason, "include_deltas": include_deltas,
            "include_final": include.finish(), "decoded": decoded, "pending": pending}


def _fixed_buffer_sent(decoded: list[str], stops: list[str], stop_at: int | None,
                       stop_start: int) -> list[int]:
    """Characters a vLLM-style fixed buffer (longest stop - 1) has sent after each push.

    When the stop completes it, too, sends everything up to the stop's start.
    """
    hold = max((len(s) for s in stops), default=1) - 1
    sent, out = 0, []
    for i, text in enumerate(decoded):
        if stop_at is not None and i >= stop_at:
            sent = max(sent, stop_start)
        else:
            sent = max(sent, len(text) - hold)
        out.append(sent)
    return out


def _per_token_text(tokens: list[bytes]) -> str:
    return "".join(t.decode("utf-8", errors="replace") for t in tokens)


def solve(p: dict[str, Any]) -> dict[str, Any]:
    t = trace(p)
    tokens, deltas, decoded = t["tokens"], t["deltas"], t["decoded"]
    stops = list(p["stops"])
    k = int(p["ask_after"])  # 1-based
    stop_at = t["stopped_after"].index(True) if True in t["stopped_after"] else None
    output = "".join(deltas) + t["final"]
    output_include = "".join(t["include_deltas"]) + t["include_final"]
    stop_start = len(output)  # the stop begins right after the excluded-stop output
    fixed = _fixed_buffer_sent(decoded, stops, stop_at, stop_start)

    received = "".join(deltas[:k])
    held_at_ask = decoded[k - 1][len(received):]

    # Per-token table: what the reference does, next to the fixed buffer.
    rows = ["| # | token | decoded so far | held back | push returns | client has | "
            "fixed buffer: client has |",
            "|---|---|---|---|---|---|---|"]
    sent = ""
    for i, tok in enumerate(tokens):
        sent += deltas[i]
        if stop_at is not None and i > stop_at:
            rows.append(f"| {i + 1} | {span(token_literal(tok))} | (ignored: generated after "
                        f"the stop) | | {span(q(''))} | {span(q(sent))} | |")
            continue
        if stop_at is not None and i == stop_at:
            state = f"{span(q(decoded[i]))}: {span(q(t['stop_reason']))} completes"
            held = "(cut)"
        else:
            waiting = t["pending"][i]
            state = span(q(decoded[i])) + (
                f" + {waiting} byte{'s' if waiting > 1 else ''} of an unfinished character"
                if waiting else "")
            held = span(q(decoded[i][len(sent):]))
        rows.append(f"| {i + 1} | {span(token_literal(tok))} | {state} | {held} | "
                    f"{span(q(deltas[i]))} | {span(q(sent))} | "
                    f"{span(q(decoded[i][:fixed[i]]))} |")

    split_chars = sorted({ch for ch in "".join(decoded[-1:]) if ord(ch) > 127})
    n_stop_tokens = (stop_at + 1 - (k - 1)) if stop_at is not None else 0
    return {
        # Part answers.
        "received_after": Quantity(len(received), ""),
        "holdback_rule": "longest_prefix",
        "which_stop": "completes_first",
        "streamer": "code/reference.py",
        "why": MODEL_ANSWER,
        # Given in the statement.
        "tokens_md": ", ".join(span(token_literal(tok)) for tok in tokens),
        "n_tokens": len(tokens),
        "stops_md": ", ".join(span(q(s)) for s in stops),
        "stop": stops[0],
        "stop_md": span(q(stops[0])),
        "ask_token_md": span(token_literal(tokens[k - 1])),
        "split_chars_md": ", ".join(span(q(ch)) for ch in split_chars),
        "n_stop_tokens": n_stop_tokens,
        # Worked solution.
        "table": "\n".join(rows),
        "output_md": span(q(output)),
        "output_include_md": span(q(output_include)),
        "include_last_md": span(q(t["include_deltas"][stop_at])) if stop_at is not None else "",
        "stop_token": (stop_at + 1) if stop_at is not None else 0,
        "stop_start": stop_start,
        "received_md": span(q(received)),
        "received_chars": len(received),
        "received_bytes": len(received.encode("utf-8")),
        "held_at_ask_md": span(q(held_at_ask)),
        "decoded_at_ask_md": span(q(decoded[k - 1])),
        "decoded_at_ask_chars": len(decoded[k - 1]),
        "fixed_hold": max(len(s) for s in stops) - 1,
        "fixed_at_ask": fixed[k - 1],
        "fixed_at_ask_md": span(q(decoded[k - 1][:fixed[k - 1]])),
        "per_token_chars": len(_per_token_text(tokens[:k])) - len(held_at_ask),
    }


MODEL_ANSWER = """\
**Minimal hold-back.** A character can only be cut later if a stop could start at it, which
means the text from it to the end is still a proper prefix of some stop. Anything before the
longest such suffix is final, so holding it back only adds latency. A fixed buffer of (longest
stop − 1) characters is safe but delays every chunk, and with a long stop such as
`"<|im_end|>"` that is nine characters of every reply sitting on the server needlessly.

**Incremental UTF-8 decoding.** A byte-level token can end in the middle of a character.
Decoding each token on its own turns both halves of a split "€" into replacement characters,
and sent text cannot be repaired. An incremental decoder keeps the incomplete bytes until the
token that completes them arrives, and only turns them into U+FFFD if the stream ends first; its
output is exactly what decoding the whole byte string at once would give.

**After the stop.** When a stop completes the request is finished: the stop text is cut (unless
it is to be included) and any token that was already in flight is not part of the response. The
stop that completes first wins, because generation ends there and a stop that would have
completed later is never produced.

**Testing.** Compare against a reference that decodes all the bytes at once and cuts at the
earliest completion, on random texts with multi-byte characters and invalid bytes cut at random
byte offsets, and also check the hold-back after every push as well as the final text.
"""


# The kind of each number slip `_distinct` may keep, by its name (exercises.mistake_kinds).
_NUMBER_KINDS = {
    "no_holdback": "misread_mechanism",
    "fixed_buffer": "misread_mechanism",
    "bytes": "unit_slip",
    "per_token_decode": "misread_mechanism",
}


def _distinct(part: str, reference: float,
              candidates: list[tuple[str, float, str]]) -> list[Mistake]:
    """Keep each candidate whose value differs from the reference and from earlier ones."""
    seen = {reference}
    kept = []
    for name, value, feedback in candidates:
        if value in seen:
            continue
        seen.add(value)
        kept.append(Mistake(part, value, feedback, name, _NUMBER_KINDS[name]))
    return kept


def mistakes(p: dict[str, Any]) -> list[Mistake]:
    s = solve(p)
    c = float(s["received_chars"])
    stop = s["stop_md"]
    number = _distinct("received_after", c, [
        ("no_holdback", float(s["decoded_at_ask_chars"]),
         f"That counts {s['held_at_ask_md']} as sent. A streamer that forwards everything does "
         f"send it, but the next tokens turn it into the start of {stop}, and text that has been "
         "sent cannot be taken back. Hold back the part that could still become a stop."),
        ("fixed_buffer", float(s["fixed_at_ask"]),
         f"That is a fixed buffer of (longest stop − 1) = {s['fixed_hold']} characters, as vLLM "
         f"uses: safe, but it also holds back characters that can never start {stop}. The "
         "question asks for the minimal hold-back."),
        ("bytes", float(s["received_bytes"]),
         "That counts UTF-8 bytes. The question counts characters: a multi-byte character such as "
         f"{s['split_chars_md']} is one character."),
        ("per_token_decode", float(s["per_token_chars"]),
         "That decodes each token on its own, so each piece of the split character becomes a "
         "replacement character (U+FFFD). Decode incrementally: the pieces make one character."),
    ])
    choice = [
        Mistake("holdback_rule", "fixed",
                "Safe, and it is what vLLM does, but not minimal: it holds back the last few "
                "characters even when none of them can start a stop, which delays every chunk.",
                "fixed_buffer", kind="misread_mechanism"),
        Mistake("holdback_rule", "whole_token",
                "Stops are text, not tokens: a stop can start in the middle of a token and end "
                "in another, and a token holding a '#' far from any stop need not wait at all.",
                "whole_token", kind="misread_mechanism"),
        Mistake("holdback_rule", "none",
                "A client that has rendered or forwarded text cannot unsend it, and streaming "
                "APIs have no message that deletes characters already delivered.",
                "retract", kind="misread_mechanism"),
        Mistake("which_stop", "listed_first",
                "The order of the list does not matter; what matters is which stop completes "
                "first, because generation ends there.", "listed_first", kind="misread_mechanism"),
        Mistake("which_stop", "starts_first",
                "To cut at \"\\nUser:\" the engine would need the token \":\", but generation ends "
                "as soon as \"User\" completes, so \":\" is never produced.", "starts_first",
                kind="misread_mechanism"),
        Mistake("which_stop", "no_stop",
                "Stops are matched in the decoded text, across token boundaries, not against "
                "whole tokens.", "token_match", kind="misread_mechanism"),
    ]
    return number + choice


# ----------------------------------------------------------------------------------------------
# Feasibility: what the statement claims, checked by exercises.feasibility for every variant

def constraints(p: dict[str, Any]) -> list[Claim]:
    # No model, GPU or context in this story: is_sensible() already keeps the trace coherent.
    return []
