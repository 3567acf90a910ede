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

Every model of a comparison starts from the same seed and sees the same mini-batches, so their
curves differ only by the normalization. :class:`Training` advances all models a piece at a time
(one training step, or a slice of an evaluation) for a given number of seconds, which lets the app
draw the curves while they grow and stop within a fraction of a second; :func:`check_work`
refuses, before it starts, a training that would ask the server for too much; :func:`summarize`
turns a finished (or stopped) training into plain numbers for the figures. The datasets are in
:mod:`lnviz.data.sequences`; ``python -m lnviz.train`` runs the same from a shell.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from lnviz.data.sequences import SequenceData
from lnviz.devices import available_devices
from lnviz.limits import DEMO_LIMITS, Limits
from lnviz.norms import batch_norm, layer_norm

__all__ = [
    "CHART_UPDATES",
    "GATES",
    "LN_LSTM_CELL_CODE",
    "MAX_STEP_WORK",
    "MODELS",
    "MODEL_LABELS",
    "BatchNormLSTMCell",
    "BatchSensitivity",
    "LSTMCell",
    "LayerNormLSTMCell",
    "ModelRun",
    "Progress",
    "SequenceClassifier",
    "TrainConfig",
    "Training",
    "TrainingResult",
    "batch_sensitivity",
    "check_work",
    "evaluation_interval",
    "gate_quantiles",
    "make_model",
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


# --- Training the models side by side ------------------------------------------------------------

#: Held-out samples used for the accuracy curves (a fixed random subset of larger test sets).
EVAL_SAMPLES = 2000
#: Held-out samples whose gate pre-activations are summarized.
GATE_SAMPLES = 256
#: What one time step of one forward pass costs beyond its matrix products (the Python loop over
#: the steps, the norms' small ops), as the number of multiply-adds that take as long: measured
#: at about 0.15 ms on a CPU core. It dominates for small models and long sequences.
TIME_STEP_OVERHEAD = 3_000_000
#: The most multiply-adds one uninterruptible piece of work may take: a training step of one
#: model, or one slice of an evaluation (about a third of a second on two CPU cores). The largest
#: step the page offers on MNIST (batch 256, H = 256, 28 × 28) takes 6.5e9. A training is
#: stopped between pieces, so this bounds how long Stop waits.
MAX_STEP_WORK = 8_000_000_000


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a comparison's numbers (with the data): same config, same curves.

    Every model in ``models`` starts from ``seed`` and sees the same sequence of mini-batches.
    ``gamma_init``/``beta_init``/``single_bias`` configure the norms of the LN- and BN-LSTM.
    The held-out set is evaluated every ``eval_every`` steps.
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

    def __post_init__(self) -> None:
        unknown = [m for m in self.models if m not in MODELS]
        if not self.models or unknown or len(set(self.models)) != len(self.models):
            raise ValueError(f"models must be distinct names from {', '.join(MODELS)}; got "
                             f"{list(self.models)}")
        if self.batch_size < 2:
            raise ValueError("batch_size must be at least 2 (BatchNorm needs two samples)")
        if min(self.hidden_size, self.steps, self.eval_every) < 1 or not self.lr > 0:
            raise ValueError("hidden_size, steps and eval_every must be positive, lr above 0")
        if self.device not in available_devices():
            raise ValueError(f"device {self.device!r} is not available here; choose one of "
                             f"{available_devices()}")


#: About this many evaluations per training: the points of the curves, which the app redraws
#: after each while the training runs.
CHART_UPDATES = 30


def evaluation_interval(steps: int, evaluations: int = CHART_UPDATES) -> int:
    """The ``eval_every`` that evaluates about ``evaluations`` times in ``steps`` steps (every
    step for short trainings)."""
    return max(1, round(steps / evaluations))


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
    """Held-out samples evaluated in one piece: as many as fit in :data:`MAX_STEP_WORK`
    (at least one, at most 1000, which keeps the activations small)."""
    per_sample = steps * 4 * hidden * (features + hidden)
    room = MAX_STEP_WORK - steps * TIME_STEP_OVERHEAD
    return max(1, min(1000, room // per_sample))


def training_work(config: TrainConfig, data: SequenceData) -> int:
    """Multiply-adds of a whole training, roughly: every step of every model, and every
    evaluation of the held-out set (one every ``eval_every`` steps and one at the end)."""
    held_out = min(len(data.y_test), EVAL_SAMPLES)
    size = (config.hidden_size, data.steps, data.features)
    slices = math.ceil(held_out / _eval_slice(*size))
    evaluation = _forward_work(held_out, *size) + (slices - 1) * data.steps * TIME_STEP_OVERHEAD
    evaluations = math.ceil(config.steps / config.eval_every)
    per_model = config.steps * step_work(config, data) + evaluations * evaluation
    return len(config.models) * per_model


def check_work(config: TrainConfig, data: SequenceData, limits: Limits) -> None:
    """Refuse, before it starts, a training that would ask too much of the server.

    One training step must fit in :data:`MAX_STEP_WORK` (Stop is checked between steps), and the
    whole training in ``limits.max_training_work``. Raises ValueError saying what to lower.
    """
    shape = (f"a batch of {config.batch_size} sequences of {data.steps} steps × "
             f"{data.features} features with H = {config.hidden_size}")
    one_step = step_work(config, data)
    if one_step > MAX_STEP_WORK:
        raise ValueError(f"One training step would be too big to stop promptly: {shape} is "
                         f"{_times(one_step / MAX_STEP_WORK)} the most one step may take. "
                         "Lower the batch size or the hidden size H.")
    work = training_work(config, data)
    if work > limits.max_training_work:
        where = "this server in demo mode" if limits == DEMO_LIMITS else "this server"
        models = len(config.models)
        raise ValueError(f"This training asks for too much work: {models} model"
                         f"{'s' * (models > 1)} × {config.steps} steps of {shape} is "
                         f"{_times(work / limits.max_training_work)} the most {where} allows "
                         "for one run. Lower the training steps, the batch size, the hidden "
                         "size H or the number of models.")


def _times(ratio: float) -> str:
    """A ratio above 1 as "1.3 times", rounded up so that it never reads as 1."""
    return f"{math.ceil(ratio * 10) / 10:g} times"


class ModelRun:
    """One model of a comparison: its parameters, Adam state, batch sampler and curves so far.

    Attributes:
        kind: the model's name (see :data:`lnviz.lessons.training.MODELS`).
        step: optimizer steps taken.
        curve: at each evaluation, ``step``, ``loss`` (mean training loss since the previous
            evaluation), ``accuracy`` (on the held-out set) and ``grad_norm`` (mean ‖∇θ‖₂).
        step_loss, step_grad_norm: the training loss and the gradient norm of every step.
        seconds: time spent training and evaluating this model.
        gates_at_init: gate pre-activation quantiles before training (see
            :func:`lnviz.lessons.training.gate_quantiles`).
    """

    def __init__(self, kind: str, tensors: _Tensors, num_classes: int, config: TrainConfig
                 ) -> None:
        self.kind, self.config, self.tensors = kind, config, tensors
        torch.manual_seed(config.seed)  # the same initial weights on every run of this seed
        self.model: SequenceClassifier = make_model(
            kind, tensors.x_train.shape[2], config.hidden_size, num_classes,
            gamma_init=config.gamma_init, beta_init=config.beta_init,
            single_bias=config.single_bias, max_steps=tensors.x_train.shape[1],
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
        self.gates_at_init = gate_quantiles(self.model, tensors.x_eval[:GATE_SAMPLES])
        # An evaluation goes through the held-out set in slices, one per piece of work, so that
        # a long one can be stopped too: the next sample and the hits so far, None between them.
        self.eval_slice = _eval_slice(config.hidden_size, *tensors.x_train.shape[1:])
        self._evaluation: tuple[int, int] | None = None

    @property
    def evaluating(self) -> bool:
        """Whether an evaluation of the held-out set is under way (the weights wait for it)."""
        return self._evaluation is not None

    @property
    def finished(self) -> bool:
        """Whether every step is taken and the last evaluation recorded."""
        return self.step >= self.config.steps and not self.evaluating

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
        """One piece of work, at most :data:`MAX_STEP_WORK` (as :func:`check_work` checks): the
        next slice of the evaluation under way, else one optimizer step (which starts an
        evaluation every ``eval_every`` steps and after the last)."""
        start = time.perf_counter()
        if self.evaluating:
            self._evaluate_slice()
        else:
            self._train_step()
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


@dataclass(frozen=True)
class Progress:
    """Where a :class:`Training` stands, for a progress bar and the live curves.

    Attributes:
        fraction: steps taken out of all, in [0, 1].
        text: "Step 120 of 300 · held-out accuracy: LSTM 61%, LN-LSTM 84%" (accuracies once
            evaluated).
        curves: each model's evaluation curve so far, keyed by its label.
        evaluations: how many points the curves hold in all; a new one means a redraw.
        chance: the accuracy of guessing, 1 / classes.
    """

    fraction: float
    text: str
    curves: dict[str, dict[str, list[float]]]
    evaluations: int
    chance: float


class Training:
    """A comparison in progress: every model of ``config`` on ``data``, advanced in chunks.

    ``advance_for(seconds)`` works on the models piece by piece (a training step, or a slice of
    an evaluation) for about that long, always on the model furthest behind, so that their
    curves grow together; ``advance(n)`` moves each model n steps further; ``stop()`` ends it
    early, at the end of the piece under way; ``done`` says whether it has ended.

    Creating one is instant: the models are built on first use. The app keeps a training between
    reruns, and Streamlit starts a rerun (a click on Stop) while the previous run is still inside
    ``advance_for``, so the advances and :func:`summarize` take a lock: one waits for the other's
    chunk to end instead of both changing the same weights at once.
    """

    def __init__(self, data: SequenceData, config: TrainConfig) -> None:
        self.data, self.config = data, config
        self.stopped = False
        self._lock = threading.RLock()
        self._tensors: _Tensors | None = None
        self._runs: list[ModelRun] = []

    def _build(self) -> None:
        with self._lock:
            if self._tensors is None:
                tensors = _Tensors.build(self.data, self.config.device)
                self._runs = [ModelRun(kind, tensors, self.data.num_classes, self.config)
                              for kind in self.config.models]
                self._tensors = tensors

    @property
    def tensors(self) -> _Tensors:
        """The dataset on the training device, with the held-out subset used for the curves."""
        self._build()
        return self._tensors

    @property
    def runs(self) -> list[ModelRun]:
        """One :class:`ModelRun` per model, in the order of ``config.models``."""
        self._build()
        return self._runs

    @property
    def step(self) -> int:
        """Steps every model has taken."""
        return min(run.step for run in self.runs)

    @property
    def done(self) -> bool:
        """Whether all steps are taken and evaluated, or the training was stopped."""
        return self.stopped or all(run.finished for run in self.runs)

    def advance(self, n: int) -> None:
        """Up to ``n`` more steps for every model, with their evaluations (fewer at the end, and
        none once stopped)."""
        with self._lock:
            for run in self.runs:
                target = min(run.step + n, self.config.steps)
                while not self.stopped and (run.step < target or run.evaluating):
                    run.work()

    def advance_for(self, seconds: float, *, clock: Callable[[], float] = time.perf_counter
                    ) -> int:
        """Work for about ``seconds``: piece after piece (see :meth:`ModelRun.work`) of the model
        furthest behind, until the time is up (after at least one piece), the training is done
        or it is stopped. Returns the number of pieces done.

        Time rather than a number of steps sizes the chunk, so that the app hands control back
        to Streamlit (which stops an abandoned run, or starts the one a click asked for, only
        there) every ``seconds`` plus at most one piece, however large the settings.
        """
        with self._lock:
            start, pieces = clock(), 0
            while not self.done:
                behind = min((run for run in self.runs if not run.finished),
                             key=lambda run: run.step)
                behind.work()
                pieces += 1
                if clock() - start >= seconds:
                    break
            return pieces

    def stop(self) -> None:
        """End the training where it is; what was learned so far is kept."""
        self.stopped = True

    def curves(self) -> dict[str, dict[str, list[float]]]:
        """Each model's evaluation curve, keyed by its label (e.g. "LN-LSTM")."""
        return {MODEL_LABELS[run.kind]: run.curve for run in self.runs}

    def progress(self) -> Progress:
        """Steps taken, the latest held-out accuracies and the curves so far (builds the models
        on first use)."""
        step, total, curves = self.step, self.config.steps, self.curves()
        accuracies = ", ".join(f"{label} {c['accuracy'][-1]:.0%}"
                               for label, c in curves.items() if c["accuracy"])
        return Progress(
            fraction=step / total,
            text=f"Step {step} of {total}" + (f" · held-out accuracy: {accuracies}"
                                              if accuracies else ""),
            curves=curves, evaluations=sum(len(c["step"]) for c in curves.values()),
            chance=1 / self.data.num_classes)


@dataclass(frozen=True)
class BatchSensitivity:
    """How much one model's outputs change when the same samples are batched differently."""

    model: str
    statistics: str
    batch_sizes: tuple[int, int]
    max_difference: float


@dataclass(frozen=True)
class TrainingResult:
    """A finished (or stopped) comparison as plain numbers, ready for figures and JSON.

    ``gates`` and ``gates_at_init`` map a model label to the (5, T, 5) quantiles of
    :func:`lnviz.lessons.training.gate_quantiles` after and before training.
    """

    dataset: str
    num_classes: int
    config: TrainConfig
    steps_done: int
    stopped: bool
    curves: dict[str, dict[str, list[float]]]
    step_loss: dict[str, list[float]]
    step_grad_norm: dict[str, list[float]]
    seconds: dict[str, float]
    parameters: dict[str, int]
    gates: dict[str, np.ndarray]
    gates_at_init: dict[str, np.ndarray]
    batch_sensitivity: list[BatchSensitivity] = field(default_factory=list)

    def final_accuracy(self) -> dict[str, float]:
        """Held-out accuracy at the last evaluation, per model label."""
        return {label: c["accuracy"][-1] for label, c in self.curves.items() if c["accuracy"]}

    def steps_to_accuracy(self, threshold: float) -> dict[str, int | None]:
        """The first evaluated step at which each model's held-out accuracy reached
        ``threshold`` (None if it never did): a measure of how fast it converged."""
        return {label: next((s for s, a in zip(c["step"], c["accuracy"], strict=True)
                             if a >= threshold), None) for label, c in self.curves.items()}

    def diverged(self) -> list[str]:
        """The models whose training loss became NaN or infinite."""
        return [label for label, losses in self.step_loss.items()
                if not np.isfinite(losses).all()]

    @property
    def chance(self) -> float:
        """The held-out accuracy of guessing: 1 / classes."""
        return 1 / self.num_classes

    def gate_bands(self, gate: str = "all", at_init: bool = False) -> dict[str, np.ndarray]:
        """Per model label, the (T, 5) quantiles of one gate's pre-activations at every time
        step (``gate`` one of :data:`GATES`, or "all" for the four pooled), after training or,
        with ``at_init``, before it."""
        row = len(GATES) if gate == "all" else GATES.index(gate)  # gate_quantiles' rows
        gates = self.gates_at_init if at_init else self.gates
        return {label: quantiles[row] for label, quantiles in gates.items()}

    def batch_table(self) -> pd.DataFrame:
        """The batch-dependence check, one row per model and kind of statistics."""
        return pd.DataFrame([{
            "model": r.model, "normalization statistics": r.statistics,
            "batch sizes compared": f"{r.batch_sizes[0]} vs {r.batch_sizes[1]}",
            "max |difference| of the logits": r.max_difference,
        } for r in self.batch_sensitivity])

    def batch_findings(self) -> str | None:
        """What the batch-dependence check shows, in a sentence; None without an LN-LSTM or a
        BN-LSTM, whose outputs are the ones in question."""
        ln_rows = [r for r in self.batch_sensitivity if r.model == "LN-LSTM"]
        bn_rows = [r for r in self.batch_sensitivity if r.statistics.startswith("batch")]
        findings = []
        if ln_rows:
            n = ln_rows[0].batch_sizes[1]
            findings.append(f"the trained LN-LSTM gives each of {n} held-out images the same "
                            f"logits alone as in a batch of {n} (largest difference "
                            f"{ln_rows[0].max_difference:.1e}, float32 rounding)")
        if bn_rows:
            findings.append(f"the BN-LSTM with batch statistics changes them by up to "
                            f"{bn_rows[0].max_difference:.2g} when the same images come in "
                            "pairs instead (a single image cannot be batch-normalized at all: "
                            "it has no spread across the batch)")
        if not findings:
            return None
        return "The same images, batched differently: " + "; ".join(findings) + "."


def _batch_sensitivities(run: ModelRun, x: torch.Tensor) -> list[BatchSensitivity]:
    """LayerNorm and the plain LSTM: one sample alone vs in a batch of len(x). BatchNorm: its
    batch statistics (pairs, the smallest batch it can normalize, vs len(x)) and its running
    averages (alone vs batched)."""
    label, n = MODEL_LABELS[run.kind], len(x)
    if run.kind != "bn-lstm":
        stats = "per sample (LayerNorm)" if run.kind == "ln-lstm" else "none"
        return [BatchSensitivity(label, stats, (1, n), batch_sensitivity(run.model, x, 1))]
    return [
        BatchSensitivity(label, "batch statistics (training mode)", (2, n),
                        batch_sensitivity(run.model, x, 2, training=True)),
        BatchSensitivity(label, "running averages (evaluation mode)", (1, n),
                        batch_sensitivity(run.model, x, 1)),
    ]


def summarize(training: Training) -> TrainingResult:
    """The numbers a page or a JSON file needs from a training, finished or stopped: curves,
    times, gate pre-activation quantiles and the batch-dependence check on 64 held-out
    samples."""
    with training._lock:  # not while another thread is inside advance()
        return _summarize(training)


def _summarize(training: Training) -> TrainingResult:
    for run in training.runs:
        run.evaluate_to_date()
    x_gates = training.tensors.x_eval[:GATE_SAMPLES]
    x_batch = training.tensors.x_eval[:64]
    runs = training.runs
    return TrainingResult(
        dataset=training.data.name,
        num_classes=training.data.num_classes,
        config=training.config,
        steps_done=training.step,
        stopped=training.stopped and training.step < training.config.steps,
        curves={MODEL_LABELS[r.kind]: {k: list(v) for k, v in r.curve.items()} for r in runs},
        step_loss={MODEL_LABELS[r.kind]: list(r.step_loss) for r in runs},
        step_grad_norm={MODEL_LABELS[r.kind]: list(r.step_grad_norm) for r in runs},
        seconds={MODEL_LABELS[r.kind]: r.seconds for r in runs},
        parameters={MODEL_LABELS[r.kind]: sum(p.numel() for p in r.model.parameters())
                    for r in runs},
        gates={MODEL_LABELS[r.kind]: gate_quantiles(r.model, x_gates) for r in runs},
        gates_at_init={MODEL_LABELS[r.kind]: r.gates_at_init for r in runs},
        batch_sensitivity=[row for r in runs for row in _batch_sensitivities(r, x_batch)],
    )


def train(data: SequenceData, config: TrainConfig,
          on_eval: Callable[[ModelRun], None] | None = None) -> Training:
    """Train each model of ``config`` to the end, one after the other (so that each one's
    ``seconds`` is its own), calling ``on_eval(run)`` after every evaluation."""
    training = Training(data, config)
    for run in training.runs:
        while run.step < config.steps:
            run.advance(min(config.eval_every, config.steps - run.step))
            if on_eval is not None:
                on_eval(run)
    return training


def to_json(result: TrainingResult) -> dict:
    """The JSON the CLI writes: the dataset, the config and one record per model."""
    label_to_kind = {label: kind for kind, label in MODEL_LABELS.items()}
    return {
        "dataset": result.dataset,
        "config": {k: list(v) if isinstance(v, tuple) else v
                   for k, v in asdict(result.config).items()},
        "runs": [{"model": label_to_kind[label], **curve, "seconds": result.seconds[label]}
                 for label, curve in result.curves.items()],
        "batch_sensitivity": [asdict(row) for row in result.batch_sensitivity],
    }
