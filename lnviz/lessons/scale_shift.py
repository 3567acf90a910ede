r"""Scale and shift: what the learnable γ and β do after the normalization.

A normalization first fixes the statistics, x̂ = (x − μ)/√(σ² + ε), and then hands control back
to the network with y = γ·x̂ + β. Because x̂ has mean 0 and standard deviation ≈ 1, the output
has mean β and standard deviation ≈ |γ|: the two parameters choose the output's location and
spread directly. This module holds the experiments of the "Scale and shift" page:

* :func:`scale_shift_grid` — histograms of γ·x̂ + β for several (γ, β), with their mean and std;
* :func:`per_feature_affine` — one (γ_c, β_c) per feature on a small (N, C) batch;
* :func:`recover_input` — choosing γ = √(σ² + ε) and β = μ undoes the normalization, which a
  per-feature γ/β can do for BatchNorm (per-feature statistics) but not for LayerNorm
  (per-sample statistics);
* :func:`two_betas` — in an LN-LSTM, LN(Wx; β₁) + LN(Uh; β₂) only ever uses β₁ + β₂;

and :func:`scale_shift_snippet`, the same three ideas with ``torch.nn``'s modules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lnviz.batch import norms_where, table_norm
from lnviz.data import random_batch
from lnviz.devices import to_numpy, to_tensor
from lnviz.lessons.common import Answer, short
from lnviz.norms import batch_norm, layer_norm, mean_and_var
from lnviz.snippets import snippet
from lnviz.terms import NormKind

__all__ = [
    "AFFINE_NORMS",
    "EPS",
    "GRID_OPTIONS",
    "NEAR_STANDARD",
    "FeatureAffine",
    "NextBatch",
    "Recovery",
    "ScaleShiftGrid",
    "TwoBetas",
    "best_feature_affine",
    "drawn_samples",
    "feature_batches",
    "feature_caption",
    "grid_answer",
    "grid_caption",
    "lstm_gate_inputs",
    "per_feature_affine",
    "recover_input",
    "recover_next_batch",
    "scale_shift_grid",
    "scale_shift_snippet",
    "split_bias",
    "two_betas",
]

#: The norms whose per-feature γ/β the page compares: statistics per feature, or per sample
#: (the centring norms of a (batch, features) table).
AFFINE_NORMS = norms_where(lambda norm: norm.table and norm.centred)


def _mean_std(y: torch.Tensor, dims: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (biased) standard deviation over ``dims``, two-pass, as float64 arrays."""
    mean, var, _ = mean_and_var(y.to(torch.promote_types(y.dtype, torch.float32)), dims)
    return to_numpy(mean), to_numpy(var.sqrt())


@dataclass(frozen=True)
class ScaleShiftGrid:
    """Histograms of y = γ·x̂ + β for every (γ, β) pair, on shared bins.

    ``counts[i, j]`` is the histogram for ``gammas[i]`` and ``betas[j]``; ``mean`` and ``std``
    (shape (len(gammas), len(betas))) are each output's mean and standard deviation.
    ``input_counts``, ``input_mean`` and ``input_std`` are the same for the input x before it
    was normalized (the formula tutorial's "original data" panel), on the same bins.
    """

    gammas: tuple[float, ...]
    betas: tuple[float, ...]
    centres: np.ndarray
    counts: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    input_counts: np.ndarray
    input_mean: float
    input_std: float


#: ε of the grid's LayerNorm: torch's default.
EPS = 1e-5


def drawn_samples(n: int, seed: int = 0, device: str = "cpu", dtype: str = "float32"
                  ) -> torch.Tensor:
    """The ``n`` standard-normal samples (sidebar seed) that :func:`scale_shift_grid` normalizes,
    as one row of shape (1, n)."""
    return to_tensor(random_batch((1, n), seed=seed), device, dtype)


def scale_shift_grid(
    gammas: Sequence[float] = (0.5, 1.0, 2.0),
    betas: Sequence[float] = (-1.0, 0.0, 1.0),
    *,
    n: int = 1000,
    seed: int = 0,
    bins: int = 30,
    span: tuple[float, float] | None = None,
    device: str = "cpu",
    dtype: str = "float32",
) -> ScaleShiftGrid:
    """``n`` standard-normal samples, normalized as one LayerNorm row, then scaled and shifted.

    Each panel is :func:`lnviz.layer_norm` with weight γ and bias β (the same for every value),
    so the output has mean β and std |γ|·√(σ²/(σ² + ε)) ≈ |γ|. All histograms, and the input
    x's, share ``bins`` bins over ``span`` (default: the range of every output and of x), so
    panels can be compared by eye. The formula tutorial's figure is the default 3 × 3 grid with x
    beside it.
    """
    if n < 2:
        raise ValueError(f"a histogram of normalized values needs at least 2 samples, got {n}")
    if not gammas or not betas:
        raise ValueError("give at least one γ and one β")
    x = drawn_samples(n, seed, device, dtype)
    ones = torch.ones(n, dtype=torch.float64)
    outputs = [[layer_norm(x, n, ones * g, ones * b, eps=EPS).output for b in betas]
               for g in gammas]
    flat = np.stack([to_numpy(y).ravel() for row in outputs for y in row])
    drawn = to_numpy(x).ravel()
    if span is None:
        span = (float(min(flat.min(), drawn.min())), float(max(flat.max(), drawn.max())))
    edges = np.linspace(span[0], span[1], bins + 1)
    counts = np.stack([np.histogram(values, bins=edges)[0] for values in flat])
    stats = [_mean_std(y, (1,)) for row in outputs for y in row]
    input_mean, input_std = _mean_std(x, (1,))
    shape = (len(gammas), len(betas))
    return ScaleShiftGrid(
        gammas=tuple(float(g) for g in gammas),
        betas=tuple(float(b) for b in betas),
        centres=(edges[:-1] + edges[1:]) / 2,
        counts=counts.reshape(*shape, bins),
        mean=np.array([float(m.item()) for m, _ in stats]).reshape(shape),
        std=np.array([float(s.item()) for _, s in stats]).reshape(shape),
        input_counts=np.histogram(drawn, bins=edges)[0],
        input_mean=float(input_mean.item()),
        input_std=float(input_std.item()),
    )


#: How far the drawn input's mean may be from 0 and its std from 1 for the caption to call it
#: "already close to 0 and 1".
NEAR_STANDARD = 0.1


#: Part 1's "Before you look" question: where γ and β put each panel's mean and spread.
GRID_OPTIONS = ("mean β, standard deviation |γ|", "mean γ, standard deviation |β|",
                "mean 0, standard deviation 1 in every panel")


def grid_answer(grid: ScaleShiftGrid) -> Answer:
    """Which of :data:`GRID_OPTIONS` the panels of ``grid`` fit best (the largest miss over the
    panels, for each option's prediction), and why, with the panels' own numbers."""
    gammas, betas = np.meshgrid(grid.gammas, grid.betas, indexing="ij")
    # x̂'s standard deviation: √(σ²/(σ² + ε)) of the drawn values (1 at ε = 0)
    shrink = grid.input_std / math.sqrt(grid.input_std**2 + EPS)
    predictions = [(betas, np.abs(gammas) * shrink), (gammas, np.abs(betas)),
                   (np.zeros_like(betas), np.full_like(betas, shrink))]
    misses = [max(float(np.abs(grid.mean - mean).max()), float(np.abs(grid.std - std).max()))
              for mean, std in predictions]
    best = int(np.argmin(misses))
    i, j = len(grid.gammas) - 1, 0  # the panel of the largest γ and the first β
    return Answer(GRID_OPTIONS[best], (
        f"The panel γ = {short(grid.gammas[i])}, β = {short(grid.betas[j])} has mean "
        f"{short(float(grid.mean[i, j]) + 0.0, 4)} and standard deviation "
        f"{short(float(grid.std[i, j]), 4)}; over all {grid.mean.size} panels the mean is β and "
        f"the standard deviation |γ| times {shrink:.6f} to within {misses[0]:.1g}. x̂ has mean 0 "
        "and standard deviation √(σ²/(σ² + ε)), that factor: multiplying by γ multiplies every "
        "distance from the mean, and so the standard deviation, by |γ| (a negative γ also "
        "mirrors the values); adding β moves every value, and the mean with them, by β."))


def grid_caption(grid: ScaleShiftGrid, samples: int) -> str:
    """What the grid shows, with its own numbers, and where the formula tutorial's version of it
    slips."""
    mean, std = grid.input_mean + 0.0, grid.input_std
    near = abs(mean) <= NEAR_STANDARD and abs(std - 1.0) <= NEAR_STANDARD
    return (
        f"Top: the input x, {samples} draws from N(0, 1), with mean {mean:.2f} and standard "
        f"deviation {std:.2f}. Normalizing subtracts that mean and multiplies by 1/{std:.2f} = "
        f"{1 / std:.2f} (up to ε), so x̂ — the orange panel, γ = 1, β = 0 — has x's shape, "
        "centred at 0 and stretched to standard deviation 1"
        + (": little change, because draws from N(0, 1) are already close to that. "
           if near else ". ")
        + f"Below, rows are γ = {', '.join(f'{g:g}' for g in grid.gammas)} and columns β = "
        f"{', '.join(f'{b:g}' for b in grid.betas)}. Along a row the same shape slides "
        "sideways (β is the mean); down a column it widens (|γ| is, up to ε, the standard "
        "deviation). The shape never changes: γ and β are a straight-line map. The formula "
        "tutorial's code "
        "puts its ten histograms (x, x̂ and eight more) on a 3 × 3 grid of nine slots: it "
        "leaves slot 2 empty, draws γ = 0.5, β = 1 over the x̂ panel in slot 5, and stops at "
        "γ = 2, β = 1 with matplotlib's ValueError for slot 10, before the figure is saved. "
        "Here x has its own row."
    )


@dataclass(frozen=True)
class FeatureAffine:
    """One γ_c and β_c per feature, and what they made of each feature's column."""

    norm: str
    gamma: np.ndarray
    beta: np.ndarray
    output: np.ndarray
    mean: np.ndarray
    std: np.ndarray

    @property
    def mean_miss(self) -> np.ndarray:
        """|mean of column c − β_c| per feature."""
        return np.abs(self.mean - self.beta)

    @property
    def std_miss(self) -> np.ndarray:
        """|std of column c − |γ_c|| per feature (ε alone makes it |γ_c|·(1 − √(σ²/(σ²+ε))))."""
        return np.abs(self.std - np.abs(self.gamma))


def feature_caption(result: FeatureAffine) -> str:
    """How far each column landed from its target β_c ± |γ_c|, in the result's numbers."""
    lead = ("Blue dots: the output values of each feature. Green: where γ_c and β_c aim "
            "(β_c ± |γ_c|). Orange: where the column actually landed (mean ± std). ")
    if result.norm == NormKind.BATCH:
        return lead + ("Under BatchNorm each column lands on its target up to rounding and ε: "
                       f"the largest miss is {result.mean_miss.max():.2g} in mean and "
                       f"{result.std_miss.max():.2g} in standard deviation.")
    if not np.any(result.gamma):  # every column is β_c exactly: nothing of the rows is left
        return lead + ("With every γ_c at 0, LayerNorm's output is β_c in every row, so each "
                       "column lands on its target exactly (largest miss "
                       f"{max(result.mean_miss.max(), result.std_miss.max()):.2g}): γ is what "
                       "carries the rows' standardization into the columns.")
    worst_mean, worst_std = int(np.argmax(result.mean_miss)), int(np.argmax(result.std_miss))
    return lead + (f"Under LayerNorm the columns miss their targets by up to "
                   f"{result.mean_miss.max():.2g} in mean (feature {worst_mean}) and "
                   f"{result.std_miss.max():.2g} in standard deviation (feature {worst_std}): "
                   "the rows were standardized, not the columns.")


def per_feature_affine(
    x: torch.Tensor,
    gamma: Sequence[float],
    beta: Sequence[float],
    norm: str = NormKind.BATCH,
    eps: float = 1e-5,
) -> FeatureAffine:
    r"""Normalize the (N, C) batch ``x`` and apply y_{n,c} = γ_c·x̂_{n,c} + β_c.

    Column c of the output has mean γ_c·mean_n(x̂_{n,c}) + β_c and std |γ_c|·std_n(x̂_{n,c}).
    Under BatchNorm each column of x̂ has mean 0 and std √(σ_c²/(σ_c² + ε)), so the output's
    column statistics are exactly β_c and ≈ |γ_c|. Under LayerNorm the rows of x̂ are
    standardized, not the columns, so they are only roughly β_c and |γ_c|.
    """
    c = x.shape[-1]
    if len(gamma) != c or len(beta) != c:
        raise ValueError(f"need one γ and one β per feature ({c}); got {len(gamma)} and "
                         f"{len(beta)}")
    weight = torch.tensor(list(gamma), dtype=torch.float64)
    bias = torch.tensor(list(beta), dtype=torch.float64)
    y = table_norm(x, norm, weight, bias, eps).output
    mean, std = _mean_std(y, (0,))
    return FeatureAffine(norm, to_numpy(weight), to_numpy(bias), to_numpy(y), mean.ravel(),
                         std.ravel())


def best_feature_affine(x: torch.Tensor, x_hat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The per-feature (γ_c, β_c) that bring γ_c·x̂ + β_c closest to x (least squares).

    For each column c, the straight-line fit of x_{·,c} against x̂_{·,c}:

    .. math::
        γ_c = \frac{\mathrm{cov}(\hat x_c, x_c)}{\mathrm{var}(\hat x_c)},\qquad
        β_c = \overline{x_c} - γ_c\,\overline{\hat x_c}

    When the column of x̂ is an exact affine image of x (BatchNorm) the fit is exact:
    γ_c = √(σ_c² + ε), β_c = μ_c. A column with no spread in x̂ gets γ_c = 0.
    """
    x = x.to(x_hat.dtype)
    mean_hat, var_hat, _ = mean_and_var(x_hat, (0,))
    mean_x, _, _ = mean_and_var(x, (0,))
    cov = ((x_hat - mean_hat) * (x - mean_x)).mean(dim=0, keepdim=True)
    gamma = torch.where(var_hat > 0, cov / var_hat, torch.zeros_like(cov))
    beta = mean_x - gamma * mean_hat
    return gamma.squeeze(0), beta.squeeze(0)


@dataclass(frozen=True)
class Recovery:
    """γ and β chosen to undo a normalization, and how close y came to the input x.

    ``gamma``/``beta`` have shape (C,) for per-feature parameters and (N, 1) for per-sample
    ones; ``max_error`` is max |y − x|.
    """

    norm: str
    per: str
    gamma: np.ndarray
    beta: np.ndarray
    output: np.ndarray
    max_error: float


def recover_input(
    x: torch.Tensor, norm: str = NormKind.BATCH, eps: float = 1e-5, per: str = "feature"
) -> Recovery:
    r"""Try to get x back out of norm(x) by choosing γ = √(σ² + ε) and β = μ.

    Since x̂ = (x − μ)/√(σ² + ε), setting γ = √(σ² + ε) and β = μ gives γ·x̂ + β = x. That needs
    one (γ, β) per *group of the statistics*:

    * ``norm="BatchNorm"``, ``per="feature"``: the statistics are per feature, so γ_c, β_c of
      shape (C,) — the layer's own parameters — recover x exactly.
    * ``norm="LayerNorm"``, ``per="sample"``: the statistics are per sample, so the recovering
      γ_n, β_n depend on the sample; they are not parameters a layer could learn.
    * ``norm="LayerNorm"``, ``per="feature"``: the best a per-feature γ_c, β_c can do
      (:func:`best_feature_affine`), which leaves an error.
    """
    if per not in ("feature", "sample"):
        raise ValueError(f"per must be 'feature' or 'sample', got {per!r}")
    result = table_norm(x, norm, eps=eps)
    if per == "sample":
        if norm != NormKind.LAYER:
            raise ValueError("per-sample γ and β undo LayerNorm; BatchNorm's statistics are "
                             "per feature — use per='feature'")
        gamma, beta = torch.sqrt(result.var + eps), result.mean  # (N, 1): one pair per sample
        # in x's precision, as the layers of the other two recoveries compute
        y = gamma.to(x.dtype) * result.x_hat.to(x.dtype) + beta.to(x.dtype)
    else:
        if norm == NormKind.BATCH:
            gamma, beta = torch.sqrt(result.var + eps).flatten(), result.mean.flatten()
        else:
            gamma, beta = best_feature_affine(x, result.x_hat)
        y = table_norm(x, norm, gamma, beta, eps).output
    error = float((y.to(torch.float64) - x.to(torch.float64)).abs().max())
    return Recovery(norm, per, to_numpy(gamma), to_numpy(beta), to_numpy(y), error)


def feature_batches(seed: int = 0, samples: int = 16, features: int = 4,
                    device: str = "cpu", dtype: str = "float32"
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Two batches (samples, features) from one population whose features have very different
    centres and widths (``feature_spread=1``): the page's batch, and the next one a training
    loop would see."""
    following = int(np.random.SeedSequence([seed, 1]).generate_state(1)[0])
    return tuple(to_tensor(random_batch((samples, features), feature_spread=1.0, seed=s),
                           device, dtype) for s in (seed, following))


@dataclass(frozen=True)
class NextBatch:
    """BatchNorm's recovering γ_c = √(σ_c² + ε), β_c = μ_c, fitted on one batch, applied to
    another: in training mode (the new batch's own statistics) and in evaluation mode (running
    statistics frozen at the first batch's)."""

    gamma: np.ndarray
    beta: np.ndarray
    training_output: np.ndarray
    training_error: float
    eval_output: np.ndarray
    eval_error: float


def recover_next_batch(fitted: torch.Tensor, new: torch.Tensor, eps: float = 1e-5) -> NextBatch:
    r"""Undo BatchNorm on ``fitted`` with its own γ_c, β_c, then apply the same layer to ``new``.

    In training mode the layer normalizes ``new`` with *its* μ'_c, σ'_c:

    .. math::
        y = σ_c\,\frac{x' - μ'_c}{σ'_c} + μ_c \ne x' \quad\text{unless } μ'_c = μ_c,\ σ'_c = σ_c

    (σ with ε inside): every output column has mean μ_c and spread σ_c, whatever the batch, so
    the batch's own mean and spread are gone and no γ, β bring them back for every batch. In
    evaluation mode, with running statistics μ_c, σ_c² (the first batch's), the layer is one
    fixed straight line per feature and the same γ_c, β_c give every batch back.
    """
    new64 = new.to(torch.float64)
    own = table_norm(fitted, NormKind.BATCH, eps=eps)
    mean, var = own.mean.flatten(), own.var.flatten()
    gamma, beta = torch.sqrt(var + eps), mean
    training = table_norm(new, NormKind.BATCH, gamma, beta, eps).output
    frozen = batch_norm(new, mean.to(new.dtype), var.to(new.dtype), gamma.to(new.dtype),
                        beta.to(new.dtype), training=False, eps=eps).output
    return NextBatch(
        gamma=to_numpy(gamma), beta=to_numpy(beta),
        training_output=to_numpy(training),
        training_error=float((training.to(torch.float64) - new64).abs().max()),
        eval_output=to_numpy(frozen),
        eval_error=float((frozen.to(torch.float64) - new64).abs().max()),
    )


def lstm_gate_inputs(
    seed: int = 0, batch: int = 2, input_size: int = 5, hidden: int = 3,
    device: str = "cpu", dtype: str = "float32",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W·x and U·h of an LSTM step (4·hidden gate pre-activations each) and a bias b.

    Random weights, input and hidden state from ``seed``, as at one step of an LN-LSTM, where
    the gates are LN(W·x) + LN(U·h) + b before the sigmoids and tanh.
    """
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    x, h = draw(batch, input_size), draw(batch, hidden)
    w, u = draw(4 * hidden, input_size), draw(4 * hidden, hidden)
    bias = draw(4 * hidden)
    return (to_tensor(x @ w.T, device, dtype), to_tensor(h @ u.T, device, dtype),
            to_tensor(bias, device, dtype))


def split_bias(bias: torch.Tensor, share: float) -> tuple[torch.Tensor, torch.Tensor]:
    """β₁ = share·b and β₂ = (1 − share)·b: two betas that always add up to b."""
    return share * bias, (1.0 - share) * bias


@dataclass(frozen=True)
class TwoBetas:
    """LN(Wx; β₁) + LN(Uh; β₂) against LN(Wx; 0) + LN(Uh; 0) + (β₁ + β₂)."""

    beta1: np.ndarray
    beta2: np.ndarray
    separate: np.ndarray
    merged: np.ndarray
    max_difference: float


def two_betas(
    wx: torch.Tensor, uh: torch.Tensor, beta1: torch.Tensor, beta2: torch.Tensor,
    eps: float = 1e-5,
) -> TwoBetas:
    r"""Show that two LayerNorm biases summed are one bias (the LN-LSTM walkthrough's LN-LSTM
    remark).

    β enters LayerNorm after the normalization, LN(v; β) = x̂(v)·γ + β, so

    .. math::
        \mathrm{LN}(Wx; β_1) + \mathrm{LN}(Uh; β_2)
            = \mathrm{LN}(Wx; 0) + \mathrm{LN}(Uh; 0) + (β_1 + β_2)

    and gradient descent can only ever learn the sum: one of the two is redundant.
    """
    size = wx.shape[-1]
    separate = layer_norm(wx, size, bias=beta1, eps=eps).output + \
        layer_norm(uh, size, bias=beta2, eps=eps).output
    merged = layer_norm(wx, size, eps=eps).output + layer_norm(uh, size, eps=eps).output + \
        (beta1 + beta2).to(wx.dtype)
    difference = float((separate.double() - merged.double()).abs().max())
    return TwoBetas(to_numpy(beta1), to_numpy(beta2), to_numpy(separate), to_numpy(merged),
                    difference)


def scale_shift_snippet(gamma: float, beta: float, samples: int = 1000, batch: int = 16,
                        features: int = 4, hidden: int = 3) -> str:
    """Self-contained PyTorch code for the page (``lnviz/snippets/scale_shift.py``):
    ``samples`` N(0, 1) values through ``nn.LayerNorm`` with every γ = ``gamma`` and β =
    ``beta`` (``y``, whose mean is β and whose standard deviation is about |γ|); a ``batch`` ×
    ``features`` batch that ``nn.BatchNorm1d`` gives back exactly with γ = √(σ² + ε) and β = μ
    (``recovered``: the largest difference), a next batch that the same γ, β miss in training
    mode (``missed``) and give back in evaluation mode with the first batch's statistics frozen
    (``kept``); and an LN-LSTM step whose two LayerNorms share one bias after their sum
    (``gates``, 4 gates × ``hidden``)."""
    return snippet("scale_shift", samples=samples, gamma=gamma, beta=beta, rows=batch,
                   features=features, hidden=hidden)
