"""Speculative decoding: when it pays, and a per-request draft-length policy.

Implement the four functions and `SpecPolicy`. Standard library only.

Grading compares your return values with a reference on public and hidden cases:
  * numbers within a relative tolerance of 1e-6 (absolute 1e-9 near zero);
  * `best_k` and `choose` exactly, so follow the tie rules below to the letter;
  * invalid inputs must raise ValueError (the type is compared, not the message).

Model (all costs relative to, or in the same unit as, one plain decode step):
  * A request drafts k tokens per step; the target accepts each draft independently with
    probability alpha, stops at the first rejection, and always adds one token of its own.
  * A plain decode step over `batch` requests feeds `batch` tokens to the target; a speculative
    step with k drafts each feeds batch * (k + 1).
  * Target step time (roofline): T(n) = t_mem_ms * max(1, n / n_knee) for n tokens; flat while
    memory-bound, proportional to n past the knee.
  * Drafting costs c plain steps per draft token position (k * c per step).

Ties: wherever two choices score the same, the SMALLER k (or the smaller total) wins. "The same"
means within EPS: a candidate beats the best so far only if its score > best * (1 + EPS).
"""
from __future__ import annotations

from collections.abc import Callable

EPS = 1e-9


def expected_tokens(alpha: float, k: int) -> float:
    """Expected tokens one request gains per speculative step: 1 + alpha + ... + alpha**k.

    expected_tokens(alpha, 0) == 1; expected_tokens(1.0, k) == k + 1 (no division by zero).
    Raise ValueError if alpha is outside [0, 1] or k < 0.
    """
    raise NotImplementedError


def step_cost(k: int, batch: int, c: float, t_mem_ms: float, n_knee: int) -> float:
    """Cost of one speculative step with k drafts per request, in plain steps:

        k * c + T(batch * (k + 1)) / T(batch)

    (t_mem_ms cancels in the ratio; it is there so the same model gives milliseconds.)
    step_cost(0, ...) == 1. Raise ValueError if k < 0 or batch < 1.
    """
    raise NotImplementedError


def speedup(alpha: float, k: int, batch: int, c: float, t_mem_ms: float, n_knee: int) -> float:
    """Tokens per unit time with speculation over plain decoding:
    expected_tokens(alpha, k) / step_cost(k, batch, c, t_mem_ms, n_knee). Below 1 is a slowdown.
    Raise ValueError for the inputs either of those rejects.
    """
    raise NotImplementedError


def best_k(alpha: float, batch: int, c: float, t_mem_ms: float, n_knee: int,
           k_max: int = 8, margin: float = 0.0) -> int:
    """The draft length k in 0..k_max with the highest speedup, every request drafting k.

    Scan k = 0, 1, ..., k_max; a k replaces the best so far only if its speedup is greater than
    best * (1 + EPS) (so ties go to the smaller k). If the best speedup is below 1 + margin,
    return 0 (do not speculate). Raise ValueError as expected_tokens does (alpha, k_max).
    """
    raise NotImplementedError


class SpecPolicy:
    """Per-request acceptance estimates and a per-step choice of each request's draft length."""

    def __init__(self, k_max: int = 8, ewma: float = 0.1, prior_alpha: float = 0.6,
                 margin: float = 0.05) -> None:
        """`ewma`: weight of each new observation; `prior_alpha`: the estimate of a request never
        observed; `margin`: the predicted speedup a request must reach to be allowed to draft."""
        raise NotImplementedError

    def observe(self, req_id: str, drafted: int, accepted: int) -> None:
        """Record one verify step of `req_id`: it drafted `drafted` tokens, the target accepted
        the first `accepted` of them (0 <= accepted <= drafted, else raise ValueError).

        Update the request's estimate (starting from prior_alpha) once per EXAMINED position, in
        order: positions 1..accepted are accepted (x = 1); position accepted + 1, if it exists,
        is the first rejection (x = 0); later positions were never judged and do not count.
        Each update is  est = (1 - ewma) * est + ewma * x.  drafted == 0 changes nothing.
        """
        raise NotImplementedError

    def estimate(self, req_id: str) -> float:
        """The current acceptance estimate of `req_id` (prior_alpha if never observed)."""
        raise NotImplementedError

    def choose(self, req_ids: list[str], batch_cost: Callable[[int], float]) -> dict[str, int]:
        """Pick each request's draft length for the next step: {req_id: k_i} for every id given.

        `req_ids` are distinct; B = len(req_ids); `batch_cost(n)` is the time of one step that
        feeds n tokens to the target (drafting included), defined for B <= n <= B * (k_max + 1);
        batch_cost(B) is a plain step. a_i = estimate(req_id). The state is not changed.

        1. Every request starts eligible. The j-th draft of request i (j = 1..k_max) is worth
           a_i ** j expected tokens. List these gains for the eligible requests, sorted by gain
           (largest first), then by the request's position in req_ids, then by j.
        2. For K = 0, 1, ..., len(list): goodput(K) = (B + sum of the first K gains) /
           batch_cost(B + K). Take the K with the highest goodput (a later K wins only if its
           goodput > best * (1 + EPS)). k_i = how many of request i's gains are in the first K.
        3. Guard: a request with k_i > 0 whose own predicted speedup
               expected_tokens(a_i, k_i) * batch_cost(B) / batch_cost(B + K)
           is below 1 + margin is made ineligible (all such requests at once), and you go back
           to step 1. When no request is below, return the k_i (0 for ineligible requests).
        Return {} for an empty list.
        """
        raise NotImplementedError
