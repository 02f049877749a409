"""Log-in with throttling: too many failures for a username from one address lock it for a while.

The counting is in practice/ratelimit.py; this is Django's LoginView and form with the check
before the password is tried and the count after it fails. A locked pair is refused even with the
right password (otherwise the lock would tell a guesser when they had found it), on the form, with
HTTP 429 and how long to wait.
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.http import HttpResponse

from practice import ratelimit


class ThrottledAuthenticationForm(AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "throttled": "Too many failed log-ins for this username from your address. "
                     "Try again in %(wait)s.",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Read by templates/registration/login.html, which otherwise shows one generic line.
        self.throttled_message = ""

    def _throttled(self, seconds: int) -> ValidationError:
        error = ValidationError(self.error_messages["throttled"], code="throttled",
                                params={"wait": ratelimit.wait_words(seconds)})
        self.throttled_message = error.messages[0]
        return error

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if not (username and password):
            return super().clean()  # a missing field: nothing was tried, nothing to count
        address = ratelimit.client_address(self.request)
        locked = ratelimit.login_locked_for(username, address)
        if locked:
            raise self._throttled(locked)
        try:
            cleaned = super().clean()
        except ValidationError as exc:
            if getattr(exc, "code", None) == "invalid_login":
                locked = ratelimit.record_login_failure(username, address)
                if locked:
                    raise self._throttled(locked) from None
            raise
        ratelimit.clear_login_failures(username, address)
        return cleaned


class LoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm

    def form_invalid(self, form: ThrottledAuthenticationForm) -> HttpResponse:  # type: ignore[override]
        response = super().form_invalid(form)
        if form.has_error(NON_FIELD_ERRORS, "throttled"):
            response.status_code = 429
        return response
