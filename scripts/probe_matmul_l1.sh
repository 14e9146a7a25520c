#!/usr/bin/env bash
# Where do matmul_triton's loads show up in ncu on this GPU? With num_stages > 1 Triton pipelines them
# through cp.async, which ncu counts as LDGSTS (..._op_ldgsts_cache_access), not as plain loads (..._op_ld,
# the l1_ld_bytes alias). Profiles one launch per num_stages and prints both next to the model's prediction.
# Usage: bash scripts/probe_matmul_l1.sh [SHAPE] [DTYPE]   (default 1024x1024x1024 fp16; needs ncu and a GPU)
set -euo pipefail
cd "$(dirname "$0")/.."
shape=${1:-1024x1024x1024}
dtype=${2:-fp16}
metrics=l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts_cache_access.sum
metrics+=,l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum
for stages in 1 3; do
  # Two launches: the first compiles (skipped by ncu), the second is profiled.
  prog="
import torch
from kernels import VARIANTS
from memtraffic.model import OPS, parse_dtype, parse_shape
v, s, dt = VARIANTS['matmul_triton'], parse_shape('$shape'), parse_dtype('$dtype')
p = {**v.params, 'num_stages': $stages}
a, b = OPS['matmul'].make_inputs(s, dt, 'cuda', torch.Generator().manual_seed(0))
t = v.predicted(s, dt, p)
print(f'num_stages=$stages predicted L1 read {t.read:,} B, write {t.write:,} B')
v.run(a, b, **p); v.run(a, b, **p); torch.cuda.synchronize()
"
  ncu --clock-control none --import-sass no -k regex:_matmul_kernel --launch-skip 1 --launch-count 1 \
    --metrics "$metrics" python3 -c "$prog" | grep -E "predicted|l1tex|lts__|dram__"
done
