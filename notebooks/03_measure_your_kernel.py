# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Measure your own kernel
#
# memtraffic compares what a kernel moves with what it *should* move. For the kernels in `kernels/`
# both sides are written down: a `Variant` holds the launcher and its own traffic model. This notebook
# adds a variant of your own, predicts its traffic before any measurement, checks it on the CPU (the
# Triton interpreter), lists it beside the suite, and measures it under Nsight Compute.
#
# The measuring cells need a CUDA GPU and `ncu`. Without them (a laptop, CI) the notebook says so and
# shows the committed H100 results of the suite's kernels for the same shape instead.

# %%
import json
import os
import tempfile
from pathlib import Path

import torch

if not torch.cuda.is_available():  # Triton's interpreter must be chosen before any @triton.jit runs
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pandas as pd
from IPython.display import Markdown, display

from memtraffic.analysis.analyze import analyze_path
from memtraffic.core.errors import MemtrafficError
from memtraffic.core.ops import OPS, parse_shape, torch_dtype
from memtraffic.core.units import fmt_bytes
from memtraffic.measure.runner import check_output
from memtraffic.measure.variants import describe, load_variants
from memtraffic.views.tables import render, results_table


def find_root() -> Path:
    """The repository folder holding reports/h100 (the notebook may run from notebooks/ or the root)."""
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "reports" / "h100").is_dir():
            return folder
    raise FileNotFoundError("run this notebook inside the memtraffic repository: reports/h100 holds the runs")


ROOT = find_root()
REPORTS = ROOT / "reports" / "h100"
KEY: dict = {"reports": {}, "model": {}, "derived": {}}  # numbers the tests check
device = "cuda" if torch.cuda.is_available() else "cpu"
interpreted = os.environ.get("TRITON_INTERPRET") == "1"
print(f"torch {torch.__version__} on {device}; Triton interpreter: {interpreted}")

# %% [markdown]
# ## 1. The kernel and its model
#
# The example is a softmax over rows of exactly two columns written the "obvious" way: one load per
# column, `softmax([a, b]) = [1 / (1 + exp(b - a)), 1 / (1 + exp(a - b))]`, one store per column.
#
# **Predict before you measure.** A warp's 32 lanes take 32 consecutive rows. The load of column 0
# reads element 0 of each row: the addresses are two elements apart, so the warp touches every 32-byte
# sector of those rows and uses half of each. The load of column 1 touches the same sectors again for
# the other half. So every input sector moves twice through L1, and the same holds for the two
# stores: **twice the minimum in each direction**. The model below says exactly that, in code.
#
# The profiled process that ncu starts is a fresh Python, so the variant lives in a module file the
# notebook writes (edit the text, rerun the cells below it). A `Variant` names its op (the op's
# minimum and float64 reference come with it), its launcher, its default parameters, its `predicted`
# traffic and a `check` that refuses shapes it cannot take.

# %%
VARIANT_SOURCE = '''
"""softmax_pairs: softmax over rows of exactly two columns, one strided load and store per column."""

import math

import torch
import triton
import triton.language as tl

from memtraffic.core.variant import Variant
from memtraffic.core.ops import Traffic, element_size


@triton.jit
def _pairs_kernel(out_ptr, in_ptr, n_rows, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < n_rows
    # read column 0, then column 1: lane i takes row i, two elements from lane i+1's address
    a = tl.load(in_ptr + rows * 2, mask=mask).to(tl.float32)
    b = tl.load(in_ptr + rows * 2 + 1, mask=mask).to(tl.float32)
    pa = 1.0 / (1.0 + tl.exp(b - a))
    pb = 1.0 / (1.0 + tl.exp(a - b))
    # write column 0, then column 1: the same half-used sectors as the loads
    tl.store(out_ptr + rows * 2, pa.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + rows * 2 + 1, pb.to(out_ptr.dtype.element_ty), mask=mask)


DEFAULTS = {"BLOCK": 1024, "num_warps": 4}


def softmax_pairs(x: torch.Tensor, BLOCK: int = 1024, num_warps: int = 4) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    _pairs_kernel[(triton.cdiv(x.shape[0], BLOCK),)](out, x, x.shape[0], BLOCK=BLOCK, num_warps=num_warps)
    return out


def predicted(shape, dtype, params) -> Traffic:
    m, n = shape
    # Each of the two loads touches every 32-byte sector of the input and uses half of it; the two stores
    # do the same to the output. (Rows are 2 elements, so a sector never holds a partial row.)
    sectors = math.ceil(m * n * element_size(dtype) / 32)
    return Traffic(read=2 * sectors * 32, write=2 * sectors * 32)


def check(shape, dtype, params):
    if shape[1] != 2:
        return f"softmax_pairs takes rows of exactly 2 columns, got {shape[1]}"
    block = params.get("BLOCK", DEFAULTS["BLOCK"])
    if block < 1 or block & (block - 1):
        return f"BLOCK must be a power of two, got {block}"
    return None


VARIANTS = {
    "softmax_pairs": Variant(
        name="softmax_pairs",
        op="softmax",
        description="Triton, N=2 only: one strided load and one strided store per column (half of every "
        "sector used, twice)",
        run=lambda x, **p: softmax_pairs(x, **{**DEFAULTS, **p}),
        predicted=predicted,
        params=dict(DEFAULTS),
        constraints="N == 2; BLOCK a power of two",
        check=check,
    ),
}
'''

WORK = Path(tempfile.gettempdir()) / "memtraffic-notebook-03"  # rewritten on every run
WORK.mkdir(exist_ok=True)
MODULE = WORK / "my_variants.py"
MODULE.write_text(VARIANT_SOURCE)


# The same loader as `memtraffic list|measure|bench --variants my_variants.py`: the shipped suite plus
# the file's VARIANTS.
VARIANTS = load_variants([MODULE])
MY = VARIANTS["softmax_pairs"]
print(f"registered {MY.name}: {MY.description}")

# %% [markdown]
# ## 2. Check it on the CPU
#
# The same check the measuring process applies (`memtraffic.measure.runner.check_output`: the variant's output
# against the op's float64 reference), on a small shape that the Triton interpreter runs quickly.

# %%
op = OPS[MY.op]
for shape, dtype in [((1000, 2), "fp32"), ((4096, 2), "bf16")]:
    gen = torch.Generator().manual_seed(0)
    (x,) = op.make_inputs(shape, torch_dtype(dtype), torch.device(device), gen)
    out = MY.run(x, BLOCK=256)
    err = check_output(out, op.reference(x), dtype)
    print(f"{MY.name} {shape[0]}x{shape[1]} {dtype}: max abs error {err:.2g} against float64 - ok")
print("refused:", MY.check((1000, 3), torch.float32, {}))

# %% [markdown]
# ## 3. List and describe it beside the suite
#
# `memtraffic list` prints this table for the variants in `kernels/`; here it includes yours. "pred/min"
# is each variant's predicted L1 traffic over the op's minimum.

# %%
SHAPE, DTYPE = parse_shape("1048576x2"), torch_dtype("fp32")
names = ["softmax_naive", "softmax_tiled", "torch_softmax", MY.name]
listing = [describe(VARIANTS[v], SHAPE, DTYPE) for v in names]
print(render(listing, "table", "list"))
mine_row = listing[-1]
KEY["model"][f"{MY.name} 1048576x2 fp32"] = {k: mine_row[k] for k in (
    "min_read_bytes", "min_write_bytes", "pred_read_bytes", "pred_write_bytes")}
KEY["derived"]["pred_read_over_min"] = mine_row["pred_read_bytes"] / mine_row["min_read_bytes"]
KEY["derived"]["pred_write_over_min"] = mine_row["pred_write_bytes"] / mine_row["min_write_bytes"]
display(Markdown(
    f"`{MY.name}` at 1048576x2 fp32: predicted {fmt_bytes(mine_row['pred_read_bytes'])} of loads and "
    f"{fmt_bytes(mine_row['pred_write_bytes'])} of stores through L1, "
    f"{KEY['derived']['pred_read_over_min']:.1f}x and {KEY['derived']['pred_write_over_min']:.1f}x the "
    "minimum."))

# %% [markdown]
# ## 4. Measure it
#
# Measuring needs a CUDA GPU and Nsight Compute. `memtraffic.ncu.command` finds `ncu` the way
# `memtraffic measure` does ($MEMTRAFFIC_NCU, then PATH, the CUDA toolkit, /opt/nvidia/nsight-compute).

# %%
from memtraffic.measure.gpu import require_gpu  # noqa: E402
from memtraffic.ncu.command import find_ncu, ncu_version  # noqa: E402

try:
    NCU = find_ncu()
    ncu_version(NCU)
    GPU = require_gpu("measuring a variant needs one")
    CAN_MEASURE, WHY_NOT = True, ""
except MemtrafficError as err:
    CAN_MEASURE, WHY_NOT = False, str(err)
print(f"measuring with {NCU} on {GPU}" if CAN_MEASURE else f"not measuring here: {WHY_NOT}")

# %% [markdown]
# What the measurement does, step by step (it is `memtraffic measure ... --variants my_variants.py`:
# the plan records your file, and the profiled runner loads it with the same loader):
#
# 1. a plan: every config (variant, shape, dtype, parameters) with its minimum and predicted traffic;
# 2. ncu runs `memtraffic.measure.runner` on the plan: each config is warmed up, checked, then run once inside
#    its own NVTX range, which is all ncu profiles;
# 3. the report is read and analyzed against the plan, exactly as `memtraffic analyze` does.

# %%
def measure_with_my_variants(variants: list[str], shape: str, dtype: str) -> tuple[pd.DataFrame, Path]:
    """`memtraffic measure VARIANTS --variants my_variants.py --shape SHAPE --dtype DTYPE`, from Python."""
    from memtraffic.api import run_measure
    from memtraffic.measure.measure import MeasureOptions

    result = run_measure(MeasureOptions(variants=variants, shapes=[shape], dtypes=[dtype],
                                        variant_files=[str(MODULE)], runs_root=ROOT / "reports" / "runs"))
    return result.table, result.run_dir


# %%
COMPARE = [MY.name, "softmax_tiled", "softmax_naive"]
if CAN_MEASURE:
    table, run_dir = measure_with_my_variants(COMPARE, "1048576x2", "fp32")
    SOURCE = f"measured now on the {GPU}, saved in {run_dir.relative_to(ROOT)}"
    KEY["source"] = "measured"
else:
    committed = analyze_path(REPORTS / "seed_1048576x2_fp32")
    table = committed[committed["variant"].isin(COMPARE)].reset_index(drop=True)
    SOURCE = (f"committed reference run reports/h100/seed_1048576x2_fp32 ({table['device'].iloc[0]}); "
              f"{MY.name} itself was not measured here")
    KEY["source"] = "committed"
    for r in table.to_dict("records"):
        KEY["reports"].setdefault("seed_1048576x2_fp32", {})[r["range"]] = {
            c: r[c] for c in ("l1_ld_bytes", "l1_st_bytes", "dram_rd_bytes", "time_ns")}
print(SOURCE)
print(results_table(table))

# %% [markdown]
# ## 5. Prediction against measurement
#
# For each variant: the model's L1 bytes and, where measured, ncu's. A ratio far from one means the
# model misses something about the access pattern, and is the interesting part.

# %%
rows = []
for v in COMPARE:
    pred = VARIANTS[v].predicted(SHAPE, DTYPE, dict(VARIANTS[v].params))
    got = table[table["variant"] == v]
    row = {"variant": v, "predicted L1 loads": fmt_bytes(pred.read),
           "predicted L1 stores": fmt_bytes(pred.write), "measured L1 loads": "-", "measured L1 stores": "-",
           "measured / predicted loads": None}
    if len(got):
        r = got.iloc[0]
        row.update({"measured L1 loads": fmt_bytes(r["l1_ld_bytes"]),
                    "measured L1 stores": fmt_bytes(r["l1_st_bytes"]),
                    "measured / predicted loads": r["l1_ld_bytes"] / pred.read})
    rows.append(row)
comparison = pd.DataFrame(rows)
display(comparison.style.format({"measured / predicted loads": lambda x: "-" if pd.isna(x) else f"{x:.2f}"})
        .hide(axis="index"))
if KEY["source"] == "measured":
    r = table[table["variant"] == MY.name].iloc[0]
    KEY["measured"] = {c: r[c] for c in ("l1_ld_bytes", "l1_st_bytes", "min_read_bytes", "min_write_bytes",
                                         "req_ld_bytes", "dram_rd_bytes", "time_ns")}
    display(Markdown(f"`{MY.name}`: {r['l1_ld_bytes'] / r['min_read_bytes']:.2f}x the minimum at L1 loads, "
                     f"{r['l1_st_bytes'] / r['min_write_bytes']:.2f}x at L1 stores; sector efficiency of its "
                     f"loads {r['sector_eff_ld']:.2f}. Diagnosis: {r['diagnosis'] or 'none'}"))
else:
    display(Markdown(f"Run this notebook on a machine with a CUDA GPU and ncu to fill in `{MY.name}`'s "
                     "measured column."))

# %% [markdown]
# ## 6. Your turn
#
# - Make `softmax_pairs` reach the minimum: load the two columns as one (BLOCK, 2) tile with a single
#   `tl.load` so that a warp's request is contiguous (that is `softmax_tiled` in `kernels/softmax_rows.py`),
#   update `predicted`, and measure again.
# - Try `num_warps=8` or a smaller `BLOCK`: does the model still hold? (Hint: a tile smaller than
#   `32 * num_warps` elements wraps around, as in notebook 02.)
# - Your file works from the command line as it is: `memtraffic list --variants my_variants.py`,
#   `memtraffic measure softmax_pairs --variants my_variants.py --shape 1048576x2`, and `memtraffic bench`
#   with the same option. To ship it with memtraffic, put the module in `kernels/` and add it to the
#   `VARIANTS` dict in `kernels/__init__.py`.

# %% tags=["key-numbers"]
print(json.dumps(KEY, indent=1, sort_keys=True, default=lambda x: x.item() if hasattr(x, "item") else str(x)))
