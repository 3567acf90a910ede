import torch
from torch import nn

samples = 1000
gamma = 1.0
beta = 0.0
x = torch.randn(1, samples)  # one row of N(0, 1) samples
ln = nn.LayerNorm(samples)  # γ = ln.weight (ones), β = ln.bias (zeros)
with torch.no_grad():
    ln.weight.fill_(gamma)
    ln.bias.fill_(beta)
y = ln(x)
print(y.mean(), y.std(unbiased=False))  # the mean and standard deviation of y

# undo BatchNorm with its own γ and β
rows = 16
features = 4
bn = nn.BatchNorm1d(features)
batch = torch.randn(rows, features) * 5 + 3
with torch.no_grad():
    bn.weight.copy_((batch.var(0, unbiased=False) + bn.eps).sqrt())
    bn.bias.copy_(batch.mean(0))
recovered = (bn(batch) - batch).abs().max()
print(recovered)  # ≈ 0
# ... but only this batch: in training mode the next one is normalized with its own μ, σ
next_batch = torch.randn(rows, features) * 5 + 3
missed = (bn(next_batch) - next_batch).abs().max()
bn.eval()  # evaluation mode: frozen statistics
bn.running_mean.copy_(batch.mean(0))
bn.running_var.copy_(batch.var(0, unbiased=False))
kept = (bn(next_batch) - next_batch).abs().max()
print(missed, kept)  # not 0, ≈ 0

# LN-LSTM: two betas add up, so one bias after the sum is enough
hidden = 3
wx, uh = torch.randn(2, 4 * hidden), torch.randn(2, 4 * hidden)  # W x, U h
b = torch.randn(4 * hidden)  # the one bias
ln_x, ln_h = nn.LayerNorm(4 * hidden, bias=False), nn.LayerNorm(4 * hidden, bias=False)
gates = ln_x(wx) + ln_h(uh) + b  # 4 gates × hidden, before σ and tanh
