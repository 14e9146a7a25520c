"""Time a small grid of launch parameters for the softmax kernels on a GPU, beside a same-size copy and
the torch baselines, and print the best configuration per shape with its fraction of copy speed.

    python scripts/sweep_softmax.py OUT.json [--budget 200] [--families tiled,online,split,cluster,...]
    python scripts/sweep_softmax.py --dry-run     # the plan (configs per family), no GPU needed

Written for one short GPU call (under 4 minutes on an H100): each configuration is compiled once and
timed with memtraffic.collect.cuda_timing.time_cuda
(L2 flushed before every call, median of up to 30 calls). Phase 1
times, for every shape, the copy, torch.softmax, torch.compile and each family's auto configuration
(what the defaults pick); phase 2 the rest of the grid. Past --budget seconds the remaining
configurations are listed as skipped, and the JSON (rewritten after every shape) keeps what was done.

Inputs are made on the GPU once per shape and dtype; each configuration's output is checked against
float64 torch on a few rows (columns for dim 0, all of it for matmul_softmax) before it is timed.
What to read in the output: `% copy` = copy time / kernel time, for the same minimum bytes (read +
write); `auto` is the defaults' time, so a best config far ahead of auto means the auto rule needs
changing (the rules live in kernels/softmax_rows.py tiled_config, kernels/softmax_online.py
online_config, kernels/softmax_column.py coalesced_config, kernels/matmul_softmax.py fused_config).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memtraffic.kernels import VARIANTS  # noqa: E402
from memtraffic.kernels import softmax_cluster as cluster  # noqa: E402
from memtraffic.probes import bench  # noqa: E402
from memtraffic.vocab.ops import OPS, Shape, dtype_name, format_shape  # noqa: E402

ROW_SHAPES: list[Shape] = [(1048576, 2), (32768, 32), (4096, 4096), (8192, 8192), (8192, 32768),
                           (32768, 4096), (16384, 131072)]
COL_SHAPES: list[Shape] = [(4096, 4096), (8192, 8192)]
MATMUL_SOFTMAX_SHAPES: list[Shape] = [(4096, 1024, 1024)]
DTYPES = (torch.float32, torch.bfloat16)
TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}  # as memtraffic.probes.bench
DEVICE = "cuda"  # tests run the pipeline on CPU (Triton interpreter) with tiny shapes

# (variant, params); params None means the variant's defaults (its auto rule)
Config = tuple[str, "dict[str, Any] | None"]


def _tiled(shape: Shape) -> list[Config]:
    n = shape[1]
    pairs = {2: [(512, 4), (1024, 4), (2048, 8), (4096, 8), (8192, 16)],
             32: [(128, 4), (256, 8), (512, 8)],
             4096: [(1, 2), (1, 4), (1, 8), (1, 16), (2, 4), (2, 8), (2, 16), (4, 16)],
             8192: [(1, 16), (1, 32), (2, 16)]}.get(n, [])
    return [("softmax_tiled", {"BLOCK_M": bm, "num_warps": nw}) for bm, nw in pairs]


def _online(shape: Shape, sms: int) -> list[Config]:
    n = shape[1]
    if n <= 16384:  # auto holds the row: the same one-pass kernel as tiled's BLOCK_M=1, swept there
        return []
    out: list[Config] = []
    if n <= 32768:  # the whole row in registers: 32 values a thread at 32 warps
        out += [("softmax_online", {"BLOCK_N": n, "num_warps": nw}) for nw in (16, 32)]
    # looped: (BLOCK_N, num_warps, programs, evict_hints)
    loop = [(8192, 16, 0, 1), (8192, 16, sms, 1), (8192, 16, 2 * sms, 1), (8192, 16, 2 * sms, 0),
            (16384, 32, sms, 1), (4096, 8, 4 * sms, 1)]
    if n > 32768:
        loop.append((8192, 16, sms // 2, 1))  # fewer rows in flight than SMs: does L2 reuse win?
    out += [("softmax_online", {"BLOCK_N": bn, "num_warps": nw, "programs": p, "evict_hints": h})
            for bn, nw, p, h in loop]
    return out


def _split(shape: Shape) -> list[Config]:
    """softmax_split's grid. Long rows: (BLOCK_N, num_warps) at 32 values a thread, with the groups kernel
    reading the next row's chunk before the wait (prefetch=1) or the lag kernel (prefetch=0, lag auto:
    until 79d82fe this was the groups kernel reading after the write); the auto grid fills the GPU with
    whole groups, so smaller chunks mean more programs an SM. Rows of one chunk (4096x4096 only): one program
    per row on 4 or 8 warps, or the persistent grid that reads its next row before writing this one."""
    m, n = shape
    if n >= 32768:
        return [("softmax_split", {"BLOCK_N": bn, "num_warps": nw, "prefetch": pf})
                for bn, nw, pf in [(2048, 2, 1), (4096, 4, 1), (8192, 8, 1), (32768, 32, 1), (4096, 4, 0),
                                   (8192, 8, 0)]]
    if m * n > 4096 * 4096:
        return []
    return [("softmax_split", {"BLOCK_N": n, "num_warps": nw, "programs": m}) for nw in (4, 8)] + [
        ("softmax_split", {"BLOCK_N": n, "num_warps": 8, "prefetch": 1})]


def _cluster(shape: Shape, dtype: torch.dtype) -> list[Config]:
    """softmax_cluster's grid: (elements a thread, threads a block), the cluster as many blocks as cover
    the row; pairs that would need more than its largest cluster are left out."""
    pairs = [(16, 256), (32, 128), (32, 256), (32, 512), (64, 256)]
    return [("softmax_cluster", {"per_thread": p, "threads": t}) for p, t in pairs
            if cluster.cluster_config(shape, dtype, p, t)["cluster"] <= cluster.MAX_CLUSTER]


def _column(shape: Shape, dtype: torch.dtype) -> list[Config]:
    m = shape[0]
    e = torch.finfo(dtype).bits // 8
    # (row segment bytes, row chunks)
    grid = [(32, 1), (32, 4), (32, 8), (64, 1), (64, 2), (64, 4), (128, 2), (128, 4), (128, 8)]
    out: list[Config] = [("softmax_column_coalesced", {"BLOCK_N": seg // e, "ROWS": m // chunks})
                         for seg, chunks in grid]
    out.append(("softmax_column_coalesced", {"BLOCK_N": 64 // e, "ROWS": m // 4, "num_warps": 8,
                                             "BLOCK_M": 4096 // (64 // e)}))
    return out


def _fused(dtype: torch.dtype) -> list[Config]:
    if dtype == torch.float32:
        grid = [(16, 16, 8, 2), (16, 16, 16, 2), (16, 32, 8, 2), (16, 32, 16, 2), (16, 16, 8, 3)]
    else:  # configs that compiled for sm_90 without spills (kernels/matmul_softmax.py)
        grid = [(16, 16, 8, 2), (16, 32, 8, 3), (16, 64, 8, 2), (16, 64, 16, 2), (32, 16, 8, 2),
                (32, 16, 16, 3), (32, 32, 16, 1), (32, 64, 16, 1), (32, 64, 8, 1), (32, 32, 8, 1)]
    return [("matmul_softmax_fused", {"BLOCK_M": bm, "BLOCK_K": bk, "num_warps": nw, "num_stages": st})
            for bm, bk, nw, st in grid]


BASELINES = ("torch_softmax", "torch_compiled", "softmax_column_strided", "matmul_softmax_unfused")
FAMILY_OF = {"softmax_tiled": "tiled", "softmax_online": "online", "softmax_split": "split",
             "softmax_cluster": "cluster",
             "softmax_column_coalesced": "column", "matmul_softmax_fused": "fused"}


def plan(sms: int, families: set[str], skip: frozenset[str] = frozenset(),
         shapes: frozenset[str] = frozenset()
         ) -> list[tuple[str, Shape, torch.dtype, list[Config], list[Config]]]:
    """[(op, shape, dtype, phase-1 configs, phase-2 configs)]: baselines and auto first, then the grid.
    Variants named in `skip` are left out; a non-empty `shapes` ("MxN" strings) keeps only those."""
    out = []
    for dtype in DTYPES:
        for shape in ROW_SHAPES:
            first: list[Config] = [("torch_softmax", None), ("torch_compiled", None)]
            grid: list[Config] = []
            if "tiled" in families and shape[1] <= 16384:
                first.append(("softmax_tiled", None))
                grid += _tiled(shape)
            if "online" in families and shape[1] >= 4096:
                first.append(("softmax_online", None))
                grid += _online(shape, sms)
            if "split" in families and shape[1] >= 4096:
                first.append(("softmax_split", None))
                grid += _split(shape)
            if "cluster" in families and shape[1] >= 4096:
                first.append(("softmax_cluster", None))
                grid += _cluster(shape, dtype)
            out.append(("softmax", shape, dtype, first, grid))
        for shape in COL_SHAPES:
            if "column" in families:
                first = [("softmax_column_strided", None), ("softmax_column_coalesced", None)]
                out.append(("softmax_dim0", shape, dtype, first, _column(shape, dtype)))
        for shape in MATMUL_SOFTMAX_SHAPES:
            if "fused" in families:
                first = [("matmul_softmax_unfused", None), ("matmul_softmax_fused", None)]
                out.append(("matmul_softmax", shape, dtype, first, _fused(dtype)))
    return [(op, shape, dtype, [c for c in first if c[0] not in skip], [c for c in grid if c[0] not in skip])
            for op, shape, dtype, first, grid in out if not shapes or format_shape(shape) in shapes]


def _make_inputs(op: str, shape: Shape, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    return OPS[op].make_inputs(shape, dtype, torch.device(DEVICE), 0)


def _some(n: int) -> torch.Tensor:
    """A few indices below n: the first three, the middle one, the last one."""
    return torch.tensor(sorted({i for i in (0, 1, 2, n // 2, n - 1) if i < n}), device=DEVICE)


def _checker(op: str, inputs: tuple[torch.Tensor, ...]) -> Callable[[torch.Tensor], str | None]:
    """Compare a few rows (softmax), columns (dim 0) or everything (matmul_softmax) with float64 torch."""
    x = inputs[0]
    if op == "softmax":
        idx = _some(x.shape[0])
        ref = torch.softmax(x[idx].double(), dim=-1)
        pick = lambda out: out[idx]  # noqa: E731
    elif op == "softmax_dim0":
        idx = _some(x.shape[1])
        ref = torch.softmax(x[:, idx].double(), dim=0)
        pick = lambda out: out[:, idx]  # noqa: E731
    else:
        ref = OPS[op].reference(*inputs)
        pick = lambda out: out  # noqa: E731
    tol = TOL[x.dtype] * max(1.0, ref.abs().max().item())

    def check(out: torch.Tensor) -> str | None:
        err = (pick(out).double() - ref).abs().max().item()
        return None if math.isfinite(err) and err <= tol else f"max abs error {err:.3g} > {tol:.3g}"

    return check


def _time_one(variant: str, params: dict[str, Any] | None, shape: Shape, dtype: torch.dtype,
              inputs: tuple[torch.Tensor, ...], check: Callable[[torch.Tensor], str | None]
              ) -> dict[str, Any]:
    v = VARIANTS[variant]
    given = params or {}
    reason = v.check(shape, dtype, {**v.params, **given})
    if reason is not None:
        return {"status": "skipped", "error": reason}
    try:
        fn = lambda: v.run(*inputs, **given)  # noqa: E731
        out = fn()
        bad = check(out)
        del out
        if bad is not None:
            return {"status": "failed", "error": bad}
        t = bench.time_cuda(fn, budget_s=0.05, max_reps=30, min_reps=5)
        return {"status": "ok", "time_ns": t.median_ns, "reps": t.reps}
    except Exception as err:  # one config's failure must not lose the others
        return {"status": "failed", "error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}
    finally:
        torch.cuda.empty_cache()


def _rows(args: argparse.Namespace, sms: int) -> Iterator[tuple[list[dict[str, Any]], bool]]:
    """Yield (rows so far, finished) after each shape/dtype of each phase."""
    start = time.monotonic()
    rows: list[dict[str, Any]] = []
    work = plan(sms, set(args.families.split(",")), frozenset(args.skip.split(",")), _shapes(args))
    copies: dict[tuple[str, str], float] = {}
    for phase in (1, 2):
        for op, shape, dtype, first, grid in work:
            configs = first if phase == 1 else grid
            if not configs:
                continue
            key = (format_shape(shape), dtype_name(dtype))
            over = time.monotonic() - start > args.budget
            base = {"op": op, "shape": key[0], "dtype": key[1], "phase": phase}
            if over:
                rows += [{**base, "variant": n, "params": p, "status": "skipped", "error": "time budget"}
                         for n, p in configs]
                continue
            minimum = OPS[op].minimum(shape, dtype).total
            if phase == 1:
                copies[key] = bench.copy_time(minimum, budget_s=0.05).median_ns
                torch.cuda.empty_cache()
            inputs = _make_inputs(op, shape, dtype)
            check = _checker(op, inputs)
            for name, params in configs:
                if time.monotonic() - start > args.budget:
                    r = {"status": "skipped", "error": "time budget"}
                else:
                    r = _time_one(name, params, shape, dtype, inputs, check)
                r = {**base, "variant": name, "params": params, **r, "min_bytes": minimum,
                     "copy_ns": copies[key]}
                if r["status"] == "ok":
                    r["frac_of_copy"] = copies[key] / r["time_ns"]
                rows.append(r)
                if args.verbose:
                    print(f"  {name} {key[0]} {key[1]} {params}: {r['status']} "
                          f"{r.get('time_ns', 0) / 1e3:.1f} us {r.get('error', '')}", flush=True)
            del inputs, check
            torch.cuda.empty_cache()
            yield rows, False
    yield rows, True


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (op, shape, dtype, family): the best ok row, the auto row, and the baselines' times."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["op"], r["shape"], r["dtype"]), []).append(r)
    out = []
    for (op, shape, dtype), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        by_variant = {r["variant"]: r for r in ok if r["params"] is None}
        for variant, family in FAMILY_OF.items():
            mine = [r for r in ok if r["variant"] == variant]
            if not mine:
                continue
            best = min(mine, key=lambda r: r["time_ns"])
            auto = by_variant.get(variant)
            entry = {"op": op, "shape": shape, "dtype": dtype, "family": family, "best_ns": best["time_ns"],
                     "best_params": best["params"], "best_frac_of_copy": best["frac_of_copy"],
                     "auto_ns": auto["time_ns"] if auto else None, "copy_ns": best["copy_ns"],
                     "configs": len(mine)}
            for base in BASELINES:
                if base in by_variant:
                    entry[f"{base}_ns"] = by_variant[base]["time_ns"]
            out.append(entry)
    return out


def table(entries: list[dict[str, Any]]) -> str:
    """One line per family, shape and dtype: times in us, % of copy, and the baselines' time over the
    best config's (above 1.00x: the best config is faster)."""
    def us(ns: float | None) -> str:
        return "-" if ns is None else f"{ns / 1e3:.1f}"

    def ratio(e: dict[str, Any], key: str) -> str:
        return f"{e[key] / e['best_ns']:.2f}x" if e.get(key) else "-"

    head = (f"{'family':7} {'shape':15} {'dtype':5} {'copy us':>8} {'best us':>8} {'%copy':>6} "
            f"{'auto us':>8} {'torch':>7} {'compile':>7} {'other':>7}  best params")
    lines = [head, "-" * len(head)]
    for e in entries:
        other = "softmax_column_strided_ns" if e["family"] == "column" else "matmul_softmax_unfused_ns"
        params = "auto" if e["best_params"] is None else e["best_params"]
        lines.append(f"{e['family']:7} {e['shape']:15} {e['dtype']:5} {us(e['copy_ns']):>8} "
                     f"{us(e['best_ns']):>8} {100 * e['best_frac_of_copy']:5.0f}% {us(e['auto_ns']):>8} "
                     f"{ratio(e, 'torch_softmax_ns'):>7} {ratio(e, 'torch_compiled_ns'):>7} "
                     f"{ratio(e, other):>7}  {params}")
    lines.append("torch, compile, other: that baseline's time / best time (other: softmax_column_strided "
                 "for dim 0, matmul_softmax_unfused for matmul_softmax); auto: the defaults' time")
    return "\n".join(lines)


def _environment(sms: int) -> dict[str, Any]:
    import triton

    device = torch.cuda.get_device_name(0) if DEVICE == "cuda" else DEVICE
    return {"device": device, "sm_count": sms, "torch": torch.__version__,
            "triton": triton.__version__, "date": time.strftime("%Y-%m-%d", time.gmtime())}


def _shapes(args: argparse.Namespace) -> frozenset[str]:
    return frozenset(s for s in args.shapes.split(",") if s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path, help="JSON file to write")
    ap.add_argument("--budget", type=float, default=200.0, help="seconds after which configs are skipped")
    ap.add_argument("--families", default="tiled,online,split,cluster,column,fused")
    ap.add_argument("--shapes", default="", help="only these shapes, e.g. 1048576x2,16384x131072")
    ap.add_argument("--skip", default="", help="variants to leave out, e.g. torch_compiled")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit (no GPU needed)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    known = {format_shape(s) for s in ROW_SHAPES + COL_SHAPES + MATMUL_SOFTMAX_SHAPES}
    if _shapes(args) - known:
        ap.error(f"--shapes: {','.join(sorted(_shapes(args) - known))} not in the sweep; choose from "
                 f"{','.join(sorted(known))}")
    if args.dry_run:
        work = plan(132, set(args.families.split(",")), frozenset(args.skip.split(",")), _shapes(args))
        counts: dict[str, int] = {}
        for _, _, _, first, grid in work:
            for name, _ in first + grid:
                counts[name] = counts.get(name, 0) + 1
        for name, count in counts.items():
            print(f"{name:28} {count:4} configs")
        print(f"{'total':28} {sum(counts.values()):4}")
        return 0
    if args.out is None:
        ap.error("give the JSON file to write (or --dry-run)")
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("error: the sweep needs a CUDA GPU", file=sys.stderr)
        return 1
    sms = torch.cuda.get_device_properties(0).multi_processor_count if DEVICE == "cuda" else 2
    t0 = time.monotonic()
    result: dict[str, Any] = {"environment": _environment(sms), "command": " ".join(sys.argv)}
    for rows, finished in _rows(args, sms):
        result.update(rows=rows, summary=summary(rows), seconds=time.monotonic() - t0, finished=finished)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1, default=str))
        tmp.replace(args.out)
    print(table(result["summary"]))
    skipped = [r for r in result["rows"] if r["status"] == "skipped" and r.get("error") == "time budget"]
    failed = [r for r in result["rows"] if r["status"] == "failed"]
    for r in failed:
        print(f"FAILED {r['variant']} {r['shape']} {r['dtype']} {r['params']}: {r['error']}")
    print(f"{len(result['rows'])} configs in {result['seconds']:.0f} s; {len(failed)} failed, "
          f"{len(skipped)} skipped for time; JSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
