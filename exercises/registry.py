"""Finds exercise folders and turns each into an `ExerciseSpec`.

An exercise is any folder under `exercises/` that holds an `exercise.toml`. A bad file fails
loading with a message naming the file and the field, so an author sees exactly what to fix.
"""
from __future__ import annotations

import copy
import importlib
import json
import math
import random
import re
import sys
import threading
import tomllib
import uuid
from collections import OrderedDict
from functools import cache
from pathlib import Path
from typing import Any

from exercises import hints, key_point_specs, mistake_kinds
from exercises.spec import (
    PART_TYPES,
    SYMBOL_KINDS,
    Evidence,
    ExerciseSpec,
    Mistake,
    Option,
    PartSpec,
    Quantity,
    SelftestCase,
)

EXERCISES_DIR = Path(__file__).resolve().parent
SLUG_RE = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
PART_ID_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
DIFFICULTIES = ("easy", "medium", "hard")
REQUIRED_FUNCS = ("generate", "solve", "mistakes")


class ExerciseError(ValueError):
    """An exercise folder is malformed; the message names the file and the field."""


def _where(path: Path, field: str) -> str:
    try:
        rel = path.relative_to(EXERCISES_DIR.parent)
    except ValueError:
        rel = path
    return f"{rel}: {field}"


def _req(data: dict[str, Any], key: str, kind: type | tuple[type, ...], path: Path,
         field: str | None = None) -> Any:
    field = field or key
    if key not in data:
        raise ExerciseError(f"{_where(path, field)}: missing")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ExerciseError(f"{_where(path, field)}: expected {name}, got {value!r}")
    return value


def _opt(data: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any,
         path: Path, field: str) -> Any:
    if key not in data:
        return default
    return _req(data, key, kind, path, field)


_PART_KEYS = {
    "id", "type", "prompt", "points", "tolerance", "abs_tolerance", "unit", "symbols", "options",
    "multi", "key_points", "language", "time_limit_s", "memory_mb", "output_limit_kb",
    "tolerance_reason", "sandbox_modules", "symbol_kinds",
}


def _time_limit(raw: dict[str, Any], path: Path, f: str) -> float:
    value = float(_opt(raw, "time_limit_s", (int, float), 10.0, path, f + ".time_limit_s"))
    if not 0.5 <= value <= 120:
        raise ExerciseError(f"{_where(path, f + '.time_limit_s')}: must be between 0.5 and 120")
    return value


def _parse_part(raw: Any, index: int, path: Path) -> PartSpec:
    f = f"parts[{index}]"
    if not isinstance(raw, dict):
        raise ExerciseError(f"{_where(path, f)}: expected a table")
    unknown = set(raw) - _PART_KEYS
    if unknown:
        raise ExerciseError(f"{_where(path, f + '.' + sorted(unknown)[0])}: unknown field")
    pid = _req(raw, "id", str, path, f + ".id")
    if not PART_ID_RE.match(pid):
        raise ExerciseError(f"{_where(path, f + '.id')}: {pid!r} must match {PART_ID_RE.pattern}")
    ptype = _req(raw, "type", str, path, f + ".type")
    if ptype not in PART_TYPES:
        raise ExerciseError(
            f"{_where(path, f + '.type')}: unknown type {ptype!r} (one of {', '.join(PART_TYPES)})"
        )
    options: list[Option] = []
    for j, o in enumerate(_opt(raw, "options", list, [], path, f + ".options")):
        of = f"{f}.options[{j}]"
        if not isinstance(o, dict):
            raise ExerciseError(f"{_where(path, of)}: expected {{ id = ..., label = ... }}")
        options.append(Option(_req(o, "id", str, path, of + ".id"),
                              _req(o, "label", str, path, of + ".label")))
    if ptype in ("choice", "ranking") and len(options) < 2:
        raise ExerciseError(f"{_where(path, f + '.options')}: a {ptype} part needs 2+ options")
    if len({o.id for o in options}) != len(options):
        raise ExerciseError(f"{_where(path, f + '.options')}: option ids must be unique")
    tolerance = float(_opt(raw, "tolerance", (int, float), 0.02, path, f + ".tolerance"))
    if tolerance < 0 or tolerance >= 1:
        raise ExerciseError(f"{_where(path, f + '.tolerance')}: must be in [0, 1)")
    reason = _opt(raw, "tolerance_reason", str, "", path, f + ".tolerance_reason")
    if ptype == "number" and tolerance != 0.02 and not reason:
        raise ExerciseError(
            f"{_where(path, f + '.tolerance_reason')}: say why the tolerance is not the default 2 %"
        )
    symbols = tuple(_opt(raw, "symbols", list, [], path, f + ".symbols"))
    if ptype == "expression" and not symbols:
        raise ExerciseError(f"{_where(path, f + '.symbols')}: an expression part needs symbols")
    kinds = _symbol_kinds(raw, ptype, tuple(str(s) for s in symbols), path, f)
    try:
        points = key_point_specs.parse(_opt(raw, "key_points", list, [], path, f + ".key_points"),
                                       f + ".key_points")
    except key_point_specs.KeyPointError as exc:
        raise ExerciseError(f"{path}: {exc}") from exc
    return PartSpec(
        id=pid,
        type=ptype,  # type: ignore[arg-type]
        prompt=_req(raw, "prompt", str, path, f + ".prompt"),
        points=float(_opt(raw, "points", (int, float), 1.0, path, f + ".points")),
        tolerance=tolerance,
        abs_tolerance=float(_opt(raw, "abs_tolerance", (int, float), 0.0, path,
                                 f + ".abs_tolerance")),
        unit=_opt(raw, "unit", str, "", path, f + ".unit"),
        symbols=tuple(str(s) for s in symbols),
        symbol_kinds=kinds,
        options=tuple(options),
        multi=_opt(raw, "multi", bool, False, path, f + ".multi"),
        key_points=tuple(p.text for p in points),
        key_point_specs=points,
        language=_opt(raw, "language", str, "python", path, f + ".language"),
        time_limit_s=_time_limit(raw, path, f),
        memory_mb=_limit(raw, "memory_mb", 512, 32, 8192, path, f),
        output_limit_kb=_limit(raw, "output_limit_kb", 1024, 1, 65536, path, f),
        tolerance_reason=reason,
        sandbox_modules=_sandbox_modules(raw, path, f),
    )


def _symbol_kinds(raw: dict[str, Any], ptype: str, symbols: tuple[str, ...], path: Path,
                  f: str) -> tuple[tuple[str, Any], ...]:
    """`symbol_kinds = { N = "count", S = "real" }`: checked against the part's own symbols."""
    table = _opt(raw, "symbol_kinds", dict, {}, path, f + ".symbol_kinds")
    if table and ptype != "expression":
        raise ExerciseError(f"{_where(path, f + '.symbol_kinds')}: only for expression parts")
    for name, kind in table.items():
        where = _where(path, f"{f}.symbol_kinds.{name}")
        if name not in symbols:
            raise ExerciseError(f"{where}: not one of the part's symbols ({', '.join(symbols)})")
        if kind not in SYMBOL_KINDS:
            raise ExerciseError(f"{where}: {kind!r} is not one of {', '.join(SYMBOL_KINDS)}")
    return tuple((name, table[name]) for name in symbols if name in table)


SANDBOX_MODULE_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def _sandbox_modules(raw: dict[str, Any], path: Path, f: str) -> tuple[str, ...]:
    names = _opt(raw, "sandbox_modules", list, [], path, f + ".sandbox_modules")
    for name in names:
        if not isinstance(name, str) or not SANDBOX_MODULE_RE.match(name) \
                or not (EXERCISES_DIR / f"{name}.py").is_file():
            raise ExerciseError(f"{_where(path, f + '.sandbox_modules')}: {name!r} is not a "
                                "module file directly in exercises/")
    return tuple(names)


def _limit(raw: dict[str, Any], key: str, default: int, low: int, high: int, path: Path,
           f: str) -> int:
    value = int(_opt(raw, key, int, default, path, f"{f}.{key}"))
    if not low <= value <= high:
        raise ExerciseError(f"{_where(path, f + '.' + key)}: must be between {low} and {high}")
    return value


def _parse_selftest(path: Path) -> tuple[SelftestCase, ...]:
    if not path.exists():
        return ()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ExerciseError(f"{_where(path, 'syntax')}: {exc}") from exc
    cases = []
    for i, raw in enumerate(data.get("case", [])):
        f = f"case[{i}]"
        invalid = bool(raw.get("invalid", False))
        score = raw.get("score")
        if not invalid and not isinstance(score, (int, float)) and "covered" not in raw:
            raise ExerciseError(f"{_where(path, f + '.score')}: a number (or invalid = true)")
        answer, file, mutant = raw.get("answer", ""), raw.get("file", ""), raw.get("mutant", "")
        if sum(1 for given in (answer, file, mutant) if given) != 1:
            raise ExerciseError(f"{_where(path, f + '.answer')}: give one of `answer`, `file` "
                                "or `mutant` (a name in the part's mutants.toml)")
        cases.append(SelftestCase(
            part=_req(raw, "part", str, path, f + ".part"),
            answer=str(answer),
            score=None if score is None else float(score),
            invalid=invalid,
            feedback=str(raw.get("feedback", "")),
            variant=str(raw.get("variant", "canonical")),
            file=str(file),
            mutant=str(mutant),
            tolerance=float(_opt(raw, "tolerance", (int, float), 1e-9, path, f + ".tolerance")),
            **_key_point_labels(raw, path, f),
        ))
    return tuple(cases)


def _key_point_labels(raw: dict[str, Any], path: Path, f: str) -> dict[str, Any]:
    """A text case's expert labels: `covered` and `contradicted` key point indices."""
    if "covered" not in raw:
        if "contradicted" in raw:
            raise ExerciseError(f"{_where(path, f + '.covered')}: label `covered` too ([] if none)")
        return {}
    labels: dict[str, Any] = {"label": str(raw.get("label", ""))}
    for key in ("covered", "contradicted"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(i, int) and i >= 0 for i in value):
            raise ExerciseError(f"{_where(path, f'{f}.{key}')}: a list of key point indices")
        labels[key] = tuple(sorted(set(value)))
    if set(labels["covered"]) & set(labels["contradicted"]):
        raise ExerciseError(f"{_where(path, f + '.contradicted')}: a key point cannot be both "
                            "covered and contradicted")
    return labels


def _exercise_id(data: dict[str, Any], toml_path: Path) -> str:
    """The exercise's stable id (`uuid = "..."`): what its database row and its students'
    history are keyed by, so that renaming the folder keeps them (PrairieLearn's question uuid).
    """
    text = data.get("uuid")
    fresh = f'uuid = "{uuid.uuid4()}"'
    if not isinstance(text, str):
        raise ExerciseError(f"{_where(toml_path, 'uuid')}: missing; every exercise needs an id "
                            f"of its own, made once and never changed, e.g. {fresh}")
    try:
        value = uuid.UUID(text)
    except ValueError:
        raise ExerciseError(f"{_where(toml_path, 'uuid')}: {text!r} is not a UUID; e.g. "
                            f"{fresh}") from None
    return str(value)


def load(folder: Path) -> ExerciseSpec:
    """Load one exercise folder; raises ExerciseError naming the file and field on any problem."""
    slug = folder.name
    toml_path = folder / "exercise.toml"
    if not SLUG_RE.match(slug):
        raise ExerciseError(f"{_where(folder, 'folder name')}: {slug!r} must match {SLUG_RE.pattern}")
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ExerciseError(f"{_where(toml_path, 'syntax')}: {exc}") from exc
    title = _req(data, "title", str, toml_path)
    topic = _req(data, "topic", str, toml_path)
    minutes = int(_opt(data, "minutes", int, 20, toml_path, "minutes"))
    summary = _opt(data, "summary", str, "", toml_path, "summary")
    seed = _req(data, "seed", str, toml_path)
    if not re.fullmatch(r"Q(0[1-9]|[1-4][0-9])", seed):
        raise ExerciseError(f"{_where(toml_path, 'seed')}: {seed!r} is not Q01..Q49")
    exercise_id = _exercise_id(data, toml_path)
    difficulty = _opt(data, "difficulty", str, "medium", toml_path, "difficulty")
    if difficulty not in DIFFICULTIES:
        raise ExerciseError(f"{_where(toml_path, 'difficulty')}: one of {', '.join(DIFFICULTIES)}")
    raw_parts = _req(data, "parts", list, toml_path)
    parts = tuple(_parse_part(p, i, toml_path) for i, p in enumerate(raw_parts))
    if not parts:
        raise ExerciseError(f"{_where(toml_path, 'parts')}: at least one part")
    ids = [p.id for p in parts]
    if len(set(ids)) != len(ids):
        raise ExerciseError(f"{_where(toml_path, 'parts')}: duplicate part id")
    for name in ("statement.md", "solution.md", "exercise.py"):
        if not (folder / name).exists():
            raise ExerciseError(f"{_where(folder / name, 'file')}: missing")
    if any(p.type == "code" for p in parts):
        for name in ("starter.py", "reference.py", "driver.py", "checks.py"):
            if not (folder / "code" / name).exists():
                raise ExerciseError(f"{_where(folder / 'code' / name, 'file')}: missing")
    if any(p.type == "kernel" for p in parts):
        for name in ("task.py", "starter.py", "reference.py"):
            if not (folder / "kernel" / name).exists():
                raise ExerciseError(f"{_where(folder / 'kernel' / name, 'file')}: missing")
        for p in parts:
            # The cases' limit plus start-up and compilation must fit the Celery soft limit
            # (graders/kernel.py MAX_TIME_LIMIT_S).
            if p.type == "kernel" and not 0 < p.time_limit_s <= 40:
                raise ExerciseError(f"{_where(toml_path, p.id)}: a kernel part's time_limit_s "
                                    "is at most 40")
    module = importlib.import_module(f"exercises.{slug}.exercise")
    exercise_py = folder / "exercise.py"
    if not isinstance(getattr(module, "CANONICAL", None), dict):
        raise ExerciseError(f"{_where(exercise_py, 'CANONICAL')}: must be a dict")
    for fn in REQUIRED_FUNCS:
        if not callable(getattr(module, fn, None)):
            raise ExerciseError(f"{_where(exercise_py, fn)}: function missing")
    spec = ExerciseSpec(
        slug=slug,
        uuid=exercise_id,
        title=title,
        seed=seed,
        topic=topic,
        difficulty=difficulty,
        minutes=minutes,
        summary=summary,
        parts=parts,
        path=folder,
        module=module,
        selftest=_parse_selftest(folder / "selftest.toml"),
    )
    # A wrong symbol table or a mistake without a known kind is an authoring error: say so when
    # the folder loads, not at grading.
    symbol_values(spec, dict(module.CANONICAL))
    check_mistake_kinds(spec, dict(module.CANONICAL))
    # Hint markers are checked on the raw template (they hold no placeholders): a typo in one,
    # an unknown part or a cost outside (0, 1] fails the folder, not the interview page.
    try:
        hints.parse(spec.statement_template, tuple(ids), _where(folder / "statement.md", "hint"))
    except hints.HintError as exc:
        raise ExerciseError(str(exc)) from exc
    return spec


def exercise_folders(root: Path = EXERCISES_DIR) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/exercise.toml") if not p.parent.name.startswith("_"))


@cache
def load_all() -> dict[str, ExerciseSpec]:
    """Every exercise, by slug. Cached: exercise folders do not change while a process runs."""
    specs = {spec.slug: spec for spec in (load(f) for f in exercise_folders())}
    owner: dict[str, str] = {}
    for spec in specs.values():
        if spec.uuid in owner:
            raise ExerciseError(
                f"{_where(spec.path / 'exercise.toml', 'uuid')}: {spec.uuid} is also "
                f"{owner[spec.uuid]}'s (a copied folder keeps its uuid: give the copy a new one, "
                f'e.g. uuid = "{uuid.uuid4()}")')
        owner[spec.uuid] = spec.slug
    return specs


def get(slug: str) -> ExerciseSpec:
    try:
        return load_all()[slug]
    except KeyError:
        raise KeyError(f"no exercise {slug!r}") from None


def load_one(slug: str) -> ExerciseSpec:
    """The exercise `get(slug)` returns, without loading the other 48: for a command that shows
    or grades one exercise in a process of its own (tools run `manage.py grade` hundreds of
    times). A slug is its folder's name. What only the whole set can check (a uuid used by two
    folders) stays load_all's, which the site, the tests and `selftest` run."""
    if load_all.cache_info().currsize:
        return get(slug)
    folder = EXERCISES_DIR / slug
    if not SLUG_RE.match(slug) or not (folder / "exercise.toml").is_file():
        raise KeyError(f"no exercise {slug!r}")
    return load(folder)


# --- variants -------------------------------------------------------------------------------

CANONICAL_VARIANT = "canonical"


def parse_variant(text: str | int) -> str | int:
    """`canonical` or a non-negative integer seed."""
    if isinstance(text, int) or str(text).isdigit():
        n = int(text)
        if n < 0 or n > 2**31:
            raise ValueError("a variant number is between 0 and 2^31")
        return n
    if text == CANONICAL_VARIANT:
        return CANONICAL_VARIANT
    raise ValueError(f"variant must be 'canonical' or a number, not {text!r}")


def params_for(spec: ExerciseSpec, variant: str | int) -> dict[str, Any]:
    """The variant's parameters: a fresh copy each call, the caller's to change.

    Drawn once per process and variant: generate() draws until a variant is sensible, which
    solves each candidate (a millisecond or more), and every exercise page and grade asks."""
    v = parse_variant(variant)
    if v == CANONICAL_VARIANT:
        return dict(spec.module.CANONICAL)
    key = (spec.module, int(v))  # the module: a reloaded exercise draws afresh
    with _params_lock:
        hit = _params_cache.get(key)
        if hit is not None:
            _params_cache.move_to_end(key)
    if hit is None:
        hit = dict(spec.module.generate(random.Random(int(v))))
        with _params_lock:
            _params_cache[key] = hit
            while len(_params_cache) > PARAMS_CACHE_SIZE:
                _params_cache.popitem(last=False)
    return copy.deepcopy(hit)


PARAMS_CACHE_SIZE = 512  # variants; a few hundred bytes each
_params_lock = threading.Lock()
_params_cache: OrderedDict[tuple[Any, int], dict[str, Any]] = OrderedDict()


def solve(spec: ExerciseSpec, params: dict[str, Any]) -> dict[str, Any]:
    solution = spec.module.solve(dict(params))
    missing = [p.id for p in spec.parts if p.id not in solution]
    if missing:
        raise ExerciseError(f"{spec.slug}: solve() gives no answer for {', '.join(missing)}")
    return solution


def symbol_values(spec: ExerciseSpec, params: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The variant's own value of each expression part's symbols, from the exercise's optional
    `symbol_values(p) -> {part_id: {symbol: value}}` (empty where it gives none), checked: a part
    that is not an expression part, a symbol the part lacks, or a value its kind forbids (a count
    that is not a whole number, a negative or infinite real) fails naming the exercise."""
    fn = getattr(spec.module, "symbol_values", None)
    if fn is None:
        return {}
    found = fn(dict(params))
    where = f"exercises/{spec.slug}/exercise.py: symbol_values()"
    if not isinstance(found, dict):
        raise ExerciseError(f"{where}: must return a dict of part id -> {{symbol: value}}")
    parts = {p.id: p for p in spec.parts if p.type == "expression"}
    checked: dict[str, dict[str, float]] = {}
    for pid, values in found.items():
        part = parts.get(pid)
        if part is None:
            raise ExerciseError(f"{where}: {pid!r} is not an expression part")
        if not isinstance(values, dict):
            raise ExerciseError(f"{where}: {pid} must map symbols to numbers")
        checked[pid] = {}
        for name, value in values.items():
            if name not in part.symbols:
                raise ExerciseError(f"{where}: {pid}.{name} is not one of the part's symbols")
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value):
                raise ExerciseError(f"{where}: {pid}.{name} = {value!r} is not a finite number")
            kind = part.symbol_kind(name)
            low = 0 if kind == "count0" else 1
            if kind != "real" and (value != int(value) or value < low):
                raise ExerciseError(f"{where}: {pid}.{name} = {value!r} is not a {kind} "
                                    f"(a whole number >= {low})")
            # 0 is allowed for a real (an overhead this variant sets to nothing): the grader
            # then samples just above it, as formula symbols are positive.
            if kind == "real" and value < 0:
                raise ExerciseError(f"{where}: {pid}.{name} = {value!r} is negative")
            checked[pid][name] = float(value)
    return checked


def mistakes(spec: ExerciseSpec, params: dict[str, Any], part_id: str | None = None
             ) -> tuple[Mistake, ...]:
    found = tuple(spec.module.mistakes(dict(params)))
    return tuple(m for m in found if part_id is None or m.part == part_id)


def check_mistake_kinds(spec: ExerciseSpec, params: dict[str, Any]) -> None:
    """Fail, naming the exercise, the mistake and the allowed kinds, when a mistake of this
    variant has no kind or one `exercises.mistake_kinds` does not list. Run when an exercise
    loads (canonical variant) and by the suite over many variants; grading never raises over a
    missing label."""
    for m in mistakes(spec, params):
        bad = mistake_kinds.unknown(m.kind)
        if not bad:
            continue
        what = "has no kind" if not m.kind else f"has unknown kind {', '.join(map(repr, bad))}"
        raise ExerciseError(
            f"exercises/{spec.slug}/exercise.py: mistakes(): mistake {m.name or '(unnamed)'!r} "
            f"of part {m.part!r} {what}; allowed kinds (exercises/mistake_kinds.py): "
            f"{', '.join(mistake_kinds.KINDS)}")


EVIDENCE_KINDS = ("trace", "series")
EVIDENCE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
FILENAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}\.json$")
MAX_EVIDENCE_BYTES = 2 << 20  # what one download may weigh: a page draws it too


def evidence(spec: ExerciseSpec, params: dict[str, Any]) -> dict[str, Evidence]:
    """The variant's evidence files by name (empty for an exercise without `evidence()`), checked:
    a bad name, kind or filename, or data that is not JSON, fails naming the exercise.

    Cached per variant: some exercises simulate a whole engine run to make theirs (up to ~0.3 s),
    and the exercise page lists them on every view. Evidence is a pure function of the variant
    (the suite checks it), so the cached objects are shared; callers only read them."""
    hit = cached_evidence(spec, params)
    if hit is not None:
        return hit
    found = _checked_evidence(spec, spec.module.evidence(dict(params)))
    keep_evidence(spec, params, found)
    return found


def _evidence_key(spec: ExerciseSpec, params: dict[str, Any]) -> tuple[Any, str] | None:
    """Keyed by the exercise's function itself: the cache holds it, so its identity cannot be
    reused by another. None for an exercise without `evidence()`."""
    fn = getattr(spec.module, "evidence", None)
    return None if fn is None else (fn, json.dumps(params, sort_keys=True, default=str))


def cached_evidence(spec: ExerciseSpec, params: dict[str, Any]) -> dict[str, Evidence] | None:
    """The variant's evidence if this process has it already ({} for an exercise without
    `evidence()`), else None: nothing is made."""
    key = _evidence_key(spec, params)
    if key is None:
        return {}
    with _evidence_lock:
        hit = _evidence_cache.get(key)
        if hit is not None:
            _evidence_cache.move_to_end(key)
        return hit


def keep_evidence(spec: ExerciseSpec, params: dict[str, Any],
                  found: dict[str, Evidence]) -> None:
    """Hold the variant's evidence in this process (made here, or by another process and read
    from the shared cache: practice.evidence), so its next view reads it from memory."""
    key = _evidence_key(spec, params)
    if key is None:
        return
    with _evidence_lock:
        _evidence_cache[key] = found
        _evidence_cache.move_to_end(key)
        while len(_evidence_cache) > EVIDENCE_CACHE_SIZE:
            _evidence_cache.popitem(last=False)


EVIDENCE_CACHE_SIZE = 64  # variants; each entry is at most MAX_EVIDENCE_BYTES of JSON-able data
_evidence_lock = threading.Lock()
_evidence_cache: OrderedDict[tuple[Any, str], dict[str, Evidence]] = OrderedDict()


def _checked_evidence(spec: ExerciseSpec, found: Any) -> dict[str, Evidence]:
    where = f"exercises/{spec.slug}/exercise.py: evidence()"
    if not isinstance(found, dict):
        raise ExerciseError(f"{where}: must return a dict of name -> Evidence")
    for name, ev in found.items():
        if not isinstance(name, str) or not EVIDENCE_NAME_RE.match(name):
            raise ExerciseError(f"{where}: bad name {name!r}")
        if not isinstance(ev, Evidence):
            raise ExerciseError(f"{where}: {name} is not an Evidence")
        if ev.kind not in EVIDENCE_KINDS:
            raise ExerciseError(f"{where}: {name}.kind must be one of {', '.join(EVIDENCE_KINDS)}")
        if not FILENAME_RE.match(ev.filename):
            raise ExerciseError(f"{where}: {name}.filename must be a plain name ending in .json")
        if not _evidence_shape_ok(ev):
            raise ExerciseError(f"{where}: {name}.data is not the shape its kind "
                                f"{ev.kind!r} needs (see Evidence in exercises/spec.py)")
    return found


def evidence_leaks(spec: ExerciseSpec, params: dict[str, Any]) -> list[Any]:
    """The numbers in this variant's evidence that state a number part's answer (a label, a
    trace arg, a series' peak, end or flat value the part would accept): the rule is
    exercises/evidence_leaks.py's. Not run on every page view: the suite runs it over hundreds
    of variants of each exercise, where a leak is an authoring error to fix."""
    from exercises.evidence_leaks import find_leaks

    found = evidence(spec, params)
    return find_leaks(spec, params, solve(spec, params), found) if found else []


def _evidence_shape_ok(ev: Evidence) -> bool:
    data = ev.data
    if not isinstance(data, dict):
        return False
    if ev.kind == "trace":
        return isinstance(data.get("traceEvents"), list)
    series = data.get("series")
    if not (isinstance(data.get("x"), dict) and isinstance(series, list) and bool(series)
            and all(isinstance(s, dict) and isinstance(s.get("points"), list) for s in series)):
        return False
    # Optional: the y units whose values the page also draws as a distribution (latencies).
    histogram = data.get("histogram", [])
    units = {s.get("unit", "") for s in series}
    return isinstance(histogram, list) and all(u in units for u in histogram)


def evidence_bytes(ev: Evidence) -> bytes:
    """The file a student downloads: compact JSON, no NaN (browsers' JSON.parse rejects it)."""
    body = json.dumps(ev.data, separators=(",", ":"), allow_nan=False).encode()
    if len(body) > MAX_EVIDENCE_BYTES:
        raise ExerciseError(f"{ev.filename}: {len(body):,} bytes, over {MAX_EVIDENCE_BYTES:,}")
    return body


def answer_json(value: Any) -> Any:
    """A reference answer as JSON: numbers become {"value", "unit"}."""
    if isinstance(value, Quantity):
        return value.as_json()
    if isinstance(value, (list, tuple)):
        return [answer_json(v) for v in value]
    return value


def intermediates(spec: ExerciseSpec, solution: dict[str, Any]) -> dict[str, Any]:
    part_ids = {p.id for p in spec.parts}
    return {k: answer_json(v) for k, v in solution.items() if k not in part_ids}


# --- shared modules a code part's driver imports -------------------------------------------

def shared_module_path(name: str) -> Path:
    """exercises/<name>.py: a shared module a driver imports by its plain name."""
    return EXERCISES_DIR / f"{name}.py"


def expose_shared_modules(names: tuple[str, ...]) -> None:
    """Let a driver's plain `import engine_sim` work here in the worker too, where the reference
    runs, by naming the package's module under its plain name (in the sandbox the file sits
    beside driver.py)."""
    for name in names:
        if name not in sys.modules:
            sys.modules[name] = importlib.import_module(f"exercises.{name}")
