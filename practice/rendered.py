"""A variant's statement and worked solution as the pages show them, rendered once per process.

What the exercise page shows of a variant depends on the exercise and the variant alone: solve(),
the templates and the Markdown give the same HTML every time, so it is made once and kept. Each
student has a variant of their own, so the set is large: a bounded LRU keeps the recent ones.
The spec object is checked on a hit, so a reloaded registry gets fresh renders. Callers only read
what they get (the dict of sections included).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from exercises import hints, registry, templating
from exercises.spec import ExerciseSpec
from practice.markdown import render_markdown

# Variants kept per process (tens of KB of HTML each: statement, solution, hints).
CACHE_SIZE = 128


@dataclass(frozen=True)
class Rendered:
    parsed: hints.Parsed  # the statement's Markdown in both modes, with its hints
    statement_html: str  # practice mode: the whole statement
    interview_html: str  # interview mode: the hints held back
    preamble_html: str  # the worked solution before its first part
    sections_html: dict[str, str]  # the worked solution of each part, by part id


_cache: OrderedDict[tuple[str, str], tuple[ExerciseSpec, Rendered]] = OrderedDict()
_lock = threading.Lock()


def rendered(spec: ExerciseSpec, variant: str) -> Rendered:
    key = (spec.slug, variant)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] is spec:
            _cache.move_to_end(key)
            return hit[1]
    made = _render(spec, variant)
    with _lock:
        _cache[key] = (spec, made)
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return made


def _render(spec: ExerciseSpec, variant: str) -> Rendered:
    params = registry.params_for(spec, variant)
    solution = registry.solve(spec, params)
    parsed = hints.parse(templating.render(spec.statement_template, params, solution,
                                           "statement.md"))
    worked = templating.render(spec.solution_template, params, solution, "solution.md")
    preamble, parts = templating.split_sections(worked)
    return Rendered(parsed, render_markdown(parsed.practice), render_markdown(parsed.interview),
                    render_markdown(preamble),
                    {k: render_markdown(v) for k, v in parts.items()})
