"""The lecture's GELU three ways, profiled in a window after warm-up (notebook 04, docs/floor.md):
memtraffic profile --torch-ops --profile-from-start off -- python examples/floor_gelu.py --mode eager

eager: eight torch ops, a kernel each (memtraffic.kernels.gelu's gelu_torch_ops); triton: one fused
Triton kernel (gelu_triton), in a memtraffic.region that gives its minimum; compiled: torch.compile of the
eager ops (Inductor fuses them into one kernel). The input is made before the window: read from outside.
"""

from __future__ import annotations

import argparse

import torch

import memtraffic
from memtraffic.kernels import gelu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["eager", "triton", "compiled"], required=True)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    x = torch.randn(args.rows, args.cols, device=args.device)
    if args.mode == "eager":
        def run(x: torch.Tensor) -> torch.Tensor:
            return gelu._gelu_ops(x)
    elif args.mode == "compiled":
        run = torch.compile(gelu._gelu_ops)
    else:
        def run(x: torch.Tensor) -> torch.Tensor:
            with memtraffic.region("gelu_triton", inputs=[x], write_bytes=x.numel() * x.element_size()):
                return gelu._run_triton(x)
    for _ in range(2):  # warm-up: compile, Triton's JIT
        run(x)
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    y = run(x)
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(f"gelu {args.mode}: mean {y.mean().item():.5f}", flush=True)


if __name__ == "__main__":
    main()
