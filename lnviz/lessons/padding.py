"""Padding and sequences: what pad tokens do to BatchNorm, and why LayerNorm over each token's
features does not notice.

A batch of sentences of unequal length is padded to a common length with pad tokens (the
transformer article:
a zero vector). BatchNorm pools every position of a feature, so the pads enter its μ and σ:

    μ_c = (1/n) Σ_{all positions} x_c          (pads included)
    μ_c = (1/n_real) Σ_{real positions} x_c    (masked BatchNorm: pads left out)

With the transformer article's first feature, 1…7 and one pad 0, that is μ = 3.5, σ = 2.29 against
μ = 4,
σ = 2 without the pad. :func:`feature_stats` computes both, :func:`padding_outputs` the three
outputs (BatchNorm with the pads, masked BatchNorm, LayerNorm), and :func:`padding_sweep` how far
the statistics and the real tokens' outputs drift as the padded share of the batch grows.

BatchNorm in training mode needs at least two values per feature to estimate a spread (torch
refuses one): counting the pads, two positions; masked, two real tokens (:data:`MIN_REAL_TOKENS`).
A batch with fewer gets NaN for what cannot be computed, and the rest as usual.

LayerNorm takes μ and σ over one token's own features, so a real token's output cannot depend on
how many pads sit beside it. The pad token itself is a constant row: μ = pad value, σ² = 0,
x̂ = 0·(1/√ε) = 0, so its output is exactly β — finite only because ε > 0
(:func:`pad_token_steps`). :func:`padding_snippet` writes the same in plain PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from lnviz.batch import Batch, NormSpec, group_ids, normalize
from lnviz.devices import to_numpy, to_tensor
from lnviz.lessons.common import Answer, short, step_by_step
from lnviz.limits import PADDING_MAX_LENGTH, PADDING_MAX_SEQUENCES
from lnviz.norms import NormResult, batch_norm, layer_norm
from lnviz.snippets import Code, snippet
from lnviz.terms import Layout, NormKind

__all__ = [
    "MIN_REAL_TOKENS",
    "PAD_MEAN_OPTIONS",
    "SWEEP_FRACTIONS",
    "FeatureStats",
    "PadPull",
    "PaddedRecipe",
    "PaddingSweep",
    "check_lengths",
    "feature_stats",
    "pad_mean_answer",
    "pad_pull",
    "pad_token_steps",
    "padding_outputs",
    "padding_snippet",
    "padding_sweep",
    "sigma_path",
]

#: Padded shares of the batch tried by :func:`padding_sweep`: none up to nine pads in ten.
SWEEP_FRACTIONS = tuple(np.round(np.linspace(0.0, 0.9, 19), 2).tolist())
#: BatchNorm in training mode estimates a feature's σ from the values it pools, and needs two;
#: masked BatchNorm pools the real tokens alone.
MIN_REAL_TOKENS = 2


class PaddedRecipe(NamedTuple):
    """How a generated padded batch is made: the arguments of :func:`lnviz.data.padded_batch`,
    in its order. Plain values, so that it also serves as the batch's key."""

    batch_size: int
    d_model: int
    lengths: tuple[int, ...] | None
    max_len: int
    pad_value: float
    seed: int


def check_lengths(lengths: Sequence[int], padded_length: int,
                  max_sequences: int = PADDING_MAX_SEQUENCES,
                  max_padded_length: int = PADDING_MAX_LENGTH) -> tuple[int, ...]:
    """Typed sequence lengths (real tokens per sequence), checked against a page's limits:
    1 to ``max_sequences`` of them, each from 1 to ``padded_length``; a ValueError names the
    control to change. The defaults are this page's; the Explorer passes its own."""
    if not lengths:
        raise ValueError("Type at least one length (e.g. 6, 3, 1), or leave the field empty "
                         "for random lengths.")
    if len(lengths) > max_sequences:
        raise ValueError(f"At most {max_sequences} sequences: you typed {len(lengths)} lengths. "
                         "Every position of every sequence is drawn, so the batch keeps to the "
                         "“Sequences” control's range.")
    for i, length in enumerate(lengths, start=1):
        if length < 1:
            raise ValueError(f"Every sequence needs at least one real token, but length {i} is "
                             f"{length}.")
        if length > padded_length:
            raise ValueError(
                f"Length {i} is {length} tokens, more than the padded length of "
                f"{padded_length}: raise “Padded length” (up to {max_padded_length}) or type a "
                "shorter length.")
    return tuple(lengths)


def _check(batch: Batch) -> None:
    if batch.layout != Layout.NLC or batch.mask is None:
        raise ValueError("a padded batch of token sequences (batch, sequence, features) with a "
                         "mask is needed")
    if not batch.mask.any():
        raise ValueError("every position of this batch is padding; there is nothing to "
                         "normalize")


def _stats(result: NormResult | None, c: int) -> tuple[np.ndarray, np.ndarray]:
    """(μ, σ) per feature of a batch_norm result, NaN where none could be computed."""
    if result is None:
        return np.full(c, np.nan), np.full(c, np.nan)
    return to_numpy(result.mean).ravel(), np.sqrt(to_numpy(result.var).ravel())


@dataclass(frozen=True)
class FeatureStats:
    """BatchNorm's per-feature μ and σ (the biased, normalizing one), with and without pads.

    Attributes:
        mean_with_pad, std_with_pad: (C,) over every position, pads included; NaN with fewer
            than two positions.
        mean_masked, std_masked: (C,) over the real tokens only; NaN with fewer than
            :data:`MIN_REAL_TOKENS` of them.
        pad_fraction: the share of positions that are padding.
        positions, real_tokens: how many positions the batch has, and how many are real.
    """

    mean_with_pad: np.ndarray
    std_with_pad: np.ndarray
    mean_masked: np.ndarray
    std_masked: np.ndarray
    pad_fraction: float
    positions: int
    real_tokens: int

    @property
    def counted_ok(self) -> bool:
        """Whether BatchNorm with the pads counted has two values per feature to pool."""
        return self.positions >= MIN_REAL_TOKENS

    @property
    def masked_ok(self) -> bool:
        """Whether masked BatchNorm has the :data:`MIN_REAL_TOKENS` real tokens it needs."""
        return self.real_tokens >= MIN_REAL_TOKENS

    def table(self) -> pd.DataFrame:
        """One row per feature, the numbers side by side (those that could be computed)."""
        columns = {"feature": np.arange(self.mean_masked.size)}
        if self.counted_ok:
            columns["μ with pads"] = self.mean_with_pad
        if self.masked_ok:
            columns["μ real tokens only"] = self.mean_masked
        if self.counted_ok:
            columns["σ with pads"] = self.std_with_pad
        if self.masked_ok:
            columns["σ real tokens only"] = self.std_masked
        return pd.DataFrame(columns)


def feature_stats(batch: Batch, device: str = "cpu", dtype: str = "float32") -> FeatureStats:
    """BatchNorm's statistics for a padded (N, L, C) batch, with and without the pads, taken by
    :func:`lnviz.batch_norm` itself (``channel_dim=-1``; ``mask`` leaves the pads out), NaN
    where BatchNorm has fewer than two values per feature."""
    _check(batch)
    x = to_tensor(batch.values, device, dtype)
    mask = torch.as_tensor(batch.mask, device=x.device)
    positions, real = batch.mask.size, int(batch.mask.sum())
    with_pad = (batch_norm(x, None, None, training=True, channel_dim=-1)
                if positions >= MIN_REAL_TOKENS else None)
    masked = (batch_norm(x, None, None, training=True, channel_dim=-1, mask=mask)
              if real >= MIN_REAL_TOKENS else None)
    mean_with_pad, std_with_pad = _stats(with_pad, x.shape[-1])
    mean_masked, std_masked = _stats(masked, x.shape[-1])
    return FeatureStats(mean_with_pad=mean_with_pad, std_with_pad=std_with_pad,
                        mean_masked=mean_masked, std_masked=std_masked,
                        pad_fraction=float(1.0 - batch.mask.mean()), positions=positions,
                        real_tokens=real)


@dataclass(frozen=True)
class PadPull:
    """What the pads do to one feature's BatchNorm statistics, and so to the first token there.

    Attributes:
        total, positions: the feature's sum over every position (pads included) and how many
            positions there are: ``mean_with_pad = total / positions``.
        mean_with_pad, var_with_pad, std_with_pad: its μ, σ² and σ with the pads counted.
        mean_real, std_real: its μ and σ over the real tokens only.
        value: the first token's value of the feature; ``x_hat_with_pad`` and ``x_hat_real``
            its (x − μ)/σ either way (no ε: the article's arithmetic).
    """

    total: float
    positions: int
    mean_with_pad: float
    var_with_pad: float
    std_with_pad: float
    mean_real: float
    std_real: float
    value: float
    x_hat_with_pad: float
    x_hat_real: float


def pad_pull(batch: Batch, stats: FeatureStats, feature: int = 0) -> PadPull:
    """The pads' pull on ``feature`` of ``batch``, from BatchNorm's statistics ``stats``."""
    value = float(batch.values[0, 0, feature])
    mean, std = float(stats.mean_with_pad[feature]), float(stats.std_with_pad[feature])
    mean_real, std_real = float(stats.mean_masked[feature]), float(stats.std_masked[feature])
    return PadPull(total=float(np.asarray(batch.values[..., feature], np.float64).sum()),
                   positions=stats.positions, mean_with_pad=mean, var_with_pad=std**2,
                   std_with_pad=std, mean_real=mean_real, std_real=std_real, value=value,
                   x_hat_with_pad=(value - mean) / std, x_hat_real=(value - mean_real) / std_real)


#: Part 1's "Before you look" question: where counting the pads puts a feature's BatchNorm μ,
#: against its μ over the real tokens alone.
PAD_MEAN_OPTIONS = ("closer to the pads' value", "where it was", "further from the pads' value")


def pad_mean_answer(batch: Batch, stats: FeatureStats, feature: int = 0) -> Answer:
    """Which of :data:`PAD_MEAN_OPTIONS` ``stats`` (BatchNorm's statistics of ``batch``) make
    right for ``feature``, and why: the pads' share of the positions and their value, worked
    into the mean. Needs the real tokens' μ (``stats.masked_ok``)."""
    values = np.asarray(batch.values[..., feature], np.float64)
    pads = values[~batch.mask]
    real, counted = float(stats.mean_masked[feature]), float(stats.mean_with_pad[feature])
    if pads.size == 0:
        return Answer(PAD_MEAN_OPTIONS[1], (
            f"This batch has no pads: all {stats.positions} positions are real tokens, so "
            f"feature {feature}'s μ is {short(counted)} either way."))
    pad = float(pads[0]) if np.all(pads == pads[0]) else float(pads.mean())
    tolerance = 1e-6 * max(1.0, abs(real), abs(pad))
    gap_real, gap_counted = abs(real - pad), abs(counted - pad)
    option = (PAD_MEAN_OPTIONS[1] if abs(gap_real - gap_counted) <= tolerance else
              PAD_MEAN_OPTIONS[0] if gap_counted < gap_real else PAD_MEAN_OPTIONS[2])
    share = f"{100 * pads.size / stats.positions:.3g}%"
    which = (f"the pad ({short(pad)})" if pads.size == 1 else
             f"the {pads.size} pads ({short(pad)} each)")
    return Answer(option, (
        f"Feature {feature}'s real tokens have μ = {short(real, 4)}. BatchNorm counts {which} "
        f"as {share} of the {stats.positions} positions, so its μ is the two averaged, weighted "
        f"by how many of each: ({stats.real_tokens}·{short(real, 4)} + {pads.size}·{short(pad)})"
        f"/{stats.positions} = {short(counted, 4)}, moved {share} of the way from the real "
        f"tokens' μ to the pads' value. σ changes too: {short(float(stats.std_masked[feature]))}"
        f" over the real tokens, {short(float(stats.std_with_pad[feature]))} with the pads."))


def padding_outputs(
    batch: Batch, device: str = "cpu", dtype: str = "float32"
) -> dict[str, np.ndarray]:
    """The batch and its normalizations (γ = 1, β = 0, ε = 1e-5), each (N, L, C): BatchNorm with
    the pads counted, masked BatchNorm, and LayerNorm per token. A BatchNorm with fewer than two
    values per feature to pool (two positions; masked, two real tokens) is left out."""
    _check(batch)
    x = to_tensor(batch.values, device, dtype)
    mask = torch.as_tensor(batch.mask, device=x.device)
    specs = {}
    if batch.mask.size >= MIN_REAL_TOKENS:
        specs["BatchNorm, pads counted"] = NormSpec(norm=NormKind.BATCH, use_mask=False)
    if batch.mask.sum() >= MIN_REAL_TOKENS:
        specs["BatchNorm, masked"] = NormSpec(norm=NormKind.BATCH, use_mask=True)
    specs[NormKind.LAYER] = NormSpec(norm=NormKind.LAYER)
    outputs = {"input x": to_numpy(x)}
    outputs.update({name: to_numpy(normalize(x, Layout.NLC, spec, mask).output)
                    for name, spec in specs.items()})
    return outputs


@dataclass(frozen=True)
class PaddingSweep:
    """The batch's real tokens with more and more pad tokens beside them.

    Attributes:
        fraction: (F,) the padded share of the positions at each step.
        pads: (F,) how many pad tokens that is.
        mean_with_pad, std_with_pad, mean_masked, std_masked: (F, C) BatchNorm's statistics.
        drift_with_pad, drift_masked, drift_layer_norm: (F,) max |change| of the real tokens'
            output against the same tokens with no padding, for BatchNorm with the pads counted,
            masked BatchNorm and LayerNorm.

    With a single real token, BatchNorm without pads and masked BatchNorm have one value per
    feature and cannot be computed: their statistics and drifts are NaN (and BatchNorm with the
    pads counted is computed from one pad on).
    """

    fraction: np.ndarray
    pads: np.ndarray
    mean_with_pad: np.ndarray
    std_with_pad: np.ndarray
    mean_masked: np.ndarray
    std_masked: np.ndarray
    drift_with_pad: np.ndarray
    drift_masked: np.ndarray
    drift_layer_norm: np.ndarray


def sigma_path(sweep: PaddingSweep, feature: int, pad_value: float) -> str:
    """What BatchNorm's σ (pads counted) does as pads are added, for ``feature``, with the reason.

    With a share f of pads at value p beside real values of mean μ and deviation σ,
    σ²(f) = (1 − f)·σ² + f(1 − f)·(μ − p)²: it rises at first exactly when (μ − p)² > σ², that is
    when the pad value lies more than one σ from the real values' mean, and falls once the pads
    dominate."""
    std, real_mean, real_std = (sweep.std_with_pad[:, feature], sweep.mean_masked[0, feature],
                                sweep.std_masked[0, feature])
    shown = std[np.isfinite(std)]
    if shown.size < 2 or not (np.isfinite(real_mean) and np.isfinite(real_std)):
        return ""
    distance = abs(float(real_mean) - pad_value)
    where = (f"the pad value {pad_value:g} lies {distance:.3g} from the real values' mean "
             f"{float(real_mean):.3g}, ")
    if distance > float(real_std):
        # σ²(f) peaks at f* = (1 − σ²/(μ − p)²)/2, by a factor (1 + f*·…): a pad value just over
        # one σ away widens σ only a little and only over the first few pads
        var, gap = float(real_std) ** 2, distance**2
        peak = (1 - var / gap) / 2
        rise = math.sqrt(((1 - peak) * var + peak * (1 - peak) * gap) / var) - 1
        if shown.max() > shown[0] * (1 + 1e-3):
            return (f"Feature {feature}: {where}more than their σ = {float(real_std):.3g}, so σ "
                    f"with the pads first widens (from {shown[0]:.3g} to {shown.max():.3g}), "
                    f"then falls to {shown[-1]:.3g} as the pads take over.")
        wide = 1 - var / gap  # σ²(f) is above σ² only while the pads' share f is below this
        k = int(np.flatnonzero(sweep.pads > 0)[0])
        reals = round(float(sweep.pads[k]) * (1 - float(sweep.fraction[k]))
                      / float(sweep.fraction[k]))
        if 1 / (reals + 1) >= wide:  # one pad already takes a larger share
            return (f"Feature {feature}: {where}only a little more than their σ = "
                    f"{float(real_std):.3g}: σ² with the pads would rise only while they are "
                    f"under {wide:.1%} of the values, less than one pad beside these {reals} "
                    f"real tokens, so every pad narrows it: from {shown[0]:.3g} to "
                    f"{shown[-1]:.3g}.")
        return (f"Feature {feature}: {where}only a little more than their σ = "
                f"{float(real_std):.3g}, so σ with the pads widens by at most {rise:.2%}, until "
                f"the pads are {peak:.1%} of the values, and then falls: from {shown[0]:.3g} to "
                f"{shown[-1]:.3g} here.")
    return (f"Feature {feature}: {where}within their σ = {float(real_std):.3g}, so σ with the "
            f"pads only shrinks, from {shown[0]:.3g} to {shown[-1]:.3g}.")


def padding_sweep(
    batch: Batch,
    pad_value: float = 0.0,
    fractions: Sequence[float] = SWEEP_FRACTIONS,
    device: str = "cpu",
    dtype: str = "float32",
) -> PaddingSweep:
    """Take the batch's R real tokens and add P pad tokens (all ``pad_value``), with
    P = round(f·R/(1 − f)) for each padded share f in ``fractions`` (each in [0, 1)).

    BatchNorm pools all R + P positions of a feature, so its μ slides from the real tokens' mean
    toward the pad value, μ = (R·μ_real + P·pad)/(R + P), and σ widens at first if the pad value
    lies more than one σ from the real values' mean, then shrinks as the pads dominate
    (:func:`sigma_path`); masked BatchNorm and LayerNorm leave every real token's output where
    it was.
    """
    _check(batch)
    fractions = np.asarray(fractions, dtype=np.float64)
    if fractions.size == 0 or fractions.min() < 0 or fractions.max() >= 1:
        raise ValueError("padded fractions must lie in [0, 1)")
    real = to_tensor(batch.values[batch.mask], device, dtype)  # (R, C)
    r, c = real.shape
    # Small batches round several shares to the same pad count; each count is tried once.
    pads = np.unique(np.round(fractions * r / (1.0 - fractions)).astype(np.int64))
    stats: dict[str, list[np.ndarray]] = {k: [] for k in ("m", "s", "mm", "sm")}
    drift: dict[str, list[float]] = {k: [] for k in ("bn", "masked", "ln")}
    # Without padding, masked and unmasked BatchNorm agree: both pool the real tokens alone.
    alone = batch_norm(real, None, None, training=True).output if r >= MIN_REAL_TOKENS else None
    reference = {"bn": alone, "masked": alone, "ln": layer_norm(real, c).output}
    for p in pads.tolist():
        # One long sequence (1, R + P, C): BatchNorm pools every position however it is laid out.
        x = torch.cat([real, real.new_full((p, c), pad_value)])[None]
        mask = torch.arange(r + p, device=x.device)[None] < r
        with_pad = (batch_norm(x, None, None, training=True, channel_dim=-1)
                    if r + p >= MIN_REAL_TOKENS else None)
        masked = (batch_norm(x, None, None, training=True, channel_dim=-1, mask=mask)
                  if r >= MIN_REAL_TOKENS else None)
        ln = layer_norm(x, c)
        for (mean_key, std_key), result in ((("m", "s"), with_pad), (("mm", "sm"), masked)):
            mean, std = _stats(result, c)
            stats[mean_key].append(mean)
            stats[std_key].append(std)
        for key, result in (("bn", with_pad), ("masked", masked), ("ln", ln)):
            if result is None or reference[key] is None:
                drift[key].append(np.nan)
                continue
            change = result.output[0, :r].double() - reference[key].double()
            drift[key].append(float(change.abs().max()))
    return PaddingSweep(
        fraction=pads / (r + pads), pads=pads,
        mean_with_pad=np.stack(stats["m"]), std_with_pad=np.stack(stats["s"]),
        mean_masked=np.stack(stats["mm"]), std_masked=np.stack(stats["sm"]),
        drift_with_pad=np.array(drift["bn"]), drift_masked=np.array(drift["masked"]),
        drift_layer_norm=np.array(drift["ln"]),
    )


def pad_token_steps(
    batch: Batch,
    eps: float = 1e-5,
    gamma: float = 1.0,
    beta: float = 0.0,
    device: str = "cpu",
    dtype: str = "float32",
) -> pd.DataFrame | None:
    """LayerNorm step by step on the first pad token (x, μ, σ², √(σ²+ε), x̂, γ, β, y per
    feature), or ``None`` when the batch has no padding.

    A pad token is a constant row, so μ is the pad value and σ² = 0: x̂ = 0/√ε = 0 and y = β for
    any ε > 0 and any γ. With ε = 0 it is 0/0, NaN — the value the formula really gives.
    """
    _check(batch)
    if batch.mask.all():
        return None
    spec = NormSpec(norm=NormKind.LAYER, eps=eps, gamma=gamma, beta=beta)
    x = to_tensor(batch.values, device, dtype)
    with torch.no_grad():
        result = normalize(x, Layout.NLC, spec)
    n, t = np.argwhere(~batch.mask)[0]
    ids = group_ids(tuple(x.shape), Layout.NLC, spec)
    return step_by_step(x, result, spec, ids, int(ids[n, t, 0]), Layout.NLC, mask=batch.mask)


def padding_snippet(batch: Batch, eps: float = 1e-5, gamma: float = 1.0, beta: float = 0.0,
                    recipe: PaddedRecipe | None = None) -> str:
    """Self-contained PyTorch code for this lesson on ``batch``: BatchNorm with the pads counted
    (``bn_with_pads``), masked BatchNorm (``bn_masked``), each feature's mean without and with
    the pads (``mean_real``, ``mean_all``) and LayerNorm with ``gamma``, ``beta`` and ``eps``
    (``ln``), whose pad rows are β.

    The batch is rebuilt with :func:`lnviz.data.padded_batch` from ``recipe`` when it was
    generated, else typed out (float32, like the presets). Where torch's BatchNorm refuses the
    batch (one value per feature), a comment says so at the line that raises.
    """
    if recipe is None:
        keep = ["typed"]
        values = {"x": Code(f"torch.tensor({batch.values.tolist()})"),
                  "mask": Code(f"torch.tensor({batch.mask.tolist()})")}
    else:
        keep = ["generated"]
        values = {"generated": Code(
            f"padded_batch({recipe.batch_size}, {recipe.d_model}, lengths={recipe.lengths}, "
            f"max_len={recipe.max_len}, pad_value={float(recipe.pad_value)!r}, "
            f"seed={recipe.seed})")}
    keep += (["one-position"] if batch.mask.size < MIN_REAL_TOKENS else []) + (
        ["one-real"] if batch.mask.sum() < MIN_REAL_TOKENS else [])
    # a pad row is one value repeated: σ² = 0, so x̂ = 0/√ε = 0 and the output is β; at ε = 0, 0/0
    pad_row, pad_out = ("β", "β") if eps > 0 else ("NaN at eps=0 (0/0)", "nan")
    return snippet("padding", keep=keep, eps=eps, gamma=Code(f"torch.full((d,), {gamma!r})"),
                   beta=Code(f"torch.full((d,), {beta!r})"), **values,
                   notes={"pad_row": pad_row, "pad_out": pad_out})
