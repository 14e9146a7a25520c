"""Registers, spills and reads in flight per SM of softmax_split's kernels, compiled for sm_90 on any
machine (no GPU needed): what decides how many programs an H100 SM keeps resident, and so how many
bytes it has in flight while its programs wait for their rows.

    python scripts/kernel_registers.py [--shape 16384x131072] [--dtypes bf16,fp16,fp32]
        [--chunks 4096/4,8192/8] [--json OUT.json]

Compiles with the installed Triton and its bundled ptxas (`ptxas -v` on the kernel's PTX). Counts differ
between Triton versions: to get the device's, install its Triton beside a CPU torch, e.g.
`python3 -m venv /tmp/t36 && venv-triton-3.6/bin/pip install triton==3.6.0 torch pandas plotly typer` (Triton
3.6.0 gave the H100's own n_regs for every kernel compared on 2026-11-23), then run this with
venv-triton-3.6/bin/python from the repository root.

Kernels: the groups kernel with and without prefetch, and the lag kernel with e packed by its asm
statement and, for comparison, by a plain .to(), which the compiler moves past the wait.
Per kernel and chunk (BLOCK_N/num_warps) it prints: registers a thread, spill stores and loads (bytes),
programs an SM holds (softmax_split.resident_per_sm) and the bytes those programs read at once (one
chunk each; the groups kernel with prefetch=0 has no read in flight while it waits).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # memtraffic from this checkout; tests/ttgir.py

from ttgir import compile_sm90  # noqa: E402

from memtraffic.kernels import softmax_split as sp  # noqa: E402
from memtraffic.vocab.ops import parse_shape  # noqa: E402

PTR = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32"}
BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def ptxas_usage(ptx: str) -> dict[str, int]:
    """Registers and spill bytes that the bundled ptxas reports for the PTX (its .target, sm_90a)."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas
    except ImportError:
        sys.exit("kernel_registers: this Triton has no NVIDIA backend (no ptxas)")
    ptxas = get_ptxas(90).path  # the ptxas Triton itself runs for sm_90
    arch = re.search(r"^\.target (\w+)", ptx, re.M)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        Path(src).write_text(ptx)
        proc = subprocess.run([str(ptxas), "-v", f"-arch={arch.group(1) if arch else 'sm_90a'}", src, "-o",
                               os.path.join(tmp, "k.cubin")], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"kernel_registers: ptxas failed: {proc.stderr.strip()[-500:]}")
    regs = re.search(r"Used (\d+) registers", proc.stderr)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", proc.stderr)
    return {"registers": int(regs.group(1)) if regs else -1,
            "spill_stores": int(spills.group(1)) if spills else 0,
            "spill_loads": int(spills.group(2)) if spills else 0}


def kernels(shape: tuple[int, int], dtype: str, block_n: int) -> list[tuple[str, object, dict, dict]]:
    """(label, kernel, args, constexprs) of each softmax_split kernel for a rows-of-several-parts launch."""
    m, n = shape
    parts = triton.cdiv(n, block_n)
    p2 = triton.next_power_of_2(parts)
    common = {"out_ptr": PTR[dtype], "in_ptr": PTR[dtype], "slots_ptr": "*i64", "count_ptr": "*i64",
              "n_rows": m, "n_cols": n, "parts": parts}
    out = [(f"groups prefetch={pf}", sp._softmax_split_kernel, common,
            {"BLOCK_N": block_n, "PARTS_P2": p2, "SYNC": True, "PREFETCH": pf}) for pf in (0, 1)]
    lag_args = {k: v for k, v in common.items() if k != "count_ptr"}
    for asm, label in ((True, "lag"), (False, "lag, plain .to()")):  # the pack by asm, or not (see _held)
        out.append((label, sp._softmax_lag_kernel, {**lag_args, "taken_ptr": "*i64"},
                    {"BLOCK_N": block_n, "PARTS_P2": p2, "WIDTH": max(sp.SLOT_WIDTH, p2), "ASM": asm}))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="16384x131072")
    parser.add_argument("--dtypes", default="bf16,fp16,fp32")
    parser.add_argument("--chunks", default="4096/4,8192/8", help="BLOCK_N/num_warps, comma-separated")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    shape = parse_shape(args.shape)
    rows = []
    print(f"Triton {triton.__version__}, sm_90, {args.shape}")
    print(f"{'kernel':20s} {'dtype':5s} {'chunk':>7s} {'regs':>5s} {'spill st/ld':>12s} {'per SM':>6s} "
          f"{'chunks KB':>9s}")
    for dtype in args.dtypes.split(","):
        if dtype not in PTR:
            sys.exit(f"kernel_registers: unknown dtype {dtype!r}: use {', '.join(PTR)}")
        for chunk in args.chunks.split(","):
            block_n, num_warps = (int(v) for v in chunk.split("/"))
            for label, kernel, kargs, consts in kernels(shape, dtype, block_n):
                use = ptxas_usage(compile_sm90(kernel, kargs, consts, num_warps).asm["ptx"])
                per_sm = sp.resident_per_sm(use["registers"], num_warps)
                row = {"kernel": label, "dtype": dtype, "BLOCK_N": block_n, "num_warps": num_warps, **use,
                       "per_sm": per_sm, "chunk_kb_per_sm": per_sm * block_n * BYTES[dtype] / 1024,
                       "triton": triton.__version__}
                rows.append(row)
                print(f"{label:20s} {dtype:5s} {chunk:>7s} {use['registers']:5d} "
                      f"{use['spill_stores']:>5d}/{use['spill_loads']:<6d} {per_sm:6d} "
                      f"{row['chunk_kb_per_sm']:9.0f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
