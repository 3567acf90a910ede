"""Train LSTM, LN-LSTM and BN-LSTM side by side on sequential digits, from a shell::

    python -m lnviz.train --models lstm ln-lstm --steps 300 --seeds 3 --json runs.json
    python -m lnviz.train --seeds 3 --sweep lr --values 0.001 0.01 0.1

The models and the training loop are :mod:`lnviz.lessons.ln_lstm`'s (the app's Training page runs
the same code); the datasets (scikit-learn's 8×8 digits by default, or sequential MNIST from files)
are :mod:`lnviz.data.sequences`'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from lnviz.data.sequences import DIGIT_READINGS, load_data
from lnviz.devices import available_devices
from lnviz.lessons.ln_lstm import (
    MODELS,
    SWEEPS,
    ModelRun,
    TrainConfig,
    summarize,
    to_json,
    train,
)

__all__ = ["main"]


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
