"""`manage.py grade SLUG PART (--answer TEXT | --file PATH)` — the site's pipeline, run now.

`--json` prints the grader's result with `final` beside `verdict`: false for a "provisional"
result (a kernel that passed only the CPU preview; its score is the preview's, not a grade:
practice/provisional.py), true otherwise."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

import graders
from exercises import registry
from graders.base import InvalidAnswer
from practice.provisional import is_final


class Command(BaseCommand):
    help = "Grade one answer to one part of one variant and print the result."
    # Read-only, and run once per call by tools (../shared/tools/cli_contract.py runs it a few
    # hundred times): the system checks would import every view for nothing.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("part")
        src = parser.add_mutually_exclusive_group(required=True)
        src.add_argument("--answer")
        src.add_argument("--file")
        parser.add_argument("--variant", default="canonical")
        parser.add_argument("--mode", choices=["submit", "run"], default="submit")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            spec = registry.load_one(opts["slug"])
            spec.part(opts["part"])
            params = registry.params_for(spec, opts["variant"])
        except (KeyError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        text = opts["answer"]
        if opts["file"]:
            text = Path(opts["file"]).read_text(encoding="utf-8")
        try:
            result = graders.grade_answer(spec, opts["part"], text, params, mode=opts["mode"])
            doc = result.as_json()
        except InvalidAnswer as exc:
            doc = graders.invalid_result(str(exc)).as_json()
        doc["final"] = is_final(doc["verdict"])
        if opts["json"]:
            self.stdout.write(json.dumps(doc, indent=2))
        else:
            note = "" if doc["final"] else " (not final)"
            self.stdout.write(f"{doc['verdict']} {doc['score']}{note}: {doc['feedback']}")
            for c in doc["checks"]:
                self.stdout.write(f"  {'PASS' if c['passed'] else 'FAIL'} {c['name']} {c['message']}")
