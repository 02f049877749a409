"""Markdown → safe HTML for statements and solutions, with math left for KaTeX in the browser.

Raw HTML in the source is not passed through (html=False), and the result goes through nh3 as
well: exercise text is ours, but variant values and student-visible echoes flow into it.
"""
from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

_md = MarkdownIt("commonmark", {"html": False}).enable("table").use(dollarmath_plugin)

_TAGS = set(nh3.ALLOWED_TAGS) | {"span", "div", "pre", "code", "table", "thead", "tbody", "tr",
                                 "th", "td", "h1", "h2", "h3", "h4", "p", "hr"}
# nh3 panics if "class" is in `attributes` and `allowed_classes` is also given: classes only here.
_CLASSES = {"span": {"math", "inline"}, "div": {"math", "block"}, "code": {"language-python"}}


@lru_cache(maxsize=512)
def render_markdown(text: str) -> str:
    html = _md.render(text)
    return nh3.clean(html, tags=_TAGS, allowed_classes=_CLASSES, link_rel="noopener noreferrer")
