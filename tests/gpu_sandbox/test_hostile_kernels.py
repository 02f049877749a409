"""Hostile kernel submissions, for every exercise with a kernel part (issue 19 items 3 and 4).

In Triton's interpreter a tensor passed as a `tl.constexpr` arrives in the kernel as the torch
tensor itself, so a @triton.jit body could compute the answer with torch (`.copy_`, `@`,
`.cos()`) while a no-op kernel supplied the one launch the sm_90 compile check saw. The rules
these tests hold the harness to: a constexpr argument is a Python scalar, bool, string or dtype
(never a tensor), every launch is recorded or the run fails, and a kernel body calls no method
Triton's tensors do not have. Each exercise's reference still scores 1.0.

The sandboxed tests run the real harness (bwrap, Triton's interpreter) and switch the static
checks off where they test the run-time rule, as tests/gpu_sandbox/test_harness.py does.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import graders
from exercises import registry
from graders.kernel_static import check as static_check

ROOT = Path(__file__).resolve().parents[2]
KERNEL_EXERCISES = sorted(
    folder.name for folder in (ROOT / "exercises").iterdir()
    if (folder / "exercise.toml").is_file()
    and 'type = "kernel"' in (folder / "exercise.toml").read_text(encoding="utf-8"))
COMPILE = "compiles for sm_90 (H100/H200)"

NOOP = '''

@triton.jit
def _noop(x_ptr):
    pass
'''

# Each exercise's answer computed with torch on constexpr tensors inside a @triton.jit body,
# then a no-op kernel launched so that the compile check has a kernel to compile.
CHEATS = {
    "fp8_blockscaled_gemm": '''
import torch
import triton
import triton.language as tl


@triton.jit
def _gemm(A: tl.constexpr, AS: tl.constexpr, B: tl.constexpr, BS: tl.constexpr,
          C: tl.constexpr):
    a = A.double() * AS.double().repeat_interleave(128, 1)
    bs = BS.double().repeat_interleave(128, 0).repeat_interleave(128, 1)
    b = B.double() * bs[:B.shape[0]]
    C.copy_(a @ b.T)
''' + NOOP + '''

def fp8_gemm(a, a_scale, b, b_scale, c):
    _gemm[(1,)](A=a, AS=a_scale, B=b, BS=b_scale, C=c)
    _noop[(1,)](c)
''',
    "fused_rope_positions": '''
import torch
import triton
import triton.language as tl


@triton.jit
def _rope(Q: tl.constexpr, P: tl.constexpr, THETA: tl.constexpr, OUT: tl.constexpr):
    # (the interpreter turns Python numbers bound to names into Triton scalars, so shapes
    # stay inline)
    x = Q.double()
    i = x.new_ones(Q.shape[2] // 2).cumsum(0) - 1.0
    angle = P.double()[:, None] * (THETA ** (i * (-2.0 / Q.shape[2])))[None, :]
    c = angle.cos()[:, None, :]
    s = angle.sin()[:, None, :]
    x1 = x[:, :, :Q.shape[2] // 2]
    x2 = x[:, :, Q.shape[2] // 2:]
    OUT[:, :, :Q.shape[2] // 2] = x1 * c - x2 * s
    OUT[:, :, Q.shape[2] // 2:] = x2 * c + x1 * s
''' + NOOP + '''

def rope_fused(q, positions, theta, out):
    _rope[(1,)](Q=q, P=positions, THETA=theta, OUT=out)
    _noop[(1,)](out)
''',
    "split_kv_decode": '''
import torch
import triton
import triton.language as tl


@triton.jit
def _attend(Q: tl.constexpr, K: tl.constexpr, V: tl.constexpr, OUT: tl.constexpr,
            LSE: tl.constexpr):
    q = Q.double().reshape(Q.shape[0], K.shape[1], Q.shape[1] // K.shape[1], Q.shape[2])
    scores = (q @ K.double().transpose(2, 3)) * (Q.shape[2] ** -0.5)
    lse = scores.logsumexp(-1)
    p = (scores - lse[..., None]).exp()
    OUT.copy_((p @ V.double()).reshape(Q.shape))
    LSE.copy_(lse.reshape(LSE.shape))
''' + NOOP + '''

def split_kv_decode(q, k, v, out, lse, num_splits):
    _attend[(1,)](Q=q, K=k, V=v, OUT=out, LSE=lse)
    _noop[(1,)](out)
''',
}

# One torch operation on a constexpr tensor each: added to the reference as a second kernel the
# wrapper launches on its first output after the real work, so the cases still pass unless the
# launch itself is refused. None of them changes the output.
SHAPES = {
    "cos": "    T[...] = T * (T * 0).cos()\n",
    "matmul": "    v = T.reshape(-1)[:1]\n    w = v @ v\n",
    "copy_": "    T.copy_(T)\n",
}


def spec_and_params(slug: str) -> tuple[object, dict]:
    spec = registry.get(slug)
    return spec, registry.params_for(spec, registry.CANONICAL_VARIANT)


def kernel_part(spec: object) -> str:
    return next(p.id for p in spec.parts if p.type == "kernel")  # type: ignore[attr-defined]


def reference_source(slug: str) -> str:
    return (ROOT / "exercises" / slug / "kernel" / "reference.py").read_text(encoding="utf-8")


def with_extra_launch(slug: str, shape: str) -> str:
    """The reference plus `_peek(T: tl.constexpr)` doing `shape` on the entry's first output,
    launched as the wrapper's last statement."""
    import ast

    spec, _ = spec_and_params(slug)
    task = (ROOT / "exercises" / slug / "kernel" / "task.py").read_text(encoding="utf-8")
    outputs = next(ast.literal_eval(n.value) for n in ast.parse(task).body
                   if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "OUTPUTS")
    entry = graders.kernel.task_entry(ROOT / "exercises" / slug / "kernel" / "task.py")
    source = reference_source(slug)
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry)
    lines = source.splitlines()
    end = fn.end_lineno or len(lines)
    lines.insert(end, f"    _peek[(1,)](T={outputs[0]})")
    peek = "\n\n@triton.jit\ndef _peek(T: tl.constexpr):\n" + SHAPES[shape]
    return "\n".join(lines) + "\n" + peek


def grade(slug: str, source: str) -> graders.GradeResult:
    spec, params = spec_and_params(slug)
    return graders.grade_answer(spec, kernel_part(spec), source, params, seed=12345)


def test_every_kernel_exercise_is_covered() -> None:
    assert set(CHEATS) == set(KERNEL_EXERCISES) and len(KERNEL_EXERCISES) >= 3


# --- static: the kernel body's method calls ------------------------------------------------------

@pytest.mark.parametrize("slug", KERNEL_EXERCISES)
def test_torch_methods_in_a_kernel_body_are_refused_before_anything_runs(slug: str) -> None:
    entry = graders.kernel.task_entry(ROOT / "exercises" / slug / "kernel" / "task.py")
    problems = static_check(CHEATS[slug], entry)
    assert any(p.rule == "kernel-method" for p in problems), problems
    assert any("`.double()` on `" in p.message for p in problems)  # each cheat converts first


@pytest.mark.parametrize("shape", ["matmul", "copy_", "cos"])
@pytest.mark.parametrize("slug", KERNEL_EXERCISES)
def test_each_cheat_shape_statically(slug: str, shape: str) -> None:
    entry = graders.kernel.task_entry(ROOT / "exercises" / slug / "kernel" / "task.py")
    rules = {p.rule for p in static_check(with_extra_launch(slug, shape), entry)}
    if shape == "cos":
        # x.cos() is a Triton tensor method (honest kernels call it); item assignment is not
        # Triton. The constexpr rule at launch is what stops a torch tensor reaching .cos().
        assert rules == {"kernel-assign"}
    else:
        assert rules == {"kernel-method"} if shape == "copy_" else {"kernel-matmul"}


@pytest.mark.parametrize("slug", KERNEL_EXERCISES)
def test_the_references_pass_the_static_checks(slug: str) -> None:
    entry = graders.kernel.task_entry(ROOT / "exercises" / slug / "kernel" / "task.py")
    assert static_check(reference_source(slug), entry) == []


# --- in the sandbox: the run-time rule -----------------------------------------------------------

@pytest.fixture
def no_static_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    from graders import kernel_static as static

    monkeypatch.setattr(static, "check", lambda source, entry: [])


def assert_refused_at_launch(r: graders.GradeResult) -> None:
    assert r.score < 1.0 and r.verdict != "correct", r.feedback
    compile_check = next(c for c in r.checks if c.name == COMPILE)
    assert not compile_check.passed
    assert "constexpr" in compile_check.message and "tensor" in compile_check.message, \
        compile_check.message
    # The case that launched it says why too, in the student's own frames.
    failed = [c for c in r.checks if not c.passed and c.name != COMPILE]
    assert failed and any("constexpr" in c.message for c in failed)


@pytest.mark.usefixtures("sandbox", "no_static_checks")
@pytest.mark.parametrize("slug", KERNEL_EXERCISES)
def test_torch_on_constexpr_tensors_plus_a_noop_launch_fails(slug: str) -> None:
    assert_refused_at_launch(grade(slug, CHEATS[slug]))


@pytest.mark.usefixtures("sandbox", "no_static_checks")
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("slug", KERNEL_EXERCISES)
def test_one_extra_constexpr_tensor_launch_fails_the_run(slug: str, shape: str) -> None:
    assert_refused_at_launch(grade(slug, with_extra_launch(slug, shape)))


@pytest.mark.usefixtures("sandbox")
@pytest.mark.parametrize("slug", KERNEL_EXERCISES)
def test_the_references_still_score_one(slug: str) -> None:
    r = grade(slug, reference_source(slug))
    assert r.score == 1.0, r.feedback
    kernels = r.extra["compile"]["kernels"]
    assert kernels and all("error" not in k for k in kernels)


# --- item 4: compile what the launcher compiles, and check its resources -----------------------

FIXTURE = Path(__file__).resolve().parent / "fixture"
FIXTURE_REFERENCE = (FIXTURE / "kernel" / "reference.py").read_text(encoding="utf-8")
MM_KERNEL = '''

@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
        stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BK * stride_ak
        b += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16))
'''
# A 256 x 256 x 256 FP16 GEMM on scratch the wrapper allocates, after the fixture's axpy: every
# size and stride a multiple of 16 (or 1), as in any real GEMM.
MM_LAUNCH = '''
    a = torch.zeros((256, 256), dtype=torch.float16, device=x.device)
    c = torch.empty((256, 256), dtype=torch.float16, device=x.device)
    _mm[(2, 2)](a, a, c, 256, 256, 256, a.stride(0), a.stride(1), a.stride(0), a.stride(1),
                c.stride(0), c.stride(1), BM=128, BN=128, BK=64, num_warps=4, num_stages=STAGES)
'''
# The same kernel compiled the old way: every integer an i32, nothing known about alignment.
UNSPECIALISED = '''
import importlib.util, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
spec = importlib.util.spec_from_file_location("mm", sys.argv[1])
mm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mm)
ints = ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
        "stride_cn")
signature = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **{n: "i32" for n in ints},
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
compiled = triton.compile(ASTSource(mm._mm, signature, {"BM": 128, "BN": 128, "BK": 64}),
                          target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4, "num_stages": int(sys.argv[2])})
print(compiled.metadata.shared)
'''


def runtime_python() -> str:
    from runners import runtime_venv_host_path

    python = Path(runtime_venv_host_path()) / "bin" / "python"
    if not python.exists():
        pytest.skip("the sandbox runtime venv is not installed")
    return str(python)


def with_gemm(stages: int) -> str:
    return (FIXTURE_REFERENCE.replace("\n\ndef axpy(", MM_KERNEL + "\n\ndef axpy(")
            + MM_LAUNCH.replace("STAGES", str(stages)))


def grade_fixture(source: str) -> graders.GradeResult:
    from exercises.spec import PartSpec

    part = PartSpec(id="k", type="kernel", prompt="", time_limit_s=30, memory_mb=3072)
    ctx = graders.GradeContext(reference="kernel/reference.py", mistakes=(),
                               params={"sizes": [256, 1000]}, exercise_path=str(FIXTURE),
                               mode="submit", seed=3)
    return graders.kernel.grade(part, source, ctx)


def mm_entry(r: graders.GradeResult) -> dict:
    entries = [k for k in r.extra["compile"]["kernels"] if k["kernel"] == "_mm"]
    assert len(entries) == 1, r.extra["compile"]
    return entries[0]


def unspecialised_shared(tmp_path: Path, stages: int) -> int:
    import subprocess

    source = tmp_path / "mm.py"
    source.write_text("import triton\nimport triton.language as tl\n" + MM_KERNEL)
    out = subprocess.run([runtime_python(), "-c", UNSPECIALISED, str(source), str(stages)],
                         capture_output=True, text=True, timeout=300, check=True)
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.usefixtures("sandbox")
def test_the_reported_shared_memory_is_the_specialised_pipelined_compile(tmp_path: Path) -> None:
    three, one = grade_fixture(with_gemm(3)), grade_fixture(with_gemm(1))
    assert three.score == one.score == 1.0, (three.feedback, one.feedback)
    piped, flat = mm_entry(three), mm_entry(one)
    # Specialised as the launcher would (multiples of 16 divisible, strides of 1 constexpr),
    # the loads vectorise and num_stages=3 pipelines: three stages of A and B tiles in shared
    # memory, where the old i32-everywhere compile of the same launch showed one.
    assert piped["shared"] > unspecialised_shared(tmp_path, 3)
    assert piped["shared"] > flat["shared"]
    assert piped["signature"]["stride_ak"] == "constexpr"
    # What the student reads is that compile's figures, registers included.
    message = next(c for c in three.checks if c.name == COMPILE).message
    assert f"{piped['shared']:,} B shared memory" in message
    assert 0 < piped["registers"] <= 255 and f"{piped['registers']} registers" in message


@pytest.mark.usefixtures("sandbox")
def test_a_kernel_over_the_sm90_shared_memory_limit_fails_naming_the_limit() -> None:
    r = grade_fixture(with_gemm(8))  # eight 32 KiB stages: 256 KiB of shared memory
    compile_check = next(c for c in r.checks if c.name == COMPILE)
    assert not compile_check.passed and r.score < 1.0
    assert mm_entry(r)["shared"] > 232_448
    assert "232,448 B" in compile_check.message and "shared memory" in compile_check.message
    # The cases themselves pass: only the compile check knows.
    assert all(c.passed for c in r.checks if c.name != COMPILE)


def test_every_sm90_limit_is_checked_and_named() -> None:
    from gpu_sandbox.aot import SM90_LIMITS, over_limits

    fits = {"shared": 232_448, "registers": 255, "threads": 256}
    assert over_limits(fits) == []
    for key, value in (("shared", 232_449), ("registers", 256), ("threads", 2048)):
        (message,) = over_limits({**fits, key: value}) if key != "threads" else \
            over_limits({**fits, "registers": 32, key: value})
        limit, what, _ = SM90_LIMITS[key]
        assert f"{limit:,}" in message and what in message
    # 255 registers for 512 threads do not fit the 65,536-register file of one block.
    assert any("registers per block" in m for m in over_limits({**fits, "threads": 512}))


SPECIALISE = '''
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, sys.argv[1])
import torch
import triton
import triton.language as tl
from aot import LaunchLog, LaunchRefused

@triton.jit
def k(x_ptr, n, m, f, BLOCK: tl.constexpr):
    pass

log = LaunchLog()
log.install(interpreted=True)
x = torch.zeros(64)
out = {}
k[(1,)](x, 1, 48, 2.0, BLOCK=16)
k[(1,)](x[1:], 7, 48, 2.0, BLOCK=16, num_warps=8)
out["launches"] = [l.to_json() for l in log.launches.values()]
for name, value in (("tensor", x), ("wrapped", tl.constexpr(x)), ("list", [1]),
                    ("huge", 2**70), ("dtype", tl.float16), ("torch_dtype", torch.float16),
                    ("tuple", (1, 2.0, "s"))):
    try:
        k[(1,)](x, 3, 48, 2.0, BLOCK=value)
        out[name] = "ok"
    except LaunchRefused as exc:
        out[name] = str(exc)
out["problems"] = list(log.problems)
try:
    for block in range(2, 100):  # a loop of distinct specialisations is not a compile farm
        k[(1,)](x, 3, 48, 2.0, BLOCK=block)
except LaunchRefused as exc:
    out["farm"] = [str(exc), len(log.launches)]
print(json.dumps(out))
'''


def test_launches_are_specialised_by_the_jits_own_rules_and_tensor_constexprs_refused(
        tmp_path: Path) -> None:
    import json
    import subprocess

    script = tmp_path / "specialise.py"  # a file: @triton.jit reads the kernel's source
    script.write_text(SPECIALISE)
    out = subprocess.run([runtime_python(), str(script), str(ROOT / "gpu_sandbox")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    aligned, offset = r["launches"]
    # n == 1 becomes a constexpr; 48 and the 16-byte-aligned pointer are divisible by 16; the
    # float is never specialised; the pointer one float in is not aligned.
    assert aligned["signature"] == {"x_ptr": "*fp32", "n": "constexpr", "m": "i32",
                                    "f": "fp32", "BLOCK": "constexpr"}
    divisible = {tuple(path) for path, attrs in aligned["attrs"] if attrs}
    assert divisible == {(0,), (2,)}
    assert [[1], 1] in aligned["constexprs"] and [[4], 16] in aligned["constexprs"]
    assert offset["signature"]["n"] == "i32" and offset["options"]["num_warps"] == 8
    assert {tuple(path) for path, attrs in offset["attrs"] if attrs} == {(2,)}
    for name in ("tensor", "wrapped", "list", "huge"):
        assert "constexpr argument `BLOCK`" in r[name], r[name]
    assert "never a tensor" in r["tensor"] and "never a tensor" in r["wrapped"]
    assert r["dtype"] == r["torch_dtype"] == r["tuple"] == "ok"
    # Remembered: the compile step fails even if the wrapper caught the exception.
    assert set(r["problems"]) == {r[n] for n in ("tensor", "wrapped", "list", "huge")}
    message, recorded = r["farm"]
    assert "more than 16 distinct specialisations" in message and recorded == 16


KERNEL_API = '''
import json
from triton.language import core
names = set()
for cls in (core.tensor, core.dtype, core.pointer_type, core.block_type, core.constexpr,
            core.tensor_descriptor):
    names |= {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n, None))}
print(json.dumps(sorted(names)))
'''
# Public callables of those classes that are Triton internals or enums, never called in a kernel.
NOT_KERNEL_API = {"KIND", "SIGNEDNESS", "codegen_name", "kind", "mangle", "to_ir"}


def test_the_kernel_method_list_is_the_installed_tritons() -> None:
    import json
    import subprocess

    from graders.kernel_static import KERNEL_METHODS

    out = subprocess.run([runtime_python(), "-c", KERNEL_API], capture_output=True, text=True,
                         timeout=120, check=True)
    installed = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert KERNEL_METHODS == installed - NOT_KERNEL_API


# --- the kernel compiled is the kernel that ran ---------------------------------------------

# A submission can tell the sm_90 compile's fresh import from the one the cases ran in, and
# define a different kernel under the same name for it. Here the kernel the cases run writes
# the right answer; the one compiled would be anything at all (a kernel that could not compile,
# or that no GPU would run as the interpreter did).
# (Kernel submissions may not import os or sys: the module's own name is enough.) The switch is
# read in the kernel itself, or in a @triton.jit helper the kernel calls.
SWITCH = 'IN_COMPILE = tl.constexpr(1 if __name__ == "submission_compiled" else 0)'
HELPER = """

@triton.jit
def _combine(x, y):
    if IN_COMPILE:
        return x
    return 2.0 * x + y
"""
DECOYS = {
    "in the kernel": ("    tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)\n",
                      "    if IN_COMPILE:\n        tl.store(out_ptr + offs, x, mask=mask)\n"
                      "    else:\n        tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)\n",
                      ""),
    "in a helper": ("    tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)\n",
                    "    tl.store(out_ptr + offs, _combine(x, y), mask=mask)\n", HELPER),
}


def with_decoy(old: str, new: str, helper: str) -> str:
    head = f"\n\n{SWITCH}\n{helper}\n\n@triton.jit\ndef axpy_kernel("
    source = FIXTURE_REFERENCE.replace("\n\n@triton.jit\ndef axpy_kernel(", head, 1)
    source = source.replace(old, new, 1)
    assert "IN_COMPILE:" in source and new in source, source
    return source


@pytest.mark.usefixtures("sandbox")
@pytest.mark.parametrize("decoy", sorted(DECOYS))
def test_a_kernel_defined_otherwise_for_the_compile_fails_it(decoy: str) -> None:
    r = grade_fixture(with_decoy(*DECOYS[decoy]))
    compile_check = next(c for c in r.checks if c.name == COMPILE)
    assert not compile_check.passed and r.score < 1.0, r.feedback
    assert "not the one the cases launched" in compile_check.message, compile_check.message
    assert all(c.passed for c in r.checks if c.name != COMPILE)
