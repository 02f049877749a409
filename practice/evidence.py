"""A variant's evidence made once for all the site's processes (the `evidence` cache: Redis in
production, files under var/ otherwise; practice/settings/base.py).

Some exercises simulate a whole engine run to make their evidence (0.1 to 0.2 s of CPU), and
each web worker kept only its own copy: a student's first view of such a page, and the chart
downloads it sets off, landed on different workers and each ran the simulation again (in
bench/load.py every slow exercise page after the logins was a worker's first render of an
exercise). Now the first process to need it makes it and the others read it. Only evidence
that took a while to make is shared: reading 150 KiB of a cheap trace back costs about what
making it does. The key holds a digest of the exercises' code (exercises.code_digest), so
evidence made by other code is never served. The cache only saves work: when it cannot be
read or written, the evidence is made here, as before."""
from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

from django.core.cache import BaseCache, caches

from exercises import registry
from exercises.code_digest import code_digest
from exercises.spec import Evidence, ExerciseSpec

log = logging.getLogger(__name__)

CACHE_ALIAS = "evidence"
# Made faster than this, evidence is made again by each process rather than shared.
SHARE_ABOVE_S = 0.02
# Long enough for a student's sitting, the time that their page's views are spread over the
# workers; short enough that a class's variants (about 200 KiB each) do not pile up in Redis.
TIMEOUT_S = 6 * 3600


def shared_cache() -> BaseCache:
    return caches[CACHE_ALIAS]


def cache_key(spec: ExerciseSpec, params: dict[str, Any]) -> str:
    variant = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode())
    return f"evidence:{spec.slug}:{code_digest()[:20]}:{variant.hexdigest()[:32]}"


def variant_evidence(spec: ExerciseSpec, params: dict[str, Any]) -> dict[str, Evidence]:
    """registry.evidence(spec, params), from this process's memory, else the shared cache, else
    made here (and then shared if it was slow to make)."""
    here = registry.cached_evidence(spec, params)
    if here is not None:
        return here
    key = cache_key(spec, params)
    try:
        shared = shared_cache().get(key)
    except Exception:  # the cache is down: make it here, as if it had never been shared
        log.warning("evidence cache unavailable, making %s here", spec.slug, exc_info=True)
        return registry.evidence(spec, params)
    if isinstance(shared, dict):
        registry.keep_evidence(spec, params, shared)
        return shared
    started = time.perf_counter()
    found = registry.evidence(spec, params)
    if time.perf_counter() - started >= SHARE_ABOVE_S:
        try:
            shared_cache().set(key, found, timeout=TIMEOUT_S)
        except Exception:
            log.warning("evidence cache unavailable, %s not shared", spec.slug, exc_info=True)
    return found
