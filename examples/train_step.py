"""One training step of a small transformer, op by op:
memtraffic profile --torch-ops --profile-from-start off -- python examples/train_step.py

A token embedding, causal self-attention, layer norms, an MLP, a cross-entropy loss, the backward pass and
an AdamW step: the op classes whose minimum is not "inputs read once, outputs written once" (a gather,
a loss, backward ops, the optimizer's in-place updates) next to the ones where it is. A first step warms
up (lazy optimizer state, cuBLAS handles) outside the CUDA profiler window; the second runs inside it,
so `--profile-from-start off` profiles, and --torch-ops traces, that step alone. Runs on the CPU too
(`memtraffic ops --from-first-forward -- python examples/train_step.py --device cpu`).
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
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, t, d = h.shape
        q, k, v = self.qkv(self.ln1(h)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        h = h + self.proj(a)
        return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))


class Model(nn.Module):
    def __init__(self, vocab: int, width: int, heads: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


def step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor,
         targets: torch.Tensor) -> torch.Tensor:
    logits = model(ids)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Model(args.vocab, args.width, args.heads, args.layers).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=args.device)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    step(model, opt, inputs, targets)  # warm-up: optimizer state, library handles
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    loss = step(model, opt, inputs, targets)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(f"loss {float(loss):.4f} on {args.device}")


if __name__ == "__main__":
    main()
