"""Padding and sequences: what pad tokens do to BatchNorm, and why LayerNorm does not notice.

A batch of sentences of unequal length is padded to a common length with pad tokens (seed 002:
a zero vector). BatchNorm pools every position of a feature, so the pads enter its μ and σ:

    μ_c = (1/n) Σ_{all positions} x_c          (pads included)
    μ_c = (1/n_real) Σ_{real positions} x_c    (masked BatchNorm: pads left out)

With seed 002's first feature, 1…7 and one pad 0, that is μ = 3.5, σ = 2.29 against μ = 4,
σ = 2 without the pad. :func:`feature_stats` computes both, :func:`padding_outputs` the three
outputs (BatchNorm with the pads, masked BatchNorm, LayerNorm), and :func:`padding_sweep` how far
the statistics and the real tokens' outputs drift as the padded share of the batch grows.

LayerNorm takes μ and σ over one token's own features, so a real token's output cannot depend on
how many pads sit beside it. The pad token itself is a constant row: μ = pad value, σ² = 0,
x̂ = 0·(1/√ε) = 0, so its output is exactly β — finite only because ε > 0
(:func:`pad_token_steps`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lnviz.devices import to_tensor
from lnviz.explore import Batch, NormSpec, group_ids, normalize, step_by_step
from lnviz.norms import batch_norm, layer_norm

__all__ = [
    "SWEEP_FRACTIONS",
    "FeatureStats",
    "PaddingSweep",
    "feature_stats",
    "pad_token_steps",
    "padding_outputs",
    "padding_sweep",
]

#: Padded shares of the batch tried by :func:`padding_sweep`: none up to nine pads in ten.
SWEEP_FRACTIONS = tuple(np.round(np.linspace(0.0, 0.9, 19), 2).tolist())


def _check(batch: Batch) -> None:
    if batch.layout != "NLC" or batch.mask is None:
        raise ValueError("a padded batch of token sequences (batch, sequence, features) with a "
                         "mask is needed")
    if not batch.mask.any():
        raise ValueError("every position of this batch is padding; there is nothing to "
                         "normalize")


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().cpu().numpy()


@dataclass(frozen=True)
class FeatureStats:
    """BatchNorm's per-feature μ and σ (the biased, normalizing one), with and without pads.

    Attributes:
        mean_with_pad, std_with_pad: (C,) over every position, pads included.
        mean_masked, std_masked: (C,) over the real tokens only.
        pad_fraction: the share of positions that are padding.
    """

    mean_with_pad: np.ndarray
    std_with_pad: np.ndarray
    mean_masked: np.ndarray
    std_masked: np.ndarray
    pad_fraction: float

    def table(self) -> pd.DataFrame:
        """One row per feature, the four numbers side by side."""
        return pd.DataFrame({
            "feature": np.arange(self.mean_masked.size),
            "μ with pads": self.mean_with_pad,
            "μ real tokens only": self.mean_masked,
            "σ with pads": self.std_with_pad,
            "σ real tokens only": self.std_masked,
        })


def feature_stats(batch: Batch, device: str = "cpu", dtype: str = "float32") -> FeatureStats:
    """BatchNorm's statistics for a padded (N, L, C) batch, with and without the pads, taken by
    :func:`lnviz.batch_norm` itself (``channel_dim=-1``; ``mask`` leaves the pads out)."""
    _check(batch)
    x = to_tensor(batch.values, device, dtype)
    mask = torch.as_tensor(batch.mask, device=x.device)
    with_pad = batch_norm(x, None, None, training=True, channel_dim=-1)
    masked = batch_norm(x, None, None, training=True, channel_dim=-1, mask=mask)
    return FeatureStats(
        mean_with_pad=_numpy(with_pad.mean).ravel(),
        std_with_pad=np.sqrt(_numpy(with_pad.var).ravel()),
        mean_masked=_numpy(masked.mean).ravel(),
        std_masked=np.sqrt(_numpy(masked.var).ravel()),
        pad_fraction=float(1.0 - batch.mask.mean()),
    )


def padding_outputs(
    batch: Batch, device: str = "cpu", dtype: str = "float32"
) -> dict[str, np.ndarray]:
    """The batch and its three normalizations (γ = 1, β = 0, ε = 1e-5), each (N, L, C):
    BatchNorm with the pads counted, masked BatchNorm, and LayerNorm per token."""
    _check(batch)
    x = to_tensor(batch.values, device, dtype)
    mask = torch.as_tensor(batch.mask, device=x.device)
    specs = {
        "BatchNorm, pads counted": NormSpec(norm="BatchNorm", use_mask=False),
        "BatchNorm, masked": NormSpec(norm="BatchNorm", use_mask=True),
        "LayerNorm": NormSpec(norm="LayerNorm"),
    }
    outputs = {"input x": _numpy(x)}
    outputs.update({name: _numpy(normalize(x, "NLC", spec, mask).output)
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
    toward the pad value, μ = (R·μ_real + P·pad)/(R + P), and σ first widens, then shrinks as the
    pads dominate; masked BatchNorm and LayerNorm leave every real token's output where it was.
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
    alone = batch_norm(real, None, None, training=True).output
    reference = {"bn": alone, "masked": alone, "ln": layer_norm(real, c).output}
    for p in pads.tolist():
        # One long sequence (1, R + P, C): BatchNorm pools every position however it is laid out.
        x = torch.cat([real, real.new_full((p, c), pad_value)])[None]
        mask = torch.arange(r + p, device=x.device)[None] < r
        with_pad = batch_norm(x, None, None, training=True, channel_dim=-1)
        masked = batch_norm(x, None, None, training=True, channel_dim=-1, mask=mask)
        ln = layer_norm(x, c)
        stats["m"].append(_numpy(with_pad.mean).ravel())
        stats["s"].append(np.sqrt(_numpy(with_pad.var).ravel()))
        stats["mm"].append(_numpy(masked.mean).ravel())
        stats["sm"].append(np.sqrt(_numpy(masked.var).ravel()))
        for key, result in (("bn", with_pad), ("masked", masked), ("ln", ln)):
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
    spec = NormSpec(norm="LayerNorm", eps=eps, gamma=gamma, beta=beta)
    x = to_tensor(batch.values, device, dtype)
    with torch.no_grad():
        result = normalize(x, "NLC", spec)
    n, t = np.argwhere(~batch.mask)[0]
    ids = group_ids(tuple(x.shape), "NLC", spec)
    return step_by_step(x, result, spec, ids, int(ids[n, t, 0]), "NLC", mask=batch.mask)
