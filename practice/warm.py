"""A web worker's one-time loads done as it starts, before it takes its first request.

Django imports the URLconf (and with it every view module and what they import) on the first
request a process serves, and the exercise registry (49 folders: their TOML, their modules,
the checks run on each spec) on the first request that needs an exercise. Measured on this
machine with PostgreSQL: a fresh worker's first request took 626 ms and its first exercise
page 290 ms more, against 4-5 ms warm; in bench/load.py they were the slowest requests of the
run's first seconds, after every start of the web server (a deploy, a worker recycled). Done
here, as gunicorn's worker loads the application, the worker takes no connection until it is
ready, and what was loaded is frozen at once (practice.heap): the collection after the first
request then scans only what that request made.

A failure here is logged and the worker starts anyway: the requests that need what failed to
load fail as they did before, and the rest of the site keeps serving."""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def warm_web_process() -> None:
    """Import the URLconf (every view module), build its reverse map, load the exercise
    registry, then settle the heap (practice.heap) so that it is all frozen already."""
    from django.urls import get_resolver

    from exercises import registry
    from practice.heap import settle_heap

    try:
        resolver = get_resolver()
        resolver.url_patterns  # noqa: B018 (the property imports the URLconf)
        resolver.reverse_dict  # noqa: B018 (built on the first reverse() otherwise)
        registry.load_all()
    except Exception:
        log.exception("warming the web process failed; the first requests will load it")
    settle_heap()
