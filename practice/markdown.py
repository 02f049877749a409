"""Markdown → safe HTML for statements and solutions, with math left for KaTeX in the browser.

Raw HTML in the source is not passed through (html=False), and the result goes through nh3 as
well: exercise text is ours, but variant values and student-visible echoes flow into it.
"""
from __future__ import annotations

import re
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

# double_inline: a `$$…$$` that does not start its own block (e.g. on a list item's continuation
# line) is display math too; without it the plugin reads it as `$` + inline math + `$`.
_md = (MarkdownIt("commonmark", {"html": False}).enable("table")
       .use(dollarmath_plugin, double_inline=True))

_TAGS = set(nh3.ALLOWED_TAGS) | {"span", "div", "pre", "code", "table", "thead", "tbody", "tr",
                                 "th", "td", "h1", "h2", "h3", "h4", "p", "hr"}
# nh3 panics if "class" is in `attributes` and `allowed_classes` is also given: classes only here.
# div.math.inline is the double_inline display math above.
_CLASSES = {"span": {"math", "inline"}, "div": {"math", "block", "inline"},
            "code": {"language-python"}}


# A Markdown table must have a header row, so key-value tables are written with an empty one
# (`| | |`). Drop it: screen readers would announce blank column headers.
_EMPTY_THEAD = re.compile(r"<thead>\s*<tr>\s*(?:<th>\s*</th>\s*)+</tr>\s*</thead>\s*")


@lru_cache(maxsize=512)
def render_markdown(text: str) -> str:
    html = _md.render(text)
    html = nh3.clean(html, tags=_TAGS, allowed_classes=_CLASSES, link_rel="noopener noreferrer")
    return _EMPTY_THEAD.sub("", html)
