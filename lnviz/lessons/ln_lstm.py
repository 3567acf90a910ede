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
  twice. Ba et al. write both β's and a b, three vectors acting as one; and their LN divides by
  σ itself, with no ε, which is 0/0 at the first step, where h₀ = 0 (:func:`first_step`).

* :class:`BatchNormLSTMCell` (Cooijmans et al., 2016), the same with BatchNorm: statistics over
  the batch, taken separately at every time step t and kept as separate running averages per
  step, used in evaluation mode.

Every cell returns the gate pre-activations (the sums fed to σ and tanh) next to h and c, so that
their range can be drawn step by step. The norms are lnviz's teaching implementations.

A comparison trains every model from one or several seeds, and with a sweep at several values
of one setting (the learning rate, the initial γ or β): each model at one setting is a
:class:`Series`, and each of its seeds a :class:`ModelRun`. Runs of one seed start from the same
weights and see the same mini-batches, so they differ only by the normalization.
:class:`Training` advances all runs a piece at a time (one training step, or a slice of an
evaluation or of the sequence-length check) for a given number of seconds, which lets the app
draw the curves while they grow and stop within a fraction of a second; :func:`check_work`
refuses, before it starts, a comparison that would ask the server for too much; :func:`summarize`
turns a finished (or stopped) training into plain numbers for the figures, and
:class:`TrainingResult` says what they show in sentences computed from them (who ends ahead, by
how much next to the spread between seeds, who reaches 90 % first), never in advance.

After training, every run reads held-out images again with blank rows above them, sequences
longer than any it trained on (:class:`LengthCheck`): the BN-LSTM, whose statistics belong to
the time steps it trained on, against models that need none. :data:`CUSTOM_LAYER_NORM_CODE` is
the LN-LSTM walkthrough's LayerNorm from scratch, checked by :func:`custom_layer_norm_table`;
:func:`first_step`
shows why the app's LN has an ε where Ba et al.'s has none. The datasets are in
:mod:`lnviz.data.sequences`; ``python -m lnviz.train`` runs the same from a shell.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from lnviz.chunked import Chunked
from lnviz.data.sequences import SequenceData
from lnviz.devices import available_devices
from lnviz.limits import (
    DEMO_LIMITS,
    LN_LSTM_MAX_RUNS,
    LN_LSTM_MAX_STEP_WORK,
    Limits,
)
from lnviz.norms import batch_norm, layer_norm

__all__ = [
    "CHART_UPDATES",
    "CUSTOM_LAYER_NORM_CODE",
    "GATES",
    "LEARNING_RATES",
    "LENGTH_SAMPLES",
    "LN_LSTM_CELL_CODE",
    "LOG_SWEEPS",
    "MODELS",
    "MODEL_LABELS",
    "SWEEPS",
    "SWEEP_CHOICES",
    "SWEEP_DEFAULTS",
    "TARGET_ACCURACY",
    "BatchNormLSTMCell",
    "BatchSensitivity",
    "FirstStep",
    "LSTMCell",
    "LayerNormLSTMCell",
    "LengthCheck",
    "ModelRun",
    "Progress",
    "SequenceClassifier",
    "Series",
    "TrainConfig",
    "Training",
    "TrainingResult",
    "batch_sensitivity",
    "check_work",
    "custom_layer_norm",
    "custom_layer_norm_table",
    "evaluation_interval",
    "first_step",
    "gate_quantiles",
    "gate_range_text",
    "length_margins",
    "length_work",
    "make_model",
    "seed_band",
    "setting_text",
    "step_work",
    "summarize",
    "to_json",
    "train",
    "training_work",
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
        # float(): an int (γ₀ = 3) would make an integer tensor, which cannot learn
        self.register_parameter(f"gamma_{which}",
                                nn.Parameter(torch.full((size,), float(gamma_init))))
        beta = None if beta_init is None else nn.Parameter(torch.full((size,), float(beta_init)))
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
def batch_sensitivity(
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
'''

#: The LN-LSTM walkthrough's LayerNorm written from scratch, as a module (its four lines of forward
# are the
#: seed's); the tests run it against ``torch.nn.LayerNorm`` and :func:`lnviz.layer_norm`.
CUSTOM_LAYER_NORM_CODE = '''\
import torch
from torch import nn


class CustomLayerNorm(nn.Module):
    """LayerNorm over the last dim, from scratch."""

    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(normalized_shape))   # starts as the identity
        self.beta = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        # unbiased=False: divide by n, not n - 1 (torch.var's default)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        x_norm = (x - mean) / torch.sqrt(var + self.eps)
        output = x_norm * self.gamma + self.beta
        return output
'''


def custom_layer_norm(x: torch.Tensor, *, unbiased: bool = False, eps: float = 1e-5
                      ) -> torch.Tensor:
    """What :data:`CUSTOM_LAYER_NORM_CODE` computes with γ = 1 and β = 0, and, with
    ``unbiased=True``, what it would compute had it kept ``torch.var``'s default: σ² divided by
    n − 1, which shrinks x̂ by √((n − 1)/n)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=unbiased)
    return (x - mean) / torch.sqrt(var + eps)


def gate_range_text(hidden_size: int) -> str:
    """The LN-LSTM walkthrough's "within approx −1 to 1", against what a normalized gate input
    can be, for an LN-LSTM of ``hidden_size``: each of its two normalized projections has 4H
    values with mean 0 and standard deviation 1, and the gate sums the two."""
    n = 4 * hidden_size
    beyond = 1 - math.erf(1 / math.sqrt(2))  # the share of a normal sample beyond ±1
    return (f"The LN-LSTM walkthrough says normalization keeps the gate inputs “within approx "
            f"−1 to 1”. Mean 0 and standard deviation 1 is not a range: {beyond:.0%} of "
            f"normally distributed values lie beyond ±1, and one of a projection's n = 4H = {n} "
            f"normalized values can reach √(n − 1) = {math.sqrt(n - 1):.3g} (all the others "
            "equal). A gate input adds two normalized projections, each then scaled by γ and "
            "shifted by β, so its spread is learned: the gates figure, after a run, shows "
            "where it went.")


def custom_layer_norm_table(sizes: tuple[int, ...], samples: int = 8, seed: int = 0
                            ) -> pd.DataFrame:
    """The LN-LSTM walkthrough's from-scratch LayerNorm against ``torch.nn.functional.layer_norm``
    and lnviz's
    :func:`lnviz.layer_norm`, on ``samples`` random float32 rows of each size n in ``sizes``,
    with ``unbiased=False`` (the walkthrough's) and ``unbiased=True`` (``torch.var``'s default).

    Columns: n, the variance used, the largest |difference| from torch and from lnviz, and the
    spread of x̂ (1 for a correct LayerNorm, up to ε) next to √((n − 1)/n).
    """
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for n in sizes:
        x = torch.randn(samples, n, generator=generator) * 3 + 1
        torch_y = F.layer_norm(x, (n,))
        lnviz_y = layer_norm(x, n).output
        for unbiased in (False, True):
            y = custom_layer_norm(x, unbiased=unbiased)
            rows.append({
                "features n": n,
                "variance": "÷ n (unbiased=False)" if not unbiased else "÷ (n − 1) (unbiased=True)",
                "max |Δ| from torch": float((y - torch_y).abs().max()),
                "max |Δ| from lnviz": float((y - lnviz_y).abs().max()),
                "spread of x̂": float(y.double().pow(2).mean(-1).sqrt().mean()),
                "√((n − 1)/n)": math.sqrt((n - 1) / n),
            })
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class FirstStep:
    """LayerNorm of U h₀ at the first time step, where h₀ = 0 makes it a vector of zeros.

    Attributes:
        size: the vector's length, 4H.
        with_eps: the largest |LN(0)| with ε (0: x̂ = 0 / √ε = 0, so the output is β).
        nan_without_eps: how many entries are NaN without ε, as in Ba et al.'s formula (0 / 0).
    """

    size: int
    eps: float
    with_eps: float
    nan_without_eps: int


def first_step(hidden_size: int, eps: float = 1e-5) -> FirstStep:
    """Why the app's LN has an ε that Ba et al.'s has not: at t = 0 the state h₀ is 0, so
    U h₀ = 0, a vector with σ = 0 (and so is W x for a blank image row)."""
    z = torch.zeros(1, 4 * hidden_size)
    with_eps = layer_norm(z, z.shape[-1], eps=eps).output
    mean = z.mean(-1, keepdim=True)
    sigma = (z - mean).pow(2).mean(-1, keepdim=True).sqrt()
    without = (z - mean) / sigma  # Ba et al.: (a − μ) / σ
    return FirstStep(z.shape[-1], eps, float(with_eps.abs().max()),
                     int(torch.isnan(without).sum()))


# --- Training the models side by side ------------------------------------------------------------

#: Held-out samples used for the accuracy curves (a fixed random subset of larger test sets).
EVAL_SAMPLES = 2000
#: Held-out samples whose gate pre-activations are summarized.
GATE_SAMPLES = 256
#: Held-out samples read again, with blank rows above them, by the sequence-length check.
LENGTH_SAMPLES = 256
#: The blank rows put above each held-out image by the sequence-length check, as fractions of
#: the training length T: the test sequences are T, 1.25 T, 1.5 T, 2 T and 3 T steps long.
LENGTH_FRACTIONS = (0, 0.25, 0.5, 1, 2)
#: A drop in held-out accuracy on longer sequences that the findings explain (5 points).
LENGTH_NOTABLE_DROP = 0.05
#: What one time step of one forward pass costs beyond its matrix products (the Python loop over
#: the steps, the norms' small ops), as the number of multiply-adds that take as long: measured
#: at about 0.15 ms on a CPU core. It dominates for small models and long sequences.
TIME_STEP_OVERHEAD = 3_000_000
#: The learning rates the page offers.
LEARNING_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
#: What a comparison can sweep: the :class:`TrainConfig` field, and its name on the page.
SWEEPS = {"lr": "learning rate", "gamma_init": "initial γ", "beta_init": "initial β",
          "batch_size": "batch size"}
#: How a swept value is written in a series' label ("LN-LSTM · lr 0.1").
SWEEP_SYMBOLS = {"lr": "lr", "gamma_init": "γ₀", "beta_init": "β₀", "batch_size": "batch"}
#: The values the page offers for each sweep, and the ones it starts with.
SWEEP_CHOICES = {"lr": LEARNING_RATES, "gamma_init": (0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0),
                 "beta_init": (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0),
                 "batch_size": (2, 4, 8, 16, 32, 64, 128)}
SWEEP_DEFAULTS = {"lr": (1e-3, 1e-2, 1e-1), "gamma_init": (0.1, 1.0, 3.0),
                  "beta_init": (-1.0, 0.0, 1.0), "batch_size": (2, 8, 64)}
#: The sweeps whose swept values are drawn on a log axis.
LOG_SWEEPS = ("lr", "batch_size")
#: The sweeps that change only the norms' γ and β: the plain LSTM, which has none, is trained
#: once and drawn as the reference.
NORM_SWEEPS = ("gamma_init", "beta_init")
#: The largest difference, relative to the logits, that the batch check calls float32 rounding:
#: float32 keeps about 7 digits, and a logit sums thousands of rounded products.
ROUNDING = 1e-5
#: The held-out accuracy whose first step the page reports, as a measure of speed.
TARGET_ACCURACY = 0.9


@dataclass(frozen=True)
class Series:
    """One line of a comparison: a model at one setting, trained from every seed.

    ``value`` is the swept setting's value (None without a sweep, and for the plain LSTM in a
    sweep of γ or β, which it does not have); ``label`` names the line ("LN-LSTM · lr 0.1").
    """

    kind: str
    value: float | None
    label: str


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a comparison's numbers (with the data): same config, same curves.

    Every model in ``models`` is trained from ``seeds`` seeds, ``seed``, ``seed + 1``, …: a seed
    sets the initial weights and the order of the mini-batches, the same for every model, so
    runs of one seed differ only by their normalization. With a ``sweep`` (a key of
    :data:`SWEEPS`), each model is trained at every value of ``sweep_values`` instead of the
    config's own value of that setting. ``gamma_init``/``beta_init``/``single_bias`` configure
    the norms of the LN- and BN-LSTM. The held-out set is evaluated every ``eval_every`` steps.
    """

    models: tuple[str, ...] = ("lstm", "ln-lstm")
    hidden_size: int = 64
    lr: float = 1e-2
    batch_size: int = 64
    steps: int = 300
    eval_every: int = 10
    gamma_init: float = 1.0
    beta_init: float = 0.0
    single_bias: bool = False
    seed: int = 0
    device: str = "cpu"
    seeds: int = 1
    sweep: str | None = None
    sweep_values: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        unknown = [m for m in self.models if m not in MODELS]
        if not self.models or unknown or len(set(self.models)) != len(self.models):
            raise ValueError(f"models must be distinct names from {', '.join(MODELS)}; got "
                             f"{list(self.models)}")
        if self.batch_size < 2:
            raise ValueError("batch_size must be at least 2 (BatchNorm needs two samples)")
        if min(self.hidden_size, self.steps, self.eval_every, self.seeds) < 1 or not self.lr > 0:
            raise ValueError("hidden_size, steps, eval_every and seeds must be positive, lr "
                             "above 0")
        if self.sweep is not None and self.sweep not in SWEEPS:
            raise ValueError(f"unknown sweep {self.sweep!r}; choose one of {', '.join(SWEEPS)}")
        if (self.sweep is None) != (not self.sweep_values):
            raise ValueError("sweep_values go with a sweep, and a sweep needs values")
        if len(set(self.sweep_values)) != len(self.sweep_values):
            raise ValueError(f"the swept values must be distinct; got {list(self.sweep_values)}")
        if self.sweep == "batch_size" and not all(v == int(v) and v >= 2
                                                   for v in self.sweep_values):
            raise ValueError("swept batch sizes must be whole numbers of at least 2 "
                             "(BatchNorm needs two samples)")
        if self.sweep == "lr" and not all(v > 0 for v in self.sweep_values):
            raise ValueError("swept learning rates must be above 0")
        if self.device not in available_devices():
            raise ValueError(f"device {self.device!r} is not available here; choose one of "
                             f"{available_devices()}")

    def series(self) -> tuple[Series, ...]:
        """The lines of the comparison, model by model (and value by value in a sweep)."""
        lines = []
        for kind in self.models:
            if self.sweep is None or (kind == "lstm" and self.sweep in NORM_SWEEPS):
                lines.append(Series(kind, None, MODEL_LABELS[kind]))
                continue
            lines += [Series(kind, value,
                             f"{MODEL_LABELS[kind]} · {setting_text(self.sweep, value)}")
                      for value in self.sweep_values]
        return tuple(lines)

    @property
    def runs(self) -> int:
        """How many models are trained: every series from every seed."""
        return len(self.series()) * self.seeds

    def describe(self) -> str:
        """What makes up :attr:`runs`: "2 models × 3 values of the learning rate × 3 seeds"."""
        return _runs_text(self)

    def run_config(self, series: Series, index: int) -> TrainConfig:
        """The config of one run: ``series``' model and value, from seed ``seed + index``."""
        changes: dict = dict(models=(series.kind,), seed=self.seed + index, seeds=1, sweep=None,
                             sweep_values=())
        if series.value is not None:
            changes[self.sweep] = (int(series.value) if self.sweep == "batch_size"
                                   else series.value)
        return replace(self, **changes)


def setting_text(sweep: str, value: float) -> str:
    """A swept value as the labels write it: "lr 0.1", "γ₀ 3"."""
    return f"{SWEEP_SYMBOLS[sweep]} {value:g}"


#: About this many evaluations per training: the points of the curves, which the app redraws
#: after each while the training runs.
CHART_UPDATES = 30


def evaluation_interval(steps: int, evaluations: int = CHART_UPDATES) -> int:
    """The ``eval_every`` that evaluates about ``evaluations`` times in ``steps`` steps (every
    step for short trainings)."""
    return max(1, round(steps / evaluations))


def length_margins(steps: int) -> tuple[int, ...]:
    """The blank rows put above each image by the sequence-length check, for training sequences
    of ``steps`` steps: :data:`LENGTH_FRACTIONS` of it, rounded, without repeats."""
    return tuple(sorted({round(steps * f) for f in LENGTH_FRACTIONS}))


@dataclass
class _Tensors:
    """The dataset on the training device, with the held-out subset used for the curves."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_eval: torch.Tensor
    y_eval: torch.Tensor

    @classmethod
    def build(cls, data: SequenceData, device: str) -> _Tensors:
        held_out = np.arange(len(data.y_test))
        if len(held_out) > EVAL_SAMPLES:
            held_out = np.sort(np.random.RandomState(0).choice(held_out, EVAL_SAMPLES, False))

        def put(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a)).to(device)

        return cls(put(data.x_train), put(data.y_train), put(data.x_test[held_out]),
                   put(data.y_test[held_out]))


def _forward_work(samples: int, hidden: int, steps: int, features: int) -> int:
    """Multiply-adds of one forward pass of ``samples`` sequences of ``steps`` × ``features``:
    at every time step each sample's W x and U h (4H × (F + H)), plus the fixed cost of a time
    step."""
    return steps * (samples * 4 * hidden * (features + hidden) + TIME_STEP_OVERHEAD)


def step_work(config: TrainConfig, data: SequenceData) -> int:
    """Multiply-adds of one training step of one model: the batch's forward pass, and the
    backward pass at about twice its cost."""
    return 3 * _forward_work(config.batch_size, config.hidden_size, data.steps, data.features)


def _eval_slice(hidden: int, steps: int, features: int) -> int:
    """Held-out samples evaluated in one piece: as many as fit in :data:`LN_LSTM_MAX_STEP_WORK`
    (at least one, at most 1000, which keeps the activations small)."""
    per_sample = steps * 4 * hidden * (features + hidden)
    room = LN_LSTM_MAX_STEP_WORK - steps * TIME_STEP_OVERHEAD
    return max(1, min(1000, room // per_sample))


def _sliced_work(samples: int, hidden: int, steps: int, features: int, per_slice: int) -> int:
    """Multiply-adds of a forward pass of ``samples`` sequences in slices of ``per_slice``: each
    slice pays the time steps' fixed cost again."""
    slices = math.ceil(samples / per_slice)
    return (_forward_work(samples, hidden, steps, features)
            + (slices - 1) * steps * TIME_STEP_OVERHEAD)


def _length_slice(samples: int, hidden: int, steps: int, features: int) -> int:
    """Samples per piece of the sequence-length check: sized for its longest sequences."""
    return min(samples, _eval_slice(hidden, steps + length_margins(steps)[-1], features))


def length_work(kind: str, hidden: int, samples: int, steps: int, features: int) -> int:
    """Multiply-adds of one run's sequence-length check: ``samples`` held-out images read again
    at every length of :func:`length_margins`; twice for the BN-LSTM (with its running
    statistics, and with the test batch's own)."""
    per_slice = _length_slice(samples, hidden, steps, features)
    work = sum(_sliced_work(samples, hidden, steps + margin, features, per_slice)
               for margin in length_margins(steps))
    return work * (2 if kind == "bn-lstm" else 1)


def training_work(config: TrainConfig, data: SequenceData) -> int:
    """Multiply-adds of a whole comparison, roughly: every step of every run, every evaluation of
    the held-out set (one every ``eval_every`` steps and one at the end), and each run's
    sequence-length check."""
    held_out = min(len(data.y_test), EVAL_SAMPLES)
    size = (config.hidden_size, data.steps, data.features)
    evaluation = _sliced_work(held_out, *size, _eval_slice(*size))
    evaluations = math.ceil(config.steps / config.eval_every)
    length_samples = min(len(data.y_test), LENGTH_SAMPLES)
    return sum((config.steps * step_work(config.run_config(s, 0), data)
                + evaluations * evaluation
                + length_work(s.kind, config.hidden_size, length_samples, data.steps,
                              data.features)) * config.seeds
               for s in config.series())


def _runs_text(config: TrainConfig) -> str:
    """"3 models", or "2 models × 3 values of the learning rate × 3 seeds": what multiplies the
    work (a γ or β sweep trains the plain LSTM, which has neither, once)."""
    models = len(config.models)
    parts = [f"{models} model{'s' * (models > 1)}"]
    if config.sweep is not None:
        once = ("lstm" in config.models and config.sweep in NORM_SWEEPS and models > 1)
        parts.append(f"{len(config.sweep_values)} values of the {SWEEPS[config.sweep]}"
                     + (" (the LSTM once)" if once else ""))
    if config.seeds > 1:
        parts.append(f"{config.seeds} seeds")
    return " × ".join(parts)


def check_work(config: TrainConfig, data: SequenceData, limits: Limits) -> None:
    """Refuse, before it starts, a comparison that would ask too much of the server.

    At most :data:`LN_LSTM_MAX_RUNS` runs; one training step must fit in
    :data:`LN_LSTM_MAX_STEP_WORK` (Stop is checked between steps), and the whole comparison in
    ``limits.max_training_work``. Raises ValueError saying what to lower.
    """
    lower = ["the training steps", "the batch size", "the hidden size H"]
    fewer = (["seeds"] if config.seeds > 1 else []) + (
        ["swept values"] if config.sweep is not None else []) + ["models"]
    if config.runs > LN_LSTM_MAX_RUNS:
        raise ValueError(f"This comparison trains {config.runs} runs ({_runs_text(config)}); at "
                         f"most {LN_LSTM_MAX_RUNS} fit in memory at once. Choose fewer "
                         f"{_or_list(fewer)}.")
    batch = max(config.run_config(s, 0).batch_size for s in config.series())
    shape = (f"a batch of {batch} sequences of {data.steps} steps × "
             f"{data.features} features with H = {config.hidden_size}")
    one_step = step_work(replace(config, batch_size=batch), data)
    if one_step > LN_LSTM_MAX_STEP_WORK:
        raise ValueError(f"One training step would be too big to stop promptly: {shape} is "
                         f"{_times(one_step / LN_LSTM_MAX_STEP_WORK)} the most one step may take. "
                         "Lower the batch size or the hidden size H.")
    work = training_work(config, data)
    if work > limits.max_training_work:
        where = "this server in demo mode" if limits == DEMO_LIMITS else "this server"
        lower += [f"the number of {what}" for what in fewer]
        raise ValueError(f"This training asks for too much work: {_runs_text(config)} × "
                         f"{config.steps} steps of {shape} is "
                         f"{_times(work / limits.max_training_work)} the most {where} allows "
                         f"for one run. Lower {_or_list(lower)}.")


def _percent(fraction: float) -> str:
    """0.9 as "90%"."""
    return f"{fraction:.0%}"


def _or_list(items: list[str], last: str = "or") -> str:
    """"a, b or c" (or "a, b and c" with ``last="and"``)."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def _times(ratio: float) -> str:
    """A ratio above 1 as "1.3 times", rounded up so that it never reads as 1."""
    return f"{math.ceil(ratio * 10) / 10:g} times"


class ModelRun:
    """One run of a comparison: a model from one seed, its parameters, Adam state, batch sampler
    and curves so far.

    After its last step and evaluation a run reads :data:`LENGTH_SAMPLES` held-out images again
    with blank rows above them (:func:`length_margins`), sequences longer than any it trained on:
    the sequence-length check, in pieces like an evaluation.

    Attributes:
        kind: the model's name (see :data:`lnviz.lessons.ln_lstm.MODELS`).
        label: the label of its series ("LN-LSTM", or "LN-LSTM · lr 0.1" in a sweep).
        step: optimizer steps taken.
        curve: at each evaluation, ``step``, ``loss`` (mean training loss since the previous
            evaluation), ``accuracy`` (on the held-out set) and ``grad_norm`` (mean ‖∇θ‖₂).
        step_loss, step_grad_norm: the training loss and the gradient norm of every step.
        seconds: time spent training and evaluating this model.
        gates_at_init: gate pre-activation quantiles before training (see
            :func:`lnviz.lessons.ln_lstm.gate_quantiles`), if asked for.
        length_hits: per blank-row margin, the held-out images classified right (the BN-LSTM
            with its running statistics); ``length_batch_hits`` the same for the BN-LSTM with
            the statistics of each test batch (None for the other models).
    """

    def __init__(self, kind: str, tensors: _Tensors, num_classes: int, config: TrainConfig,
                 *, label: str | None = None, record_gates: bool = True) -> None:
        self.kind, self.config, self.tensors = kind, config, tensors
        self.label = label or MODEL_LABELS[kind]
        torch.manual_seed(config.seed)  # the same initial weights on every run of this seed
        steps, features = tensors.x_train.shape[1:]
        self.model: SequenceClassifier = make_model(
            kind, features, config.hidden_size, num_classes,
            gamma_init=config.gamma_init, beta_init=config.beta_init,
            single_bias=config.single_bias, max_steps=steps,
        ).to(config.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        # The same generator seed for every model, so all of them see the same mini-batches.
        self.generator = torch.Generator().manual_seed(config.seed)
        self.step = 0
        self.curve: dict[str, list[float]] = {"step": [], "loss": [], "accuracy": [],
                                              "grad_norm": []}
        self.step_loss: list[float] = []
        self.step_grad_norm: list[float] = []
        self.seconds = 0.0
        self.gates_at_init = (gate_quantiles(self.model, tensors.x_eval[:GATE_SAMPLES])
                              if record_gates else None)
        # An evaluation goes through the held-out set in slices, one per piece of work, so that
        # a long one can be stopped too: the next sample and the hits so far, None between them.
        self.eval_slice = _eval_slice(config.hidden_size, steps, features)
        self._evaluation: tuple[int, int] | None = None
        # The sequence-length check, likewise: (margin index, next sample) while under way.
        self.length_margins = length_margins(steps)
        self.length_samples = min(LENGTH_SAMPLES, len(tensors.y_eval))
        self.length_slice = _length_slice(self.length_samples, config.hidden_size, steps,
                                          features)
        self.length_hits = [0] * len(self.length_margins)
        self.length_batch_hits = [0] * len(self.length_margins) if kind == "bn-lstm" else None
        self._length: tuple[int, int] | None = None
        self.length_done = False

    @property
    def evaluating(self) -> bool:
        """Whether an evaluation of the held-out set is under way (the weights wait for it)."""
        return self._evaluation is not None

    @property
    def finished(self) -> bool:
        """Whether every step is taken, the last evaluation recorded and the sequence-length
        check done."""
        return self.step >= self.config.steps and not self.evaluating and self.length_done

    def evaluate_to_date(self) -> None:
        """Finish the evaluation under way, or evaluate now if steps were taken since the last
        one, so that a stopped training's curves end where its weights are (a Stop before the
        first scheduled evaluation left them empty)."""
        evaluated = self.curve["step"][-1] if self.curve["step"] else 0
        if not self.evaluating and self.step > evaluated:
            self._evaluation = (0, 0)
        while self.evaluating:
            self._evaluate_slice()

    def work(self) -> None:
        """One piece of work, at most :data:`LN_LSTM_MAX_STEP_WORK` (as :func:`check_work`
        checks): the next slice of the evaluation under way, else one optimizer step (which
        starts an evaluation every ``eval_every`` steps and after the last), else a slice of the
        sequence-length check."""
        start = time.perf_counter()
        if self.evaluating:
            self._evaluate_slice()
        elif self.step < self.config.steps:
            self._train_step()
        elif self._length is not None:
            self._length_slice()
        self.seconds += time.perf_counter() - start

    def advance(self, n: int) -> None:
        """Take ``n`` optimizer steps on random mini-batches, with their evaluations."""
        target = self.step + n
        while self.step < target or self.evaluating:
            self.work()

    def _train_step(self) -> None:
        config, tensors = self.config, self.tensors
        self.model.train()
        index = torch.randint(len(tensors.y_train), (config.batch_size,),
                              generator=self.generator).to(tensors.y_train.device)
        loss = F.cross_entropy(self.model(tensors.x_train[index]), tensors.y_train[index])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.get_total_norm(  # ‖∇θ‖₂ over all parameters
            [p.grad for p in self.model.parameters() if p.grad is not None])
        self.optimizer.step()
        self.step += 1
        self.step_loss.append(float(loss.detach()))
        self.step_grad_norm.append(float(grad_norm))
        if self.step % config.eval_every == 0 or self.step == config.steps:
            self._evaluation = (0, 0)

    @torch.no_grad()
    def _evaluate_slice(self) -> None:
        start, hits = self._evaluation
        x = self.tensors.x_eval[start:start + self.eval_slice]
        y = self.tensors.y_eval[start:start + self.eval_slice]
        self.model.eval()
        try:
            hits += int((self.model(x).argmax(1) == y).sum())
        finally:
            self.model.train()
        start += len(y)
        if start < len(self.tensors.y_eval):
            self._evaluation = (start, hits)
            return
        self._evaluation = None
        since = self.step - (self.curve["step"][-1] if self.curve["step"] else 0)
        self.curve["step"].append(self.step)
        self.curve["loss"].append(float(np.mean(self.step_loss[-since:])))
        self.curve["accuracy"].append(hits / start)
        self.curve["grad_norm"].append(float(np.mean(self.step_grad_norm[-since:])))
        if self.step >= self.config.steps and not self.length_done:
            self._length = (0, 0)  # trained: the sequence-length check comes next

    @torch.no_grad()
    def _length_slice(self) -> None:
        """One slice of the sequence-length check: images with ``margin`` blank rows above."""
        index, start = self._length
        margin = self.length_margins[index]
        end = min(start + self.length_slice, self.length_samples)
        x, y = self.tensors.x_eval[start:end], self.tensors.y_eval[start:end]
        longer = torch.cat([x.new_zeros(len(x), margin, x.shape[2]), x], dim=1)
        self.model.eval()
        try:
            self.length_hits[index] += int((self.model(longer).argmax(1) == y).sum())
        finally:
            self.model.train()
        if self.length_batch_hits is not None:
            # Training mode on a copy: each step normalized with this test batch's statistics
            # (which moves only the copy's running averages).
            copy_ = copy.deepcopy(self.model).train()
            self.length_batch_hits[index] += int((copy_(longer).argmax(1) == y).sum())
        if end < self.length_samples:
            self._length = (index, end)
        elif index + 1 < len(self.length_margins):
            self._length = (index + 1, 0)
        else:
            self._length, self.length_done = None, True


@dataclass(frozen=True)
class Progress:
    """Where a :class:`Training` stands, for a progress bar and the live curves.

    Attributes:
        fraction: steps taken out of all, in [0, 1].
        text: "Step 120 of 300 · held-out accuracy: LSTM 61%, LN-LSTM 84%" (accuracies once
            evaluated, the mean over the seeds).
        curves: each series' evaluation curve so far (:func:`seed_band`), keyed by its label.
        evaluations: how many points the runs' curves hold in all; a new one means a redraw.
        chance: the accuracy of guessing, 1 / classes.
    """

    fraction: float
    text: str
    curves: dict[str, dict[str, list[float]]]
    evaluations: int
    chance: float


def seed_band(curves: Sequence[Mapping[str, Sequence[float]]]) -> dict[str, list[float]]:
    """One series' curve over its seeds: ``step`` (the evaluations every seed has reached), the
    mean ``loss`` and ``accuracy`` over the seeds, and with two seeds or more the lowest and
    highest seed at every step (``loss_low``, ``loss_high``, ``accuracy_low``,
    ``accuracy_high``). A seed whose loss is NaN makes the mean and the range NaN there."""
    points = min(len(c["step"]) for c in curves)
    band: dict[str, list[float]] = {"step": list(curves[0]["step"][:points])}
    for field_ in ("loss", "accuracy"):
        values = np.array([c[field_][:points] for c in curves], dtype=np.float64).reshape(
            len(curves), points)
        band[field_] = values.mean(axis=0).tolist()
        if len(curves) > 1:
            band[f"{field_}_low"] = values.min(axis=0).tolist()
            band[f"{field_}_high"] = values.max(axis=0).tolist()
    return band


class Training(Chunked):
    """A comparison in progress: every run of ``config`` on ``data``, advanced in chunks.

    Advanced in chunks (:class:`lnviz.chunked.Chunked`): a piece is a training step, or a slice
    of an evaluation or of the sequence-length check, always of the run furthest behind, so that
    their curves grow together; ``advance(n)`` moves each run n steps further. Creating one is
    instant: the models are built on first use. :func:`summarize` takes the same lock as the
    advances.
    """

    def __init__(self, data: SequenceData, config: TrainConfig) -> None:
        super().__init__()
        self.data, self.config = data, config
        self._tensors: _Tensors | None = None
        self._runs: list[ModelRun] = []

    def _build(self) -> None:
        with self._lock:
            if self._tensors is None:
                tensors = _Tensors.build(self.data, self.config.device)
                self._runs = [
                    ModelRun(s.kind, tensors, self.data.num_classes,
                             self.config.run_config(s, index), label=s.label,
                             record_gates=index == 0)
                    for s in self.config.series() for index in range(self.config.seeds)]
                self._tensors = tensors

    @property
    def tensors(self) -> _Tensors:
        """The dataset on the training device, with the held-out subset used for the curves."""
        self._build()
        return self._tensors

    @property
    def runs(self) -> list[ModelRun]:
        """Every :class:`ModelRun`: series by series (in the order of
        :meth:`TrainConfig.series`), seed by seed within each."""
        self._build()
        return self._runs

    def series_runs(self) -> dict[str, list[ModelRun]]:
        """The runs of each series, keyed by its label, seed by seed."""
        grouped: dict[str, list[ModelRun]] = {}
        for run in self.runs:
            grouped.setdefault(run.label, []).append(run)
        return grouped

    @property
    def step(self) -> int:
        """Steps every run has taken."""
        return min(run.step for run in self.runs)

    def _finished(self) -> bool:
        """Whether all steps are taken, evaluated and checked."""
        return all(run.finished for run in self.runs)

    def _work(self) -> None:
        min((run for run in self.runs if not run.finished), key=lambda run: run.step).work()

    def advance(self, n: int) -> None:
        """Up to ``n`` more steps for every run, with their evaluations (fewer at the end, and
        none once stopped)."""
        with self._lock:
            for run in self.runs:
                target = min(run.step + n, self.config.steps)
                while not self.stopped and (run.step < target or run.evaluating):
                    run.work()


    def curves(self) -> dict[str, dict[str, list[float]]]:
        """Each series' evaluation curve over its seeds (:func:`seed_band`), keyed by its label
        (e.g. "LN-LSTM")."""
        return {label: seed_band([run.curve for run in runs])
                for label, runs in self.series_runs().items()}

    def result(self) -> TrainingResult | None:
        """What the training learned, finished or stopped (:func:`summarize`); None if it
        stopped before its first step."""
        return None if self.step == 0 else summarize(self)

    def progress(self) -> Progress:
        """Steps taken, the latest held-out accuracies and the curves so far (builds the models
        on first use)."""
        step, total, curves = self.step, self.config.steps, self.curves()
        accuracies = ", ".join(f"{label} {c['accuracy'][-1]:.0%}"
                               for label, c in curves.items() if c["accuracy"])
        checking = step >= total and not self.done
        return Progress(
            fraction=step / total,
            text=f"Step {step} of {total}" + (f" · held-out accuracy: {accuracies}"
                                              if accuracies else "")
                 + (" · reading longer test sequences" if checking else ""),
            curves=curves, evaluations=sum(len(run.curve["step"]) for run in self.runs),
            chance=1 / self.data.num_classes)


@dataclass(frozen=True)
class BatchSensitivity:
    """How much one model's outputs change when the same samples are batched differently."""

    model: str
    statistics: str
    batch_sizes: tuple[int, int]
    max_difference: float
    #: the largest |logit| of these samples (evaluation mode): the scale rounding is relative to
    largest_logit: float = 1.0

    @property
    def rounding(self) -> bool:
        """Whether the difference is within float32 rounding of logits this large (a relative
        :data:`ROUNDING` of the largest, or of 1 for small logits)."""
        return bool(self.max_difference <= ROUNDING * max(1.0, self.largest_logit))


@dataclass(frozen=True)
class LengthCheck:
    """Held-out images read with blank rows above them: sequences longer than the training ones.

    Attributes:
        train_length: T, the steps every training sequence had.
        lengths: the test sequence lengths, T plus each margin of :func:`length_margins`.
        samples: the held-out images read at every length.
        batch: the test batch size whose statistics the BN-LSTM's second reading uses.
        accuracy: per series label, the held-out accuracy at every length, one row per seed
            (the BN-LSTM with its running statistics, used in evaluation mode).
        batch_statistics: per BN-LSTM series, the same with each test batch's own statistics.
        running_var: per BN-LSTM series, the running variance of the cell state c at each of
            the T time steps (mean over the H units; seed ``config.seed``): the statistics step
            t is normalized with in evaluation mode. Steps beyond T have none of their own.
    """

    train_length: int
    lengths: tuple[int, ...]
    samples: int
    batch: int
    accuracy: dict[str, np.ndarray]
    batch_statistics: dict[str, np.ndarray]
    running_var: dict[str, np.ndarray]

    def subset(self, labels: Sequence[str] | None) -> LengthCheck:
        """The check for the series in ``labels`` only (all of them for None)."""
        if labels is None:
            return self

        def keep(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {label: v for label, v in values.items() if label in labels}

        return replace(self, accuracy=keep(self.accuracy),
                       batch_statistics=keep(self.batch_statistics),
                       running_var=keep(self.running_var))

    def mean(self) -> dict[str, np.ndarray]:
        """Per series, the accuracy at every length averaged over the seeds."""
        return {label: a.mean(axis=0) for label, a in self.accuracy.items()}

    def bands(self) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per series, the accuracy at every length: (mean, lowest seed, highest seed)."""
        return {label: (a.mean(axis=0), a.min(axis=0), a.max(axis=0))
                for label, a in self.accuracy.items()}

    def batch_means(self) -> dict[str, np.ndarray]:
        """Per BN-LSTM series, the accuracy with the test batch's statistics (mean of seeds)."""
        return {label: a.mean(axis=0) for label, a in self.batch_statistics.items()}

    def findings(self) -> list[str]:
        """What the check shows, in sentences computed from its numbers: the accuracies at the
        training length and at the longest test length, and who lost the most."""
        longest, t = self.lengths[-1], self.train_length
        if longest == t:
            return []
        means = self.mean()
        seeds = next(iter(self.accuracy.values())).shape[0]
        over = "" if seeds == 1 else f" (mean of {seeds} seeds)"
        parts = [f"{label} {m[-1]:.0%} (from {m[0]:.0%} at {t} steps)"
                 for label, m in means.items()]
        sentences = [f"Read with {longest - t} blank rows above the digit ({longest} steps, "
                     f"{longest / t:.3g}× the training length), the held-out accuracy{over} is: "
                     + ", ".join(parts) + "."]
        for label, values in self.batch_statistics.items():
            m = values.mean(axis=0)
            sentences.append(
                f"The {label} normalizing every step with the statistics of its test batch "
                f"({self.batch} images) instead of its running averages: {m[-1]:.0%} at "
                f"{longest} steps (from {m[0]:.0%} at {t}); it then no longer computes each "
                "image on its own.")
        drops = {label: m[0] - m[-1] for label, m in means.items()}
        if len(means) > 1:
            worst = max(drops, key=drops.get)
            sentences.append(f"Largest drop: {worst}, {drops[worst] * 100:.0f} percentage "
                             "points.")
        ln_drops = [label for label, drop in drops.items()
                    if label.startswith("LN-LSTM") and drop >= LENGTH_NOTABLE_DROP]
        if ln_drops:
            sentences.append(
                f"The {_or_list(ln_drops, 'and')} lose{'s' * (len(ln_drops) == 1)} "
                f"{LENGTH_NOTABLE_DROP * 100:.0f} percentage points or more too, though "
                "LayerNorm needs no statistics from training: its norm of the cell state "
                "rescales the small memory the blank rows leave to the spread γ_c sets, so "
                "the digit's first row meets a full-size h instead of the h₀ = 0 it was "
                "trained with.")
        return sentences


@dataclass(frozen=True)
class TrainingResult:
    """A finished (or stopped) comparison as plain numbers, ready for figures and JSON.

    Keyed by series label ("LN-LSTM", or "LN-LSTM · lr 0.1" in a sweep): ``curves`` over the
    seeds (:func:`seed_band`) and ``seed_curves`` seed by seed; ``step_loss`` and
    ``step_grad_norm`` one list per seed. ``gates`` and ``gates_at_init`` map a series to the
    (5, T, 5) quantiles of :func:`lnviz.lessons.ln_lstm.gate_quantiles` after and before
    training, and ``batch_sensitivity`` checks it, both for its run from seed ``config.seed``.
    ``length`` is the sequence-length check (None if the training stopped before it);
    ``gate_samples`` the held-out images behind the gate quantiles; ``sequence`` the data's
    (time steps, features per step).
    ``seconds`` is each series' wall-clock time, all seeds together: it depends on the
    machine's load, so the page reports steps instead.
    """

    dataset: str
    num_classes: int
    config: TrainConfig
    steps_done: int
    stopped: bool
    curves: dict[str, dict[str, list[float]]]
    seed_curves: dict[str, list[dict[str, list[float]]]]
    step_loss: dict[str, list[list[float]]]
    step_grad_norm: dict[str, list[list[float]]]
    seconds: dict[str, float]
    parameters: dict[str, int]
    gates: dict[str, np.ndarray]
    gates_at_init: dict[str, np.ndarray]
    batch_sensitivity: list[BatchSensitivity] = field(default_factory=list)
    length: LengthCheck | None = None
    gate_samples: int = GATE_SAMPLES
    sequence: tuple[int, int] = (0, 0)

    @property
    def seeds(self) -> tuple[int, ...]:
        """The seeds every series was trained from."""
        return tuple(range(self.config.seed, self.config.seed + self.config.seeds))

    def final_accuracies(self) -> dict[str, list[float]]:
        """Held-out accuracy at the last evaluation, per series label, one per seed."""
        return {label: [c["accuracy"][-1] for c in curves if c["accuracy"]]
                for label, curves in self.seed_curves.items()}

    def final_accuracy(self) -> dict[str, float]:
        """Held-out accuracy at the last evaluation, per series label (mean over the seeds)."""
        return {label: float(np.mean(values)) for label, values in
                self.final_accuracies().items() if values}

    def steps_to_accuracy(self, threshold: float = TARGET_ACCURACY
                          ) -> dict[str, list[int | None]]:
        """Per series, for every seed: the first evaluated step at which the held-out accuracy
        reached ``threshold`` (None if it never did), a measure of how fast it converged."""
        return {label: [next((s for s, a in zip(c["step"], c["accuracy"], strict=True)
                              if a >= threshold), None) for c in curves]
                for label, curves in self.seed_curves.items()}

    def median_steps_to(self, threshold: float = TARGET_ACCURACY) -> dict[str, float]:
        """Per series, the median over the seeds of :meth:`steps_to_accuracy`, a seed that
        never got there counting as infinitely many steps (inf: most seeds never did)."""
        return {label: float(np.median([math.inf if s is None else s for s in steps]))
                for label, steps in self.steps_to_accuracy(threshold).items()}

    def reach_text(self, label: str, threshold: float = TARGET_ACCURACY) -> str:
        """When ``label`` first reached ``threshold``, in words, seed by seed: "90% first
        reached at step 40", or "90% first reached: seed 0 at step 40, seed 1 never"."""
        steps = self.steps_to_accuracy(threshold)[label]
        goal = _percent(threshold)
        if len(steps) == 1:
            return f"{goal} first reached at step {steps[0]}" if steps[0] is not None else \
                f"never reached {goal}"
        if all(step is None for step in steps):
            return f"no seed reached {goal}"
        return f"{goal} first reached: " + ", ".join(
            f"seed {seed} " + ("never" if step is None else f"at step {step}")
            for seed, step in zip(self.seeds, steps, strict=True))

    def diverged(self) -> dict[str, int]:
        """The series some of whose seeds' training loss became NaN or infinite: how many."""
        counts = {label: sum(not np.isfinite(seed).all() for seed in losses)
                  for label, losses in self.step_loss.items()}
        return {label: n for label, n in counts.items() if n}

    def grad_norm_bands(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None,
                                       dict[str, np.ndarray] | None]:
        """‖∇θ‖₂ at every step, per series: the median over the seeds, and (with two seeds or
        more) the lowest and highest seed; the steps every seed has taken."""
        median, low, high = {}, {}, {}
        for label, seeds in self.step_grad_norm.items():
            steps = min(len(s) for s in seeds)
            values = np.array([s[:steps] for s in seeds], dtype=np.float64).reshape(
                len(seeds), steps)
            median[label] = np.median(values, axis=0)
            low[label], high[label] = values.min(axis=0), values.max(axis=0)
        return (median, low, high) if self.config.seeds > 1 else (median, None, None)

    def settings(self) -> list[tuple[str | None, list[str]]]:
        """The comparisons the findings make: per setting (a swept value's text, or None
        without a sweep), the labels of the series trained at it. The plain LSTM of a γ or β
        sweep belongs to every setting."""
        config = self.config
        if config.sweep is None:
            return [(None, list(self.curves))]
        series = config.series()
        return [(setting_text(config.sweep, v),
                 [s.label for s in series if s.value is None or s.value == v])
                for v in config.sweep_values]

    def findings(self, threshold: float = TARGET_ACCURACY) -> list[str]:
        """What these runs show about who learns better and faster, in sentences computed from
        them: per setting, the models by mean final accuracy with their seed ranges, whether the
        leader's range clears the runner-up's, and who reached ``threshold`` first; then, for a
        learning-rate sweep of the LSTM and the LN-LSTM, where the LN-LSTM came out ahead."""
        finals, medians = self.final_accuracies(), self.median_steps_to(threshold)
        seeds = self.config.seeds
        goal = _percent(threshold)
        sentences = []
        for setting, labels in self.settings():
            labels = [label for label in labels if finals.get(label)]
            if not labels:
                continue
            names = {label: label.split(" · ")[0] for label in labels}
            ranked = sorted(labels, key=lambda label: -np.mean(finals[label]))
            where = f"At {setting}: " if setting else ""
            if seeds == 1:
                text = ", ".join(f"{names[la]} {finals[la][0]:.1%}" for la in ranked)
                sentence = _sentence(where, f"final held-out accuracy, one seed each: {text}.")
                if len(ranked) > 1:
                    sentence += (" One seed is one draw of the initial weights and the "
                                 "batches: raise Seeds before reading a winner into this.")
            else:
                text = ", ".join(f"{names[la]} {np.mean(finals[la]):.1%} "
                                 f"({min(finals[la]):.1%}–{max(finals[la]):.1%})"
                                 for la in ranked)
                sentence = _sentence(where, f"final held-out accuracy, mean of {seeds} seeds "
                                            f"(lowest–highest seed): {text}.")
                if len(ranked) > 1:
                    first, second = ranked[0], ranked[1]
                    if min(finals[first]) > max(finals[second]):
                        sentence += (f" Every seed of the {names[first]} ends above every seed "
                                     f"of the {names[second]}.")
                    else:
                        sentence += (f" The {names[first]}'s and the {names[second]}'s seed "
                                     "ranges overlap: other seeds could swap them.")
            sentences.append(sentence)
            if len(ranked) > 1:
                sentences.append(_sentence(where, self._speed_sentence(
                    labels, names, medians, threshold, goal)))
        claim = self._learning_rate_claim()
        if claim:
            sentences.append(claim)
        return sentences

    def _speed_sentence(self, labels: list[str], names: dict[str, str],
                        medians: dict[str, float], threshold: float, goal: str) -> str:
        """Who reached ``threshold`` first (the median over seeds), and who did not."""
        steps = self.steps_to_accuracy(threshold)
        order = sorted(labels, key=lambda label: medians[label])
        got = [la for la in order if not math.isinf(medians[la])]
        missed = [la for la in order if math.isinf(medians[la])]
        seeds = self.config.seeds
        if not got:
            return f"no model reached {goal} held-out accuracy in most of its seeds." \
                if seeds > 1 else f"no model reached {goal} held-out accuracy."
        how = "step" if seeds == 1 else "median step"
        ties = {}  # models that got there at the same step are named together
        for la in got:
            ties.setdefault(medians[la], []).append(f"the {names[la]}")
        parts = [f"{goal} first reached by " + ", then by ".join(
            f"{_or_list(group, 'and')} ({how} {step:g}{' each' * (len(group) > 1)})"
            for step, group in ties.items())]
        for la in missed:
            reached = sum(s is not None for s in steps[la])
            parts.append(f"the {names[la]} " + ("never reached it" if not reached else
                                                f"reached it in only {reached} of {seeds} seeds"))
        return "; ".join(parts) + "."

    def _learning_rate_claim(self) -> str | None:
        """The LN-LSTM walkthrough's claim that LayerNorm allows higher learning rates, against a
        learning-rate
        sweep of the LSTM and the LN-LSTM (None for any other comparison)."""
        config = self.config
        if config.sweep != "lr" or len(config.sweep_values) < 2 or not {
                "lstm", "ln-lstm"} <= set(config.models):
            return None
        finals, medians = self.final_accuracies(), self.median_steps_to()
        ahead, behind, clear, sooner = [], [], [], []
        for value in sorted(config.sweep_values):
            ln, plain = (f"{MODEL_LABELS[k]} · {setting_text('lr', value)}"
                         for k in ("ln-lstm", "lstm"))
            if not (finals.get(ln) and finals.get(plain)):
                continue
            text = f"{value:g}"
            difference = np.mean(finals[ln]) - np.mean(finals[plain])
            (ahead if difference > 0 else behind if difference < 0 else []).append(text)
            if min(finals[ln]) > max(finals[plain]):
                clear.append(text)
            if medians[ln] < medians[plain]:
                sooner.append(text)
        if not ahead and not behind:
            return None

        def rates(values: list[str]) -> str:
            return f"lr {_or_list(values, 'and')}" if values else "no learning rate tried"

        seeds = "" if config.seeds == 1 else f" (means of {config.seeds} seeds)"
        return ("The LN-LSTM walkthrough says LayerNorm lets an LSTM train with higher learning "
                "rates and "
                f"converge faster. In these runs{seeds}, the LN-LSTM ends ahead of the LSTM at "
                f"{rates(ahead)} and behind at {rates(behind)}; every LN-LSTM seed ends above "
                f"every LSTM seed at {rates(clear)}; the LN-LSTM reaches "
                f"{_percent(TARGET_ACCURACY)} sooner (median step) at {rates(sooner)}.")

    def sweep_accuracy(self) -> dict[str, tuple[list[float], list[float], list[float]]]:
        """For the sweep figure: per model, the final accuracy at every swept value (mean,
        lowest seed, highest seed). The plain LSTM of a γ or β sweep, trained once, is the same
        at every value ("LSTM (no norms)")."""
        config, finals = self.config, self.final_accuracies()
        lines: dict[str, tuple[list[float], list[float], list[float]]] = {}
        for s in config.series():
            values = finals.get(s.label)
            if not values:
                continue
            repeat = len(config.sweep_values) if s.value is None else 1
            name = MODEL_LABELS[s.kind] + (" (no norms)" if s.value is None else "")
            mean, low, high = lines.setdefault(name, ([], [], []))
            mean += [float(np.mean(values))] * repeat
            low += [min(values)] * repeat
            high += [max(values)] * repeat
        return lines

    def sweep_table(self) -> pd.DataFrame:
        """One row per series: its model and setting, the final accuracy (mean, lowest and
        highest seed), when it first reached the target accuracy, and diverged seeds."""
        finals, medians = self.final_accuracies(), self.median_steps_to()
        steps, diverged = self.steps_to_accuracy(), self.diverged()
        config = self.config
        rows = []
        for s in config.series():
            values = finals.get(s.label)
            if not values:
                continue
            setting = (SWEEPS[config.sweep], "—" if s.value is None else f"{s.value:g}") \
                if config.sweep else None
            rows.append({
                "model": MODEL_LABELS[s.kind],
                **({setting[0]: setting[1]} if setting else {}),
                "final accuracy (mean)": float(np.mean(values)),
                "lowest seed": min(values), "highest seed": max(values),
                f"seeds reaching {_percent(TARGET_ACCURACY)}":
                    f"{sum(x is not None for x in steps[s.label])} of {len(values)}",
                f"median step to {_percent(TARGET_ACCURACY)}":
                    "never, in most seeds" if math.isinf(medians[s.label])
                    else f"{medians[s.label]:g}",
                "diverged seeds": diverged.get(s.label, 0),
            })
        return pd.DataFrame(rows)

    @property
    def chance(self) -> float:
        """The held-out accuracy of guessing: 1 / classes."""
        return 1 / self.num_classes

    def gate_bands(self, gate: str = "all", at_init: bool = False, labels: Sequence[str] | None
                   = None) -> dict[str, np.ndarray]:
        """Per series label (all, or those in ``labels``), the (T, 5) quantiles of one gate's
        pre-activations at every time step (``gate`` one of :data:`GATES`, or "all" for the
        four pooled), after training or, with ``at_init``, before it."""
        row = len(GATES) if gate == "all" else GATES.index(gate)  # gate_quantiles' rows
        gates = self.gates_at_init if at_init else self.gates
        return {label: quantiles[row] for label, quantiles in gates.items()
                if labels is None or label in labels}

    def gate_findings(self, gate: str = "all", at_init: bool = False,
                      labels: Sequence[str] | None = None) -> str:
        """How wide each series' 5–95 % band of gate pre-activations is, at the first time step
        and the last, and the widest it gets: a sentence computed from the bands drawn."""
        parts = []
        for label, q in self.gate_bands(gate, at_init, labels).items():
            width = q[:, 4] - q[:, 0]
            parts.append(f"{label} {width[0]:.2g} → {width[-1]:.2g} (widest {width.max():.2g})")
        steps = next(iter(self.gates.values())).shape[1]
        return (f"Width of the 5–95 % band at time step 1 → step {steps}: " + "; ".join(parts)
                + ".")

    def _batch_rows(self, labels: Sequence[str] | None) -> list[BatchSensitivity]:
        return [r for r in self.batch_sensitivity if labels is None or r.model in labels]

    def batch_table(self, labels: Sequence[str] | None = None) -> pd.DataFrame:
        """The batch-dependence check, one row per model and kind of statistics (of the series
        in ``labels``, or all)."""
        return pd.DataFrame([{
            "model": r.model, "normalization statistics": r.statistics,
            "batch sizes compared": f"{r.batch_sizes[0]} vs {r.batch_sizes[1]}",
            "max |difference| of the logits": r.max_difference,
        } for r in self._batch_rows(labels)])

    def batch_findings(self, labels: Sequence[str] | None = None) -> str | None:
        """What the batch-dependence check shows, in a sentence (for the series in ``labels``,
        or all); None without an LN-LSTM or a BN-LSTM, whose outputs are the ones in question."""
        rows = self._batch_rows(labels)
        ln_rows = [r for r in rows if r.model.startswith("LN-LSTM")]
        bn_rows = [r for r in rows if r.statistics.startswith("batch")]
        findings = []
        if ln_rows:
            row = ln_rows[0]
            n = row.batch_sizes[1]
            which = _setting_of(row.model)
            scale = (f"largest difference {row.max_difference:.1e} on logits up to "
                     f"{row.largest_logit:.2g}")
            if np.isfinite(row.max_difference) and row.rounding:
                findings.append(f"the trained LN-LSTM{which} gives each of {n} held-out images "
                                f"the same logits alone as in a batch of {n} ({scale}: float32 "
                                "rounding)")
            elif np.isfinite(row.max_difference):
                findings.append(f"the trained LN-LSTM{which}'s logits for {n} held-out images "
                                f"differ alone and in a batch of {n} ({scale}), more than "
                                "float32 rounding explains")
            else:
                findings.append(f"the trained LN-LSTM{which} gives NaN logits (it diverged), "
                                "so its check says nothing")
        if bn_rows:
            row = bn_rows[0]
            which = _setting_of(row.model)
            if np.isfinite(row.max_difference):
                findings.append(f"the BN-LSTM{which} with batch statistics changes them by up "
                                f"to {row.max_difference:.2g} when the same images come in "
                                "pairs instead (a single image cannot be batch-normalized at "
                                "all: it has no spread across the batch)")
            else:
                findings.append(f"the BN-LSTM{which} gives NaN logits (it diverged), so its "
                                "check says nothing")
        if not findings:
            return None
        return "The same images, batched differently: " + "; ".join(findings) + "."


def _sentence(prefix: str, text: str) -> str:
    """``text`` after ``prefix`` ("At lr 0.1: "), capitalized when there is no prefix."""
    return prefix + text if prefix else text[0].upper() + text[1:]


def _setting_of(label: str) -> str:
    """" at lr 0.1" for a series label "LN-LSTM · lr 0.1"; "" without a setting."""
    return f" at {label.split(' · ', 1)[1]}" if " · " in label else ""


def _batch_sensitivities(run: ModelRun, x: torch.Tensor) -> list[BatchSensitivity]:
    """LayerNorm and the plain LSTM: one sample alone vs in a batch of len(x). BatchNorm: its
    batch statistics (pairs, the smallest batch it can normalize, vs len(x), trimmed to an even
    number) and its running averages (alone vs batched)."""
    label, n = run.label, len(x)
    with torch.no_grad():
        largest = float(run.model.eval()(x).abs().max())
    run.model.train()
    if run.kind != "bn-lstm":
        stats = "per sample (LayerNorm)" if run.kind == "ln-lstm" else "none"
        return [BatchSensitivity(label, stats, (1, n), batch_sensitivity(run.model, x, 1),
                                 largest)]
    pairs = x[:n - n % 2]
    return [
        BatchSensitivity(label, "batch statistics (training mode)", (2, len(pairs)),
                         batch_sensitivity(run.model, pairs, 2, training=True), largest),
        BatchSensitivity(label, "running averages (evaluation mode)", (1, n),
                         batch_sensitivity(run.model, x, 1), largest),
    ]


def _length_check(training: Training) -> LengthCheck | None:
    """The sequence-length check of every run, or None if any run has not finished it."""
    runs = training.runs
    if not all(run.length_done for run in runs):
        return None
    first = runs[0]
    accuracy, batch_statistics, running_var = {}, {}, {}
    for label, series in training.series_runs().items():
        accuracy[label] = np.array([run.length_hits for run in series]) / first.length_samples
        if series[0].length_batch_hits is not None:
            batch_statistics[label] = (np.array([run.length_batch_hits for run in series])
                                       / first.length_samples)
            cell = series[0].model.cell
            running_var[label] = cell.running_var_c.mean(dim=1).cpu().numpy()
    t = training.data.steps
    return LengthCheck(t, tuple(t + m for m in first.length_margins), first.length_samples,
                       first.length_slice, accuracy, batch_statistics, running_var)


def summarize(training: Training) -> TrainingResult:
    """The numbers a page or a JSON file needs from a training, finished or stopped: curves,
    times, gate pre-activation quantiles, the batch-dependence check on 64 held-out samples,
    and the sequence-length check."""
    with training._lock:  # not while another thread is inside advance()
        return _summarize(training)


def _summarize(training: Training) -> TrainingResult:
    for run in training.runs:
        run.evaluate_to_date()
    x_gates = training.tensors.x_eval[:GATE_SAMPLES]
    x_batch = training.tensors.x_eval[:64]
    grouped = training.series_runs()
    first = {label: runs[0] for label, runs in grouped.items()}  # seed config.seed
    return TrainingResult(
        dataset=training.data.name,
        num_classes=training.data.num_classes,
        config=training.config,
        steps_done=training.step,
        stopped=training.stopped and training.step < training.config.steps,
        curves=training.curves(),
        seed_curves={label: [{k: list(v) for k, v in r.curve.items()} for r in runs]
                     for label, runs in grouped.items()},
        step_loss={label: [list(r.step_loss) for r in runs] for label, runs in grouped.items()},
        step_grad_norm={label: [list(r.step_grad_norm) for r in runs]
                        for label, runs in grouped.items()},
        seconds={label: sum(r.seconds for r in runs) for label, runs in grouped.items()},
        parameters={label: sum(p.numel() for p in r.model.parameters())
                    for label, r in first.items()},
        gates={label: gate_quantiles(r.model, x_gates) for label, r in first.items()},
        gates_at_init={label: r.gates_at_init for label, r in first.items()},
        batch_sensitivity=[row for r in first.values() for row in _batch_sensitivities(r, x_batch)],
        length=_length_check(training),
        gate_samples=len(x_gates),
        sequence=(training.data.steps, training.data.features),
    )


def train(data: SequenceData, config: TrainConfig,
          on_eval: Callable[[ModelRun], None] | None = None) -> Training:
    """Train each run of ``config`` to the end (its sequence-length check included), one after
    the other (so that each one's ``seconds`` is its own), calling ``on_eval(run)`` after every
    evaluation."""
    training = Training(data, config)
    for run in training.runs:
        while run.step < config.steps:
            run.advance(min(config.eval_every, config.steps - run.step))
            if on_eval is not None:
                on_eval(run)
        while not run.finished:
            run.work()
    return training


def to_json(result: TrainingResult) -> dict:
    """The JSON the CLI writes: the dataset, the config and one record per series (its curve
    over the seeds, and each seed's)."""
    config = result.config
    return {
        "dataset": result.dataset,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "runs": [{"model": s.kind, "label": s.label, "value": s.value,
                  **result.curves[s.label], "seeds": result.seed_curves[s.label],
                  "seconds": result.seconds[s.label]}
                 for s in config.series()],
        "batch_sensitivity": [asdict(row) for row in result.batch_sensitivity],
    }
