"""One-off: softmax_cluster's cluster scheduling policy at the long bf16 rows (H100)."""
import json
import statistics
import sys

import torch

from memtraffic.core.ops import OPS
from memtraffic.kernels import VARIANTS
from memtraffic.measure import bench

out = {}
v = VARIANTS["softmax_cluster"]
for shape in [(16384, 131072), (8192, 32768)]:
    for dtype in (torch.bfloat16,):
        x = torch.randn(shape, device="cuda", dtype=torch.float32).to(dtype)
        nbytes = OPS["softmax"].minimum(shape, dtype).total
        copies = [bench.copy_time(nbytes, 0.2).median_ns for _ in range(5)]
        copy = statistics.median(copies)
        ref = torch.softmax(x[:64].double(), -1)
        for p, t in [(32, 256), (32, 512)]:
            for pol in (0, 1, 2):
                fn = lambda: v.run(x, per_thread=p, threads=t, policy=pol)  # noqa: E731
                err = (fn()[:64].double() - ref).abs().max().item()
                ns = bench.time_cuda(fn, budget_s=0.3).median_ns
                key = f"{shape[0]}x{shape[1]} bf16 p{p} t{t} policy{pol}"
                out[key] = {"us": ns / 1e3, "copy_us": copy / 1e3, "of_copy": copy / ns, "err": err}
                print(f"{key}: {ns/1e3:.1f} us, {copy/ns:.3f} of copy, err {err:.2g}", flush=True)
        del x
        torch.cuda.empty_cache()
json.dump(out, open(sys.argv[1], "w"), indent=1)
