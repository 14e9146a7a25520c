"""Where softmax_split loses time at 16384x131072 (issue 14): timing probes of the shipped kernel and of
changes to it, beside a same-size copy, several rounds (buffers allocated anew in each).

    python scripts/split_probe.py OUT.json [--rounds 4] [--shapes 16384x131072,8192x32768] [--subjects RE]

Results and what they say: reports/bench/2026-11-23-h100-split-probe (rounds 3-4 timed a CUDA C++
cluster kernel, softmax_cluster, with this script at commits 27c7b99 and 8f42a88; it was not kept).

Subjects (each with the chunk size and warps given in CONFIGS):
  copy       torch copy_ of the same bytes (the bench's baseline)
  shipped    memtraffic.kernels.softmax_split as it is
  nosync     the shipped kernel with SYNC=False: no exchange at all (wrong output; a lower bound that
             says what the waiting costs)
  hold       the probe kernel in the shipped kernel's way: e = exp(x - m) held in registers through the wait
  reread     nothing held: after the wait the chunk is read again (from L2, where it was a moment ago)
             and exp taken again, so a program needs few registers and more of them fit on an SM
  stash      e written to the output before the wait and read back after it (from L2), one exp
  flatnosync one program per chunk of every row (no persistent loop), no exchange (wrong output)
  ticket     one program per chunk, exchanging (max, sum) like the shipped kernel; programs take tickets
             (an atomic counter) for their chunk so that none waits for a program that cannot start
  dyn        the shipped kernel with rows taken from a counter per part, not dealt out in a fixed stride
  loop       nothing held either, but each pass walks the chunk in SUB-element tiles, with NS stages of
             Triton's software pipelining (loads in flight in shared memory, not registers); cap: at
             most that many programs an SM, to keep the chunks between their two reads within L2
Prints per subject the median time over rounds and its % of the copy's median; OUT.json keeps every time.
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

from memtraffic.core.ops import parse_shape  # noqa: E402
from memtraffic.kernels import softmax_split as sp  # noqa: E402
from memtraffic.measure import gpu  # noqa: E402
from memtraffic.measure.gpu import environment, time_cuda  # noqa: E402


@triton.jit
def _exchange(slots_ptr, count_ptr, row64, part, parts, m, s, PARTS_P2: tl.constexpr, COUNTER: tl.constexpr):
    """The shipped groups kernel's exchange: publish (m, s) in this part's slot, count in and wait on the
    counter (COUNTER) or poll the slots alone, and return the row's (max, sum)."""
    if COUNTER:
        sp._publish(slots_ptr, count_ptr, row64, part, m, s, None, PARTS_P2)
        mx, total = sp._row_max_sum(slots_ptr, count_ptr, row64, parts, PARTS_P2)
    else:
        sp._publish(slots_ptr, None, row64, part, m, s, None, PARTS_P2)
        mx, total = sp._row_max_sum(slots_ptr, None, row64, parts, PARTS_P2)
    return mx, total


@triton.jit
def _probe_kernel(out_ptr, in_ptr, slots_ptr, count_ptr, n_rows, n_cols, parts,
                  BLOCK_N: tl.constexpr, PARTS_P2: tl.constexpr, COUNTER: tl.constexpr,
                  MODE: tl.constexpr, SUB: tl.constexpr, NS: tl.constexpr):
    pid = tl.program_id(0)
    group = pid // parts
    part = pid % parts
    n_groups = tl.num_programs(0) // parts
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    for row in range(group, n_rows, n_groups):
        row64 = tl.cast(row, tl.int64)
        if MODE == 3:  # nothing held: loop over the chunk in SUB-element tiles (pipelined, NS stages)
            m = tl.full((), float("-inf"), tl.float32)
            s = tl.full((), 0.0, tl.float32)
            for k in tl.range(0, BLOCK_N, SUB, num_stages=NS):
                c = part * BLOCK_N + k + tl.arange(0, SUB)
                xt = tl.load(in_ptr + row64 * n_cols + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
                mn = tl.maximum(m, tl.max(xt, axis=0))
                sh = tl.where(mn == float("-inf"), 0.0, mn)
                s = s * tl.exp(m - sh) + tl.sum(tl.exp(xt - sh), axis=0)
                m = mn
        else:
            x = tl.load(in_ptr + row64 * n_cols + cols, mask=mask, other=-float("inf"))
            xf = x.to(tl.float32)
            m = tl.max(xf, axis=0)
            shift = tl.where(m == float("-inf"), 0.0, m)
            e = tl.exp(xf - shift)
            s = tl.sum(e, axis=0)
        if MODE == 2:  # stash e in the output (L2), read it back after the wait
            tl.store(out_ptr + row64 * n_cols + cols, e.to(out_ptr.dtype.element_ty), mask=mask)
        mx, total = _exchange(slots_ptr, count_ptr, row64, part, parts, m, s, PARTS_P2, COUNTER)
        if MODE == 0:  # e held in registers through the wait (the shipped kernel)
            y = e * (tl.exp(shift - mx) / total)
        elif MODE == 1:  # read x again (from L2: read a moment ago) and take exp again
            x2 = tl.load(in_ptr + row64 * n_cols + cols, mask=mask, other=-float("inf"))
            y = tl.exp(x2.to(tl.float32) - mx) / total
        elif MODE == 2:
            e2 = tl.load(out_ptr + row64 * n_cols + cols, mask=mask, other=0.0)
            y = e2.to(tl.float32) * (tl.exp(shift - mx) / total)
        if MODE == 3:
            for k in tl.range(0, BLOCK_N, SUB, num_stages=NS):
                c = part * BLOCK_N + k + tl.arange(0, SUB)
                xt = tl.load(in_ptr + row64 * n_cols + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
                tl.store(out_ptr + row64 * n_cols + c, (tl.exp(xt - mx) / total).to(out_ptr.dtype.element_ty),
                         mask=c < n_cols)
        else:
            tl.store(out_ptr + row64 * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _flat_kernel(out_ptr, in_ptr, slots_ptr, count_ptr, ticket_ptr, n_cols, parts,
                 BLOCK_N: tl.constexpr, PARTS_P2: tl.constexpr, SYNC: tl.constexpr, SPEC: tl.constexpr):
    # One program per (row, part), no persistent loop: the hardware starts a new program whenever one
    # ends. Programs wait for their row's group, so a program must not wait for one that cannot start:
    # each takes a ticket (an atomic counter, from -1) and works on chunk `ticket` of the rows in order.
    # Every program of a lower ticket is running or done, and those of the same row with higher tickets
    # start as soon as a program ends; with at least `parts` programs resident, some row always completes.
    # SPEC: the ticket's round trip (an atomic on one word) would delay every program's first load, so
    # the chunk of the program's own index is read at the same time, and read again only when the
    # ticket differs (programs mostly start in index order).
    pid = tl.program_id(0).to(tl.int64)
    if SYNC:  # noqa: SIM108 (a constexpr branch: the atomic is compiled in or out)
        t = tl.atomic_add(ticket_ptr, 1, sem="relaxed", scope="gpu") + 1
    else:
        t = pid
    if SPEC:
        cols = (pid % parts) * BLOCK_N + tl.arange(0, BLOCK_N)
        x = tl.load(in_ptr + (pid // parts) * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    row64 = t // parts
    part = t % parts
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    if SPEC:
        if t != pid:
            x = tl.load(in_ptr + row64 * n_cols + cols, mask=mask, other=-float("inf"))
    else:
        x = tl.load(in_ptr + row64 * n_cols + cols, mask=mask, other=-float("inf"))
    xf = x.to(tl.float32)
    m = tl.max(xf, axis=0)
    shift = tl.where(m == float("-inf"), 0.0, m)
    e = tl.exp(xf - shift)
    s = tl.sum(e, axis=0)
    if SYNC:
        mx, total = _exchange(slots_ptr, count_ptr, row64, part, parts, m, s, PARTS_P2, True)
    else:
        mx = m
        total = s
    y = e * (tl.exp(shift - mx) / total)
    tl.store(out_ptr + row64 * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _dyn_kernel(out_ptr, in_ptr, slots_ptr, count_ptr, next_ptr, n_rows, n_cols, parts,
                BLOCK_N: tl.constexpr, PARTS_P2: tl.constexpr):
    # The shipped persistent kernel, but rows are not dealt out in a fixed stride: each part has a
    # counter (from -1) and a program takes its part's next row when it is done with one, so a program
    # on a busier SM takes fewer rows. A row's part p is held by whichever program of part p took it;
    # all programs are resident and every part's programs take rows in order, so the lowest row held
    # always completes.
    pid = tl.program_id(0)
    part = pid % parts
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    row64 = tl.atomic_add(next_ptr + part, 1, sem="relaxed", scope="gpu") + 1
    while row64 < n_rows:
        x = tl.load(in_ptr + row64 * n_cols + cols, mask=mask, other=-float("inf"))
        xf = x.to(tl.float32)
        m = tl.max(xf, axis=0)
        shift = tl.where(m == float("-inf"), 0.0, m)
        e = tl.exp(xf - shift)
        s = tl.sum(e, axis=0)
        mx, total = _exchange(slots_ptr, count_ptr, row64, part, parts, m, s, PARTS_P2, True)
        y = e * (tl.exp(shift - mx) / total)
        tl.store(out_ptr + row64 * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
        row64 = tl.atomic_add(next_ptr + part, 1, sem="relaxed", scope="gpu") + 1


def dyn(x: torch.Tensor, BLOCK_N: int, num_warps: int, info: dict | None = None) -> torch.Tensor:
    """The persistent kernel with rows taken from a counter per part (as many whole groups as fit)."""
    m, n = x.shape
    c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sp.sm_count(x.device))
    out = torch.empty_like(x)
    words = torch.full((m * (c["PARTS_P2"] + 1) + c["parts"],), -1, dtype=torch.int64, device=x.device)
    slots = words[:m * c["PARTS_P2"]]
    count = words[m * c["PARTS_P2"]:m * (c["PARTS_P2"] + 1)]
    nxt = words[m * (c["PARTS_P2"] + 1):]
    meta = {"BLOCK_N": BLOCK_N, "PARTS_P2": c["PARTS_P2"], "num_warps": num_warps}
    k = _dyn_kernel.warmup(out, x, slots, count, nxt, m, n, c["parts"], **meta, grid=(1,))
    k._init_handles()
    per_sm = sp.resident_per_sm(k.n_regs, num_warps)
    c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sp.sm_count(x.device), per_sm)
    if info is not None:
        info.update({"n_regs": k.n_regs, "per_sm": per_sm, "programs": c["programs"], "parts": c["parts"]})
    _dyn_kernel[(c["programs"],)](out, x, slots, count, nxt, m, n, c["parts"], **meta)
    return out


def flat(x: torch.Tensor, BLOCK_N: int, num_warps: int, sync: bool, spec: bool = False, maxnreg: int = 0,
         info: dict | None = None) -> torch.Tensor:
    """One program per chunk of every row (m * parts programs), ticketed when they exchange (max, sum);
    spec: read the chunk of the program's own index while the ticket comes; maxnreg: cap registers."""
    m, n = x.shape
    c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sp.sm_count(x.device))
    out = torch.empty_like(x)
    words = torch.full((m * (c["PARTS_P2"] + 1) + 1,), -1, dtype=torch.int64, device=x.device)
    slots, count, ticket = words[:m * c["PARTS_P2"]], words[m * c["PARTS_P2"]:-1], words[-1:]
    meta = {"BLOCK_N": BLOCK_N, "PARTS_P2": c["PARTS_P2"], "SYNC": sync, "SPEC": spec, "num_warps": num_warps}
    if maxnreg:
        meta["maxnreg"] = maxnreg
    if info is not None and "n_regs" not in info:
        k = _flat_kernel.warmup(out, x, slots, count, ticket, n, c["parts"], **meta, grid=(1,))
        k._init_handles()
        per_sm = sp.resident_per_sm(k.n_regs, num_warps)
        if sync and per_sm * sp.sm_count(x.device) < c["parts"]:
            raise ValueError(f"only {per_sm} programs an SM: a row's {c['parts']} would not all be resident")
        info.update({"n_regs": k.n_regs, "per_sm": per_sm, "programs": m * c["parts"], "parts": c["parts"]})
    _flat_kernel[(m * c["parts"],)](out, x, slots, count, ticket, n, c["parts"], **meta)
    return out


def probe(x: torch.Tensor, BLOCK_N: int, num_warps: int, counter: bool, mode: int, SUB: int = 0,
          NS: int = 1, cap: int | None = None, info: dict | None = None) -> torch.Tensor:
    """One call of the probe kernel with as many whole groups as are resident (at most `cap` programs an
    SM). `info` gets the compiled kernel's registers, shared memory and programs."""
    m, n = x.shape
    c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sp.sm_count(x.device))
    out = torch.empty_like(x)
    words = torch.full((m * (c["PARTS_P2"] + 1),), -1, dtype=torch.int64, device=x.device)
    slots, count = words[:m * c["PARTS_P2"]], words[m * c["PARTS_P2"]:]
    meta = {"BLOCK_N": BLOCK_N, "PARTS_P2": c["PARTS_P2"], "COUNTER": counter, "MODE": mode,
            "SUB": SUB or BLOCK_N, "NS": NS, "num_warps": num_warps}
    k = _probe_kernel.warmup(out, x, slots, count, m, n, c["parts"], **meta, grid=(1,))
    k._init_handles()
    per_sm = sp.resident_per_sm(k.n_regs, num_warps)
    smem = k.metadata.shared
    if smem:
        per_sm = min(per_sm, (227 * 1024) // smem)
    if cap:
        per_sm = min(per_sm, cap)
    c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sp.sm_count(x.device), per_sm)
    if info is not None:
        info.update({"n_regs": k.n_regs, "shared": smem, "programs": c["programs"], "parts": c["parts"]})
    _probe_kernel[(c["programs"],)](out, x, slots, count, m, n, c["parts"], **meta)
    return out


def nosync(x: torch.Tensor, BLOCK_N: int, num_warps: int) -> torch.Tensor:
    """The shipped kernel with the exchange compiled out (SYNC=False): each chunk normalised alone."""
    m, n = x.shape
    c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sp.sm_count(x.device))
    out = torch.empty_like(x)
    dummy = torch.empty(1, dtype=torch.int64, device=x.device)
    meta = {"BLOCK_N": BLOCK_N, "PARTS_P2": c["PARTS_P2"], "SYNC": False, "PREFETCH": 0,
            "num_warps": num_warps}
    k = sp._softmax_split_kernel.warmup(out, x, dummy, dummy, m, n, c["parts"], **meta, grid=(1,))
    k._init_handles()
    per_sm = sp.resident_per_sm(k.n_regs, num_warps)
    c = sp.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sp.sm_count(x.device), per_sm)
    sp._softmax_split_kernel[(c["programs"],)](out, x, dummy, dummy, m, n, c["parts"], **meta)
    return out


def max_rel_err(out: torch.Tensor, x: torch.Tensor, rows: int = 512) -> float:
    """max |out - ref| / max |ref| against softmax in float64, a few rows at a time (a 16384x131072
    float64 copy would not fit beside the inputs)."""
    err = scale = 0.0
    for i in range(0, x.shape[0], rows):
        ref = torch.softmax(x[i:i + rows].double(), dim=-1)
        err = max(err, (out[i:i + rows].double() - ref).abs().max().item())
        scale = max(scale, ref.abs().max().item())
    return err / scale


# label: probe() arguments. Round 1 (commit bbf1a37) also had poll (no counter: 92.5% of copy at
# 16384x131072 bf16) and hold16 (e held as bf16 pairs: 92.5%); the shipped kernel 91.6%, nosync 89.7%.
CONFIGS: dict[str, dict] = {
    "shipped": {},
    "nosync-4096/4": {"BLOCK_N": 4096, "num_warps": 4},
    "hold-4096/4": {"BLOCK_N": 4096, "num_warps": 4, "counter": True, "mode": 0},
    "reread-4096/4": {"BLOCK_N": 4096, "num_warps": 4, "counter": True, "mode": 1},
    "reread-8192/8": {"BLOCK_N": 8192, "num_warps": 8, "counter": True, "mode": 1},
    "stash-4096/4": {"BLOCK_N": 4096, "num_warps": 4, "counter": True, "mode": 2},
    "loop-8192/4-1024x1": {"BLOCK_N": 8192, "num_warps": 4, "counter": True, "mode": 3, "SUB": 1024, "NS": 1},
    "loop-8192/4-1024x3": {"BLOCK_N": 8192, "num_warps": 4, "counter": True, "mode": 3, "SUB": 1024, "NS": 3},
    "loop-16384/4-2048x3": {"BLOCK_N": 16384, "num_warps": 4, "counter": True, "mode": 3, "SUB": 2048,
                            "NS": 3},
    "loop-16384/8-2048x4-cap4": {"BLOCK_N": 16384, "num_warps": 8, "counter": True, "mode": 3, "SUB": 2048,
                                 "NS": 4, "cap": 4},
    # round 5: one program per chunk, no persistent loop (flat), with the exchange (ticketed) or without
    "flatnosync-4096/4": {"BLOCK_N": 4096, "num_warps": 4, "sync": False},
    "ticket-4096/4": {"BLOCK_N": 4096, "num_warps": 4, "sync": True},
    "flatnosync-8192/8": {"BLOCK_N": 8192, "num_warps": 8, "sync": False},
    "ticket-8192/8": {"BLOCK_N": 8192, "num_warps": 8, "sync": True},
    "ticket-2048/2": {"BLOCK_N": 2048, "num_warps": 2, "sync": True},
    "ticket-8192/4": {"BLOCK_N": 8192, "num_warps": 4, "sync": True},
    # round 6: rows taken from a counter per part; the shipped kernel on 8 programs an SM exactly
    "dyn-4096/4": {"BLOCK_N": 4096, "num_warps": 4},
    "dyn-8192/8": {"BLOCK_N": 8192, "num_warps": 8},
    "shipped-p1056": {"programs": 1056},
    # round 7: the ticket's latency hidden (spec), registers capped (r: maxnreg)
    "ticketspec-4096/4": {"BLOCK_N": 4096, "num_warps": 4, "sync": True, "spec": True},
    "ticketspec-4096/4-r48": {"BLOCK_N": 4096, "num_warps": 4, "sync": True, "spec": True, "maxnreg": 48},
    "ticket-4096/4-r48": {"BLOCK_N": 4096, "num_warps": 4, "sync": True, "maxnreg": 48},
    "ticketspec-8192/8-r48": {"BLOCK_N": 8192, "num_warps": 8, "sync": True, "spec": True, "maxnreg": 48},
    "loop-32768/8-4096x3-cap2": {"BLOCK_N": 32768, "num_warps": 8, "counter": True, "mode": 3, "SUB": 4096,
                                 "NS": 3, "cap": 2},
}


def print_rounds(key: str, rounds: int, times: dict[str, list[float]], info: dict[str, dict]) -> None:
    """Per subject: the median time over rounds, its % of the copy's median, the range, what info holds
    (n_regs, errors, ...); then each subject that failed in a round, with its error."""
    copy = statistics.median(times["copy"])
    print(f"{key}: median of {rounds} rounds (us, % of copy's median {copy / 1e3:.1f} us)")
    for label, t in times.items():
        med = statistics.median(t)
        extra = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in info.get(label, {}).items())
        print(f"  {label:22s} {med / 1e3:9.1f}  {100 * copy / med:6.1f}%  "
              f"[{min(t) / 1e3:.1f}-{max(t) / 1e3:.1f}] {extra}", flush=True)
    for label, i in info.items():
        if "error" in i:
            print(f"  {label}: error {i['error']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--shapes", default="16384x131072,8192x32768")
    parser.add_argument("--subjects", default=".", help="regex: time only the CONFIGS labels it finds")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    for shape_s in args.shapes.split(","):
        shape = parse_shape(shape_s)
        for dtype in (torch.bfloat16, torch.float32):
            key = f"{shape_s} {str(dtype).removeprefix('torch.')}"
            times: dict[str, list[float]] = {}
            info: dict[str, dict] = {}
            for r in range(args.rounds):
                x = torch.randn(shape, dtype=dtype, device="cuda")
                src = torch.empty(x.numel() * x.element_size(), dtype=torch.uint8, device="cuda")
                dst = torch.empty_like(src)
                calls = {"copy": lambda dst=dst, src=src: dst.copy_(src)}
                for label, kw in CONFIGS.items():
                    if not re.search(args.subjects, label):
                        continue
                    if label.startswith("shipped"):
                        calls[label] = lambda x=x, kw=kw: sp.softmax_split(x, **kw)
                    elif label.startswith("dyn"):
                        i = info.setdefault(label, {})
                        calls[label] = lambda x=x, kw=kw, i=i: dyn(x, **kw, info=i)
                    elif label.startswith("nosync"):
                        calls[label] = lambda x=x, kw=kw: nosync(x, **kw)
                    elif label.startswith(("flat", "ticket")):
                        i = info.setdefault(label, {})
                        calls[label] = lambda x=x, kw=kw, i=i: flat(x, **kw, info=i)
                    else:
                        i = info.setdefault(label, {})
                        calls[label] = lambda x=x, kw=kw, i=i: probe(x, **kw, info=i)
                for label, fn in calls.items():
                    try:
                        if r == 0 and label != "copy" and not label.startswith(("nosync", "flatnosync")):
                            info.setdefault(label, {})["max_rel_err"] = max_rel_err(fn(), x)
                        t = time_cuda(fn, budget_s=0.3).median_ns
                    except Exception as exc:  # one subject's failure must not lose the others
                        info.setdefault(label, {})["error"] = str(exc)[:200]
                        continue
                    times.setdefault(label, []).append(t)
                del x, src, dst
                torch.cuda.empty_cache()
            print_rounds(key, args.rounds, times, info)
            results[key] = {"times_ns": times, "info": info}
    args.out.write_text(json.dumps({"environment": environment(), "configs": CONFIGS, "results": results,
                                    "flush_bytes": gpu._L2_FLUSH_BYTES}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
