"""Security basics: headers on every response (a CSP that allows only our own files), CSRF on
every form, cookie flags, password hashing, and `check --deploy` clean for the prod settings.

Pages and forms are found by crawling the rendered HTML (tests/security/support.py), so a page
added later is checked without editing this file.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.hashers import check_password
from django.test import Client, override_settings

from exercises import registry
from practice.models import User
from practice.settings import base
from practice.views.auth import ThrottledAuthenticationForm
from tests.security.support import (
    Form,
    People,
    client_for,
    crawl,
    csrf_header_token,
    forms_on,
)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
HX = {"HTTP_HX_REQUEST": "true"}
EXPECTED_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}


def parse_csp(header: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for directive in filter(None, (d.strip() for d in header.split(";"))):
        name, *sources = directive.split()
        out[name] = sources
    return out


NONCE = re.compile(r"'nonce-[A-Za-z0-9_-]{22,}'")


def csp_of(r: Any) -> tuple[dict[str, list[str]], str]:
    """The response's policy with style-src's nonce taken out, and the nonce."""
    csp = parse_csp(r.headers.get("Content-Security-Policy", ""))
    nonces = [s for s in csp.get("style-src", []) if NONCE.fullmatch(s)]
    assert len(nonces) == 1, csp
    csp["style-src"] = [s for s in csp["style-src"] if s not in nonces]
    return csp, nonces[0][len("'nonce-"):-1]


def assert_security_headers(r: Any, what: str) -> None:
    assert csp_of(r)[0] == EXPECTED_CSP, what
    assert r.headers.get("X-Content-Type-Options") == "nosniff", what
    assert r.headers.get("Referrer-Policy") == "same-origin", what
    assert r.headers.get("X-Frame-Options") == "DENY", what
    policy = r.headers.get("Permissions-Policy", "")
    assert "camera=()" in policy and "microphone=()" in policy and "geolocation=()" in policy, what


# --- headers ----------------------------------------------------------------------------------

def test_every_kind_of_response_carries_the_headers(people: People) -> None:
    anon, student = Client(), client_for(people.student)
    slug = "kv_transfer_disagg"
    part = registry.get(slug).parts[0].id
    student.get(f"/ex/{slug}/")  # draws the variant
    responses = {
        "login page": anon.get("/login/"),
        "redirect to log in": anon.get("/"),
        "catalog": student.get("/"),
        "exercise page": student.get(f"/ex/{slug}/"),
        "htmx partial": student.post(f"/ex/{slug}/{part}/submit/", {"answer": "1 GB"}, **HX),
        "redirect after a plain post": student.post(f"/ex/{slug}/{part}/submit/",
                                                    {"answer": "2 GB"}),
        "404": student.get("/no/such/page/"),
        "static file (WhiteNoise)": anon.get("/static/app.js"),
        "vendored font": anon.get("/static/vendor/katex/fonts/KaTeX_AMS-Regular.woff2"),
        "admin log-in": anon.get("/admin/login/"),
        "CSRF failure (403)": Client(enforce_csrf_checks=True).post("/login/", {}),
        "log-in throttled or not": anon.post("/login/", {"username": "x", "password": "y"}),
    }
    for what, r in responses.items():
        assert r.status_code < 500, what
        assert_security_headers(r, what)
    assert responses["static file (WhiteNoise)"].status_code == 200
    assert responses["404"].status_code == 404


def test_the_policy_allows_only_our_own_files(people: People) -> None:
    csp = parse_csp(" ; ".join(f"{k} {' '.join(v)}" for k, v in base.ROOFLINE_CSP.items()))
    assert csp == EXPECTED_CSP
    every_source = {s for sources in csp.values() for s in sources}
    assert not every_source & {"'unsafe-inline'", "'unsafe-eval'", "'unsafe-hashes'", "*",
                               "http:", "https:"}
    # The one addition: a fresh nonce per response, for style elements only (CodeMirror's
    # theme), handed to the editor's script tag. Scripts get no nonce.
    c = client_for(people.student)
    r1, r2 = c.get("/ex/kv_page_ledger/"), c.get("/ex/kv_page_ledger/")
    (p1, n1), (p2, n2) = csp_of(r1), csp_of(r2)
    assert p1 == p2 == EXPECTED_CSP and n1 != n2
    assert "nonce" not in " ".join(p1["script-src"])
    html = r1.content.decode()
    assert f'codemirror-python.min.js" nonce="{n1}"' in html
    assert html.count(n1) == 1  # on that tag only


@override_settings(DEBUG=True)
def test_debug_error_pages_are_left_without_the_policy_but_pages_are_not(people: People
                                                                        ) -> None:
    # Django's DEBUG 404/500 pages are inline-styled; only they skip the policy, only in DEBUG.
    c = client_for(people.student)
    assert "Content-Security-Policy" in c.get("/").headers
    assert "Content-Security-Policy" not in c.get("/no/such/page/").headers


class _InlineFinder(HTMLParser):
    """What the policy would block: inline scripts, style attributes, event-handler attributes,
    javascript: URLs, and any script, style sheet, image or font from another origin."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._script_open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "script":
            # json_script blocks are data the browser never runs.
            if "src" not in a and a.get("type") != "application/json":
                self.found.append(f"inline <script {a}>")
        for name, value in a.items():
            if name == "style":
                self.found.append(f"<{tag} style={value!r}>")
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")
            if name in ("href", "src", "action", "formaction") and \
                    value.strip().lower().startswith("javascript:"):
                self.found.append(f"<{tag} {name}={value!r}>")
            if (tag in ("script", "img", "iframe") and name == "src"
                    or tag == "link" and name == "href" and a.get("rel") != "canonical") \
                    and value.startswith(("http:", "https:", "//")):
                self.found.append(f"<{tag} {name}={value!r}> from another origin")


def _inline(html: str) -> list[str]:
    f = _InlineFinder()
    f.feed(html)
    f.close()
    return f.found


def _all_pages(people: People) -> dict[str, dict[str, str]]:
    """Who -> page -> HTML: a visitor, a student and an instructor, plus every exercise page
    (the crawler keeps three per family; parts differ per exercise)."""
    pages = {
        "anonymous": crawl(Client(), ("/login/", "/signup/")),
        "student": crawl(client_for(people.student), ("/", "/join/",
                                                       f"/join/{people.cohort_code}/")),
        "instructor": crawl(client_for(people.instructor), (
            "/", "/teach/", "/teach/review/", f"/teach/submissions/{people.text_sub.pk}/",
            f"/teach/submissions/{people.code_sub.pk}/")),
    }
    c = client_for(people.student)
    for slug in sorted(registry.load_all()):
        r = c.get(f"/ex/{slug}/")
        assert r.status_code == 200, slug
        pages["student"][f"/ex/{slug}/"] = r.content.decode()
    return pages


def test_no_page_has_inline_script_or_style(people: People) -> None:
    pages = _all_pages(people)
    assert sum(len(p) for p in pages.values()) > 60
    problems = [f"{who} {url}: {item}" for who, by_url in pages.items()
                for url, html in by_url.items() for item in _inline(html)]
    assert problems == []


def test_no_template_has_inline_script_or_style() -> None:
    """The same check on the template sources, for pages the crawl may not reach."""
    problems = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        problems += [f"{path.relative_to(ROOT)}: {item}"
                     for item in _inline(path.read_text(encoding="utf-8"))]
    assert problems == []


# --- CSRF -------------------------------------------------------------------------------------

def _post_forms(people: People) -> list[tuple[str, Form, str]]:
    """(who, form, the page's hx-headers token) for every POSTing form on every page."""
    out = []
    for who, by_url in _all_pages(people).items():
        for url, html in by_url.items():
            forms, hx_headers = forms_on(url, html)
            out += [(who, f, csrf_header_token(hx_headers)) for f in forms]
    return out


def test_every_post_form_carries_a_csrf_token(people: People) -> None:
    forms = _post_forms(people)
    actions = {f.action for _, f, _ in forms}
    for expected in ("/login/", "/signup/", "/logout/", "/join/", "/mock/start/",
                     "/teach/cohorts/new/"):
        assert any(a.startswith(expected) for a in actions), (expected, sorted(actions))
    assert any("/submit/" in a for a in actions) and any("/preview/" in a for a in actions)
    missing = []
    for who, form, header_token in forms:
        # A plain form must carry the token field. An htmx request sends the enclosing form's
        # fields and the page's hx-headers: either one is enough.
        ok = form.token_field or (form.htmx and len(header_token) >= 32)
        if not ok:
            missing.append(f"{who}: {form.label}")
    assert missing == []


def test_a_post_without_the_token_is_refused(people: People) -> None:
    users = {"anonymous": None, "student": people.student, "instructor": people.instructor}
    done: set[tuple[str, str]] = set()
    for who, form, _ in _post_forms(people):
        if (who, form.action) in done:
            continue
        done.add((who, form.action))
        c = client_for(users[who], enforce_csrf_checks=True)
        for extra in ({}, HX):
            r = c.post(form.action, form.fields, **extra)
            assert r.status_code == 403, (who, form.label, r.status_code)
    assert len(done) > 10


# --- cookies, passwords, deployment settings --------------------------------------------------

def test_session_and_csrf_cookies_are_httponly_and_samesite_lax(people: People) -> None:
    c = Client()
    c.get("/login/")
    csrf = c.cookies["csrftoken"]
    r = c.post("/login/", {"username": "ada", "password": "pw-ada-12345",
                           "csrfmiddlewaretoken": csrf.value})
    assert r.status_code == 302
    session = r.cookies["sessionid"]
    assert session["httponly"] is True and session["samesite"] == "Lax"
    assert csrf["httponly"] is True and csrf["samesite"] == "Lax"
    assert not session["secure"]  # plain HTTP under test; prod sets it (next test)


def _prod_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "ROOFLINE_"))}
    return env | {"DJANGO_SETTINGS_MODULE": "practice.settings.prod",
                  "SECRET_KEY": secrets.token_urlsafe(50),
                  "ALLOWED_HOSTS": "roofline.example.org",
                  "ROOFLINE_VAR_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}


def test_prod_settings_send_cookies_over_https_only(tmp_path: Path) -> None:
    code = ("import django, json; django.setup(); from django.conf import settings as s; "
            "print(json.dumps({k: getattr(s, k) for k in ('SESSION_COOKIE_SECURE', "
            "'SESSION_COOKIE_HTTPONLY', 'SESSION_COOKIE_SAMESITE', 'CSRF_COOKIE_SECURE', "
            "'SECURE_SSL_REDIRECT', 'SECURE_HSTS_SECONDS', 'DEBUG')}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_prod_env(tmp_path),
                         capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"SESSION_COOKIE_SECURE": True, "SESSION_COOKIE_HTTPONLY": True,
                   "SESSION_COOKIE_SAMESITE": "Lax", "CSRF_COOKIE_SECURE": True,
                   "SECURE_SSL_REDIRECT": True, "SECURE_HSTS_SECONDS": 365 * 24 * 3600,
                   "DEBUG": False}


def test_check_deploy_is_clean_for_prod_settings(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=_prod_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues" in out.stdout


def test_prod_refuses_to_start_without_a_secret_key(tmp_path: Path) -> None:
    env = _prod_env(tmp_path)
    del env["SECRET_KEY"]
    out = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "SECRET_KEY must be set" in out.stderr


def test_passwords_are_stored_as_argon2_hashes() -> None:
    # Test settings hash with MD5 for speed; this checks what dev and prod use.
    assert base.PASSWORD_HASHERS[0] == "django.contrib.auth.hashers.Argon2PasswordHasher"
    with override_settings(PASSWORD_HASHERS=base.PASSWORD_HASHERS):
        user = User.objects.create_user("carol", password="correct horse battery")
        stored = User.objects.get(pk=user.pk).password
        assert stored.startswith("argon2$argon2id$")
        assert "correct horse battery" not in stored
        assert check_password("correct horse battery", stored)
        assert not check_password("correct horse batterY", stored)
        # The same password gets a different salt, so a different hash.
        again = User.objects.create_user("dave", password="correct horse battery")
        assert User.objects.get(pk=again.pk).password != stored


def test_the_login_view_is_the_throttled_one() -> None:
    r = Client().get("/login/")
    assert isinstance(r.context["form"], ThrottledAuthenticationForm)


def test_the_compose_services_urls_come_from_their_passwords(tmp_path: Path) -> None:
    # docker-compose.yml passes DATABASE_URL and REDIS_URL empty when its own postgres and
    # redis serve, with their passwords (Compose v1 cannot nest ${...}): the settings build the
    # URLs, the password quoted; an explicit URL wins.
    code = ("import django, json; django.setup(); from django.conf import settings as s; "
            "d = s.DATABASES['default']; "
            "print(json.dumps([d['HOST'], d['USER'], d['PASSWORD'], d['NAME'], s.REDIS_URL]))")
    env = _prod_env(tmp_path) | {"DATABASE_URL": "", "REDIS_URL": "",
                                 "ROOFLINE_POSTGRES_PASSWORD": "p@ss/1",
                                 "ROOFLINE_REDIS_PASSWORD": "r3dis"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [
        "postgres", "roofline", "p@ss/1", "roofline", "redis://:r3dis@redis:6379/0"]
    env["DATABASE_URL"] = "postgres://u:pw@db.internal:5432/x"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1])[:4] == ["db.internal", "u", "pw", "x"]
