"""Security headers on every response, static files included.

Django's SecurityMiddleware already sends X-Content-Type-Options, Referrer-Policy and
Cross-Origin-Opener-Policy (settings in base.py), and XFrameOptionsMiddleware sends X-Frame-Options
for views. This middleware adds what Django 5.2 lacks: Content-Security-Policy (ROOFLINE_CSP) and
Permissions-Policy (ROOFLINE_PERMISSIONS_POLICY), plus X-Frame-Options for the responses that never
reach XFrameOptionsMiddleware (WhiteNoise answers static files before it). It sits between the two
in MIDDLEWARE so that it sees those static responses too.

One exception to "only our own files": CodeMirror builds its theme at run time and writes it into
a <style> element. Each response gets a fresh random nonce (`request.csp_nonce`), allowed for
style elements only (`style-src 'self' 'nonce-…'`); base.html puts it on CodeMirror's script tag,
which hands it to the editor (frontend/cm-entry.js). Scripts stay 'self' only, with no nonce, and
style="" attributes stay refused: an injected tag cannot know the nonce of the page it lands in.
"""
from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase


def csp_header(policy: Mapping[str, Sequence[str]], nonce: str = "") -> str:
    """`{"script-src": ["'self'"]}` -> "script-src 'self'" (directives joined by "; "), with
    the nonce added to style-src."""
    def sources(name: str, listed: Sequence[str]) -> list[str]:
        return [*listed, f"'nonce-{nonce}'"] if nonce and name == "style-src" else list(listed)
    return "; ".join(" ".join([name, *sources(name, listed)]) for name, listed in policy.items())


class SecurityHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        # 128 random bits per response (CSP asks for at least 128), URL-safe base64.
        nonce = secrets.token_urlsafe(16)
        request.csp_nonce = nonce  # type: ignore[attr-defined]
        response = self.get_response(request)
        # Settings are read per response (joining ten short lists costs microseconds), so a
        # test's override_settings is honoured.
        # Django's DEBUG error pages are built from inline CSS and JavaScript; under the policy
        # they would show unstyled. Only then, and only with DEBUG on, is the policy left out.
        if not (settings.DEBUG and response.status_code >= 400):
            response.headers.setdefault("Content-Security-Policy",
                                        csp_header(settings.ROOFLINE_CSP, nonce))
        response.headers.setdefault("Permissions-Policy", settings.ROOFLINE_PERMISSIONS_POLICY)
        if not getattr(response, "xframe_options_exempt", False):
            response.headers.setdefault("X-Frame-Options", settings.X_FRAME_OPTIONS)
        return response
