"""Local development: DEBUG on, a throwaway key when none is set, localhost only."""
from __future__ import annotations

from .base import *  # noqa: F403
from .base import SECRET_KEY as _KEY

DEBUG = True
SECRET_KEY = _KEY or "dev-only-not-secret"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
