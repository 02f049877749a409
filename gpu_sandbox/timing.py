"""Stage 3 timing: the reference and the submission timed interleaved on one GPU, the roofline
floor for a shape, and the plausibility gate that holds impossible speeds for review.

Everything above the "device" section is pure Python and takes its clock and its L2 flush as
arguments, so the rules (order of calls, when to stop, what counts as implausible) are tested on
the CPU with fakes. The device section (`CudaClock`, `L2Flush`, `measure_*`) is the real thing for
an H100/H200; it takes the `torch` module as an argument (or imports it when first used), so this
module imports without torch.

Statistics, and why:

* the summary of a side is its **median**: one throttled or pre-empted call moves a mean, not a
  median;
* `spread` is the interquartile range over the median, (p75 - p25) / median, a robust relative
  width that one outlier does not inflate;
* the stopping rule asks for the median's **relative standard error** below a target. For
  near-normal timings the standard error of a median is sqrt(pi/2) * sigma / sqrt(n); sigma is
  estimated from the IQR (IQR / 1.349 for a normal), again so that a lone outlier does not keep
  a stable kernel running to `max_repeats`.

Conventions: all times are milliseconds; bandwidth is GB/s (1e9 bytes/s); peak is TFLOP/s (1e12).
Imports nothing of ours and no Django (it runs inside the GPU sandbox).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# The L2 of an H100 or H200 is 50 MB; writing 256 MiB (> 5x that) evicts everything the previous
# call left there, so no call starts with its inputs already on chip.
L2_FLUSH_BYTES = 256 * 1024 * 1024

# sigma of a normal = IQR / 1.349; standard error of the median = sqrt(pi / 2) * sigma / sqrt(n).
_IQR_TO_SIGMA = 1.0 / 1.349
_MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2.0)

# The time budget never stops a run before this many rounds, so each side always has a median
# and a spread. A kernel too slow for that is bounded by the sandbox's wall-clock timeout.
MIN_ROUNDS_ON_BUDGET = 3


# --- statistics ----------------------------------------------------------------------------

def median(xs: Iterable[float]) -> float:
    values = list(xs)
    if not values:
        raise ValueError("median of no samples")
    return float(statistics.median(values))


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def spread(xs: Iterable[float]) -> float:
    """(p75 - p25) / median: 0 for identical samples; 0.0 for fewer than two samples (no width
    can be measured); inf when the median is not positive."""
    values = list(xs)
    if len(values) < 2:
        return 0.0
    m = median(values)
    q1, q3 = _quartiles(values)
    return (q3 - q1) / m if m > 0 else math.inf


def rel_std_err(xs: Iterable[float]) -> float:
    """Relative standard error of the median (see the module docstring); inf when it cannot be
    estimated (fewer than two samples, or a median that is not positive)."""
    values = list(xs)
    if len(values) < 2:
        return math.inf
    m = median(values)
    if not m > 0:
        return math.inf
    q1, q3 = _quartiles(values)
    sigma = (q3 - q1) * _IQR_TO_SIGMA
    return _MEDIAN_SE_FACTOR * sigma / math.sqrt(len(values)) / m


@dataclass(frozen=True)
class Sample:
    """The timed calls of one side, in milliseconds, in the order they ran. Accepts any sequence
    (a list is fine) and keeps it as a tuple, so a Sample cannot change after it is made."""

    ms: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "ms", tuple(float(x) for x in self.ms))

    @property
    def n(self) -> int:
        return len(self.ms)

    @property
    def median(self) -> float:
        return median(self.ms)

    @property
    def spread(self) -> float:
        return spread(self.ms)

    @property
    def rel_std_err(self) -> float:
        return rel_std_err(self.ms)

    @property
    def mean(self) -> float:
        return float(statistics.fmean(self.ms))

    @property
    def min(self) -> float:
        return min(self.ms)


@dataclass(frozen=True)
class Timings:
    """The result of `interleaved`: medians, spreads and every sample of both sides."""

    ref_ms: float
    sub_ms: float
    ref_spread: float
    sub_spread: float
    ref_samples: tuple[float, ...]
    sub_samples: tuple[float, ...]
    # Why the loop ended: "stable", "max_repeats" or "budget".
    stop_reason: str = ""
    # Host wall-clock milliseconds of the same windows, when the clock offers them (CudaClock
    # does); empty otherwise. `judge` compares them with the device times.
    ref_wall_samples: tuple[float, ...] = ()
    sub_wall_samples: tuple[float, ...] = ()

    @property
    def ratio(self) -> float:
        """Speed-up of the submission over the reference: > 1 means the submission is faster."""
        if not self.sub_ms > 0:
            return math.inf
        return self.ref_ms / self.sub_ms

    @property
    def rounds(self) -> int:
        return len(self.sub_samples)


# --- the interleaved timing loop ------------------------------------------------------------

class Clock(Protocol):
    """A device timer. `start` opens a window; `stop` closes it and returns its length in ms,
    having waited for ALL work on the device (every stream), not just the current stream.

    A clock may also offer `last_wall_ms: float`, the host wall-clock length of the window that
    `stop` just closed; `interleaved` records it when present."""

    def start(self) -> None: ...

    def stop(self) -> float: ...


def interleaved(ref: Callable[[], None], sub: Callable[[], None], *, clock: Clock,
                flush: Callable[[], None], warmup: int = 3, min_repeats: int = 10,
                max_repeats: int = 100, budget_ms: float = 2000.0,
                target_rel_err: float = 0.01) -> Timings:
    """Time `ref` and `sub` against each other, alternating, and return both medians.

    Warm-up: `warmup` rounds that look exactly like timed ones (flush, clock started, call, clock
    stopped) but whose times are dropped, so a submission cannot tell warm-up from timing, and
    JIT compilation and autotuning are not timed.

    Timed rounds: each round times both, ref first in even rounds and sub first in odd rounds,
    so neither always runs straight after the other has warmed clocks or caches. Every timed
    call is preceded by `flush()` (outside the window) so each starts with a cold L2.

    Stops after a whole round (both sides always have the same count) when one of:
    * "stable": at least `min_repeats` rounds and both medians' relative standard error is below
      `target_rel_err`;
    * "max_repeats": `max_repeats` rounds done;
    * "budget": the device time measured so far (warm-up included) reached `budget_ms`, and at
      least MIN_ROUNDS_ON_BUDGET rounds are done.
    """
    if warmup < 0:
        raise ValueError("warmup must be >= 0")
    if min_repeats < 1 or max_repeats < min_repeats:
        raise ValueError("need 1 <= min_repeats <= max_repeats")
    if not budget_ms > 0 or not target_rel_err > 0:
        raise ValueError("budget_ms and target_rel_err must be positive")

    wall_of = hasattr(clock, "last_wall_ms")
    samples: dict[str, list[float]] = {"ref": [], "sub": []}
    walls: dict[str, list[float]] = {"ref": [], "sub": []}
    spent = 0.0

    def one(fn: Callable[[], None]) -> tuple[float, float | None]:
        flush()
        clock.start()
        fn()
        ms = float(clock.stop())
        wall = getattr(clock, "last_wall_ms", None) if wall_of else None
        return ms, (float(wall) if wall is not None else None)

    def order(i: int) -> tuple[tuple[str, Callable[[], None]], ...]:
        pair = (("ref", ref), ("sub", sub))
        return pair if i % 2 == 0 else pair[::-1]

    for i in range(warmup):
        for _, fn in order(i):
            ms, _ = one(fn)
            spent += ms

    reason = "max_repeats"
    for i in range(max_repeats):
        # Continue the alternation where warm-up left off.
        for role, fn in order(warmup + i):
            ms, wall = one(fn)
            spent += ms
            samples[role].append(ms)
            if wall is not None:
                walls[role].append(wall)
        rounds = i + 1
        if (rounds >= min_repeats and rel_std_err(samples["ref"]) < target_rel_err
                and rel_std_err(samples["sub"]) < target_rel_err):
            reason = "stable"
            break
        if rounds < max_repeats and spent >= budget_ms and rounds >= MIN_ROUNDS_ON_BUDGET:
            reason = "budget"
            break

    ref_s, sub_s = samples["ref"], samples["sub"]
    return Timings(ref_ms=median(ref_s), sub_ms=median(sub_s), ref_spread=spread(ref_s),
                   sub_spread=spread(sub_s), ref_samples=tuple(ref_s), sub_samples=tuple(sub_s),
                   stop_reason=reason, ref_wall_samples=tuple(walls["ref"]),
                   sub_wall_samples=tuple(walls["sub"]))


# --- roofline and plausibility --------------------------------------------------------------

def roofline_terms_ms(bytes_: int, flops: int, bandwidth_gbs: float,
                      peak_tflops: float) -> tuple[float, float]:
    """(memory ms, compute ms): the least time to move `bytes_` at `bandwidth_gbs` GB/s, and to
    do `flops` at `peak_tflops` TFLOP/s."""
    if not bandwidth_gbs > 0 or not peak_tflops > 0:
        raise ValueError("bandwidth and peak must be positive")
    if bytes_ < 0 or flops < 0:
        raise ValueError("bytes and flops cannot be negative")
    # GB/s = 1e9 B/s = 1e6 B/ms; TFLOP/s = 1e12 FLOP/s = 1e9 FLOP/ms.
    return bytes_ / (bandwidth_gbs * 1e6), flops / (peak_tflops * 1e9)


def roofline_floor_ms(bytes_: int, flops: int, bandwidth_gbs: float, peak_tflops: float) -> float:
    """max(bytes / bandwidth, flops / peak) in ms: no kernel for this shape can be faster."""
    return max(roofline_terms_ms(bytes_, flops, bandwidth_gbs, peak_tflops))


def binding_term(bytes_: int, flops: int, bandwidth_gbs: float, peak_tflops: float) -> str:
    """"memory" or "compute": which term sets the floor (memory on a tie)."""
    mem, comp = roofline_terms_ms(bytes_, flops, bandwidth_gbs, peak_tflops)
    return "memory" if mem >= comp else "compute"


@dataclass(frozen=True)
class Verdict:
    status: str  # "scored" or "held" (held for an instructor's review, not scored)
    reasons: tuple[str, ...]
    # floor_ms / sub_ms: 1.0 means the submission runs at the roofline floor; 0.0 when the floor
    # is unknown (floor_ms <= 0) or the submission's time is not a positive number.
    roofline_fraction: float


def _fmt_ms(ms: float) -> str:
    return f"{ms * 1e3:.3g} µs" if ms < 1.0 else f"{ms:.4g} ms"


def judge(t: Timings, floor_ms: float, *, max_speedup: float = 10.0, floor_slack: float = 0.9,
          wall_slack_ms: float = 1.0) -> Verdict:
    """Score the timing, or hold it for review when it is not physically believable:

    * the submission's median beats `floor_ms * floor_slack`: faster than the least time the
      shape's bytes and FLOPs allow on this GPU (the slack absorbs measured-vs-achievable
      bandwidth and timer granularity);
    * it is more than `max_speedup` times faster than the reference solution;
    * its host wall-clock median exceeds its device-event median by more than
      max(`wall_slack_ms`, the event time itself): the device timer did not see the work the host
      waited for (e.g. a tampered timer). The allowance covers launch and Python overhead;
    * its median is not a positive number (a timer that saw nothing).
    """
    reasons: list[str] = []
    sub_ok = math.isfinite(t.sub_ms) and t.sub_ms > 0
    if not sub_ok:
        reasons.append(f"the device timer reported {t.sub_ms!r} ms for the submission, which is "
                       f"not a real running time")
    known_floor = math.isfinite(floor_ms) and floor_ms > 0
    fraction = floor_ms / t.sub_ms if sub_ok and known_floor else 0.0
    if sub_ok and known_floor and t.sub_ms < floor_ms * floor_slack:
        reasons.append(
            f"faster than the roofline floor for this shape: {_fmt_ms(t.sub_ms)} against a floor "
            f"of {_fmt_ms(floor_ms)} (the least time its bytes and FLOPs take on this GPU), "
            f"{fraction:.2f}x the floor's speed")
    if sub_ok and t.ratio > max_speedup:
        reasons.append(
            f"more than {max_speedup:g}x the reference: {t.ratio:.1f}x faster than the reference "
            f"solution ({_fmt_ms(t.sub_ms)} against {_fmt_ms(t.ref_ms)})")
    if sub_ok and t.sub_wall_samples:
        wall = median(t.sub_wall_samples)
        if wall - t.sub_ms > max(wall_slack_ms, t.sub_ms):
            reasons.append(
                f"the host waited {_fmt_ms(wall)} per call but the device timer saw only "
                f"{_fmt_ms(t.sub_ms)}: work ran outside what the timer measured")
    return Verdict(status="held" if reasons else "scored", reasons=tuple(reasons),
                   roofline_fraction=fraction)


# --- device: the real clock, flush and measurements (torch imported lazily) -----------------

def _torch(torch: Any | None) -> Any:
    if torch is not None:
        return torch
    import torch as real_torch  # only the device code needs it; tests pass a fake

    return real_torch


@dataclass
class CudaClock:
    """`Clock` on CUDA events, made to see work on every stream.

    start(): device-wide synchronize (so a still-running L2 flush is neither timed nor in the
    wall time), then the start event is recorded on the current stream.
    stop(): device-wide `torch.cuda.synchronize()` BEFORE the end event is recorded, so work the
    call put on side streams is inside the window (events alone see only their own stream);
    then the elapsed event time.

    Also keeps the host wall-clock time of each window (`wall_ms`, `last_wall_ms`) and counts
    windows where wall >> event in `flags`: a hint that the event timer missed work or was
    tampered with. The functions it calls are looked up once, when the clock is made, so code
    imported afterwards (the submission) cannot swap them under it.

    Cost of the device-wide sync: the window also holds the launch overhead and the host's
    sync latency (a few microseconds). It is the same for both sides, but pulls the ratio
    toward 1 for kernels of a few microseconds; benchmark shapes are far longer than that.
    """

    torch: Any = None
    wall_timer: Callable[[], float] = time.perf_counter
    wall_slack_ms: float = 1.0
    event_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    last_wall_ms: float | None = None

    def __post_init__(self) -> None:
        torch = _torch(self.torch)
        self._sync = torch.cuda.synchronize
        event_cls = torch.cuda.Event
        self._start = event_cls(enable_timing=True)
        self._end = event_cls(enable_timing=True)
        self._elapsed = type(self._start).elapsed_time
        self._t0 = 0.0

    def start(self) -> None:
        self._sync()
        self._t0 = self.wall_timer()
        self._start.record()

    def stop(self) -> float:
        self._sync()  # every stream, before the end event: side-stream work is counted
        self._end.record()
        self._end.synchronize()
        ms = float(self._elapsed(self._start, self._end))
        wall = (self.wall_timer() - self._t0) * 1e3
        self.event_ms.append(ms)
        self.wall_ms.append(wall)
        self.last_wall_ms = wall
        if wall - ms > max(self.wall_slack_ms, ms):
            self.flags.append(f"window {len(self.event_ms)}: host {wall:.3f} ms, "
                              f"device {ms:.3f} ms")
        return ms


class L2Flush:
    """Call it to evict L2: zeroes a buffer of at least L2_FLUSH_BYTES, allocated once."""

    def __init__(self, device: str = "cuda", *, nbytes: int = L2_FLUSH_BYTES,
                 torch: Any | None = None) -> None:
        if nbytes < L2_FLUSH_BYTES:
            raise ValueError(f"an L2 flush needs at least {L2_FLUSH_BYTES} bytes")
        torch = _torch(torch)
        self.nbytes = nbytes
        self.buffer = torch.empty(-(-nbytes // 4), dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


def _median_ms(torch: Any, fn: Callable[[], object], *, warmup: int, repeats: int) -> float:
    clock = CudaClock(torch)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        clock.start()
        fn()
        times.append(clock.stop())
    return median(times)


def measure_bandwidth_gbs(torch: Any, device: str, *, nbytes: int = 1 << 30,
                          repeats: int = 20) -> float:
    """Achievable HBM bandwidth in GB/s: the median time of a device-to-device copy of `nbytes`
    (1 GiB, 20x an H100/H200 L2, so the cache hardly helps), counting the bytes read and the
    bytes written."""
    n = nbytes // 4
    src = torch.empty(n, dtype=torch.float32, device=device)
    dst = torch.empty(n, dtype=torch.float32, device=device)
    src.fill_(1.0)
    ms = _median_ms(torch, lambda: dst.copy_(src), warmup=3, repeats=repeats)
    return 2 * n * 4 / (ms * 1e6)


def _is_fp8(dtype: Any) -> bool:
    return "float8" in str(dtype)


def measure_peak_tflops(torch: Any, device: str, dtype: Any, *, n: int = 8192,
                        repeats: int = 20) -> float:
    """Achievable dense matmul TFLOP/s in `dtype`: the median time of an n x n x n product
    (2 n^3 FLOPs). bf16/fp16/fp32 use torch.matmul; fp8 dtypes use torch._scaled_mm (per-tensor
    scales, bf16 output) and raise RuntimeError saying so when this torch has no _scaled_mm or
    this GPU cannot run it."""
    flops = 2 * n ** 3
    if _is_fp8(dtype):
        scaled_mm = getattr(torch, "_scaled_mm", None)
        if scaled_mm is None:
            raise RuntimeError(f"cannot measure the {dtype} peak: this torch has no "
                               f"torch._scaled_mm")
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16).to(dtype)
        # _scaled_mm wants its second operand column-major: the transpose of a row-major matrix.
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16).to(dtype).t()
        one = torch.ones((), device=device, dtype=torch.float32)

        def run() -> object:
            return scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        try:
            run()
        except Exception as exc:  # unsupported GPU or dtype: report it, don't guess a number
            raise RuntimeError(f"cannot measure the {dtype} peak: torch._scaled_mm failed "
                               f"({exc})") from exc
    else:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)

        def run() -> object:
            return torch.matmul(a, b)

    ms = _median_ms(torch, run, warmup=3, repeats=repeats)
    return flops / (ms * 1e9)
