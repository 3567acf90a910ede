r"""Backpropagation through LayerNorm and BatchNorm, their Jacobians, and their invariances.

Both norms compute y = γ·x̂ + β with x̂ = (x − μ)·rstd; they differ only in which values share μ
and rstd — a sample's features (LayerNorm) or a feature's samples (BatchNorm in training mode).
The backward pass follows the same split. Writing ĝ = γ ⊙ ∂L/∂y, and sums Σ over the H values that
share one μ and rstd:

.. math::
    \frac{\partial L}{\partial x} = \frac{\mathrm{rstd}}{H}
        \Big(H\,\hat g - \sum \hat g - \hat x \sum \hat g\,\hat x\Big),\qquad
    \frac{\partial L}{\partial γ} = \sum_{n} \frac{\partial L}{\partial y}\,\hat x,\qquad
    \frac{\partial L}{\partial β} = \sum_{n} \frac{\partial L}{\partial y}

so a gradient arriving at one sample's output stays in that sample under LayerNorm but reaches
every sample of the batch under BatchNorm. The two subtracted terms are the invariances at work:
adding a constant to (or, with ε = 0, scaling) a group does not move y, so ∂L/∂x has no component
along the ones vector or along x̂ within each group.

Everything here works on a ``(batch, features)`` table, runs the lnviz norms under
``torch.autograd`` through :func:`lnviz.batch.table_norm` and can replay the same computation
through ``torch.nn.functional`` (:func:`lnviz.batch.torch_table_norm`) for the check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lnviz.batch import NORM_TABLE, norms_where, table_norm, torch_table_norm
from lnviz.data import random_batch
from lnviz.lessons.common import Answer, short
from lnviz.limits import GRADIENTS_MAX_JACOBIAN
from lnviz.snippets import snippet
from lnviz.terms import NormKind

__all__ = [
    "GRAD_NORMS",
    "ONE_HOT",
    "PROBES",
    "REACH_OPTIONS",
    "ROUNDING",
    "UPSTREAM",
    "VERDICTS",
    "GradientReport",
    "Gradients",
    "WeightScale",
    "cross_sample_share",
    "gradient_input",
    "gradient_report",
    "gradients_snippet",
    "gradients_try_this",
    "invariance_caption",
    "invariance_probes",
    "jacobian_caption",
    "norm_forward",
    "norm_gradients",
    "norm_jacobian",
    "pair_note",
    "probe_inputs",
    "probed_variances",
    "reach_answer",
    "upstream_gradient",
    "verdict",
    "weight_scale_gradient",
    "weight_scale_text",
]

#: The two norms that differ only in which values share μ and rstd on a table: LayerNorm (a
#: sample's features) first, BatchNorm (a feature's samples) as its foil.
GRAD_NORMS = tuple(sorted(norms_where(lambda norm: norm.table and norm.centred),
                          key=lambda name: not NORM_TABLE[name].trailing))
#: Upstream gradients ∂L/∂y a learner can send back: one output cell, every cell, random.
UPSTREAM = ("one-hot", "ones", "random")
#: The loss on one output cell: the one whose gradient shows which inputs each norm ties together.
ONE_HOT = UPSTREAM[0]
#: A change of the output no larger than this counts as float64 rounding: the probes' outputs
#: are normalized (of order one), so rounding leaves ~1e-15 and anything real is far above.
ROUNDING = 1e-12
#: Why a probe moved the output or not, found by repeating it with ε = 0: the invariances are
#: exact there, so a change that vanishes at ε = 0 is ε's doing.
VERDICTS = ("unchanged", "ε's doing", "not invariant")


#: The page's "Before you look" question: where BatchNorm's ∂L/∂x is nonzero.
REACH_OPTIONS = ("nowhere", "one feature's column", "one sample's row", "every cell",
                 "scattered cells")


def _pair_reach(kind: str, features: int) -> str:
    """Where BatchNorm's ∂L/∂x is nonzero with two samples and ε > 0 (exactly, however small):
    in the features whose upstream gradient differs between the samples — none for "ones",
    the one-hot's column, every feature for "random" (two draws differ)."""
    if kind == "ones":
        return REACH_OPTIONS[0]
    if kind == ONE_HOT and features > 1:
        return REACH_OPTIONS[1]
    return REACH_OPTIONS[3]


def reach_answer(grad_input: np.ndarray, kind: str, cell: tuple[int, int] = (0, 0), *,
                 x: np.ndarray | None = None, eps: float = 1e-5) -> Answer:
    """Which of :data:`REACH_OPTIONS` BatchNorm's ∂L/∂x ``grad_input`` (N, C) makes right under
    the upstream gradient ``kind`` (one of :data:`UPSTREAM`; ``cell`` for "one-hot"), and why:
    which inputs went into the statistics of the outputs the loss looks at. With two samples,
    the input ``x`` and ``eps`` say how close to ±1 BatchNorm's x̂ is."""
    grad = np.abs(np.asarray(grad_input, dtype=np.float64))
    n_rows, n_cols = grad.shape
    accepted: tuple[str, ...] = ()
    largest = float(grad.max())
    reached = grad > ROUNDING * max(1.0, largest)
    rows, cols = np.flatnonzero(reached.any(axis=1)), np.flatnonzero(reached.any(axis=0))
    if not reached.any():
        option = REACH_OPTIONS[0]
    elif reached.all():
        option = REACH_OPTIONS[3]
    elif cols.size == 1 and rows.size == n_rows:
        option = REACH_OPTIONS[1]
    elif rows.size == 1 and cols.size == n_cols:
        option = REACH_OPTIONS[2]
    else:
        option = REACH_OPTIONS[4]
    statistics = (f"BatchNorm normalizes each feature with its μ and σ over all {n_rows} "
                  "samples")
    if n_rows == 2:
        reason = ("with two samples, BatchNorm's x̂ of each feature is (x₁ − x₂)/√((x₁ − x₂)² "
                  "+ 4ε) and its negative: ±1 whatever x is while ε ≪ (x₁ − x₂)². ")
        # the gradient is ε's leftover, and "nowhere" right up to ε, where it is tiny or every
        # |x̂| is within 1% of 1 (its factor 1 − x̂² under 2%), whatever the upstream's scale
        hardly = largest < 0.01
        if x is not None:
            d = np.abs(np.diff(np.asarray(x, dtype=np.float64), axis=0))
            sizes = d / np.sqrt(d * d + 4 * eps)
            low, high = f"{sizes.min():.3g}", f"{sizes.max():.3g}"
            same = "rounds to" if eps > 0 and low == "1" else "is"
            reason += ((f"Here |x̂| {same} {low} in every feature" if low == high else
                        f"Here |x̂| runs from {low} to {high}")
                       + (": the pairs are far apart next to ε. " if sizes.min() > 0.99 else
                          f": at ε = {eps:g}, x̂ depends on x again. "))
            hardly = hardly or bool(sizes.min() > 0.99)
        if eps == 0:
            reason += "At ε = 0 x̂ is exactly ±1, so ∂L/∂x is 0 everywhere."
        else:
            # exactly: x̂ = ±a with a < 1, so ∂L/∂x = ±(1 − a²)(g₁ − g₂)/(2√(σ² + ε)) in each
            # feature, nonzero wherever the upstream gradient g differs between the two samples
            # however small (below 1e-12 at ε = 1e-12): read from g's kind, not the numbers
            option = _pair_reach(kind, n_cols)
            reason += ("With ε > 0, |x̂| falls short of 1, however slightly, and ∂L/∂x = "
                       "±(1 − x̂²)(g₁ − g₂)/(2√(σ² + ε)) in each feature: nonzero wherever the "
                       "upstream gradient g differs between the two samples. ")
        if eps > 0 and option == REACH_OPTIONS[0]:
            reason += "Here g is the same in both samples (L = Σ y): ∂L/∂x is 0 everywhere."
        elif eps > 0:
            if hardly and option != REACH_OPTIONS[0]:
                accepted = (REACH_OPTIONS[0],)
            reason += (f"The largest |∂L/∂x| is {largest:.2g}, all of it ε's doing (it is 0 at "
                       "ε = 0)" + (": the loss hardly depends on x" if hardly else "")
                       + (f", so “{REACH_OPTIONS[0]}” is right up to ε too." if accepted
                          else "."))
    elif option == REACH_OPTIONS[0] and kind == "ones":
        reason = (f"{statistics}, so each feature's x̂ sums to 0 over the batch whatever x is; "
                  "L = Σ y weighs every value alike, so L does not change with x at all "
                  f"(largest |∂L/∂x|: {largest:.1g}).")
    elif option == REACH_OPTIONS[1] and kind == "one-hot":
        n, c = cell
        off = float(np.delete(grad, c, axis=1).max()) if n_cols > 1 else 0.0
        reason = (f"the loss looks at y[{n}, {c}] alone, which BatchNorm computed with feature "
                  f"{c}'s μ and σ; those pool all {n_rows} samples, so ∂L/∂x reaches all "
                  f"{n_rows} cells of column {c} (largest |∂L/∂x| off it: {off:.1g}). A loss "
                  "on one sample trains on the whole batch. LayerNorm's "
                  f"stays in row {n}: its μ and σ pool sample {n}'s own {n_cols} features.")
    else:
        reason = (f"{statistics}; with this upstream gradient ∂L/∂x is nonzero in "
                  f"{int(reached.sum())} of the {grad.size} cells ({rows.size} rows, "
                  f"{cols.size} columns), the largest {largest:.3g}.")
    return Answer(option, reason[0].upper() + reason[1:], accepted)


def norm_forward(
    x: torch.Tensor,
    norm: str,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    implementation: str = "lnviz",
) -> torch.Tensor:
    """y for a ``(batch, features)`` table: LayerNorm over the features of each sample, or
    BatchNorm in training mode over the samples of each feature.

    ``implementation="torch"`` runs ``torch.nn.functional`` instead of lnviz, for comparison.
    """
    if implementation not in ("lnviz", "torch"):
        raise ValueError(f"implementation must be 'lnviz' or 'torch', got {implementation!r}")
    if norm not in GRAD_NORMS:
        raise ValueError(f"norm must be one of {list(GRAD_NORMS)}, got {norm!r}")
    if implementation == "lnviz":
        return table_norm(x, norm, weight, bias, eps).output
    return torch_table_norm(x, norm, weight, bias, eps)


def upstream_gradient(
    shape: tuple[int, int],
    kind: str,
    *,
    cell: tuple[int, int] = (0, 0),
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """∂L/∂y, the gradient arriving from the layers above.

    ``"one-hot"``: 1 at ``cell`` (L = y[cell]); ``"ones"``: 1 everywhere (L = Σ y);
    ``"random"``: standard normal draws from ``seed``.
    """
    if kind == "one-hot":
        row, col = cell
        if not (0 <= row < shape[0] and 0 <= col < shape[1]):
            raise ValueError(f"cell {tuple(cell)} is outside the {shape[0]} × {shape[1]} output")
        grad = torch.zeros(shape, dtype=dtype)
        grad[row, col] = 1.0
        return grad
    if kind == "ones":
        return torch.ones(shape, dtype=dtype)
    if kind == "random":
        generator = torch.Generator().manual_seed(seed)
        return torch.randn(shape, generator=generator, dtype=dtype)
    raise ValueError(f"upstream gradient must be one of {list(UPSTREAM)}, got {kind!r}")


@dataclass(frozen=True, eq=False)
class Gradients:
    """One backward pass: the output and the gradients of L = Σ (∂L/∂y) ⊙ y.

    Attributes:
        output: y, ``(batch, features)``.
        grad_input: ∂L/∂x, ``(batch, features)``.
        grad_weight: ∂L/∂γ, ``(features,)``.
        grad_bias: ∂L/∂β, ``(features,)``.
    """

    output: np.ndarray
    grad_input: np.ndarray
    grad_weight: np.ndarray
    grad_bias: np.ndarray


def norm_gradients(
    x: torch.Tensor,
    norm: str,
    grad_output: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    implementation: str = "lnviz",
) -> Gradients:
    """Backpropagate ``grad_output`` (∂L/∂y) through the norm with autograd.

    γ and β default to 1 and 0 (a freshly initialised layer) and get gradients either way.
    """
    features = x.shape[-1]
    x = x.detach().clone().requires_grad_(True)
    weight = (torch.ones(features, dtype=x.dtype) if weight is None else weight.detach().clone())
    bias = torch.zeros(features, dtype=x.dtype) if bias is None else bias.detach().clone()
    weight.requires_grad_(True)
    bias.requires_grad_(True)
    y = norm_forward(x, norm, weight, bias, eps, implementation=implementation)
    # L = Σ g ⊙ y has ∂L/∂y = g exactly, so one backward pass gives every gradient.
    (grad_output.to(y.dtype) * y).sum().backward()
    return Gradients(
        output=y.detach().numpy(),
        grad_input=x.grad.numpy(),
        grad_weight=weight.grad.numpy(),
        grad_bias=bias.grad.numpy(),
    )


@dataclass(frozen=True, eq=False)
class GradientReport:
    """The same backward pass through both norms, and how closely lnviz matches torch.

    Attributes:
        by_norm: :class:`Gradients` for each of :data:`GRAD_NORMS`, from lnviz.
        max_difference: the largest |lnviz − torch| over every output and gradient compared.
        compared: the norms torch agreed to run (it refuses BatchNorm in training with ε = 0).
    """

    by_norm: dict[str, Gradients]
    max_difference: float
    compared: tuple[str, ...]


def gradient_report(x: torch.Tensor, grad_output: torch.Tensor, eps: float = 1e-5
                    ) -> GradientReport:
    """Backpropagate ``grad_output`` through LayerNorm and BatchNorm, with lnviz and with
    ``torch.nn.functional``, and keep lnviz's gradients with the largest disagreement."""
    by_norm, difference, compared = {}, 0.0, []
    for norm in GRAD_NORMS:
        by_norm[norm] = ours = norm_gradients(x, norm, grad_output, eps=eps)
        if norm == NormKind.BATCH and eps <= 0:
            continue  # torch refuses it; lnviz shows the true 0/0 where a feature is constant
        theirs = norm_gradients(x, norm, grad_output, eps=eps, implementation="torch")
        for field in ("output", "grad_input", "grad_weight", "grad_bias"):
            gap = np.abs(getattr(ours, field) - getattr(theirs, field))
            difference = max(difference, float(np.nanmax(gap)) if gap.size else 0.0)
        compared.append(norm)
    return GradientReport(by_norm, difference, tuple(compared))


def norm_jacobian(x: torch.Tensor, norm: str, eps: float = 1e-5) -> np.ndarray:
    """∂y/∂x as a ``(batch·features) × (batch·features)`` matrix, with γ = 1 and β = 0.

    Entry [n·C + c, m·C + d] is ∂y[n, c]/∂x[m, d]. LayerNorm's is block-diagonal (one C × C
    block per sample); BatchNorm's links every pair of samples n, m, one feature at a time
    (only entries with c = d are non-zero).
    """
    size = x.shape[0] * x.shape[1]
    if size > GRADIENTS_MAX_JACOBIAN:
        raise ValueError(f"the Jacobian is drawn for batch × features ≤ {GRADIENTS_MAX_JACOBIAN}; "
                         f"{x.shape[0]} × {x.shape[1]} = {size} is too many")
    # One backward pass per output; vectorize=True would be faster for large sizes but pulls in
    # torch's symbolic-shape machinery (seconds of imports) on first use.
    jac = torch.autograd.functional.jacobian(lambda t: norm_forward(t, norm, eps=eps), x.detach())
    return jac.reshape(size, size).numpy()


def cross_sample_share(jacobian: np.ndarray, batch: int) -> float:
    """The share of Σ|J| that lies outside the per-sample diagonal blocks: how much of each
    output is moved by *other* samples' inputs (0 when samples are independent)."""
    per_sample = jacobian.shape[0] // batch
    sample = np.arange(jacobian.shape[0]) // per_sample
    magnitude = np.abs(jacobian)
    total = magnitude.sum()
    if total == 0:
        return 0.0
    return float(magnitude[sample[:, None] != sample[None, :]].sum() / total)


def jacobian_caption(jacobians: dict[str, np.ndarray], batch: int) -> str:
    """Each Jacobian's :func:`cross_sample_share` and its structure (keys start with the norm's
    name), or "0 up to rounding" where every entry is — a share of rounding noise means
    nothing."""
    structure = {NormKind.LAYER: "block-diagonal: samples do not touch",
                 NormKind.BATCH: "ties each feature across the batch (in evaluation mode, with "
                              "frozen running statistics, it would be diagonal)"}
    parts = []
    for name, jac in jacobians.items():
        if np.nanmax(np.abs(jac), initial=0.0) <= ROUNDING:
            parts.append(f"{name}: every entry is 0 up to rounding")
            continue
        norm = next((n for n in structure if name.startswith(n)), None)
        parts.append(f"{name}: {cross_sample_share(jac, batch):.0%} of Σ|J| outside the "
                     "sample blocks" + (f" — {structure[norm]}" if norm else ""))
    return " · ".join(parts) + "."


#: The probes, in the order the page lists them.
PROBES = (
    "scale one sample",
    "shift one sample",
    "scale one feature",
    "shift one feature",
    "scale all of W",
    "scale one row of W",
)


def verdict(delta: float, delta_at_zero: float) -> str:
    """One of :data:`VERDICTS` for a probe that moved the output by ``delta`` at the chosen ε
    and by ``delta_at_zero`` at ε = 0."""
    if not delta_at_zero <= ROUNDING:  # NaN (a 0/0 at ε = 0) counts as a change
        return VERDICTS[2]
    return VERDICTS[0] if delta <= ROUNDING else VERDICTS[1]


def invariance_probes(
    x: torch.Tensor,
    weight: torch.Tensor,
    *,
    factor: float = 2.0,
    shift: float = 3.0,
    sample: int = 0,
    feature: int = 0,
    eps: float = 1e-5,
) -> pd.DataFrame:
    """max |Δy| for LayerNorm and BatchNorm under each of :data:`PROBES`, with y = Norm(x Wᵀ),
    at ``eps`` and at ε = 0, and the :func:`verdict` that the two give.

    The norm's input is h = x Wᵀ, ``(batch, features)``. The first four probes change h: one
    sample (row) or one feature (column) multiplied by ``factor`` or shifted by ``shift``. The
    last two change the linear layer: every weight multiplied by ``factor`` (h scales as a
    whole), or only row ``feature`` of W (that feature of h scales). A norm is invariant to a
    change when it normalizes it away: LayerNorm to a shift or a rescaling of a whole sample,
    BatchNorm to a shift or a rescaling of a whole feature, both to scaling everything.
    Scalings are undone only up to ε, which is measured against σ², not σ² · factor²; with
    ε = 0 they are undone exactly — so repeating each probe at ε = 0 tells ε's share.

    Columns: ``probe``; per norm, ``<norm>`` (max |Δy| at ``eps``), ``<norm>, ε = 0`` and
    ``<norm>: verdict``.
    """
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"need x (batch, inputs) and W (features, inputs) with the same number "
                         f"of inputs, got {list(x.shape)} and {list(weight.shape)}")
    batch, features = x.shape[0], weight.shape[0]
    if not (0 <= sample < batch and 0 <= feature < features):
        raise ValueError(f"sample must be in 0…{batch - 1} and feature in 0…{features - 1}")
    h = x @ weight.T

    def changed(index: tuple, scale: float = 1.0, offset: float = 0.0) -> torch.Tensor:
        out = h.clone()
        out[index] = out[index] * scale + offset
        return out

    row_w = weight.clone()
    row_w[feature] = row_w[feature] * factor
    inputs = {
        "scale one sample": changed((sample, slice(None)), scale=factor),
        "shift one sample": changed((sample, slice(None)), offset=shift),
        "scale one feature": changed((slice(None), feature), scale=factor),
        "shift one feature": changed((slice(None), feature), offset=shift),
        "scale all of W": x @ (factor * weight).T,
        "scale one row of W": x @ row_w.T,
    }

    def max_change(norm: str, name: str, at: float) -> float:
        moved = norm_forward(inputs[name], norm, eps=at) - norm_forward(h, norm, eps=at)
        return float(moved.abs().max())

    rows = []
    with torch.no_grad():
        for name in PROBES:
            row: dict = {"probe": name}
            for norm in GRAD_NORMS:
                row[norm] = max_change(norm, name, eps)
                row[f"{norm}, ε = 0"] = max_change(norm, name, 0.0)
                row[f"{norm}: verdict"] = verdict(row[norm], row[f"{norm}, ε = 0"])
            rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class WeightScale:
    """How the gradient of a loss on y = LayerNorm(x Wᵀ) with respect to W changes when W is
    multiplied by ``factor``: ``grad`` is ‖∂L/∂W‖ at W, ``scaled_grad`` at factor·W (the same
    upstream gradient), at ε = 0 so that the output does not change at all."""

    factor: float
    grad: float
    scaled_grad: float

    @property
    def ratio(self) -> float:
        """‖∂L/∂(factor·W)‖ / ‖∂L/∂W‖: 1/factor, since the output does not depend on W's scale."""
        return self.scaled_grad / self.grad


def weight_scale_gradient(x: torch.Tensor, weight: torch.Tensor, factor: float,
                          seed: int = 0) -> WeightScale:
    """:class:`WeightScale` for LayerNorm after the linear layer ``weight``, with a fixed
    random upstream gradient: the loss is L = Σ g·y."""
    g = torch.randn(x.shape[0], weight.shape[0], generator=torch.Generator().manual_seed(seed),
                    dtype=x.dtype)

    def grad_norm(w: torch.Tensor) -> float:
        w = w.detach().clone().requires_grad_(True)
        (norm_forward(x @ w.T, NormKind.LAYER, eps=0.0) * g).sum().backward()
        return float(w.grad.norm())

    return WeightScale(factor, grad_norm(weight), grad_norm(factor * weight))


def weight_scale_text(scale: WeightScale, features: int) -> str:
    """What multiplying W by the factor did to ‖∂L/∂W‖, in the scale's numbers: 1/factor where
    the gradient is real. With two features LayerNorm's output is ±(1, −1) whatever W is, so the
    gradient is 0 at ε = 0 and what autograd returns is rounding (about 1e-15), whose ratio
    is noise: the sentence says so instead of quoting it."""
    if features == 2 or max(scale.grad, scale.scaled_grad) < 1e-12:
        return (f"Here, with C = {features}, LayerNorm's output does not depend on W at all "
                + ("(with two features it is ±(1, −1) whatever W is), "
                   if features == 2 else "")
                + f"so ‖∂L/∂W‖ is 0 at ε = 0: what autograd returns, {short(scale.grad)} and "
                f"{short(scale.scaled_grad)}, is float64 rounding, and their ratio means "
                "nothing. Raise C to 3 or more to see the gradient follow 1/factor.")
    return (f"Here, multiplying W by {scale.factor:g} multiplies ‖∂L/∂W‖ by "
            f"{short(scale.ratio)} (= 1/{scale.factor:g}; {short(scale.grad)} → "
            f"{short(scale.scaled_grad)}, at ε = 0).")


def probed_variances(x: torch.Tensor, weight: torch.Tensor, sample: int = 0, feature: int = 0
                     ) -> dict[str, float]:
    """σ² of the group each norm's probes rescale, in h = x Wᵀ: the probed sample's features
    (LayerNorm) and the probed feature's samples (BatchNorm). ε is small beside σ² only when
    this is large; ε's share of a scaling probe grows as ε/σ² does."""
    h = x @ weight.T
    return {NormKind.LAYER: float(h[sample].var(unbiased=False)),
            NormKind.BATCH: float(h[:, feature].var(unbiased=False))}


def invariance_caption(table: pd.DataFrame, eps: float, variances: dict[str, float],
                       factor: float = 2.0) -> str:
    """What the probe chart shows, in words that follow its numbers: which changes are
    rounding, which are ε's doing (and how large ε is beside the probed group's σ², before and
    after the rescaling by ``factor``), and which are real."""
    def named(kind: str) -> list[str]:
        return [f"{norm}, {row['probe']} ({row[norm]:.2g})" for _, row in table.iterrows()
                for norm in GRAD_NORMS if row[f"{norm}: verdict"] == kind]

    epsilon_made, unchanged = named(VERDICTS[1]), named(VERDICTS[0])
    parts = []
    if unchanged:
        parts.append(f"Unchanged up to float64 rounding (at most {ROUNDING:g}): "
                     + "; ".join(unchanged) + ".")
    if epsilon_made:
        parts.append("ε's doing — these changes vanish at ε = 0: " + "; ".join(epsilon_made)
                     + ". The smaller a group's σ² beside ε, the larger ε's share: ε/σ² is "
                     + " and ".join(
                         f"{eps / variances[norm]:.2g} before and "
                         f"{eps / (variances[norm] * factor**2):.2g} after the rescaling for the "
                         f"probed {group} ({norm}'s group)"
                         for norm, group in ((NormKind.LAYER, "sample"),
                                             (NormKind.BATCH, "feature")))
                     + ".")
    elif eps == 0:
        parts.append("At ε = 0 no change is ε's doing: every invariance is exact.")
    else:
        parts.append(f"At ε = {eps:g} no bar is ε's doing: every invariant probe is exact to "
                     "rounding.")
    return " ".join(parts)


def gradients_try_this(batch: int, kind: str) -> str:
    """The "try this" under the gradients of the loss ``kind`` (:data:`UPSTREAM`), shown once the
    one-hot loss's question is answered (the page asks it first): what the one-hot loss showed
    for each norm (true for a batch of ``batch``: with two samples BatchNorm's gradient is ε's
    alone), then the next loss to predict."""
    if batch == 2:
        batchnorm = ("BatchNorm's, with N = 2, is ε's doing alone (see the note below). Move N "
                     "to 3 or more and answer again: where does it go then?")
    else:
        batchnorm = ("BatchNorm's reaches the chosen feature's column in *every* sample — a loss "
                     "on one example trains on the whole batch.")
    others = [k for k in UPSTREAM if k != kind and k != ONE_HOT]
    return (f"**Try this.** With the {ONE_HOT} upstream gradient, LayerNorm's ∂L/∂x is zero "
            "outside the chosen sample's row: the other samples never saw that output. "
            + batchnorm
            + (f" Now pick **{others[0]}** and answer again: where does each norm's gradient "
               "go now, and why?" if others else "")
            + " Each row of LayerNorm's ∂L/∂x always sums to 0 — shifting a sample cannot "
              "change its output, so the gradient has no component along that shift.")


def pair_note(batch: int, features: int) -> str | None:
    """A warning for groups of two values, where x̂ is ±1 (up to ε) whatever x is, so that the
    norm's output barely depends on its input; ``None`` when every group is larger."""
    pairs = [f"{norm} (C = 2)" if norm == NormKind.LAYER else f"{norm} (N = 2)"
             for norm, size in ((NormKind.LAYER, features), (NormKind.BATCH, batch)) if size == 2]
    if not pairs:
        return None
    subject = " and ".join(pairs)
    verb, its = ("pass", "their") if len(pairs) > 1 else ("passes", "its")
    return (f"Groups of two values d apart: x̂ = ±d/√(d² + 4ε), ±1 whatever the two values are "
            f"while ε ≪ d², so {subject} "
            f"{verb} on almost nothing — {its} ∂L/∂x and Jacobian are 0 but for ε's doing "
            "(larger at a large ε), and up to ε a probe changes the output only where it swaps "
            "the order of the two values.")


def gradient_input(batch: int, features: int, seed: int = 0) -> torch.Tensor:
    """The page's input x ``(batch, features)``: a seeded random batch whose features differ a
    little in offset and scale (``feature_spread=0.5``), in float64 for exact gradients."""
    return torch.from_numpy(random_batch((batch, features), feature_spread=0.5, seed=seed)).double()


def probe_inputs(batch: int, features: int, inputs: int = 6, seed: int = 0
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """A random input x ``(batch, inputs)`` and linear weights W ``(features, inputs)``, scaled
    by 1/√inputs so that h = x Wᵀ has entries of order one (float64)."""
    x = torch.from_numpy(random_batch((batch, inputs), seed=seed)).double()
    weight = torch.from_numpy(random_batch((features, inputs), seed=seed + 1)).double()
    return x, weight / inputs**0.5


def gradients_snippet(shape: tuple[int, int], kind: str, cell: tuple[int, int] = (0, 0),
                      eps: float = 1e-5) -> str:
    """PyTorch code for the page's backward pass and Jacobian (``lnviz/snippets/gradients.py``),
    with the upstream gradient of ``kind`` (one of :data:`UPSTREAM`)."""
    n, c = shape
    return snippet("gradients", keep=[kind], N=n, C=c, eps=eps, cell=tuple(cell))
