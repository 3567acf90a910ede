r"""LSTM cells with and without normalization, and a classifier that reads a sequence with one.

Three cells that share every line but the normalization, so that a comparison between them
measures the normalization and nothing else:

* :class:`LSTMCell`, the plain LSTM:

  .. math::
      (i, f, g, o) = W x_t + U h_{t-1} + b,\qquad
      c_t = σ(f) ⊙ c_{t-1} + σ(i) ⊙ \tanh(g),\qquad h_t = σ(o) ⊙ \tanh(c_t)

* :class:`LayerNormLSTMCell` (Ba et al., 2016), which normalizes the two projections separately,
  each over its own 4H summed inputs of one sample, and the cell state before its tanh:

  .. math::
      (i, f, g, o) = \mathrm{LN}(W x_t; γ_x, β_x) + \mathrm{LN}(U h_{t-1}; γ_h, β_h),\qquad
      h_t = σ(o) ⊙ \tanh(\mathrm{LN}(c_t; γ_c, β_c))

  With ``single_bias=True`` the two projections lose their β and one shared bias b is added
  instead: β_x + β_h is a single vector in disguise, so the default spends 4H parameters on it
  twice.

* :class:`BatchNormLSTMCell` (Cooijmans et al., 2016), the same with BatchNorm: statistics over
  the batch, taken separately at every time step t and kept as separate running averages per
  step, used in evaluation mode.

Every cell returns the gate pre-activations (the sums fed to σ and tanh) next to h and c, so that
their range can be drawn step by step. The norms are lnviz's teaching implementations.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn

from lnviz.norms import batch_norm, layer_norm

__all__ = [
    "GATES",
    "LN_LSTM_CELL_CODE",
    "MODELS",
    "MODEL_LABELS",
    "BatchNormLSTMCell",
    "LSTMCell",
    "LayerNormLSTMCell",
    "SequenceClassifier",
    "batch_dependence",
    "gate_quantiles",
    "make_model",
]

#: The models a comparison can include, by their name in the app, the CLI and the JSON.
MODELS = ("lstm", "ln-lstm", "bn-lstm")
MODEL_LABELS = {"lstm": "LSTM", "ln-lstm": "LN-LSTM", "bn-lstm": "BN-LSTM"}
#: The four gates, in the order their rows sit in W, U and b (torch.nn.LSTMCell's order).
GATES = ("input i", "forget f", "candidate g", "output o")

State = tuple[torch.Tensor, torch.Tensor]


class LSTMCell(nn.Module):
    r"""The plain LSTM cell, written out so that a normalized cell can change one thing in it.

    .. math::
        z_t = \mathrm{norm}_x(W x_t) + \mathrm{norm}_h(U h_{t-1}) + b = (i, f, g, o)

        c_t = σ(f) ⊙ c_{t-1} + σ(i) ⊙ \tanh(g),\qquad
        h_t = σ(o) ⊙ \tanh(\mathrm{norm}_c(c_t))

    where every norm is the identity here; subclasses override :meth:`normalize`. Weights start
    uniform in ±1/√H and the bias at 0. With the same parameters it computes exactly what
    ``torch.nn.LSTMCell`` computes (whose two biases add up to b).

    Args:
        input_size: I, the features per time step.
        hidden_size: H, the units of h and c.
        bias: whether to add b (a normalized cell may carry its biases in its norms instead).

    Shape:
        - x: ``(N, I)``; h, c: ``(N, H)``; the gate pre-activations z: ``(N, 4H)``
    """

    def __init__(self, input_size: int, hidden_size: int, *, bias: bool = True) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size).uniform_(-bound,
                                                                                        bound))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size).uniform_(-bound,
                                                                                         bound))
        self.bias = nn.Parameter(torch.zeros(4 * hidden_size)) if bias else None

    def normalize(self, which: str, z: torch.Tensor, step: int) -> torch.Tensor:
        """The norm applied to ``which`` ("ih": W x, "hh": U h, "c": the cell state) at time
        ``step``; the identity for the plain LSTM.

        ``z`` is ``(N, size)``, or ``(N, T, size)`` for steps ``step … step + T − 1`` at once.
        """
        return z

    def project_input(self, x: torch.Tensor, step: int = 0) -> torch.Tensor:
        """norm_x(W x): the input's share of the gates, for one step ``(N, I)`` or for a whole
        sequence ``(N, T, I)`` at once (it does not depend on h, so it need not wait for it)."""
        return self.normalize("ih", x @ self.weight_ih.T, step)

    def recur(
        self, input_term: torch.Tensor, state: State | None, step: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One time step from the input's share ``norm_x(W x_t)``: returns (h_t, c_t, z_t)."""
        if state is None:
            zeros = input_term.new_zeros(input_term.shape[0], self.hidden_size)
            state = (zeros, zeros)
        h, c = state
        z = input_term + self.normalize("hh", h @ self.weight_hh.T, step)
        if self.bias is not None:
            z = z + self.bias
        i, f, g, o = z.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)  # forget, then write
        h = torch.sigmoid(o) * torch.tanh(self.normalize("c", c, step))  # read out
        return h, c, z

    def forward(
        self, x: torch.Tensor, state: State | None = None, step: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One time step: returns (h_t, c_t, z_t), z_t being the gate pre-activations."""
        return self.recur(self.project_input(x, step), state, step)

    def _add_affine(self, which: str, size: int, gamma_init: float, beta_init: float | None
                    ) -> None:
        """γ (and β unless ``beta_init`` is None) for the norm ``which``, filled with constants."""
        self.register_parameter(f"gamma_{which}", nn.Parameter(torch.full((size,), gamma_init)))
        beta = None if beta_init is None else nn.Parameter(torch.full((size,), beta_init))
        self.register_parameter(f"beta_{which}", beta)

    def _add_norm_params(self, gamma_init: float, beta_init: float, single_bias: bool) -> None:
        """γ/β for the three norms; with ``single_bias`` the projections get γ only and b starts
        at 2·β so that both variants compute the same function at initialization."""
        four_h = 4 * self.hidden_size
        projection_beta = None if single_bias else beta_init
        self._add_affine("ih", four_h, gamma_init, projection_beta)
        self._add_affine("hh", four_h, gamma_init, projection_beta)
        self._add_affine("c", self.hidden_size, gamma_init, beta_init)
        if self.bias is not None:
            nn.init.constant_(self.bias, 2 * beta_init)


class LayerNormLSTMCell(LSTMCell):
    r"""The LSTM cell with Layer Normalization (Ba et al., 2016).

    .. math::
        z_t = \mathrm{LN}(W x_t; γ_x, β_x) + \mathrm{LN}(U h_{t-1}; γ_h, β_h),\qquad
        h_t = σ(o) ⊙ \tanh(\mathrm{LN}(c_t; γ_c, β_c))

    Each LN takes μ and σ² over one sample's 4H (or H) values at one time step, so the gates see
    sums of unit-scale terms however large W, U or c grow, and nothing depends on the batch.

    Args:
        input_size, hidden_size: I and H.
        gamma_init, beta_init: the constants γ and β start at (1 and 0 leave x̂ as it is).
        single_bias: drop β_x and β_h and add one bias b instead (4H parameters fewer, the same
            family of functions).
        eps: ε of every LN.
    """

    def __init__(self, input_size: int, hidden_size: int, *, gamma_init: float = 1.0,
                 beta_init: float = 0.0, single_bias: bool = False, eps: float = 1e-5) -> None:
        super().__init__(input_size, hidden_size, bias=single_bias)
        self.eps = eps
        self._add_norm_params(gamma_init, beta_init, single_bias)

    def normalize(self, which: str, z: torch.Tensor, step: int) -> torch.Tensor:
        """LN(z; γ, β) over z's last dim, with lnviz's teaching layer_norm."""
        gamma, beta = getattr(self, f"gamma_{which}"), getattr(self, f"beta_{which}")
        return layer_norm(z, z.shape[-1], gamma, beta, self.eps).output


class BatchNormLSTMCell(LSTMCell):
    r"""The LSTM cell with Batch Normalization per time step (Cooijmans et al., 2016).

    .. math::
        z_t = \mathrm{BN}_t(W x_t; γ_x, β_x) + \mathrm{BN}_t(U h_{t-1}; γ_h, β_h),\qquad
        h_t = σ(o) ⊙ \tanh(\mathrm{BN}_t(c_t; γ_c, β_c))

    BN_t normalizes each unit over the batch, with the statistics of time step t: in training
    mode those of the current batch (so one sample's output depends on the others), in
    evaluation mode running averages kept separately for each step. Steps beyond ``max_steps``
    reuse the last step's averages. This bookkeeping, and the batch dependence, are what make
    BatchNorm awkward in a recurrent network.

    Args:
        input_size, hidden_size: I and H.
        max_steps: the number of time steps that get their own running statistics.
        gamma_init, beta_init, single_bias: as for :class:`LayerNormLSTMCell`.
        momentum, eps: as for ``torch.nn.BatchNorm1d``.
    """

    def __init__(self, input_size: int, hidden_size: int, *, max_steps: int = 28,
                 gamma_init: float = 1.0, beta_init: float = 0.0, single_bias: bool = False,
                 momentum: float = 0.1, eps: float = 1e-5) -> None:
        super().__init__(input_size, hidden_size, bias=single_bias)
        self.momentum, self.eps = momentum, eps
        self._add_norm_params(gamma_init, beta_init, single_bias)
        for which, size in (("ih", 4 * hidden_size), ("hh", 4 * hidden_size),
                            ("c", hidden_size)):
            self.register_buffer(f"running_mean_{which}", torch.zeros(max_steps, size))
            self.register_buffer(f"running_var_{which}", torch.ones(max_steps, size))

    def normalize(self, which: str, z: torch.Tensor, step: int) -> torch.Tensor:
        """BN_t(z; γ, β) over the batch, with step t's own running statistics."""
        if z.dim() == 3:  # a whole sequence: each step with its own statistics
            return torch.stack([self.normalize(which, z[:, k], step + k)
                                for k in range(z.shape[1])], dim=1)
        running_mean = getattr(self, f"running_mean_{which}")
        t = min(step, running_mean.shape[0] - 1)
        return batch_norm(
            z, running_mean[t], getattr(self, f"running_var_{which}")[t],
            getattr(self, f"gamma_{which}"), getattr(self, f"beta_{which}"),
            training=self.training, momentum=self.momentum, eps=self.eps,
        ).output


class SequenceClassifier(nn.Module):
    """Read a sequence with one cell, then classify its last hidden state with a linear layer.

    logits = W_out h_T + b_out, where h_T comes from running the cell over t = 0 … T−1.

    Shape:
        - x: ``(N, T, I)``; logits: ``(N, num_classes)``; gates: ``(T, N, 4H)``
    """

    def __init__(self, cell: LSTMCell, num_classes: int) -> None:
        super().__init__()
        self.cell = cell
        self.head = nn.Linear(cell.hidden_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The class logits for each sequence of the batch."""
        return self.forward_with_gates(x, keep_gates=False)[0]

    def forward_with_gates(
        self, x: torch.Tensor, keep_gates: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logits, z) with z the gate pre-activations of every step, stacked as (T, N, 4H)."""
        state: State | None = None
        gates = []
        input_terms = self.cell.project_input(x)  # every step's norm_x(W x_t) in one go
        for t in range(x.shape[1]):
            h, c, z = self.cell.recur(input_terms[:, t], state, t)
            state = (h, c)
            if keep_gates:
                gates.append(z)
        return self.head(state[0]), torch.stack(gates) if keep_gates else None


def make_model(
    kind: str,
    input_size: int,
    hidden_size: int,
    num_classes: int,
    *,
    gamma_init: float = 1.0,
    beta_init: float = 0.0,
    single_bias: bool = False,
    max_steps: int = 28,
) -> SequenceClassifier:
    """A :class:`SequenceClassifier` around the cell named ``kind`` (one of :data:`MODELS`).

    ``gamma_init``, ``beta_init`` and ``single_bias`` configure the norms and are ignored by the
    plain LSTM; ``max_steps`` is the number of per-step running statistics of the BN-LSTM.
    """
    norm_options = dict(gamma_init=gamma_init, beta_init=beta_init, single_bias=single_bias)
    if kind == "lstm":
        cell: LSTMCell = LSTMCell(input_size, hidden_size)
    elif kind == "ln-lstm":
        cell = LayerNormLSTMCell(input_size, hidden_size, **norm_options)
    elif kind == "bn-lstm":
        cell = BatchNormLSTMCell(input_size, hidden_size, max_steps=max_steps, **norm_options)
    else:
        raise ValueError(f"unknown model {kind!r}; choose one of {', '.join(MODELS)}")
    return SequenceClassifier(cell, num_classes)


@torch.no_grad()
def gate_quantiles(
    model: SequenceClassifier, x: torch.Tensor, q: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
) -> np.ndarray:
    """Quantiles of the gate pre-activations at every time step, for each gate and for all four.

    Returns an array of shape ``(5, T, len(q))``: rows 0–3 are the gates in :data:`GATES`'
    order, row 4 pools them. The model is run in evaluation mode (BatchNorm: running averages).
    """
    was_training = model.training
    model.eval()
    try:
        _, z = model.forward_with_gates(x)
    finally:
        model.train(was_training)
    steps, n, four_h = z.shape
    per_gate = z.float().reshape(steps, n, 4, four_h // 4).permute(2, 0, 1, 3).reshape(4, steps, -1)
    pooled = z.float().reshape(1, steps, -1)
    levels = torch.tensor(q, device=z.device)
    quantiles = [torch.quantile(values, levels, dim=-1).permute(1, 2, 0)
                 for values in (per_gate, pooled)]
    return torch.cat(quantiles).cpu().numpy()


@torch.no_grad()
def batch_dependence(
    model: SequenceClassifier, x: torch.Tensor, batch_size: int, *, training: bool = False
) -> float:
    """max |logits of x as one batch − logits of x in batches of ``batch_size``|.

    Zero up to rounding when every sample is computed on its own (LSTM, LN-LSTM, and BN-LSTM in
    evaluation mode); large for BatchNorm with its training-mode statistics, where each sample is
    normalized with the μ and σ² of whichever samples share its batch. ``training=True`` runs a
    copy of the model in training mode, so that the running statistics are left untouched.
    """
    run = copy.deepcopy(model).train() if training else model
    was_training = run.training
    if not training:
        run.eval()
    try:
        whole = run(x)
        parts = torch.cat([run(chunk) for chunk in x.split(batch_size)])
    finally:
        run.train(was_training)
    return float((whole - parts).abs().max())


#: A self-contained LN-LSTM cell in plain PyTorch, shown on the training page; it computes what
#: :class:`LayerNormLSTMCell` computes (the tests check it number by number).
LN_LSTM_CELL_CODE = '''\
import torch
from torch import nn
import torch.nn.functional as F


class LayerNormLSTMCell(nn.Module):
    """LSTM cell with LayerNorm on W x, on U h and on the cell state (Ba et al., 2016)."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.w_x = nn.Linear(input_size, 4 * hidden_size, bias=False)
        self.w_h = nn.Linear(hidden_size, 4 * hidden_size, bias=False)
        self.ln_x = nn.LayerNorm(4 * hidden_size)   # γ_x, β_x
        self.ln_h = nn.LayerNorm(4 * hidden_size)   # γ_h, β_h
        self.ln_c = nn.LayerNorm(hidden_size)       # γ_c, β_c

    def forward(self, x, state):
        h, c = state
        # Each projection is normalized on its own, over one sample's 4H summed inputs.
        z = self.ln_x(self.w_x(x)) + self.ln_h(self.w_h(h))
        i, f, g, o = z.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(self.ln_c(c))
        return h, c
'''
