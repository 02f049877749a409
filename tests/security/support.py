"""Helpers for the security tests: a crawler that finds every page and form a user can reach,
a parser for the forms, and per-request timings.

The crawler reads links and forms out of the rendered HTML, so pages and forms added later are
covered without editing these tests.
"""
from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

from django.test import Client

from exercises import registry
from practice.models import Submission, User

# Pages whose POST would end the session under test, or that are Django's own admin.
SKIP_PREFIXES = ("/static/", "/admin/", "/logout/")
# Per page family (numbers and exercise slugs folded), crawl this many pages: the 49 exercise
# pages share one template, and the test budget is better spent on other pages.
PER_FAMILY = 3
MAX_PAGES = 120
_SLUGS = frozenset(registry.load_all())


@dataclass
class People:
    student: User
    instructor: User
    cohort_code: str
    text_sub: Submission
    code_sub: Submission


def client_for(user: User | None, **kwargs: Any) -> Client:
    c = Client(**kwargs)
    if user is not None:
        c.force_login(user)
    return c


# --- reading forms out of HTML ----------------------------------------------------------------

@dataclass
class Form:
    """Something on a page that sends a POST: a <form method=post>, or an element with
    hx-post (htmx sends it with the enclosing form's fields, and the page's hx-headers)."""

    page: str
    action: str
    fields: dict[str, str] = field(default_factory=dict)
    token_field: bool = False  # a csrfmiddlewaretoken input inside it (or its enclosing form)
    htmx: bool = False

    @property
    def label(self) -> str:
        return f"{self.action} (on {self.page})"


class _FormParser(HTMLParser):
    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.forms: list[Form] = []
        self.hx_headers = ""
        self._open: list[Form | None] = []  # a stack: <form>s nest in invalid HTML only
        self._textarea: str | None = None
        self._select: str | None = None

    def _absolute(self, url: str | None) -> str:
        return urlsplit(urljoin(self.page, url or self.page)).path

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        current = self._open[-1] if self._open else None
        if tag == "body":
            self.hx_headers = a.get("hx-headers", "")
        if tag == "form":
            post = a.get("method", "get").lower() == "post" or "hx-post" in a
            form = Form(self.page, self._absolute(a.get("hx-post") or a.get("action")),
                        htmx="hx-post" in a) if post else None
            if form is not None:
                self.forms.append(form)
            self._open.append(form)
            return
        if "hx-post" in a:  # e.g. the formula box posting to the preview while typing
            inner = Form(self.page, self._absolute(a["hx-post"]), htmx=True,
                         token_field=current.token_field if current else False)
            if a.get("name"):
                inner.fields[a["name"]] = a.get("value", "")
            self.forms.append(inner)
        if current is None:
            return
        name = a.get("name", "")
        if tag == "input" and name:
            if name == "csrfmiddlewaretoken":
                current.token_field = True
                return
            kind = a.get("type", "text").lower()
            if kind in ("checkbox", "radio") and name in current.fields:
                return  # the first option is enough to send
            if kind not in ("submit", "button", "image", "reset", "file"):
                current.fields[name] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            current.fields[name] = ""
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and self._select not in current.fields:
            current.fields[self._select] = a.get("value", "")
        elif tag == "button" and name and name not in current.fields:
            current.fields[name] = a.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self._open:
            self._open.pop()
        elif tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea and self._open and self._open[-1] is not None:
            self._open[-1].fields[self._textarea] += data


def forms_on(page: str, html: str) -> tuple[list[Form], str]:
    """The POSTing forms on a page and the body's hx-headers attribute."""
    p = _FormParser(page)
    p.feed(html)
    p.close()
    return p.forms, p.hx_headers


def csrf_header_token(hx_headers: str) -> str:
    try:
        return str(json.loads(hx_headers).get("X-CSRFToken", "")) if hx_headers else ""
    except ValueError:
        return ""


_HREF = re.compile(r'''\bhref\s*=\s*["']([^"'#]+)''')


def _family(path: str) -> str:
    """/teach/cohorts/7/stats/kv_tier_value/ -> /teach/cohorts/N/stats/SLUG/"""
    return "/".join("SLUG" if seg in _SLUGS else re.sub(r"\d+", "N", seg)
                    for seg in path.split("/"))


def crawl(client: Client, starts: tuple[str, ...] = ("/",)) -> dict[str, str]:
    """Every HTML page reachable by links from `starts` (GET only), path -> HTML. Asserts no
    page answers 5xx on the way."""
    pages: dict[str, str] = {}
    queue = list(starts)
    seen: set[str] = set()
    families: Counter[str] = Counter()
    while queue and len(pages) < MAX_PAGES:
        url = queue.pop(0)
        parts = urlsplit(url)
        if parts.netloc and parts.netloc != "testserver":
            continue
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if path in seen or parts.path.startswith(SKIP_PREFIXES) or parts.scheme not in ("",
                                                                                   "http"):
            continue
        seen.add(path)
        fam = _family(parts.path)
        if families[fam] >= PER_FAMILY:
            continue
        families[fam] += 1
        r = client.get(path)
        assert r.status_code < 500, (path, r.status_code)
        if r.status_code != 200 or "text/html" not in r.get("Content-Type", ""):
            continue
        html = r.content.decode()
        pages[path] = html
        for href in _HREF.findall(html):
            queue.append(urljoin(path, href))
    return pages


# --- timing -----------------------------------------------------------------------------------

@dataclass
class Timings:
    """Seconds per request, by label, for the bounded-time assertion and its report; and the
    requests that answered 5xx."""

    seconds: list[tuple[float, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one line per 5xx

    def add(self, dt: float, label: str) -> None:
        self.seconds.append((dt, label))

    def worst(self) -> tuple[float, str]:
        return max(self.seconds, default=(0.0, ""))

    def summary(self) -> str:
        xs = sorted(dt for dt, _ in self.seconds)
        if not xs:
            return "no requests"
        pct = {q: xs[min(len(xs) - 1, int(q / 100 * len(xs)))] for q in (50, 95, 99)}
        worst, label = self.worst()
        return (f"{len(xs)} requests: p50 {pct[50] * 1000:.0f} ms, p95 {pct[95] * 1000:.0f} ms, "
                f"p99 {pct[99] * 1000:.0f} ms, max {worst * 1000:.0f} ms ({label})")


def timed(timings: Timings, label: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    t0 = time.perf_counter()
    response = call(*args, **kwargs)
    timings.add(time.perf_counter() - t0, label)
    return response
