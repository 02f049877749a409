from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from practice import actions


class Command(BaseCommand):
    help = "Create the demo student and instructor for a local site."

    def handle(self, *args: Any, **opts: Any) -> None:
        made = actions.create_demo_users()
        self.stdout.write("demo users: student / student-demo, instructor / instructor-demo"
                          + (f" (created {', '.join(made)})" if made else " (already there)"))
