import numpy as np
import torch
import torch.nn.functional as F

# [example]
# an input to try the code on; the Explorer's own downloads are input.npy and mask.npy
rng = np.random.default_rng(0)
np.save("input.npy", rng.standard_normal((2, 5, 4)).astype(np.float32))
np.save("mask.npy", np.array([[True] * 5, [True] * 3 + [False] * 2]))

# [/example]
# input.npy: the Explorer's input, shape «shape», layout «layout» «meaning»
device = "cpu"
dtype = torch.float32
param_dtype = torch.float32  # γ, β and running statistics: float32 for a half-precision x
x = torch.from_numpy(np.load("input.npy")).to(device, dtype)
# [channels]
c = 2  # the channel dim: 1 for NC and NCHW (nothing to move), 2 for NLC
# [/channels]
n = 4  # γ's and β's values
gamma = torch.full((n,), 1.0, dtype=param_dtype, device=device)
# [beta]
beta = torch.full((n,), 0.0, dtype=param_dtype, device=device)
# [/beta]
eps = 1e-05
# [trailing]
normalized_shape = (4,)
# [expand]
gamma = gamma.expand(normalized_shape)
# [beta]
beta = beta.expand(normalized_shape)
# [/beta]
# [/expand]
# [/trailing]
# [LayerNorm]
y = F.layer_norm(x, normalized_shape, gamma, beta, eps=eps)
# [/LayerNorm]
# [RMSNorm]
y = F.rms_norm(x, normalized_shape, gamma, eps=eps)
# [/RMSNorm]
# [BatchNorm]
# [mask]
# mask.npy: True at real tokens; torch has no mask, so take statistics from
# the real tokens alone: x[mask] is (real tokens, features)
mask = torch.from_numpy(np.load("mask.npy")).to(device, torch.bool)
# [/mask]
# [eps-zero]
# torch refuses eps=0 in training mode: the next line raises ValueError (lnviz computes it)
# [/eps-zero]
# [training]
# [mask]
y = torch.zeros_like(x)
y[mask] = F.batch_norm(x[mask], None, None, gamma, beta, training=True, eps=eps)
# [/mask]
# [all]
y = F.batch_norm(x.movedim(c, 1), None, None, gamma, beta, training=True, eps=eps).movedim(1, c)
# [/all]
# [/training]
# [evaluation]
warmup_steps = 10
momentum = 0.1
running_mean = torch.zeros(n, dtype=param_dtype, device=device)
running_var = torch.ones(n, dtype=param_dtype, device=device)
for _ in range(warmup_steps):  # training passes build the running statistics
    # [mask]
    F.batch_norm(x[mask], running_mean, running_var, training=True, momentum=momentum, eps=eps)
    # [/mask]
    # [all]
    F.batch_norm(x.movedim(c, 1), running_mean, running_var, training=True,
                 momentum=momentum, eps=eps)
    # [/all]
y = F.batch_norm(x.movedim(c, 1), running_mean, running_var, gamma, beta, training=False,
                 eps=eps).movedim(1, c)
# [/evaluation]
# [/BatchNorm]
# [GroupNorm]
groups = 2
y = F.group_norm(x.movedim(c, 1), groups, gamma, beta, eps=eps).movedim(1, c)
# [/GroupNorm]
# [InstanceNorm]
y = F.instance_norm(x.movedim(c, 1), weight=gamma, bias=beta, eps=eps).movedim(1, c)
# [/InstanceNorm]
