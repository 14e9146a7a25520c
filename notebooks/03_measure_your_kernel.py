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
# The measuring cells need a CUDA GPU and `ncu`. The outputs you see here were measured on an NVIDIA H100
# (the measuring cell prints the GPU and the date); the run they come from is committed in
# `reports/h100/lesson03_softmax_pairs_1048576x2_fp32`. Without a GPU (a laptop, CI) the notebook says so
# and reads that committed run instead, so it shows the same tables. The last section
# measures any code of yours straight from a cell (`%%memtraffic`). Only memtraffic's public API is used
# (`import memtraffic`).

# %%
import tempfile
from pathlib import Path

import pandas as pd
import torch

import memtraffic
from memtraffic import fmt_bytes, fmt_time, show


def find_root() -> Path:
    """The repository folder holding reports/h100 (the notebook may run from notebooks/ or the root)."""
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "reports" / "h100").is_dir():
            return folder
    raise FileNotFoundError("run this notebook inside the memtraffic repository: reports/h100 holds the runs")


ROOT = find_root()
REPORTS = ROOT / "reports" / "h100"
# On a machine without a CUDA GPU, memtraffic runs Triton kernels in Triton's interpreter (slow, exact).
device = "cuda" if torch.cuda.is_available() else "cpu"

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

from memtraffic import Traffic, Variant, element_size


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
VARIANTS = memtraffic.load_variants(MODULE)
MY = VARIANTS["softmax_pairs"]
print(f"registered {MY.name}: {MY.description}")

# %% [markdown]
# ## 2. Check it on the CPU
#
# The same check the measuring process applies before ncu counts anything (`memtraffic.check_variant`:
# the variant's output against the op's float64 reference), on small shapes that the Triton interpreter
# runs quickly.

# %%
TOLERANCE = {"fp32": 1e-6, "bf16": 1e-2}  # what each dtype can hold of a probability near 1
for shape, dtype in [("1000x2", "fp32"), ("4096x2", "bf16")]:
    err = memtraffic.check_variant(MY, shape, dtype, BLOCK=256)
    assert err < TOLERANCE[dtype], err
    print(f"{MY.name} {shape} {dtype}: max abs error below {TOLERANCE[dtype]:g} against float64 - ok")
try:
    memtraffic.check_variant(MY, "1000x3")
except memtraffic.MemtrafficError as refused:
    print("refused:", refused)

# %% [markdown]
# ## 3. List and describe it beside the suite
#
# `memtraffic list` prints this table for the variants in `kernels/`; here it includes yours. "pred/min"
# is each variant's predicted L1 traffic over the op's minimum.

# %%
SHAPE, DTYPE = "1048576x2", "fp32"
names = ["softmax_naive", "softmax_tiled", "torch_softmax", MY.name]
listing = memtraffic.list_variants(SHAPE, DTYPE, variant_files=[MODULE]).set_index("name").loc[names]
show(pd.DataFrame({
    "variant": names, "min read": listing["min_read_bytes"].map(fmt_bytes).tolist(),
    "min write": listing["min_write_bytes"].map(fmt_bytes).tolist(),
    "pred read": listing["pred_read_bytes"].map(fmt_bytes).tolist(),
    "pred write": listing["pred_write_bytes"].map(fmt_bytes).tolist(),
    "pred/min": ((listing["pred_read_bytes"] + listing["pred_write_bytes"])
                 / (listing["min_read_bytes"] + listing["min_write_bytes"])).map("{:.2f}x".format).tolist(),
}))
mine = listing.loc[MY.name]
show(f"`{MY.name}` at {SHAPE} {DTYPE}: predicted {fmt_bytes(mine['pred_read_bytes'])} of loads and "
     f"{fmt_bytes(mine['pred_write_bytes'])} of stores through L1, "
     f"{mine['pred_read_bytes'] / mine['min_read_bytes']:.1f}x and "
     f"{mine['pred_write_bytes'] / mine['min_write_bytes']:.1f}x the minimum.")

# %% [markdown]
# ## 4. Measure it
#
# `memtraffic.measure_variants` is `memtraffic measure VARIANTS --variants my_variants.py --shape S
# --dtype D` from Python, step by step:
#
# 1. a plan: every config (variant, shape, dtype, parameters) with its minimum and predicted traffic;
# 2. ncu runs memtraffic's runner on the plan in a fresh process (your file is loaded there by the same
#    loader): each config is warmed up, checked, then run once inside its own NVTX range, which is all
#    ncu profiles;
# 3. the report is read and analyzed against the plan, exactly as `memtraffic analyze` does, into a new
#    run folder.
#
# It needs a CUDA GPU and Nsight Compute; without them it says which is missing and reads the run this
# cell made on an H100, committed in `reports/h100/`. (Its output below is the H100's.)

# %% tags=["gpu"]
COMPARE = [MY.name, "softmax_tiled", "softmax_naive"]
COMMITTED = REPORTS / "lesson03_softmax_pairs_1048576x2_fp32"  # this cell's run on an H100
try:
    # metrics="traffic": every counter for every variant, as the committed run (measure's default, auto,
    # adds the request and sector counters only where L1 efficiency is below 0.9)
    run_dir = memtraffic.measure_variants(*COMPARE, shape=SHAPE, dtype=DTYPE, variant_files=[MODULE],
                                          metrics="traffic",
                                          runs_root=ROOT / "reports" / "runs",
                                          echo=lambda line: print(line.replace(f"{ROOT}/", ""))).run_dir
    print(f"saved in {run_dir.relative_to(ROOT)}")
except memtraffic.MemtrafficError as err:
    run_dir = COMMITTED
    print(f"not measured here ({err}); reading {COMMITTED.relative_to(ROOT)} instead")

# %% [markdown]
# The run, read back as `memtraffic analyze` reads it: the GPU it was measured on, its date, and per
# config the time, the bytes at each level, the minimum and the findings.

# %%
run = memtraffic.load_run(run_dir)
table = memtraffic.analyze(run)
env = run.meta["environment"]
print(f"{', '.join(COMPARE)} at {SHAPE} {DTYPE}, measured on an {env['gpu']} on {run.meta['started'][:10]} "
      f"(ncu {env['ncu_version']}, torch {env['torch']}, triton {env['triton']})")
show(pd.DataFrame({
    "config": table["range"], "time": table["time_ns"].map(fmt_time),
    "L1 loads": table["l1_ld_bytes"].map(fmt_bytes), "L1 stores": table["l1_st_bytes"].map(fmt_bytes),
    "DRAM reads": table["dram_rd_bytes"].map(fmt_bytes), "minimum": table["min_bytes"].map(fmt_bytes),
    "eff L1 ld": table["eff_l1_ld"].map("{:.2f}".format)}))
show("\n".join(f"- `{r['variant']}`: {r['diagnosis']}" for r in table.to_dict("records") if r["diagnosis"]))

# %% [markdown]
# ## 5. Prediction against measurement
#
# For each variant: the model's L1 bytes and, where measured, ncu's. A ratio far from one means the
# model misses something about the access pattern, and is the interesting part.

# %%
rows = []
for v in COMPARE:
    pred = memtraffic.predicted(VARIANTS[v], SHAPE, DTYPE)
    got = table[table["variant"] == v]
    row = {"variant": v, "predicted L1 loads": fmt_bytes(pred["read"]),
           "predicted L1 stores": fmt_bytes(pred["write"]), "measured L1 loads": "-",
           "measured L1 stores": "-", "measured / predicted loads": "-"}
    if len(got):
        r = got.iloc[0]
        row.update({"measured L1 loads": fmt_bytes(r["l1_ld_bytes"]),
                    "measured L1 stores": fmt_bytes(r["l1_st_bytes"]),
                    "measured / predicted loads": f"{r['l1_ld_bytes'] / pred['read']:.2f}"})
    rows.append(row)
show(pd.DataFrame(rows))
if MY.name in set(table["variant"]):
    r = table[table["variant"] == MY.name].iloc[0]
    show(f"`{MY.name}`: {r['l1_ld_bytes'] / r['min_read_bytes']:.2f}x the minimum at L1 loads, "
         f"{r['l1_st_bytes'] / r['min_write_bytes']:.2f}x at L1 stores; sector efficiency of its "
         f"loads {r['sector_eff_ld']:.2f}. Diagnosis: {r['diagnosis'] or 'none'}")
else:
    show(f"Run this notebook on a machine with a CUDA GPU and ncu to fill in `{MY.name}`'s measured column.")

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


# %% [markdown]
# ## 7. Measure any code from a cell
#
# Not every kernel is a variant. `%load_ext memtraffic` adds a cell magic: `%%memtraffic [OPTIONS]`
# runs the cell as a program under ncu (`memtraffic profile [OPTIONS] -- python CELL.py`) and returns
# its analysis. With `--torch-ops` every aten op the cell runs gets its own range and its minimum. The
# cell runs in a fresh Python (ncu starts the process it measures), so it builds what it measures
# itself: the notebook's variables are not there. Other options: `--kernel-name REGEX`,
# `--launch-count N`, `--source` (per-line counters), `--out DIR`.
#
# Without a GPU and ncu the cell prints why it could not measure and returns nothing. (The output
# committed below is the H100's; this cell alone cannot be reproduced without a GPU.)

# %%
# %load_ext memtraffic

# %% tags=["gpu"]
# %%memtraffic --torch-ops
import torch  # noqa: E402 - the cell is a program of its own

x = torch.randn(8192, 8192, device="cuda" if torch.cuda.is_available() else "cpu")
y = torch.softmax(x, dim=-1)
