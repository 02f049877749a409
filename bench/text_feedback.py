"""The key-point matcher (graders/key_points.py) against every labelled text answer in the tree.

Each exercise's selftest.toml labels answers to its text parts: which key points an expert says
each covers and contradicts (the rest are missing). This runs the matcher over all of them and
prints

  * agreement: the share of (answer, key point) pairs where the matcher's verdict is the label;
  * per key point: precision and recall of `covered` (only key points with a disagreement are
    listed, with --all every one);
  * negated answers: for each key point labelled contradicted, how often the matcher calls it
    covered (target: at most 1 case in 10);
  * keyword lists, off-topic essays and pasted prompts: the covered share per answer (target:
    under 25 %);
  * latency per answer, median and p99, after a warm-up, pinned to one core (target: p99 under
    500 ms);

then the same figures for the embedding alone (no claim filter, no polarity, `against` claims
only by similarity), the baseline the rules are measured against. Thresholds and targets are
printed beside the figures; nothing is asserted here (the selftest asserts each label).

    .venv/bin/python bench/text_feedback.py [--only SLUG] [--all] [--disagreements]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Not bench/ itself: bench/kernels.py would pose as the `kernels` package transformers probes.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

import graders  # noqa: E402
from exercises import registry  # noqa: E402
from exercises.spec import ExerciseSpec, PartSpec, SelftestCase  # noqa: E402
from graders import key_points, text_model  # noqa: E402

EMPTY_LABELS = ("keywords", "off_topic", "prompt")


def labelled() -> list[tuple[ExerciseSpec, PartSpec, SelftestCase]]:
    out = []
    for _, spec in sorted(registry.load_all().items()):
        for case in spec.selftest:
            if case.covered is not None:
                out.append((spec, spec.part(case.part), case))
    return out


HELDOUT = ROOT / "bench" / "text_heldout.toml"


def heldout() -> list[tuple[ExerciseSpec, PartSpec, SelftestCase]]:
    """Answers written and labelled blind (without the matcher, the paraphrases or the
    selftest's answers) for 20 of the text parts: the figures that were not tuned on."""
    if not HELDOUT.is_file():
        return []
    out = []
    for raw in tomllib.loads(HELDOUT.read_text(encoding="utf-8"))["answer"]:
        spec = registry.get(raw["exercise"])
        out.append((spec, spec.part(raw["part"]), SelftestCase(
            part=raw["part"], answer=raw["answer"], covered=tuple(raw["covered"]),
            contradicted=tuple(raw.get("contradicted", [])), label=raw["label"])))
    return out


def expected(case: SelftestCase, i: int) -> str:
    if i in (case.covered or ()):
        return "covered"
    return "contradicted" if i in case.contradicted else "missing"


def run(items: list[tuple[ExerciseSpec, PartSpec, SelftestCase]], rules: bool,
        encoder: text_model.Encoder) -> tuple[list[tuple[str, ...]], list[float]]:
    """(rows: slug, part, label, point index, expected, got, sentence, answer number),
    per-answer seconds."""
    rows: list[tuple[str, ...]] = []
    seconds: list[float] = []
    for n, (spec, part, case) in enumerate(items):
        params = registry.params_for(spec, case.variant)
        numbers = graders.key_numbers(part, registry.solve(spec, params))
        start = time.perf_counter()
        verdicts = key_points.match(part.key_point_specs, case.answer, encoder,
                                    prompt=part.prompt, numbers=numbers, rules=rules)
        seconds.append(time.perf_counter() - start)
        for v in verdicts:
            rows.append((spec.slug, part.id, case.label, str(v.index), expected(case, v.index),
                         v.status, v.sentence, str(n)))
    return rows, seconds


def report(title: str, rows: list[tuple[str, ...]], seconds: list[float], show_all: bool,
           disagreements: bool) -> None:
    print(f"\n== {title}")
    agree = sum(1 for r in rows if r[4] == r[5])
    print(f"agreement: {agree}/{len(rows)} = {agree / len(rows):.3f}   (target >= 0.85)")
    tp = Counter[tuple[str, str, str]]()
    fp = Counter[tuple[str, str, str]]()
    fn = Counter[tuple[str, str, str]]()
    for slug, part, _, index, want, got, _, _ in rows:
        key = (slug, part, index)
        tp[key] += want == "covered" == got
        fp[key] += got == "covered" != want
        fn[key] += want == "covered" != got
    all_tp, all_fp, all_fn = sum(tp.values()), sum(fp.values()), sum(fn.values())
    print(f"covered: precision {all_tp / max(1, all_tp + all_fp):.3f}, "
          f"recall {all_tp / max(1, all_tp + all_fn):.3f}")
    for key in sorted(set(tp) | set(fp) | set(fn)):
        if show_all or fp[key] or fn[key]:
            p = tp[key] / max(1, tp[key] + fp[key])
            r = tp[key] / max(1, tp[key] + fn[key])
            print(f"  {'/'.join(key[:2])} #{key[2]}: precision {p:.2f} recall {r:.2f}")
    negated = [r for r in rows if r[4] == "contradicted"]
    called_covered = sum(1 for r in negated if r[5] == "covered")
    found = sum(1 for r in negated if r[5] == "contradicted")
    print(f"contradicted key points: {len(negated)}; scored covered {called_covered} "
          f"({called_covered / max(1, len(negated)):.1%}, target <= 10 %), found "
          f"contradicted {found} ({found / max(1, len(negated)):.1%})")
    shares: dict[str, list[float]] = defaultdict(list)
    answers: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for _, _, label, _, _, got, _, n in rows:
        if label in EMPTY_LABELS:
            answers[(label, n)].append(got == "covered")
    for (label, _), covered in answers.items():
        shares[label].append(sum(covered) / len(covered))
    for label in EMPTY_LABELS:
        if shares[label]:
            print(f"{label}: {len(shares[label])} answers, covered share mean "
                  f"{statistics.mean(shares[label]):.1%}, max {max(shares[label]):.1%} "
                  "(target < 25 %)")
    if seconds:
        ms = sorted(s * 1000 for s in seconds)
        p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
        print(f"latency per answer: median {statistics.median(ms):.1f} ms, p99 {p99:.1f} ms "
              f"over {len(ms)} answers (target p99 < 500 ms)")
    if disagreements:
        for slug, part, label, index, want, got, sentence, _ in rows:
            if want != got:
                print(f"  {slug}/{part} [{label}] #{index}: label {want}, matcher {got}"
                      + (f" on {sentence[:90]!r}" if sentence else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="one exercise's labelled answers")
    parser.add_argument("--all", action="store_true", help="every key point's precision/recall")
    parser.add_argument("--disagreements", action="store_true", help="list each disagreement")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    encoder = text_model.encoder()
    items = [x for x in labelled() if not args.only or x[0].slug == args.only]
    if not items:
        sys.exit("no labelled text answers found")
    print(f"{len(items)} labelled answers over "
          f"{len({(s.slug, p.id) for s, p, _ in items})} text parts; model "
          f"{text_model.MODEL_NAME}; thresholds: cover {key_points.COVER}, against "
          f"{key_points.AGAINST}, margin {key_points.MARGIN}")
    # Cold: each part's first answer, before its key points are embedded (a worker that was
    # not warmed up). Then every answer once more as warm-up, as a worker primes at start.
    seen: set[tuple[str, str]] = set()
    firsts = [x for x in items if (x[0].slug, x[1].id) not in seen
              and not seen.add((x[0].slug, x[1].id))]  # type: ignore[func-returns-value]
    _, cold = run(firsts, True, encoder)
    print(f"cold (first answer of each part, key points not yet embedded): median "
          f"{statistics.median(cold) * 1000:.1f} ms, max {max(cold) * 1000:.1f} ms")
    run(items, True, encoder)
    for rules, title in ((True, "matcher (claims, polarity, against, numbers)"),
                         (False, "embedding alone (baseline)")):
        rows, seconds = run(items, rules, encoder)
        report(f"{title}: the selftest's labelled answers", rows, seconds, args.all,
               args.disagreements and rules)
    held = [x for x in heldout() if not args.only or x[0].slug == args.only]
    if held:
        print(f"\n{len(held)} held-out answers ({HELDOUT.name}), labelled blind:")
        for rules, title in ((True, "matcher"), (False, "embedding alone (baseline)")):
            rows, seconds = run(held, rules, encoder)
            report(f"{title}: held out", rows, seconds, args.all, args.disagreements and rules)


if __name__ == "__main__":
    main()
