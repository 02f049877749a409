from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from practice.actions.people import create_demo_users


class Command(BaseCommand):
    help = "Create the demo student and instructor for a local site."

    def handle(self, *args: Any, **opts: Any) -> None:
        made = create_demo_users()
        self.stdout.write("demo users: student / student-demo, instructor / instructor-demo"
                          + (f" (created {', '.join(made)})" if made else " (already there)"))
