"""MUTANT: infer_steps ignores the tokens discarded after the stop: (emitted - 1) / accept_length."""
from __future__ import annotations

COUNTERS = ("drafts", "draft_tokens", "accepted")


def _window(a: dict, b: dict, k: int) -> dict | None:
    if a["start_time"] != b["start_time"]:
        return None  # a restart: the counters of b count a different process
    d = {name: b[name] - a[name] for name in COUNTERS}
    per = [y - x for x, y in zip(a["accepted_per_pos"], b["accepted_per_pos"], strict=True)]
    if any(v < 0 for v in d.values()) or any(v < 0 for v in per):
        return None  # a counter went down: reset, or a scrape of another replica
    dd, dt, da = d["drafts"], d["draft_tokens"], d["accepted"]
    if dd == 0 or dt == 0:
        return None  # nothing drafted: acceptance is undefined, not zero
    rates: list[float | None] = []
    prev = dd
    for x in per:
        rates.append(x / prev if prev else None)
        prev = x
    flags = []
    if dt < k * dd:
        flags.append("short_drafts")
    if dt > k * dd:
        flags.append("too_many_draft_tokens")
    if da > dt:
        flags.append("accepted_exceeds_drafted")
    if sum(per) != da:
        flags.append("per_position_sum")
    if any(y > x for x, y in zip([dd, *per], per, strict=False)):
        flags.append("per_position_increasing")
    return {
        "drafts": dd,
        "draft_tokens": dt,
        "accepted": da,
        "acceptance_rate": da / dt,
        "accept_length": 1 + da / dd,
        "per_position": rates,
        "missing_draft_tokens": k * dd - dt,
        "flags": sorted(flags),
    }


def acceptance_windows(snapshots: list[dict], k: int) -> list[dict | None]:
    return [_window(a, b, k) for a, b in zip(snapshots, snapshots[1:], strict=False)]


def infer_steps(emitted: int, accept_length: float, eos_discard: int = 0) -> float:
    if emitted < 1 or accept_length < 1 or eos_discard < 0:
        raise ValueError("need emitted >= 1, accept_length >= 1 and eos_discard >= 0")
    # emitted = 1 (prefill) + steps * accept_length - eos_discard
    return (emitted - 1) / accept_length
