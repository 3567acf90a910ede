import math

import torch
import torch.nn.functional as F
from torch import nn

d = 64
activation = F.gelu
ln1, ln2 = nn.LayerNorm(d), nn.LayerNorm(d)  # γ = 1, β = 0 at initialisation
ln_f = nn.LayerNorm(d)  # pre-LN's final LayerNorm, after the last block
wq, wk, wv, wo = (torch.randn(d, d) / math.sqrt(d) for _ in range(4))
w1, w2 = torch.randn(4 * d, d) / math.sqrt(d), torch.randn(d, 4 * d) / math.sqrt(4 * d)


def attn(x):  # one head, (batch, seq, d)
    q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
    return ((q @ k.transpose(-2, -1)) / math.sqrt(d)).softmax(-1) @ v @ wo.T


def ffn(x):
    return activation(x @ w1.T) @ w2.T


def post_ln(x):  # the original transformer
    x = ln1(x + attn(x))
    return ln2(x + ffn(x))


def pre_ln(x):  # GPT-2 and most models since
    x = x + attn(ln1(x))
    return x + ffn(ln2(x))


def pre_ln_stack(x, depth):  # one block repeated, for brevity; the head reads ln_f(x)
    for _ in range(depth):
        x = pre_ln(x)
    return ln_f(x)
