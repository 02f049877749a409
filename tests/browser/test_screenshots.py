"""The main pages in light and dark, on a laptop and a 390-px phone: screenshots for a human
(tests/artifacts/), and the checks a human would make on them (nothing spills sideways on the
phone, the dark-mode toggle sticks, the editor and the math follow the theme)."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from exercises import deck, registry
from graders.selftest import answer_text
from practice.actions.exercises import assignment_for
from practice.actions.hints import reveal_hint, statement_hints
from practice.actions.recall import answer_card
from practice.actions.submissions import reveal_solution, submit_answer
from practice.models import Exercise, RecallItem, User
from practice.variants import variant_params

from .conftest import (
    THEMES,
    VIEWPORTS,
    PageWatch,
    horizontal_overflow,
    session_cookies,
    set_look,
    settle,
    shoot,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

EVIDENCE_SLUG = "latency_period_owner"  # evidence a chart can be drawn from
SOLVED_SLUG = "max_concurrency"  # math everywhere, a formula box, multi-choice, a text part
CODE_SLUG = "canary_sample_size"  # math (display math in a list), a choice, a code editor


def solve_and_miss(user: User, slug: str) -> str:
    """Solve the first number part and answer the second one wrongly (number parts are graded
    in the request: no worker needed); return the solved part's id."""
    spec = registry.get(slug)
    exercise = Exercise.objects.get(slug=slug)
    ref = registry.solve(spec, variant_params(
        spec, assignment_for(user, exercise).variant))
    first, second = [p for p in spec.parts if p.type == "number"][:2]
    submit_answer(user, exercise, first.id, answer_text(first, ref[first.id]))
    submit_answer(user, exercise, second.id, "1")
    return first.id


def loop_pages(user: User) -> dict[str, str]:
    """The learning loop's pages, in the state of a student mid-loop, by name: a hint revealed
    in interview mode, the parts missed (solve_and_miss) due now and one opened for review, a
    card met in the deck, and the progress they make."""
    exercise = Exercise.objects.get(slug=SOLVED_SLUG)
    reveal_hint(user, exercise, statement_hints(exercise)[0].id, timezone.now())
    RecallItem.objects.filter(user=user).update(due=timezone.now() - timedelta(hours=1))
    missed = RecallItem.objects.get(user=user, exercise=exercise)
    answer_card(user, deck.cards()[0], "1 GB", timezone.now())
    return {"exercise-interview": f"/ex/{SOLVED_SLUG}/?mode=interview", "today": "/today/",
            "review": f"/today/{missed.pk}/review/", "deck": "/deck/", "progress": "/progress/"}


def test_main_pages_in_both_themes_and_sizes(page: Any, live_server: Any, student: User,
                                             login: Any, watch: PageWatch) -> None:
    solved = solve_and_miss(student, SOLVED_SLUG)
    solve_and_miss(student, EVIDENCE_SLUG)
    pages = {"catalog": "/", "exercise-evidence": f"/ex/{EVIDENCE_SLUG}/",
             "exercise-solved": f"/ex/{SOLVED_SLUG}/", **loop_pages(student),
             "history": "/history/", "signup": "/signup/"}
    spills: dict[str, list[str]] = {}
    for viewport in VIEWPORTS:
        for theme in THEMES:
            set_look(page, theme, viewport)
            for name, url in pages.items():
                if name == "signup":
                    page.context.clear_cookies()  # what a newcomer sees
                page.goto(live_server.url + url)
                settle(page)
                shoot(page, f"{name}-{theme}-{viewport}")
                if name == "exercise-solved":
                    part = page.locator(f"#part-{solved}")
                    assert part.locator("details.solution").is_visible()
                    shoot(page, f"solved-part-{theme}-{viewport}", part)
                if viewport == "phone" and (bad := horizontal_overflow(page)):
                    spills[f"{name}-{theme}"] = bad
            login(student)  # signup, the last page, logged out
    assert spills == {}, "wider than a 390-px phone, outside any scrolling box"
    # The check itself sees a spill (the page is the phone-sized signup page now).
    # Sized through the CSSOM: the pages' Content-Security-Policy refuses style="" markup.
    page.evaluate("const p = document.createElement('p'); p.id = 'wide'; p.textContent = 'wide';"
                  " p.style.width = '600px'; document.querySelector('main').append(p)")
    assert horizontal_overflow(page) == ["p#wide (right edge 616 px)"]
    watch.assert_clean()


# Pages whose math is read on screen: both whose display math sits on list items' second lines,
# a formula-heavy one, and the one with the most math around a code part.
MATH_SAMPLE = (CODE_SLUG, "utilisation_rule", SOLVED_SLUG, "region_loss_fleet")


def every_formula() -> list[tuple[str, bool]]:
    """(TeX, display?) of every formula in every exercise's statement, prompts and worked
    solution, canonical variant, as practice/markdown.py hands them to the page."""
    from exercises import templating
    from practice.markdown import render_markdown
    from tests.practice.test_math_rendering import read

    found: dict[tuple[str, bool], None] = {}
    for spec in registry.load_all().values():
        params = registry.params_for(spec, registry.CANONICAL_VARIANT)
        solution = registry.solve(spec, params)
        preamble, sections = templating.split_sections(
            templating.render(spec.solution_template, params, solution))
        texts = [templating.render(spec.statement_template, params, solution), preamble,
                 *sections.values(), *(p.prompt for p in spec.parts)]
        for text in texts:
            parsed = read(render_markdown(text))
            found.update(dict.fromkeys(zip(parsed.math, parsed.display, strict=True)))
    return list(found)


def test_katex_typesets_every_formula(page: Any, live_server: Any, student: User,
                                      watch: PageWatch) -> None:
    for slug in MATH_SAMPLE:
        exercise = Exercise.objects.get(slug=slug)
        for part in registry.get(slug).parts:
            reveal_solution(student, exercise, part.id)
    for slug in MATH_SAMPLE:
        page.goto(f"{live_server.url}/ex/{slug}/")
        settle(page)
        # throwOnError is off on the page, so a command KaTeX lacks shows in its error colour
        # (#cc0000) rather than raising, and a whole formula that fails becomes .katex-error.
        got = page.evaluate("""() => {
          const math = [...document.querySelectorAll('.math.inline, .math.block')];
          return {
            count: math.length,
            untypeset: math.filter(m => !m.querySelector(':scope > .katex, :scope > .katex-display'))
                           .map(m => m.textContent.slice(0, 80)),
            errors: [...document.querySelectorAll('.katex-error')].map(e => e.title || e.textContent),
            red: [...document.querySelectorAll('.katex *')]
                   .filter(e => getComputedStyle(e).color === 'rgb(204, 0, 0)')
                   .map(e => e.closest('.math').getAttribute('data-tex')),
          };
        }""")
        assert got["count"] > 0 and got["untypeset"] == [] and got["errors"] == [], (slug, got)
        assert got["red"] == [], (slug, got["red"])
    # Every other formula: KaTeX is on this page now, so typeset them all here, strictly.
    formulas = every_formula()
    failed = page.evaluate("""(formulas) => formulas.flatMap(([tex, displayMode]) => {
        try { katex.renderToString(tex, {displayMode, throwOnError: true}); return []; }
        catch (err) { return [tex + '  ->  ' + err.message]; }
      })""", formulas)
    assert len(formulas) > 100 and failed == [], "\n".join(failed)
    watch.assert_clean()


# The theme as the page has it; `looks` is judged from the page background, whatever Pico's
# exact colours are.
THEME_STATE = """() => {
  const [r, g, b] = getComputedStyle(document.documentElement).backgroundColor
    .match(/[\\d.]+/g).map(Number);
  return {attr: document.documentElement.getAttribute('data-theme'),
          pressed: document.querySelector('[data-theme-toggle]').getAttribute('aria-pressed'),
          stored: localStorage.getItem('roofline:theme'),
          looks: 0.299 * r + 0.587 * g + 0.114 * b < 128 ? 'dark' : 'light'};
}"""


def test_the_theme_toggle_overrides_the_system_and_is_remembered(
        page: Any, live_server: Any, student: User, watch: PageWatch) -> None:
    set_look(page, "light", "desktop")
    page.goto(f"{live_server.url}/ex/{CODE_SLUG}/")
    settle(page)
    page.keyboard.press("Tab")  # the first stop is the skip link, shown once focused
    skip = page.get_by_role("link", name="Skip to content")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert skip.is_visible() and skip.bounding_box()["y"] >= 0

    toggle = page.get_by_role("button", name="Dark mode")
    assert toggle.is_visible()
    assert page.evaluate(THEME_STATE) == {"attr": None, "pressed": "false", "stored": None,
                                          "looks": "light"}
    toggle.click()
    assert page.evaluate(THEME_STATE) == {"attr": "dark", "pressed": "true", "stored": "dark",
                                          "looks": "dark"}
    page.reload()
    settle(page)
    assert page.evaluate(THEME_STATE)["attr"] == "dark"
    # Dark mode reaches the vendored widgets: KaTeX takes the text colour, the editor inverts.
    assert page.evaluate("""() => {
        const katex = document.querySelector('.katex'), p = katex.closest('p, li, div');
        return getComputedStyle(katex).color === getComputedStyle(p).color
          && getComputedStyle(document.querySelector('.cm-scroller')).filter.startsWith('invert');
      }""")

    # A stored choice beats the system setting, both ways.
    set_look(page, "dark", "desktop")
    toggle.click()
    assert page.evaluate(THEME_STATE) == {"attr": "light", "pressed": "false",
                                          "stored": "light", "looks": "light"}
    assert page.evaluate("getComputedStyle(document.querySelector('.cm-scroller')).filter") \
        == "none"
    page.evaluate("localStorage.clear()")
    page.reload()
    settle(page)
    assert page.evaluate(THEME_STATE) == {"attr": None, "pressed": "true", "stored": None,
                                          "looks": "dark"}
    # Charts (canvas, out of CSS's reach) take their text and grid colours from the theme.
    page.goto(f"{live_server.url}/history/")
    settle(page)
    if page.locator("canvas").count():
        assert page.evaluate("""() => {
            const css = getComputedStyle(document.documentElement);
            return Chart.defaults.color === css.getPropertyValue('--pico-muted-color').trim();
          }""")
    watch.assert_clean()


def test_without_javascript_the_system_theme_rules_and_no_dead_toggle_shows(
        browser: Any, live_server: Any, student: User) -> None:
    context = browser.new_context(java_script_enabled=False, color_scheme="dark")
    context.add_cookies(session_cookies(student, live_server.url))
    page = context.new_page()
    page.goto(live_server.url + "/")
    assert page.locator("[data-theme-toggle]").is_hidden()
    assert page.evaluate(THEME_STATE)["looks"] == "dark"
    context.close()
