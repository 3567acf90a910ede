import torch

# [functions]
from lnviz.snippets.zoo_functions import (
    layer_norm_a,
    layer_norm_b,
    layer_norm_c,
    layer_norm_d,
    layer_norm_e,
    layer_norm_f,
    layer_norm_g,
)

# [/functions]
# [typed]
values = [[[1.0, 2.0, 3.0]], [[2.0, 4.0, 7.0]]]
x = torch.tensor(values)  # (seq, batch, emb)
# [/typed]
# [random]
shape = (4, 2, 8)
seed = 0
x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
# [/random]
# [offset]
offset = 1000.0
x = x + offset
# [/offset]
eps = 1e-05
# [exact]
rtol, atol = None, None  # torch.testing.assert_close's own tolerances
# [/exact]
# [wide]
rtol = 1.3e-06  # far from zero, float32 rounding needs a wider atol
atol = 1e-05
# [/wide]
expected = torch.nn.LayerNorm(x.shape[-1], eps=eps)(x).detach()
implementations = [layer_norm_a, layer_norm_b, layer_norm_c, layer_norm_d,
                   layer_norm_e, layer_norm_f, layer_norm_g]
for layer_norm in implementations:
    y = layer_norm(x, eps)
    try:
        torch.testing.assert_close(y, expected, rtol=rtol, atol=atol)
        verdict = "matches"
    except AssertionError:
        verdict = "differs"
    print(layer_norm.__name__, (y - expected).abs().max().item(), verdict)
