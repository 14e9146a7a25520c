"""Wall-clock benchmark: CUDA-event timing of each variant beside a same-size copy.

Timing method (per config): warm up (JIT, autotune, torch.compile) outside the timed region, then
for each repetition flush L2 by reading a buffer larger than it (memtraffic.collect.cuda_timing.time_cuda
says why reading, not writing), record an event, call the variant, record an event. The median over
repetitions is reported. The copy baseline moves the op's minimum bytes (read + write) with
`torch.Tensor.copy_`, timed the same way, so "% of copy" is the fraction of this GPU's achievable
bandwidth that the variant's useful traffic reaches. The copy's time is the median of COPY_RUNS
timings (each allocates its buffers anew, though the caching allocator may hand back the same memory):
two timings of one copy once differed by 8% (H100, 4096x4096 fp32: 40.3 and 43.7 us in bench r4; 8
later rounds all took 43.6-43.7 us, reports/bench/2026-11-23-h100-split-probe; cause not found), and
one fast or slow copy must not set every ratio of its size.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from memtraffic.collect.cuda_timing import Timing, time_cuda
from memtraffic.collect.variants import get_variant, unsupported_reason
from memtraffic.host.gpu import require_gpu
from memtraffic.host.machine import environment, utc_now
from memtraffic.vocab.files import new_folder, write_json
from memtraffic.vocab.ops import OPS, Shape, dtype_name, error_limit, format_shape
from memtraffic.vocab.variant import Variant

# The benchmark suite's shapes, per op: the README's bench table runs these.
SUITE: dict[str, list[Shape]] = {
    "softmax": [
        (1048576, 2),
        (32768, 32),
        (4096, 4096),
        (8192, 8192),
        (8192, 32768),
        (32768, 4096),
        (16384, 131072),
    ],
    "softmax_dim0": [(4096, 4096), (8192, 8192)],
}
SUITE_DTYPES = (torch.float32, torch.bfloat16)
BASELINES = {"softmax": ("torch_softmax", "torch_compiled")}
COPY_RUNS = 5  # copy timings per size; their median is the baseline


def _check(
    variant_name: str, out: torch.Tensor, inputs: tuple[torch.Tensor, ...], op_name: str
) -> str | None:
    """None when out matches the float64 reference within the dtype's tolerance, else the error text."""
    ref = OPS[op_name].reference(*inputs)
    err = (out.double() - ref).abs().max().item()
    tol = error_limit(out.dtype, ref.abs().max().item())
    if not err <= tol:  # also catches NaN
        return f"{variant_name}: max abs error {err:.3g} > {tol:.3g} against the float64 reference"
    return None


def bench_config(
    variant_name: str, shape: Shape, dtype: torch.dtype, params: dict[str, Any], budget_s: float,
    variants: dict[str, Variant] | None = None,
) -> dict[str, Any]:
    """Time one variant on one shape/dtype. Failures are returned in the row, never raised."""
    variant = get_variant(variant_name, variants)
    op = OPS[variant.op]
    row: dict[str, Any] = {
        "variant": variant_name,
        "op": op.name,
        "shape": format_shape(shape),
        "dtype": dtype_name(dtype),
        "params": params,
    }
    reason = unsupported_reason(variant, shape, dtype, params)
    if reason is not None:
        return {**row, "status": "skipped", "error": reason}
    minimum = op.minimum(shape, dtype)
    row["min_bytes"] = minimum.total
    try:
        inputs = op.make_inputs(shape, dtype, torch.device("cuda"), 0)
        kwargs = {**variant.params, **params}
        out = variant.run(*inputs, **kwargs)
        bad = _check(variant_name, out, inputs, op.name)
        del out
        if bad is not None:
            return {**row, "status": "failed", "error": bad}
        timing = time_cuda(lambda: variant.run(*inputs, **kwargs), budget_s=budget_s)
    except Exception as err:  # one config's failure must not lose the others
        torch.cuda.empty_cache()
        return {**row, "status": "failed", "error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}
    finally:
        torch.cuda.empty_cache()
    return {
        **row,
        "status": "ok",
        "time_ns": timing.median_ns,
        "reps": timing.reps,
        "bw_Bps": minimum.total / (timing.median_ns * 1e-9),
    }


def copy_time(nbytes: int, budget_s: float) -> Timing:
    """Same-size copy: reads nbytes/2 and writes nbytes/2, like an op whose minimum is nbytes."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return time_cuda(lambda: dst.copy_(src), budget_s=budget_s)


def run_bench(
    variants: Sequence[str],
    shapes: Sequence[Shape] | None,
    dtypes: Sequence[torch.dtype],
    budget_s: float = 0.3,
    progress: Callable[[str], None] = lambda s: None,
    catalogue: dict[str, Variant] | None = None,
) -> dict[str, Any]:
    """Bench every variant x shape x dtype; add copy time and ratios to the torch baselines.

    `catalogue` is the variants to look names up in (default: the shipped suite)."""
    device = require_gpu("bench needs one")
    ops = {get_variant(v, catalogue).op for v in variants}
    rows: list[dict[str, Any]] = []
    copies: dict[int, list[float]] = {}
    for op_name in sorted(ops):
        op_shapes = list(shapes) if shapes else SUITE.get(op_name, [OPS[op_name].default_shape])
        names = [v for v in variants if get_variant(v, catalogue).op == op_name]
        for shape in op_shapes:
            for dtype in dtypes:
                nbytes = OPS[op_name].minimum(shape, dtype).total
                runs = copies.setdefault(nbytes, [])
                while len(runs) < COPY_RUNS:
                    runs.append(copy_time(nbytes, budget_s).median_ns)
                group = []
                for name in names:
                    progress(f"bench {name} {format_shape(shape)} {dtype_name(dtype)}")
                    group.append(bench_config(name, shape, dtype, {}, budget_s, catalogue))
                copy_ns = statistics.median(runs)
                by_name = {r["variant"]: r for r in group if r["status"] == "ok"}
                for r in group:
                    r["copy_ns"], r["copy_runs_ns"] = copy_ns, list(runs)
                    if r["status"] != "ok":
                        continue
                    r["frac_of_copy"] = copy_ns / r["time_ns"]
                    for base in BASELINES.get(op_name, ()):
                        if base in by_name:
                            r[f"speedup_vs_{base}"] = by_name[base]["time_ns"] / r["time_ns"]
                rows.extend(group)
    return {"environment": environment(device), "date": utc_now()[:10],
            "command": " ".join(sys.argv), "rows": rows}


def write_result(result: dict[str, Any], out: Path, table: str) -> Path:
    """Write results.json and table.txt (the rendered `table`) into a new folder, whole or not at all
    (vocab.files.new_folder); a non-empty folder is refused, never overwritten."""
    with new_folder(out) as building:
        write_json(building / "results.json", result)
        (building / "table.txt").write_text(table + "\n")
    return out
