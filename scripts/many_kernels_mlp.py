"""Training steps of a deep, narrow MLP: thousands of small CUDA kernels (make_many_kernels_report.sh).

Each of the --layers Linear+ReLU layers launches a few kernels forward and backward, and AdamW without
foreach launches about ten more per parameter, so 64 layers and 2 steps make some 3,000 kernel launches
(the kind of report a real program gives, where memtraffic's reading side must stay small and fast).
Usage: python scripts/many_kernels_mlp.py [--layers 64] [--width 256] [--batch 64] [--steps 2]
"""

from __future__ import annotations

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=64)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, fused=False)
    x = torch.randn(args.batch, args.width, device="cuda")
    target = torch.randn(args.batch, args.width, device="cuda")
    for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    print(f"loss {loss.item():.4f} after {args.steps} steps of {args.layers} layers")


if __name__ == "__main__":
    main()
