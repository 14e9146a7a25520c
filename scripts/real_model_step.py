"""Training steps of a real model, for `memtraffic profile --torch-ops --profile-from-start off`:
a Hugging Face transformers GPT-2 (random weights from a config, nothing downloaded) or a torchvision
resnet18, whichever is installed (--model picks). One warm-up step runs outside the CUDA profiler window
(optimizer state, cuBLAS/cuDNN handles); the --steps after it run inside.

    python scripts/real_model_step.py [--model auto|gpt2|resnet18] [--layers 12] [--steps 1] [--check]

It prints "model NAME" first (`--model auto`: the first installed); --check stops there (no GPU work).
Exit code 3 when neither package is importable.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F


def gpt2(layers: int) -> tuple[torch.nn.Module, callable]:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=layers, n_embd=256, n_head=4, vocab_size=4096, n_positions=128)
    model = GPT2LMHeadModel(config).cuda()
    ids = torch.randint(0, 4096, (4, 128), device="cuda")
    return model, lambda: model(input_ids=ids, labels=ids).loss


def resnet18(layers: int) -> tuple[torch.nn.Module, callable]:
    from torchvision.models import resnet18 as make

    model = make(num_classes=100).cuda()
    x = torch.randn(8, 3, 64, 64, device="cuda")
    y = torch.randint(0, 100, (8,), device="cuda")
    return model, lambda: F.cross_entropy(model(x), y)


def available(name: str) -> bool:
    try:
        __import__({"gpt2": "transformers", "resnet18": "torchvision"}[name])
        return True
    except Exception:  # noqa: BLE001 - any import failure (missing, broken install) means not available
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="auto", choices=["auto", "gpt2", "resnet18"])
    parser.add_argument("--layers", type=int, default=12, help="GPT-2 blocks (resnet18 has its own)")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--check", action="store_true", help="print the model's name and stop")
    args = parser.parse_args()
    name = args.model
    if name == "auto":
        name = next((n for n in ("gpt2", "resnet18") if available(n)), None)
        if name is None:
            print("neither transformers nor torchvision is installed", file=sys.stderr)
            return 3
    if not available(name):
        print(f"{name} is not installed", file=sys.stderr)
        return 3
    print(f"model {name}", flush=True)
    if args.check:
        return 0
    torch.manual_seed(0)
    model, loss_of = {"gpt2": gpt2, "resnet18": resnet18}[name](args.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> torch.Tensor:
        loss = loss_of()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    step()  # warm-up
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    loss = torch.zeros(())
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"loss {float(loss):.4f} after {args.steps} profiled steps of {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
