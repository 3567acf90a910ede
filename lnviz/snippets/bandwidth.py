import time

import torch
import torch.nn.functional as F

rows = 4096
cols = 1024
x = torch.randn(rows, cols)
F.layer_norm(x, x.shape[-1:])  # a first call loads the kernel: not timed
start = time.perf_counter()
y = F.layer_norm(x, x.shape[-1:])
seconds = time.perf_counter() - start
gb_per_s = 2 * x.numel() * 4 / seconds / 1e9  # read x + write y, float32
print(f"{gb_per_s:.1f} GB/s")
