"""The Celery app: configured from Django settings (CELERY_ namespace), tasks listed explicitly."""
from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "practice.settings.dev")

app = Celery("practice", include=["practice.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.on_after_configure.connect
def _make_broker_folders(sender: Celery, **kwargs: object) -> None:
    # The filesystem transport expects its folders to exist.
    options = sender.conf.broker_transport_options or {}
    if str(sender.conf.broker_url).startswith("filesystem"):
        for key in ("data_folder_in", "data_folder_out", "control_folder", "processed_folder"):
            if options.get(key):
                os.makedirs(options[key], exist_ok=True)
