"""A transformer block's forward and backward, eager or compiled, profiled in a window after warm-up:
memtraffic profile --torch-ops --profile-from-start off -- python examples/floor_block.py [--compile]

Pre-norm attention (fused QKV projection, scaled_dot_product_attention, output projection) and a GELU MLP,
each with its residual, in bf16 (tensor cores), a mean-squared loss. The warm-up steps (compiling, cuBLAS
and attention heuristics) run before torch.cuda.profiler.start(): ncu and the op tracer see only the
measured steps, so `memtraffic floor` reads the same region of the eager and the compiled program.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        batch, seq, width = h.shape
        q, k, v = self.qkv(self.norm1(h)).view(batch, seq, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        return h + self.fc2(F.gelu(self.fc1(self.norm2(h)), approximate="tanh"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true", help="torch.compile the forward and backward")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1, help="measured steps (in the profiler window)")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Block(args.width, args.heads).to(args.device, torch.bfloat16)
    x = torch.randn(args.batch, args.seq, args.width, device=args.device, dtype=torch.bfloat16)
    target = torch.randn_like(x)

    def forward_backward() -> torch.Tensor:
        loss = F.mse_loss(model(x), target)
        loss.backward()
        return loss

    step = torch.compile(forward_backward) if args.compile else forward_backward
    for _ in range(args.warmup):
        step()
        model.zero_grad(set_to_none=True)
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    for _ in range(args.steps):
        loss = step()
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(f"loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
