"""`manage.py selftest [SLUG...]` — every exercise proves itself; non-zero exit on any failure."""
from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from graders import selftest

# Each process loads its own key-point encoder (about 0.7 GB), so more than this costs memory
# for little: the run is as long as its slowest exercise (a kernel's, about 20 s) by then.
MAX_JOBS = 4


class Command(BaseCommand):
    help = "Run each exercise's selftest (reference, mistakes, listed cases, mutants)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slugs", nargs="*")
        parser.add_argument("--no-code", action="store_true", help="skip sandboxed code parts")
        parser.add_argument("--list-passed", action="store_true")
        parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, MAX_JOBS),
                            help="exercises run at a time, each in its own process (default: "
                                 f"one per core, at most {MAX_JOBS})")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            reports = selftest.run_all(opts["slugs"] or None, code=not opts["no_code"],
                                       jobs=opts["jobs"])
        except KeyError as exc:
            raise CommandError(str(exc)) from exc
        failed = 0
        for rep in reports:
            status = "ok" if rep.ok else "FAILED"
            self.stdout.write(f"{rep.slug}: {status} ({len(rep.passed)} passed, "
                              f"{len(rep.failed)} failed)")
            for line in rep.failed:
                self.stdout.write(f"  FAIL {line}")
            if opts["list_passed"]:
                for line in rep.passed:
                    self.stdout.write(f"  ok   {line}")
            failed += not rep.ok
        if failed:
            raise CommandError(f"{failed} exercise(s) failed their selftest")
