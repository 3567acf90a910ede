import torch

shape = (2, 1, 3)
normalized_shape = (1, 3)
x = torch.randn(shape)
ln = torch.nn.LayerNorm(normalized_shape)
print(ln.weight.shape, ln.bias.shape)  # γ, β: torch.Size(«params»)
y = ln(x)
dims = tuple(range(-len(normalized_shape), 0))  # the trailing dims
mu = x.mean(dim=dims, keepdim=True)
print(mu.shape)  # torch.Size(«stats»): «groups» groups of «size» values
