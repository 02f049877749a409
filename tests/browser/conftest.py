"""Helpers for the page-level browser checks: a logged-in student, screenshots, axe, overflow.

Screenshots land in tests/artifacts/ (git-ignored; CI can upload the folder). Chromium itself
and the `page` / `live_server` fixtures come from tests/conftest.py and the pytest plugins.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
AXE_JS = ROOT / "static" / "vendor" / "axe" / "axe.min.js"

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}  # an iPhone 12-15 in CSS pixels
VIEWPORTS = {"desktop": DESKTOP, "phone": PHONE}
THEMES = ("light", "dark")


@dataclass
class PageWatch:
    """What a page did that it should not: console errors, failed responses, outside requests."""

    base_url: str
    errors: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)

    def attach(self, page: Any) -> None:
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("response", lambda r: self.errors.append(f"{r.status} {r.url}")
                if r.status >= 400 else None)
        page.on("request", lambda r: self.outside.append(r.url)
                if not r.url.startswith((self.base_url, "data:", "blob:")) else None)

    def assert_clean(self) -> None:
        assert self.errors == [], self.errors
        assert self.outside == [], self.outside


@pytest.fixture
def watch(page: Any, live_server: Any) -> PageWatch:
    w = PageWatch(live_server.url)
    w.attach(page)
    return w


def session_cookies(user: Any, base_url: str) -> list[dict[str, str]]:
    """A logged-in session for `user`, as browser cookies (no login form round trip)."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    return [{"name": cookie.key, "value": cookie.value, "url": base_url}]


@pytest.fixture
def login(page: Any, live_server: Any) -> Callable[[Any], None]:
    """Log a user into the test's browser page."""
    return lambda user: page.context.add_cookies(session_cookies(user, live_server.url))


@pytest.fixture
def student(django_user_model: Any, login: Callable[[Any], None]) -> Any:
    user = django_user_model.objects.create_user("ada", password="a-long-pass-42")
    login(user)
    return user


def set_look(page: Any, theme: str, viewport: str) -> None:
    """Follow the system colour scheme (no stored toggle choice) at the given size."""
    page.emulate_media(color_scheme=theme, reduced_motion="reduce")
    page.set_viewport_size(VIEWPORTS[viewport])


def settle(page: Any) -> None:
    """Wait until KaTeX, CodeMirror and the fonts are done, so screenshots and axe see the page
    a reader sees."""
    page.wait_for_load_state("load")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.math.inline, .math.block')]"
        ".every(el => el.hasAttribute('data-katex'))"
        " && [...document.querySelectorAll('textarea[data-code-editor]')]"
        ".every(t => t.nextElementSibling && t.nextElementSibling.classList.contains('cm-editor'))")
    page.evaluate("document.fonts.ready")


# A full-page shot of the 47-exercise catalog is 12,000 px tall and takes seconds to encode;
# the first few screens show the look just as well.
MAX_SHOT_HEIGHT = 4000


def artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"


def shoot(page: Any, name: str, target: Any = None) -> Path:
    """A screenshot under tests/artifacts/<name>.png: the page from the top (at most
    MAX_SHOT_HEIGHT px of it) or, given a locator, just that element."""
    path = artifact(name)
    if target is not None:
        target.screenshot(path=str(path), animations="disabled")
        return path
    width, height = page.evaluate(
        "[document.documentElement.clientWidth, document.documentElement.scrollHeight]")
    page.screenshot(path=str(path), full_page=True, animations="disabled",
                    clip={"x": 0, "y": 0, "width": width, "height": min(height, MAX_SHOT_HEIGHT)})
    return path


# Every element whose right edge is past the viewport, unless it sits in a box that scrolls
# sideways (overflow-x auto/scroll: code blocks, tables and display math on a phone) or is
# meant to be invisible (screen-reader text, KaTeX's MathML copy).
OVERFLOW_JS = r"""
() => {
  const width = document.documentElement.clientWidth;
  const contained = (el) => {
    if (el.closest('.visually-hidden, .katex-mathml')) return true;
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (/(auto|scroll)/.test(getComputedStyle(a).overflowX)
          && a.getBoundingClientRect().right <= width + 1) return true;
    }
    return false;
  };
  const bad = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= width + 1 || bad.some(b => b.contains(el))) continue;
    if (!contained(el)) bad.push(el);
  }
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (typeof el.className === 'string' && el.className.trim()
       ? '.' + el.className.trim().split(/\s+/).join('.') : '')
    + ' (right edge ' + Math.round(el.getBoundingClientRect().right) + ' px)';
  return {scrollWidth: document.documentElement.scrollWidth, width, bad: bad.map(name)};
}
"""


def horizontal_overflow(page: Any) -> list[str]:
    """What is wider than the viewport, other than content that scrolls inside its own box;
    [] when nothing is (and the page itself then does not scroll sideways)."""
    got = page.evaluate(OVERFLOW_JS)
    if got["scrollWidth"] > got["width"] and not got["bad"]:
        return [f"page scrollWidth {got['scrollWidth']} > {got['width']}"]
    return list(got["bad"])


def axe_violations(page: Any, disable: dict[str, str] | None = None,
                   only: list[str] | None = None) -> list[dict[str, Any]]:
    """Run axe-core (vendored, injected only here) over the page: every rule axe runs by
    default, or just the rule ids in `only`. `disable` maps a rule id to a CSS selector whose
    elements that rule skips (say why at the call site)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # By URL from our own static files: the pages' Content-Security-Policy refuses the
        # inline <script> that add_script_tag(path=...) would insert.
        origin = page.evaluate("location.origin")
        page.add_script_tag(url=f"{origin}/static/{AXE_JS.relative_to(ROOT / 'static')}")
    result = page.evaluate(
        """async ([disable, only]) => {
          const exclude = Object.entries(disable);
          const options = {resultTypes: ['violations']};
          if (only) options.runOnly = {type: 'rule', values: only};
          const r = await axe.run(document, options);
          return r.violations.map(v => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes
              .filter(n => !exclude.some(([rule, sel]) => rule === v.id &&
                  n.target.some(t => { const el = document.querySelector(String(t));
                                       return el && el.closest(sel); })))
              .map(n => ({target: n.target.join(' '), summary: n.failureSummary,
                          html: n.html.slice(0, 200)})),
          })).filter(v => v.nodes.length);
        }""",
        [disable or {}, only])
    return result


def describe_violations(violations: list[dict[str, Any]]) -> str:
    """One line per element, for an assertion message a person can act on."""
    return "\n".join(f"  {v['id']} ({v['impact']}): {v['help']}\n    at {n['target']}: {n['html']}"
                     for v in violations for n in v["nodes"])
