"""The catalog's filters: a student's status per exercise, the query string read into filters,
and the faceted counts shown beside each filter value.

Everything filters a list already in memory (one row per active exercise, a few dozen), so a
page costs the same few queries whatever the number of exercises: one for the exercises, one
for the user's PartState rows, one for their due RecallItems (see `load_entries`).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from exercises.registry import DIFFICULTIES
from exercises.spec import PART_TYPES
from practice.models import Exercise, PartState, RecallItem, User

# The query-string value of each status, and the word shown for it.
STATUSES: dict[str, str] = {
    "new": "new", "progress": "in progress", "solved": "solved", "due": "due for review"}
KINDS: tuple[str, ...] = ("topic", "difficulty", "status", "type")
KIND_LABELS: dict[str, str] = {
    "topic": "Topic", "difficulty": "Difficulty", "status": "Status", "type": "Part type"}
VIEWS: tuple[str, ...] = ("cards", "list")
# Longer searches are cut: no title or summary needs more, and it bounds the work per keystroke.
MAX_QUERY = 100


@dataclass(frozen=True)
class Entry:
    """One exercise as the catalog shows it, with the user's progress on it."""

    exercise: Exercise
    types: tuple[str, ...]  # its part types, in PART_TYPES order, each once
    parts: int
    solved: int
    status: str | None  # a STATUSES key; None when there is no user to have one

    @property
    def status_label(self) -> str:
        return STATUSES[self.status] if self.status else ""

    @property
    def percent(self) -> int:
        return round(100 * self.solved / self.parts) if self.parts else 0

    def values(self, kind: str) -> tuple[str, ...]:
        """What this exercise is under one filter kind (a part type filter may match several)."""
        if kind == "topic":
            return (self.exercise.topic,)
        if kind == "difficulty":
            return (self.exercise.difficulty,)
        if kind == "status":
            return (self.status,) if self.status else ()
        return self.types


def status_of(parts: Sequence[str], states: Iterable[PartState], due_parts: set[str]) -> str:
    """The one status of an exercise for a user. The first rule that holds wins:

    - "due" (due for review): a RecallItem for one of its current parts is due now or earlier;
      it comes first because it is the one that asks for something today, even of a solved one;
    - "solved": every current part has a PartState with solved_at set;
    - "progress" (in progress): some current part was tried (attempts > 0), solved, or had its
      solution revealed;
    - "new": none of these.

    Only the exercise's current parts count: a part since removed from its folder does not.
    """
    current = set(parts)
    if due_parts & current:
        return "due"
    touched = [s for s in states if s.part_id in current]
    solved = {s.part_id for s in touched if s.solved_at}
    if current and solved == current:
        return "solved"
    if any(s.attempts or s.solved_at or s.revealed_at for s in touched):
        return "progress"
    return "new"


def load_entries(user: User | None, now: datetime) -> list[Entry]:
    """Every active exercise with the user's status, in three queries whatever their number."""
    exercises = list(Exercise.objects.filter(active=True))
    states: dict[int, list[PartState]] = defaultdict(list)
    due: dict[int, set[str]] = defaultdict(set)
    if user is not None:
        pks = [ex.pk for ex in exercises]
        for st in PartState.objects.filter(user=user, exercise_id__in=pks).only(
                "exercise_id", "part_id", "attempts", "solved_at", "revealed_at"):
            states[st.exercise_id].append(st)
        for ex_id, part_id in RecallItem.objects.filter(
                user=user, exercise_id__in=pks, due__lte=now).values_list("exercise_id",
                                                                          "part_id"):
            due[ex_id].add(part_id)
    entries = []
    for ex in exercises:
        part_ids = [p["id"] for p in ex.parts]
        kinds = {p["type"] for p in ex.parts}
        ex_states = states[ex.pk]
        entries.append(Entry(
            exercise=ex, types=tuple(t for t in PART_TYPES if t in kinds), parts=len(part_ids),
            solved=len({s.part_id for s in ex_states if s.solved_at} & set(part_ids)),
            status=status_of(part_ids, ex_states, due[ex.pk]) if user is not None else None))
    return entries


@dataclass(frozen=True)
class Filters:
    """What the query string asks for, with unknown values already dropped."""

    chosen: Mapping[str, frozenset[str]]  # kind -> values; a kind absent or empty: no filter
    q: str = ""
    view: str = "cards"
    ignored: tuple[str, ...] = ()  # kinds that had a value we do not know (never the value)

    def active(self) -> bool:
        return bool(self.q) or any(self.chosen.values())


def options_for(entries: Sequence[Entry], with_status: bool) -> dict[str, tuple[str, ...]]:
    """The values each filter kind offers: topics from the exercises themselves, the rest fixed.
    Without a user there is no status to filter on, so the kind is left out."""
    options = {"topic": tuple(sorted({e.exercise.topic for e in entries})),
               "difficulty": DIFFICULTIES, "status": tuple(STATUSES), "type": PART_TYPES}
    if not with_status:
        del options["status"]
    return options


def parse(query: Mapping[str, Sequence[str]], options: Mapping[str, Sequence[str]]) -> Filters:
    """Read the GET parameters: several values of one kind are allowed (OR within the kind).
    An unknown value is dropped and its kind noted; the search is plain text, cut to MAX_QUERY."""
    chosen: dict[str, frozenset[str]] = {}
    ignored = []
    for kind in KINDS:
        raw = [v for v in query.get(kind, ()) if v]
        known = set(options.get(kind, ()))
        chosen[kind] = frozenset(v for v in raw if v in known)
        if len(chosen[kind]) < len(set(raw)):
            ignored.append(kind)
    q_values = query.get("q", ())
    q = " ".join((q_values[-1] if q_values else "")[:MAX_QUERY].split())
    view_values = query.get("view", ())
    view = view_values[-1] if view_values and view_values[-1] in VIEWS else "cards"
    return Filters(chosen=chosen, q=q, view=view, ignored=tuple(ignored))


def matches(entry: Entry, filters: Filters, skip: str | None = None) -> bool:
    """AND across kinds, OR within one; `skip` leaves one kind out (for its own counts)."""
    for kind, wanted in filters.chosen.items():
        if kind != skip and wanted and not wanted.intersection(entry.values(kind)):
            return False
    if filters.q:
        needle = filters.q.casefold()
        ex = entry.exercise
        return needle in ex.title.casefold() or needle in ex.summary.casefold()
    return True


@dataclass(frozen=True)
class FacetValue:
    value: str
    label: str
    count: int  # exercises it would show, given every other active filter and the search
    checked: bool
    dom_id: str  # the id of its count, which an htmx answer swaps in place


@dataclass(frozen=True)
class Facet:
    kind: str
    label: str
    values: list[FacetValue] = field(default_factory=list)


def facets(entries: Sequence[Entry], filters: Filters,
           options: Mapping[str, Sequence[str]]) -> list[Facet]:
    """Counts as faceted search shows them: a value's count applies every active filter except
    its own kind's, so ticking it next (OR within the kind) would add exactly those."""
    out = []
    for kind in KINDS:
        if kind not in options:
            continue
        counts: dict[str, int] = defaultdict(int)
        for e in entries:
            if matches(e, filters, skip=kind):
                for v in e.values(kind):
                    counts[v] += 1
        chosen = filters.chosen.get(kind, frozenset())
        out.append(Facet(kind, KIND_LABELS[kind], [
            FacetValue(v, STATUSES[v] if kind == "status" else v, counts[v], v in chosen,
                       f"count-{kind}-{i}")
            for i, v in enumerate(options[kind])]))
    return out
