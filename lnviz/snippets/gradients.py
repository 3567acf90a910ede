import torch
import torch.nn.functional as F

N = 4
C = 4
eps = 1e-05
x = torch.randn(N, C, dtype=torch.float64, requires_grad=True)
gamma = torch.ones(C, dtype=torch.float64, requires_grad=True)
beta = torch.zeros(C, dtype=torch.float64, requires_grad=True)
# [one-hot]
cell = (0, 0)  # the one output the loss looks at
g = torch.zeros(N, C, dtype=torch.float64)  # the upstream gradient ∂L/∂y
g[cell] = 1.0
# [/one-hot]
# [ones]
g = torch.ones(N, C, dtype=torch.float64)  # the upstream gradient ∂L/∂y
# [/ones]
# [random]
g = torch.randn(N, C, dtype=torch.float64)  # the upstream gradient ∂L/∂y
# [/random]

y = F.layer_norm(x, (C,), gamma, beta, eps=eps)
# BatchNorm in training mode instead:
# y = F.batch_norm(x, None, None, gamma, beta, training=True, eps=eps)
y.backward(g)
print(x.grad, gamma.grad, beta.grad)

# The Jacobian ∂y/∂x, flattened to (N·C) × (N·C)
J = torch.autograd.functional.jacobian(lambda t: F.layer_norm(t, (C,), eps=eps), x.detach())
J = J.reshape(N * C, N * C)
