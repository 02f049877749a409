"""Speculative-decoding acceptance from counter snapshots.

Implement `acceptance_windows` and `infer_steps`. Standard library only. The grader calls them on
snapshot series and compares every field with a reference (see the statement for the rules).

A snapshot is one scrape of the engine's cumulative counters:

    {"t": 600.0,                     # scrape time, seconds
     "start_time": 1717000000.0,     # process start time (changes when the engine restarts)
     "drafts": 1190000,              # verify steps that carried a draft (D)
     "draft_tokens": 3568200,        # draft tokens proposed (T)
     "accepted": 1965000,            # draft tokens accepted (A)
     "accepted_per_pos": [...]}      # accepted drafts at position 0 .. k-1 (k integers)
"""
from __future__ import annotations


def acceptance_windows(snapshots: list[dict], k: int) -> list[dict | None]:
    """One entry per pair of consecutive snapshots: entry i covers snapshots[i] -> snapshots[i+1].

    With deltas dD, dT, dA and dA_j (j = 0 .. k-1) of the counters over the window:

    The entry is None (the window is discarded) when
      * start_time differs between the two snapshots (the process restarted), or
      * any counter decreased (drafts, draft_tokens, accepted, or any accepted_per_pos[j]), or
      * dD == 0 or dT == 0 (nothing was drafted: acceptance is undefined).

    Otherwise it is a dict with exactly these keys:
      "drafts": dD, "draft_tokens": dT, "accepted": dA          (ints)
      "acceptance_rate": dA / dT                                  (float)
      "accept_length": 1 + dA / dD   (tokens per verify step, the bonus token included)
      "per_position": a list of k conditional rates, dA_j / dA_(j-1) with dA_(-1) = dD;
                      None at a position whose denominator is 0
      "missing_draft_tokens": k * dD - dT                         (int, may be negative)
      "flags": a sorted list of the invariant checks that fail, from
          "short_drafts"             dT < k * dD  (some steps proposed fewer than k tokens)
          "too_many_draft_tokens"    dT > k * dD  (wrong k, or counters from mixed sources)
          "accepted_exceeds_drafted" dA > dT
          "per_position_sum"         sum of dA_j != dA
          "per_position_increasing"  dA_0 > dD, or dA_j > dA_(j-1) for some j >= 1
    A window with failed checks is still reported (with its flags), not discarded.
    An empty or one-snapshot series gives [].
    """
    raise NotImplementedError


def infer_steps(emitted: int, accept_length: float, eos_discard: int = 0) -> float:
    """Verify steps a request took, from the tokens its client received.

    emitted: tokens the client received, the first one included (it comes from prefill, not from
        a verify step).
    accept_length: tokens per verify step as the engine counts them (1 + accepted / drafts); the
        counters include accepted drafts that came after the stop token and were thrown away.
    eos_discard: how many accepted tokens were thrown away after the stop token.

    Returns (emitted - 1 + eos_discard) / accept_length.
    Raises ValueError if emitted < 1, accept_length < 1 or eos_discard < 0.
    """
    raise NotImplementedError
