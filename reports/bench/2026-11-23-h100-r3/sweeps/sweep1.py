"""k14 exploratory sweep (scratch, not committed): scripts/sweep_softmax.py plus two ablations of
softmax_split: r2 (the committed kernel of 2026-11-22) and noprefetch (the new kernel reading the next
row after the write). Usage: python scratch/explore.py OUT.json --shapes ... [sweep args]"""
import dataclasses
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memtraffic.kernels import VARIANTS  # noqa: E402


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


sweep = load("sweep_softmax", ROOT / "scripts" / "sweep_softmax.py")
for tag in ("r2", "noprefetch"):
    mod = load(f"split_{tag}", ROOT / "scratch" / f"split_{tag}.py")
    name = f"softmax_split_{tag}"
    VARIANTS[name] = dataclasses.replace(mod.SOFTMAX_SPLIT, name=name)
    sweep.FAMILY_OF[name] = f"split_{tag}"

base_split = sweep._split


def split_with_ablations(shape):
    out = base_split(shape)
    if shape[1] >= 32768:
        out += [("softmax_split_r2", None), ("softmax_split_noprefetch", None)]
        out += [("softmax_split_noprefetch", {"BLOCK_N": 4096, "num_warps": 4})]
    return out


sweep._split = split_with_ablations
# bf16 first and the longest rows first: if the budget runs out, it is fp32's short rows that go
sweep.DTYPES = (sweep.torch.bfloat16, sweep.torch.float32)
sweep.ROW_SHAPES = [(16384, 131072), (8192, 32768), (4096, 4096)]
base_online = sweep._online
sweep._online = lambda shape, sms: base_online(shape, sms) if shape[1] <= 32768 else []
sys.exit(sweep.main(sys.argv[1:]))
