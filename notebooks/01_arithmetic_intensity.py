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
# # Arithmetic intensity and the roofline
#
# A kernel does two things: it moves bytes between memory and the chip, and it computes. Whichever
# takes longer sets its time. This notebook counts both for three operations (elementwise GELU, row
# softmax, matrix multiply), places the real H100 measurements committed under `reports/h100/` on a
# roofline, and ends with exercises whose answers the models compute.
#
# It needs no GPU: every number below is read from the committed Nsight Compute reports
# (`profile.ncu-rep`) and from the roofs measured on the same H100 (`reports/roofs/`), or
# computed by memtraffic's models (`memtraffic.minimum`). None is typed in. It uses only memtraffic's
# public API (`import memtraffic`).

# %%
from pathlib import Path

import pandas as pd

import memtraffic
from memtraffic import fmt_bytes, fmt_rate, fmt_time, show


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
DEVICE = ROOFS["device"]
print(f"reports from {REPORTS.relative_to(ROOT)}; roofs of the {DEVICE}, measured {ROOFS['date']}")

# %% [markdown]
# ## FLOPs per byte
#
# **Arithmetic intensity** is the work an operation does per byte it moves:
#
# $$ I = \frac{\text{FLOPs}}{\text{bytes moved}} \quad [\text{FLOP/byte}] $$
#
# The bytes depend on the implementation (a kernel that reads its input twice halves its intensity), so
# we start from the smallest number any implementation can reach: the **minimum traffic**, every input
# element read once from global memory and every output element written once. For the three operations:
#
# | operation | reads | writes | FLOPs |
# |---|---|---|---|
# | GELU on an MxN tensor | MN elements | MN elements | a handful per element |
# | softmax over each row of an MxN matrix | MN | MN | a handful per element |
# | matmul C = A @ B, A is MxK, B is KxN | MK + KN | MN | 2MNK (a multiply and an add per term) |
#
# `memtraffic.minimum(op, shape, dtype)` gives these counts. Here is the softmax minimum counted by hand,
# then checked against the model:

# %%
def softmax_minimum_by_hand(m: int, n: int, element_bytes: int) -> tuple[int, int]:
    read = m * n * element_bytes  # every input element once
    write = m * n * element_bytes  # every output element once
    return read, write


shape, dtype = (1048576, 2), "fp32"
by_hand = softmax_minimum_by_hand(*shape, memtraffic.element_size(dtype))
model = memtraffic.minimum("softmax", shape, dtype)
assert by_hand == (model["read"], model["write"])
print(f"softmax {model['shape']} fp32: read {fmt_bytes(model['read'])}, write {fmt_bytes(model['write'])} "
      f"(by hand and by the model)")
print("FLOPs counted as:", model["flops_note"])

# %% [markdown]
# The same count for each operation at the shapes of the committed reference runs. Note how the
# intensity behaves: for GELU and softmax it is a constant (a few FLOPs per element, whatever the size),
# while for matmul it grows with the matrix, because each input element takes part in many products.

# %%
CASES = [  # (op, shape, dtype): the shapes the reference runs measured
    ("gelu", (8192, 8192), "fp32"),
    ("softmax", (1048576, 2), "fp32"),
    ("softmax", (8192, 8192), "fp32"),
    ("matmul", (4096, 4096, 4096), "fp32"),
    ("matmul", (4096, 4096, 4096), "bf16"),
]


def model_row(op: str, shape: tuple[int, ...], dtype: str) -> dict:
    m = memtraffic.minimum(op, shape, dtype)
    return {"op": op, "shape": m["shape"], "dtype": dtype, "min read": fmt_bytes(m["read"]),
            "min write": fmt_bytes(m["write"]), "FLOPs": f"{m['flops']:.3g}",
            "intensity [FLOP/B]": f"{m['intensity']:.3g}"}


show(pd.DataFrame([model_row(*case) for case in CASES]))

# %% [markdown]
# ## The roofline model
#
# A kernel cannot finish before its bytes have crossed the memory bus, nor before its FLOPs have gone
# through the arithmetic units. With a bandwidth $B$ (bytes/s) and a peak compute rate $P$ (FLOP/s),
# its performance (FLOPs per second of kernel time) is bounded by
#
# $$ \text{performance} \le \min(P,\; I \cdot B). $$
#
# On a log-log plot of performance against intensity, $I \cdot B$ is a line of slope one (the *memory
# roof*) and $P$ is a flat line (the *compute roof*). They meet at the **ridge point** $I^* = P / B$:
# an operation whose intensity is below the ridge is *memory-bound* (bytes set its time, and the only
# way to speed it up is to move fewer bytes or move them faster), above it *compute-bound*.
#
# The roofs below were measured on the same H100 as the reports (`memtraffic roofs`), next to
# the theoretical peaks ncu computes from clocks. The *method* line says how each was measured.

# %%
roofs = []
for kind in ("measured", "ncu_theoretical"):
    for key, value in sorted(ROOFS.get(kind, {}).items()):
        unit = "B/s" if key.endswith("_Bps") else "FLOP/s"
        roofs.append({"kind": kind, "roof": key, "value": fmt_rate(value, unit),
                      "method": ROOFS.get("method", {}).get(key, "") if kind == "measured" else
                      ROOFS.get("ncu_note", "")})
show(pd.DataFrame(roofs))

# %%
measured = ROOFS["measured"]
ridge_fp32 = measured["fp32_flops"] / measured["dram_Bps"]
ridge_bf16 = measured["bf16_tc_flops"] / measured["dram_Bps"]
show(
    f"Measured ridge points of the {DEVICE} against DRAM ({fmt_rate(measured['dram_Bps'])}): "
    f"**{ridge_fp32:.1f} FLOP/byte** for FP32 on CUDA cores ({fmt_rate(measured['fp32_flops'], 'FLOP/s')}) "
    f"and **{ridge_bf16:.0f} FLOP/byte** for BF16 on tensor cores "
    f"({fmt_rate(measured['bf16_tc_flops'], 'FLOP/s')}). An operation needs at least that many FLOPs per "
    "byte before compute, rather than memory, limits it."
)

# %% [markdown]
# ## Where the operations sit: the committed H100 measurements
#
# Each reference run holds several implementations (*variants*) of an operation. For each, we read the
# kernel time and the bytes ncu counted at DRAM. The analytic FLOP count is the same for every
# implementation of an op, so a variant's position on the roofline shows two things: its performance
# (height) and the bytes it really moved (a variant that moves more bytes than the minimum sits further
# left than the op's minimum intensity).

# %%
PICK = {  # report folder -> ranges to place on the roofline
    "suite_8192x8192": ["mt|gelu_triton|8192x8192|fp32", "mt|gelu_torch_ops|8192x8192|fp32",
                        "mt|softmax_tiled|8192x8192|fp32"],
    "seed_1048576x2_fp32": ["mt|softmax_tiled|1048576x2|fp32|BLOCK_M=128",
                            "mt|softmax_naive|1048576x2|fp32|num_warps=4"],
    "matmul_4096x4096x4096": ["mt|matmul_torch|4096x4096x4096|fp32", "mt|matmul_torch|4096x4096x4096|bf16"],
}
frames = []
for folder, ranges in PICK.items():
    table = memtraffic.analyze(REPORTS / folder)
    frames.append(table[table["range"].isin(ranges)].assign(report=folder))
    missing = set(ranges) - set(table["range"])
    assert not missing, f"{folder} lacks {missing}"
rows = pd.concat(frames, ignore_index=True)

dram_bytes = rows["dram_rd_bytes"] + rows["dram_wr_bytes"]
min_bytes = rows["min_read_bytes"] + rows["min_write_bytes"]
seconds = rows["time_ns"] * 1e-9
i_min = rows["model_flops"] / min_bytes
peak = [measured["bf16_tc_flops"] if (r.op == "matmul" and r.dtype == "bf16") else measured["fp32_flops"]
        for r in rows.itertuples()]
placed = pd.DataFrame({
    "variant": rows["variant"], "shape": rows["shape"], "dtype": rows["dtype"],
    "kernels": rows["n_kernels"],
    "time": rows["time_ns"].map(fmt_time),
    "intensity at minimum": rows["model_flops"] / min_bytes,
    "intensity at DRAM": rows["model_flops"] / dram_bytes,
    "performance": (rows["model_flops"] / seconds).map(lambda x: fmt_rate(x, "FLOP/s")),
    # the roofline's bound at the op's minimum intensity: the best any implementation could do
    "roof at minimum": [fmt_rate(min(p, i * measured["dram_Bps"]), "FLOP/s")
                        for p, i in zip(peak, i_min, strict=True)],
    "fraction of roof": [(f / s) / min(p, i * measured["dram_Bps"]) for f, s, p, i in
                         zip(rows["model_flops"], seconds, peak, i_min, strict=True)],
})
shown = {c: placed[c].map("{:.3g}".format) for c in ("intensity at minimum", "intensity at DRAM")}
show(placed.assign(**shown, **{"fraction of roof": placed["fraction of roof"].map("{:.2f}".format)}))

# %% [markdown]
# The hierarchical roofline below draws each variant's DRAM point (diamond) against the measured roofs
# (solid) and ncu's theoretical ones (dashed). Hover a point for its bytes, time and efficiency.

# %%
show(memtraffic.roofline(rows, levels=("dram",), roofs_file=ROOFS_FILE,
                         title=f"DRAM roofline - {DEVICE} (committed reference runs)"))

# %%
best = placed.loc[placed["fraction of roof"].idxmax()]
worst = placed.loc[placed["fraction of roof"].idxmin()]
ops = rows.assign(i_min=rows["model_flops"] / min_bytes)
gelu_i = ops.loc[ops["op"] == "gelu", "i_min"].iloc[0]
mm_bf16 = ops[(ops["op"] == "matmul") & (ops["dtype"] == "bf16")].iloc[0]
unfused = rows[rows["variant"] == "gelu_torch_ops"].iloc[0]
fused = rows[rows["variant"] == "gelu_triton"].iloc[0]
gelu_bytes = ((unfused["dram_rd_bytes"] + unfused["dram_wr_bytes"])
              / (fused["dram_rd_bytes"] + fused["dram_wr_bytes"]))
gelu_time = unfused["time_ns"] / fused["time_ns"]
show(f"""
What the measurements say:

- GELU and softmax sit far left of the ridge: GELU's minimum intensity is {gelu_i:.2f} FLOP/byte against
  a ridge of {ridge_fp32:.1f}. They are memory-bound, so their speed is a matter of bytes.
- The unfused GELU (`gelu_torch_ops`, {unfused['n_kernels']} kernels, each a pass over memory) moves
  {gelu_bytes:.1f}x the DRAM bytes of the fused Triton kernel and takes {gelu_time:.1f}x as long: same
  FLOPs, lower intensity, lower on the roof.
- The bf16 matmul's minimum intensity is {mm_bf16['i_min']:.0f} FLOP/byte, beyond even the tensor-core
  ridge ({ridge_bf16:.0f}): it is compute-bound, and moving more than the minimum bytes costs it little.
- Closest to its roof: `{best['variant']}` {best['shape']} {best['dtype']} ({best['fraction of roof']:.2f});
  furthest: `{worst['variant']}` {worst['shape']} {worst['dtype']} ({worst['fraction of roof']:.2f}).
  Notebook 02 takes that softmax apart.
""")
above = rows[placed["fraction of roof"] > 1]
if len(above):
    names = ", ".join(f"`{v}` {s} {d}" for v, s, d in zip(above["variant"], above["shape"], above["dtype"],
                                                          strict=True))
    text = (f"A fraction above one ({names}) is no error: the measured roof is what a copy kernel reached, "
            "not a law.")
    if (above["dram_wr_bytes"] < above["min_write_bytes"]).all():
        text += (" Here, too, part of the output was still in L2 when the kernel ended (DRAM writes below "
                 "the minimum), so fewer bytes crossed the bus in its time than the minimum charges it for.")
    show(text)

# %% [markdown]
# ## Exercises
#
# Work each one out by hand first, then run the answer cell: the answers come from `memtraffic.minimum`
# and from the measured roofs.
#
# **1.** Softmax over the rows of a 1048576x2 fp32 matrix. How many bytes must any implementation read
# and write, and what is its intensity at that minimum?

# %%
def answer(op: str, shape: tuple[int, ...], dtype: str) -> dict:
    out = memtraffic.minimum(op, shape, dtype)
    print(f"{op} {out['shape']} {dtype}: read {fmt_bytes(out['read'])} + write "
          f"{fmt_bytes(out['write'])} = {fmt_bytes(out['total'])}; {out['flops']:.4g} FLOPs; "
          f"intensity {out['intensity']:.3g} FLOP/byte")
    return out


ex1 = answer("softmax", (1048576, 2), "fp32")

# %% [markdown]
# **2.** A 4096x4096x4096 matmul in bf16 (2 bytes per element). Minimum bytes? Intensity? Compare the
# intensity with the ridge points above: which roof limits it?

# %%
ex2 = answer("matmul", (4096, 4096, 4096), "bf16")
bound = "compute (tensor cores)" if ex2["intensity"] > ridge_bf16 else "memory"
print(f"ridge for BF16 tensor cores: {ridge_bf16:.0f} FLOP/byte -> bound by {bound}")

# %% [markdown]
# **3.** The ridge point of this H100 from its measured roofs, for FP32 on CUDA cores and for BF16
# on tensor cores. Why is the second so much larger?

# %%
dram = fmt_rate(measured["dram_Bps"])
print(f"FP32 CUDA cores: {fmt_rate(measured['fp32_flops'], 'FLOP/s')} / {dram} = {ridge_fp32:.1f} FLOP/byte")
print(f"BF16 tensor cores: {fmt_rate(measured['bf16_tc_flops'], 'FLOP/s')} / {dram} "
      f"= {ridge_bf16:.0f} FLOP/byte")
print(f"the tensor cores compute {measured['bf16_tc_flops'] / measured['fp32_flops']:.0f}x faster over the "
      "same memory bus, so an operation needs that many times more FLOPs per byte to keep them busy")

# %% [markdown]
# **4.** At the measured DRAM bandwidth, what is the shortest possible time of the softmax of exercise 1?
# How close does the best committed variant come?

# %%
floor_ns = ex1["read"] + ex1["write"]
floor_ns = floor_ns / measured["dram_Bps"] * 1e9
seed = memtraffic.analyze(REPORTS / "seed_1048576x2_fp32")
fastest = seed.loc[seed["time_ns"].idxmin()]
print(f"bytes / bandwidth = {fmt_time(floor_ns)}; fastest measured: {fastest['variant']} in "
      f"{fmt_time(fastest['time_ns'])} ({floor_ns / fastest['time_ns']:.2f} of the floor's speed)")
print("a kernel this short also pays for filling and draining the GPU, which the large copy that measured "
      "the bandwidth spreads over far more bytes")
