"""The trainers: a race of small transformers, and the LSTMs' command line.

**The race.** :class:`Race` trains small transformers side by side with Adam on a synthetic
task (reading a sequence of digits and writing it backwards, or as it is): each entrant a
placement of the norms (:data:`lnviz.nn.PLACEMENTS`) and what they compute (LayerNorm, RMSNorm,
DyT, or none), every entrant from the same weights on the same mini-batches, in chunks that the
app can stop (:class:`lnviz.chunked.Chunked`).

**LSTM, LN-LSTM and BN-LSTM** (:func:`lnviz.nn.make_model`) side by side on sequential digits
(:mod:`lnviz.data.sequences`: scikit-learn's 8×8 digits, or MNIST from files). A comparison
trains every model from one or several seeds, and with a sweep at several values of one setting
(the learning rate, the initial γ or β, the batch size): each model at one setting is a
:class:`Series`, and each of its seeds a :class:`ModelRun`. Runs of one seed start from the same
weights and see the same mini-batches, so they differ only by the normalization.
:class:`Training` advances all runs a piece at a time (one training step, or a slice of an
evaluation or of the sequence-length check), so that the app draws the curves while they grow
and stops within a fraction of a second; :func:`check_work` refuses, before it starts, a
comparison that would ask the server for too much; :func:`summarize` turns a finished (or
stopped) training into plain numbers (:class:`TrainingResult`). After training, every run reads
held-out images again with blank rows above them (:class:`LengthCheck`): sequences longer than
any it trained on. The LN-LSTM page (:mod:`lnviz.lessons.ln_lstm`) says what the numbers show.
From a shell::

    python -m lnviz.train --models lstm ln-lstm --steps 300 --seeds 3 --json runs.json
    python -m lnviz.train --seeds 3 --sweep lr --values 0.001 0.01 0.1
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.analysis import COMPARED
from lnviz.chunked import Chunked
from lnviz.data.sequences import DIGIT_READINGS, SequenceData, load_data
from lnviz.devices import available_devices, one_thread
from lnviz.limits import DEMO_LIMITS, LN_LSTM_MAX_RUNS, LN_LSTM_MAX_STEP_WORK, Limits
from lnviz.nn import (
    FINAL_NORMED,
    GATES,
    MODEL_LABELS,
    MODELS,
    SequenceClassifier,
    block,
    block_norms,
    final_norm,
    init_block,
    make_model,
    norm_params,
)
from lnviz.terms import NormKind, listed

__all__ = [
    "BLOCK_MATRICES",
    "CHANCE_LOSS",
    "CHART_UPDATES",
    "ENTRANTS",
    "LEARNING_RATES",
    "LENGTH_SAMPLES",
    "LOG_SWEEPS",
    "NORM_RACE",
    "NORM_SWEEPS",
    "RACE_CURVES",
    "RACE_MAX_SEEDS",
    "RACE_SEQ_LEN",
    "RACE_TASKS",
    "RACE_VOCAB",
    "SOLVED_ACCURACY",
    "SOLVED_WINDOW",
    "SWEEPS",
    "SWEEP_CHOICES",
    "SWEEP_DEFAULTS",
    "SWEEP_SYMBOLS",
    "TARGET_ACCURACY",
    "BatchSensitivity",
    "LengthCheck",
    "ModelRun",
    "Progress",
    "Race",
    "RaceConfig",
    "RaceProgress",
    "RaceResult",
    "Series",
    "TrainConfig",
    "Training",
    "TrainingResult",
    "batch_sensitivity",
    "check_work",
    "evaluation_interval",
    "gate_quantiles",
    "init_race_model",
    "length_margins",
    "length_work",
    "main",
    "output_gain",
    "race_logits",
    "race_stream",
    "race_targets",
    "race_work",
    "seed_band",
    "setting_text",
    "step_work",
    "summarize",
    "to_json",
    "train",
    "training_work",
    "warmup_lr",
    "weight_norm",
]


# --- A training race ----------------------------------------------------------------------------


#: The synthetic tasks: read a sequence of digits, output it as it is or backwards.
RACE_TASKS = ("reverse", "copy")
#: Digits per sequence and the vocabulary they are drawn from.
RACE_SEQ_LEN, RACE_VOCAB = 8, 10
#: Token accuracy (averaged over this many consecutive steps) that counts as "learned".
SOLVED_ACCURACY, SOLVED_WINDOW = 0.9, 10
#: The models a race can train, by name: where the norms sit (:data:`PLACEMENTS`) and what
#: they compute (:data:`NORM_KINDS`). "no norm" has none at all.
ENTRANTS = {"post-LN": ("post-LN", NormKind.LAYER), "pre-LN": ("pre-LN", NormKind.LAYER),
            "Peri-LN": ("Peri-LN", NormKind.LAYER),
            "pre-RMSNorm": ("pre-LN", NormKind.RMS), "pre-DyT": ("pre-LN", "DyT"),
            "no norm": ("none", NormKind.LAYER)}
#: The weight matrices of a block whose size :class:`Race` follows (``weight norm``).
BLOCK_MATRICES = ("wq", "wk", "wv", "wo", "w1", "w2")
#: What replaces LayerNorm, raced in the pre-norm position (the Beyond LayerNorm page's race).
NORM_RACE = ("pre-LN", "pre-RMSNorm", "pre-DyT", "no norm")
#: What a race records at every step of every model: its loss and token accuracy on that step's
#: batch, and before the step ‖W‖ (:func:`weight_norm`), the mean square of the stream leaving
#: the last block and the output norms' γ (:func:`output_gain`).
RACE_CURVES = ("loss", "accuracy", "weight norm", "stream", "output gain")
#: The most seeds a race trains each model from.
RACE_MAX_SEEDS = 5


@dataclass(frozen=True)
class RaceConfig:
    """Small transformers trained side by side with Adam: ``entrants`` (names of
    :data:`ENTRANTS`; post-LN and pre-LN unless told), each from ``seeds`` seeds.

    The learning rate rises linearly from lr/``warmup`` to ``lr`` over the first ``warmup``
    steps (none if 0) and then stays. For each seed (``seed``, ``seed + 1``, …) every model
    starts from the same weights and sees the same mini-batches of ``batch`` random sequences.
    """

    depth: int = 6
    d_model: int = 64
    lr: float = 3e-3
    warmup: int = 0
    steps: int = 200
    batch: int = 32
    task: str = "reverse"
    seed: int = 0
    entrants: tuple[str, ...] = COMPARED
    seeds: int = 1

    def __post_init__(self) -> None:
        if self.task not in RACE_TASKS:
            raise ValueError(f"task must be one of {list(RACE_TASKS)}, got {self.task!r}")
        unknown = [e for e in self.entrants if e not in ENTRANTS]
        if not self.entrants or unknown or len(set(self.entrants)) != len(self.entrants):
            raise ValueError(f"entrants must be distinct names from {list(ENTRANTS)}, got "
                             f"{list(self.entrants)}")
        if not 1 <= self.seeds <= RACE_MAX_SEEDS:
            raise ValueError(f"seeds must be between 1 and {RACE_MAX_SEEDS}, got {self.seeds}")
        for name, high in (("depth", 24), ("d_model", 256), ("steps", 2000), ("batch", 256)):
            if not 1 <= getattr(self, name) <= high:
                raise ValueError(f"{name} must be between 1 and {high}, got {getattr(self, name)}")
        if not 0 < self.lr <= 1:
            raise ValueError(f"lr must be in (0, 1], got {self.lr}")
        if not 0 <= self.warmup <= self.steps:
            raise ValueError(f"warmup must be between 0 and steps ({self.steps}), "
                             f"got {self.warmup}")


def race_work(config: RaceConfig) -> int:
    """A race's size in block-steps: models × seeds × steps × blocks, what its time grows with
    (d_model and the batch are the same in every race a page offers)."""
    return len(config.entrants) * config.seeds * config.steps * config.depth


def warmup_lr(step: int, config: RaceConfig) -> float:
    """The learning rate of optimizer step ``step`` (0-based): linear warm-up, then constant."""
    if config.warmup == 0:
        return config.lr
    return config.lr * min(1.0, (step + 1) / config.warmup)


def race_targets(tokens: torch.Tensor, task: str) -> torch.Tensor:
    """What the model must output at each position: the sequence backwards, or as it is."""
    return tokens.flip(-1) if task == "reverse" else tokens


def init_race_model(config: RaceConfig, entrant: str, seed: int | None = None
                    ) -> dict[str, object]:
    """A small transformer in plain tensors, arranged as ``entrant`` (:data:`ENTRANTS`): token
    and position embeddings (each N(0, ½), so their sum has RMS ≈ 1), ``depth`` blocks of
    :func:`init_block` (gain 1) with γ = 1, β = 0 in both norms (and DyT's α =
    :data:`DYT_ALPHA`), a final norm where the placement has one, and a linear head. The same
    ``seed`` (``config.seed`` unless given) gives every entrant the same weights. Every tensor
    requires grad."""
    variant, kind = ENTRANTS[entrant]
    generator = torch.Generator().manual_seed(config.seed if seed is None else seed)
    d = config.d_model

    def norms(*names: str) -> dict[str, torch.Tensor]:
        return {k: v for name in names for k, v in norm_params(name, d, variant, kind).items()}

    blocks = []
    for _ in range(config.depth):
        params = init_block(d, 1.0, generator, dtype=torch.float32)
        params |= norms(*block_norms(variant))  # the norms this placement has
        blocks.append(params)
    top = {
        "embed": torch.randn(RACE_VOCAB, d, generator=generator) * math.sqrt(0.5),
        "position": torch.randn(RACE_SEQ_LEN, d, generator=generator) * math.sqrt(0.5),
        "head": torch.randn(RACE_VOCAB, d, generator=generator) / math.sqrt(d),
    }
    if variant in FINAL_NORMED:
        top |= norms("lnf")
    for tensor in [*top.values(), *(t for p in blocks for t in p.values())]:
        tensor.requires_grad_()
    return {"variant": variant, "kind": kind, "blocks": blocks, "top": top}


def race_stream(model: dict[str, object], tokens: torch.Tensor) -> torch.Tensor:
    """(batch, seq) digits → the residual stream leaving the last block, (batch, seq, d)."""
    top, variant, kind = model["top"], model["variant"], model["kind"]
    x = top["embed"][tokens] + top["position"]
    for params in model["blocks"]:
        x = block(x, params, variant, impl="fast", kind=kind)[0]
    return x


def race_logits(model: dict[str, object], tokens: torch.Tensor,
                stream: torch.Tensor | None = None) -> torch.Tensor:
    """(batch, seq) digits → (batch, seq, vocab) logits (from ``stream``, the tokens'
    :func:`race_stream`, where given)."""
    top, variant, kind = model["top"], model["variant"], model["kind"]
    x = race_stream(model, tokens) if stream is None else stream
    return final_norm(x, variant, top, impl="fast", kind=kind) @ top["head"].T


def weight_norm(model: dict[str, object]) -> float:
    """‖W‖: the Frobenius norm of every block's weight matrices (:data:`BLOCK_MATRICES`)
    together."""
    return math.sqrt(sum(float(p[name].detach().square().sum())
                         for p in model["blocks"] for name in BLOCK_MATRICES))


def output_gain(model: dict[str, object]) -> float:
    """The RMS of γ of the norms on the sublayers' outputs (Peri-LN's and OLMo-2's ``ln1o``,
    ``ln2o``), over every block: the size each normalized vector adds to the stream is
    γ ⊙ (RMS 1) + β, so with β near 0 this is what γ alone lets it grow to (1 at the start).
    NaN for a placement without such norms."""
    gammas = [p[name] for p in model["blocks"] for name in ("ln1o_weight", "ln2o_weight")
              if name in p]
    if not gammas:
        return math.nan
    return math.sqrt(float(torch.cat([g.detach().double() for g in gammas]).square().mean()))


def _parameters(model: dict[str, object]) -> list[torch.Tensor]:
    return [*model["top"].values(), *(t for p in model["blocks"] for t in p.values())]


class _Runner:
    """One model of the race from one seed: its weights, Adam, its own batch sampler and its
    curves."""

    def __init__(self, config: RaceConfig, entrant: str, seed: int | None = None) -> None:
        seed = config.seed if seed is None else seed
        self.config, self.entrant, self.seed = config, entrant, seed
        self.model = init_race_model(config, entrant, seed)
        self.optimizer = torch.optim.Adam(_parameters(self.model), lr=config.lr)
        self.generator = torch.Generator().manual_seed(seed + 1)  # the same batches for all
        self.loss: list[float] = []
        self.accuracy: list[float] = []
        # before each step: ‖W‖ and the mean square of the stream leaving the last block
        self.weight_norm: list[float] = []
        self.stream: list[float] = []
        self.output_gain: list[float] = []  # before each step (output_gain)

    @property
    def step(self) -> int:
        return len(self.loss)

    def train_step(self) -> None:
        config = self.config
        tokens = torch.randint(RACE_VOCAB, (config.batch, RACE_SEQ_LEN), generator=self.generator)
        target = race_targets(tokens, config.task)
        stream = race_stream(self.model, tokens)
        self.weight_norm.append(weight_norm(self.model))
        self.output_gain.append(output_gain(self.model))
        self.stream.append(float(stream.detach().double().square().mean()))
        logits = race_logits(self.model, tokens, stream)
        loss = F.cross_entropy(logits.reshape(-1, RACE_VOCAB), target.reshape(-1))
        for group in self.optimizer.param_groups:
            group["lr"] = warmup_lr(self.step, config)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.loss.append(float(loss.detach()))
        self.accuracy.append(float((logits.detach().argmax(-1) == target).double().mean()))


@dataclass(frozen=True)
class RaceProgress:
    """Where a :class:`Race` stands: steps taken out of all (``fraction``), a line for the
    progress bar, and the curves so far."""

    fraction: float
    text: str
    curves: dict[str, dict[str, list[float]]]


@dataclass(frozen=True, eq=False)
class RaceResult:
    """A finished (or stopped) race as plain numbers.

    Attributes:
        config: the settings it ran with.
        curves: {entrant: {"loss": per step, "accuracy": token accuracy per step, "weight
            norm": ‖W‖ before each step, "stream": the stream's mean square before each step,
            "output gain": :func:`output_gain` before each step (NaN without output norms)}}
            (:data:`RACE_CURVES`), the mean over the seeds; each step's batch is fresh, so these
            are measured on sequences the model had not seen.
        steps_done: steps every model took.
        stopped: whether the learner stopped it before ``config.steps``.
        seconds: wall-clock time of the whole race (on a shared machine: a rough guide).
        seed_curves: {entrant: the same curves, one per seed} (empty: one seed, ``curves``).
    """

    config: RaceConfig
    curves: dict[str, dict[str, list[float]]]
    steps_done: int
    stopped: bool
    seconds: float
    seed_curves: dict[str, list[dict[str, list[float]]]] = field(default_factory=dict)

    def per_seed(self, entrant: str) -> list[dict[str, list[float]]]:
        """``entrant``'s curves, one per seed."""
        return self.seed_curves.get(entrant) or [self.curves[entrant]]

    def band(self, entrant: str, key: str) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and the highest seed's value of ``key`` ("loss", "accuracy") per step."""
        values = np.asarray([c[key] for c in self.per_seed(entrant)], dtype=np.float64)
        return values.min(axis=0), values.max(axis=0)

    def final_accuracies(self, entrant: str) -> list[float]:
        """Each seed's mean token accuracy over its last :data:`SOLVED_WINDOW` steps."""
        return [float(np.mean(c["accuracy"][-SOLVED_WINDOW:])) for c in self.per_seed(entrant)]

    def solved_at(self, variant: str) -> int | None:
        """The first step (1-based) at which the token accuracy, averaged over the last
        :data:`SOLVED_WINDOW` steps, reached :data:`SOLVED_ACCURACY`; None if it never did."""
        accuracy = np.asarray(self.curves[variant]["accuracy"])
        if len(accuracy) < SOLVED_WINDOW:
            return None
        mean = np.convolve(accuracy, np.ones(SOLVED_WINDOW) / SOLVED_WINDOW, mode="valid")
        hits = np.flatnonzero(mean >= SOLVED_ACCURACY)
        return int(hits[0]) + SOLVED_WINDOW if len(hits) else None

    def final_loss(self, variant: str) -> float:
        """The mean loss of the last :data:`SOLVED_WINDOW` steps (NaN if it diverged)."""
        return float(np.mean(self.curves[variant]["loss"][-SOLVED_WINDOW:]))

    def final_accuracy(self, variant: str) -> float:
        """The mean token accuracy of the last :data:`SOLVED_WINDOW` steps."""
        return float(np.mean(self.curves[variant]["accuracy"][-SOLVED_WINDOW:]))


#: The loss of guessing uniformly among the digits.
CHANCE_LOSS = math.log(RACE_VOCAB)


class Race(Chunked):
    """``config``'s entrants (post-LN and pre-LN unless told), each from ``config.seeds``
    seeds, trained on its task, advanced in chunks (:class:`lnviz.chunked.Chunked`): a piece is
    one step of the model behind, on one torch thread; ``result()`` gives what they learned so
    far as a :class:`RaceResult`. Building one is instant: the models are made on first use.
    """

    def __init__(self, config: RaceConfig) -> None:
        super().__init__()
        self.config = config
        self._runners: list[_Runner] = []

    @property
    def runners(self) -> list[_Runner]:
        with self._lock:
            if not self._runners:
                self._runners = [_Runner(self.config, entrant, self.config.seed + k)
                                 for entrant in self.config.entrants
                                 for k in range(self.config.seeds)]
            return self._runners

    @property
    def step(self) -> int:
        """Steps every model has taken."""
        return min(r.step for r in self.runners)

    def _finished(self) -> bool:
        return self.step >= self.config.steps

    def _work(self) -> None:
        min(self.runners, key=lambda r: r.step).train_step()

    def _working(self) -> AbstractContextManager[None]:
        return one_thread()

    def advance(self, steps: int) -> None:
        """Up to ``steps`` more steps for each model (fewer at the end)."""
        with self._lock, one_thread():
            target = min(self.step + steps, self.config.steps)
            while not self.stopped and self.step < target:
                min(self.runners, key=lambda r: r.step).train_step()

    def seed_curves(self, steps: int | None = None) -> dict[str, list[dict[str, list[float]]]]:
        """Each entrant's curves, one per seed (the first ``steps`` steps of each)."""
        return {entrant: [{"loss": r.loss[:steps], "accuracy": r.accuracy[:steps],
                           "weight norm": r.weight_norm[:steps], "stream": r.stream[:steps],
                           "output gain": r.output_gain[:steps]}
                          for r in self.runners if r.entrant == entrant]
                for entrant in self.config.entrants}

    def curves(self, steps: int | None = None) -> dict[str, dict[str, list[float]]]:
        """Each entrant's curves, the mean over its seeds at every step they all took."""
        means = {}
        for entrant, runs in self.seed_curves(steps).items():
            common = min(len(r["loss"]) for r in runs)
            means[entrant] = {key: list(np.mean([r[key][:common] for r in runs], axis=0))
                              if common else [] for key in RACE_CURVES}
        return means

    def progress(self) -> RaceProgress:
        curves = self.curves()
        latest = ", ".join(f"{v} {c['accuracy'][-1]:.0%}" for v, c in curves.items()
                           if c["accuracy"])
        return RaceProgress(self.step / self.config.steps,
                            f"Step {self.step} of {self.config.steps}"
                            + (f" · token accuracy: {latest}" if latest else ""), curves)

    def result(self) -> RaceResult:
        with self._lock:
            steps = self.step
            return RaceResult(self.config, self.curves(steps), steps,
                              self.stopped and steps < self.config.steps, self.seconds,
                              self.seed_curves(steps) if self.config.seeds > 1 else {})


# --- The LSTMs' command line --------------------------------------------------------------------


# --- LSTM, LN-LSTM and BN-LSTM on sequential digits -------------------------------------------


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


#: Held-out samples used for the accuracy curves (a fixed random subset of larger test sets).
EVAL_SAMPLES = 2000


#: Held-out samples whose gate pre-activations are summarized.
GATE_SAMPLES = 256


#: Held-out samples read again, with blank rows above them, by the sequence-length check.
LENGTH_SAMPLES = 256


#: The blank rows put above each held-out image by the sequence-length check, as fractions of
#: the training length T: the test sequences are T, 1.25 T, 1.5 T, 2 T and 3 T steps long.
LENGTH_FRACTIONS = (0, 0.25, 0.5, 1, 2)


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
                         f"{listed(fewer, 'or')}.")
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
                         f"for one run. Lower {listed(lower, 'or')}.")


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
        kind: the model's name (see :data:`lnviz.nn.MODELS`).
        label: the label of its series ("LN-LSTM", or "LN-LSTM · lr 0.1" in a sweep).
        step: optimizer steps taken.
        curve: at each evaluation, ``step``, ``loss`` (mean training loss since the previous
            evaluation), ``accuracy`` (on the held-out set) and ``grad_norm`` (mean ‖∇θ‖₂).
        step_loss, step_grad_norm: the training loss and the gradient norm of every step.
        seconds: time spent training and evaluating this model.
        gates_at_init: gate pre-activation quantiles before training (see
            :func:`lnviz.train.gate_quantiles`), if asked for.
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


@dataclass(frozen=True)
class TrainingResult:
    """A finished (or stopped) comparison as plain numbers, ready for figures and JSON.

    Keyed by series label ("LN-LSTM", or "LN-LSTM · lr 0.1" in a sweep): ``curves`` over the
    seeds (:func:`seed_band`) and ``seed_curves`` seed by seed; ``step_loss`` and
    ``step_grad_norm`` one list per seed. ``gates`` and ``gates_at_init`` map a series to the
    (5, T, 5) quantiles of :func:`lnviz.train.gate_quantiles` after and before
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
                f"seeds reaching {TARGET_ACCURACY:.0%}":
                    f"{sum(x is not None for x in steps[s.label])} of {len(values)}",
                f"median step to {TARGET_ACCURACY:.0%}":
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

    def batch_rows(self, labels: Sequence[str] | None = None) -> list[BatchSensitivity]:
        """The batch-dependence check's rows of the series in ``labels`` (all for None)."""
        return [r for r in self.batch_sensitivity if labels is None or r.model in labels]

    def batch_table(self, labels: Sequence[str] | None = None) -> pd.DataFrame:
        """The batch-dependence check, one row per model and kind of statistics (of the series
        in ``labels``, or all)."""
        return pd.DataFrame([{
            "model": r.model, "normalization statistics": r.statistics,
            "batch sizes compared": f"{r.batch_sizes[0]} vs {r.batch_sizes[1]}",
            "max |difference| of the logits": r.max_difference,
        } for r in self.batch_rows(labels)])


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


# --- The command line ----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(
        prog="python -m lnviz.train",
        description="Train an LSTM with and without LayerNorm (and with BatchNorm) on sequential "
                    "digits, and report loss and held-out accuracy.")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(defaults.models),
                        help="the models to compare (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=defaults.steps,
                        help="optimizer steps per model (default: %(default)s)")
    parser.add_argument("--hidden-size", type=int, default=defaults.hidden_size,
                        help="H, units of the LSTM state (default: %(default)s)")
    parser.add_argument("--lr", type=float, default=defaults.lr,
                        help="Adam's learning rate (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size,
                        help="samples per mini-batch, at least 2 (default: %(default)s)")
    parser.add_argument("--eval-every", type=int, default=defaults.eval_every,
                        help="steps between held-out evaluations (default: %(default)s)")
    parser.add_argument("--gamma-init", type=float, default=defaults.gamma_init,
                        help="initial γ of the norms (default: %(default)s)")
    parser.add_argument("--beta-init", type=float, default=defaults.beta_init,
                        help="initial β of the norms (default: %(default)s)")
    parser.add_argument("--single-bias", action="store_true",
                        help="normalize W x and U h without β and add one shared bias instead")
    parser.add_argument("--seed", type=int, default=defaults.seed,
                        help="seeds the initial weights and the mini-batches (default: "
                             "%(default)s)")
    parser.add_argument("--seeds", type=int, default=defaults.seeds,
                        help="runs per model and setting, from --seed on (default: %(default)s)")
    parser.add_argument("--sweep", choices=list(SWEEPS),
                        help="train every model at each of --values of this setting")
    parser.add_argument("--values", type=float, nargs="+", default=[],
                        help="the values of --sweep")
    parser.add_argument("--device", choices=available_devices(), default=defaults.device,
                        help="where to train (default: %(default)s)")
    parser.add_argument("--data", metavar="PATH",
                        help="mnist.npz, or a folder with the four MNIST IDX files; default: "
                             "scikit-learn's bundled 8×8 digits")
    parser.add_argument("--reading", choices=list(DIGIT_READINGS), default="rows",
                        help="how the built-in digits become sequences (default: %(default)s)")
    parser.add_argument("--json", metavar="PATH", help="write the curves to this JSON file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m lnviz.train``; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        config = TrainConfig(
            models=tuple(args.models), hidden_size=args.hidden_size, lr=args.lr,
            batch_size=args.batch_size, steps=args.steps, eval_every=args.eval_every,
            gamma_init=args.gamma_init, beta_init=args.beta_init, single_bias=args.single_bias,
            seed=args.seed, device=args.device, seeds=args.seeds, sweep=args.sweep,
            sweep_values=tuple(args.values))
        data = load_data(args.data, reading=args.reading)
    except ValueError as err:
        parser.error(str(err))
    print(f"{data.name}: {len(data.y_train)} training and {len(data.y_test)} held-out "
          f"sequences of {data.steps} steps × {data.features} features")

    def report(run: ModelRun) -> None:
        c = run.curve
        print(f"{run.label:>8} seed {run.config.seed} step {c['step'][-1]:>5}  "
              f"loss {c['loss'][-1]:.4f}  held-out accuracy {c['accuracy'][-1]:.3f}",
              flush=True)

    result = summarize(train(data, config, on_eval=report))
    print(result.sweep_table().to_string(index=False, float_format="{:.3f}".format))
    for label, seconds in result.seconds.items():
        print(f"{label}: {seconds:.1f} s wall-clock (depends on this machine's load)")
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(result), indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
