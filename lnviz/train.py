"""The trainers: a race of small transformers, and the LSTMs' command line.

**The race.** :class:`Race` trains small transformers side by side with Adam on a synthetic
task (reading a sequence of digits and writing it backwards, or as it is): each entrant a
placement of the norms (:data:`lnviz.nn.PLACEMENTS`) and what they compute (LayerNorm, RMSNorm,
DyT, or none), every entrant from the same weights on the same mini-batches, in chunks that the
app can stop (:class:`lnviz.chunked.Chunked`).

**LSTM, LN-LSTM and BN-LSTM** side by side on sequential digits, from a shell::

    python -m lnviz.train --models lstm ln-lstm --steps 300 --seeds 3 --json runs.json
    python -m lnviz.train --seeds 3 --sweep lr --values 0.001 0.01 0.1

Their models and training loop are still :mod:`lnviz.lessons.ln_lstm`'s (the app's Training page
runs the same code), imported when the command runs; the datasets (scikit-learn's 8×8 digits by
default, or sequential MNIST from files) are :mod:`lnviz.data.sequences`'s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from lnviz.analysis import COMPARED
from lnviz.chunked import Chunked
from lnviz.data.sequences import DIGIT_READINGS, load_data
from lnviz.devices import available_devices, one_thread
from lnviz.nn import FINAL_NORMED, block, block_norms, final_norm, init_block, norm_params

__all__ = [
    "BLOCK_MATRICES",
    "CHANCE_LOSS",
    "ENTRANTS",
    "NORM_RACE",
    "RACE_CURVES",
    "RACE_MAX_SEEDS",
    "RACE_SEQ_LEN",
    "RACE_TASKS",
    "RACE_VOCAB",
    "SOLVED_ACCURACY",
    "SOLVED_WINDOW",
    "Race",
    "RaceConfig",
    "RaceProgress",
    "RaceResult",
    "init_race_model",
    "main",
    "race_logits",
    "race_stream",
    "race_targets",
    "race_work",
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
ENTRANTS = {"post-LN": ("post-LN", "LayerNorm"), "pre-LN": ("pre-LN", "LayerNorm"),
            "Peri-LN": ("Peri-LN", "LayerNorm"),
            "pre-RMSNorm": ("pre-LN", "RMSNorm"), "pre-DyT": ("pre-LN", "DyT"),
            "no norm": ("none", "LayerNorm")}
#: The weight matrices of a block whose size :class:`Race` follows (``weight norm``).
BLOCK_MATRICES = ("wq", "wk", "wv", "wo", "w1", "w2")
#: What replaces LayerNorm, raced in the pre-norm position (the Beyond LayerNorm page's race).
NORM_RACE = ("pre-LN", "pre-RMSNorm", "pre-DyT", "no norm")
#: What a race records at every step of every model: its loss and token accuracy on that step's
#: batch, and before the step ‖W‖ (:func:`weight_norm`) and the mean square of the stream
#: leaving the last block.
RACE_CURVES = ("loss", "accuracy", "weight norm", "stream")
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

    @property
    def step(self) -> int:
        return len(self.loss)

    def train_step(self) -> None:
        config = self.config
        tokens = torch.randint(RACE_VOCAB, (config.batch, RACE_SEQ_LEN), generator=self.generator)
        target = race_targets(tokens, config.task)
        stream = race_stream(self.model, tokens)
        self.weight_norm.append(weight_norm(self.model))
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
            norm": ‖W‖ before each step, "stream": the stream's mean square before each step}}
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
                           "weight norm": r.weight_norm[:steps], "stream": r.stream[:steps]}
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


def _parser() -> argparse.ArgumentParser:
    # the LSTMs' trainer is still their lesson's (see the module's docstring): imported here so
    # that the race above does not load it
    from lnviz.lessons.ln_lstm import MODELS, SWEEPS, TrainConfig

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
    from lnviz.lessons.ln_lstm import ModelRun, TrainConfig, summarize, to_json, train

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
    for label, accuracy in result.final_accuracy().items():
        print(f"{label}: held-out accuracy {accuracy:.3f}"
              + (f" (mean of {config.seeds} seeds)" if config.seeds > 1 else "")
              + f"; {result.reach_text(label)}; {result.seconds[label]:.1f} s wall-clock "
              "(depends on this machine's load)")
    for sentence in result.findings():
        print(sentence)
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(result), indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
