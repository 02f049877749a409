"""gpu_sandbox.timing on the CPU: a scripted clock and a fake torch stand in for the GPU, so the
rules (call order, flushes, stopping, statistics, the plausibility gate) are checked exactly and
nothing here depends on how fast this machine is."""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpu_sandbox import timing
from gpu_sandbox.timing import Sample, Timings

ROOT = Path(__file__).resolve().parents[2]


# --- a scripted clock --------------------------------------------------------------------------

class Script:
    """Two callables, `ref` and `sub`, a flush and a clock sharing one log. The clock returns the
    next scripted time of whichever callable ran inside its window."""

    def __init__(self, ref_times: Iterable[float], sub_times: Iterable[float],
                 walls: Iterable[float] | None = None) -> None:
        self.log: list[str] = []
        self.times: dict[str, Iterator[float]] = {"ref": iter(ref_times),
                                                  "sub": iter(sub_times)}
        self.returned: list[float] = []
        self._walls = iter(walls) if walls is not None else None

    def ref(self) -> None:
        self.log.append("ref")

    def sub(self) -> None:
        self.log.append("sub")

    def flush(self) -> None:
        self.log.append("flush")

    def start(self) -> None:
        self.log.append("start")

    def stop(self) -> float:
        ran = self.log[-1]
        assert ran in ("ref", "sub"), f"stop() right after {ran!r}"
        self.log.append("stop")
        ms = next(self.times[ran])
        self.returned.append(ms)
        return ms

    def run(self, **kw: Any) -> Timings:
        return timing.interleaved(self.ref, self.sub, clock=self, flush=self.flush, **kw)


class WallScript(Script):
    last_wall_ms: float | None = None

    def stop(self) -> float:
        ms = super().stop()
        assert self._walls is not None
        self.last_wall_ms = next(self._walls)
        return ms


def constant(ms: float) -> Iterator[float]:
    return itertools.repeat(ms)


def noisy(low: float, high: float) -> Iterator[float]:
    return itertools.cycle([low, high])


def calls(log: list[str]) -> list[str]:
    return [x for x in log if x in ("ref", "sub")]


# --- interleaving ------------------------------------------------------------------------------

def test_every_call_is_flushed_then_timed_and_the_order_alternates() -> None:
    s = Script(constant(1.0), constant(1.0))
    t = s.run(warmup=2, min_repeats=3, max_repeats=3)
    assert t.rounds == 3
    # Each call, warm-up included, is exactly: flush, start, call, stop.
    assert len(s.log) == 4 * 2 * (2 + 3)
    for i in range(0, len(s.log), 4):
        assert s.log[i:i + 4][:2] == ["flush", "start"]
        assert s.log[i + 3] == "stop"
    # Round k runs ref first when k is even, sub first when odd; warm-up rounds count as rounds.
    assert calls(s.log) == ["ref", "sub", "sub", "ref",          # warm-up
                            "ref", "sub", "sub", "ref", "ref", "sub"]


def test_warm_up_times_are_dropped() -> None:
    warm = 1000.0
    s = Script(itertools.chain([warm, warm], constant(2.0)),
               itertools.chain([warm, warm], constant(1.0)))
    t = s.run(warmup=2, min_repeats=5, max_repeats=5, budget_ms=1e9)
    assert warm not in t.ref_samples and warm not in t.sub_samples
    assert t.ref_samples == (2.0,) * 5 and t.sub_samples == (1.0,) * 5
    assert s.returned.count(warm) == 4  # the warm-up did run through the clock
    assert (t.ref_ms, t.sub_ms, t.ratio) == (2.0, 1.0, 2.0)


def test_no_warm_up() -> None:
    s = Script(constant(1.0), constant(1.0))
    t = s.run(warmup=0, min_repeats=2, max_repeats=2)
    assert calls(s.log) == ["ref", "sub", "sub", "ref"] and t.rounds == 2


# --- stopping ----------------------------------------------------------------------------------

def test_stable_timings_stop_at_min_repeats() -> None:
    s = Script(constant(1.0), constant(0.5))
    t = s.run(min_repeats=10, max_repeats=100)
    assert (t.rounds, t.stop_reason) == (10, "stable")
    assert len(t.ref_samples) == len(t.sub_samples) == 10


def test_small_jitter_is_stable_but_wide_noise_is_not() -> None:
    jitter = Script(noisy(1.0, 1.002), noisy(1.0, 1.002))
    assert jitter.run(min_repeats=10).stop_reason == "stable"
    wide = Script(noisy(1.0, 3.0), noisy(1.0, 3.0))
    t = wide.run(min_repeats=10, max_repeats=40, budget_ms=1e9)
    assert (t.rounds, t.stop_reason) == (40, "max_repeats")


def test_one_noisy_side_keeps_both_running() -> None:
    s = Script(constant(1.0), noisy(1.0, 2.0))
    t = s.run(min_repeats=5, max_repeats=30, budget_ms=1e9)
    assert (t.rounds, t.stop_reason) == (30, "max_repeats")


def test_a_lone_outlier_does_not_keep_a_stable_kernel_running() -> None:
    # One throttled call among steady ones: the median and IQR ignore it.
    ref = itertools.chain([1.0] * 7, [50.0], constant(1.0))
    s = Script(itertools.chain([1.0] * 3, ref), constant(1.0))
    t = s.run(min_repeats=10, max_repeats=100)
    assert (t.rounds, t.stop_reason) == (10, "stable")
    assert 50.0 in t.ref_samples and t.ref_ms == 1.0


def test_noisy_timings_stop_when_the_budget_is_spent() -> None:
    s = Script(noisy(10.0, 30.0), noisy(10.0, 30.0))
    t = s.run(warmup=3, min_repeats=10, max_repeats=100, budget_ms=500.0)
    assert t.stop_reason == "budget" and t.rounds < 100
    # The budget counts every clocked call, warm-up included, and is checked per round.
    assert sum(s.returned) >= 500.0
    assert sum(s.returned[:-2]) < 500.0


def test_the_budget_never_stops_before_three_rounds() -> None:
    s = Script(noisy(100.0, 300.0), noisy(100.0, 300.0))
    t = s.run(warmup=1, min_repeats=10, max_repeats=100, budget_ms=1.0)
    assert (t.rounds, t.stop_reason) == (timing.MIN_ROUNDS_ON_BUDGET, "budget")


def test_a_stable_result_wins_over_the_budget() -> None:
    s = Script(constant(100.0), constant(100.0))
    t = s.run(min_repeats=3, max_repeats=100, budget_ms=1.0)
    assert (t.rounds, t.stop_reason) == (3, "stable")


@pytest.mark.parametrize("kw", [{"warmup": -1}, {"min_repeats": 0},
                                {"min_repeats": 5, "max_repeats": 4}, {"budget_ms": 0.0},
                                {"target_rel_err": 0.0}])
def test_bad_arguments_are_refused(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Script(constant(1.0), constant(1.0)).run(**kw)


def test_wall_times_are_kept_when_the_clock_offers_them() -> None:
    s = WallScript(constant(1.0), constant(2.0), walls=itertools.count(100.0))
    t = s.run(warmup=1, min_repeats=2, max_repeats=2)
    # Warm-up (ref, sub) walls 100, 101 dropped; then the alternation goes on: sub, ref = 102,
    # 103; ref, sub = 104, 105.
    assert t.ref_wall_samples == (103.0, 104.0) and t.sub_wall_samples == (102.0, 105.0)
    plain = Script(constant(1.0), constant(1.0)).run(min_repeats=2, max_repeats=2)
    assert plain.ref_wall_samples == () and plain.sub_wall_samples == ()


# --- statistics --------------------------------------------------------------------------------

def test_median_and_spread() -> None:
    assert timing.median([3.0, 1.0, 2.0]) == 2.0
    assert timing.median([1.0, 2.0, 3.0, 4.0]) == 2.5
    assert timing.spread([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx((4.0 - 2.0) / 3.0)
    assert timing.spread([2.0] * 6) == 0.0
    assert timing.spread([2.0]) == 0.0
    # Robust: one wild sample does not widen it.
    assert timing.spread([1.0] * 9 + [100.0]) == 0.0
    with pytest.raises(ValueError):
        timing.median([])


def test_relative_standard_error_shrinks_with_more_samples() -> None:
    few = timing.rel_std_err([1.0, 2.0] * 5)
    many = timing.rel_std_err([1.0, 2.0] * 500)
    assert many < few and many == pytest.approx(few / 10, rel=0.05)
    assert timing.rel_std_err([1.0]) == math.inf
    assert timing.rel_std_err([0.0, 0.0]) == math.inf
    assert timing.rel_std_err([5.0] * 4) == 0.0


def test_sample_helpers() -> None:
    s = Sample([4.0, 1.0, 3.0, 2.0, 5.0])
    assert s.ms == (4.0, 1.0, 3.0, 2.0, 5.0)
    assert (s.n, s.median, s.mean, s.min) == (5, 3.0, 3.0, 1.0)
    assert s.spread == timing.spread(s.ms) and s.rel_std_err == timing.rel_std_err(s.ms)


def test_timings_from_interleaved_match_the_helpers() -> None:
    s = Script(itertools.cycle([2.0, 4.0, 3.0]), itertools.cycle([1.0, 1.5]))
    t = s.run(warmup=0, min_repeats=6, max_repeats=6, budget_ms=1e9)
    assert t.ref_ms == timing.median(t.ref_samples)
    assert t.sub_spread == timing.spread(t.sub_samples)
    assert t.ratio == pytest.approx(t.ref_ms / t.sub_ms)


def test_ratio_of_a_zero_time_is_infinite() -> None:
    assert timings(1.0, 0.0).ratio == math.inf


# --- roofline ----------------------------------------------------------------------------------

def test_roofline_floor_picks_the_binding_term() -> None:
    # 1 GB at 1000 GB/s = 1 ms; 2 TFLOP at 1000 TFLOP/s = 2 ms.
    assert timing.roofline_terms_ms(10**9, 2 * 10**12, 1000.0, 1000.0) == (1.0, 2.0)
    assert timing.roofline_floor_ms(10**9, 2 * 10**12, 1000.0, 1000.0) == 2.0
    assert timing.binding_term(10**9, 2 * 10**12, 1000.0, 1000.0) == "compute"
    assert timing.roofline_floor_ms(4 * 10**9, 10**9, 4000.0, 1000.0) == 1.0
    assert timing.binding_term(4 * 10**9, 10**9, 4000.0, 1000.0) == "memory"
    assert timing.roofline_floor_ms(0, 0, 1.0, 1.0) == 0.0
    with pytest.raises(ValueError):
        timing.roofline_floor_ms(1, 1, 0.0, 1.0)
    with pytest.raises(ValueError):
        timing.roofline_floor_ms(-1, 1, 1.0, 1.0)


# --- judge -------------------------------------------------------------------------------------

def timings(ref_ms: float, sub_ms: float, sub_walls: tuple[float, ...] = ()) -> Timings:
    return Timings(ref_ms=ref_ms, sub_ms=sub_ms, ref_spread=0.0, sub_spread=0.0,
                   ref_samples=(ref_ms,), sub_samples=(sub_ms,), sub_wall_samples=sub_walls)


def test_a_normal_result_is_scored_with_its_roofline_fraction() -> None:
    v = timing.judge(timings(2.0, 1.0), floor_ms=0.5)
    assert (v.status, v.reasons) == ("scored", ())
    assert v.roofline_fraction == 0.5


def test_faster_than_the_floor_is_held() -> None:
    v = timing.judge(timings(2.0, 0.4), floor_ms=0.5)
    assert v.status == "held" and len(v.reasons) == 1
    assert "faster than the roofline floor for this shape" in v.reasons[0]
    assert v.roofline_fraction == pytest.approx(1.25)


def test_the_floor_has_slack() -> None:
    # 0.95 of the floor time is inside the default 0.9 slack; 0.89 is not.
    assert timing.judge(timings(2.0, 0.475), floor_ms=0.5).status == "scored"
    assert timing.judge(timings(2.0, 0.445), floor_ms=0.5).status == "held"
    assert timing.judge(timings(2.0, 0.475), floor_ms=0.5, floor_slack=1.0).status == "held"


def test_more_than_ten_times_the_reference_is_held() -> None:
    v = timing.judge(timings(11.0, 1.0), floor_ms=0.1)
    assert v.status == "held" and len(v.reasons) == 1
    assert "more than 10x the reference" in v.reasons[0] and "11.0x" in v.reasons[0]
    assert timing.judge(timings(10.0, 1.0), floor_ms=0.1).status == "scored"
    assert timing.judge(timings(11.0, 1.0), floor_ms=0.1, max_speedup=20).status == "scored"


def test_both_reasons_are_given() -> None:
    v = timing.judge(timings(100.0, 0.01), floor_ms=1.0)
    assert v.status == "held" and len(v.reasons) == 2


def test_an_unknown_floor_only_skips_the_floor_check() -> None:
    v = timing.judge(timings(2.0, 1.0), floor_ms=0.0)
    assert (v.status, v.roofline_fraction) == ("scored", 0.0)
    assert timing.judge(timings(200.0, 1.0), floor_ms=0.0).status == "held"


@pytest.mark.parametrize("sub_ms", [0.0, -1.0, math.nan])
def test_a_timer_that_saw_nothing_is_held(sub_ms: float) -> None:
    v = timing.judge(timings(2.0, sub_ms), floor_ms=0.5)
    assert v.status == "held" and "not a real running time" in v.reasons[0]
    assert v.roofline_fraction == 0.0


def test_host_waiting_far_longer_than_the_device_timer_is_held() -> None:
    held = timing.judge(timings(2.0, 1.0, sub_walls=(50.0, 51.0, 49.0)), floor_ms=0.5)
    assert held.status == "held" and "outside what the timer measured" in held.reasons[0]
    # Launch overhead on top of the event time is normal.
    ok = timing.judge(timings(2.0, 1.0, sub_walls=(1.05, 1.2, 1.1)), floor_ms=0.5)
    assert ok.status == "scored"
    # One pre-empted window among normal ones: the median decides.
    ok = timing.judge(timings(2.0, 1.0, sub_walls=(1.1, 90.0, 1.1)), floor_ms=0.5)
    assert ok.status == "scored"


# --- the device classes, on a fake torch --------------------------------------------------------

class FakeTensor:
    def __init__(self, n: int, dtype: Any, log: list[str]) -> None:
        self.n, self.dtype, self.log = n, dtype, log

    def zero_(self) -> FakeTensor:
        self.log.append("zero_")
        return self

    def fill_(self, value: float) -> FakeTensor:
        return self

    def copy_(self, other: FakeTensor) -> FakeTensor:
        self.log.append("copy_")
        return self


def fake_torch(elapsed: Callable[[], float] = lambda: 1.0, *, scaled_mm: bool = True
               ) -> SimpleNamespace:
    log: list[str] = []

    class Event:
        made = 0

        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing
            Event.made += 1
            self.name = "start" if Event.made == 1 else "end"

        def record(self) -> None:
            log.append(f"record {self.name}")

        def synchronize(self) -> None:
            log.append(f"wait {self.name}")

        def elapsed_time(self, end: Event) -> float:
            return elapsed()

    def empty(n: int, *, dtype: Any, device: str) -> FakeTensor:
        log.append(f"empty {n} {dtype} {device}")
        return FakeTensor(n, dtype, log)

    ns = SimpleNamespace(
        log=log, int32="int32", float32="float32", bfloat16="bfloat16",
        float8_e4m3fn="torch.float8_e4m3fn", empty=empty,
        cuda=SimpleNamespace(synchronize=lambda: log.append("synchronize"), Event=Event))
    if scaled_mm:
        ns._scaled_mm = lambda *a, **k: None
    return ns


def test_cuda_clock_synchronises_the_device_before_the_end_event() -> None:
    torch = fake_torch(lambda: 0.25)
    walls = iter([10.0, 10.001])  # seconds
    clock = timing.CudaClock(torch, wall_timer=lambda: next(walls))
    clock.start()
    torch.log.append("kernel")
    assert clock.stop() == 0.25
    assert torch.log == ["synchronize", "record start", "kernel",
                         "synchronize", "record end", "wait end"]
    assert clock.last_wall_ms == pytest.approx(1.0) and clock.flags == []


def test_cuda_clock_flags_wall_far_beyond_the_event_time() -> None:
    torch = fake_torch(lambda: 0.01)
    walls = iter([0.0, 0.5])  # 500 ms on the host, 0.01 ms on the device
    clock = timing.CudaClock(torch, wall_timer=lambda: next(walls))
    clock.start()
    clock.stop()
    assert len(clock.flags) == 1 and clock.wall_ms == [500.0] and clock.event_ms == [0.01]


def test_cuda_clock_keeps_the_timer_it_was_made_with() -> None:
    torch = fake_torch(lambda: 3.0)
    clock = timing.CudaClock(torch, wall_timer=iter([0.0, 0.003]).__next__)
    # A submission imported later patches the event class; the clock is not fooled.
    torch.cuda.Event.elapsed_time = lambda self, end: 0.0
    torch.cuda.synchronize = lambda: None
    clock.start()
    assert clock.stop() == 3.0
    assert torch.log.count("synchronize") == 2


def test_cuda_clock_drives_interleaved() -> None:
    torch = fake_torch(lambda: 1.0)
    clock = timing.CudaClock(torch, wall_timer=itertools.count(0.0, 0.0011).__next__)
    t = timing.interleaved(lambda: None, lambda: None, clock=clock, flush=lambda: None,
                           min_repeats=3, max_repeats=3)
    assert (t.ref_ms, t.sub_ms, t.stop_reason) == (1.0, 1.0, "stable")
    assert t.sub_wall_samples == pytest.approx((1.1, 1.1, 1.1))


def test_l2_flush_zeroes_a_big_enough_buffer_every_call() -> None:
    torch = fake_torch()
    flush = timing.L2Flush("cuda:0", torch=torch)
    assert flush.buffer.n * 4 >= 256 * 1024 * 1024 and flush.buffer.dtype == "int32"
    assert torch.log.count(f"empty {flush.buffer.n} int32 cuda:0") == 1
    for _ in range(3):
        flush()
    assert torch.log.count("zero_") == 3
    with pytest.raises(ValueError):
        timing.L2Flush(nbytes=1 << 20, torch=torch)


def test_bandwidth_counts_bytes_read_and_written() -> None:
    torch = fake_torch(lambda: 1.0)  # every copy takes 1 ms
    gbs = timing.measure_bandwidth_gbs(torch, "cuda", nbytes=4 * 10**9, repeats=5)
    assert gbs == pytest.approx(8000.0)  # 4 GB read + 4 GB written in 1 ms
    assert torch.log.count("copy_") == 3 + 5  # warm-up + timed


def test_peak_flops_arithmetic() -> None:
    torch = fake_torch(lambda: 2.0)
    torch.randn = lambda *shape, device, dtype: FakeTensor(shape[0], dtype, torch.log)
    torch.matmul = lambda a, b: None
    assert timing.measure_peak_tflops(torch, "cuda", "bfloat16", n=1000, repeats=3) == (
        pytest.approx(2 * 1000**3 / 2e9))


def test_fp8_peak_without_scaled_mm_says_so() -> None:
    torch = fake_torch(scaled_mm=False)
    with pytest.raises(RuntimeError, match="_scaled_mm"):
        timing.measure_peak_tflops(torch, "cuda", torch.float8_e4m3fn)


# --- the benchmark script ----------------------------------------------------------------------

def test_bench_without_a_gpu_says_so_and_exits_zero() -> None:
    # No device visible, even where this test runs on a GPU machine with a CUDA torch.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "kernels.py")],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    assert "no CUDA device: kernel timing needs a GPU" in out.stdout


def test_bench_finds_exercises_with_a_kernel_task(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_kernels_under_test",
                                                  ROOT / "bench" / "kernels.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for folder in ("b_ex/kernel", "a_ex/kernel", "_template/kernel", "c_ex/code"):
        (tmp_path / folder).mkdir(parents=True)
    for folder in ("b_ex", "a_ex", "_template"):
        (tmp_path / folder / "kernel" / "task.py").write_text("")
    assert [p.name for p in bench.kernel_exercises(tmp_path)] == ["a_ex", "b_ex"]
