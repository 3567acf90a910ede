import torch
import torch.nn.functional as F

values = [0.001, 0.002, 0.003, 0.004]
dtype = torch.float32
eps = 1e-05
x = torch.tensor(values, dtype=dtype, requires_grad=True)
y = F.layer_norm(x, x.shape, eps=eps)  # «where»
(y * torch.randn(x.shape, dtype=dtype)).sum().backward()  # x.grad grows like 1/√(σ² + ε)

F.layer_norm(torch.full((4,), 3.0), (4,), eps=0.0)  # tensor([nan, nan, nan, nan]): 0/0

x64 = torch.randn(256, dtype=torch.float64) + 1000.0
err = (F.layer_norm(x64.half().float(), (256,)) - F.layer_norm(x64, (256,))).abs().max()

x32 = x64.float() + 9000.0
naive = (x32**2).mean() - x32.mean() ** 2  # one pass: E[x²] − E[x]²
two_pass = x32.var(unbiased=False)  # subtracts the mean first
