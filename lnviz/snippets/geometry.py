import torch
import torch.nn.functional as F

x = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 4.0, 1.0]], dtype=torch.float32)
# «count» vectors, H = «h»
eps = 1e-05
h = x.shape[1]
# [LayerNorm]
x_hat = F.layer_norm(x, (h,), eps=eps)
var = x.double().var(dim=1, unbiased=False)
print(x_hat.sum(dim=1))  # ≈ 0: on the «flat» Σx = 0
print(x_hat.double().norm(dim=1))  # |x̂| ...
print((h * var / (var + eps)).sqrt())  # ... = √H·√(σ²/(σ² + ε))
# [/LayerNorm]
# [RMSNorm]
x_hat = F.rms_norm(x, (h,), eps=eps)
ms = x.double().square().mean(dim=1)
print(x_hat.double().norm(dim=1))  # |x̂| ...
print((h * ms / (ms + eps)).sqrt())  # ... = √H·√(ms/(ms + ε))
# [/RMSNorm]
# [BatchNorm]
# [eps-zero]
# torch refuses eps=0 in training mode: the next line raises ValueError
# [/eps-zero]
x_hat = F.batch_norm(x, None, None, training=True, eps=eps)
print(x_hat.mean(dim=0))  # ≈ 0: each feature centred
print(x_hat.double().square().sum(dim=1))  # |x̂|² of each vector
# [/BatchNorm]
# [affine]
gamma = torch.tensor([1.0, 1.0, 1.0])
# [beta]
beta = torch.tensor([0.0, 0.0, 0.0])
# [/beta]
# [LayerNorm]
y = F.layer_norm(x, (h,), gamma, beta, eps=eps)  # γ⊙x̂ + β
# [/LayerNorm]
# [RMSNorm]
y = F.rms_norm(x, (h,), gamma, eps=eps)  # γ⊙x̂: RMSNorm has no β
# [/RMSNorm]
# [BatchNorm]
y = F.batch_norm(x, None, None, gamma, beta, training=True, eps=eps)
# [/BatchNorm]
# [/affine]
