from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _sync_after_migrate(sender: AppConfig, **kwargs: object) -> None:
    # Exercises are folders; the rows follow them on every migrate (and `make run` syncs again).
    from practice.actions.exercises import sync_exercises

    sync_exercises()


class PracticeConfig(AppConfig):
    name = "practice"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        from practice import error_hook

        post_migrate.connect(_sync_after_migrate, sender=self)
        error_hook.install(settings.SENTRY_DSN)
