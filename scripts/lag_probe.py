"""Why softmax_split's lag kernel (lag=1) runs 16384x131072 bf16 at 69% of a copy while it runs
8192x32768 bf16 at 96% (H100, 2026-11-23, scripts/device_lag_round.sh): timing probes of the lag
kernel with one thing changed at a time, beside the groups kernel and a same-size copy.

    python scripts/lag_probe.py OUT.json [--rounds 3] [--shapes 16384x131072,8192x32768] [--dtypes bf16,fp32]
        [--subjects RE] [--once SUBJECT,...]

Subjects (lag kernel: 4096-element chunks on 4 warps, as softmax_split's auto):
  groups       softmax_split(lag=0), the groups kernel
  lag          softmax_split(lag=1) as it is (calls 2-3 in reports/bench/2026-11-23-h100-lag-probe ran it
               as first written: waiting by spinning on the row's counter, like `probe`; since 79d82fe it
               polls its slots, like `poll`)
  probe        this script's kernel waiting by compare-and-swap on the row's counter
  lag-pN       `probe` with N programs an SM (fewer programs a part share the part's counter and rows)
  poll         waits by reading the row's slots until none is EMPTY (programs still count in, but no
               compare-and-swap spin; the slot reads then vary with the wait, so bytes are not exact)
  sleep        spins on the counter with a 256 ns nanosleep between tries (less atomic traffic at L2)
  cpoll        polls the counter with volatile loads (one 8-byte word a warp a try, not an atomic)
  static       rows dealt out in a fixed stride (row g, g + groups, ...: no ticket atomic; the next
               row's address is known before the wait, so its read does not wait for an atomic first)
Prints per subject the median time over rounds and its % of the copy's median; OUT.json keeps every time.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from split_probe import print_rounds  # noqa: E402 (scripts/ is sys.path[0] when run as a script)

from memtraffic.core.ops import parse_shape  # noqa: E402
from memtraffic.kernels import softmax_split as sp  # noqa: E402
from memtraffic.measure.gpu import environment, time_cuda  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@triton.jit
def _sleep(dep):
    return tl.inline_asm_elementwise("nanosleep.u32 256; mov.u32 $0, $1;", "=r,r", [dep], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _wait(slots_ptr, count_ptr, row64, parts, PARTS_P2: tl.constexpr, WAIT: tl.constexpr):
    """The row's (M, S): WAIT 0 as the groups kernel (counter spin), 1 poll the slots, 2 counter spin with
    sleeps, 3 poll the counter with volatile loads; then softmax_split's read of the slots."""
    if WAIT == 2:
        never = tl.full((), -2, tl.int64)
        arrived = tl.atomic_cas(count_ptr + row64, never, never, sem="relaxed", scope="gpu")
        while arrived < parts - 1:
            arrived = arrived + _sleep(arrived.to(tl.int32)).to(tl.int64) * 0
            arrived = tl.atomic_cas(count_ptr + row64, never, never, sem="relaxed", scope="gpu")
    elif WAIT == 3:
        arrived = tl.load(count_ptr + row64, volatile=True)
        while arrived < parts - 1:
            arrived = tl.load(count_ptr + row64, volatile=True)
    if WAIT == 0:
        mx, total = sp._row_max_sum(slots_ptr, count_ptr, row64, parts, PARTS_P2)
    else:
        mx, total = sp._row_max_sum(slots_ptr, None, row64, parts, PARTS_P2)
    return mx, total


@triton.jit
def _next_row(taken_ptr, part, row, n_groups, STATIC: tl.constexpr):
    if STATIC:
        nxt = row + n_groups
    else:
        nxt = (tl.atomic_add(taken_ptr + part, 1, sem="relaxed", scope="gpu") + 1).to(tl.int32)
    return nxt


@triton.jit
def _lag_probe_kernel(out_ptr, in_ptr, slots_ptr, count_ptr, taken_ptr, n_rows, n_cols, parts,
                      BLOCK_N: tl.constexpr, PARTS_P2: tl.constexpr, WAIT: tl.constexpr,
                      STATIC: tl.constexpr):
    # softmax_split's _softmax_lag_kernel with the wait (WAIT) and the row order (STATIC) as parameters
    pid = tl.program_id(0)
    part = pid % parts
    n_groups = tl.num_programs(0) // parts
    cols = part * BLOCK_N + tl.arange(0, BLOCK_N)
    if STATIC:
        row = pid // parts
    else:
        row = (tl.atomic_add(taken_ptr + part, 1, sem="relaxed", scope="gpu") + 1).to(tl.int32)
    x = tl.load(in_ptr + row.to(tl.int64) * n_cols + cols, mask=cols < tl.where(row < n_rows, n_cols, 0),
                other=-float("inf"))
    m, shift, e, s = sp._chunk_stats(x)
    h = sp._held(e, in_ptr.dtype.element_ty, True)
    sp._publish(slots_ptr, count_ptr, tl.minimum(row, n_rows - 1).to(tl.int64), part, m, s, row < n_rows,
                PARTS_P2)
    while row < n_rows:
        nxt = _next_row(taken_ptr, part, row, n_groups, STATIC)
        x = tl.load(in_ptr + nxt.to(tl.int64) * n_cols + cols,
                    mask=cols < tl.where(nxt < n_rows, n_cols, 0), other=-float("inf"))
        mx, total = _wait(slots_ptr, count_ptr, row.to(tl.int64), parts, PARTS_P2, WAIT)
        y = h.to(tl.float32) * (tl.exp(shift - mx) / total)
        tl.store(out_ptr + row.to(tl.int64) * n_cols + cols, y.to(out_ptr.dtype.element_ty),
                 mask=cols < n_cols)
        row = nxt
        m, shift, e, s = sp._chunk_stats(x)
        h = sp._held(e, in_ptr.dtype.element_ty, True)
        sp._publish(slots_ptr, count_ptr, tl.minimum(row, n_rows - 1).to(tl.int64), part, m, s,
                    row < n_rows, PARTS_P2)


def lag_probe(x: torch.Tensor, wait: int, static: bool, per_sm: int | None, info: dict) -> torch.Tensor:
    m, n = x.shape
    sms = sp.sm_count(x.device)
    c = sp.split_config((m, n), x.dtype, 4096, 4, None, None, sms)
    out = torch.empty_like(x)
    words = torch.full((m * (c["PARTS_P2"] + 1) + c["parts"],), -1, dtype=torch.int64, device=x.device)
    slots, count, taken = (words[:m * c["PARTS_P2"]], words[m * c["PARTS_P2"]:m * (c["PARTS_P2"] + 1)],
                           words[m * (c["PARTS_P2"] + 1):])
    meta = {"BLOCK_N": 4096, "PARTS_P2": c["PARTS_P2"], "WAIT": wait, "STATIC": static, "num_warps": 4}
    if "programs" not in info:
        k = _lag_probe_kernel.warmup(out, x, slots, count, taken, m, n, c["parts"], **meta, grid=(1,))
        k._init_handles()
        fit = sp.resident_per_sm(k.n_regs, 4)
        c = sp.split_config((m, n), x.dtype, 4096, 4, None, None, sms, min(fit, per_sm or fit))
        info.update({"n_regs": k.n_regs, "per_sm": min(fit, per_sm or fit), "programs": c["programs"]})
    _lag_probe_kernel[(info["programs"],)](out, x, slots, count, taken, m, n, c["parts"], **meta)
    return out


SUBJECTS = {
    "lag-p5": {"wait": 0, "static": False, "per_sm": 5},
    "lag-p7": {"wait": 0, "static": False, "per_sm": 7},
    "probe": {"wait": 0, "static": False, "per_sm": None},  # the same as lag: checks the probe's build
    "poll": {"wait": 1, "static": False, "per_sm": None},
    "sleep": {"wait": 2, "static": False, "per_sm": None},
    "cpoll": {"wait": 3, "static": False, "per_sm": None},
    "static": {"wait": 0, "static": True, "per_sm": None},
    "static-poll": {"wait": 1, "static": True, "per_sm": None},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default="16384x131072,8192x32768")
    parser.add_argument("--dtypes", default="bf16,fp32")
    parser.add_argument("--subjects", default=".", help="regex over subject labels")
    parser.add_argument("--once", help="comma-separated subjects: run each twice at the first shape and "
                        "dtype, untimed (for ncu's byte counters), then stop")
    args = parser.parse_args()
    if args.once:
        x = torch.randn(parse_shape(args.shapes.split(",")[0]), dtype=DTYPES[args.dtypes.split(",")[0]],
                        device="cuda")
        for label in args.once.split(","):
            for _ in range(2):
                lag_probe(x, info={}, **SUBJECTS[label])
            torch.cuda.synchronize()
            print(f"{label}: ran twice", flush=True)
        return 0
    results: dict[str, dict] = {}
    for shape_s in args.shapes.split(","):
        shape = parse_shape(shape_s)
        for dname in args.dtypes.split(","):
            key = f"{shape_s} {dname}"
            times: dict[str, list[float]] = {}
            info: dict[str, dict] = {}
            for _ in range(args.rounds):
                x = torch.randn(shape, dtype=DTYPES[dname], device="cuda")
                src = torch.empty(x.numel() * x.element_size(), dtype=torch.uint8, device="cuda")
                dst = torch.empty_like(src)
                calls = {"copy": lambda dst=dst, src=src: dst.copy_(src),
                         "groups": lambda x=x: sp.softmax_split(x, lag=0),
                         "lag": lambda x=x: sp.softmax_split(x, lag=1)}
                for label, kw in SUBJECTS.items():
                    i = info.setdefault(label, {})
                    calls[label] = lambda x=x, kw=kw, i=i: lag_probe(x, info=i, **kw)
                for label, fn in calls.items():
                    if label not in ("copy", "groups", "lag") and not re.search(args.subjects, label):
                        continue
                    try:
                        times.setdefault(label, []).append(time_cuda(fn, budget_s=0.3).median_ns)
                        if "err" not in info.setdefault(label, {}) and label != "copy":
                            ref = torch.softmax(x[-64:].double(), dim=-1)
                            info[label]["err"] = (fn()[-64:].double() - ref).abs().max().item()
                    except Exception as exc:  # one subject's failure must not lose the others
                        info.setdefault(label, {})["error"] = str(exc)[:300]
                del x, src, dst
                torch.cuda.empty_cache()
            print_rounds(key, args.rounds, times, info)
            results[key] = {"times_ns": times, "info": info}
    args.out.write_text(json.dumps({"environment": environment(), "subjects": SUBJECTS,
                                    "results": results}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
