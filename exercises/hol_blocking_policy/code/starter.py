"""The order in which the engine tries its waiting requests.

The grader runs the scheduling simulator with your `order` as its policy, on hidden workloads, and
compares each request's TTFT with what the reference policy gets on the same workload. Standard
library only.

How the engine uses your order (every step, until every request has its first token):

* A step starts when the previous one ends. Requests that arrive during a step wait for the next.
* The engine calls `order(waiting, now)` with the waiting requests in queue order (arrival order)
  and walks the list you return from the front. It admits a request if its `prefill_left` fits in
  what is left of the step's token budget, and it STOPS at the first request that does not fit
  (it never skips ahead). Prompts are prefilled whole, never in chunks.
* The step takes the time of all the prefill it admitted; every admitted request gets its first
  token at the end of the step (TTFT = that time minus its arrival). Requests are followed only
  to their first token, so nothing else competes for the budget.

Your policy passes a workload when both hold (the statement explains them):
* its mean TTFT is at most 30 % (+ 10 ms) above the reference policy's (cut the mean), and
* its worst TTFT (the request that waited longest) is at most 2x (+ 10 ms) the worst TTFT under
  first come, first served on the same workload (starve no one), so a policy that starves a long
  prompt behind a stream of short ones fails.
"""
from __future__ import annotations


def order(waiting: list[dict], now: float) -> list[str]:
    """Return the ids of ALL waiting requests, each exactly once, in the order to try them.

    `now` is the simulated time in seconds. Each entry of `waiting` is a fresh dict:
        rid           str    the request id
        arrival       float  when it arrived (s)
        prompt        int    tokens in its prompt, including any prefix-cache hit
        cached        int    prompt tokens already in the prefix cache (free to serve)
        prefill_left  int    tokens the engine must still compute before the first token
                             (prompt - cached)
        generated     int    tokens generated so far (always 0 here)
        waited        float  now - arrival (s)
    The list is in queue order: the order they arrived in (ties: the order they were sent).
    Returning anything else than a permutation of the ids is an error for that workload.
    """
    raise NotImplementedError
