"""The LN-LSTM page's lesson: what the comparisons of :mod:`lnviz.train` show, in sentences
computed from their numbers, and the walkthrough's code checked.

The three cells (:class:`lnviz.nn.LSTMCell`, :class:`lnviz.nn.LayerNormLSTMCell` after Ba et
al., 2016, :class:`lnviz.nn.BatchNormLSTMCell` after Cooijmans et al., 2016) and their trainer
are below the lessons. Here: :func:`training_findings` (who ends ahead, by how much next to the
spread between seeds, who reaches 90 % first, and the walkthrough's learning-rate claim against
a sweep), :func:`length_findings` (longer sequences than the training ones),
:func:`gate_findings` and :func:`batch_findings`, never written in advance.
:data:`LN_LSTM_CELL_CODE` is a self-contained LN-LSTM cell in plain PyTorch;
:data:`CUSTOM_LAYER_NORM_CODE` the walkthrough's LayerNorm from scratch, checked by
:func:`custom_layer_norm_table`; :func:`first_step` shows why the app's LN has an ε where Ba et
al.'s has none (0/0 at the first step, where h₀ = 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.nn import MODEL_LABELS
from lnviz.norms import layer_norm
from lnviz.snippets import snippet_source
from lnviz.terms import listed
from lnviz.train import TARGET_ACCURACY, LengthCheck, TrainingResult, setting_text

__all__ = [
    "CUSTOM_LAYER_NORM_CODE",
    "LENGTH_NOTABLE_DROP",
    "LN_LSTM_CELL_CODE",
    "FirstStep",
    "batch_findings",
    "custom_layer_norm",
    "custom_layer_norm_table",
    "first_step",
    "gate_findings",
    "gate_range_text",
    "length_findings",
    "reach_text",
    "training_findings",
]


#: A self-contained LN-LSTM cell in plain PyTorch (``lnviz/snippets/ln_lstm_cell.py``), shown on
#: the training page; it computes what :class:`lnviz.nn.LayerNormLSTMCell` computes (the tests
#: check it number by number).
LN_LSTM_CELL_CODE = snippet_source("ln_lstm_cell")

#: The LN-LSTM walkthrough's LayerNorm written from scratch, as a module
#: (``lnviz/snippets/custom_layer_norm.py``; its four lines of forward are the walkthrough's);
#: the tests run it against ``torch.nn.LayerNorm`` and :func:`lnviz.layer_norm`.
CUSTOM_LAYER_NORM_CODE = snippet_source("custom_layer_norm")


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


def _sentence(prefix: str, text: str) -> str:
    """``text`` after ``prefix`` ("At lr 0.1: "), capitalized when there is no prefix."""
    return prefix + text if prefix else text[0].upper() + text[1:]


def _setting_of(label: str) -> str:
    """" at lr 0.1" for a series label "LN-LSTM · lr 0.1"; "" without a setting."""
    return f" at {label.split(' · ', 1)[1]}" if " · " in label else ""


# --- What the runs show, in sentences computed from them ----------------------------------------


#: A drop in held-out accuracy on longer sequences that the findings explain (5 points).
LENGTH_NOTABLE_DROP = 0.05


def length_findings(check: LengthCheck) -> list[str]:
    """What the check shows, in sentences computed from its numbers: the accuracies at the
    training length and at the longest test length, and who lost the most."""
    longest, t = check.lengths[-1], check.train_length
    if longest == t:
        return []
    means = check.mean()
    seeds = next(iter(check.accuracy.values())).shape[0]
    over = "" if seeds == 1 else f" (mean of {seeds} seeds)"
    parts = [f"{label} {m[-1]:.0%} (from {m[0]:.0%} at {t} steps)"
             for label, m in means.items()]
    sentences = [f"Read with {longest - t} blank rows above the digit ({longest} steps, "
                 f"{longest / t:.3g}× the training length), the held-out accuracy{over} is: "
                 + ", ".join(parts) + "."]
    for label, values in check.batch_statistics.items():
        m = values.mean(axis=0)
        sentences.append(
            f"The {label} normalizing every step with the statistics of its test batch "
            f"({check.batch} images) instead of its running averages: {m[-1]:.0%} at "
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
            f"The {listed(ln_drops)} lose{'s' * (len(ln_drops) == 1)} "
            f"{LENGTH_NOTABLE_DROP * 100:.0f} percentage points or more too, though "
            "LayerNorm needs no statistics from training: its norm of the cell state "
            "rescales the small memory the blank rows leave to the spread γ_c sets, so "
            "the digit's first row meets a full-size h instead of the h₀ = 0 it was "
            "trained with.")
    return sentences


def reach_text(result: TrainingResult, label: str, threshold: float = TARGET_ACCURACY) -> str:
    """When ``label`` first reached ``threshold``, in words, seed by seed: "90% first
    reached at step 40", or "90% first reached: seed 0 at step 40, seed 1 never"."""
    steps = result.steps_to_accuracy(threshold)[label]
    goal = f"{threshold:.0%}"
    if len(steps) == 1:
        return f"{goal} first reached at step {steps[0]}" if steps[0] is not None else \
            f"never reached {goal}"
    if all(step is None for step in steps):
        return f"no seed reached {goal}"
    return f"{goal} first reached: " + ", ".join(
        f"seed {seed} " + ("never" if step is None else f"at step {step}")
        for seed, step in zip(result.seeds, steps, strict=True))


def training_findings(result: TrainingResult, threshold: float = TARGET_ACCURACY) -> list[str]:
    """What these runs show about who learns better and faster, in sentences computed from
    them: per setting, the models by mean final accuracy with their seed ranges, whether the
    leader's range clears the runner-up's, and who reached ``threshold`` first; then, for a
    learning-rate sweep of the LSTM and the LN-LSTM, where the LN-LSTM came out ahead."""
    finals, medians = result.final_accuracies(), result.median_steps_to(threshold)
    seeds = result.config.seeds
    goal = f"{threshold:.0%}"
    sentences = []
    for setting, labels in result.settings():
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
            sentences.append(_sentence(where, _speed_sentence(
                result, labels, names, medians, threshold, goal)))
    claim = _learning_rate_claim(result)
    if claim:
        sentences.append(claim)
    return sentences


def _speed_sentence(result: TrainingResult, labels: list[str], names: dict[str, str],
                    medians: dict[str, float], threshold: float, goal: str) -> str:
    """Who reached ``threshold`` first (the median over seeds), and who did not."""
    steps = result.steps_to_accuracy(threshold)
    order = sorted(labels, key=lambda label: medians[label])
    got = [la for la in order if not math.isinf(medians[la])]
    missed = [la for la in order if math.isinf(medians[la])]
    seeds = result.config.seeds
    if not got:
        return f"no model reached {goal} held-out accuracy in most of its seeds." \
            if seeds > 1 else f"no model reached {goal} held-out accuracy."
    how = "step" if seeds == 1 else "median step"
    ties = {}  # models that got there at the same step are named together
    for la in got:
        ties.setdefault(medians[la], []).append(f"the {names[la]}")
    parts = [f"{goal} first reached by " + ", then by ".join(
        f"{listed(group)} ({how} {step:g}{' each' * (len(group) > 1)})"
        for step, group in ties.items())]
    for la in missed:
        reached = sum(s is not None for s in steps[la])
        parts.append(f"the {names[la]} " + ("never reached it" if not reached else
                                            f"reached it in only {reached} of {seeds} seeds"))
    return "; ".join(parts) + "."


def _learning_rate_claim(result: TrainingResult) -> str | None:
    """The LN-LSTM walkthrough's claim that LayerNorm allows higher learning rates, against a
    learning-rate sweep of the LSTM and the LN-LSTM (None for any other comparison)."""
    config = result.config
    if config.sweep != "lr" or len(config.sweep_values) < 2 or not {
            "lstm", "ln-lstm"} <= set(config.models):
        return None
    finals, medians = result.final_accuracies(), result.median_steps_to()
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
        return f"lr {listed(values)}" if values else "no learning rate tried"

    seeds = "" if config.seeds == 1 else f" (means of {config.seeds} seeds)"
    return ("The LN-LSTM walkthrough says LayerNorm lets an LSTM train with higher learning "
            "rates and "
            f"converge faster. In these runs{seeds}, the LN-LSTM ends ahead of the LSTM at "
            f"{rates(ahead)} and behind at {rates(behind)}; every LN-LSTM seed ends above "
            f"every LSTM seed at {rates(clear)}; the LN-LSTM reaches "
            f"{TARGET_ACCURACY:.0%} sooner (median step) at {rates(sooner)}.")


def gate_findings(result: TrainingResult, gate: str = "all", at_init: bool = False,
                  labels: Sequence[str] | None = None) -> str:
    """How wide each series' 5–95 % band of gate pre-activations is, at the first time step
    and the last, and the widest it gets: a sentence computed from the bands drawn."""
    parts = []
    for label, q in result.gate_bands(gate, at_init, labels).items():
        width = q[:, 4] - q[:, 0]
        parts.append(f"{label} {width[0]:.2g} → {width[-1]:.2g} (widest {width.max():.2g})")
    steps = next(iter(result.gates.values())).shape[1]
    return (f"Width of the 5–95 % band at time step 1 → step {steps}: " + "; ".join(parts)
            + ".")


def batch_findings(result: TrainingResult, labels: Sequence[str] | None = None) -> str | None:
    """What the batch-dependence check shows, in a sentence (for the series in ``labels``,
    or all); None without an LN-LSTM or a BN-LSTM, whose outputs are the ones in question."""
    rows = result.batch_rows(labels)
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
