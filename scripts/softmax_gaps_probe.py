"""Time softmax kernel configurations on the shapes where memtraffic's best softmax is furthest below a
same-size copy (issue 27), the way `memtraffic bench` times them (memtraffic.measure.gpu.time_cuda:
CUDA events, L2 flushed, median; the copy baseline is bench.copy_time's median of bench.COPY_RUNS).

Each configuration is checked against float64 on a sample of rows before it is timed. "prefilled"
configurations of softmax_split take their EMPTY words from a ring of buffers filled before timing, so
the timed call runs the softmax kernel alone: their difference to the same configuration filling its
own words is what the fill kernel costs.

    python scripts/softmax_gaps_probe.py --out results.json [--only 8192x32768:bf16 ...]

Prints one table (time, fraction of copy) and writes every number to --out.
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

RING = 210  # pre-filled workspaces: more than time_cuda's calls (2 warm-ups + at most 200 reps) + the check
TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2}
HINTS = {"LOAD": "evict_first", "STORE": ".cs"}


def _split(x: torch.Tensor, BLOCK_N: int | None = None, num_warps: int | None = None, lag: int = 1,
           prefilled: bool = False, **knobs) -> Callable[[], torch.Tensor]:
    m, n = x.shape
    c = split.split_config((m, n), x.dtype, BLOCK_N, num_warps, None, None, sm_count(x.device), lag=lag)
    use_lag = lag == 1
    if not prefilled:
        return lambda: split._launch(x, c, use_lag, True, **knobs)
    ring = [split._workspace(x, c, use_lag) for _ in range(RING)]
    state = {"i": 0}

    def run() -> torch.Tensor:
        w = ring[state["i"] % RING]
        state["i"] += 1
        return split._launch(x, c, use_lag, True, words=w, **knobs)
    return run


def _naive(x: torch.Tensor, num_warps: int, **constexprs) -> Callable[[], torch.Tensor]:
    launch = rows.naive_launch(tuple(x.shape), num_warps)
    launch.constexprs.update(constexprs)

    def run() -> torch.Tensor:
        out = torch.empty_like(x)
        launch(out, x)
        return out
    return run


def _tiled(x: torch.Tensor, block_m: int | None = None, num_warps: int | None = None,
           **constexprs) -> Callable[[], torch.Tensor]:
    launch = rows.tiled_launch(tuple(x.shape), block_m, num_warps)
    launch.constexprs.update(constexprs)

    def run() -> torch.Tensor:
        out = torch.empty_like(x)
        launch(out, x)
        return out
    return run


def configs(x: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    m, n = x.shape
    out: dict[str, Callable[[], torch.Tensor]] = {}
    if n >= 32768:  # rows of several parts: the lag kernel
        out["split auto"] = _split(x)
        out["split prefilled"] = _split(x, prefilled=True)
        out["split prefilled fast"] = _split(x, prefilled=True, FAST=True)
        out["split prefilled hints"] = _split(x, prefilled=True, **HINTS)
        out["split prefilled fast hints"] = _split(x, prefilled=True, FAST=True, **HINTS)
        out["split prefilled fast load-hint"] = _split(x, prefilled=True, FAST=True, LOAD="evict_first")
        for bn, nw in [(2048, 2), (4096, 8), (8192, 8), (8192, 16), (16384, 16)]:
            out[f"split {bn}/{nw} prefilled fast"] = _split(x, bn, nw, prefilled=True, FAST=True)
        return out
    out["naive 4"] = _naive(x, 4)
    for nw in (2, 8):
        out[f"naive {nw}"] = _naive(x, nw)
    out["naive 4 hints"] = _naive(x, 4, **HINTS)
    out["naive 8 hints"] = _naive(x, 8, **HINTS)
    out["tiled auto"] = _tiled(x)
    out["tiled auto hints"] = _tiled(x, **HINTS)
    out["tiled 2 rows 8"] = _tiled(x, 2, 8)
    bn = 1 << (n - 1).bit_length()
    out["rows-ticket 4 prefilled"] = _split(x, bn, 4, prefilled=True)
    for nw in (4, 8):
        out[f"rows-ticket {nw} prefilled fast"] = _split(x, bn, nw, prefilled=True, FAST=True)
        out[f"rows-ticket {nw} prefilled fast hints"] = _split(x, bn, nw, prefilled=True, FAST=True, **HINTS)
    out["rows-ticket 4 fill"] = _split(x, bn, 4, FAST=True)
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
    todo = a.only or ["8192x32768:bf16", "4096x4096:bf16", "32768x4096:bf16", "8192x8192:fp32",
                      "16384x131072:bf16"]
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
