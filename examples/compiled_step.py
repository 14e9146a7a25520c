"""A torch.compile'd training step, kernel by kernel:
memtraffic profile --torch-ops --nvtx-include 'regex:^mt\\|.*/' -- python examples/compiled_step.py

A LayerNorm + MLP block (residual, GELU) with a mean-squared loss: the forward and backward are one
compiled graph each, the AdamW step another (`torch.compile` of `opt.step`, Inductor's fused foreach
kernels). Under `memtraffic profile` every Triton kernel Inductor generates gets its own range with the
minimum of its buffers and the aten ops it fused; the matmuls Inductor hands to cuBLAS get their aten
op's range under --torch-ops. The first step compiles and autotunes (autotuning's benchmark launches
run outside the ranges, so --nvtx-include leaves them out); later steps run the compiled kernels.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.fc2(F.gelu(self.fc1(self.norm(h))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Block(args.width).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randn(args.tokens, args.width, device=args.device)
    target = torch.randn(args.tokens, args.width, device=args.device)

    @torch.compile
    def forward_backward() -> torch.Tensor:
        loss = F.mse_loss(model(x), target)
        loss.backward()
        return loss

    @torch.compile
    def step() -> None:
        opt.step()

    for i in range(args.steps):
        loss = forward_backward()
        step()
        opt.zero_grad(set_to_none=True)
        print(f"step {i}: loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
