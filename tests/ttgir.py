"""Compile a Triton kernel for sm_90 on any machine (no GPU) and read the layouts of its global loads
and stores from the TTGIR, to check the traffic model's layout assumptions against the real compiler
(scripts/kernel_registers.py reads registers and spills from the same compile). A developer's tool
beside the tests, not part of the package.

The arguments are specialised as the JIT would specialise them at launch (integers equal to 1 become
constants, integers divisible by 16 get `tt.divisibility=16`, pointers are assumed 16-byte aligned),
so the compiled layouts are the ones a launch with those values would get. Needs the Triton wheel's
NVIDIA backend (it ships ptxas); uses Triton internals that may move between releases.
"""

from __future__ import annotations

import re
from typing import Any

from memtraffic.kernels.sectors import Layout

_BLOCKED = re.compile(r"^(#blocked\d*) = #ttg\.blocked<\{(.*?)\}>", re.M)
_MEM_OP = re.compile(r"(?:= |^\s*)(tt\.load|tt\.store) .*tensor<([\dx]+)x!tt\.ptr<\w+>, (#blocked\d*)>")


def compile_sm90(kernel: Any, args: dict[str, Any], constexprs: dict[str, Any], num_warps: int,
                 **options: Any) -> Any:
    """`kernel` compiled for sm_90 (Triton's CompiledKernel: .asm holds 'ttgir', 'ptx', 'cubin'). args:
    name -> int value, or a pointer type like '*fp32'; options: more compile options (maxnreg=...)."""
    import triton
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import JITFunction

    fn = JITFunction(getattr(kernel, "fn", kernel))  # the interpreter wraps kernels; rebuild a JITFunction
    signature: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list] = {}
    consts = dict(constexprs)
    for index, name in enumerate(fn.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        value = args[name]
        if isinstance(value, str):
            signature[name], spec = value, "D"
        else:
            signature[name], spec = native_specialize_impl(BaseBackend, value, False, True, True)
            if signature[name] == "constexpr":
                consts[name] = value
        if spec == "D":
            attrs[(index,)] = [["tt.divisibility", 16]]
    target = GPUTarget("cuda", 90, 32)
    parsed = make_backend(target).parse_options({"num_warps": num_warps, **options})
    src = ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=target, options=parsed.__dict__)


def compile_ttgir(kernel: Any, args: dict[str, Any], constexprs: dict[str, Any], num_warps: int) -> str:
    """TTGIR text of `kernel` compiled for sm_90 (see compile_sm90)."""
    return compile_sm90(kernel, args, constexprs, num_warps).asm["ttgir"]


def memory_layouts(ttgir: str, rank1_dim: int = 1) -> dict[str, list[Layout]]:
    """{'tt.load': [...], 'tt.store': [...]}: the layout of every global load and store, in program order.

    Each layout's tile is the op's tensor shape in the TTGIR. A rank-1 tensor of n elements is placed
    on tile dim `rank1_dim`: (1, n) for a row of columns (rank1_dim=1), (n, 1) for a column of rows (0).
    """
    defs = dict(_BLOCKED.findall(ttgir))
    out: dict[str, list[Layout]] = {"tt.load": [], "tt.store": []}
    for line in ttgir.splitlines():
        match = _MEM_OP.search(line)
        if not match:
            continue
        dims = [int(d) for d in match.group(2).split("x")]
        rank1_shape = (1, dims[-1]) if rank1_dim == 1 else (dims[-1], 1)
        shape = (dims[0], dims[1]) if len(dims) == 2 else rank1_shape
        fields = {k: [int(x) for x in v.split(",")] for k, v in re.findall(r"(\w+) = \[([\d, ]+)\]",
                                                                          defs[match.group(3)])}
        keys = ("sizePerThread", "threadsPerWarp", "warpsPerCTA", "order")
        spt, tpw, wpc, order = (fields[k] for k in keys)
        if len(order) == 1:
            threads, warps = [1, 1], [1, 1]
            threads[rank1_dim], warps[rank1_dim] = tpw[0], wpc[0]
            layout = Layout(shape, rank1_dim, spt[0], (threads[0], threads[1]), (warps[0], warps[1]))
        else:
            fast = order[0]
            if spt[1 - fast] != 1:
                raise ValueError(f"{spt[1 - fast]} elements per thread on the slow dim: not modelled")
            layout = Layout(shape, fast, spt[fast], (tpw[0], tpw[1]), (wpc[0], wpc[1]))
        out[match.group(1)].append(layout)
    return out


def layouts_in_subprocess(specs: list[dict[str, Any]], timeout: float = 300) -> list[dict[str, list[Layout]]]:
    """memory_layouts for several launches, compiled in a fresh Python process.

    A process that has run kernels in the interpreter (TRITON_INTERPRET=1, as the CPU tests do) has
    triton.language patched and cannot compile for real, so compile elsewhere. Each spec: kernel
    ('module:name'), args, constexprs, num_warps, rank1_dim.
    """
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve())], input=json.dumps(specs), env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"compiling for sm_90 failed:\n{proc.stderr.strip()[-3000:]}")
    out = []
    for item in json.loads(proc.stdout):
        out.append({op: [Layout(tuple(a), f, v, tuple(t), tuple(w)) for a, f, v, t, w in layouts]
                    for op, layouts in item.items()})
    return out


def _main() -> None:
    import importlib
    import json
    import sys

    results = []
    for spec in json.load(sys.stdin):
        module, name = spec["kernel"].split(":")
        kernel = getattr(importlib.import_module(module), name)
        text = compile_ttgir(kernel, spec["args"], spec["constexprs"], spec["num_warps"])
        found = memory_layouts(text, rank1_dim=spec.get("rank1_dim", 1))
        results.append({op: [[list(x.shape), x.fast, x.vec, list(x.threads), list(x.warps)] for x in layouts]
                        for op, layouts in found.items()})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    _main()
