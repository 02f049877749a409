"""Bad input everywhere: every answer field and every form, fed huge, empty, binary, unicode,
deeply nested, exponent-tower and overflowing input. Asserts: never a 5xx, nothing the student
typed is ever evaluated (eval/exec/compile/sympify/parse_expr), and bounded time per request.

Time bound: REQUEST_LIMIT_S = 5 s per request. The real work is small and capped by the graders'
own limits (a formula is at most 500 characters and 200 nodes, a number 2,000 characters, any
answer 100,000 characters; expressions, code and kernels are only pre-checked in the request and
graded by a worker), and Django refuses a body over 2.5 MB before parsing it. Measured on the
shared 2-core build machine the slowest request was well under a second (the worst case is a
1 MB POST: URL-encoding it in the test client, then decoding it); 5 s leaves room for a loaded
CI machine and PostgreSQL without letting an unbounded parse (seconds to minutes) pass.

Budget: every part of every exercise gets the CORE payloads; one part of each type gets every
payload in NASTY through the htmx path (which also renders the error back); Hypothesis then
draws parts and inputs at random (max_examples bounded, deadline off: the time bound above is
asserted instead). The whole file runs in about a minute.
"""
from __future__ import annotations

import ast
import builtins
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sympy.parsing.sympy_parser as sympy_parser
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exercises import registry
from practice.models import Submission
from tests.security.support import Form, People, Timings, client_for, crawl, forms_on, timed

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
REQUEST_LIMIT_S = 5.0
HX = {"HTTP_HX_REQUEST": "true"}
MB = 1_000_000
# In every payload that could be code: if this word ever reaches eval, exec, compile or sympy's
# string parser, the spies below fail the test. Built at run time so that this file's own source
# (which pytest and Hypothesis compile to show a traceback) does not contain it.
CANARY = "Roofline" + "Canary"

SPECS = registry.load_all()
PARTS = [(slug, part.id, part.type) for slug, spec in sorted(SPECS.items()) for part in spec.parts]
ONE_PER_TYPE = sorted({t: (s, p, t) for s, p, t in reversed(PARTS)}.values(), key=lambda x: x[2])
EXPRESSION_PARTS = [(s, p) for s, p, t in PARTS if t == "expression"]

CORE = {
    "1 MB of digits": "9" * MB,
    "NUL and binary": "1\x00" + bytes(range(256)).decode("latin-1"),
    "nested tower": "(" * 60 + "^".join(["2"] * 120) + ")" * 60,
    "1e999999": "1e999999 GB",
    # The largest float as typed, past a float once converted into the part's unit.
    "max float in TiB": "1.7976931348623157e308 TiB",
    "tiny float": "-5e-324 KiB",
}

NASTY = {
    **CORE,
    "1 MB of letters": "x" * MB,
    "1 MB of brackets (3 MB encoded: refused as too big)": "(" * MB,
    "empty": "",
    "blank": " \t\r\n \u00a0\u2003",
    "control characters": "".join(map(chr, range(32))) + "\x7f\x85\x9b",
    "bidi override": "\u202e2*S/T\u202c",
    "Arabic digits": "٣٫٥ ميغابايت",
    "Hebrew": "שלום 12",
    "combining marks": "1" + "\u0301" * 2000,
    "emoji": "😀" * 500 + "👩‍👩‍👧‍👦",
    "zero-width and BOM": "\ufeff1\u200b2\u2060",
    "fullwidth": "１＋２Ｓ",
    "math alphanumerics": "𝐒/𝐓",
    "replacement character": "\ufffd\ufffe",
    "nested 200": "(" * 200 + "S" + ")" * 200,
    "nested 20000": "(" * 20_000 + "S" + ")" * 20_000,
    "unbalanced": "(" * 3000 + "S",
    "tower of 2s": "^".join(["2"] * 200),
    "tower of 9s": "9^9^9^9^9^9",
    "symbol tower": "^".join(["S"] * 40),
    "python power tower": "10**10**10**10",
    "-1e999999": "-1e999999",
    "1e-999999": "1e-999999 ms",
    "inf": "inf", "nan": "NaN GB", "-0": "-0.0",
    "long digit string": "1" * 5000,
    "long decimal": "0." + "3" * 50_000,
    "factorial": "100000!",
    "nested exp": "exp(exp(exp(exp(999))))",
    "python import": f"__import__('os').system('touch /tmp/{CANARY}')",
    "python dunder": f"().__class__.__mro__[1].__subclasses__() # {CANARY}",
    "sympy S": f"S('{CANARY}')",
    "lambda": f"lambda: {CANARY}",
    "formula with canary": f"{CANARY}*2 + {CANARY}^2",
    "Django template": "{{ 7*7 }}{% debug %}",
    "HTML": "<script>alert(1)</script><img src=x onerror=alert(1)>",
    "SQL": "1'; DROP TABLE practice_submission; --",
    "format string": "%s%n{0.__class__}",
    "many commas": ",".join(["a"] * 5000),
    "many rankings": " > ".join(["a"] * 3000),
}


# --- the spies: nothing the student typed is evaluated ------------------------------------------

@pytest.fixture
def no_evaluation(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fail on any eval/exec/compile or sympy string parse of text that carries the canary.

    Only canary text counts: libraries legitimately compile their own code (a lazily imported
    dataclass, a namedtuple) while a request runs."""
    caught: list[str] = []

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if args and CANARY in str(args[0]):
                caught.append(f"{name}({str(args[0])[:80]!r})")
            return real(*args, **kwargs)
        return wrapper

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, spy(name, getattr(builtins, name)))
    # sympify(str) parses through this module attribute (imported at call time).
    monkeypatch.setattr(sympy_parser, "parse_expr", spy("parse_expr", sympy_parser.parse_expr))
    yield caught
    assert caught == [], caught
    assert not Path(f"/tmp/{CANARY}").exists()


@pytest.fixture
def timings() -> Iterator[Timings]:
    """Collects every request's time and every 5xx; asserts on both once the test is done, so
    a failure lists all the inputs that broke something, not just the first."""
    t = Timings()
    yield t
    print(f"\n{t.summary()}")
    assert t.errors == [], f"{len(t.errors)} requests failed:\n" + "\n".join(t.errors[:40])
    worst, label = t.worst()
    assert worst < REQUEST_LIMIT_S, f"{label} took {worst:.2f} s"


def _check(timings: Timings, r: Any, label: str) -> None:
    if r.status_code >= 500:
        exc = getattr(r, "exc_info", None)
        why = f"{exc[0].__name__}: {str(exc[1])[:150]}" if exc else ""
        timings.errors.append(f"{r.status_code} {label[:200]!r} {why}")


def _submit(client: Client, timings: Timings, slug: str, part_id: str, data: dict[str, Any],
            label: str, htmx: bool = False) -> Any:
    r = timed(timings, label, client.post, f"/ex/{slug}/{part_id}/submit/", data,
              **(HX if htmx else {}))
    _check(timings, r, label)
    return r


# --- every part -------------------------------------------------------------------------------

def test_every_part_survives_the_core_payloads(people: People, timings: Timings,
                                               no_evaluation: list[str]) -> None:
    client = client_for(people.student, raise_request_exception=False)
    for slug, part_id, _ in PARTS:
        for name, payload in CORE.items():
            _submit(client, timings, slug, part_id, {"answer": payload}, f"{slug}/{part_id} {name}")


@pytest.mark.parametrize(("slug", "part_id", "part_type"), ONE_PER_TYPE,
                         ids=[t for _, _, t in ONE_PER_TYPE])
def test_one_part_of_each_type_survives_every_payload(people: People, timings: Timings,
                                                      no_evaluation: list[str], slug: str,
                                                      part_id: str, part_type: str) -> None:
    client = client_for(people.student, raise_request_exception=False)
    before = Submission.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    for name, payload in NASTY.items():
        for mode in ("submit", "run"):
            r = _submit(client, timings, slug, part_id, {"answer": payload, "mode": mode},
                        f"{slug}/{part_id} {name} {mode}", htmx=True)
            if r.status_code == 200:
                body = r.content.decode()
                assert "<script>alert" not in body and "<img src=x" not in body  # escaped
    # Several checkboxes arrive as `pick`: give them the same treatment.
    for name, payload in list(NASTY.items())[:8]:
        _submit(client, timings, slug, part_id, {"pick": [payload, payload]}, f"pick {name}",
                htmx=True)
    # Nothing unreadable was stored: a saved row is an answer a grader accepted or a worker
    # will grade (code and text take free-form text; the rest must have been parsed).
    for sub in Submission.objects.filter(pk__gt=before):
        assert "\x00" not in sub.answer and len(sub.answer) <= 100_000


@pytest.mark.parametrize(("slug", "part_id"), EXPRESSION_PARTS)
def test_formula_preview_survives_every_payload(people: People, timings: Timings,
                                                no_evaluation: list[str], slug: str,
                                                part_id: str) -> None:
    client = client_for(people.student, raise_request_exception=False)
    for name, payload in NASTY.items():
        r = timed(timings, f"preview {slug}/{part_id} {name}", client.post,
                  f"/ex/{slug}/{part_id}/preview/", {"answer": payload}, **HX)
        _check(timings, r, name)


def test_undecodable_bodies_are_read_safely(people: People, timings: Timings) -> None:
    """Bytes no browser would send: UTF-8-encoded surrogates, invalid and overlong sequences,
    and made-up or mismatched charsets. Django decodes with replacement characters."""
    client = client_for(people.student, raise_request_exception=False)
    bodies = [b"\xed\xa0\x80", b"\xed\xbf\xbf\xed\xa0\x80", b"\xff\xfe\xfd", b"\xc0\xaf",
              b"\xf4\x90\x80\x80", "café".encode("utf-16"), b"%%%", b"\x00" * 1000]
    # No NUL in the charset: gunicorn refuses a header carrying one (400) before Django, which
    # would raise ValueError building the request.
    charsets = ["", "; charset=utf-8", "; charset=utf-16", "; charset=rot13", "; charset="]
    targets = [(s, p) for s, p, _ in ONE_PER_TYPE] + EXPRESSION_PARTS[:1]
    for slug, part_id in targets:
        for raw in bodies:
            for cs in charsets:
                body = b"answer=" + urllib.parse.quote_from_bytes(raw).encode() + b"&x=" + raw
                for url in (f"/ex/{slug}/{part_id}/submit/", f"/ex/{slug}/{part_id}/preview/"):
                    r = timed(timings, f"{url} {raw[:6]!r}{cs}", client.generic, "POST", url,
                              body, content_type="application/x-www-form-urlencoded" + cs, **HX)
                    _check(timings, r, f"{url} {raw!r} {cs}")
        r = client.generic("POST", f"/ex/{slug}/{part_id}/submit/", b"--x\r\n\r\n\xff",
                           content_type="multipart/form-data; boundary=x")
        _check(timings, r, "broken multipart")


# --- Hypothesis: random parts, random text ------------------------------------------------------

def _formula_like() -> st.SearchStrategy[str]:
    atoms = st.sampled_from(["S", "T", "B", "2", "0", "1e999", "9" * 40, "pi", "e", "x", "_",
                             "1.5", ".", "ln(", "sqrt(", "exp(", "max(", "log(", "abs("])
    ops = st.sampled_from(["+", "-", "*", "/", "^", "**", "(", ")", ",", " ", "=", "!", "%",
                           "×", "−", "²", "π", "·"])
    return st.lists(st.one_of(atoms, ops), max_size=150).map("".join)


ANSWERS = st.one_of(
    st.sampled_from(list(NASTY.values())),
    st.text(max_size=300),
    _formula_like(),
    st.integers(1, 20_000).map(lambda n: "(" * n + "S" + ")" * n),
    st.integers(1, 3_000).map(lambda n: "^".join(["2"] * n)),
    st.integers(1, 60_000).map(lambda n: "9" * n),
    st.builds(lambda x, u: f"{x!r} {u}", st.floats(),
              st.sampled_from(["", "GB", "GiB", "ms", "TFLOPS", "%", "B/s", "tokens/s", "°"])),
)


@settings(max_examples=150, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(part=st.sampled_from(PARTS), answer=ANSWERS, htmx=st.booleans(),
       mode=st.sampled_from(["submit", "run", "", "\x00", "x" * 1000]))
def test_hypothesis_answers(people: People, timings: Timings, no_evaluation: list[str],
                            part: tuple[str, str, str], answer: str, htmx: bool,
                            mode: str) -> None:
    slug, part_id, part_type = part
    client = client_for(people.student, raise_request_exception=False)
    _submit(client, timings, slug, part_id, {"answer": answer, "mode": mode},
            f"{slug}/{part_id} {answer[:30]!r}", htmx=htmx)
    if part_type == "expression":
        r = timed(timings, f"preview {answer[:30]!r}", client.post,
                  f"/ex/{slug}/{part_id}/preview/", {"answer": answer}, **HX)
        _check(timings, r, "preview")
    assert timings.errors == []  # now, so that Hypothesis shrinks the input that broke it


# --- every other form: sign-up, log-in, join, instructors' forms ---------------------------------

FIELD_PAYLOADS = {k: NASTY[k] for k in (
    "1 MB of digits", "1 MB of brackets (3 MB encoded: refused as too big)", "NUL and binary",
    "empty", "control characters", "bidi override", "combining marks", "emoji",
    "replacement character", "nested 200", "tower of 2s", "1e999999", "-1e999999",
    "long digit string", "python import", "HTML", "SQL", "format string")}


def _site_forms(people: People) -> list[tuple[str, Form]]:
    """(who, form) for every POST form the crawler finds as a visitor, a student and an
    instructor, minus the per-part forms (fuzzed above) and log-out."""
    found: dict[tuple[str, str, tuple[str, ...]], tuple[str, Form]] = {}
    for who, user, starts in (
        ("anonymous", None, ("/login/", "/signup/")),
        ("student", people.student, ("/", "/join/", f"/join/{people.cohort_code}/")),
        ("instructor", people.instructor, ("/", "/teach/", "/teach/review/",
                                           f"/teach/submissions/{people.text_sub.pk}/",
                                           f"/teach/submissions/{people.code_sub.pk}/")),
    ):
        pages = crawl(client_for(user), starts)
        for page, html in pages.items():
            for form in forms_on(page, html)[0]:
                if form.action.startswith("/logout/") or "/submit/" in form.action \
                        or "/preview/" in form.action:
                    continue
                key = (who, form.action, tuple(sorted(form.fields)))
                found.setdefault(key, (who, form))
    return list(found.values())


def test_every_form_field_survives_bad_input(people: People, timings: Timings,
                                             no_evaluation: list[str]) -> None:
    forms = _site_forms(people)
    actions_seen = {f.action for _, f in forms}
    # The crawl must have found the forms this test is about, or it proves nothing.
    for expected in ("/login/", "/signup/", "/join/", "/teach/cohorts/new/"):
        assert any(a.startswith(expected) for a in actions_seen), (expected, actions_seen)
    users = {"anonymous": None, "student": people.student, "instructor": people.instructor}
    for who, form in forms:
        for name in form.fields:
            for label, payload in FIELD_PAYLOADS.items():
                client = client_for(users[who], raise_request_exception=False)
                data = {**form.fields, name: payload}
                for htmx in (False, True):
                    r = timed(timings, f"{who} {form.action} {name}={label}", client.post,
                              form.action, data, **(HX if htmx else {}))
                    _check(timings, r, f"{who} {form.label} {name}={label}")


def test_join_links_with_any_code(people: People, timings: Timings) -> None:
    client = client_for(people.student, raise_request_exception=False)
    for label, payload in FIELD_PAYLOADS.items():
        code = urllib.parse.quote(payload[:2000], safe="")
        for method in (client.get, client.post):
            r = timed(timings, f"join/{label}", method, f"/join/{code}/")
            _check(timings, r, f"/join/<{label}>/")


# --- grep level: the graders never parse text with sympy or Python ------------------------------

FORBIDDEN_CALLS = {"eval", "exec", "compile", "sympify", "parse_expr", "parse_latex", "S",
                   "__import__", "lambdify"}


def _calls(path: Path) -> Iterator[tuple[str, int]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                else ""
            # re.compile, and anything.compile, is a method, not the builtin.
            if name == "compile" and isinstance(f, ast.Attribute):
                continue
            if name in FORBIDDEN_CALLS:
                yield name, node.lineno


def test_request_side_code_never_evaluates_text() -> None:
    """The graders and the site build sympy expressions from an AST whitelist
    (graders/formula.py): no eval/exec/compile, no sympify/parse_expr/S("..."), anywhere.
    (Student code runs only inside the sandboxes, whose launchers live elsewhere.)"""
    files = sorted((ROOT / "graders").glob("*.py")) + sorted((ROOT / "practice").rglob("*.py"))
    assert len(files) > 10
    found = [f"{p.relative_to(ROOT)}:{line} {name}()" for p in files
             if "migrations" not in p.parts for name, line in _calls(p)]
    assert found == []
    # And the sympy parser is not even imported there.
    for p in files:
        assert "sympy.parsing" not in p.read_text(encoding="utf-8"), p
