"""A small PyTorch block to profile op by op: memtraffic profile --torch-ops -- python examples/torch_model.py

Linear (a matmul), LayerNorm, GELU, softmax, a sum over dim 0, a transposed view made contiguous and an
in-place ReLU: each aten op gets its own NVTX range and its compulsory traffic (inputs read once,
outputs written once), so the analysis shows which ops move more than they must. Runs on the CPU too
(`memtraffic ops -- python examples/torch_model.py --device cpu`), where no kernel is profiled.
"""

from __future__ import annotations

import argparse

import torch


class Block(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = torch.nn.functional.gelu(self.norm(self.linear(x)))
        probs = torch.softmax(h, dim=-1)
        column_sums = probs.sum(dim=0)  # a reduction over rows: reads every element once
        transposed = h.t().contiguous()  # a strided read made contiguous: one copy kernel
        transposed.relu_()  # in place: reads and writes the same tensor
        return probs, column_sums, transposed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Block(args.width).to(args.device)
    x = torch.randn(args.rows, args.width, device=args.device)
    with torch.no_grad():
        probs, column_sums, transposed = model(x)
    if args.device == "cuda":
        torch.cuda.synchronize()
    print(f"probs {tuple(probs.shape)}, column sums {tuple(column_sums.shape)}, "
          f"transposed {tuple(transposed.shape)} on {args.device}")


if __name__ == "__main__":
    main()
