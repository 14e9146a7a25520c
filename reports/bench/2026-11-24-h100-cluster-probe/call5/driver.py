import torch

from memtraffic.kernels import VARIANTS

v = VARIANTS["softmax_cluster"]
for shape in [(8192, 32768), (16384, 131072)]:
    x = torch.randn(shape, device="cuda").bfloat16()
    v.run(x)
    torch.cuda.synchronize()
    del x
