"""k14 call 3 (scratch): softmax_tiled against a copy whose loads carry evict_first, on every tiled shape."""
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
mod = load("tiled_evict", ROOT / "scratch" / "tiled_evict.py")
VARIANTS["softmax_tiled_evict"] = dataclasses.replace(mod.SOFTMAX_TILED, name="softmax_tiled_evict")
sweep.FAMILY_OF["softmax_tiled_evict"] = "tiled_evict"
sweep._tiled = lambda shape: [("softmax_tiled_evict", {"evict_hints": 1}),
                              ("softmax_tiled_evict", {"evict_hints": 0})]
sweep.ROW_SHAPES = [(4096, 4096), (8192, 8192), (32768, 4096), (1048576, 2), (32768, 32)]
sys.exit(sweep.main(sys.argv[1:]))
