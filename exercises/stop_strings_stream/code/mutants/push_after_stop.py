"""MUTANT: keeps decoding and sending tokens that arrive after the stop."""
from __future__ import annotations

import codecs


def _validate(stops: list[str]) -> list[str]:
    stops = list(stops)
    for s in stops:
        if not isinstance(s, str):
            raise TypeError(f"stop strings must be str, got {type(s).__name__}")
        if s == "":
            # An empty stop would match before the first character of every output.
            raise ValueError("stop strings must not be empty")
    return stops


def _earliest_stop(text: str, stops: list[str], new_from: int) -> tuple[int, str] | None:
    """The stop occurrence with the smallest end among those that end after `new_from`.

    Occurrences ending at or before `new_from` were already searched for (and absent), so each
    stop only needs to be looked for from `new_from - len(stop) + 1`. Returns (start, stop).
    """
    best: tuple[int, int, str] | None = None  # (end, -len, stop): min() picks earliest, then longest
    for stop in stops:
        start = text.find(stop, max(0, new_from - len(stop) + 1))
        if start >= 0:
            key = (start + len(stop), -len(stop), stop)
            if best is None or key < best:
                best = key
    if best is None:
        return None
    end, _neg_len, stop = best
    return end - len(stop), stop


def _held_length(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of some stop."""
    longest = 0
    for stop in stops:
        # Only suffixes longer than the best so far can improve it; a full stop is excluded
        # (it would already have ended the stream).
        for k in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:k]):
                longest = k
                break
    return longest


class StopStreamer:
    """Turns a stream of token bytes into text that is safe to send to the client."""

    def __init__(self, stops: list[str], include_stop: bool = False) -> None:
        self.stops = _validate(stops)
        self.include_stop = include_stop
        self.stopped = False
        self.stop_reason: str | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""  # every character decoded so far
        self._sent = 0  # how many of them the client has

    def push(self, token_bytes: bytes) -> str:
        """Feed one token's bytes; return the text that can be sent now (possibly "")."""
        if self.stopped:
            return self._decoder.decode(token_bytes)
        return self._advance(self._decoder.decode(token_bytes, final=False), final=False)

    def finish(self) -> str:
        """End of stream (EOS or length): flush held text and any incomplete bytes."""
        if self.stopped:
            return ""
        return self._advance(self._decoder.decode(b"", final=True), final=True)

    def _advance(self, new_text: str, final: bool) -> str:
        new_from = len(self._text)
        self._text += new_text
        hit = _earliest_stop(self._text, self.stops, new_from)
        if hit is not None:
            start, stop = hit
            cut = start + len(stop) if self.include_stop else start
            self.stopped = True
            self.stop_reason = stop
            return self._send_up_to(cut)
        if final or self.include_stop:
            # With include_stop nothing already decoded can be cut later: a stop completing in a
            # future token ends after all of it, and the output runs to the stop's end.
            return self._send_up_to(len(self._text))
        return self._send_up_to(len(self._text) - _held_length(self._text, self.stops))

    def _send_up_to(self, end: int) -> str:
        # Never moves backwards: everything before `end` is final once sent.
        out = self._text[self._sent:end]
        self._sent = max(self._sent, end)
        return out


def reference_output(
    token_bytes: list[bytes], stops: list[str], include_stop: bool
) -> tuple[str, str | None]:
    """What the stream must add up to, computed from the whole output at once."""
    stops = _validate(stops)
    text = b"".join(token_bytes).decode("utf-8", errors="replace")
    hit = _earliest_stop(text, stops, 0)
    if hit is None:
        return text, None
    start, stop = hit
    return text[: start + len(stop) if include_stop else start], stop
