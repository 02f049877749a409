"""`manage.py exercises list|show` — what the registry holds, as JSON for tools (DESIGN §8)."""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from exercises import registry


def part_json(p: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": p.id, "type": p.type, "points": p.points, "prompt": p.prompt}
    if p.type == "number":
        out |= {"unit": p.unit, "tolerance": p.tolerance}
    if p.type == "expression":
        out["symbols"] = list(p.symbols)
    if p.options:
        out["options"] = [{"id": o.id, "label": o.label} for o in p.options]
    return out


class Command(BaseCommand):
    help = "List exercises or show one variant's parameters and reference answers."
    # Read-only, and run once per call by tools (../shared/tools/cli_contract.py runs it a few
    # hundred times): the system checks would import every view for nothing.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        ls = sub.add_parser("list")
        ls.add_argument("--json", action="store_true")
        show = sub.add_parser("show")
        show.add_argument("slug")
        show.add_argument("--variant", default="canonical")
        show.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["action"] == "list":
            rows = [{"slug": s.slug, "seed": s.seed, "title": s.title, "topic": s.topic,
                     "difficulty": s.difficulty, "minutes": s.minutes,
                     "parts": [part_json(p) for p in s.parts]}
                    for s in registry.load_all().values()]
            if opts["json"]:
                self.stdout.write(json.dumps(rows, indent=2))
            else:
                for r in rows:
                    self.stdout.write(f"{r['seed']}  {r['slug']:<28} {r['title']}")
            return
        try:
            spec = registry.load_one(opts["slug"])
            params = registry.params_for(spec, opts["variant"])
        except (KeyError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        solution = registry.solve(spec, params)
        doc = {
            "slug": spec.slug, "variant": opts["variant"], "params": params,
            "answers": {p.id: registry.answer_json(solution[p.id]) for p in spec.parts},
            "intermediates": registry.intermediates(spec, solution),
        }
        if opts["json"]:
            self.stdout.write(json.dumps(doc, indent=2, default=str))
        else:
            for k, v in doc["answers"].items():
                self.stdout.write(f"{k}: {v}")
