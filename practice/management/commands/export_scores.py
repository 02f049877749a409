"""`manage.py export_scores COHORT_ID --as USERNAME [-o FILE]` — a cohort's score sheet as CSV.

The command line asks practice/access.py like the site does: it runs as a named user and refuses
a cohort that user may not see, so a shell on the server is not a way round the cohort walls
for an instructor who has one (staff see every cohort, as on the site).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from practice import access, reports
from practice.models import User


class Command(BaseCommand):
    help = "Write a cohort's scores (one row per student, one column per part) as CSV."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cohort_id", type=int)
        parser.add_argument("--as", dest="username", required=True,
                            help="the instructor (or staff member) exporting; must see the cohort")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")

    def handle(self, *args: Any, **opts: Any) -> None:
        viewer = User.objects.filter(username=opts["username"], is_active=True).first()
        if viewer is None or not access.is_instructor(viewer):
            raise CommandError(f"{opts['username']!r} is not an active instructor or staff")
        try:
            cohort = access.cohort_for(viewer, opts["cohort_id"])
        except access.Forbidden as exc:
            # The same answer whether the cohort exists or is someone else's, as on the site.
            raise CommandError(f"no cohort {opts['cohort_id']} that {viewer.username} "
                               "may see") from exc
        text = reports.cohort_scores_csv(viewer, cohort)
        if opts["output"]:
            Path(opts["output"]).write_text(text, encoding="utf-8", newline="")
            self.stderr.write(f"wrote {len(text.splitlines()) - 1} students to {opts['output']}")
        else:
            self.stdout.write(text, ending="")
