"""One-off: min_blocks 5/6, with and without the load-balancing cluster policy, 16384x131072 bf16."""
import os
import statistics
import subprocess
import sys

if len(sys.argv) == 1:
    for bal in ("", "1"):
        env = dict(os.environ)
        if bal:
            env["MT_PROBE_BALANCE"] = "1"
        subprocess.run([sys.executable, __file__, "run"], env=env, check=False)
    sys.exit(0)
import torch  # noqa: E402

from memtraffic.core.ops import OPS  # noqa: E402
from memtraffic.kernels import VARIANTS  # noqa: E402
from memtraffic.measure import bench  # noqa: E402

v = VARIANTS["softmax_cluster"]
tag = "balance" if os.environ.get("MT_PROBE_BALANCE") else "default"
for shape in [(16384, 131072), (8192, 32768)]:
    dtype = torch.bfloat16
    x = torch.randn(shape, device="cuda", dtype=torch.float32).to(dtype)
    nbytes = OPS["softmax"].minimum(shape, dtype).total
    copy = statistics.median(bench.copy_time(nbytes, 0.2).median_ns for _ in range(5))
    for mb in (0, 5, 6):
        ns = statistics.median(bench.time_cuda(lambda: v.run(x, min_blocks=mb), budget_s=0.3).median_ns
                               for _ in range(3))
        print(f"{tag} {shape} bf16 min_blocks={mb}: {ns/1e3:.1f} us, {copy/ns:.4f} of copy", flush=True)
    del x
    torch.cuda.empty_cache()
