from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from practice.actions.exercises import sync_exercises


class Command(BaseCommand):
    help = "Make the Exercise rows match the exercise folders."

    def handle(self, *args: Any, **opts: Any) -> None:
        r = sync_exercises()
        self.stdout.write(f"exercises: {r.created} created, {r.updated} updated "
                          f"({r.renamed} renamed), {r.deactivated} deactivated")
