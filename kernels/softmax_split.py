"""Row softmax for rows too long for one program's registers, still reading and writing each element once.

softmax_online reads a long row twice and relies on L2 to keep it between the reads; at 16384x131072 it
does not (reports/h100/long_rows_16384x131072). softmax_split splits each row into `parts` chunks of up
to BLOCK_N elements, each held by one program in registers, and the programs of a row exchange their
(max, sum) through global memory: each publishes (m_p, s_p = sum exp(x - m_p)) as one 64-bit word in its
slot of the row (slots start EMPTY; a word is written once, so a word read is final), waits until the
row's slots are full, combines them (M = max m_p, S = sum s_p * exp(m_p - M)) and writes its chunk,
exp(x - m_p) * exp(m_p - M) / S. Two kernels:

- the lag kernel (lag=1, the auto for rows of several parts): each program keeps one part and takes that
  part's rows from a counter per part; it publishes the chunk it holds, reads the chunk of its next row,
  and only then waits for the held row and writes it, so a read is in flight while it waits. It waits
  by reading the row's slots (as a vector of at least a warp's 32 lanes, SLOT_WIDTH, which takes fewer
  registers than a narrower one) until every word is this launch's. e is packed to the output dtype by
  an asm statement the compiler may not move past the wait, which keeps bf16/fp16 chunks at half the
  registers of fp32 ones. It leaves its words ready for its next launch on the same stream: each part's
  last ticket resets the part's counter and counts the launch in the part's epoch word, whose parity is
  the top bit of the next launch's slot words (sums are >= 0, so the bit is free). Only a new layout of
  rows and parts, or a new stream, gets new words, filled once.
- the groups kernel (lag=0): a persistent grid of groups of `parts` programs; group g takes rows g,
  g + groups, ...; each program counts itself in on the row's counter and spins until its group is in.
  A fill kernel writes its slots and counters before each launch. prefetch=1 reads the next row's chunk
  before the wait (more registers, fewer programs an SM).

Bytes per row of N elements of E bytes: N*E read and N*E written once; the exchange adds a read of the
row's 8-byte slots by each warp of each program (from L2). The lag kernel's polls read the slots again,
which no model counts: its measured L1 loads sit above the model while DRAM reads stay at the minimum
(reports/h100/split_lag_16384x131072, reports/h100/split_8192x32768_bf16). A row of one chunk needs no
exchange. What is left of the gap to a copy is the programs of a row waiting for each other, which
Triton lets them do only through global memory (no cluster shared memory); softmax_cluster (CUDA C++)
exchanges through distributed shared memory instead. The README's "Long rows at
copy speed" gives the timings; what was tried and measured is in reports/bench/ (2026-11-23-h100-gaps
and earlier) and the git history.

Programs that wait for each other must all be resident at once: the grid is checked against the
compiled kernel's occupancy before launch, so a grid too large for the GPU is an error, not a hang; the
auto grid is as many programs as fit. The Triton interpreter runs programs one after another, so there
a row can only be one part.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import triton
import triton.language as tl

from memtraffic.host.gpu import needs_capability
from memtraffic.vocab.ops import Shape, Traffic, dtype_name, element_size
from memtraffic.vocab.variant import Variant

from . import sectors
from ._params import int_range, optional, power_of_two, resolve_params
from .softmax_online import sm_count
from .softmax_rows import contiguous_2d

DEFAULTS: dict[str, Any] = {"BLOCK_N": None, "num_warps": None, "programs": None, "prefetch": None,
                            "lag": None}
_RULES = {"BLOCK_N": optional(power_of_two(1, 65536)), "num_warps": optional(power_of_two(1, 32)),
          "programs": optional(int_range(1, 1 << 20)), "prefetch": optional(int_range(0, 1)),
          "lag": optional(int_range(0, 1))}
CHUNK = 4096  # auto chunk: elements per program, whatever the dtype
VALUES_PER_THREAD = 32  # auto num_warps: each thread holds this many elements of the chunk
CHUNK_MAX = 32768  # largest auto chunk (32 warps: 32 values a thread, as softmax_online's one pass)
MAX_PARTS = 64  # programs per row; rows longer than CHUNK_MAX * MAX_PARTS: use softmax_online
SLOT_WIDTH = 32  # the lag kernel reads a row's slots as a vector of at least a warp's lanes (_row_max_sum)
# A slot not yet written: both halves all ones. A published word's upper half is the sum, an arithmetic
# result, never 0xFFFFFFFF (GPU arithmetic's NaN is 0x7FFFFFFF), so no published word equals it.
EMPTY = tl.constexpr(-1)


@triton.jit
def _chunk_stats(x):
    """(m, shift, e, s) of one chunk: its max, the shift used (0 for a chunk of only -inf or padding, so
    that e = 0, not exp(nan)), e = exp(x - shift) and s = sum e."""
    xf = x.to(tl.float32)
    m = tl.max(xf, axis=0)
    shift = tl.where(m == float("-inf"), 0.0, m)
    e = tl.exp(xf - shift)
    return m, shift, e, tl.sum(e, axis=0)


@triton.jit
def _publish(slots_ptr, count_ptr, row64, part, m, s, valid, PARTS_P2: tl.constexpr, mark=0):
    """Publish (m, s) as one 8-byte word in this part's slot of the row, then count in on the row's
    counter (count_ptr None: no counter). mark: 0, or the launch's top bit (1 << 63, an int64): a slot
    holds this launch's word once its top bit is the mark's (a sum is >= 0, so its sign bit is free).
    Both atomics are relaxed: a release would be a fence (MEMBAR.GPU) waiting for this program's stores
    of its last row; readers find the data in the slot itself, not through the counter's ordering.
    valid: None, or False to publish nothing (a ticket past the last row)."""
    word = (((s.to(tl.int32, bitcast=True) & 0x7FFFFFFF).to(tl.int64) << 32)
            | (m.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF) | mark)
    tl.atomic_xchg(slots_ptr + row64 * PARTS_P2 + part, word, mask=valid, sem="relaxed", scope="gpu")
    if count_ptr is not None:
        tl.atomic_add(count_ptr + row64, tl.full((), 1, tl.int64), mask=valid, sem="relaxed", scope="gpu")


@triton.jit
def _row_max_sum(slots_ptr, count_ptr, row64, parts, PARTS_P2: tl.constexpr, WIDTH: tl.constexpr,
                 mark=0):
    """Wait until the row's `parts` programs have published, then return the row's (M, S). With a
    counter, spin on it first; without (count_ptr None), read the slots until every word's top bit is
    the mark's (see _publish; EMPTY's is 1, so with mark 0 a slot is ready once written). The slots are
    read as a vector of WIDTH >= PARTS_P2 lanes, those past `parts` masked: with WIDTH 32, a warp's
    lanes, the lag kernel takes fewer registers than with a narrower vector, which Triton replicates
    across the warp (Triton 3.6, sm_90, 4096 on 4 warps: 56 against 64 a thread for bf16, 96 against 110
    for fp32; one more program an SM)."""
    if count_ptr is not None:
        # a compare-and-swap that never swaps (counts start at -1, are >= -1): an atomic, not a load, so
        # that it moves no load bytes however long it spins
        never = tl.full((), -2, tl.int64)
        arrived = tl.atomic_cas(count_ptr + row64, never, never, sem="relaxed", scope="gpu")
        while arrived < parts - 1:
            arrived = tl.atomic_cas(count_ptr + row64, never, never, sem="relaxed", scope="gpu")
    # read PARTS_P2 words (every warp: a small tensor is replicated per warp), volatile: from L2, never a
    # stale L1 line; again while a word is not this launch's (with a counter: a relaxed count seen
    # before a word)
    ids = tl.arange(0, WIDTH)
    live = ids < parts
    slots = slots_ptr + row64 * PARTS_P2 + ids
    w = tl.load(slots, mask=live, other=0, volatile=True)
    while tl.max((live & ((w ^ mark) < 0)).to(tl.int32), axis=0) > 0:
        w = tl.load(slots, mask=live, other=0, volatile=True)
    ms = tl.where(live, (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True), -float("inf"))
    ss = tl.where(live, ((w >> 32) & 0x7FFFFFFF).to(tl.int32).to(tl.float32, bitcast=True), 0.0)
    mx = tl.max(ms, axis=0)
    return mx, tl.sum(ss * tl.exp(ms - tl.where(mx == float("-inf"), 0.0, mx)), axis=0)


@triton.jit
def _softmax_split_kernel(out_ptr, in_ptr, slots_ptr, count_ptr, n_rows, n_cols, parts,
                          BLOCK_N: tl.constexpr, PARTS_P2: tl.constexpr, SYNC: tl.constexpr,
                          PREFETCH: tl.constexpr):
    pid = tl.program_id(0)
    group = pid // parts
    part = pid % parts
    n_groups = tl.num_programs(0) // parts
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    if PREFETCH:
        # read this program's chunk of its first row (BLOCK_N elements); later chunks one row ahead
        x = tl.load(in_ptr + tl.cast(group, tl.int64) * n_cols + cols, mask=mask, other=-float("inf"))
    for row in range(group, n_rows, n_groups):
        row64 = tl.cast(row, tl.int64)  # a plain int in the interpreter, a tensor when compiled
        if not PREFETCH:
            # read this program's chunk of the row (BLOCK_N elements)
            x = tl.load(in_ptr + row64 * n_cols + cols, mask=mask, other=-float("inf"))
        m, shift, e, s = _chunk_stats(x)  # e kept for the write: one exp per element, not two
        if SYNC:
            _publish(slots_ptr, count_ptr, row64, part, m, s, None, PARTS_P2)
        if PREFETCH:
            # read the next row's chunk now (BLOCK_N elements), so that it is in flight while this
            # program waits for its group (past the last row: every lane masked, nothing read)
            nxt = row + n_groups
            x = tl.load(in_ptr + tl.cast(nxt, tl.int64) * n_cols + cols,
                        mask=cols < tl.where(nxt < n_rows, n_cols, 0), other=-float("inf"))
        if SYNC:
            mx, total = _row_max_sum(slots_ptr, count_ptr, row64, parts, PARTS_P2, PARTS_P2)
        else:
            mx = m
            total = s
        # write this chunk (BLOCK_N elements): exp(x - M) / S = e * exp(shift - M) / S. A row of only
        # -inf gives NaN (exp(0 - -inf) / 0 * 0), as torch.softmax.
        y = e * (tl.exp(shift - mx) / total)
        tl.store(out_ptr + row64 * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _held(e, dtype: tl.constexpr, ASM: tl.constexpr):
    """e rounded to the input's dtype, to be held through a wait. For 16-bit dtypes with ASM, pairs are
    packed by an asm statement with side effects: the compiler may not sink it past the wait (a plain
    .to(), it did: the pack moved to the write and the wait held 32 fp32 registers, not 16 words)."""
    if ASM and dtype == tl.bfloat16:
        h = tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,r,r", [e], dtype=tl.bfloat16,
                                      is_pure=False, pack=2)
    elif ASM and dtype == tl.float16:
        h = tl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,r,r", [e], dtype=tl.float16,
                                      is_pure=False, pack=2)
    else:
        h = e.to(dtype)
    return h


@triton.jit
def _draw(taken_ptr, part, valid):
    """The part's next row: its counter's old value + 1 (counters rest at -1). valid False: no draw."""
    return (tl.atomic_add(taken_ptr + part, 1, mask=valid, sem="relaxed", scope="gpu") + 1).to(tl.int32)


@triton.jit
def _softmax_lag_kernel(out_ptr, in_ptr, slots_ptr, taken_ptr, n_rows, n_cols, parts,
                        BLOCK_N: tl.constexpr, PARTS_P2: tl.constexpr, WIDTH: tl.constexpr,
                        ASM: tl.constexpr):
    # One chunk behind, rows from a counter per part (lag=1). A program keeps its part, pid % parts,
    # and takes that part's next row from taken_ptr[part] whenever it is done with one, so faster SMs
    # take more rows. It publishes (m, s) of the chunk it holds, reads the chunk of its next row, and
    # only then waits for the held chunk's row: the read is in flight through the wait, and the row's
    # other programs published a chunk ago. No cycle of waits: a program never holds two chunks of one
    # row, and the lowest row not yet published is held only by programs that wait for lower rows,
    # which are published (all programs resident: the host checks). A ticket past the last row reads
    # nothing (every lane masked) and publishes nothing. The wait reads the row's slots until every word
    # is this launch's: spinning on a counter with compare-and-swap, as the groups kernel does, ran
    # 16384x131072 bf16 at 69% of a copy, polling at 97% (H100, reports/bench/2026-11-23-h100-lag-probe);
    # the polls' extra reads stay in L1/L2.
    # The launch leaves its words ready for the next one on the same stream, so that no fill kernel
    # runs before it: the part's last ticket resets the counter, and the part's epoch word
    # (taken_ptr[parts + part], starting at -1) counts launches; its parity gives the top bit of this
    # launch's slot words (the mark), so the last launch's words read as not yet written.
    # (Shaped so that Triton 3.6 compiles it: slot addresses of clamped rows, rows carried as int32;
    # other forms crashed its RemoveLayoutConversions pass.)
    pid = tl.program_id(0)
    part = pid % parts
    groups = tl.num_programs(0) // parts
    epoch = tl.load(taken_ptr + parts + part, volatile=True)
    mark = ((epoch & 1) ^ 1) << 63  # this launch's top bit of its slot words
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    # the first draw waits for the epoch word (a mask on it, always true: epochs are >= -1), so that no
    # program of the part can draw the last ticket and count the launch before this read is served
    row = _draw(taken_ptr, part, epoch > -2)
    # read this program's chunk of its first row (BLOCK_N elements)
    x = tl.load(in_ptr + row.to(tl.int64) * n_cols + cols, mask=cols < tl.where(row < n_rows, n_cols, 0),
                other=-float("inf"))
    m, shift, e, s = _chunk_stats(x)
    # held through the wait in the input's dtype: 16-bit values pack two to a register, so a thread
    # holds 16 words, not 32 fp32 (one more rounding, within an ulp) and more programs, and more
    # reads in flight, fit on an SM
    h = _held(e, in_ptr.dtype.element_ty, ASM)
    _publish(slots_ptr, None, tl.minimum(row, n_rows - 1).to(tl.int64), part, m, s, row < n_rows, PARTS_P2,
             mark)
    while row < n_rows:
        nxt = _draw(taken_ptr, part, None)
        # read the next row's chunk (BLOCK_N elements): in flight while this program waits
        x = tl.load(in_ptr + nxt.to(tl.int64) * n_cols + cols,
                    mask=cols < tl.where(nxt < n_rows, n_cols, 0), other=-float("inf"))
        mx, total = _row_max_sum(slots_ptr, None, row.to(tl.int64), parts, PARTS_P2, WIDTH, mark)
        # write the held chunk (BLOCK_N elements), as the groups kernel does
        y = h.to(tl.float32) * (tl.exp(shift - mx) / total)
        tl.store(out_ptr + row.to(tl.int64) * n_cols + cols, y.to(out_ptr.dtype.element_ty),
                 mask=cols < n_cols)
        row = nxt
        m, shift, e, s = _chunk_stats(x)
        h = _held(e, in_ptr.dtype.element_ty, ASM)
        _publish(slots_ptr, None, tl.minimum(row, n_rows - 1).to(tl.int64), part, m, s, row < n_rows,
                 PARTS_P2, mark)
    # row is this program's last ticket, its first past the last row. Each program draws exactly one
    # such ticket, so the part's last (n_rows + groups - 1) is drawn after every program of the part
    # has drawn its own, and read its epoch word before: reset the counter, count the launch.
    last = row == n_rows + groups - 1
    tl.atomic_xchg(taken_ptr + part, -1, mask=last, sem="relaxed", scope="gpu")
    tl.atomic_add(taken_ptr + parts + part, 1, mask=last, sem="relaxed", scope="gpu")


def split_config(shape: Shape, dtype: torch.dtype, BLOCK_N: int | None = None,
                 num_warps: int | None = None, programs: int | None = None, prefetch: int | None = None,
                 sms: int = 2, per_sm: int = 1, lag: int | None = None) -> dict[str, int]:
    """Every auto (None) parameter filled in, plus parts (programs per row) and groups (rows in flight).

    Auto (H100 sweeps of 2026-11-23, reports/bench/2026-11-23-h100-r3/sweeps): 4096-element chunks on
    4 warps (32 values a thread) in both dtypes; at 16384x131072 bf16 they beat 2048 on 2 warps, 8192 on
    8 and 16384 on 16 (3.09 ms against 3.32, 3.53 and 3.29). Chunks double while a row would need more
    than MAX_PARTS programs, and a short row is one chunk. No prefetch (see the module's docstring).
    programs: as many as the GPU keeps resident (per_sm on each of sms), rounded down to whole groups (a
    group is `parts` programs on one row), one group per row at most. lag: auto 1 (the lag kernel for
    rows of several parts), or 0 (the groups kernel) when prefetch=1 is asked for."""
    m, n = shape
    if BLOCK_N is None:
        BLOCK_N = min(triton.next_power_of_2(n), CHUNK)
        while triton.cdiv(n, BLOCK_N) > MAX_PARTS and BLOCK_N < CHUNK_MAX:
            BLOCK_N *= 2
    parts = triton.cdiv(n, BLOCK_N)
    if num_warps is None:
        num_warps = min(32, max(1, BLOCK_N // (32 * VALUES_PER_THREAD)))
    if programs is None:
        programs = max(per_sm * sms, parts)
    groups = max(1, min(m, programs // parts))
    if lag is None:
        lag = 0 if prefetch == 1 else 1  # prefetch=1 asks for the groups kernel
    if prefetch is None:
        prefetch = 0
    return {"BLOCK_N": BLOCK_N, "num_warps": num_warps, "programs": groups * parts, "parts": parts,
            "groups": groups, "PARTS_P2": triton.next_power_of_2(parts), "prefetch": prefetch, "lag": lag}


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def resident_per_sm(n_regs: int, num_warps: int) -> int:
    """Programs of 32*num_warps threads using n_regs registers each that an SM holds at once (H100/A100:
    2048 threads, 65536 registers, allocated per warp in units of 256)."""
    threads = 32 * num_warps
    regs_per_warp = -(-max(1, n_regs) * 32 // 256) * 256
    return max(0, min(2048 // threads, 65536 // (regs_per_warp * num_warps), 32))


def softmax_split(x: torch.Tensor, BLOCK_N: int | None = None, num_warps: int | None = None,
                  programs: int | None = None, prefetch: int | None = None,
                  lag: int | None = None) -> torch.Tensor:
    """softmax(x, dim=-1) with each row split over a group of programs that exchange (max, sum).
    None = auto for every parameter (see split_config)."""
    x = contiguous_2d(x)
    m, n = x.shape
    c = split_config((m, n), x.dtype, BLOCK_N, num_warps, programs, prefetch, sm_count(x.device), lag=lag)
    if c["parts"] > 1 and _interpreted():
        raise ValueError(f"softmax_split: {c['parts']} programs per row wait for each other, which the "
                         "Triton interpreter (one program at a time) cannot run; use BLOCK_N >= N or a GPU")
    return _launch(x, c, lag=c["lag"] == 1 and c["parts"] > 1, auto_grid=programs is None)


def _fill_words(m: int, c: dict[str, int], lag: bool) -> int:
    """8-byte words a launch of rows of several parts needs, all starting EMPTY (-1): m * PARTS_P2 slots,
    then m counters (groups kernel), or one counter and one epoch word a part (lag kernel)."""
    return m * c["PARTS_P2"] + (2 * c["parts"] if lag else m)


def _workspace(x: torch.Tensor, c: dict[str, int], lag: bool) -> torch.Tensor:
    """A launch's words, all EMPTY (-1), filled by one kernel (none for a groups launch of one part a
    row, which needs no words)."""
    sync = lag or c["parts"] > 1
    return torch.full((_fill_words(x.shape[0], c, lag) if sync else 0,), EMPTY.value, dtype=torch.int64,
                      device=x.device)


# The lag kernel's words, kept per device and stream: a launch leaves them ready for the next launch of
# the same layout (rows, PARTS_P2, parts) on that stream, so only a new layout costs a fill kernel.
# Launches on one stream run one after another; each stream has its own words.
_LAG_WORDS: dict[tuple[Any, ...], tuple[tuple[int, int, int], torch.Tensor]] = {}


def _lag_words(x: torch.Tensor, c: dict[str, int]) -> tuple[tuple[Any, ...], torch.Tensor]:
    """(cache key, words) for a lag launch on x: the cached words when the layout matches, else new."""
    stream = torch.cuda.current_stream(x.device).cuda_stream if x.device.type == "cuda" else 0
    key = (str(x.device), stream)
    layout = (x.shape[0], c["PARTS_P2"], c["parts"])
    hit = _LAG_WORDS.get(key)
    if hit is None or hit[0] != layout:
        hit = _LAG_WORDS[key] = (layout, _workspace(x, c, True))
    return key, hit[1]


def _launch(x: torch.Tensor, c: dict[str, int], lag: bool, auto_grid: bool,
            words: torch.Tensor | None = None, **knobs: Any) -> torch.Tensor:
    """Run the groups kernel (lag False) or the lag kernel on x with split_config's c; on a GPU an auto
    grid becomes as many whole groups as the compiled kernel keeps resident. words: _workspace's words
    (None: the lag kernel's words kept for this stream, or, for the groups kernel, filled here by one more
    kernel). knobs: more launch options (e.g. Triton's maxnreg)."""
    m, n = x.shape
    out = torch.empty_like(x)
    sync = lag or c["parts"] > 1  # a groups row of one part needs no slots, no counters, no fill kernel
    key = None
    if words is None and lag:
        key, words = _lag_words(x, c)
    elif words is None:
        words = _workspace(x, c, lag)
    slots, rest = words[:m * c["PARTS_P2"]], words[m * c["PARTS_P2"]:]
    if lag:
        kernel = _softmax_lag_kernel
        args = (out, x, slots, rest, m, n, c["parts"])
        meta = {"BLOCK_N": c["BLOCK_N"], "PARTS_P2": c["PARTS_P2"], "WIDTH": max(SLOT_WIDTH, c["PARTS_P2"]),
                "ASM": not _interpreted(), **knobs}
    else:
        kernel = _softmax_split_kernel
        args = (out, x, slots, rest, m, n, c["parts"])
        meta = {"BLOCK_N": c["BLOCK_N"], "PARTS_P2": c["PARTS_P2"], "SYNC": sync, "PREFETCH": c["prefetch"]}
    meta["num_warps"] = c["num_warps"]
    if x.device.type == "cuda":
        compiled = kernel.warmup(*args, **meta, grid=(1,))
        compiled._init_handles()  # loads the binary: n_regs is known from here on
        sms = sm_count(x.device)
        per_sm = resident_per_sm(compiled.n_regs, c["num_warps"])
        if auto_grid:
            c = {**c, **split_config((m, n), x.dtype, c["BLOCK_N"], c["num_warps"], None, c["prefetch"], sms,
                                     per_sm, c["lag"])}
        if sync and c["programs"] > per_sm * sms:
            raise ValueError(f"softmax_split: {c['programs']} programs wait for each other but only "
                             f"{per_sm * sms} fit on the GPU at once ({compiled.n_regs} registers a thread): "
                             "lower programs")
    try:
        kernel[(c["programs"],)](*args, **meta)
    except BaseException:
        _LAG_WORDS.pop(key, None)  # a launch that did not finish may leave its words anywhere
        raise
    return out


def _traffic(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> Traffic:
    p = resolve_params("softmax_split", DEFAULTS, params, _RULES)
    m, n = shape
    c = split_config(shape, dtype, p["BLOCK_N"], p["num_warps"], p["programs"], p["prefetch"], lag=p["lag"])
    e = element_size(dtype)
    # The chunks walk each row in (1, BLOCK_N) tiles, the sectors of softmax_online's loop, read once.
    layout = sectors.row_major_tile(1, c["BLOCK_N"], n, e, c["num_warps"], rank1=True)
    ld, st = sectors.grid_sectors(layout, m, n, e)
    if c["parts"] == 1:  # no slots, no counters, no fill kernel
        return Traffic(read=ld * sectors.SECTOR, write=st * sectors.SECTOR)
    # Slots, per row and program: one read of the row's PARTS_P2 8-byte words by every warp, in one
    # aligned sector while PARTS_P2 <= 4 (a row's slots start at a multiple of 8 * PARTS_P2 bytes),
    # else PARTS_P2 * 8 / 32 sectors; a second read happens only when a count arrives before a word,
    # which the model leaves out. Words and counters are written by atomics only, which L1 counts apart
    # from loads and stores. The lag kernel reads its slots again until none is EMPTY (it has no counter):
    # the model counts one read, a lower bound, the polls vary with the wait (16384x131072 bf16: 5.51 GB
    # of L1 loads against 4.83 GB modelled, ncu on the H100, 2026-11-23); its tickets past the last row
    # read nothing (every lane masked). Its one read of the epoch word per warp and program (a sector
    # each, about 150 KB for a full H100 grid) depends on the grid and is left out too.
    slot_ld = m * c["parts"] * c["num_warps"] * max(1, c["PARTS_P2"] * 8 // sectors.SECTOR)
    # groups kernel: torch.full, one fill kernel writing the slots and counters (_fill_words), in whole
    # sectors. The lag kernel leaves its words ready for its next launch: no fill once per layout.
    fill_st = 0 if c["lag"] == 1 else triton.cdiv(8 * _fill_words(m, c, False), sectors.SECTOR)
    return Traffic(read=(ld + slot_ld) * sectors.SECTOR, write=(st + fill_st) * sectors.SECTOR)


def _check(shape: Shape, dtype: torch.dtype, params: dict[str, Any]) -> str | None:
    p = resolve_params("softmax_split", DEFAULTS, params, _RULES)
    c = split_config(shape, dtype, p["BLOCK_N"], p["num_warps"], p["programs"], p["prefetch"], lag=p["lag"])
    if c["parts"] > MAX_PARTS:
        return (f"softmax_split: N={shape[1]} needs {c['parts']} programs per row (at most {MAX_PARTS}); "
                "raise BLOCK_N or use softmax_online")
    if p["programs"] is not None and p["programs"] < c["parts"]:
        return (f"softmax_split: programs={p['programs']} is fewer than the {c['parts']} programs one row "
                "needs")
    if c["lag"] and c["prefetch"]:
        return "softmax_split: prefetch=1 is the groups kernel's (lag=0); the lag kernel always reads ahead"
    if c["lag"] and dtype in (torch.float16, torch.bfloat16) and not _interpreted():
        return needs_capability(f"softmax_split's lag kernel for {dtype_name(dtype)}", (8, 0),
                                "it packs pairs with cvt.rn.f16x2/bf16x2.f32 inline PTX")
    return None


def _run(x: torch.Tensor, **params: Any) -> torch.Tensor:
    return softmax_split(x, **resolve_params("softmax_split", DEFAULTS, params, _RULES))


SOFTMAX_SPLIT = Variant(
    name="softmax_split",
    op="softmax",
    description="Triton, each row split over programs that hold their chunk in registers and exchange "
    "(max, sum) through global memory with relaxed atomics, taking rows from a counter per part one chunk "
    "behind: one read and one write of long rows",
    run=_run,
    predicted=_traffic,
    params=dict(DEFAULTS),
    constraints=f"any MxN with N <= {MAX_PARTS} * BLOCK_N; BLOCK_N: power of two or auto "
    f"({CHUNK}-element chunks, up to {CHUNK_MAX} for long rows); num_warps: power of two "
    "or auto; programs: grid size (whole groups, all resident) or auto (all that fit); prefetch: 0/1 or "
    "auto (0): the groups kernel reads the next row's chunk before waiting; lag: 0/1 or auto (1): for rows "
    "of more than one part, 1 runs the lag kernel (rows from a counter per part, one chunk behind), 0 the "
    "groups kernel; more than one part per row needs a GPU",
    check=_check,
)
