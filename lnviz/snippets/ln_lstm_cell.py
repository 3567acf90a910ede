import torch
from torch import nn


class LayerNormLSTMCell(nn.Module):
    """LSTM cell with LayerNorm on W x, on U h and on the cell state (Ba et al., 2016)."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.w_x = nn.Linear(input_size, 4 * hidden_size, bias=False)
        self.w_h = nn.Linear(hidden_size, 4 * hidden_size, bias=False)
        self.ln_x = nn.LayerNorm(4 * hidden_size)   # γ_x, β_x (and ε = 1e-5)
        self.ln_h = nn.LayerNorm(4 * hidden_size)   # γ_h, β_h
        self.ln_c = nn.LayerNorm(hidden_size)       # γ_c, β_c

    def forward(self, x, state):
        h, c = state
        # Each projection is normalized on its own, over one sample's 4H summed inputs.
        # No "+ b": β_x + β_h already add a learned bias to every gate.
        z = self.ln_x(self.w_x(x)) + self.ln_h(self.w_h(h))
        i, f, g, o = z.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(self.ln_c(c))
        return h, c
