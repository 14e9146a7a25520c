"""Time softmax kernel configurations on the shapes where memtraffic's best softmax is furthest below a
same-size copy (issue 27), the way `memtraffic bench` times them (memtraffic.measure.gpu.time_cuda:
CUDA events, L2 flushed, median; the copy baseline is bench.copy_time's median of bench.COPY_RUNS).

Each configuration is checked against float64 on a sample of rows before it is timed. Long rows:
softmax_split's lag kernel as shipped (words kept between launches, slots read as a warp-wide vector),
with a fill kernel before it in every call (as before the words were kept), and, where a row has fewer
than 32 parts, with its slots read as a vector of PARTS_P2 lanes (as before). 4096-column rows (--only):
softmax_naive on 4 and 8 warps and softmax_tiled's auto.

    python scripts/softmax_gaps_probe.py --out results.json [--only 8192x32768:bf16 ...]

Prints one line a configuration (time, fraction of copy) and writes every number to --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable

import torch

from memtraffic.kernels import softmax_rows as rows
from memtraffic.kernels import softmax_split as split
from memtraffic.kernels.softmax_online import sm_count
from memtraffic.measure.bench import COPY_RUNS, copy_time
from memtraffic.measure.gpu import environment, time_cuda

TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2}


def _split(x: torch.Tensor, BLOCK_N: int | None = None, num_warps: int | None = None,
           programs_per_sm: int = 0, fill: bool = False, **knobs) -> Callable[[], torch.Tensor]:
    """softmax_split's lag kernel (knobs: its FAST, AHEAD, and Triton's maxnreg), on its kept words, or
    with fill=True on words filled by a kernel in every call (as before the words were kept)."""
    m, n = x.shape
    sms = sm_count(x.device)
    programs = programs_per_sm * sms if programs_per_sm else None
    c = split.split_config((m, n), x.dtype, BLOCK_N, num_warps, programs, None, sms, lag=1)
    if fill:
        return lambda: split._launch(x, c, True, programs is None, words=split._workspace(x, c, True),
                                     **knobs)
    return lambda: split._launch(x, c, True, programs is None, **knobs)


def _naive(x: torch.Tensor, num_warps: int) -> Callable[[], torch.Tensor]:
    return lambda: rows.softmax_naive(x, num_warps)


def configs(x: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    m, n = x.shape
    out: dict[str, Callable[[], torch.Tensor]] = {}
    if n >= 32768:  # rows of several parts: the lag kernel
        out["split auto"] = _split(x)
        out["split fill"] = _split(x, fill=True)
        p2 = split.split_config((m, n), x.dtype)["PARTS_P2"]
        if p2 < split.SLOT_WIDTH:  # the slots read as a vector of PARTS_P2 lanes, not a warp's
            out["split narrow slots"] = _split(x, WIDTH=p2)
            out["split narrow slots fill"] = _split(x, fill=True, WIDTH=p2)
        return out
    out["naive 4"] = _naive(x, 4)
    out["naive 8"] = _naive(x, 8)
    out["tiled auto"] = lambda: rows.softmax_tiled(x)
    return out


def check(out: torch.Tensor, x: torch.Tensor) -> float:
    """Largest error over a sample of rows against float64, relative to the dtype's tolerance."""
    idx = torch.unique(torch.cat([torch.arange(0, min(8, x.shape[0])),
                                  torch.randint(0, x.shape[0], (24,)),
                                  torch.arange(max(0, x.shape[0] - 8), x.shape[0])])).to(x.device)
    ref = torch.softmax(x[idx].double(), dim=-1)
    err = (out[idx].double() - ref).abs().max().item()
    return err / (TOL[x.dtype] * max(1.0, ref.abs().max().item()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", action="append", default=[], help="MxN:dtype, repeatable")
    ap.add_argument("--budget", type=float, default=0.3)
    a = ap.parse_args()
    todo = a.only or ["8192x32768:bf16", "8192x32768:fp32", "16384x131072:bf16", "16384x131072:fp32"]
    result = {"environment": environment(), "rows": []}
    for item in todo:
        shape_s, dt = item.split(":")
        m, n = (int(v) for v in shape_s.split("x"))
        dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dt]
        torch.manual_seed(27)
        x = torch.randn(m, n, device="cuda", dtype=dtype)
        nbytes = 2 * m * n * x.element_size()
        copy_runs = [copy_time(nbytes, a.budget).median_ns for _ in range(COPY_RUNS)]
        copy_ns = statistics.median(copy_runs)
        for label, fn in configs(x).items():
            row = {"shape": shape_s, "dtype": dt, "config": label, "copy_ns": copy_ns,
                   "copy_runs_ns": copy_runs}
            try:
                out = fn()
                torch.cuda.synchronize()
                row["err_over_tol"] = check(out, x)
                del out
                if not row["err_over_tol"] <= 1.0:
                    row["status"] = "wrong"
                else:
                    t = time_cuda(fn, budget_s=a.budget)
                    row.update(status="ok", time_ns=t.median_ns, reps=t.reps,
                               frac_of_copy=copy_ns / t.median_ns)
            except Exception as err:  # one config's failure must not lose the others
                first = str(err).splitlines()[0][:200] if str(err) else ""
                row.update(status="failed", error=f"{type(err).__name__}: {first}")
            torch.cuda.empty_cache()
            result["rows"].append(row)
            t = f"{row['time_ns'] / 1e3:9.1f} us  {row['frac_of_copy']:.4f}" if row["status"] == "ok" else \
                row["status"] + " " + row.get("error", f"{row.get('err_over_tol', 0):.2f}x tol")
            print(f"{shape_s:>13} {dt}  {label:<34} {t}", flush=True)
        del x
        torch.cuda.empty_cache()
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
