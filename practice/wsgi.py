from __future__ import annotations

import os

from django.core.signals import request_finished
from django.core.wsgi import get_wsgi_application

from practice.heap import HeapSettler
from practice.warm import warm_web_process

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "practice.settings.dev")
application = get_wsgi_application()
# The web server's processes only (gunicorn): tests and management commands never load this
# module, so their heaps are left as they are.
request_finished.connect(HeapSettler(), weak=False, dispatch_uid="practice.heap")
warm_web_process()
