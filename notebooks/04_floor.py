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
# # How far is my program from its floor?
#
# A profile answers one question for its user: how fast could this step be on this GPU, where is the time
# I could get back, and what would fusing the ops save? This lesson answers it with the lecture's GELU,
# written three ways, and then with a transformer block's forward and backward, eager and compiled.
#
# Two numbers carry the lesson:
#
# - the **floor** of each op call: the larger of its minimum bytes at the measured copy bandwidth and its
#   FLOPs at the measured compute roof of its dtype (tensor cores for 16-bit matmuls). No implementation of
#   that call can be faster. `recoverable = time - floor`, and memtraffic says why the time sits above the
#   floor (bytes above the minimum, compute below its roof, a launch too small, too few threads...);
# - the **fused minimum** of the traced region: the bytes it must move if every tensor produced and consumed
#   inside it stayed on chip. Inputs are read once; what outlives the region (outputs, parameters,
#   gradients) is written once. The **eager minimum** is the sum of each op's own minimum: every op reads
#   its inputs from memory and writes its output back. The gap between the two is what fusion can save.
#
# It needs no GPU: every number is read from the Nsight Compute runs committed under `reports/h100/`
# (made by `scripts/gpu_floor.sh` on an H100) and the roofs measured on that H100. It uses only
# memtraffic's public API.

# %%
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

import memtraffic
from memtraffic import fmt_bytes, fmt_time, say, show


def find_root() -> Path:
    """The repository folder holding reports/h100 (the notebook may run from notebooks/ or the root)."""
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "reports" / "h100").is_dir():
            return folder
    raise FileNotFoundError("run this notebook inside the memtraffic repository: reports/h100 holds the runs")


ROOT = find_root()
REPORTS = ROOT / "reports" / "h100"
GELU = {way: memtraffic.floor(REPORTS / f"floor_gelu_{way}") for way in ("eager", "triton", "compiled")}
print(f"GELU runs on the {GELU['eager'].device}")

# %% [markdown]
# ## 1. GELU three ways: bytes
#
# `gelu(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))` on a 4096x4096 fp32 tensor.
#
# - **eager**: eight torch ops, one kernel each. Each reads its inputs and writes its output: ten reads
#   and eight writes of the whole tensor, the eager minimum;
# - **triton**: one kernel that reads `x` once and writes `y` once;
# - **compiled**: `torch.compile` of the eager code; Inductor fuses the eight ops into one kernel.
#
# The fused minimum is the same for all three: `x` comes from before the region (read once), `y` outlives
# it (written once), and every intermediate of the eager version could stay on chip. Predict before you
# read the table: how many times the fused minimum is the eager one, and how much DRAM each way moves.

# %%
def byte_row(way: str, f) -> dict:
    return {"way": way, "kernels' time": fmt_time(f.gpu_time_s * 1e9),
            "eager minimum": fmt_bytes(f.eager_min_bytes), "fused minimum": fmt_bytes(f.fused_min_bytes),
            "DRAM measured": fmt_bytes(f.dram_bytes),
            "measured / fused": f"{f.dram_bytes / f.fused_min_bytes:.2f}",
            "eager / fused": f"{f.eager_min_bytes / f.fused_min_bytes:.1f}"}


show(pd.DataFrame([byte_row(way, f) for way, f in GELU.items()]))

fig = go.Figure()
for label, get, color in (("eager minimum", lambda f: f.eager_min_bytes, "#bbbbbb"),
                          ("fused minimum", lambda f: f.fused_min_bytes, "#2ca02c"),
                          ("DRAM measured", lambda f: f.dram_bytes, "#1f77b4")):
    fig.add_trace(go.Bar(x=list(GELU), y=[get(f) / 1e6 for f in GELU.values()], name=label,
                         marker_color=color))
fig.update_layout(title="GELU: bytes against the eager and the fused minimum", barmode="group",
                  template="plotly_white", height=420, width=800, yaxis_title="MB")
show(fig)

# %% [markdown]
# The eager version moves about its eager minimum through DRAM: each of its eight kernels makes a full pass
# over memory. The fused kernels move about the fused minimum. That ratio, eager over fused, is what
# fusion saves on this op, and no cache can give it back to the eager version: the tensors it passes from op
# to op are larger than the L2.

# %% [markdown]
# ## 2. GELU three ways: time against the floor
#
# Each kernel's floor is its minimum at the copy roof (GELU's FLOPs are few). The eager version has eight
# floors, one per op, and its time is near their sum; the fused kernels have one floor each.

# %%
def time_row(way: str, f) -> dict:
    return {"way": way, "time": fmt_time(f.gpu_time_s * 1e9),
            "floor (sum of its ops')": fmt_time(f.floor_s * 1e9),
            "recoverable": fmt_time(f.recoverable_s * 1e9),
            "fused minimum at the copy roof": fmt_time(f.fused_min_bytes / f.roofs["dram_Bps"] * 1e9)}


show(pd.DataFrame([time_row(way, f) for way, f in GELU.items()]))
for way, f in GELU.items():
    print(f"{way}:")
    show(f.table()[["op", "calls", "time_s", "floor_s", "recoverable_s", "reason_kind"]])

# %% [markdown]
# Read the eager rows this way: each op sits near its own floor, so per op there is little to recover.
# The waste is in the plan, not in any kernel: the eager floor itself is far above the fused minimum at the
# copy roof (last column). The floor per op says how good each kernel is; the fused minimum says how good
# the program could be.

# %% [markdown]
# ## 3. A transformer block, eager and compiled
#
# `examples/floor_block.py`: pre-norm attention and a GELU MLP, each with its residual, in bf16, forward and
# backward of one step, profiled after warm-up. Eager, every aten op launches its kernels; compiled,
# Inductor fuses the elementwise work and the normalizations into Triton kernels and calls cuBLAS and
# the attention kernels for the rest.

# %%
BLOCK = {way: memtraffic.floor(REPORTS / f"floor_{way}_block") for way in ("eager", "compiled")}
for way, f in BLOCK.items():
    print(f"--- {way}")
    print(f.summary())

# %%
show(pd.DataFrame([{**byte_row(way, f), "floor": fmt_time(f.floor_s * 1e9),
                    "recoverable": fmt_time(f.recoverable_s * 1e9)} for way, f in BLOCK.items()]))

# %% [markdown]
# The top of each list is where the time to recover is. The matmuls and attention run near their compute
# floors in both; the eager version's normalizations, GELU, residual adds and their backward ops each make
# a pass over memory, which the compiled version fuses. The compiled step still moves more than the fused
# minimum: its forward writes the activations the backward needs, and the backward reads them back.

# %%
fig = go.Figure()
for way, color in (("eager", "#d62728"), ("compiled", "#1f77b4")):
    table = BLOCK[way].table().head(8)
    fig.add_trace(go.Bar(x=table["recoverable_s"] * 1e6, y=[f"{way}: {op}" for op in table["op"]],
                         orientation="h", name=way, marker_color=color,
                         text=table["reason_kind"], textposition="outside"))
fig.update_layout(title="Recoverable time per op type (time - floor), and why", template="plotly_white",
                  height=620, width=1250, xaxis_title="us", yaxis={"autorange": "reversed"})
show(fig)

for way, f in BLOCK.items():
    print(f"--- {way}: the five op types holding the most recoverable time")
    table = f.table().head(5)
    show(pd.DataFrame({"op": table["op"], "recoverable": [fmt_time(s * 1e9) for s in table["recoverable_s"]],
                       "share": [f"{s:.0%}" for s in table["share"]],
                       "reason": [say(r) if r else "" for r in table["reason"]]}))

# %% [markdown]
# ## 4. What fusing would save: the groups
#
# The fused minimum is one number for the whole step. `memtraffic floor` also splits it by chain: it
# follows each tensor from the op that writes it to the ops that read it, sets the matmuls and attention
# aside (they stay kernels of their own), and joins the other ops that pass a tensor between them, with no
# matmul on the way, into a **group**. A group could run as one kernel: its intermediates never leave the
# chip. For each group, `f.fusion.groups` gives its ops, the eager minimum (the sum of its ops' minimums),
# the fused minimum (what enters from outside the group and what outlives it), its time now, its time at
# the fused floor (the fused minimum at the copy roof, at least one launch) and the saving, with how to get
# it: `compile` (torch.compile fuses chains like this one), `recompute` (its readers compute its output
# again instead of reading it), `epilogue` (an elementwise op right after a matmul: computed as the matmul
# writes its output), `kernel` (nothing to fuse: a better kernel for it).
#
# The fused minimum is a lower bound, so it leaves out one more kind of write: a value the group writes for
# later ops that they could compute again themselves, because elementwise ops made it from tensors that are
# still there when they read it (a residual sum `x + a`, with `x` and `a` kept). Those bytes are its
# `recomputable_bytes`. A mean or a norm's statistics are never recomputable: they reduce a whole row.
#
# Predict before you run the cell: which chains of the eager block hold the largest savings, the forward's
# or the backward's?

# %%
def short(ops: list) -> str:
    return " + ".join(dict.fromkeys(op.split(".")[1] for op in ops))


GROUPS = BLOCK["eager"].fusion.groups
show(pd.DataFrame([{"group": short(g.ops), "calls": g.calls, "eager minimum": fmt_bytes(g.eager_min_bytes),
                    "fused minimum": fmt_bytes(g.fused_min_bytes),
                    "recomputable": fmt_bytes(g.recomputable_bytes), "time": fmt_time(g.time_s * 1e9),
                    "at the fused floor": fmt_time(g.fused_time_s * 1e9),
                    "saving": fmt_time(g.saving_s * 1e9), "how": g.how.kind} for g in GROUPS]))
saving = sum(g.saving_s for g in GROUPS)
print(f"the groups save {fmt_time(saving * 1e9)} together, "
      f"{saving / BLOCK['eager'].gpu_time_s:.0%} of the eager block's GPU time")

# %% [markdown]
# The backward holds the largest groups: the gradients of the attention's three projections are stacked,
# copied and summed for the bias in three kernels, and the loss, its backward and the last bias gradient in
# five. The residual add and the layer norm after it are one group of the forward; GELU sits alone between
# two matmuls. Its output, and its gradient in the backward, are recomputable: the matmuls that read them
# could compute them from the tensors GELU read, had they a prologue to do it in (cuBLAS has none).
#
# ## 5. What Inductor reached
#
# The compiled run records, for each kernel Inductor generated, the aten ops it fused (`fused_aten`).
# `memtraffic.diff(eager, compiled)` sets each such kernel beside the eager group whose ops it fused, so
# the predicted fused floor stands beside what Inductor measured. Where one kernel does the work of two
# groups, `m.groups` names both and they are compared together.

# %%
PAIR = memtraffic.diff(REPORTS / "floor_eager_block", REPORTS / "floor_compiled_block")
reached = {}
for m in PAIR.fusion:
    reached.setdefault(m.group, m)
show(pd.DataFrame([{"group": short(m.group_ops), "eager groups": len(m.groups),
                    "eager": fmt_time(m.group_time_s * 1e9),
                    "fused floor": fmt_time(m.fused_time_s * 1e9),
                    "Inductor kernels": sum(1 for k in PAIR.fusion if k.group == i),
                    "their time": fmt_time(m.group_kernels_time_s * 1e9),
                    "saving reached": ("-" if m.reached is None else "none (slower)" if m.reached < 0
                                       else f"{m.reached:.0%}"),
                    "time / fused floor": f"{m.group_kernels_time_s / m.fused_time_s:.3f}"}
                   for i, m in reached.items()]))

# %% [markdown]
# Inductor reaches close to the fused floor of the forward's norms and part of the saving of the
# backward's groups. Its add + layer norm kernel does not write the residual sum (eager keeps it for the
# backward): it keeps the matmul's output instead and adds again in the backward, exactly the write the
# fused minimum leaves out as recomputable, so the kernel runs just above the floor, never under it.
# Inductor writes GELU's output, though, and its gradient: those groups stay far from floors that only a
# matmul with a prologue would reach. One reduction of Inductor's computes both layer norms' weight
# gradients: their two backward groups are one row.

# %% [markdown]
# ## Exercises
#
# 1. The eager block's GELU and residual adds sit at their floors: nothing to recover per op. What would
#    fusing them into the matmuls' epilogues save? (Hint: their floors, in `f.table()`, and what the
#    fused minimum counts for them.)
# 2. The compiled block moves more than its fused minimum. Which tensors does the forward write that the
#    fused minimum does not count? (Hint: what does backward read?)
# 3. Which eager group would a matmul epilogue help most, and by how many bytes? (Hint: `g.how.matmul`,
#    `g.how.epilogue_bytes`.) Why can Inductor not do it here, with cuBLAS computing the matmuls?
# 4. `memtraffic check` can gate on recoverable time (`max_recoverable`) or on the measured over fused
#    minimum ratio (`max_over_fused`): write a gate for the compiled block that the eager one fails.
