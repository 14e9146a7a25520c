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
# # Where softmax's bytes go
#
# Softmax over the rows of a matrix is memory-bound (notebook 01): its speed is a matter of bytes. Yet
# two kernels that both read every input element once *in the source code* can differ by a large
# factor in the bytes the memory system moves, and by more in time. This notebook reads the committed
# H100 reference runs and explains, from the counters, where the difference comes from:
#
# 1. one row per program, many rows per program, and `torch.softmax` on a matrix of 1M rows of 2 columns;
# 2. sector granularity and redundant loads, the two factors behind the naive kernel's amplification;
# 3. why the caches hide the excess from DRAM but not from the clock;
# 4. five unfused kernels against one fused kernel;
# 5. long rows: one pass, the online softmax (two reads) and the three-pass softmax;
# 6. softmax down columns: strided against coalesced;
# 7. which source line moves the bytes, naive against tiled.
#
# Every number is computed from `reports/h100/*/profile.ncu-rep` by `memtraffic.analyze(run)`, the same
# code as `memtraffic analyze`; none is typed in.

# %%
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

import memtraffic
from memtraffic import fmt_bytes, fmt_rate, fmt_time, show

SECTOR_BYTES = 32  # the unit L1 and L2 move: a request that uses part of a sector moves all of it


def find_root() -> Path:
    """The repository folder holding reports/h100 (the notebook may run from notebooks/ or the root)."""
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "reports" / "h100").is_dir():
            return folder
    raise FileNotFoundError("run this notebook inside the memtraffic repository: reports/h100 holds the runs")


ROOT = find_root()
REPORTS = ROOT / "reports" / "h100"
ROOFS_FILE = next((ROOT / "reports" / "roofs").glob("*H100*.json"))
ROOFS = memtraffic.roofs(ROOFS_FILE)
RUNS = {name: memtraffic.analyze(REPORTS / name) for name in
        ("seed_1048576x2_fp32", "suite_1048576x2_fp32", "suite_8192x8192", "suite_4096x4096",
         "split_lag_16384x131072")}


def rows_of(run: str, *ranges: str) -> pd.DataFrame:
    """The rows of a run with these NVTX ranges, in this order."""
    table = RUNS[run].set_index("range")
    missing = [r for r in ranges if r not in table.index]
    assert not missing, f"{run} lacks {missing}"
    return table.loc[list(ranges)].reset_index()


def name(r) -> str:
    return f"{r['variant']} {r['shape']} {r['dtype']}"


def amplification_bars(df: pd.DataFrame, title: str) -> go.Figure:
    """Per variant: bytes / minimum of that direction at L1 and DRAM, and the kernel time beside it.

    DRAM writes are left out: part of a kernel's output is often still in L2 when it ends, so they read
    as below the minimum (see the tables for them)."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.68, 0.32], horizontal_spacing=0.08,
                        subplot_titles=("bytes moved / minimum of that direction", "kernel time"))
    series = [("L1 loads", "l1_ld_bytes", "min_read_bytes", "#2ca02c"),
              ("L1 stores", "l1_st_bytes", "min_write_bytes", "#98df8a"),
              ("DRAM reads", "dram_rd_bytes", "min_read_bytes", "#1f77b4")]
    labels = [f"{r['variant']}<br>{r['shape']} {r['dtype']}" for r in df.to_dict("records")]
    for label, col, minimum, color in series:
        ratio = df[col] / df[minimum]
        hover = [f"{lab}<br>{label}: {fmt_bytes(b)} = {v:.2f}x the minimum {fmt_bytes(m)}"
                 for lab, b, v, m in zip(labels, df[col], ratio, df[minimum], strict=True)]
        fig.add_trace(go.Bar(x=labels, y=ratio, name=label, marker_color=color,
                             text=[f"{v:.2f}x" for v in ratio], textposition="outside", textfont_size=10,
                             hovertext=hover, hoverinfo="text"), row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=df["time_ns"] / 1e3, name="time", marker_color="#555555",
                         text=[fmt_time(t) for t in df["time_ns"]], textposition="outside", textfont_size=10),
                  row=1, col=2)
    fig.add_hline(y=1, line_dash="dash", line_color="#222222", row=1, col=1)
    fig.update_layout(title=title, barmode="group", template="plotly_white", height=520, width=1250,
                      legend={"orientation": "h", "y": 1.13, "x": 0})
    fig.update_xaxes(tickangle=-90 if len(df) > 4 else 0, tickfont_size=10)
    fig.update_yaxes(type="log", title_text="x the minimum (log)", row=1, col=1)
    fig.update_yaxes(title_text="microseconds", row=1, col=2)
    return fig


# %% [markdown]
# ## 1. A million rows of two columns
#
# The input is an Mx2 fp32 matrix: each row is two 4-byte numbers, 8 contiguous bytes. Any softmax
# must read the matrix once and write it once; that is the **minimum**. Three implementations ran under
# Nsight Compute on the H100:
#
# - `softmax_naive`: the Triton tutorial kernel, **one row per program** (one program per row, each of
#   `num_warps` warps);
# - `softmax_tiled`: **many rows per program**, a 2-D tile of `BLOCK_M` rows reduced along its columns;
# - `torch_softmax`: the library's `softmax_warp_forward`.

# %%
SEED = "seed_1048576x2_fp32"
seed = rows_of(SEED, "mt|softmax_naive|1048576x2|fp32|num_warps=4",
               "mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128", "mt|torch_softmax|1048576x2|fp32")
naive, tiled, torch_row = (seed.iloc[i] for i in range(3))
m, n = (int(x) for x in naive["shape"].split("x"))
elem = memtraffic.element_size(naive["dtype"])
show(
    f"{m} rows x {n} columns x {elem} bytes: the minimum is {fmt_bytes(naive['min_read_bytes'])} read and "
    f"{fmt_bytes(naive['min_write_bytes'])} written. Measured on the {naive['device']}:")


def traffic_table(df: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "variant": [name(r) for r in df.to_dict("records")],
        "kernels": df["n_kernels"],
        "time": df["time_ns"].map(fmt_time),
        "L1 loads": df["l1_ld_bytes"].map(fmt_bytes),
        "L1 stores": df["l1_st_bytes"].map(fmt_bytes),
        "L2 rd+wr": (df["l2_rd_bytes"] + df["l2_wr_bytes"]).map(fmt_bytes),
        "DRAM reads": df["dram_rd_bytes"].map(fmt_bytes),
        "DRAM writes": df["dram_wr_bytes"].map(fmt_bytes),
        "L1 loads / min": (df["l1_ld_bytes"] / df["min_read_bytes"]).map("{:.2f}x".format),
        "DRAM reads / min": (df["dram_rd_bytes"] / df["min_read_bytes"]).map("{:.2f}x".format),
    })


show(traffic_table(seed))

# %% [markdown]
# Below, the loads of each kernel in steps: the **minimum** it needs, the bytes its load instructions
# **requested** (ncu's `smsp__sass_data_bytes_mem_global_op_ld`, the sum of the bytes each thread
# asked for), the bytes those requests **moved through L1** (whole 32-byte sectors), and what reached
# **L2** and **DRAM**.

# %%
steps = [("minimum read", "min_read_bytes", "#bbbbbb"), ("requested by the loads", "req_ld_bytes", "#98df8a"),
         ("moved through L1", "l1_ld_bytes", "#2ca02c"), ("read from L2", "l2_rd_bytes", "#ff7f0e"),
         ("read from DRAM", "dram_rd_bytes", "#1f77b4")]
fig = go.Figure()
for label, col, color in steps:
    fig.add_trace(go.Bar(x=[name(r) for r in seed.to_dict("records")], y=seed[col], name=label,
                         marker_color=color, textposition="outside",
                         text=[f"{v:.2f}x" for v in seed[col] / seed["min_read_bytes"]],
                         hovertext=[fmt_bytes(b) for b in seed[col]], hoverinfo="text+name"))
fig.update_layout(title="Loads of softmax over 1M rows of 2 fp32 columns (labels: x the minimum read)",
                  barmode="group", template="plotly_white", height=460, yaxis_title="bytes",
                  yaxis_exponentformat="SI")
show(fig)

# %% [markdown]
# ## 2. Sector granularity times redundant loads
#
# Two counters split the naive kernel's L1 load bytes into two factors:
#
# - **redundancy** = requested bytes / minimum: how many times the same input bytes were asked for;
# - **sector waste** = L1 bytes / requested bytes: the memory system moves whole 32-byte sectors, so a
#   request that uses only part of a sector still moves all of it.

# %%
def load_factors(r) -> dict:
    return {"redundancy": r["req_ld_bytes"] / r["min_read_bytes"],
            "sector_waste": r["l1_ld_bytes"] / r["req_ld_bytes"],
            "l1_ld_over_min": r["l1_ld_bytes"] / r["min_read_bytes"],
            "store_redundancy": r["req_st_bytes"] / r["min_write_bytes"],
            "store_sector_waste": r["l1_st_bytes"] / r["req_st_bytes"]}


kernels = memtraffic.load_run(REPORTS / SEED).kernels().set_index("range")  # one row per launch
factors = {}
for r in seed.to_dict("records"):
    launch = kernels.loc[r["range"]]
    f = load_factors(r) | {
        "programs": int(launch["grid_size"]), "threads_per_program": int(launch["block_size"]),
        "load_requests_per_row": r["l1_ld_requests"] / m,
        "sectors_per_load_request": r["l1_ld_sectors"] / r["l1_ld_requests"],
        "useful_bytes_per_sector": SECTOR_BYTES * r["req_ld_bytes"] / r["l1_ld_bytes"]}
    factors[r["variant"]] = f
fn, ft, fo = factors["softmax_naive"], factors["softmax_tiled"], factors["torch_softmax"]
warps = naive["params"]["num_warps"]
show(f"""
**softmax_naive** launches {fn['programs']} programs, one per row, of {fn['threads_per_program']} threads
({warps} warps). Its tile is one row: `BLOCK_N` = {n} elements. Triton lays a tile over all the threads of
the program, and a tile smaller than the threads *wraps around*: every warp holds its own copy of the row
and issues its own load. The counters agree: **{fn['load_requests_per_row']:.0f} load requests per row**,
one per warp, so the input is requested **{fn['redundancy']:.0f}x** (redundancy).

Each request fetches {n * elem} useful bytes (one row) in {fn['sectors_per_load_request']:.0f} sector of
{SECTOR_BYTES} bytes: {fn['useful_bytes_per_sector']:.0f} useful bytes per sector, a sector waste of
**{fn['sector_waste']:.0f}x**.

Together: {fn['redundancy']:.0f}x × {fn['sector_waste']:.0f}x = **{fn['l1_ld_over_min']:.0f}x** the minimum
read, {fmt_bytes(naive['l1_ld_bytes'])} through L1 for {fmt_bytes(naive['min_read_bytes'])} of input.

Stores are not replicated (Triton masks the copies so only one thread writes each element: store
redundancy {fn['store_redundancy']:.0f}x) but they waste sectors the same way
({fn['store_sector_waste']:.0f}x).

**softmax_tiled** packs `BLOCK_M` = {tiled['params']['BLOCK_M']} rows in each of its {ft['programs']}
programs: a warp's request covers consecutive rows, {ft['sectors_per_load_request']:.0f} whole sectors,
{ft['useful_bytes_per_sector']:.0f} useful bytes in each. Redundancy {ft['redundancy']:.2f}x, sector waste
{ft['sector_waste']:.2f}x: it reads exactly the minimum.

**torch_softmax** requests each byte {fo['redundancy']:.2f}x but uses
{fo['useful_bytes_per_sector']:.0f} bytes of each sector it touches: {fo['l1_ld_over_min']:.2f}x at L1.
""")

# %% [markdown]
# The variants carry their own traffic models (`memtraffic.predicted`, from Triton's layout rules and the
# sector size). Before any measurement they said:

# %%
def predicted_read(r) -> int:
    return memtraffic.predicted(r["variant"], r["shape"], r["dtype"], dict(r["params"]))["read"]


pred = pd.DataFrame([{
    "variant": name(r),
    "predicted L1 loads": fmt_bytes(predicted_read(r)),
    "measured L1 loads": fmt_bytes(r["l1_ld_bytes"]),
    "predicted / measured": predicted_read(r) / r["l1_ld_bytes"],
} for r in seed.to_dict("records")])
off = pred[(pred["predicted / measured"] - 1).abs() > 0.05]
show(pred.assign(**{"predicted / measured": pred["predicted / measured"].map("{:.2f}".format)}))
if len(off):
    show("Where the two differ (" + ", ".join(f"`{v}`" for v in off["variant"]) + "), the model "
                     "misses part of what that kernel does: a library kernel's access pattern is not "
                     "known in advance, which is what measuring is for.")

# %% [markdown]
# ## 3. The caches hide the excess from DRAM, not from the clock

# %%
dram_eff = {r["variant"]: r["dram_rd_bytes"] / r["min_read_bytes"] for r in seed.to_dict("records")}
time_ratio = naive["time_ns"] / tiled["time_ns"]
show(f"""
DRAM reads are {', '.join(f'{v:.2f}x' for v in dram_eff.values())} the minimum for the three kernels: the
repeated requests of `softmax_naive` hit in L1 and L2, so DRAM sees each byte about once. A DRAM-only view
would call the three kernels equally good.

The clock disagrees: `softmax_naive` takes {fmt_time(naive['time_ns'])}, **{time_ratio:.0f}x** the
{fmt_time(tiled['time_ns'])} of `softmax_tiled`. Its effective bandwidth (minimum bytes / time) is
{fmt_rate(naive['bw_min_Bps'])}, against {fmt_rate(tiled['bw_min_Bps'])} for the tiled kernel and the
{fmt_rate(ROOFS['measured']['dram_Bps'])} a copy reaches on this GPU. Every request and every sector
costs the SM's load/store unit and L1 time even when it hits; and one row per program means
{fn['programs'] // ft['programs']}x as many programs to schedule, each with little work.
""")
cost = pd.DataFrame({
    "variant": [name(r) for r in seed.to_dict("records")],
    "time": seed["time_ns"].map(fmt_time),
    "programs": [factors[v]["programs"] for v in seed["variant"]],
    "L1 load requests": seed["l1_ld_requests"].astype(int),
    "L1 load sectors": seed["l1_ld_sectors"].astype(int),
    "DRAM reads": seed["dram_rd_bytes"].map(fmt_bytes),
})
show(cost)

# %%
fig = make_subplots(rows=1, cols=2, subplot_titles=("DRAM reads / minimum read", "kernel time"))
labels = [name(r) for r in seed.to_dict("records")]
fig.add_trace(go.Bar(x=labels, y=seed["dram_rd_bytes"] / seed["min_read_bytes"], marker_color="#1f77b4",
                     text=[f"{v:.2f}x" for v in dram_eff.values()], textposition="outside", name="DRAM"),
              row=1, col=1)
fig.add_trace(go.Bar(x=labels, y=seed["time_ns"] / 1e3, marker_color="#555555", name="time [us]",
                     text=[fmt_time(t) for t in seed["time_ns"]], textposition="outside"), row=1, col=2)
fig.update_yaxes(title_text="x the minimum", row=1, col=1)
fig.update_yaxes(type="log", title_text="microseconds (log)", row=1, col=2)
fig.update_layout(title="Same DRAM traffic, very different time", template="plotly_white", height=420,
                  showlegend=False)
show(fig)

# %% [markdown]
# The hierarchical roofline shows the same thing level by level: each kernel's FLOPs over the bytes it
# moved at L1, at L2 and at DRAM. The distance between a kernel's L1 and DRAM intensities is the traffic
# the caches absorbed; its height is the time it took.

# %%
for r in (naive, tiled):
    print(f"{r['variant']}: intensity at L1 {r['model_flops'] / (r['l1_ld_bytes'] + r['l1_st_bytes']):.3g}, "
          f"at DRAM {r['model_flops'] / (r['dram_rd_bytes'] + r['dram_wr_bytes']):.3g} FLOP/byte; "
          f"{fmt_rate(r['model_flops'] / (r['time_ns'] * 1e-9), 'FLOP/s')}")
show(memtraffic.roofline(seed, roofs_file=ROOFS_FILE))

# %% [markdown]
# ## 4. Five kernels against one
#
# Written as five PyTorch operations (`amax`, subtract, `exp`, `sum`, divide), softmax runs five
# kernels, and every one is a pass over memory: its output goes to global memory for the next to read
# back. A fused kernel keeps each row on chip between the steps. `torch.compile` of the five
# operations fuses them into one kernel.

# %%
SUITE = "suite_1048576x2_fp32"
manual = rows_of(SUITE, "mt|torch_manual|1048576x2|fp32", "mt|torch_softmax|1048576x2|fp32",
                 "mt|torch_compiled|1048576x2|fp32", "mt|softmax_tiled|1048576x2|fp32")
big = rows_of("suite_8192x8192", "mt|torch_manual|8192x8192|fp32", "mt|torch_softmax|8192x8192|fp32",
              "mt|torch_compiled|8192x8192|fp32", "mt|softmax_tiled|8192x8192|fp32")
five = big.iloc[0]
fused = big.iloc[1:]
dram_over_min = (five["dram_rd_bytes"] + five["dram_wr_bytes"]) / (
    five["min_read_bytes"] + five["min_write_bytes"])
time_over_fused = five["time_ns"] / fused["time_ns"].min()
manual_pred = memtraffic.predicted("torch_manual", five["shape"], five["dtype"])
pred_reads = manual_pred["read"] / five["min_read_bytes"]
pred_writes = manual_pred["write"] / five["min_write_bytes"]
show(f"""
At 8192x8192 fp32 ({fmt_bytes(five['min_read_bytes'])} each way, more than the L2 cache holds) the five
kernels ({', '.join(five['kernels'])}) move {dram_over_min:.1f}x the
minimum at DRAM (the model: {pred_reads:.1f}x reads, {pred_writes:.1f}x writes) and take
{time_over_fused:.1f}x the time of the fastest fused kernel.
""")
small = manual.iloc[0]
cache_control = memtraffic.load_run(REPORTS / SUITE).meta["cache_control"]  # the run's run.json
small_pred = memtraffic.predicted("torch_manual", small["shape"], small["dtype"])
small_reads = small["dram_rd_bytes"] / small["min_read_bytes"]
small_writes = small["dram_wr_bytes"] / small["min_write_bytes"]
show(f"""
A note on how these were measured: ncu profiles each kernel on its own, and with `--cache-control
{cache_control}` (the setting of these runs) it flushes the caches before each one. So each of the five
kernels reads its input from DRAM: at {small['shape']} DRAM reads are
{small_reads:.1f}x the minimum read (the model:
{small_pred['read'] / small['min_read_bytes']:.1f}x), while each kernel's output, small enough, is still in L2
when it ends (DRAM writes {small_writes:.2f}x the minimum write). Run
back to back outside the profiler, some intermediates could stay in L2 between kernels; the L1 counters
and the time count every pass either way: {fmt_time(small['time_ns'])} for the five kernels against
{fmt_time(manual['time_ns'].iloc[1:].min())} for the fastest fused one.
""")
show(traffic_table(pd.concat([manual, big], ignore_index=True)))

# %%
show(amplification_bars(pd.concat([manual, big], ignore_index=True),
                        "Five kernels (torch_manual) against fused ones, at two shapes"))

# %% [markdown]
# `memtraffic report` draws the same comparison per level (read + write), as below.

# %%
show(memtraffic.traffic(big))

# %% [markdown]
# ## 5. Long rows: one pass, online softmax, three passes
#
# A row that does not fit in registers must be streamed in blocks. Softmax needs the row's maximum
# before the exponentials and their sum before the division, so a streaming kernel reads the row more
# than once:
#
# - **three passes** (`softmax_3pass`): a loop for the max, one for the sum, one to write: 3 reads;
# - **online softmax** (`softmax_online`): one loop carries the running max and the running sum together,
#   rescaling the sum by exp(old max - new max) whenever the max grows; then a write loop: 2 reads;
# - **one pass** (`softmax_tiled`, `softmax_naive`): the whole row in registers, possible up to a limit
#   of the row length.

# %%
long_rows = rows_of("suite_8192x8192", "mt|softmax_tiled|8192x8192|fp32", "mt|softmax_online|8192x8192|fp32",
                    "mt|softmax_3pass|8192x8192|fp32")
one, online, three = (long_rows.iloc[i] for i in range(3))
dram_follows = all(r["dram_rd_bytes"] > 0.9 * r["l1_ld_bytes"] for r in (online, three))
cache_note = (f"at this size ({fmt_bytes(one['min_read_bytes'])}) L2 keeps almost nothing of a row between "
              "passes, so DRAM pays for every pass." if dram_follows else
              "L2 keeps part of each row between passes, so DRAM pays for less than every pass.")
l1_reads = [r["l1_ld_bytes"] / r["min_read_bytes"] for r in (one, online, three)]
dram_reads = [r["dram_rd_bytes"] / r["min_read_bytes"] for r in (one, online, three)]
show(f"""
At L1 the passes show exactly: {l1_reads[0]:.2f}x, {l1_reads[1]:.2f}x and {l1_reads[2]:.2f}x the minimum
read. DRAM reads are {dram_reads[0]:.2f}x, {dram_reads[1]:.2f}x and {dram_reads[2]:.2f}x: {cache_note}
Time follows: {fmt_time(one['time_ns'])}, {fmt_time(online['time_ns'])}, {fmt_time(three['time_ns'])}.
The online softmax saves a full read of the input over three passes, which is why fused attention
kernels use it.
""")
show(amplification_bars(long_rows, "Rows of 8192 fp32: passes over memory"))

# %% [markdown]
# At 1M rows of 2 columns the online and three-pass kernels also run one row per program, so they pay
# the naive kernel's redundancy and sector waste once per pass:

# %%
short = rows_of(SUITE, "mt|softmax_naive|1048576x2|fp32", "mt|softmax_online|1048576x2|fp32",
                "mt|softmax_3pass|1048576x2|fp32")
show(pd.DataFrame({
    "variant": [name(r) for r in short.to_dict("records")],
    "L1 loads / min": (short["l1_ld_bytes"] / short["min_read_bytes"]).map("{:.0f}x".format),
    "sector waste": (short["l1_ld_bytes"] / short["req_ld_bytes"]).map("{:.0f}x".format),
    "requested / min": (short["req_ld_bytes"] / short["min_read_bytes"]).map("{:.0f}x".format),
    "time": short["time_ns"].map(fmt_time)}))

# %% [markdown]
# Rows too long for one program's registers (131072 elements) cannot be read once by one program, and
# read twice they do not stay in L2. `softmax_split` gives each row's chunks to several programs, each
# holding its chunk in registers; they exchange each chunk's (max, sum) through global memory, then
# each writes its chunk: one read and one write of the matrix. A program waits for the rest of its row
# by reading the row's slots until all are written. Those polls are loads too, and how many there are
# depends on timing, so the model counts one read a chunk, a lower bound:

# %%
split = rows_of("split_lag_16384x131072", "mt|softmax_split|16384x131072|bf16",
                "mt|softmax_split|16384x131072|fp32")
lines = []
for r in split.to_dict("records"):
    model = memtraffic.predicted("softmax_split", r["shape"], r["dtype"])["read"]
    lines.append(f"- {r['dtype']}: L1 loads {r['l1_ld_bytes'] / r['min_read_bytes']:.2f}x the minimum read "
                 f"(the model: {model / r['min_read_bytes']:.2f}x), DRAM reads "
                 f"{r['dram_rd_bytes'] / r['min_read_bytes']:.2f}x, in {fmt_time(r['time_ns'])}")
show("\n".join(lines) + "\n\nThe polls stay in the caches: DRAM sees one read. Under ncu "
                 "the time is the profiled kernel's; `memtraffic bench` times it against a copy.")

# %% [markdown]
# ## 6. Down the columns: strided against coalesced
#
# Softmax over dim 0 reduces down each column of a row-major matrix: consecutive elements of one
# reduction are a whole row apart in memory.
#
# - `softmax_column_strided`: one program per column. A warp's lanes take elements of *different rows*
#   of the same column, each in its own sector.
# - `softmax_column_coalesced`: each program owns a band of contiguous columns and walks down the rows:
#   a warp's request is a contiguous run of one row.
#
# Both make two passes (an online max+sum pass, then a write pass), so even the coalesced one reads the
# input twice at L1.

# %%
COLS = "suite_4096x4096"
cols = rows_of(COLS, "mt|softmax_column_strided|4096x4096|fp32", "mt|softmax_column_coalesced|4096x4096|fp32",
               "mt|softmax_column_strided|4096x4096|bf16", "mt|softmax_column_coalesced|4096x4096|bf16")
lines = []
for r in cols.to_dict("records"):
    useful = SECTOR_BYTES * r["req_ld_bytes"] / r["l1_ld_bytes"]
    dram = (r["dram_rd_bytes"] + r["dram_wr_bytes"]) / (r["min_read_bytes"] + r["min_write_bytes"])
    lines.append(f"- `{r['variant']}` {r['dtype']} ({memtraffic.element_size(r['dtype'])}-byte elements): "
                 f"{useful:.0f} useful bytes per {SECTOR_BYTES}-byte sector, L1 loads "
                 f"{r['l1_ld_bytes'] / r['min_read_bytes']:.1f}x the minimum, DRAM reads+writes "
                 f"{dram:.2f}x, "
                 f"{fmt_time(r['time_ns'])}")
strided, coalesced = cols.iloc[0], cols.iloc[1]
per_sector = {(r["variant"], r["dtype"]): SECTOR_BYTES * r["req_ld_bytes"] / r["l1_ld_bytes"]
              / memtraffic.element_size(r["dtype"]) for r in cols.to_dict("records")}
strided_counts = {v for (name_, _), v in per_sector.items() if name_ == "softmax_column_strided"}
assert len(strided_counts) == 1, per_sector  # the sentence below assumes fp32 and bf16 agree
strided_elems = strided_counts.pop()
strided_over_coalesced = strided["time_ns"] / coalesced["time_ns"]
show("\n".join(lines) + f"""

A strided load uses {strided_elems:.0f} element of each sector it moves, whatever the element size, so
the smaller the element the larger the waste. The strided fp32 kernel takes
{strided_over_coalesced:.1f}x the time of the coalesced one. The same
bytes of input, read in a different order.
""")
show(amplification_bars(cols, "Softmax down the columns of 4096x4096"))

# %% [markdown]
# ## 7. Which line moves the bytes
#
# The counters so far are per kernel. Measured with `memtraffic measure --source` (ncu's SourceCounters
# section), a report also holds them per instruction, and `memtraffic lines` sums them per source line.
# ncu judges a line by its *excessive sectors*: sectors beyond those its requests' distinct bytes need.
# That catches waste inside one request (the strided column kernel of section 6), but not a request
# smaller than a sector, nor warps or programs asking for the same bytes again. memtraffic judges each
# line by the two factors of section 2 instead: bytes used per sector and requests per useful byte, from
# the bytes the instructions asked for (the kernel's counter, which a line carrying all of its kernel's
# loads shares).

# %%
SOURCE = "source_seed_1048576x2_fp32"
per_line = memtraffic.lines(REPORTS / SOURCE, kernel="naive|tiled")
SHOWN = ["kernel", "line", "operation", "sectors", "ideal_sectors", "ncu_excessive_sectors", "excess_sectors",
         "verdict"]
show(pd.DataFrame([{k: r[k] for k in SHOWN} | {"moved": fmt_bytes(r["bytes_moved"])} for r in per_line]))
naive_load = next(r for r in per_line if r["kernel"] == "_softmax_naive_kernel" and r["operation"] == "load")
tiled_lines = [r for r in per_line if r["kernel"] == "_softmax_tiled_kernel"]
show(f"""
The naive kernel's load, line {naive_load['line']}:

`{naive_load['source']}`

has {naive_load['ncu_excessive_sectors']} excessive sectors by ncu's rule: every request touches only the
sectors its own bytes need. Yet the line moves {fmt_bytes(naive_load['bytes_moved'])},
{naive_load['bytes_moved'] / naive_load['min_bytes']:.0f}x the kernel's minimum read
({fmt_bytes(naive_load['min_bytes'])}), for {fmt_bytes(naive_load['bytes_requested'])} its instructions asked
for: *{naive_load['verdict']}*. The tiled kernel's
lines move {fmt_bytes(sum(r['bytes_moved'] for r in tiled_lines))} for a minimum of
{fmt_bytes(sum(r['min_bytes'] for r in tiled_lines))}: {", ".join(r['verdict'] for r in tiled_lines)}.
""")

fig = go.Figure()
labels = [f"{r['kernel'].strip('_').removesuffix('_kernel')} line {r['line']} ({r['operation']})"
          for r in per_line]
needed = [(r["bytes_moved"] - r["excess_sectors"] * SECTOR_BYTES) / 1e6 for r in per_line]
excess = [r["excess_sectors"] * SECTOR_BYTES / 1e6 for r in per_line]
fig.add_trace(go.Bar(y=labels, x=needed, orientation="h", name="within the minimum", marker_color="#44aa88"))
fig.add_trace(go.Bar(y=labels, x=excess, orientation="h", name="excess", marker_color="#dd4444"))
fig.update_layout(barmode="stack", template="plotly_white", height=320, width=900,
                  title="Bytes each source line moves (sectors x 32)", xaxis_title="MB",
                  yaxis={"autorange": "reversed"})
show(fig)

# %% [markdown]
# ## What to take away
#
# - Count the minimum first; then read the measured bytes at each level against it.
# - L1 bytes over requested bytes is sector waste (fix: make a warp's request contiguous); requested
#   bytes over the minimum is redundancy (fix: no thread loads what another already has, no extra pass).
# - DRAM is not the whole story: caches absorb redundant traffic, but the SM still pays for every
#   request and sector in time.
# - Fusion removes whole passes over memory; the online softmax removes one of the passes a long row needs.
# - Per source line (`memtraffic lines`), ncu's excessive sectors name sector waste; redundancy shows only
#   against the minimum.
#
# Notebook 03 shows how to add a kernel of your own with its predicted traffic, and measure it.
