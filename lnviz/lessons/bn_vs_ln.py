"""BatchNorm against LayerNorm: which cells share statistics, and what a sample's batch does to it.

Three questions, one function (or two) each:

* **Who shares a μ and σ?** :func:`sharing_cubes` lays any (N, C), (N, L, C) or (N, C, H, W)
  tensor out as the cube of Wu & He's Group Normalization paper — axes N, C and the positions
  (L or H·W) — and marks, for BatchNorm, LayerNorm, InstanceNorm and GroupNorm, the cells whose
  values are pooled into the μ and σ of the cell at sample 0, channel 0, first position.
* **Does my output depend on the rest of my batch?** :func:`batch_dependence` keeps one sample
  fixed, re-draws its batch-mates, and records the fixed sample's output: LayerNorm's μ and σ
  come from the sample alone, so its output never moves; BatchNorm's μ_c = (1/m) Σ_j x_{j,c}
  pools the whole batch, so it does. :func:`batch_size_sweep` repeats that for many batch sizes.
* **What changes between training and evaluation?** :func:`running_statistics` steps BatchNorm
  through k mini-batches, recording the running μ and σ² it keeps for evaluation, the biased
  σ² it normalizes with and the unbiased one it feeds into the running average, and then puts
  the last batch through both modes.

Everything is computed by :mod:`lnviz.norms` (the same functions the Explorer checks against
torch); this module only arranges the experiments. :func:`bn_vs_ln_snippet` shows the same three
experiments with torch's own modules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.batch import NormSpec, group_ids, norms_where
from lnviz.data import random_batch
from lnviz.devices import to_numpy, to_tensor
from lnviz.lessons.common import Answer, Paper, short
from lnviz.limits import BN_VS_LN_MAX_BATCH
from lnviz.norms import batch_norm, layer_norm
from lnviz.snippets import snippet
from lnviz.terms import Layout, NormKind

__all__ = [
    "CONVNEXT",
    "CUBE_NORMS",
    "GROUP_NORM",
    "GROUP_NORM_GAIN_AT_2",
    "MATES_OPTIONS",
    "POPULATION_MEAN",
    "POPULATION_VAR",
    "SWEEP_SIZES",
    "BatchDependence",
    "BatchSizeSweep",
    "CheatRow",
    "RunningStats",
    "SharingCube",
    "band_caption",
    "batch_dependence",
    "batch_mates",
    "batch_noise_text",
    "batch_size_sweep",
    "bn_vs_ln_snippet",
    "cheat_sheet",
    "fixed_sample",
    "frozen_fold_error",
    "mates_answer",
    "modes_caption",
    "running_statistics",
    "sharing_cubes",
    "variance_table",
]

#: The four cubes (the norms that subtract μ), in the order of the Group Normalization paper's
#: figure: GroupNorm last, after the two it lies between (G = 1: LayerNorm; G = C: InstanceNorm).
CUBE_NORMS = tuple(sorted(norms_where(lambda norm: norm.centred),
                          key=lambda name: name == NormKind.GROUP))

#: Features of the generated batches differ in centre and width (see ``random_batch``), as the
#: activations normalization is meant for do.
_FEATURE_SPREAD = 0.5

#: The population the training mini-batches are drawn from: every feature ~ N(3, 2²), far from
#: the running statistics' starting point (μ = 0, σ² = 1), so their approach is visible.
POPULATION_MEAN = 3.0
POPULATION_VAR = 4.0


# --- Who shares a μ and σ ---------------------------------------------------------------------


@dataclass(frozen=True)
class SharingCube:
    """One norm's cube: which cells share the μ, σ of the cell (sample 0, channel 0, position 0).

    Attributes:
        norm: one of :data:`CUBE_NORMS`.
        cells: bool array (N, C, S) with S = L or H·W (1 for an (N, C) table), True where the
            value enters that μ and σ; ``None`` where the norm is not defined for the layout.
        values_per_statistic: m, how many values each μ and σ is taken over.
        statistics: how many (μ, σ) pairs the norm computes for the whole tensor.
        note: one line for the learner — what is pooled, or why the norm does not apply.
    """

    norm: str
    cells: np.ndarray | None
    values_per_statistic: int
    statistics: int
    note: str


def _to_cube(array: np.ndarray, layout: str) -> np.ndarray:
    """An (N, C), (N, L, C) or (N, C, H, W) array as (N, C, S)."""
    if layout == Layout.NC:
        return array[:, :, None]
    if layout == Layout.NLC:
        return array.transpose(0, 2, 1)
    return array.reshape(array.shape[0], array.shape[1], -1)


def sharing_cubes(shape: Sequence[int], layout: str, groups: int = 1) -> list[SharingCube]:
    """The four norms' cubes for a tensor of ``shape`` in ``layout`` ("NC", "NLC" or "NCHW").

    LayerNorm normalizes a token over its C features for "NC"/"NLC" (as transformers do) and an
    image over (C, H, W) for "NCHW" (as the Group Normalization paper draws it). InstanceNorm
    needs positions to pool over, so it is undefined on an (N, C) table. ``groups`` is
    GroupNorm's G and must divide C.

    The cells come from :func:`lnviz.batch.group_ids`, the same map the Explorer draws, so a
    cube shows exactly which values one μ and σ of the lnviz norm were taken over.
    """
    shape = tuple(int(s) for s in shape)
    if layout not in (Layout.NC, Layout.NLC, Layout.NCHW) or len(shape) != len(layout):
        raise ValueError(f"a shape for one of the layouts NC, NLC, NCHW is needed; got "
                         f"{list(shape)} with layout {layout!r}")
    if min(shape) < 1:
        raise ValueError(f"every dim needs at least one element, got {list(shape)}")
    c = shape[-1] if layout == Layout.NLC else shape[1]
    if groups < 1 or c % groups:
        raise ValueError(f"GroupNorm needs a number of groups that divides the {c} channels; "
                         f"{groups} does not")
    positions = "L" if layout == Layout.NLC else "H·W"
    cubes = []
    for norm in CUBE_NORMS:
        if norm == NormKind.INSTANCE and layout == Layout.NC:
            cubes.append(SharingCube(norm, None, 0, 0, "not defined: an (N, C) table has no "
                                                       "positions to pool over"))
            continue
        dims = 3 if (norm == NormKind.LAYER and layout == Layout.NCHW) else 1
        ids = _to_cube(group_ids(shape, layout, NormSpec(norm=norm, dims=dims, groups=groups)),
                       layout)
        cells = ids == ids[0, 0, 0]
        m = int(cells.sum())
        statistics = int(np.unique(ids).size)
        pooled = {
            NormKind.BATCH: "N" + ("" if layout == Layout.NC else f", {positions}"),
            NormKind.LAYER: "C" + (f", {positions}" if layout == Layout.NCHW else ""),
            NormKind.INSTANCE: positions,
            NormKind.GROUP: f"C/{groups}" + ("" if layout == Layout.NC else f", {positions}"),
        }[norm]
        # one value per statistic has no spread: BatchNorm in training mode (torch's too)
        # refuses it, the others give 0/√ε = 0
        alone = ("; refused in training" if norm == NormKind.BATCH else "; x̂ = 0") \
            if m == 1 else ""
        cubes.append(SharingCube(norm, cells, m, statistics,
                                 f"{statistics} μ/σ, each over {m} value{'s' * (m != 1)} "
                                 f"({pooled}){alone}"))
    return cubes


# --- Does my output depend on my batch --------------------------------------------------------


def fixed_sample(features: int, seed: int = 0) -> np.ndarray:
    """The sample whose output we follow: one row of ``features`` values, drawn from ``seed``."""
    return random_batch((1, features), feature_spread=_FEATURE_SPREAD, seed=seed)[0]


@dataclass(frozen=True)
class BatchDependence:
    """One fixed sample's output in ``redraws`` batches of ``batch_size`` that differ only in its
    batch-mates.

    Attributes:
        batch_size: the size of every batch, the fixed sample included.
        batch_norm: (redraws, C) the sample's BatchNorm output (training mode, batch
            statistics) in each batch; ``None`` where BatchNorm refuses the batch.
        layer_norm: (redraws, C) its LayerNorm output in each batch.
        refusal: lnviz's message where BatchNorm refuses (batch size 1), else ``None``.
        torch_refusal: torch's own message for the same batch, else ``None``.
    """

    batch_size: int
    batch_norm: np.ndarray | None
    layer_norm: np.ndarray
    refusal: str | None
    torch_refusal: str | None

    @property
    def batch_norm_spread(self) -> float:
        """Largest change of any output feature across the re-draws (NaN when refused)."""
        return _spread(self.batch_norm) if self.batch_norm is not None else math.nan

    @property
    def layer_norm_spread(self) -> float:
        return _spread(self.layer_norm)


def _spread(outputs: np.ndarray) -> float:
    """max over features of (max − min over re-draws)."""
    return float((outputs.max(axis=0) - outputs.min(axis=0)).max())




def batch_mates(features: int, redraws: int, seed: int = 0) -> np.ndarray:
    """(redraws, BN_VS_LN_MAX_BATCH − 1, features): the other samples of each re-drawn batch. A
    batch of size B holds the fixed sample and mates ``[:, :B − 1]``, in
    :func:`batch_dependence` and :func:`batch_size_sweep` alike (and in the page's live panel,
    which is sent this array)."""
    # A stream of its own, apart from fixed_sample's (which draws from ``seed`` itself).
    stream = int(np.random.SeedSequence(seed).spawn(1)[0].generate_state(1)[0])
    return random_batch((redraws, BN_VS_LN_MAX_BATCH - 1, features), feature_spread=_FEATURE_SPREAD,
                        seed=stream)


def batch_dependence(
    sample: np.ndarray,
    batch_size: int,
    redraws: int = 8,
    seed: int = 0,
    eps: float = 1e-5,
    device: str = "cpu",
    dtype: str = "float32",
) -> BatchDependence:
    r"""Put ``sample`` (C,) first in ``redraws`` batches of ``batch_size`` and normalize each.

    .. math::
        \text{BN: } y_{0,c} = \frac{x_{0,c} - μ_c}{\sqrt{σ_c^2 + ε}},\ μ_c = \frac{1}{B}
        \sum_{j=0}^{B-1} x_{j,c} \qquad
        \text{LN: } y_{0,c} = \frac{x_{0,c} - μ_0}{\sqrt{σ_0^2 + ε}},\ μ_0 = \frac{1}{C}
        \sum_{c} x_{0,c}

    BatchNorm's μ_c and σ_c include the batch-mates x_{j≥1}, so re-drawing them moves the fixed
    sample's output; LayerNorm's μ_0 and σ_0 use row 0 only. At batch size 1 an (N, C) batch
    has a single value per feature and no variance to estimate: BatchNorm in training mode is
    refused, by torch and by lnviz, and the refusal is recorded instead of an output.

    The batch-mates are the first ``batch_size`` − 1 of :func:`batch_mates`, so a larger batch
    holds a smaller one's samples and more.
    """
    sample = np.asarray(sample, dtype=np.float32).reshape(-1)
    if not 1 <= batch_size <= BN_VS_LN_MAX_BATCH or redraws < 1:
        raise ValueError(f"the batch size must be between 1 and {BN_VS_LN_MAX_BATCH} and the "
                         f"re-draws at least 1, got {batch_size} and {redraws}")
    features = sample.size
    mates = batch_mates(features, redraws, seed)[:, : batch_size - 1]
    # All re-drawn batches at once, (redraws, B, C): LayerNorm normalizes each row of each;
    # BatchNorm sees them side by side as one (B, redraws·C) table, so that each column — one
    # feature of one re-drawn batch — gets its own μ and σ over the B samples, as it would alone.
    batches = np.concatenate([np.broadcast_to(sample, (redraws, 1, features)), mates], axis=1)
    x = to_tensor(batches, device, dtype)
    ln = layer_norm(x, features, eps=eps).output[:, 0]
    table = x.transpose(0, 1).reshape(batch_size, redraws * features)
    refusal = torch_refusal = None
    bn = None
    try:
        bn = batch_norm(table, None, None, training=True, eps=eps).output[0]
    except ValueError:  # one batch alone gets the same refusal, naming its own shape
        try:
            batch_norm(x[0], None, None, training=True, eps=eps)
        except ValueError as err:
            refusal, torch_refusal = str(err), _torch_refusal(x[0], eps)
    return BatchDependence(
        batch_size=batch_size,
        batch_norm=None if refusal else to_numpy(bn.reshape(redraws, features), torch.float32),
        layer_norm=to_numpy(ln, torch.float32),
        refusal=refusal,
        torch_refusal=torch_refusal,
    )


def _torch_refusal(x: torch.Tensor, eps: float) -> str | None:
    """What torch says about the same batch (it refuses one value per channel too)."""
    try:
        F.batch_norm(x, None, None, training=True, eps=eps)
    except ValueError as err:
        return str(err)
    return None


@dataclass(frozen=True)
class BatchSizeSweep:
    """:func:`batch_dependence` at several batch sizes.

    Attributes:
        batch_sizes: (S,) the sizes tried.
        batch_norm: (S, redraws, C) the fixed sample's BatchNorm output; NaN where refused.
        layer_norm: (S, redraws, C) its LayerNorm output.
    """

    batch_sizes: np.ndarray
    batch_norm: np.ndarray
    layer_norm: np.ndarray

    def spread(self, norm: str = NormKind.BATCH, feature: int | None = None) -> np.ndarray:
        """(S,) the largest change of the fixed sample's output across the re-draws at each
        batch size, for one ``feature`` or the largest over all of them (NaN where refused)."""
        outputs = self.batch_norm if norm == NormKind.BATCH else self.layer_norm
        if feature is not None:
            outputs = outputs[:, :, feature : feature + 1]
        width = outputs.max(axis=1) - outputs.min(axis=1)  # (S, C); NaN stays NaN
        return np.where(np.isnan(width).all(axis=1), np.nan,
                        np.nanmax(np.nan_to_num(width, nan=-np.inf), axis=1))

    def at(self, size: int) -> int:
        """The index of batch size ``size`` in :attr:`batch_sizes`."""
        return int(np.flatnonzero(self.batch_sizes == size)[0])


#: Part 2's "Before you look" question: whose output for the fixed sample moves when its
#: batch-mates are re-drawn.
MATES_OPTIONS = ("BatchNorm's only", "LayerNorm's only", "both", "neither")


def mates_answer(sweep: BatchSizeSweep) -> Answer:
    """Which of :data:`MATES_OPTIONS` ``sweep`` makes right (an output that changed by more
    than float32 rounding across the re-draws, at any batch size), and why, with the widths
    it measured at the smallest batch BatchNorm takes and at the largest."""
    def moved(norm: str) -> tuple[bool, np.ndarray]:
        width = sweep.spread(norm)
        return bool(np.nanmax(width) > 1e-5), width

    bn_moved, bn = moved(NormKind.BATCH)
    ln_moved, ln = moved(NormKind.LAYER)
    option = MATES_OPTIONS[{(True, False): 0, (False, True): 1, (True, True): 2,
                            (False, False): 3}[bn_moved, ln_moved]]
    taken = np.flatnonzero(~np.isnan(bn))
    most = taken[int(np.argmax(bn[taken]))]
    largest = taken[-1]
    return Answer(option, (
        f"Across {sweep.batch_norm.shape[1]} re-drawn batches, the fixed sample's BatchNorm "
        f"output changed by up to {bn[most]:.3g} (at batch size {int(sweep.batch_sizes[most])})"
        f" and still by {bn[largest]:.3g} at {int(sweep.batch_sizes[largest])}: its μ and σ "
        "pool the whole batch, so new batch-mates move them. Its LayerNorm output "
        + ("did not change at all" if float(np.nanmax(ln)) == 0 else
           f"changed by at most {float(np.nanmax(ln)):.3g}")
        + ": LayerNorm normalizes the sample with its own μ and σ, which no batch-mate "
          "enters. (Each width here is the largest change over these re-draws at one batch "
          "size; the figures below measure the same thing at the batch sizes you pick. In "
          "evaluation mode BatchNorm would use its running statistics instead, and neither "
          "output would move: part 3.)"))


def band_caption(sweep: BatchSizeSweep, feature: int) -> str:
    """The batch-size chart's caption, with the band's widths for ``feature`` at a small batch
    (4) and at the largest, and the verb they call for."""
    width = sweep.spread(feature=feature)
    small, large = 4, int(sweep.batch_sizes.max())
    at_small, at_large = width[sweep.at(small)], width[sweep.at(large)]
    trend = ("narrower" if at_large < at_small else "wider" if at_large > at_small
             else "as wide")
    pair = width[sweep.at(2)]
    return (
        "Each dot is the fixed sample's output for this feature in one re-drawn batch. Two "
        "things set the band's width. In a batch of m, BatchNorm's output for any one value is "
        "at most √(m − 1) in size (±1 at m = 2), which squeezes the band at small batches "
        "where the sample lies away from its batch-mates; and a bigger batch's μ and σ wobble "
        "less, which narrows it. So the band can widen over the first batch sizes before it "
        f"narrows. Here feature {feature}'s band is {at_small:.2g} wide at batch size {small} "
        f"(every output there lies within ±√{small - 1} ≈ ±{math.sqrt(small - 1):.2f}, so no "
        f"band is wider than {2 * math.sqrt(small - 1):.2f}) and {trend} at {large} "
        f"({at_large:.2g}). At batch size 2 BatchNorm answers ≈ ±1 whatever the two values are "
        f"(up to ε): its band there is {pair:.2g} wide, of at most 2. LayerNorm's line does not "
        "depend on the batch at all."
    )


def batch_noise_text(sweep: BatchSizeSweep) -> str:
    """The formula tutorial's generalization claim against what is known, with the batch noise
    that the known part rests on measured in this page's sweep."""
    bn, ln = sweep.spread(NormKind.BATCH), sweep.spread(NormKind.LAYER)
    small, large = sweep.at(4), len(sweep.batch_sizes) - 1
    return (
        "**Generalization.** The formula tutorial lists *improving generalization* among the "
        "reasons to "
        "normalize: normalization can act as a regularizer. What is known is narrower. "
        "BatchNorm in training mode normalizes each sample with the statistics of a random "
        "mini-batch, so the sample's output carries noise from its batch-mates — part 2 "
        f"measures it: in its most affected feature (the widest band over all features, not "
        f"the one the chart shows), the fixed sample's output moved by up to {bn[small]:.2g} "
        f"across the re-drawn batches of 4 and {bn[large]:.2g} across those of "
        f"{int(sweep.batch_sizes[large])}. That noise acts like a regularizer: Ioffe and "
        "Szegedy (2015) could reduce or remove Dropout in their BatchNorm networks. It "
        "weakens as batches grow, since the μ and σ of a larger batch vary less from draw to "
        "draw (their spread shrinks like 1/√(batch size); these two numbers are one draw "
        "each), and it is gone in evaluation mode. LayerNorm takes its "
        "statistics from the sample alone, so it adds no such noise (its output moved by "
        f"{max(np.nanmax(ln), 0.0):.2g} here), and the argument does not carry over to it: "
        "whatever LayerNorm does for generalization comes through other routes, such as "
        "easier optimization, and is not established as a general rule."
    )


#: Batch sizes of the sweep, roughly evenly spaced on a log axis.
SWEEP_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def batch_size_sweep(
    sample: np.ndarray,
    batch_sizes: Sequence[int] = SWEEP_SIZES,
    redraws: int = 8,
    seed: int = 0,
    eps: float = 1e-5,
    device: str = "cpu",
    dtype: str = "float32",
) -> BatchSizeSweep:
    """The fixed sample's outputs for every batch size in ``batch_sizes``: BatchNorm's scatter
    across re-draws narrows as the batch grows (its μ_c, σ_c approach the population's) but never
    vanishes at a finite size; LayerNorm's is zero at every size."""
    results = [batch_dependence(sample, int(b), redraws, seed, eps, device, dtype)
               for b in batch_sizes]
    nan = np.full_like(results[0].layer_norm, np.nan)
    return BatchSizeSweep(
        batch_sizes=np.asarray(batch_sizes, dtype=np.int64),
        batch_norm=np.stack([nan if r.batch_norm is None else r.batch_norm for r in results]),
        layer_norm=np.stack([r.layer_norm for r in results]),
    )


# --- Training and evaluation ------------------------------------------------------------------


@dataclass(frozen=True)
class RunningStats:
    """BatchNorm stepped through k training mini-batches of m samples, then evaluated.

    Attributes:
        momentum: the running-average momentum, or ``None`` for a cumulative average.
        batch_mean: (k, C) each mini-batch's μ.
        batch_var: (k, C) its biased σ² = (1/m) Σ (x − μ)², the one it normalizes with.
        batch_var_unbiased: (k, C) σ²·m/(m − 1), the one the running average receives.
        running_mean, running_var: (k + 1, C) the running statistics before any batch (0 and 1)
            and after each one.
        train_output: (m, C) the last mini-batch normalized with its own statistics.
        eval_output: (m, C) the same batch normalized with the running statistics.
        layer_norm_output: (m, C) the same batch through LayerNorm, which has one mode only.
    """

    momentum: float | None
    batch_mean: np.ndarray
    batch_var: np.ndarray
    batch_var_unbiased: np.ndarray
    running_mean: np.ndarray
    running_var: np.ndarray
    train_output: np.ndarray
    eval_output: np.ndarray
    layer_norm_output: np.ndarray

    @property
    def train_eval_gap(self) -> float:
        """max |train − eval| of BatchNorm's output on the last batch."""
        return float(np.abs(self.train_output - self.eval_output).max())


def running_statistics(
    steps: int,
    batch_size: int,
    features: int,
    momentum: float | None = 0.1,
    seed: int = 0,
    eps: float = 1e-5,
    device: str = "cpu",
    dtype: str = "float32",
) -> RunningStats:
    r"""Train BatchNorm on ``steps`` mini-batches drawn from N(3, 2²) and record its buffers.

    At the k-th mini-batch of m samples, with μ_B and the biased σ_B² it normalizes with,

    .. math::
        \hat μ \leftarrow (1 - α)\,\hat μ + α\,μ_B,\qquad
        \hat σ^2 \leftarrow (1 - α)\,\hat σ^2 + α\,\frac{m}{m-1}\,σ_B^2

    where α = ``momentum``, or α = 1/k for ``momentum=None`` (then the running values are the
    plain averages of all batches so far). The running σ² receives the *unbiased* estimate,
    because it stands in for the population's variance at evaluation time; the batch is still
    normalized with the biased one. In evaluation mode the output is (x − μ̂)/√(σ̂² + ε), so it
    differs from the training output until μ̂, σ̂² match the batch's own μ_B, σ_B².
    """
    if steps < 1:
        raise ValueError(f"at least one training step is needed, got {steps}")
    if batch_size < 2:
        raise ValueError("BatchNorm in training mode needs a mini-batch of at least 2 samples "
                         f"to estimate a variance; got {batch_size}")
    if momentum is not None and not 0.0 < momentum <= 1.0:
        raise ValueError(f"momentum must be in (0, 1] or None, got {momentum}")
    batches = to_tensor(random_batch((steps, batch_size, features), loc=POPULATION_MEAN,
                                     scale=math.sqrt(POPULATION_VAR), seed=seed), device, dtype)
    stat_dtype = torch.float64 if batches.dtype == torch.float64 else torch.float32
    running_mean = torch.zeros(features, device=batches.device, dtype=stat_dtype)
    running_var = torch.ones(features, device=batches.device, dtype=stat_dtype)
    tracked = torch.zeros((), dtype=torch.long)  # nn.BatchNorm's num_batches_tracked
    history_mean, history_var = [running_mean.clone()], [running_var.clone()]
    means, variances = [], []
    for batch in batches:
        result = batch_norm(batch, running_mean, running_var, training=True, momentum=momentum,
                            eps=eps, num_batches_tracked=tracked)
        means.append(result.mean.flatten())
        variances.append(result.var.flatten())
        history_mean.append(running_mean.clone())
        history_var.append(running_var.clone())
    last = batches[-1]
    evaluated = batch_norm(last, running_mean, running_var, training=False, eps=eps)
    batch_var = to_numpy(torch.stack(variances), torch.float32)
    return RunningStats(
        momentum=momentum,
        batch_mean=to_numpy(torch.stack(means), torch.float32),
        batch_var=batch_var,
        batch_var_unbiased=batch_var * batch_size / (batch_size - 1),  # Bessel's correction
        running_mean=to_numpy(torch.stack(history_mean), torch.float32),
        running_var=to_numpy(torch.stack(history_var), torch.float32),
        train_output=to_numpy(result.output, torch.float32),
        eval_output=to_numpy(evaluated.output, torch.float32),
        layer_norm_output=to_numpy(layer_norm(last, features, eps=eps).output, torch.float32),
    )


def modes_caption(stats: RunningStats) -> str:
    """The train-versus-eval chart's caption: the gap it shows and where it comes from, true for
    every momentum (with momentum 1, or None after one step, the running μ *is* the batch's)."""
    m = stats.train_output.shape[0]
    same_mean = bool(np.allclose(stats.running_mean[-1], stats.batch_mean[-1], rtol=1e-6,
                                 atol=1e-6))
    where = ("Here the running μ is this batch's own μ, yet the running σ² is its unbiased σ², "
             f"×{m / (m - 1):.3g} the biased one training divides by, so the gap stays. "
             if same_mean else
             "Evaluation normalizes with the running statistics, training with the batch's "
             "own; they "
             "differ by the batch's sampling noise around the population (larger for small m) "
             "and by how far the running averages still are from the population. ")
    return (f"The last mini-batch through BatchNorm in both modes: the largest difference is "
            f"{stats.train_eval_gap:.3g}. " + where + "LayerNorm has no running statistics and "
            "a single mode: its points sit on the diagonal.")


def variance_table(stats: RunningStats) -> pd.DataFrame:
    """Per feature, for the last mini-batch: μ, the biased and the unbiased σ² side by side, and
    the running μ and σ² that evaluation will use."""
    m = stats.train_output.shape[0]
    return pd.DataFrame({
        "feature": np.arange(stats.batch_mean.shape[1]),
        "batch μ": stats.batch_mean[-1],
        f"σ² biased (÷{m})": stats.batch_var[-1],
        f"σ² unbiased (÷{m - 1})": stats.batch_var_unbiased[-1],
        "running μ": stats.running_mean[-1],
        "running σ²": stats.running_var[-1],
    })


def bn_vs_ln_snippet(features: int, batch_size: int, steps: int, minibatch: int,
                     momentum: float | None, seed: int = 0) -> str:
    """Self-contained PyTorch code for the page's experiments with ``torch.nn.BatchNorm1d`` and
    ``torch.nn.LayerNorm``: a fixed row 0 whose batch-mates are re-drawn (``ln_same`` is True,
    ``bn_same`` False but where two samples happen to keep BatchNorm's ±1, as the comment then
    says), a batch of one that BatchNorm refuses in training mode (its message in
    ``refused``), ``steps`` mini-batches of ``minibatch`` from the population N(μ, σ²) of
    :func:`running_statistics` that update the running statistics, and the last one through
    evaluation mode (``gap``, its largest difference from training mode).

    A batch size of 1 is shown as 2: the re-drawing needs a batch-mate to re-draw.
    """
    shown_batch = max(batch_size, 2)
    # what the first experiment prints, run here as the snippet runs it: with two samples
    # BatchNorm gives ±1 per feature, so a new batch-mate on the same side of sample 0 in every
    # feature leaves row 0 where it was
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        x = torch.randn(shown_batch, features)
        before = F.batch_norm(x, None, None, training=True)[0]
        x[1:] = torch.randn(shown_batch - 1, features)
        moves = not torch.allclose(F.batch_norm(x, None, None, training=True)[0], before)
    header = ("LayerNorm's row 0 stays, BatchNorm's moves." if moves else
              "LayerNorm's row 0 stays; so does BatchNorm's here: with two samples it gives "
              "±1 per feature,\n# and the new batch-mate lies on the same side of sample 0 in "
              "every feature.")
    return snippet("bn_vs_ln", seed=seed, features=features, batch_size=shown_batch,
                   momentum=momentum, steps=steps, minibatch=minibatch, mean=POPULATION_MEAN,
                   std=math.sqrt(POPULATION_VAR),
                   notes={"header": header, "bn_same": str(not moves), "steps": str(steps),
                          "minibatch": str(minibatch)})


# --- BatchNorm in practice: a cheat-sheet -----------------------------------------------------

GROUP_NORM = Paper(NormKind.GROUP, "Wu and He", "Group Normalization", "1803.08494", "ECCV 2018")
#: Group Normalization's ImageNet ResNet-50 error at batch size 2, lower than BatchNorm's by
#: this many percentage points, as its paper reports.
GROUP_NORM_GAIN_AT_2 = 10.6
CONVNEXT = Paper("ConvNeXt", "Liu et al.", "A ConvNet for the 2020s", "2201.03545", "CVPR 2022")
#: A CNN's feature map and a transformer's width, for the values one statistic averages.
CNN_EXAMPLE = (32, 56, 56)  # batch, height, width: ResNet's second stage at batch 32
TOKEN_EXAMPLE = 768  # BERT-base's features per token


@dataclass(frozen=True)
class CheatRow:
    """One line of the cheat-sheet: what to do (``rule``), and why, with a number measured
    here or reported by a paper (``why``); ``topic`` names it for the page's links."""

    topic: str
    rule: str
    why: str


def frozen_fold_error(channels: int = 8, seed: int = 0) -> float:
    """BatchNorm in evaluation mode is a fixed affine map per channel, y = a·x + b with
    a = γ/√(running σ² + ε) and b = β − a·running μ: the largest difference, in float64,
    between lnviz's batch_norm and that map on a random batch (rounding only)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(16, channels, 5, 5, generator=generator, dtype=torch.float64) * 3 + 1
    mean, var = (torch.randn(channels, generator=generator, dtype=torch.float64),
                 torch.rand(channels, generator=generator, dtype=torch.float64) + 0.5)
    weight, bias = (torch.randn(channels, generator=generator, dtype=torch.float64)
                    for _ in range(2))
    y = batch_norm(x, mean, var, weight, bias, training=False).output
    a = weight / (var + 1e-5).sqrt()
    b = bias - a * mean
    folded = a[:, None, None] * x + b[:, None, None]
    return float((y - folded).abs().max())


def cheat_sheet(sweep: BatchSizeSweep) -> list[CheatRow]:
    """The practices a course ends with, each with its reason in numbers: the batch-size sweep
    of part 2 (one sample's BatchNorm output across batches), a fold of eval-mode BatchNorm
    into an affine map, the values one statistic averages in a CNN and in a transformer, and
    the papers' reports."""
    bn = sweep.spread(NormKind.BATCH)
    small, large = sweep.at(4), len(sweep.batch_sizes) - 1
    eight = sweep.at(8)
    n, h, w = CNN_EXAMPLE
    return [
        CheatRow(
            "small batches", "Batches of a few samples per device: use GroupNorm or LayerNorm.",
            f"BatchNorm's μ and σ² then come from a few samples: in part 2 one sample's output "
            f"moved by up to {short(bn[small])} across batches of 4 and {short(bn[large])} across "
            f"batches of {int(sweep.batch_sizes[large])}. (At 2 it cannot move by more than 2: "
            "BatchNorm then answers ±1 in every feature, whatever the two values are.) "
            f"{GROUP_NORM.cited} reports "
            f"{GROUP_NORM_GAIN_AT_2:g} points lower ImageNet error than BatchNorm at batch "
            "size 2 with GroupNorm, and about the same at typical sizes."),
        CheatRow(
            "evaluation mode", "Call model.eval() before evaluating or serving.",
            "In training mode BatchNorm normalizes each sample with its batch-mates' "
            f"statistics, so a prediction depends on what it is batched with (in part 2, up to "
            f"{short(bn[eight])} across batches of 8); in evaluation mode it uses the running "
            "averages, and each sample's output is its own. LayerNorm has no modes."),
        CheatRow(
            "frozen statistics", "Fine-tuning with small batches or on little data: keep "
            "BatchNorm's statistics frozen (its layers in evaluation mode), and train γ and β "
            "or nothing.",
            "Left in training mode, small fine-tuning batches normalize with noisy batch "
            "statistics and re-estimate the running ones from a few samples at a time. "
            "Frozen, BatchNorm is a fixed affine map per channel, "
            "y = a·x + b, that can be folded into the layer before it: here lnviz's eval-mode "
            f"BatchNorm and that map differ by {frozen_fold_error():.1e} (rounding)."),
        CheatRow(
            "padding", "Padded sequences: LayerNorm, or BatchNorm with the padding masked out.",
            "Pad tokens are counted in BatchNorm's μ and σ² unless masked, so a sentence's "
            "numbers depend on how long its batch-mates are; LayerNorm normalizes each token "
            "by its own features."),
        CheatRow(
            "CNN or transformer", "CNNs trained with large batches: BatchNorm works well. "
            "Transformers (and ConvNeXt): LayerNorm.",
            f"A CNN's BatchNorm averages each channel over N·H·W values — {n * h * w:,} at "
            f"batch {n} of {h}×{w} maps — so its statistics are steady and the network runs "
            "as one batch of images. A transformer's tokens differ in length and are often "
            f"served one sequence at a time; LayerNorm's {TOKEN_EXAMPLE} features per token "
            f"need no batch at all. {CONVNEXT.cited} kept convolutions but took LayerNorm "
            "from the vision transformers, as one step of its modernized ResNet."),
    ]
