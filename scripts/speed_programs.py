"""Programs as users write them, for issue 41's profiling-cost table (scripts/gpu_speed.sh).

    python scripts/speed_programs.py PROGRAM [--small]

PROGRAM is one of:
- gpt2: a Hugging Face transformers GPT-2 of 12 layers (random weights from a config), one AdamW
  training step after a warm-up step;
- vision: a torchvision resnet50 training step (SGD with momentum, batch 32 of 224x224) after a warm-up
  step (--small: batch 8 of 112x112);
- mlp_adam: 48 Linear layers of 1024 with foreach Adam, 4 steps inside a cudaProfilerStart/Stop window
  (torch.cuda.profiler), one step before it;
- llama_decode: a small transformers Llama (random weights from a config) generating 32 tokens greedily
  with a static KV cache;
- compiled: a torch.compile'd MLP block (LayerNorm, Linear, GELU, Linear, residual) from an empty
  Inductor cache, forward and backward, three calls;
- probe: a 4-layer MLP, foreach Adam over 2 steps, a memtraffic.region around two ops when memtraffic
  is importable (range-replay fixtures; scripts/gpu_range_replay_reports.sh).
--small: a smaller size of the same program (fewer layers, steps or tokens), for every-launch profiles.
Nothing is downloaded: the models are built from configs. Prints one line: the program and its result.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile

import torch
import torch.nn.functional as F


def gpt2(small: bool) -> str:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=4 if small else 12, n_embd=768, n_head=12, vocab_size=8192, n_positions=256)
    model = GPT2LMHeadModel(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (4, 256), device="cuda")
    loss = torch.zeros(())
    for _ in range(2):  # a warm-up step, then the step a user looks at
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return f"loss {loss.item():.4f}"


def vision(small: bool) -> str:
    from torchvision.models import resnet50

    model = resnet50(num_classes=1000).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch, side = (8, 112) if small else (32, 224)
    x = torch.randn(batch, 3, side, side, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    loss = torch.zeros(())
    for _ in range(2):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return f"loss {loss.item():.4f}"


def mlp_adam(small: bool) -> str:
    layers: list[torch.nn.Module] = []
    for _ in range(16 if small else 48):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(256, 1024, device="cuda")
    target = torch.randn(256, 1024, device="cuda")

    def step() -> torch.Tensor:
        loss = F.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    step()  # optimizer state and library handles, outside the window
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(2 if small else 4):
        loss = step()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return f"loss {loss.item():.4f}"


def llama_decode(small: bool) -> str:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=8192, hidden_size=512, intermediate_size=1376, num_hidden_layers=8,
                         num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512)
    model = LlamaForCausalLM(config).cuda().eval()
    ids = torch.randint(0, config.vocab_size, (1, 16), device="cuda")
    tokens = 8 if small else 32
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                             cache_implementation="static", disable_compile=True, pad_token_id=0)
    return f"generated {out.shape[1] - ids.shape[1]} tokens"


def compiled(small: bool) -> str:
    # An empty Inductor cache, as a user's first run has: every kernel compiled and autotuned.
    cache = tempfile.mkdtemp(prefix="inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    width = 1024 if small else 2048

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(width)
            self.up = torch.nn.Linear(width, 4 * width)
            self.down = torch.nn.Linear(4 * width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.down(F.gelu(self.up(self.norm(x))))

    model = Block().cuda()
    step = torch.compile(model)
    x = torch.randn(2048, width, device="cuda", requires_grad=True)
    out = torch.zeros(())
    for _ in range(3):
        out = step(x).square().mean()
        out.backward()
    return f"out {out.item():.4f}"


def probe(small: bool) -> str:
    try:
        from memtraffic import region
    except ImportError:
        region = None
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(128, 512, device="cuda")
    for _ in range(2):
        loss = F.mse_loss(model(x), x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    a = torch.randn(1024, 1024, device="cuda")
    block = region("scale_add", inputs=[a], outputs=[a]) if region is not None else contextlib.nullcontext()
    with block:
        b = a * 2.0
        a.add_(b)
    torch.cuda.synchronize()
    return f"loss {loss.item():.4f}"


PROGRAMS = {"gpt2": gpt2, "vision": vision, "mlp_adam": mlp_adam, "llama_decode": llama_decode,
            "compiled": compiled, "probe": probe}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program", choices=sorted(PROGRAMS))
    parser.add_argument("--small", action="store_true", help="a smaller size of the same program")
    args = parser.parse_args()
    torch.manual_seed(0)
    result = PROGRAMS[args.program](args.small)
    torch.cuda.synchronize()
    print(f"{args.program}{' (small)' if args.small else ''}: {result}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
