"""Hostile outputs: what a submission's `driver.run_case` returns is the student's to choose (a
submission can replace the driver's function, or hand back objects built to serialise oddly), so
every code part's checks must survive any JSON the sandbox can send back (issue 19, item 5).

The sandbox is replaced by a fake relay that seals whatever payloads a test picks, so the whole
path the worker takes from the sandbox's stdout to the grade runs (code.grade: read_relay, the
strict parse, the output validation, checks.check, the score) and only the student's process is
left out. Asserted for every code part in the registry: no exception (an exception is "Grading
failed on our side", an error verdict), a score below 1 and a verdict that is not "error".
"""
from __future__ import annotations

import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runners
from exercises import registry
from exercises.spec import ExerciseSpec, PartSpec
from graders import code as code_grader
from graders.base import GradeContext, GradeResult
from runners.spec import SandboxResult, SandboxSpec

SEED = 12345
BULKY_CASES = 20
MARK = "\x00hostile\x00"

# Values as the JSON text a reply could carry. Some are rejected by the strict parse, some by
# the range and shape checks, the rest (wrong types) must be refused by each exercise's checks.
HOSTILE: dict[str, str] = {
    "huge int": str(10**4000),
    "huge negative int": str(-(10**4000)),
    "int past 2**64": str(2**64 + 1),
    "int past the parser's digit limit": "7" * 5000,
    "overflowing float": "1e999",
    "overflowing negative float": "-1e999",
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "string": '"12"',
    "empty string": '""',
    "null": "null",
    "true": "true",
    "empty dict": "{}",
    "dict": '{"0": 1, "value": 2}',
    "empty list": "[]",
    "list of one": "[1]",
    "deep nesting": "[" * 500 + "]" * 500,
    "nesting past the parser": "[" * 100_000 + "]" * 100_000,
    "huge list": "[" + ",".join(["1"] * 20_000) + "]",
    "huge string": json.dumps("x" * 200_000),
    "many keys": json.dumps({f"k{i}": i for i in range(2_000)}),
    "NUL in a string": json.dumps("a\x00b"),
    "unpaired surrogate": '"a\\ud800b"',
}


@dataclass
class Part:
    spec: ExerciseSpec
    part: PartSpec
    ctx: GradeContext
    cases: list[dict[str, Any]]
    expected: list[str]  # the reference's outputs as JSON text, one per case

    def __repr__(self) -> str:  # what Hypothesis prints for a failing example
        return f"Part({self.spec.slug}/{self.part.id})"


@dataclass
class FakeRelay:
    """Stands in for the sandbox: answers every case with `payloads[i]`, sealed with the key the
    grader put on the relay's stdin, in the relay's record format."""

    payloads: list[bytes] = field(default_factory=list, repr=False)

    def run(self, spec: SandboxSpec) -> SandboxResult:
        config, *inputs = spec.stdin.decode("utf-8").splitlines()
        key = bytes.fromhex(config.split(" ")[0])
        timed = config.split(" ")[6]  # the cases the relay times ("-": none)
        timed_ids = {int(i) for i in timed.split(",")} if timed != "-" else set()
        assert len(inputs) == len(self.payloads)
        records = [(b"ready", 0, b"-", b"")]
        # A timed case's CPU seconds: 1 ms, well inside any speed check.
        records += [(b"output", i, b"cpu=0.001" if i in timed_ids else b"-", p)
                    for i, p in enumerate(self.payloads)]
        records.append((b"end", len(self.payloads), b"ok:case:0:-", b""))
        lines = []
        for seq, (kind, index, field_, payload) in enumerate(records):
            body = b" ".join([str(seq).encode(), kind, str(index).encode(), field_,
                              binascii.b2a_base64(payload, newline=False)])
            lines.append(code_grader.seal(key, body) + b" " + body + b"\n")
        return SandboxResult(exit_code=0, signal=None, stdout=b"".join(lines), stderr=b"",
                             wall_s=0.0, cpu_s=0.0, timed_out=False, output_truncated=False,
                             oom_killed=False, backend="fake", memory_isolation="cgroup")


def _code_parts() -> list[tuple[str, str]]:
    return sorted((slug, p.id) for slug, spec in registry.load_all().items()
                  for p in spec.parts if p.type == "code")


CODE_PARTS = _code_parts()
_parts: dict[tuple[str, str], Part] = {}


@pytest.fixture(scope="module")
def relay() -> Iterator[FakeRelay]:
    fake = FakeRelay()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runners, "get_backend", lambda *a, **k: fake)
        yield fake


def _part(slug: str, part_id: str) -> Part:
    if (slug, part_id) not in _parts:
        spec = registry.get(slug)
        part = spec.part(part_id)
        params = registry.params_for(spec, registry.CANONICAL_VARIANT)
        ctx = GradeContext(reference=registry.solve(spec, params)[part_id], params=params,
                           exercise_path=str(spec.path), mode="submit", seed=SEED)
        cases, expected = code_grader._cases_and_expected(
            spec.code_dir, ctx.reference, params, SEED, "submit", part.sandbox_modules)
        _parts[slug, part_id] = Part(spec, part, ctx, cases,
                                     [json.dumps(e["output"]) for e in expected])
    return _parts[slug, part_id]


@pytest.fixture
def prepared(slug: str, part_id: str) -> Part:
    """The part's cases, made before Hypothesis starts: hidden_cases runs its own @given."""
    return _part(slug, part_id)


def _grade(relay: FakeRelay, p: Part, payloads: list[str]) -> GradeResult:
    relay.payloads = [x.encode("utf-8") for x in payloads]
    return code_grader.grade(p.part, "pass\n", p.ctx)


def _paths(value: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON value (the root included), outermost first."""
    yield here
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*here, i))


def _replace(text: str, path: tuple[Any, ...], hostile: str) -> str:
    """The JSON `text` with the value at `path` replaced by the raw JSON `hostile`."""
    if not path:
        return hostile
    value = json.loads(text)
    holder = value
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = MARK
    return json.dumps(value).replace(json.dumps(MARK), hostile)


def _assert_storable(result: GradeResult, what: str) -> None:
    """As the worker saves it: PostgreSQL's jsonb takes neither NUL nor unpaired surrogates."""
    text = json.dumps(result.as_json(), ensure_ascii=False)
    text.encode("utf-8")
    assert "\\u0000" not in text, what


def _assert_survives(result: GradeResult, what: str) -> None:
    assert result.verdict != "error", what
    assert result.score < 1.0, f"{what}: {result.feedback[:300]}"
    failing = [c for c in result.checks if not c.passed]
    assert failing, what
    _assert_storable(result, what)
    # The checks themselves coped: graders/outputs.run_checks did not have to step in.
    assert "refused_outputs" not in result.extra, (what, result.extra["refused_outputs"])


def test_every_code_part_is_fuzzed() -> None:
    assert len(CODE_PARTS) >= 14, CODE_PARTS


def test_the_fake_relay_grades_the_reference_at_one(relay: FakeRelay) -> None:
    # The fuzz below would prove nothing if the unchanged outputs did not score 1.
    for slug, part_id in CODE_PARTS:
        p = _part(slug, part_id)
        result = _grade(relay, p, p.expected)
        assert (result.score, result.verdict) == (1.0, "correct"), (slug, result.feedback)


@pytest.mark.parametrize(("slug", "part_id"), CODE_PARTS)
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_output_in_every_case(relay: FakeRelay, slug: str, part_id: str,
                                        kind: str) -> None:
    p = _part(slug, part_id)
    # The bulky values in the first cases only: 300 copies of 120 KB prove no more than 20.
    n = BULKY_CASES if len(HOSTILE[kind]) > 10_000 else len(p.cases)
    result = _grade(relay, p, [HOSTILE[kind]] * n + p.expected[n:])
    _assert_survives(result, f"{slug}: every output is {kind}")
    assert result.score == 0.0 or any(c.passed for c in result.checks), result.feedback


@pytest.mark.parametrize(("slug", "part_id"), CODE_PARTS)
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_one_hostile_value_inside_one_output(relay: FakeRelay, prepared: Part,
                                             data: st.DataObject) -> None:
    """The reference's output with one value anywhere inside it (the root, a field, a list
    item) swapped for a hostile one: the checks' shape tests see a plausible output."""
    p = prepared
    index = data.draw(st.integers(0, len(p.cases) - 1), label="case")
    places = list(_paths(json.loads(p.expected[index])))
    path = places[data.draw(st.integers(0, len(places) - 1), label="place")]
    kind = data.draw(st.sampled_from(sorted(HOSTILE)), label="value")
    payloads = list(p.expected)
    payloads[index] = _replace(p.expected[index], path, HOSTILE[kind])
    if payloads[index] == p.expected[index]:
        return  # the hostile value is what the reference returned there
    result = _grade(relay, p, payloads)
    what = f"{p.spec.slug}: case {p.cases[index]['id']}, {kind} at {path}"
    assert result.verdict != "error", what
    _assert_storable(result, what)
    assert "refused_outputs" not in result.extra, (what, result.extra["refused_outputs"])
