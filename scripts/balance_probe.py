"""Why softmax_split's persistent grid runs long bf16 rows at ~90% of a copy while one program per chunk
streams at ~99.7% (issue 14, split probe rounds 5-7): do some SMs finish their fixed share of chunks
early and idle? Traced timing probes on the GPU.

    python scripts/balance_probe.py OUT.json [--rounds 3] [--shapes 16384x131072] [--chunks 4096/4]
        [--subjects RE]

Results and what they say: reports/bench/2026-11-23-h100-balance-probe (scripts/device_balance_probe.sh).

Every subject is one persistent kernel (as many programs as are resident, whole groups) that walks
chunks of BLOCK_N elements, chunk t = (row t // parts, part t % parts):
  static   chunk pid, pid + programs, ...: the shipped kernel's fixed share (same rows, same groups)
  dyn      each program takes its next chunk from one global counter (an atomic ticket) when done with
           one, so a program on a faster SM takes more chunks
and either normalises each chunk alone (nosync: wrong output, a bound) or exchanges (max, sum) with
the row's other programs as the shipped kernel does (sync). `dyn` with sync cannot deadlock: tickets
are handed out in order to resident programs, so the lowest unfinished row's chunks are all held by
programs that wait only for each other or are taken next by programs that are free.

The `*-lag` subjects (round 2; `*-lag-h*` round 3) are _lag_kernel: one chunk behind, with fixed,
global or per-part tickets (see the kernel's comments); they are not traced. Each stream-kernel program
records its SM (%smid), its start and end (%globaltimer), its chunks, and with sync the time it spent
waiting for its group. Printed per subject: median time and % of a same-size copy; the
spread of the programs' end times; chunks per SM (min, median, max); with sync the mean wait a chunk.
OUT.json keeps every time and the raw traces of the last round.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from split_probe import _exchange, print_rounds  # noqa: E402 (scripts/ is sys.path[0] when run as a script)

from memtraffic.core.ops import parse_shape  # noqa: E402
from memtraffic.kernels import softmax_split as sp  # noqa: E402
from memtraffic.measure.gpu import environment, time_cuda  # noqa: E402

EMPTY = tl.constexpr(-1)


@triton.jit
def _smid(dep):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [dep], dtype=tl.int32, is_pure=False,
                                     pack=1)


@triton.jit
def _now(dep):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def _stream_kernel(out_ptr, in_ptr, slots_ptr, count_ptr, ticket_ptr, trace_ptr, n_rows, n_cols, parts,
                   BLOCK_N: tl.constexpr, PARTS_P2: tl.constexpr, SYNC: tl.constexpr, DYN: tl.constexpr):
    pid = tl.program_id(0)
    t_start = _now(pid)
    n_prog = tl.num_programs(0)
    chunks = tl.cast(n_rows, tl.int64) * parts
    if DYN:  # noqa: SIM108 (constexpr branch)
        t = tl.atomic_add(ticket_ptr, 1, sem="relaxed", scope="gpu") + 1  # tickets start at -1
    else:
        t = tl.cast(pid, tl.int64)
    done = tl.cast(pid, tl.int64) * 0
    waited = tl.cast(pid, tl.int64) * 0
    while t < chunks:
        row64 = t // parts
        part = t % parts
        cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(in_ptr + row64 * n_cols + cols, mask=mask, other=-float("inf"))
        xf = x.to(tl.float32)
        m = tl.max(xf, axis=0)
        shift = tl.where(m == float("-inf"), 0.0, m)
        e = tl.exp(xf - shift)
        s = tl.sum(e, axis=0)
        if SYNC:  # the shipped kernel's exchange (split_probe's copy of it), timed
            w0 = _now(pid)
            mx, total = _exchange(slots_ptr, count_ptr, row64, part, parts, m, s, PARTS_P2, True)
            waited += _now(pid) - w0
        else:
            mx = m
            total = s
        y = e * (tl.exp(shift - mx) / total)
        tl.store(out_ptr + row64 * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
        done += 1
        if DYN:
            t = tl.atomic_add(ticket_ptr, 1, sem="relaxed", scope="gpu") + 1
        else:
            t += n_prog
    rec = trace_ptr + pid * 5
    tl.store(rec, _smid(pid).to(tl.int64))
    tl.store(rec + 1, t_start)
    tl.store(rec + 2, _now(pid))
    tl.store(rec + 3, done)
    tl.store(rec + 4, waited)


def stream(x: torch.Tensor, BLOCK_N: int, num_warps: int, sync: bool, dyn: bool, trace: torch.Tensor | None,
           info: dict) -> torch.Tensor:
    m, n = x.shape
    sms = sp.sm_count(x.device)
    c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sms)
    out = torch.empty_like(x)
    words = torch.full((m * (c["PARTS_P2"] + 1) + 1,), -1, dtype=torch.int64, device=x.device)
    slots, count, ticket = words[:m * c["PARTS_P2"]], words[m * c["PARTS_P2"]:-1], words[-1:]
    meta = {"BLOCK_N": BLOCK_N, "PARTS_P2": c["PARTS_P2"], "SYNC": sync, "DYN": dyn, "num_warps": num_warps}
    if "programs" not in info:
        dummy = torch.empty(5, dtype=torch.int64, device=x.device)
        k = _stream_kernel.warmup(out, x, slots, count, ticket, dummy, m, n, c["parts"], **meta, grid=(1,))
        k._init_handles()
        per_sm = sp.resident_per_sm(k.n_regs, num_warps)
        c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sms, per_sm)
        info.update({"n_regs": k.n_regs, "per_sm": per_sm, "programs": c["programs"], "parts": c["parts"]})
    if trace is None:
        trace = torch.empty(info["programs"] * 5, dtype=torch.int64, device=x.device)
    _stream_kernel[(info["programs"],)](out, x, slots, count, ticket, trace, m, n, c["parts"], **meta)
    return out


@triton.jit
def _take(ticket_ptr, t, part, n_prog, parts, TICKET: tl.constexpr):
    """The chunk after chunk t for this program (counters start at -1; chunks numbered in int32)."""
    if TICKET == 0:
        nxt = t + n_prog
    elif TICKET == 1:
        nxt = (tl.atomic_add(ticket_ptr, 1, sem="relaxed", scope="gpu") + 1).to(tl.int32)
    else:
        nxt = ((tl.atomic_add(ticket_ptr + part, 1, sem="relaxed", scope="gpu") + 1).to(tl.int32) * parts
               + part)
    return nxt


@triton.jit
def _word(m, s):
    """(m, s) as one 64-bit slot word: s in the upper half, m in the lower."""
    return ((s.to(tl.int32, bitcast=True).to(tl.int64) << 32)
            | (m.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF))


@triton.jit
def _hold(e, xf, in_ptr, HOLD: tl.constexpr):
    if HOLD == 0:
        h = e
    elif HOLD == 1:
        h = e.to(in_ptr.dtype.element_ty)
    else:
        h = xf.to(in_ptr.dtype.element_ty)
    return h


@triton.jit
def _lag_kernel(out_ptr, in_ptr, slots_ptr, ticket_ptr, n_rows, n_cols, parts,
                BLOCK_N: tl.constexpr, PARTS_P2: tl.constexpr, TICKET: tl.constexpr, HOLD: tl.constexpr = 0):
    # One chunk behind: a program publishes (m, s) of the chunk it just read, then reads the next chunk
    # and only then waits for the previous chunk's row, whose other programs published a chunk ago.
    # TICKET: 0 chunks pid, pid + programs, ... (fixed); 1 one global counter of chunks (a program can
    # get two chunks of one row and then wait for itself: a probe of timing only); 2 a counter of rows
    # per part (a program keeps its part, pid % parts, and takes that part's next row: never two
    # chunks of one row). Rows are whole chunks (n_cols a multiple of BLOCK_N): no masks. A ticket
    # past the last chunk reads the last chunk again (once a program) and writes nothing.
    # HOLD: what is held through the wait: 0 e in fp32; 1 e rounded to the input's dtype (half the
    # registers for bf16, one more rounding); 2 the input as read, exp taken again at the write.
    # A timing probe: rows of -inf are not handled (the shipped kernel's shifts are left out).
    # (Written up from small kernels that Triton 3.6 compiles: an earlier form, with tl.where on the
    # ticket and the publish under `if`, crashed its RemoveLayoutConversions pass.)
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    part = pid % parts
    chunks = n_rows * parts  # < 2**31 (checked on the host)
    lanes = tl.arange(0, BLOCK_N)
    ids = tl.arange(0, PARTS_P2)
    live = ids < parts
    t = _take(ticket_ptr, pid - n_prog, part, n_prog, parts, TICKET)
    tc = tl.minimum(t, chunks - 1)
    off = (tc // parts).to(tl.int64) * n_cols + (tc % parts) * BLOCK_N
    xf = tl.load(in_ptr + off + lanes).to(tl.float32)
    shift = tl.max(xf, axis=0)
    e = tl.exp(xf - shift)
    s = tl.sum(e, axis=0)
    h = _hold(e, xf, in_ptr, HOLD)
    tl.atomic_xchg(slots_ptr + (tc // parts).to(tl.int64) * PARTS_P2 + tc % parts, _word(shift, s),
                   mask=t < chunks, sem="relaxed", scope="gpu")
    while t < chunks:
        tn = _take(ticket_ptr, t, part, n_prog, parts, TICKET)
        tnc = tl.minimum(tn, chunks - 1)
        off_n = (tnc // parts).to(tl.int64) * n_cols + (tnc % parts) * BLOCK_N
        x = tl.load(in_ptr + off_n + lanes)  # in flight while this program waits
        slots = slots_ptr + (t // parts).to(tl.int64) * PARTS_P2 + ids
        w = tl.load(slots, mask=live, other=0, volatile=True)
        while tl.max((w == EMPTY).to(tl.int32), axis=0) > 0:
            w = tl.load(slots, mask=live, other=0, volatile=True)
        ms = tl.where(live, (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True), -float("inf"))
        ss = tl.where(live, (w >> 32).to(tl.int32).to(tl.float32, bitcast=True), 0.0)
        mx = tl.max(ms, axis=0)
        total = tl.sum(ss * tl.exp(ms - mx), axis=0)
        if HOLD == 2:
            y = tl.exp(h.to(tl.float32) - mx) / total
        else:
            y = h.to(tl.float32) * (tl.exp(shift - mx) / total)
        tl.store(out_ptr + off + lanes, y.to(out_ptr.dtype.element_ty))
        t = tn
        off = off_n
        xf = x.to(tl.float32)
        shift = tl.max(xf, axis=0)
        e = tl.exp(xf - shift)
        s = tl.sum(e, axis=0)
        h = _hold(e, xf, in_ptr, HOLD)
        tl.atomic_xchg(slots_ptr + (tnc // parts).to(tl.int64) * PARTS_P2 + tnc % parts, _word(shift, s),
                       mask=tn < chunks, sem="relaxed", scope="gpu")


def lag(x: torch.Tensor, BLOCK_N: int, num_warps: int, ticket: int, info: dict,
        hold: int = 0) -> torch.Tensor:
    m, n = x.shape
    assert n % BLOCK_N == 0 and m * (n // BLOCK_N) < 2**31, "the lag probe takes whole chunks, int32 tickets"
    sms = sp.sm_count(x.device)
    c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sms)
    out = torch.empty_like(x)
    words = torch.full((m * c["PARTS_P2"] + c["parts"],), -1, dtype=torch.int64, device=x.device)
    slots, counters = words[:m * c["PARTS_P2"]], words[m * c["PARTS_P2"]:]
    meta = {"BLOCK_N": BLOCK_N, "PARTS_P2": c["PARTS_P2"], "TICKET": ticket, "HOLD": hold,
            "num_warps": num_warps}
    if "programs" not in info:
        k = _lag_kernel.warmup(out, x, slots, counters, m, n, c["parts"], **meta, grid=(1,))
        k._init_handles()
        per_sm = sp.resident_per_sm(k.n_regs, num_warps)
        c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sms, per_sm)
        info.update({"n_regs": k.n_regs, "per_sm": per_sm, "programs": c["programs"], "parts": c["parts"]})
    _lag_kernel[(info["programs"],)](out, x, slots, counters, m, n, c["parts"], **meta)
    return out


def summarise(trace: list[list[int]]) -> dict:
    """End-time spread of the programs (us after the first start), chunks per SM, mean wait a chunk."""
    t0 = min(r[1] for r in trace)
    ends = sorted((r[2] - t0) / 1e3 for r in trace)
    per_sm: dict[int, int] = {}
    for r in trace:
        per_sm[r[0]] = per_sm.get(r[0], 0) + r[3]
    counts = sorted(per_sm.values())
    chunks = sum(r[3] for r in trace)
    return {"end_us_min": ends[0], "end_us_med": statistics.median(ends), "end_us_max": ends[-1],
            "sms": len(per_sm), "sm_chunks_min": counts[0], "sm_chunks_med": statistics.median(counts),
            "sm_chunks_max": counts[-1], "wait_ns_per_chunk": sum(r[4] for r in trace) / max(1, chunks)}


CONFIGS: dict[str, dict] = {
    "static-nosync": {"sync": False, "dyn": False},
    "dyn-nosync": {"sync": False, "dyn": True},
    "static-sync": {"sync": True, "dyn": False},
    "dyn-sync": {"sync": True, "dyn": True},
    # round 2: one chunk behind (publish, read the next chunk, then wait for the previous row)
    "static-lag": {"ticket": 0},
    "dyn-lag": {"ticket": 1},
    "part-lag": {"ticket": 2},
    # round 3: what part-lag holds through the wait (HOLD 1: e in the input's dtype, 2: the input)
    "part-lag-h1": {"ticket": 2, "hold": 1},
    "part-lag-h2": {"ticket": 2, "hold": 2},
}


def call(label: str, x: torch.Tensor, chunk: str, trace: torch.Tensor | None, info: dict) -> torch.Tensor:
    kw = CONFIGS[label]
    bn, nw = (int(v) for v in chunk.split("/"))
    if "ticket" in kw:
        return lag(x, bn, nw, kw["ticket"], info, kw.get("hold", 0))
    return stream(x, bn, nw, kw["sync"], kw["dyn"], trace, info)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default="16384x131072")
    parser.add_argument("--chunks", default="4096/4", help="BLOCK_N/num_warps, comma-separated")
    parser.add_argument("--subjects", default=".", help="regex over CONFIGS labels")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    for shape_s in args.shapes.split(","):
        shape = parse_shape(shape_s)
        for dtype in (torch.bfloat16, torch.float32):
            key = f"{shape_s} {str(dtype).removeprefix('torch.')}"
            times: dict[str, list[float]] = {}
            info: dict[str, dict] = {}
            traces: dict[str, list] = {}
            for r in range(args.rounds):
                x = torch.randn(shape, dtype=dtype, device="cuda")
                src = torch.empty(x.numel() * x.element_size(), dtype=torch.uint8, device="cuda")
                dst = torch.empty_like(src)
                calls = {"copy": lambda dst=dst, src=src: dst.copy_(src),
                         "shipped": lambda x=x: sp.softmax_split(x)}
                for chunk in args.chunks.split(","):
                    for label in CONFIGS:
                        if re.search(args.subjects, label):
                            i = info.setdefault(f"{label}-{chunk}", {})
                            calls[f"{label}-{chunk}"] = (lambda x=x, label=label, chunk=chunk, i=i:
                                                         call(label, x, chunk, None, i))
                for label, fn in calls.items():
                    try:
                        t = time_cuda(fn, budget_s=0.3).median_ns
                        if label not in ("copy", "shipped") and r == args.rounds - 1:
                            tr = torch.zeros(info[label]["programs"] * 5, dtype=torch.int64, device="cuda")
                            name, chunk = label.rsplit("-", 1)
                            out = call(name, x, chunk, tr, info[label])
                            torch.cuda.synchronize()
                            if CONFIGS[name].get("sync", True):
                                ref = torch.softmax(x[:64].double(), dim=-1)
                                info[label]["max_abs_err"] = (out[:64].double() - ref).abs().max().item()
                            if "ticket" not in CONFIGS[name]:  # the lag kernel is not traced
                                traces[label] = tr.view(-1, 5).tolist()
                                info[label].update(summarise(traces[label]))
                    except Exception as exc:  # one subject's failure must not lose the others
                        info.setdefault(label, {})["error"] = str(exc)[:300]
                        continue
                    times.setdefault(label, []).append(t)
                del x, src, dst
                torch.cuda.empty_cache()
            print_rounds(key, args.rounds, times, info)
            results[key] = {"times_ns": times, "info": info, "traces": traces}
    args.out.write_text(json.dumps({"environment": environment(), "configs": CONFIGS,
                                    "results": results}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
