"""Every exercise's math reaches the page as KaTeX-ready markup, never as raw dollars.

practice/markdown.py runs markdown-it's dollarmath plugin: `$…$` becomes
`<span class="math inline">`, `$$…$$` a `<div class="math inline|block">`, and app.js hands
their text to KaTeX. A formula the plugin did not recognise (a space after the opening `$`, an
unbalanced pair, emphasis that ate an underscore) stays in the prose as dollars, and a template
placeholder that was not filled stays as braces. This renders every statement, prompt and
worked solution of every exercise (all parts revealed) and reads the prose around the math.
Whether KaTeX can typeset each formula is checked in the browser
(tests/browser/test_screenshots.py).
"""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client

from exercises import registry
from practice.actions.submissions import reveal_solution
from practice.markdown import render_markdown
from practice.models import Assignment, Exercise, User

pytestmark = pytest.mark.django_db

# Elements whose text is not prose: math (KaTeX input), code, and non-rendered content.
VERBATIM = {"code", "pre", "script", "style", "textarea", "kbd", "samp"}
# Prose is judged one block at a time, so a pair split by <em> (an underscore eaten) is seen.
BLOCKS = {"p", "li", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "div", "section", "article",
          "details", "summary", "blockquote", "dd", "dt", "figcaption", "label", "legend",
          "header", "footer", "main", "ul", "ol", "table", "tr", "body", "hgroup", "small"}
VOID = {"br", "hr", "img", "input", "meta", "link", "wbr", "source", "col", "area", "base"}
MATH_MARK = "\x00"  # stands for a rendered formula or code span inside a prose block

# Two dollars with something between them, in one block of prose: a formula left raw.
# Currency is written "\$5" in exercise Markdown and renders as "$5", so "$5 in, $8 out" also
# holds a pair; a pair that opens on a digit counts only if it also looks like TeX.
DOLLAR_PAIR = re.compile(r"\$\$?([^$]+?)\$\$?")
TEX_HINT = re.compile(r"[\\^_{}=]")
PLACEHOLDER = re.compile(r"\{\{\s*[ps]\.")
# The blurb's own numbers and one fixed random draw: reproducible, and variant-dependent text
# (a negative number, a plural) gets a second chance to show up.
VARIANTS = ("canonical", "271828")


class Prose(HTMLParser):
    """Collects prose blocks (math and code replaced by a mark) and the text of each formula."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, is math, is verbatim)
        self.blocks: list[str] = []
        self.math: list[str] = []
        self.display: list[bool] = []  # per formula: display math (a div), or inline
        self._buf: list[str] = []
        self._math_buf: list[str] | None = None

    def _in(self, kind: int) -> bool:
        return any(entry[kind] for entry in self.stack)

    def _flush(self) -> None:
        text = "".join(self._buf).strip()
        if text.replace(MATH_MARK, "").strip():
            self.blocks.append(re.sub(r"\s+", " ", text))
        self._buf = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        is_math = "math" in classes and not self._in(1)
        if is_math:
            self.display.append(tag == "div")
        is_verbatim = tag in VERBATIM
        if (is_math or is_verbatim) and not self._in(1) and not self._in(2):
            self._buf.append(MATH_MARK)
        elif tag in BLOCKS and not self._in(1) and not self._in(2):
            self._flush()
        if is_math:
            self._math_buf = []
        self.stack.append((tag, is_math, is_verbatim))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        while self.stack:
            top, is_math, _ = self.stack.pop()
            if is_math and self._math_buf is not None:
                self.math.append("".join(self._math_buf).strip())
                self._math_buf = None
            if top == tag:
                break
        if tag in BLOCKS and not self._in(1) and not self._in(2):
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._in(1):
            if self._math_buf is not None:
                self._math_buf.append(data)
        elif not self._in(2):
            self._buf.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


def read(html: str) -> Prose:
    parser = Prose()
    parser.feed(html)
    parser.close()
    return parser


def raw_math(block: str) -> list[str]:
    return [m.group(0) for m in DOLLAR_PAIR.finditer(block)
            if not m.group(1)[:1].isdigit() or TEX_HINT.search(m.group(1))]


def test_the_reader_finds_raw_math_and_ignores_rendered_math() -> None:
    """The checker itself: it must see what it is meant to catch."""
    ok = read(render_markdown("Rate $r = B/T$ and\n\n$$\nx^2\n$$\n\nand `a $b_1$ c` costs \\$5."))
    assert ok.math == ["r = B/T", "x^2"] and ok.display == [False, True]
    assert not any(raw_math(b) for b in ok.blocks)
    assert not any("{{" in b or "}}" in b for b in ok.blocks)
    # What dollarmath leaves behind when it gives up: plain dollars, or dollars split by an
    # <em> that ate the underscores between them.
    for html in ("<p>so $x_1 + y_1 $ holds</p>", "<li>a $B_{kv}$ b</li>",
                 "<p>then $a<em>b$ and </em>c</p>", "<td>$$\\frac{a}{b}$$</td>"):
        assert any(raw_math(b) for b in read(html).blocks), html
    assert not any(raw_math(b) for b in read("<p>$5 in, $8 out</p>").blocks)
    assert read("<p>left {{ p.x }}</p>").blocks == ["left {{ p.x }}"]


def test_display_math_on_a_list_items_second_line_is_math() -> None:
    """`$$…$$` that does not open its own block (canary_sample_size, utilisation_rule) used to
    come out as `$` + inline math + `$`."""
    html = render_markdown("- with $p$:\n  $$n = \\frac{a}{b}$$\n- next\n")
    assert '<div class="math inline">n = \\frac{a}{b}</div>' in html
    assert "$" not in html


def test_a_key_value_table_loses_its_empty_header_row() -> None:
    html = render_markdown("| | |\n|---|---|\n| GPU | H100 |\n")
    assert "<thead>" not in html and "<td>GPU</td>" in html
    assert "<th>x</th>" in render_markdown("| x | |\n|---|---|\n| 1 | 2 |\n")


@pytest.fixture
def reader(client: Client) -> User:
    user = User.objects.create_user("reader", password="pw-reader-123")
    client.force_login(user)
    return user


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("slug", sorted(registry.load_all()))
def test_every_statement_and_solution_leaves_math_to_katex(client: Client, reader: User,
                                                          slug: str, variant: str) -> None:
    spec = registry.get(slug)
    exercise = Exercise.objects.get(slug=slug)
    Assignment.objects.create(user=reader, exercise=exercise, variant=variant)
    for part in spec.parts:
        reveal_solution(reader, exercise, part.id)
    r = client.get(f"/ex/{slug}/")
    assert r.status_code == 200
    page = read(r.content.decode())

    assert r.content.decode().count('class="solution"') == len(spec.parts), \
        f"{slug}: a part without a worked solution"
    raw = [(b, raw_math(b)) for b in page.blocks if raw_math(b)]
    assert raw == [], f"{slug}: dollars left outside the math markup"
    braces = [b for b in page.blocks if "{{" in b or "}}" in b]
    assert braces == [], f"{slug}: template braces left in the prose"
    assert all(page.math), f"{slug}: an empty formula"
    assert not [m for m in page.math if PLACEHOLDER.search(m) or "$" in m], slug
