import torch
import torch.nn.functional as F

# [generated]
from lnviz.data import padded_batch  # this page's generator

# [/generated]
# x: (batch, seq, features); mask: True = real token
# [typed]
x = torch.tensor([[[1.0, 2.0], [3.0, 5.0], [0.0, 0.0]], [[2.0, 1.0], [0.0, 0.0], [0.0, 0.0]]])
mask = torch.tensor([[True, True, False], [True, False, False]])
# [/typed]
# [generated]
generated = padded_batch(2, 4, lengths=[3, 1], max_len=3, pad_value=0.0, seed=0)
x, mask = (torch.from_numpy(a) for a in generated)
# [/generated]
d = x.shape[-1]
eps = 1e-05

# BatchNorm over (batch, seq) per feature: torch wants (N, C, L), and counts the pads.
# [one-position]
# With a single position torch raises here: one value.
# [/one-position]
bn_with_pads = F.batch_norm(x.transpose(1, 2), None, None, training=True).transpose(1, 2)
# Masked BatchNorm: torch has no mask argument, so normalize the real tokens alone.
# [one-real]
# With one real token torch raises here: one value per channel.
# [/one-real]
bn_masked = torch.zeros_like(x)
bn_masked[mask] = F.batch_norm(x[mask], None, None, training=True)
mean_real, mean_all = x[mask].mean(0), x.reshape(-1, x.shape[-1]).mean(0)
print(mean_real, mean_all)  # μ without / with the pads

# LayerNorm per token: the pads cannot reach a real token; a pad row itself gives «pad_row».
gamma = torch.full((d,), 1.0)
beta = torch.full((d,), 0.0)
ln = F.layer_norm(x, (d,), gamma, beta, eps=eps)
print(ln[~mask])  # every pad token: «pad_out»
