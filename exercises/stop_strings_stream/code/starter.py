"""Stop strings in a token stream.

Implement `StopStreamer` and `reference_output`. The grader pushes each token's bytes, records
what every `push()` returns, calls `finish()`, and compares the result with a whole-text reference
(see the statement for the exact rules). Standard library only.
"""
from __future__ import annotations


class StopStreamer:
    """Turns a stream of token bytes into text that is safe to send to the client.

    Attributes:
        stopped: True once a stop string has completed (then every later push returns "").
        stop_reason: the stop string that fired, or None.
    """

    def __init__(self, stops: list[str], include_stop: bool = False) -> None:
        """`stops`: the request's stop strings (raise ValueError if one is empty).

        `include_stop`: whether the stop string itself is part of the output.
        """
        self.stopped: bool = False
        self.stop_reason: str | None = None
        raise NotImplementedError

    def push(self, token_bytes: bytes) -> str:
        """Feed one token's bytes; return the text that can be sent to the client now.

        Decode bytes incrementally as UTF-8 (errors="replace"): a character split across tokens
        is produced when its last byte arrives. Hold back exactly the longest suffix of the
        decoded text that is a proper prefix of some stop (nothing when include_stop is True).
        When a stop completes, return the text up to its start (or its end with include_stop),
        set `stopped` and `stop_reason`, and ignore every later token.
        """
        raise NotImplementedError

    def finish(self) -> str:
        """End of stream (EOS or length limit): return the held text and any incomplete bytes.

        Incomplete bytes decode to U+FFFD, exactly as bytes.decode("utf-8", "replace") would.
        Returns "" if the stream already stopped.
        """
        raise NotImplementedError


def reference_output(
    token_bytes: list[bytes], stops: list[str], include_stop: bool
) -> tuple[str, str | None]:
    """The whole output at once: (text the client must end up with, the stop that fired or None).

    Decode b"".join(token_bytes) with errors="replace", find the stop that completes earliest
    (on a tie, the longest), and cut there. Raise ValueError for an empty stop string.
    """
    raise NotImplementedError
