"""Softmax variants (rows and dim 0): results against float64 torch, and traffic models in exact bytes.

On CPU the Triton kernels run in the interpreter (one Python call per program), so shapes stay small,
but they still reach every path: a single element, a row longer than a warp covers, rows longer than
one BLOCK_N (looped kernels), many 2-element rows (naive's replicated warps, tiled's wide tiles), odd
sizes, and row counts that are not a multiple of BLOCK_M. Inputs are fresh random numbers each run: the
seed is printed and in every failure message (set MEMTRAFFIC_TEST_SEED to replay one).

The traffic models are checked three ways: hand-derived byte counts, a brute-force count of every
tile, and the layouts the real compiler gives each load and store (TTGIR for sm_90, no GPU needed).
gpu-marked tests repeat the result checks at real sizes on CUDA.
"""

from __future__ import annotations

import os
import random
import zlib

import pytest
import torch
import triton

from memtraffic.kernels import VARIANTS, sectors
from memtraffic.kernels import softmax_cluster as cluster
from memtraffic.kernels import softmax_column as col
from memtraffic.kernels import softmax_online as loop
from memtraffic.kernels import softmax_rows as rows
from memtraffic.kernels import softmax_split as split
from memtraffic.vocab.errors import UsageError
from memtraffic.vocab.ops import OPS, element_size

# The interpreter computes masked-out lanes with numpy: -inf - -inf there is harmless but warns.
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")]

FP32, FP16, BF16 = torch.float32, torch.float16, torch.bfloat16
ALL = (FP32, FP16, BF16)

# (atol, rtol) against softmax in float64 of the same (already rounded) inputs. The kernels compute in
# fp32 and round once on store: 16-bit outputs are within half an ulp (2^-11 fp16, 2^-8 bf16 relative).
TOL = {FP32: (1e-6, 1e-5), FP16: (1e-4, 1e-3), BF16: (1e-3, 8e-3)}
# torch_manual rounds after each of its five ops, so 16-bit results drift a few ulps further.
TOL_EAGER = {FP32: (1e-6, 1e-5), FP16: (1e-3, 1e-2), BF16: (8e-3, 5e-2)}
ROWSUM_ATOL = {FP32: 1e-5, FP16: 2e-3, BF16: 1.6e-2}

ROW_TRITON = ["softmax_naive", "softmax_tiled", "softmax_online", "softmax_3pass", "softmax_split"]
ROW_VARIANTS = [*ROW_TRITON, "torch_softmax", "torch_manual"]
COL_VARIANTS = ["softmax_column_strided", "softmax_column_coalesced"]
# BLOCK_N below the row length: the looped path (softmax_online's auto takes one pass for these rows)
LOOPED = {"softmax_online": {"BLOCK_N": 128}, "softmax_3pass": {"BLOCK_N": 128}}


@pytest.fixture(scope="module")
def seed() -> int:
    value = int(os.environ.get("MEMTRAFFIC_TEST_SEED", random.randrange(2**31)))
    print(f"\nsoftmax tests: MEMTRAFFIC_TEST_SEED={value}")
    return value


def _case_seed(seed: int, *parts) -> int:
    # crc32, not hash(): str hashes change from one process to the next, and the seed must replay
    return (seed + zlib.crc32(repr(parts).encode())) % 2**31


def _inputs(op: str, shape, dtype, device, seed: int) -> torch.Tensor:
    return OPS[op].make_inputs(shape, dtype, device, seed)[0]


def _tol(name: str, dtype: torch.dtype) -> tuple[float, float]:
    return (TOL_EAGER if name == "torch_manual" else TOL)[dtype]


def _check(name: str, shape, dtype, device, seed: int, params: dict | None = None) -> None:
    variant = VARIANTS[name]
    case = _case_seed(seed, name, shape, dtype)
    x = _inputs(variant.op, shape, dtype, device, case)
    out = variant.run(x, **(params or {}))
    ref = OPS[variant.op].reference(x)
    assert out.shape == x.shape and out.dtype == dtype
    atol, rtol = _tol(name, dtype)
    msg = lambda m: f"{name} {shape} {dtype} {params} seed={case}: {m}"  # noqa: E731
    torch.testing.assert_close(out.double().cpu(), ref.cpu(), atol=atol, rtol=rtol, msg=msg)
    dim = 0 if variant.op == "softmax_dim0" else 1
    sums = out.double().sum(dim=dim).cpu()
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=ROWSUM_ATOL[dtype], rtol=0, msg=msg)


# Shapes of more elements take 3-15 s a case in Triton's interpreter (2 cores): marked slow, left to .ci/run.
SLOW_ELEMENTS = 30_000


def _cases(entries, variants):
    """(shape, dtypes, params per variant, id[, only these variants]) -> pytest params of
    (name, shape, dtype, params) for every variant the entry applies to; above SLOW_ELEMENTS, marked slow."""
    out = []
    for shape, dtypes, params, ident, *only in entries:
        marks = [pytest.mark.slow] if shape[0] * shape[1] > SLOW_ELEMENTS else []
        for name in only[0] if only else variants:
            for dt in dtypes:
                dt_id = str(dt).removeprefix("torch.")
                out.append(pytest.param(name, shape, dt, params.get(name), id=f"{name}-{ident}-{dt_id}",
                                        marks=marks))
    return out


ROW_CASES = _cases([
    ((1, 1), ALL, {}, "1x1"),
    ((1, 1023), ALL, {}, "1x1023"),
    # loops of 8 BLOCK_N=128 blocks with a partial last one; tiled with 37 % 16 rows in the last tile
    ((37, 1000), ALL, {**LOOPED, "softmax_tiled": {"BLOCK_M": 16}}, "37x1000-looped"),
    ((301, 2), ALL, {}, "301x2"),
    # many short rows: 3001 % 128 != 0 for tiled; the looped kernels take 301x2 (one program per row is
    # slow in the interpreter, and their N=2 path is the same)
    ((3001, 2), (FP32,), {"softmax_tiled": {"BLOCK_M": 128}}, "3001x2",
     ["softmax_naive", "softmax_tiled", "torch_softmax", "torch_manual"]),
    ((1823, 781), (FP32,), {}, "1823x781"),
    # tiled's flat path: power-of-two rows under 16 elements, M a multiple of 16, partial last tile
    ((1040, 4), ALL, {"softmax_tiled": {"BLOCK_M": 64}}, "1040x4-flat", ["softmax_tiled"]),
    ((4096, 8), (BF16,), {}, "4096x8-flat", ["softmax_tiled"]),
    # softmax_online's other looped paths: one program per row without hints, and a persistent grid
    # with fewer programs than rows and a partial last block (the reverse write loop starts there)
    ((37, 1000), (FP32,), {"softmax_online": {"BLOCK_N": 128, "programs": 0, "evict_hints": 0}},
     "37x1000-per-row", ["softmax_online"]),
    ((37, 1000), (FP32,), {"softmax_online": {"BLOCK_N": 256, "programs": 5}}, "37x1000-grid5",
     ["softmax_online"]),
    ((37, 1000), (BF16,), {"softmax_online": {"programs": 5, "evict_hints": 1}}, "37x1000-one-pass-grid5",
     ["softmax_online"]),
    # softmax_split with one part a row: a persistent grid, reading the next row before writing this
    # one (prefetch) or not; 37 % 5 rows left for the last programs, whose last read is fully masked
    ((37, 1000), ALL, {"softmax_split": {"programs": 5, "prefetch": 1}}, "37x1000-grid5-prefetch",
     ["softmax_split"]),
    ((37, 1000), (FP32,), {"softmax_split": {"programs": 5, "prefetch": 0}}, "37x1000-grid5",
     ["softmax_split"]),
], ROW_VARIANTS)


@pytest.mark.parametrize("name,shape,dtype,params", ROW_CASES)
def test_row_softmax_matches_float64(name, shape, dtype, params, device, seed):
    _check(name, shape, dtype, device, seed, params)


def test_torch_compiled_matches_float64(device, seed):
    _check("torch_compiled", (64, 100), FP32, device, seed)


COL_CASES = _cases([
    ((1, 1), ALL, {}, "1x1"),
    ((1, 257), ALL, {}, "1x257"),  # M == 1: n_rows is a compile-time constant
    # columns longer than one BLOCK_M step (loops), 1000 % 64 rows left in the last step
    ((1000, 37), ALL, {"softmax_column_strided": {"BLOCK_M": 64},
                       "softmax_column_coalesced": {"BLOCK_M": 64, "BLOCK_N": 16}}, "1000x37-looped"),
    ((2, 301), ALL, {}, "2x301"),  # many 2-element columns
    ((781, 183), (FP32,), {}, "781x183"),  # odd both ways, several column blocks and row chunks
    # coalesced: one chunk (a single kernel) and chunks of fewer rows than a tile step
    ((781, 183), (FP32,), {"softmax_column_coalesced": {"ROWS": 1024}}, "781x183-one-chunk",
     ["softmax_column_coalesced"]),
    ((200, 37), (BF16,), {"softmax_column_coalesced": {"BLOCK_M": 32, "BLOCK_N": 8, "ROWS": 32}},
     "200x37-7-chunks", ["softmax_column_coalesced"]),
], COL_VARIANTS)


@pytest.mark.parametrize("name,shape,dtype,params", COL_CASES)
def test_column_softmax_matches_float64(name, shape, dtype, params, device, seed):
    _check(name, shape, dtype, device, seed, params)


# --- invariants -------------------------------------------------------------------------------------------


def _along(x: torch.Tensor, op: str) -> torch.Tensor:
    """Rows were built as rows; for dim 0 they become columns."""
    return x.t().contiguous() if op == "softmax_dim0" else x


def _params_for(name: str) -> dict:
    return {**LOOPED, "softmax_column_strided": {"BLOCK_M": 128},
            "softmax_column_coalesced": {"BLOCK_M": 128}}.get(name, {})


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ROW_VARIANTS + COL_VARIANTS)
def test_shift_invariance_is_exact(name, dtype, device, seed):
    # Multiples of 1/4 in [-4, 4) plus 16 are exact in every dtype, and x - max(x) is then exact too, so
    # softmax(x + 16) must equal softmax(x) bit for bit.
    variant = VARIANTS[name]
    gen = torch.Generator().manual_seed(_case_seed(seed, name, dtype))
    x = (torch.randint(-16, 16, (3, 300), generator=gen) / 4).to(dtype)
    x = _along(x, variant.op).to(device)
    params = _params_for(name)
    a, b = variant.run(x, **params), variant.run(x + 16, **params)
    assert torch.equal(a, b), f"{name} {dtype}: max diff {(a.double() - b.double()).abs().max().item()}"


def _hard_rows(dtype: torch.dtype, n: int) -> torch.Tensor:
    big = torch.finfo(dtype).max / 2
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, n, generator=gen)
    x[0] = float("-inf")
    x[0, -1] = 3.0  # whole BLOCK_N blocks of -inf before the only finite value
    x[1, ::2], x[1, 1::2] = big, -big  # huge spread: exp underflows to exactly 0, no overflow
    x[2, ::7] = float("-inf")  # scattered -inf among ordinary values
    x[3, 5] = big  # one huge value dominates
    return x.to(dtype)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ROW_VARIANTS + COL_VARIANTS)
def test_infinities_and_huge_values_give_no_nan(name, dtype, device):
    variant = VARIANTS[name]
    x = _along(_hard_rows(dtype, 300), variant.op).to(device)
    out = variant.run(x, **_params_for(name))
    ref = OPS[variant.op].reference(x)
    assert not out.isnan().any(), f"{name} {dtype}: NaN in output"
    atol, rtol = _tol(name, dtype)
    torch.testing.assert_close(out.double().cpu(), ref.cpu(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("name", ROW_VARIANTS + COL_VARIANTS)
def test_all_minus_inf_row_gives_nan_like_torch(name, device):
    # Documented behaviour: a row (column, for dim 0) with no finite value has no normaliser, and every
    # variant returns NaN for it, as torch.softmax does. Other rows are unaffected.
    variant = VARIANTS[name]
    x = torch.randn(3, 300)
    x[1] = float("-inf")
    x = _along(x, variant.op).to(device)
    out = _along(variant.run(x, **_params_for(name)), variant.op)
    assert out[1].isnan().all()
    assert not out[[0, 2]].isnan().any()
    dim = 0 if variant.op == "softmax_dim0" else -1
    assert torch.softmax(x, dim=dim).isnan().sum() == out.isnan().sum()


# --- parameters and constraints ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ROW_TRITON + COL_VARIANTS)
def test_unknown_parameter_is_a_usage_error(name):
    variant = VARIANTS[name]
    with pytest.raises(UsageError, match="no parameter 'BLOCK_K'"):
        variant.predicted((64, 64), FP32, {"BLOCK_K": 16})
    with pytest.raises(UsageError, match="no parameter 'BLOCK_K'"):
        variant.check((64, 64), FP32, {"BLOCK_K": 16})
    with pytest.raises(UsageError, match="no parameter 'BLOCK_K'"):
        variant.run(torch.zeros(2, 2), BLOCK_K=16)


@pytest.mark.parametrize("name,key,value", [
    ("softmax_naive", "num_warps", 3),
    ("softmax_naive", "num_warps", 0),
    ("softmax_tiled", "BLOCK_M", 100),
    ("softmax_tiled", "BLOCK_M", "wide"),
    ("softmax_tiled", "num_warps", 64),
    ("softmax_online", "BLOCK_N", 96),
    ("softmax_online", "programs", -1),
    ("softmax_online", "evict_hints", 2),
    ("softmax_column_coalesced", "ROWS", 100),
    ("softmax_3pass", "BLOCK_N", True),
    ("softmax_column_strided", "BLOCK_M", -4),
    ("softmax_column_coalesced", "BLOCK_N", 12),
])
def test_bad_parameter_value_is_a_usage_error(name, key, value):
    with pytest.raises(UsageError, match=f"{name}: {key}="):
        VARIANTS[name].predicted((64, 64), FP32, {key: value})


def test_auto_accepts_none_and_the_string_auto():
    tiled = VARIANTS["softmax_tiled"]
    shape = (1048576, 2)
    auto = tiled.predicted(shape, FP32, {"BLOCK_M": None})
    assert tiled.predicted(shape, FP32, {"BLOCK_M": "auto"}) == auto
    assert tiled.predicted(shape, FP32, {"BLOCK_M": "128"}) == tiled.predicted(shape, FP32, {"BLOCK_M": 128})


@pytest.mark.parametrize("name", ["softmax_naive", "softmax_tiled"])
def test_rows_longer_than_a_tile_are_refused_with_a_reason(name):
    variant = VARIANTS[name]
    assert variant.check((4, rows.MAX_TILE), FP32, {}) is None
    reason = variant.check((4, rows.MAX_TILE + 1), FP32, {})
    assert reason is not None and "softmax_online" in reason
    assert VARIANTS["softmax_online"].check((4, rows.MAX_TILE + 1), FP32, {}) is None


def test_tiled_refuses_a_tile_too_big_for_registers():
    reason = VARIANTS["softmax_tiled"].check((4096, 1024), FP32, {"BLOCK_M": 32})
    assert reason is not None and "32x1024" in reason


def test_coalesced_refuses_tiles_smaller_than_its_threads():
    variant = VARIANTS["softmax_column_coalesced"]
    reason = variant.check((64, 64), FP32, {"BLOCK_M": 1, "BLOCK_N": 1})
    assert reason is not None and "smaller than the 128 threads" in reason
    assert variant.check((64, 64), FP32, {"BLOCK_M": 1, "BLOCK_N": 1, "num_warps": 1}) is not None
    assert variant.check((64, 64), FP32, {"BLOCK_M": 4, "BLOCK_N": 32}) is None
    assert variant.check((1, 1), FP32, {}) is None  # auto never picks such a tile


def test_coalesced_refuses_chunks_shorter_than_a_tile_step():
    variant = VARIANTS["softmax_column_coalesced"]
    reason = variant.check((1000, 37), FP32, {"BLOCK_M": 64, "BLOCK_N": 16, "ROWS": 32})
    assert reason is not None and "ROWS=32" in reason
    assert variant.check((1000, 37), FP32, {"BLOCK_M": 64, "BLOCK_N": 16, "ROWS": 64}) is None


def test_every_softmax_variant_states_constraints_and_takes_all_dtypes():
    for name in ROW_VARIANTS + COL_VARIANTS:
        assert VARIANTS[name].constraints
        assert set(VARIANTS[name].dtypes) == {"fp32", "fp16", "bf16"}


# --- traffic models: exact bytes ------------------------------------------------------------------------


MB8 = 8_388_608  # 1048576 x 2 fp32 elements, in bytes


def _pred(name: str, shape, dtype=FP32, **params) -> tuple[int, int]:
    t = VARIANTS[name].predicted(shape, dtype, {**VARIANTS[name].params, **params})
    return t.read, t.write


def test_softmax_minimum_at_the_reference_shape():
    m = OPS["softmax"].minimum((1048576, 2), FP32)
    assert (m.read, m.write) == (MB8, MB8)


def test_naive_model_reproduces_the_16x_load_and_4x_store():
    # 8 useful bytes per row in one 32-byte sector (4x), loaded by each of the 4 warps (4x more);
    # the store is issued once: 32 B per row.
    assert _pred("softmax_naive", (1048576, 2)) == (134_217_728, 33_554_432)
    assert _pred("softmax_naive", (1048576, 2), num_warps=1) == (33_554_432, 33_554_432)
    assert _pred("softmax_naive", (1048576, 2), num_warps=8) == (268_435_456, 33_554_432)


def test_tiled_model_is_at_the_minimum_for_short_rows():
    assert _pred("softmax_tiled", (1048576, 2), BLOCK_M=128) == (MB8, MB8)
    assert _pred("softmax_tiled", (1048576, 2)) == (MB8, MB8)
    assert _pred("softmax_tiled", (1048576, 2), BLOCK_M=128, num_warps=4) == (MB8, MB8)


def test_tiled_model_counts_copies_when_the_tile_is_smaller_than_its_threads():
    # BLOCK_M=1: the (1, 2) tile is the naive kernel's, spread over 4 warps as a 2-D layout.
    assert _pred("softmax_tiled", (1048576, 2), BLOCK_M=1, num_warps=4) == (134_217_728, 33_554_432)


def test_naive_model_with_rows_off_sector_boundaries():
    # N = 36 fp32: 144-byte rows start alternately 0 and 16 bytes into a sector. With 1 warp, BLOCK_N=64
    # is two requests per row: 32 elements (128 B: 4 sectors aligned, 5 at +16) then 4 elements (1).
    assert _pred("softmax_naive", (2, 36), num_warps=1) == (11 * 32, 11 * 32)
    # 4 warps cover 128 elements, twice the 64-element tile: warps 2 and 3 load it again.
    assert _pred("softmax_naive", (2, 36), num_warps=4) == (22 * 32, 11 * 32)


def test_torch_manual_formula():
    m, n, e = 1048576, 2, 4
    assert _pred("torch_manual", (m, n)) == ((5 * m * n + 2 * m) * e, (3 * m * n + 2 * m) * e)
    assert _pred("torch_manual", (m, n)) == (50_331_648, 33_554_432)


def test_looped_models_count_each_pass():
    # BLOCK_N auto = next_pow2(2) = 2: every pass is the naive kernel's 16x load. Online makes one pass
    # with one warp (auto), so no warp loads a copy, but an 8-byte row still moves a 32-byte sector.
    assert _pred("softmax_online", (1048576, 2)) == (33_554_432, 33_554_432)
    assert _pred("softmax_3pass", (1048576, 2)) == (3 * 134_217_728, 33_554_432)
    # 4096 fp32 rows: aligned 16-byte vectors, no waste. Online auto holds the row (one read); with
    # BLOCK_N=1024 it loops (2 reads, the write loop's counted at L1 even when L2 serves it); 3pass: 3.
    mn4 = 4096 * 4096 * 4
    assert _pred("softmax_online", (4096, 4096)) == (mn4, mn4)
    assert _pred("softmax_online", (4096, 4096), BLOCK_N=1024) == (2 * mn4, mn4)
    assert _pred("softmax_3pass", (4096, 4096)) == (3 * mn4, mn4)
    # N == 1: the loops run once at compile time and their loads merge into one.
    assert _pred("softmax_3pass", (1000, 1)) == _pred("softmax_naive", (1000, 1))


def test_online_one_pass_where_the_row_fits_and_two_where_it_loops():
    # One pass (L1 efficiency 1.00) wherever auto holds the row in registers, fp32 and bf16 (16-bit rows
    # up to 16384 elements, fp32 up to 32768).
    for m, n, dtypes in [(32768, 32, (FP32, BF16)), (4096, 4096, (FP32, BF16)), (8192, 8192, (FP32, BF16)),
                         (32768, 4096, (FP32, BF16)), (1823, 781, (FP32, BF16)), (8192, 32768, (FP32,)),
                         (64, 16384, (BF16, FP16))]:
        for dtype in dtypes:
            e = element_size(dtype)
            if n * e % 32 == 0:  # whole sectors per row
                assert _pred("softmax_online", (m, n), dtype) == (m * n * e, m * n * e), (m, n, dtype)
            single = loop.online_config((m, n), dtype)["single"]
            assert single and _pred("softmax_online", (m, n), dtype)[0] == _pred("softmax_online", (m, n),
                                                                                  dtype, BLOCK_N=65536)[0]
    # Rows longer than one block loop: the L1 model counts the second read.
    for m, n, dtypes in [(8192, 65536, (FP32, BF16)), (16384, 131072, (FP32, BF16)),
                         (8192, 32768, (BF16, FP16)), (64, 16400, (BF16,))]:
        for dtype in dtypes:
            mn = m * n * element_size(dtype)
            assert not loop.online_config((m, n), dtype)["single"]
            assert _pred("softmax_online", (m, n), dtype) == (2 * mn, mn)
    # BLOCK_N >= N takes the single-pass path whatever the row length.
    assert _pred("softmax_online", (8192, 32768), BLOCK_N=32768, num_warps=32) == (8192 * 32768 * 4,) * 2


def test_online_grid_and_hints_do_not_change_l1_traffic():
    base = _pred("softmax_online", (64, 100000), BLOCK_N=4096, num_warps=8)
    for programs in (0, 1, 132, 528):
        for hints in (0, 1):
            assert _pred("softmax_online", (64, 100000), BLOCK_N=4096, num_warps=8, programs=programs,
                         evict_hints=hints) == base


def test_online_auto_grid_bounds_rows_in_flight():
    # Looping rows: a persistent grid of one to MAX_PROGRAMS_PER_SM programs per SM, fewer for long rows.
    c = loop.online_config((16384, 131072), FP32, sms=132)
    assert c["programs"] == 132 and c["evict_hints"] == 1 and c["num_warps"] >= 8
    c = loop.online_config((8192, 65536), BF16, sms=132)
    assert 132 <= c["programs"] <= loop.MAX_PROGRAMS_PER_SM * 132
    assert c["programs"] * 65536 * 2 <= max(loop.L2_ROW_BUDGET, 132 * 65536 * 2)
    # One pass: one program per row, no hints.
    c = loop.online_config((4096, 4096), FP32, sms=132)
    assert (c["programs"], c["evict_hints"], c["single"]) == (0, 0, True)
    # 16-bit rows of 16385 to 32768 elements: 8192-element blocks on 16 warps, one program per row
    c = loop.online_config((8192, 32768), BF16, sms=132)
    assert (c["BLOCK_N"], c["num_warps"], c["programs"], c["evict_hints"]) == (8192, 16, 0, 1)


def test_tiled_takes_the_flat_path_for_short_power_of_two_rows_when_m_is_a_multiple_of_16():
    flat = lambda shape, *a: rows.tiled_launch(shape, *a).constexprs["FLAT"]  # noqa: E731
    assert flat((1048576, 2)) and flat((4096, 8)) and flat((64, 4))
    assert not flat((1000003, 2)) and not flat((1048576, 3)) and not flat((1024, 16)) and not flat((1024, 1))
    assert not flat((1024, 2), 1)  # one row per program: the naive tile
    # same bytes either way: whole rows in one contiguous run per program
    assert _pred("softmax_tiled", (1048576, 4), BF16) == (1048576 * 8, 1048576 * 8)


def test_split_model_counts_chunks_slots_and_the_fill():
    # One read and one write of MN; per row and program one read of the row's PARTS_P2 8-byte slots by
    # every warp (words and counters are written by atomics). The groups kernel (lag=0) has a fill
    # kernel set m * PARTS_P2 slots and m counters to EMPTY; the lag kernel (the auto) leaves its words
    # ready for its next launch and fills nothing.
    m, n = 1024, 131072
    mn4 = m * n * 4
    # 4 parts of 32768 on 32 warps: a 4-word slot vector is one sector
    read, write = _pred("softmax_split", (m, n), BLOCK_N=32768, num_warps=32)
    assert (read, write) == (mn4 + m * 4 * 32 * 32, mn4)
    assert _pred("softmax_split", (m, n), BLOCK_N=32768, num_warps=32, lag=0) == (read, mn4 + m * 5 * 8)
    # 16 parts of 8192: 128-byte slot vectors, four sectors per warp request
    read, write = _pred("softmax_split", (m, n), BLOCK_N=8192, num_warps=32)
    assert (read, write) == (mn4 + m * 16 * 32 * 4 * 32, mn4)
    assert _pred("softmax_split", (m, n), BLOCK_N=8192, num_warps=32, lag=0) == (read, mn4 + m * 17 * 8)
    # the grid does not change the bytes (slots are per row); prefetch=1 asks for the groups kernel
    assert _pred("softmax_split", (m, n), programs=64) == _pred("softmax_split", (m, n), programs=1024)
    assert _pred("softmax_split", (m, n), prefetch=1) == _pred("softmax_split", (m, n), lag=0)
    # a row of one part: MN once each way, nothing else, whatever lag says
    assert _pred("softmax_split", (4096, 4096), BF16) == (4096 * 4096 * 2,) * 2
    assert _pred("softmax_split", (4096, 4096), BF16, lag=0) == (4096 * 4096 * 2,) * 2


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape,programs", [((37, 1000), 5), ((4, 300), 9), ((1, 1), 1)],
                         ids=["37x1000-grid5", "4x300-grid9", "1x1"])
def test_split_lag_kernel_one_part_a_row(shape, programs, dtype, device, seed):
    # The lag kernel's tickets, masks and lag, where the interpreter can run it: one part a row, so each
    # program waits only for itself (rows of several parts: the gpu tests). 37 rows on 5 programs; 9
    # programs for 4 rows (tickets past the last row read and write nothing); a row of only -inf gives
    # NaN, as torch.softmax.
    case = _case_seed(seed, "lag", shape, dtype)
    x = _inputs("softmax", shape, dtype, device, case)
    if shape[0] > 1:
        x[0] = float("-inf")
        x[1, ::3] = float("-inf")
    c = split.split_config(shape, dtype, triton.next_power_of_2(shape[1]), 4, programs, lag=1)
    assert (c["parts"], c["programs"]) == (1, min(programs, shape[0]))
    out = split._launch(x, c, lag=True, auto_grid=False)
    atol, rtol = _tol("softmax_split", dtype)
    torch.testing.assert_close(out.double().cpu(), OPS["softmax"].reference(x).cpu(), atol=atol, rtol=rtol,
                               equal_nan=True, msg=lambda m: f"seed={case}: {m}")
    if shape[0] > 1:
        assert out[0].isnan().all() and not out[1:].isnan().any()


def test_split_lag_kernel_leaves_its_words_ready_for_the_next_launch(device, seed):
    # No fill kernel between launches: the part's last ticket resets its counter to -1 and counts the
    # launch in its epoch word, whose parity marks the next launch's slot words (top bit); a new layout
    # gets new words. Three launches of one layout (marks 0, 1, 0), then another layout.
    shape = (37, 1000)
    c = split.split_config(shape, FP32, 1024, 4, 5, lag=1)
    split._LAG_WORDS.clear()
    for launch in range(3):
        case = _case_seed(seed, "words", launch)
        x = _inputs("softmax", shape, FP32, device, case)
        out = split._launch(x, c, lag=True, auto_grid=False)
        torch.testing.assert_close(out.double().cpu(), OPS["softmax"].reference(x).cpu(), atol=1e-6,
                                   rtol=1e-5, msg=f"seed={case}")
        _, words = split._lag_words(x, c)
        slots, counter, epoch = words[:37].cpu(), words[37].item(), words[38].item()
        assert (counter, epoch) == (-1, launch)
        assert ((slots < 0) == (launch % 2 == 1)).all()  # every slot holds this launch's word
    assert len(split._LAG_WORDS) == 1
    x = _inputs("softmax", (5, 1000), FP32, device, seed)
    split._launch(x, {**c, "programs": 2}, lag=True, auto_grid=False)
    _, words = split._lag_words(x, c)
    assert words.numel() == 5 + 2 and words[-1].item() == 0  # new words for 5 rows, one launch counted


def test_split_auto_config():
    c = split.split_config((16384, 131072), FP32, sms=132)
    assert (c["BLOCK_N"], c["num_warps"], c["parts"], c["PARTS_P2"]) == (4096, 4, 32, 32)
    # the same 4096-element chunks for bf16, the lag kernel (no prefetch: it always reads ahead)
    c = split.split_config((16384, 131072), BF16, sms=132, per_sm=9)
    keys = ("BLOCK_N", "num_warps", "parts", "groups", "programs", "prefetch", "lag")
    assert tuple(c[k] for k in keys) == (4096, 4, 32, 37, 1184, 0, 1)
    assert split.split_config((16384, 131072), BF16, prefetch=1)["lag"] == 0  # the groups kernel's option
    # whole groups only, and never more groups than rows
    assert split.split_config((3, 131072), FP32, sms=132, per_sm=4)["programs"] == 3 * 32
    assert split.split_config((10, 100000), FP32, programs=60)["programs"] == 50  # 25 parts: 2 groups
    # a short row is one chunk; a row needing more than MAX_PARTS chunks of 4096 gets bigger chunks
    assert split.split_config((5, 300), FP32)["parts"] == 1
    c = split.split_config((4, 1 << 20), FP32)
    assert c["parts"] <= split.MAX_PARTS and c["BLOCK_N"] == (1 << 20) // split.MAX_PARTS


def test_split_resident_programs_from_registers():
    # the H100 refusals seen in the sweep: 80 registers x 256 threads -> 3 an SM, 88 x 512 -> 1
    assert split.resident_per_sm(80, 8) == 3
    assert split.resident_per_sm(88, 16) == 1
    assert split.resident_per_sm(57, 32) == 1 and split.resident_per_sm(64, 8) == 4
    assert split.resident_per_sm(255, 32) == 0  # would not launch at all


def test_split_refuses_what_it_cannot_run():
    check = VARIANTS["softmax_split"].check
    params = VARIANTS["softmax_split"].params
    reason = check((4, 1 << 24), FP32, params)
    assert reason is not None and "raise BLOCK_N or use softmax_online" in reason
    reason = check((4, 100000), FP32, {**params, "programs": 10})
    assert reason is not None and "fewer than the 25 programs one row needs" in reason
    assert check((4, 100000), FP32, params) is None
    reason = check((4, 100000), FP32, {**params, "lag": 1, "prefetch": 1})
    assert reason is not None and "the lag kernel always reads ahead" in reason
    assert check((4, 100000), FP32, {**params, "lag": 1}) is None
    with pytest.raises(UsageError, match="lag=2 is invalid: it must be an integer from 0 to 1"):
        check((4, 100000), FP32, {**params, "lag": 2})


def test_split_rows_need_a_gpu_in_the_interpreter(device):
    if device != "cpu":
        pytest.skip("the interpreter's refusal")
    with pytest.raises(ValueError, match="Triton interpreter"):
        VARIANTS["softmax_split"].run(torch.randn(3, 300), BLOCK_N=128)


def test_cluster_auto_config():
    cfg = cluster.cluster_config
    # 32 elements a thread on 256 threads, as many blocks as cover the row
    assert cfg((8192, 32768), BF16) == {"per_thread": 32, "threads": 256, "cluster": 4, "min_blocks": 0}
    assert cfg((4096, 4096), BF16) == {"per_thread": 32, "threads": 128, "cluster": 1, "min_blocks": 0}
    assert cfg((10, 5), FP32) == {"per_thread": 32, "threads": 32, "cluster": 1, "min_blocks": 0}
    # 16-bit rows in more than 8 blocks: registers capped for five blocks an SM; fp32 as allocated
    assert cfg((16384, 131072), BF16) == {"per_thread": 32, "threads": 256, "cluster": 16, "min_blocks": 5}
    assert cfg((16384, 131072), FP16)["min_blocks"] == 5
    assert cfg((16384, 131072), FP32) == {"per_thread": 32, "threads": 256, "cluster": 16, "min_blocks": 0}
    assert cfg((8, 131072), BF16, threads=512)["min_blocks"] == 0  # 512 threads: not compiled capped
    # rows not 16-byte aligned take one element a load and spill when capped: as allocated
    assert cfg((8, 131071), BF16) == {"per_thread": 32, "threads": 256, "cluster": 16, "min_blocks": 0}
    assert cfg((8, 131064), FP16)["min_blocks"] == 5  # 131064 x 2 bytes: 16-byte rows
    # past 16 blocks: twice the elements a thread, then twice the threads
    assert cfg((4, 200000), FP32) == {"per_thread": 64, "threads": 256, "cluster": 13, "min_blocks": 0}
    assert cfg((4, 300000), FP32) == {"per_thread": 64, "threads": 512, "cluster": 10, "min_blocks": 0}
    # a given value is kept, the others cover the row
    assert cfg((4, 5000), FP32, threads=64, cluster=4, min_blocks=5) == {
        "per_thread": 32, "threads": 64, "cluster": 4, "min_blocks": 5}
    assert cfg((4, 40000), FP32, per_thread=16) == {"per_thread": 16, "threads": 256, "cluster": 10,
                                                    "min_blocks": 0}


def test_cluster_refuses_what_it_cannot_run():
    check = VARIANTS["softmax_cluster"].check
    params = VARIANTS["softmax_cluster"].params
    reason = check((4, 600000), FP32, dict(params))  # 19 blocks of 512 x 64
    assert reason is not None and "more than 16 blocks" in reason and "softmax_split" in reason
    reason = check((4, 5000), FP32, {**params, "cluster": 2, "threads": 32})  # 2 x 32 x 32 < 5000
    assert reason is not None and "cluster=2" in reason
    reason = check((4, 5000), BF16, {**params, "min_blocks": 5, "per_thread": 64})
    assert reason is not None and "min_blocks=5 is compiled for per_thread=32 on at most 256" in reason
    for bad, why in [({"per_thread": 8}, "per_thread=8 is invalid"),
                     ({"min_blocks": 4}, "min_blocks=4 is invalid: it must be one of 0, 5"),
                     ({"threads": 48}, "threads=48 is invalid"),
                     ({"cluster": 17}, "cluster=17 is invalid: it must be an integer from 1 to 16")]:
        with pytest.raises(UsageError, match=why):
            check((4, 4096), FP32, {**params, **bad})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_cluster_says_why_it_cannot_run_here():
    variant = VARIANTS["softmax_cluster"]
    assert variant.needs_cuda
    reason = variant.check((4, 4096), BF16, dict(variant.params))
    assert reason is not None and "needs a CUDA GPU" in reason


def _cluster_sectors_by_address(m: int, n: int, e: int, c: dict) -> int:
    """Every warp instruction of the kernel, its lanes' byte ranges listed, distinct sectors counted."""
    vb = 16 if (n * e) % 16 == 0 else e
    nvec, per = n * e // vb, -(-c["per_thread"] * e // vb)
    total = 0
    for row in range(m):
        for rank in range(c["cluster"]):
            for k in range(per):
                for warp in range(c["threads"] // 32):
                    first = rank * c["threads"] * per + k * c["threads"] + warp * 32
                    hit = {(row * n * e + j * vb + b) // 32 for j in range(first, min(first + 32, nvec))
                           for b in (0, vb - 1)}
                    total += len(hit)
    return total


@pytest.mark.parametrize("shape,dtype,params", [
    ((7, 1000), FP16, {}),  # 16-byte accesses, rows alternately 0 and 16 bytes into a sector
    ((5, 1001), BF16, {}),  # one element an access: rows start anywhere in a sector
    ((3, 4100), FP32, {"cluster": 3, "threads": 64}),  # a cluster of 3, the last block mostly masked
    ((9, 777), FP32, {"per_thread": 16, "threads": 32}),  # 2 blocks of one warp, scalar accesses
])
def test_cluster_model_counts_every_request(shape, dtype, params):
    full = {**VARIANTS["softmax_cluster"].params, **params}
    c = cluster.cluster_config(shape, dtype, full["per_thread"], full["threads"], full["cluster"])
    want = _cluster_sectors_by_address(*shape, element_size(dtype), c) * 32
    got = VARIANTS["softmax_cluster"].predicted(shape, dtype, full)
    assert (got.read, got.write) == (want, want)


def test_column_models():
    mn = 4096 * 4096
    # Strided: 32 rows of one column per request, each in its own sector: 32 B per element and pass.
    assert _pred("softmax_column_strided", (4096, 4096)) == (2 * 32 * mn, 32 * mn)
    assert _pred("softmax_column_strided", (4096, 4096), BF16) == (2 * 32 * mn, 32 * mn)
    # Coalesced, one chunk (ROWS = M, a single kernel): whole sectors, 2 reads + 1 write of MN.
    assert _pred("softmax_column_coalesced", (4096, 4096), ROWS=4096) == (2 * 4 * mn, 4 * mn)
    assert _pred("softmax_column_coalesced", (4096, 4096), BF16, ROWS=4096) == (2 * 2 * mn, 2 * mn)
    # Auto splits the rows into k = 4 chunks of 1024 (16-column blocks: 256 x 4 = 1024 programs). Each
    # chunk stores a fp32 max and sum per column (2*4*N bytes); each of the k programs of a column block
    # loads all k chunks' partials of its 16 columns (64 B, whole sectors): k * k * 2*4*N bytes.
    k, n = 4, 4096
    for dtype, e in ((FP32, 4), (BF16, 2)):
        launch = col.coalesced_launch((4096, 4096), dtype)
        assert (launch.block_n, launch.rows, launch.n_chunks, launch.grid) == (16, 1024, k, 1024)
        assert _pred("softmax_column_coalesced", (4096, 4096), dtype) == (2 * e * mn + k * k * 2 * 4 * n,
                                                                          e * mn + k * 2 * 4 * n)
    # Strided with 8-byte rows: a 32-row request spans 256 B = 8 sectors, per column and pass.
    m = 1048576
    assert _pred("softmax_column_strided", (m, 2)) == (2 * 2 * (m // 32) * 8 * 32, 2 * (m // 32) * 8 * 32)


@pytest.mark.parametrize("shape", [(7, 3), (33, 17), (5, 100), (64, 48), (3, 1)])
@pytest.mark.parametrize("tile,num_warps,rank1", [
    ((1, 4), 1, True), ((1, 128), 4, True), ((4, 4), 1, False), ((8, 32), 4, False), ((16, 1), 1, True),
    ((32, 8), 2, False),
])
@pytest.mark.parametrize("dtype", [FP32, BF16])
def test_grid_sectors_equals_counting_every_tile(shape, tile, num_warps, rank1, dtype):
    # grid_sectors groups tiles by address mod 32; summing tile_sectors over every tile must agree.
    m, n = shape
    e = element_size(dtype)
    layout = sectors.row_major_tile(*tile, n, e, num_warps, rank1=rank1)
    bm, bn = tile
    loads = stores = 0
    for r0 in range(0, m, bm):
        for c0 in range(0, n, bn):
            valid = (min(bm, m - r0), min(bn, n - c0))
            ld, st = sectors.tile_sectors(layout, n, e, (r0 * n + c0) * e % 32, valid)
            loads, stores = loads + ld, stores + st
    assert sectors.grid_sectors(layout, m, n, e) == (loads, stores)


def test_grid_sectors_is_fast_at_a_million_rows():
    import time

    start = time.perf_counter()
    for shape in [(1048576, 2), (1048576, 1023), (1048573, 37)]:
        for name in ROW_TRITON:
            _pred(name, shape)
    assert time.perf_counter() - start < 5


# --- the model's layouts against the compiler's -----------------------------------------------------------


def _launches():
    return [
        ("naive 1048576x2", rows.naive_launch((1048576, 2), 4), FP32),
        ("naive 1823x781", rows.naive_launch((1823, 781), 4), FP32),
        ("naive 4096x4096 bf16", rows.naive_launch((4096, 4096), 8), BF16),
        ("tiled 1048576x2 BM=128", rows.tiled_launch((1048576, 2), 128, 4), FP32),
        ("tiled 1048576x2 auto", rows.tiled_launch((1048576, 2)), FP32),
        ("tiled 3001x3 fp16", rows.tiled_launch((3001, 3)), FP16),
        ("tiled 8192x8192 bf16", rows.tiled_launch((8192, 8192)), BF16),
        ("tiled 100x1", rows.tiled_launch((100, 1)), FP32),
        ("tiled 1048576x4 bf16 flat", rows.tiled_launch((1048576, 4)), BF16),
        ("tiled 1000003x4 bf16 (M % 16: not flat)", rows.tiled_launch((1000003, 4)), BF16),
        ("tiled 4096x8 BM=8 flat, copies", rows.tiled_launch((4096, 8), 8, 4), FP32),
        ("online 37x1000 BN=128", loop.online_launch((37, 1000), FP32, 128), FP32),
        ("online 4096x4096 one pass", loop.online_launch((4096, 4096), FP32), FP32),
        ("online 1048576x2 one pass", loop.online_launch((1048576, 2), BF16), BF16),
        ("online 8192x32768 one pass 32 warps", loop.online_launch((8192, 32768), FP32, 32768, 32), FP32),
        ("online 16384x131072 looped, hints", loop.online_launch((16384, 131072), BF16, sms=132), BF16),
        ("online 1000x1", loop.online_launch((1000, 1), FP32), FP32),
        ("3pass 4096x4096", loop.three_pass_launch((4096, 4096)), BF16),
        ("3pass 100x1 (loads merge)", loop.three_pass_launch((100, 1)), FP32),
        ("column strided 4096x4096", col.strided_launch((4096, 4096)), FP32),
        ("column strided 1048576x2", col.strided_launch((1048576, 2)), FP16),
        ("column coalesced 4096x4096 one chunk", col.coalesced_launch((4096, 4096), FP32, ROWS=4096), FP32),
        ("column coalesced 1000x37 one chunk", col.coalesced_launch((1000, 37), BF16, 64, 16, 1024), BF16),
        ("column coalesced 1x5 (loads merge)", col.coalesced_launch((1, 5), FP32), FP32),
        ("column coalesced 4096x4096 chunks", col.coalesced_launch((4096, 4096), FP32), FP32),
        ("column coalesced 8192x8192 bf16 chunks", col.coalesced_launch((8192, 8192), BF16), BF16),
        ("column coalesced 1000x37 chunks", col.coalesced_launch((1000, 37), BF16, 64, 16), BF16),
    ]


PTR = {FP32: "*fp32", FP16: "*fp16", BF16: "*bf16"}


def _units(launch, dtype) -> list[tuple[dict, dict]]:
    """Per kernel launch: (compile spec, the model's expectation). The expectation lists, per op kind and
    in program order, (model layout, rows, columns, element bytes) of the matrix each op walks."""
    e = element_size(dtype)
    m, n = launch.shape
    if isinstance(launch, sectors.TileLaunch):
        fn = getattr(launch.kernel, "fn", launch.kernel)
        rank1_dim = 0 if launch.tile[1] == 1 and launch.tile[0] > 1 else 1
        spec = {"kernel": f"{fn.__module__}:{fn.__name__}",
                "args": {"out_ptr": PTR[dtype], "in_ptr": PTR[dtype], **launch.scalars},
                "constexprs": launch.constexprs, "num_warps": launch.num_warps, "rank1_dim": rank1_dim}
        data = (launch.layout(e), m, n, e)
        return [(spec, {"tt.load": [data] * launch.read_passes, "tt.store": [data]})]
    # ColumnLaunch: one kernel, or a stats kernel and a normalize kernel meeting through fp32 partials
    data = (launch.data_layout(e), m, n, e)
    k = launch.n_chunks
    p_store, p_load = (launch.partial_store_layout(), k, n, 4), (launch.partial_load_layout(), k, n, 4)
    expect = ([{"tt.load": [data] * (2 if m > 1 else 1), "tt.store": [data]}] if k == 1 else
              [{"tt.load": [data], "tt.store": [p_store, p_store]},
               {"tt.load": [p_load, p_load, data], "tt.store": [data]}])
    units = []
    for (kernel, ints, const), want in zip(launch.kernels(), expect, strict=True):
        fn = getattr(kernel, "fn", kernel)
        ptrs = {"out_ptr": PTR[dtype], "in_ptr": PTR[dtype], "max_ptr": "*fp32", "sum_ptr": "*fp32"}
        spec = {"kernel": f"{fn.__module__}:{fn.__name__}", "args": {**ptrs, **ints}, "constexprs": const,
                "num_warps": launch.num_warps, "rank1_dim": 1}
        units.append((spec, want))
    return units


@pytest.fixture(scope="module")
def compiled_layouts() -> dict[str, list[dict]]:
    """Every launch of _launches() compiled for sm_90 in one fresh process (this one runs the interpreter)."""
    import ttgir

    labels, specs = [], []
    for label, launch, dtype in _launches():
        for spec, _ in _units(launch, dtype):
            labels.append(label)
            specs.append(spec)
    try:
        found = ttgir.layouts_in_subprocess(specs)
    except RuntimeError as err:
        # no NVIDIA backend in this Triton, or internals moved: nothing to compare against
        if "ModuleNotFoundError" in str(err) or "ImportError" in str(err):
            pytest.skip(f"cannot compile for sm_90 here: {str(err).splitlines()[-1]}")
        raise
    out: dict[str, list[dict]] = {}
    for label, layouts in zip(labels, found, strict=True):
        out.setdefault(label, []).append(layouts)
    return out


@pytest.mark.parametrize("label,launch,dtype", [pytest.param(*c, id=c[0]) for c in _launches()])
def test_model_layouts_match_the_compiled_ttgir(label, launch, dtype, compiled_layouts):
    # Compare sector counts, not layout fields: two layouts that differ only where the tile has one
    # element (or is replicated anyway) move the same sectors. One load per read pass, one store (the
    # split column kernels: partials too), each moving the model's sectors over the matrix it walks.
    for got, (_, want) in zip(compiled_layouts[label], _units(launch, dtype), strict=True):
        for op, index in (("tt.load", 0), ("tt.store", 1)):
            assert len(got[op]) == len(want[op]), f"{op}: compiled {got[op]}"
            for layout, (model, m, n, e) in zip(got[op], want[op], strict=True):
                compiled, modelled = (sectors.grid_sectors(x, m, n, e)[index] for x in (layout, model))
                assert compiled == modelled, f"{op}: compiled {layout}, model {model}"


# --- on the GPU, at real sizes ----------------------------------------------------------------------------


GPU_SHAPES = [(1048576, 2), (4096, 4096), (8192, 8192), (1823, 781), (64, 100000)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [FP32, BF16])
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", ROW_VARIANTS + ["softmax_cluster", "torch_compiled"] + COL_VARIANTS)
def test_gpu_results_match_float64(name, shape, dtype, seed):
    variant = VARIANTS[name]
    if variant.check(shape, dtype, dict(variant.params)) is not None:
        pytest.skip(variant.check(shape, dtype, dict(variant.params)))
    _check(name, shape, dtype, "cuda", seed)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ROW_VARIANTS + ["softmax_cluster"] + COL_VARIANTS)
def test_gpu_infinities_and_huge_values(name, dtype):
    variant = VARIANTS[name]
    x = _along(_hard_rows(dtype, 5000), variant.op).cuda()
    out = variant.run(x)
    assert not out.isnan().any()
    atol, rtol = _tol(name, dtype)
    torch.testing.assert_close(out.double().cpu(), OPS[variant.op].reference(x).cpu(), atol=atol, rtol=rtol)


@pytest.mark.gpu
@pytest.mark.parametrize("params", [{"BLOCK_M": 1}, {"BLOCK_M": 128}, {"BLOCK_M": 2048, "num_warps": 8}])
def test_gpu_tiled_sweep_values(params, seed):
    _check("softmax_tiled", (1048576, 2), FP32, "cuda", seed, params)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [FP32, BF16])
@pytest.mark.parametrize("name,shape,params", [
    ("softmax_online", (64, 32768), {"BLOCK_N": 32768, "num_warps": 32}),  # one pass, 32 values a thread
    ("softmax_online", (300, 131072), {}),  # auto: looped, persistent grid, eviction hints
    ("softmax_online", (100, 30000), {}),  # auto: one pass (fp32), or a program per row looping (bf16)
    ("softmax_online", (300, 20000), {"BLOCK_N": 4096, "programs": 0, "evict_hints": 0}),
    ("softmax_online", (1000, 20000), {"BLOCK_N": 2048, "programs": 7}),  # rows % programs != 0
    # split rows: programs of a row wait for each other (the interpreter cannot run these); the auto
    # for rows of several parts is the lag kernel
    ("softmax_split", (300, 131072), {}),  # auto: 32 parts of 4096 (fp32), 16 of 8192 (bf16)
    ("softmax_split", (257, 40001), {"BLOCK_N": 32768}),  # 2 parts, the second mostly padding
    ("softmax_split", (1000, 20000), {"BLOCK_N": 2048}),  # 10 parts, 13 groups: rows % groups != 0
    ("softmax_split", (33, 100000), {"BLOCK_N": 4096, "num_warps": 4, "programs": 250}),  # 25 parts
    ("softmax_split", (64, 65536), {"BLOCK_N": 8192, "num_warps": 8, "programs": 256}),  # 2 an SM
    # both ways of reading: the next row's chunk before the wait (prefetch) or after the write
    ("softmax_split", (301, 65536), {"BLOCK_N": 4096, "num_warps": 4, "prefetch": 1}),
    ("softmax_split", (301, 65536), {"BLOCK_N": 4096, "num_warps": 4, "prefetch": 0, "lag": 0}),
    ("softmax_split", (1000, 3000), {"programs": 7}),  # one part a row, 1000 % 7 rows left over
    # the groups kernel (lag=0) on the same shapes, and two more for the lag kernel
    ("softmax_split", (300, 131072), {"lag": 0}),
    ("softmax_split", (16384, 4096), {"BLOCK_N": 1024, "lag": 0}),  # 4 parts, many rows a program
    ("softmax_split", (257, 40001), {"BLOCK_N": 32768, "lag": 0}),
    ("softmax_split", (1000, 20000), {"BLOCK_N": 2048, "lag": 0}),
    ("softmax_split", (33, 100000), {"BLOCK_N": 4096, "num_warps": 4, "programs": 250, "lag": 0}),
    ("softmax_split", (64, 65536), {"BLOCK_N": 8192, "num_warps": 8, "programs": 384, "lag": 0}),  # 3 an SM
    ("softmax_split", (16384, 4096), {"BLOCK_N": 1024}),  # lag: 4 parts, many rows a program
    ("softmax_split", (7, 65536), {"BLOCK_N": 4096, "programs": 16}),  # lag: one program a part
    # cluster rows: 1 to 16 blocks a row, 16-byte accesses (N*E % 16 == 0) or one element each (odd N)
    ("softmax_cluster", (300, 131072), {}),  # auto: 16 blocks of 256 x 32 (non-portable cluster), bf16 capped
    ("softmax_cluster", (300, 131072), {"min_blocks": 0}),  # the same as nvcc allocates it
    ("softmax_cluster", (300, 131071), {}),  # auto: 16 blocks, element accesses, not capped
    ("softmax_cluster", (300, 131071), {"min_blocks": 5}),  # the same capped (spills)
    ("softmax_cluster", (257, 40001), {"min_blocks": 5}),  # capped, element accesses
    ("softmax_cluster", (33, 8192), {"cluster": 3, "threads": 128, "min_blocks": 5}),  # capped, 3 blocks
    ("softmax_cluster", (8, 131072), {"per_thread": 64, "threads": 128}),  # 16 blocks, 64 a thread
    ("softmax_cluster", (300, 131072), {"per_thread": 32, "threads": 512}),  # 8 blocks of 512 x 32
    ("softmax_cluster", (257, 40001), {}),  # odd N: element accesses, 5 blocks, the last mostly masked
    ("softmax_cluster", (1000, 3000), {}),  # one block a row (no cluster)
    ("softmax_cluster", (33, 8192), {"cluster": 3, "threads": 128}),  # a cluster of 3
    ("softmax_cluster", (511, 1000), {"cluster": 4, "threads": 64}),  # blocks 1-3 hold only padding
    ("softmax_cluster", (64, 100000), {"per_thread": 16, "threads": 512, "cluster": 13}),  # 13 of 512 x 16
    ("softmax_cluster", (100, 20000), {"per_thread": 16, "threads": 256}),  # 5 blocks
    ("softmax_column_coalesced", (4096, 4096), {"ROWS": 4096}),  # one chunk, one kernel
    ("softmax_column_coalesced", (4099, 1000), {}),  # auto chunks, partial last chunk and block
    ("softmax_column_coalesced", (4096, 4096), {"BLOCK_N": 8, "BLOCK_M": 256, "ROWS": 256}),  # 16 chunks
], ids=lambda v: str(v))
def test_gpu_sweep_paths(name, shape, params, dtype, seed):
    _check(name, shape, dtype, "cuda", seed, params)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ALL)
def test_gpu_split_rows_with_infinities(dtype):
    # 5 parts of 1024: whole chunks of -inf, a chunk holding the only finite value, huge values
    x = _hard_rows(dtype, 5000).cuda()
    out = VARIANTS["softmax_split"].run(x, BLOCK_N=1024, num_warps=4)
    assert not out.isnan().any()
    atol, rtol = _tol("softmax_split", dtype)
    torch.testing.assert_close(out.double().cpu(), OPS["softmax"].reference(x).cpu(), atol=atol, rtol=rtol)
    x = torch.full((3, 5000), -float("inf"), dtype=dtype, device="cuda")
    assert VARIANTS["softmax_split"].run(x, BLOCK_N=1024, num_warps=4).isnan().all()
    # the groups kernel: the same rows
    x = _hard_rows(dtype, 5000).cuda()
    out = VARIANTS["softmax_split"].run(x, BLOCK_N=1024, num_warps=4, lag=0)
    assert not out.isnan().any()
    torch.testing.assert_close(out.double().cpu(), OPS["softmax"].reference(x).cpu(), atol=atol, rtol=rtol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [FP32, BF16])
def test_gpu_split_lag_launches_in_a_row_share_their_words(dtype, seed):
    # Launches of the lag kernel one after another on one stream, without a fill between them: one
    # layout three times (the slot marks alternate), other layouts, then the first again (new words),
    # and on a second stream (its own words); the slots read as a warp-wide vector and as a vector of
    # PARTS_P2 lanes.
    shapes = [(300, 131072)] * 3 + [(64, 65536), (300, 131072), (1000, 20000), (1000, 20000)]
    for i, shape in enumerate(shapes):
        case = _case_seed(seed, "lag-words", i)
        x = _inputs("softmax", shape, dtype, "cuda", case)
        c = split.split_config(shape, dtype, None, None, None, None, loop.sm_count("cuda"), lag=1)
        out = split._launch(x, c, lag=True, auto_grid=True, **({"WIDTH": c["PARTS_P2"]} if i == 6 else {}))
        atol, rtol = _tol("softmax_split", dtype)
        torch.testing.assert_close(out.double().cpu(), OPS["softmax"].reference(x).cpu(), atol=atol,
                                   rtol=rtol, msg=f"{shape} seed={case}")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x = _inputs("softmax", (300, 131072), dtype, "cuda", seed)
        out = VARIANTS["softmax_split"].run(x)
    stream.synchronize()
    atol, rtol = _tol("softmax_split", dtype)
    torch.testing.assert_close(out.double().cpu(), OPS["softmax"].reference(x).cpu(), atol=atol, rtol=rtol)


@pytest.mark.gpu
@pytest.mark.parametrize("min_blocks", [0, 5])
@pytest.mark.parametrize("dtype", ALL)
def test_gpu_cluster_rows_with_infinities_and_unaligned_rows(dtype, min_blocks, seed):
    variant = VARIANTS["softmax_cluster"]
    if variant.check((1, 1), FP32, dict(variant.params)) is not None:
        pytest.skip(variant.check((1, 1), FP32, dict(variant.params)))
    atol, rtol = _tol("softmax_cluster", dtype)
    # 4 blocks of 64 x 32: warps of only -inf, a block holding the only finite value, huge values
    x = _hard_rows(dtype, 5000).cuda()
    out = variant.run(x, cluster=4, threads=64, min_blocks=min_blocks)
    assert not out.isnan().any()

    torch.testing.assert_close(out.double().cpu(), OPS["softmax"].reference(x).cpu(), atol=atol, rtol=rtol)
    x = torch.full((3, 5000), -float("inf"), dtype=dtype, device="cuda")
    assert variant.run(x, cluster=4, threads=64, min_blocks=min_blocks).isnan().all()
    # a NaN makes its row NaN, as torch.softmax (the max skips it, exp does not)
    x = torch.randn(3, 5000, device="cuda").to(dtype)
    x[1, 4321] = float("nan")
    out = variant.run(x, cluster=4, threads=64, min_blocks=min_blocks)
    assert out[1].isnan().all() and not out[[0, 2]].isnan().any()
    # rows 16-byte aligned in length but not in address: one element an access
    case = _case_seed(seed, "cluster-unaligned", dtype)
    buf = _inputs("softmax", (1, 1 + 300 * 4096), dtype, "cuda", case)
    x = buf[0, 1:].view(300, 4096)
    assert x.data_ptr() % 16 != 0
    out = variant.run(x, cluster=2, threads=64, min_blocks=min_blocks)
    torch.testing.assert_close(out.double().cpu(), OPS["softmax"].reference(x).cpu(), atol=atol, rtol=rtol)


@pytest.mark.gpu
def test_gpu_split_refuses_a_grid_that_cannot_be_resident():
    # programs that wait for each other must all fit at once: more than that is an error, not a hang
    x = torch.randn(4096, 65536, device="cuda")
    with pytest.raises(ValueError, match="fit on the GPU at once"):
        VARIANTS["softmax_split"].run(x, BLOCK_N=32768, num_warps=32, programs=100 * 132)


# --- issue 35's spill example: softmax_naive, one warp on 16384-float rows (512 floats a thread) ---------


def test_the_spilling_config_and_its_fix_have_one_global_model():
    v = VARIANTS["softmax_naive"]
    spill, fixed = (v.predicted((2048, 16384), torch.float32, {"num_warps": w}) for w in (1, 16))
    assert spill == fixed  # spills are not in the model: only the local-memory counters see them
    assert spill.read == spill.write == 2048 * 16384 * 4


@pytest.mark.parametrize("num_warps", [1, 16])
def test_one_warp_on_a_16384_row_is_correct(device, num_warps):
    x = torch.randn(2, 16384, generator=torch.Generator().manual_seed(0)).to(device)
    y = VARIANTS["softmax_naive"].run(x, num_warps=num_warps)
    ref = torch.softmax(x.double().cpu(), dim=-1)
    assert torch.allclose(y.double().cpu(), ref, rtol=1e-5, atol=1e-9)


@pytest.mark.gpu
def test_one_warp_spills_and_sixteen_do_not():
    # Triton's own count of what ptxas spilled, for the kernel measured in reports/h100/spills_*
    x = torch.randn(4, 16384, device="cuda")
    spills = {}
    for warps in (1, 16):
        launch = rows.naive_launch(tuple(x.shape), warps)
        compiled = launch.kernel[(launch.grid,)](torch.empty_like(x), x, **launch.scalars,
                                                 **launch.constexprs, num_warps=warps)
        compiled._init_handles()
        spills[warps] = compiled.n_spills
    print(spills)
    assert spills[1] > 0 and spills[16] == 0
