"""A compiled inference function written differently from compiled_step.py: scaled scores, a masked
softmax, a matmul with the values and a bias-free projection, under `torch.compile(mode="max-autotune-
no-cudagraphs")` on half-precision inputs, in inference mode:
memtraffic profile --nvtx-include 'regex:^mt\\|.*/' -- python examples/compiled_softmax_matmul.py
"""

from __future__ import annotations

import argparse

import torch


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
    probs = torch.softmax(scores.masked_fill(~mask, float("-inf")).float(), dim=-1).to(q.dtype)
    return torch.relu(probs @ v) @ w


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    torch.manual_seed(0)
    dtype = torch.float16 if args.device == "cuda" else torch.float32
    q, k, v = (torch.randn(8, 1024, 64, device=args.device, dtype=dtype) for _ in range(3))
    w = torch.randn(64, 64, device=args.device, dtype=dtype)
    compiled = torch.compile(attend, mode="max-autotune-no-cudagraphs" if args.device == "cuda" else None)
    with torch.inference_mode():
        for i in range(args.calls):
            out = compiled(q, k, v, w)
            ref = attend(q, k, v, w)
            print(f"call {i}: max |compiled - eager| = {(out - ref).abs().max().item():.3g}", flush=True)


if __name__ == "__main__":
    main()
