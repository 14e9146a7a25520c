"""gelu, matmul and matmul_softmax variants: results against float64 torch, traffic models in exact bytes.

On CPU the Triton kernels run in the interpreter, so shapes and blocks are tiny; the shapes still hit
every path (single element, one partial block, edges in every dimension, partial GROUP_M groups).
gpu-marked tests repeat this at real sizes and default parameters and build the CUDA C++ kernel.
"""

from __future__ import annotations

import pytest
import torch

from memtraffic.kernels import VARIANTS
from memtraffic.kernels._params import resolve
from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.ops import OPS

FP32, FP16, BF16 = torch.float32, torch.float16, torch.bfloat16
DTYPES = [FP32, FP16, BF16]

# (atol, rtol) against the float64 reference computed from the same (already rounded) inputs.
# gelu: the eager version rounds after each of its 8 ops, so 16-bit tolerances are a few ulps.
GELU_TOL = {FP32: (1e-5, 1e-5), FP16: (1e-2, 1e-2), BF16: (5e-2, 5e-2)}
# matmul: fp32 accumulate; the output is rounded once. fp32 inputs multiply in fp32 on the GPU too
# (input_precision='ieee', not Triton's TF32 default), so one tolerance serves CPU and GPU.
MATMUL_TOL = {FP32: (1e-4, 1e-4), FP16: (1e-2, 1e-2), BF16: (2e-2, 2e-2)}
# matmul_softmax outputs are probabilities in [0, 1]: absolute tolerances. The unfused version rounds the
# logits to the dtype before the softmax, which dominates for bf16.
MS_ATOL = {FP32: 1e-5, FP16: 3e-3, BF16: 2e-2}
ROWSUM_ATOL = {FP32: 1e-5, FP16: 1e-2, BF16: 2e-2}

SMALL_MM = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}  # quick in the interpreter
SMALL_FUSED = {"BLOCK_M": 16, "BLOCK_K": 16}


def _inputs(op: str, shape, dtype, device, seed: int = 0):
    return OPS[op].make_inputs(shape, dtype, device, seed)


def _run(name: str, shape, dtype, device, params=None, seed: int = 0):
    variant = VARIANTS[name]
    inputs = _inputs(variant.op, shape, dtype, device, seed)
    out = variant.run(*inputs, **(params or {}))
    ref = OPS[variant.op].reference(*inputs)
    assert out.shape == ref.shape
    assert out.dtype == dtype
    return out, ref


def _close(out, ref, atol, rtol=0.0):
    torch.testing.assert_close(out.double().cpu(), ref.cpu(), atol=atol, rtol=rtol)


# --- gelu -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, params",
    [
        ((1, 1), {"BLOCK": 16}),  # one element, one masked block
        ((1, 1023), {}),  # default BLOCK=1024: one block with one lane masked
        ((37, 129), {"BLOCK": 64, "num_warps": 2}),  # 75 blocks, the last partial
    ],
)
@pytest.mark.parametrize("name", ["gelu_torch_ops", "gelu_triton"])
def test_gelu_matches_reference(name, shape, params, dtype, device):
    params = params if name == "gelu_triton" else {}
    out, ref = _run(name, shape, dtype, device, params)
    atol, rtol = GELU_TOL[dtype]
    _close(out, ref, atol, rtol)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")  # numpy, interpreter
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["gelu_torch_ops", "gelu_triton"])
def test_gelu_large_inputs_reach_limits_without_nan(name, dtype, device):
    x = torch.tensor([[1e4, -1e4, 0.0, 30.0, -30.0]], dtype=dtype, device=device)
    params = {"BLOCK": 16} if name == "gelu_triton" else {}
    y = VARIANTS[name].run(x, **params).float().cpu()
    assert torch.isfinite(y).all(), y
    # gelu(x) -> x for large x, -> 0 for large -x; gelu(0) = 0.
    assert y[0, 0] == x[0, 0].float().cpu()
    assert y[0, 3] == 30.0
    assert y[0, 1] == 0.0 and y[0, 2] == 0.0 and y[0, 4] == 0.0


def test_gelu_compiled_matches_reference(device):
    # One tiny shape: the first call compiles (Inductor, C++ on CPU).
    out, ref = _run("gelu_compiled", (3, 37), FP32, device)
    _close(out, ref, *GELU_TOL[FP32])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_gelu_cuda_says_why_it_cannot_run_here():
    variant = VARIANTS["gelu_cuda"]
    assert variant.needs_cuda
    reason = variant.check((4, 4), FP32, {})
    assert reason is not None and "CUDA GPU" in reason


# --- matmul -----------------------------------------------------------------------------------------------

MM_CASES = [
    ((1, 1, 1), SMALL_MM),  # every extent masked inside one tile
    ((17, 33, 65), SMALL_MM),  # odd everywhere: 2x3 tiles, 5 K steps, last group of GROUP_M partial
    ((64, 64, 64), {**SMALL_MM, "GROUP_M": 3}),  # exact tiles, 4 tile rows in groups of 3 + 1
    ((40, 100, 50), {"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 1}),  # uneven blocks
]


def _mm_tol(name: str, dtype, device):
    return MATMUL_TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, params", MM_CASES)
@pytest.mark.parametrize("name", ["matmul_triton", "matmul_torch"])
def test_matmul_matches_reference(name, shape, params, dtype, device):
    params = params if name == "matmul_triton" else {}
    out, ref = _run(name, shape, dtype, device, params)
    _close(out, ref, *_mm_tol(name, dtype, device))


# --- matmul_softmax ---------------------------------------------------------------------------------------


def _ms_atol(dtype, device):
    return MS_ATOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, params", MM_CASES)
@pytest.mark.parametrize("name", ["matmul_softmax_fused", "matmul_softmax_unfused"])
def test_matmul_softmax_matches_reference_and_rows_sum_to_one(name, shape, params, dtype, device):
    if name == "matmul_softmax_fused":
        params = {"BLOCK_M": params["BLOCK_M"], "BLOCK_K": params["BLOCK_K"]}
    out, ref = _run(name, shape, dtype, device, params)
    _close(out, ref, _ms_atol(dtype, device))
    sums = out.float().sum(dim=-1).cpu()
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=ROWSUM_ATOL[dtype], rtol=0)


def test_matmul_softmax_fused_rejects_rows_wider_than_a_tile():
    check = VARIANTS["matmul_softmax_fused"].check
    assert check((64, 1024, 64), FP32, {}) is None
    assert "N=1025" in check((64, 1025, 64), FP32, {})
    assert check((64, 2048, 64), FP16, {}) is None
    assert "matmul_softmax_unfused" in check((64, 2049, 64), BF16, {})


def test_matmul_softmax_fused_refuses_what_does_not_fit_registers_or_shared_memory():
    check = VARIANTS["matmul_softmax_fused"].check
    assert check((4096, 1024, 64), BF16, {"BLOCK_M": 32}) is None
    assert "lower BLOCK_M" in check((4096, 1024, 64), BF16, {"BLOCK_M": 64})
    assert "lower BLOCK_M" in check((4096, 1024, 64), FP32, {"BLOCK_M": 32})  # fp32: 16384 values
    assert "spill" in check((4096, 1024, 64), BF16, {"BLOCK_M": 32, "num_warps": 4})
    assert "shared memory" in check((64, 1024, 64), BF16, {"BLOCK_K": 128, "num_stages": 4})


def test_matmul_softmax_fused_auto_config():
    from memtraffic.kernels.matmul_softmax import fused_config

    auto = {k: None for k in VARIANTS["matmul_softmax_fused"].params}
    # 4096x1024 bf16: 32 rows a program (half the B re-reads of 16), 128 programs, 64 values a thread.
    assert fused_config((4096, 1024, 1024), BF16, auto) == {"BLOCK_M": 32, "BLOCK_K": 32, "num_warps": 16,
                                                             "num_stages": 3}
    assert fused_config((4096, 1024, 1024), FP32, auto)["BLOCK_M"] == 16
    assert fused_config((64, 1024, 64), BF16, auto)["BLOCK_M"] == 16  # few rows: keep programs
    # every auto config passes check() wherever the row fits
    for shape in [(4096, 1024, 1024), (64, 2048, 64), (17, 33, 65), (4096, 256, 512), (100000, 64, 64)]:
        for dtype in DTYPES:
            if shape[1] <= (1024 if dtype == FP32 else 2048):
                assert VARIANTS["matmul_softmax_fused"].check(shape, dtype, auto) is None, (shape, dtype)


def test_fp32_dots_ask_for_ieee_not_tf32():
    from memtraffic.kernels.matmul import input_precision

    assert input_precision(torch.zeros(1, dtype=FP32)) == "ieee"
    assert input_precision(torch.zeros(1, dtype=BF16)) == "tf32"  # ignored for 16-bit inputs


# --- traffic models: expected bytes written out from the formulas -----------------------------------------


def _pred(name, shape, dtype, **params):
    v = VARIANTS[name]
    return v.predicted(shape, dtype, {**v.params, **params})


def test_matmul_minimum_bytes():
    t = OPS["matmul"].minimum((4096, 4096, 4096), FP32)
    assert (t.read, t.write) == (134_217_728, 67_108_864)  # (MK + KN) * 4, MN * 4
    t = OPS["matmul_softmax"].minimum((17, 33, 65), FP16)
    assert (t.read, t.write) == ((17 * 65 + 65 * 33) * 2, 17 * 33 * 2)


def test_matmul_triton_predicted_bytes():
    # Defaults BLOCK_M = BLOCK_N = 128: A and B each read 4096/128 = 32 times.
    t = _pred("matmul_triton", (4096, 4096, 4096), FP32)
    assert (t.read, t.write) == (4_294_967_296, 67_108_864)  # 2 * 4096*4096*4*32, 4096*4096*4
    # 17x33x65 fp16, 16x16 tiles: A read ceil(33/16)=3 times, B ceil(17/16)=2 times.
    t = _pred("matmul_triton", (17, 33, 65), FP16, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=4)
    assert (t.read, t.write) == (17 * 65 * 2 * 3 + 65 * 33 * 2 * 2, 1122)  # 15210, 17*33*2
    # 16 warps = 512 threads over a 256-element tile: every element loaded by two warps.
    t = _pred("matmul_triton", (17, 33, 65), FP16, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_warps=16)
    assert t.read == 2 * 15210


def test_matmul_torch_predicts_the_minimum():
    t = _pred("matmul_torch", (4096, 4096, 4096), FP32)
    assert (t.read, t.write) == (134_217_728, 67_108_864)


def test_gelu_predicted_bytes():
    mn4 = 8192 * 8192 * 4
    t = _pred("gelu_torch_ops", (8192, 8192), FP32)
    assert (t.read, t.write) == (2_684_354_560, 2_147_483_648)  # 10 * MN * 4, 8 * MN * 4
    for name in ("gelu_triton", "gelu_compiled", "gelu_cuda"):
        t = _pred(name, (8192, 8192), FP32)
        assert (t.read, t.write) == (mn4, mn4)
    # BLOCK=32 over 4 warps: the tile wraps 4 times, each warp loads it; stores keep one copy.
    t = _pred("gelu_triton", (8192, 8192), FP32, BLOCK=32, num_warps=4)
    assert (t.read, t.write) == (4 * mn4, mn4)
    # BLOCK=16: half a warp's lanes duplicate the other half inside one request (free), 4 warps still repeat.
    assert _pred("gelu_triton", (8192, 8192), FP32, BLOCK=16, num_warps=4).read == 4 * mn4


def test_matmul_softmax_predicted_bytes():
    # Fused, 4096x1024x4096 fp16, BLOCK_M=16: A once (4096*4096*2), B once per 256 row blocks.
    t = _pred("matmul_softmax_fused", (4096, 1024, 4096), FP16, BLOCK_M=16, BLOCK_K=16, num_warps=8)
    assert (t.read, t.write) == (33_554_432 + 2_147_483_648, 8_388_608)  # 4096*1024*2*256; 4096*1024*2
    # Auto: BLOCK_M=32, so B once per 128 row blocks: half the B reads.
    t = _pred("matmul_softmax_fused", (4096, 1024, 4096), FP16)
    assert (t.read, t.write) == (33_554_432 + 1_073_741_824, 8_388_608)
    # Unfused: matmul_triton's 4096^3 fp32 traffic, then softmax reads and writes MN once more.
    t = _pred("matmul_softmax_unfused", (4096, 4096, 4096), FP32)
    assert (t.read, t.write) == (4_294_967_296 + 67_108_864, 2 * 67_108_864)


def test_flops():
    assert OPS["gelu"].flops((8192, 8192)) == 9 * 67_108_864
    assert OPS["matmul"].flops((4096, 4096, 4096)) == 137_438_953_472  # 2 * 4096^3
    assert OPS["matmul_softmax"].flops((17, 33, 65)) == 2 * 17 * 33 * 65 + 5 * 17 * 33


# --- parameters -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, params, words",
    [
        ("gelu_triton", {"BLOCKSIZE": 64}, "has no parameter 'BLOCKSIZE'"),
        ("gelu_triton", {"BLOCK": 100}, "power of two"),
        ("gelu_triton", {"BLOCK": True}, "BLOCK"),
        ("gelu_torch_ops", {"BLOCK": 64}, "no parameters"),
        ("matmul_triton", {"BLOCK_M": 8}, "BLOCK_M=8"),
        ("matmul_triton", {"GROUP_M": 0}, "GROUP_M"),
        ("matmul_torch", {"BLOCK_M": 64}, "has no parameter"),
        ("matmul_softmax_fused", {"BLOCK_N": 64}, "has no parameter 'BLOCK_N'"),
        ("matmul_softmax_unfused", {"num_stages": "x"}, "num_stages"),
    ],
)
def test_bad_params_are_one_line_usage_errors(name, params, words):
    v = VARIANTS[name]
    shape = (4, 4) if v.op == "gelu" else (4, 4, 4)
    merged = {**v.params, **params}
    for call in (lambda: v.predicted(shape, FP32, merged), lambda: v.check(shape, FP32, merged)):
        with pytest.raises(UsageError, match=words.replace("(", r"\(")) as err:
            call()
        assert "\n" not in str(err.value) and name in str(err.value)


def test_bad_params_fail_before_any_launch():
    x = torch.zeros(2, 2)
    with pytest.raises(UsageError, match="BLOCK"):
        VARIANTS["gelu_triton"].run(x, BLOCK=3)
    with pytest.raises(UsageError, match="foo"):
        VARIANTS["matmul_softmax_unfused"].run(x, x, foo=1)


def test_integer_strings_from_a_command_line_are_accepted():
    p = resolve("gelu_triton", {"BLOCK": 1024}, {"BLOCK": "64"}, {"BLOCK": lambda v: None})
    assert p == {"BLOCK": 64}


# --- GPU: real sizes, default parameters, the CUDA C++ kernel ---------------------------------------------


def _skip_if_cannot_build(name: str) -> None:
    reason = VARIANTS[name].check((1, 1), FP32, {})  # e.g. no nvcc or ninja on this GPU machine
    if reason is not None:
        pytest.skip(reason)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["gelu_torch_ops", "gelu_triton", "gelu_compiled", "gelu_cuda"])
def test_gpu_gelu(name, dtype, device):
    _skip_if_cannot_build(name)
    out, ref = _run(name, (1031, 4097), dtype, device)
    _close(out, ref, *GELU_TOL[dtype])
    x = torch.tensor([[1e4, -1e4, 0.0]], dtype=dtype, device=device)
    y = VARIANTS[name].run(x).float().cpu()
    assert torch.isfinite(y).all() and y[0, 0] == x[0, 0].float().cpu() and y[0, 1] == 0 and y[0, 2] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_gelu_cuda_unaligned_and_odd_sizes(dtype, device):
    _skip_if_cannot_build("gelu_cuda")
    # A view one element into a buffer is not 16-byte aligned: the scalar kernel runs.
    for n in (1, 7, 1023, 100_003):
        buf = torch.randn(n + 1, device=device).to(dtype)
        x = buf[1:].view(1, n)
        y = VARIANTS["gelu_cuda"].run(x)
        _close(y, OPS["gelu"].reference(x), *GELU_TOL[dtype])
        y = VARIANTS["gelu_cuda"].run(buf[:n].view(1, n))  # aligned: vector kernel plus tail
        _close(y, OPS["gelu"].reference(buf[:n].view(1, n)), *GELU_TOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1023, 777, 1531), (2048, 2048, 2048)])
@pytest.mark.parametrize("name", ["matmul_triton", "matmul_torch"])
def test_gpu_matmul(name, shape, dtype, device):
    out, ref = _run(name, shape, dtype, device)
    _close(out, ref, *_mm_tol(name, dtype, device))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, shape, dtype",
    [
        ("matmul_softmax_fused", (1000, 1024, 512), FP32),  # the fp32 cap
        ("matmul_softmax_fused", (1000, 2048, 512), FP16),  # the 16-bit cap
        ("matmul_softmax_fused", (1000, 2048, 512), BF16),
        ("matmul_softmax_fused", (333, 100, 77), FP32),
        ("matmul_softmax_unfused", (1000, 3000, 512), FP16),
    ],
)
def test_gpu_matmul_softmax(name, shape, dtype, device):
    out, ref = _run(name, shape, dtype, device)
    _close(out, ref, _ms_atol(dtype, device))
    sums = out.float().sum(dim=-1).cpu()
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=ROWSUM_ATOL[dtype], rtol=0)


def test_compiled_baselines_never_fall_back_to_eager_across_a_suite():
    # Dynamo's default of 8 recompiles per function ran the bench's later shapes eagerly.
    import torch._dynamo.config as dynamo_config

    from memtraffic.kernels.compiled import RECOMPILE_LIMIT, static_compile

    fn = static_compile(torch.neg)
    assert fn is static_compile(torch.neg)  # one compiled wrapper per function
    assert dynamo_config.recompile_limit >= RECOMPILE_LIMIT >= 2 * 7 * 3  # suite shapes x dtypes
