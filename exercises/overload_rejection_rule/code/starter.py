"""Your admission rule for the request queue (see the statement).

The queue simulator calls `admit(state)` once for every arriving request, in arrival order, before
the request joins the queue. Return True to queue it, False to turn it away at once (the client
gets an immediate 429/503 and no server time is spent on it).

The queue: one FIFO server that starts a request as soon as it is free and spends exactly
1 / service_rate seconds on each. A client waits at most `timeout_s` seconds for its request to
START service, then gives up; the server does not know this and still serves the request when it
reaches the head of the queue (dead work: server time nobody is waiting for).

`state` holds (all floats):

    now               arrival time of this request, in seconds
    queue_len         requests already waiting, NOT counting the one in service
    predicted_wait_s  seconds until this request would start service if admitted now: what is
                      left of the request in service plus queue_len / service_rate (exact here:
                      service is deterministic and later arrivals queue behind this one)
    service_rate      requests per second the server completes
    timeout_s         how long a client waits for service to start before giving up

A request counts as dead when it starts service more than `timeout_s` after it arrived (a
microsecond of grace absorbs floating-point rounding); a wait of exactly `timeout_s` is in time.

How it is graded, on hidden workloads (spikes, bursts of simultaneous arrivals, random
arrivals, quiet periods), against the best rule for this queue, i.e. one that never admits a
request that will start too late and never turns away one that would start in time:
  * dead work: none at all;
  * goodput (requests that start before their client gives up): no less than that rule's, less
    1 % of it or 2 requests, whichever is more;
  * rejections: no more than that rule's, plus 1 % of it or 2 requests, whichever is more.

Return a real bool. The function may be called many thousands of times per workload, and state
kept in module globals carries over from one workload to the next: keep the rule a pure function
of `state`.
"""
from __future__ import annotations


def admit(state: dict[str, float]) -> bool:
    """True to queue this request, False to reject it now."""
    raise NotImplementedError
