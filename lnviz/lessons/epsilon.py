r"""ε and numerical stability: what can go wrong when LayerNorm meets finite-precision numbers.

Four experiments, each a plain function returning arrays for a figure:

* :func:`epsilon_sweep` — for one vector, the output's size max|y| and the gradient's size
  ‖∂L/∂x‖ as ε runs over many decades. With spread σ², the normalized values are
  (x − μ)/√(σ² + ε): while ε ≪ σ² the vector's own spread sets the scale, once ε ≫ σ² the
  output shrinks like 1/√ε. The crossover sits at ε ≈ σ².
* :func:`epsilon_steps` — every intermediate of LayerNorm for one ε, including ε = 0 on a
  constant vector, where x − μ = 0 and √(σ² + ε) = 0 make 0/0 = NaN.
* :func:`precision_sweep` — how far LayerNorm computed in float16/bfloat16/float32 lands from
  the float64 answer, as the input moves away from zero or grows in size.
* :func:`cancellation_sweep` — three ways of computing a variance in float32 (the naive
  E[x²] − E[x]², the two-pass one lnviz uses, and Welford's streaming update) as the data's
  offset from zero grows.

:func:`naive_mean_and_var` and :func:`welford_mean_and_var` are written here for comparison
only; lnviz's norms use the two-pass :func:`lnviz.norms.mean_and_var`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lnviz.data import get_preset
from lnviz.devices import DTYPES, to_numpy, to_tensor
from lnviz.lessons.common import Answer, short
from lnviz.norms import centre, layer_norm, mean_and_var
from lnviz.snippets import Code, snippet

__all__ = [
    "CANCELLATION_OFFSET",
    "CANCELLATION_OPTIONS",
    "EPSILON_GRID",
    "OFFSET_GRID",
    "PRECISION_AXES",
    "VECTORS",
    "CancellationSweep",
    "EpsilonSteps",
    "EpsilonSweep",
    "NoEpsilonCell",
    "PrecisionSweep",
    "cancellation_answer",
    "cancellation_sweep",
    "epsilon_snippet",
    "epsilon_steps",
    "epsilon_sweep",
    "fixed_upstream_gradient",
    "formula_module_without_epsilon",
    "naive_mean_and_var",
    "precision_sweep",
    "stability_vector",
    "welford_mean_and_var",
]

#: ε from 1e-12 to 1, four points per decade: the x axis of :func:`epsilon_sweep`.
EPSILON_GRID = np.logspace(-12, 0, 49)

#: The vectors the ε experiments offer: (preset, row) in :data:`lnviz.data.PRESETS`.
VECTORS = {
    # the formula tutorial's [0.001, 0.001, 0.0011, 0.0009, 0.001], σ² = 4e-9
    "tiny": ("tiny_variance", 0),
    "constant": ("constant_row", 0),  # [3, 3, 3, 3]: σ² = 0 exactly
    "ordinary": ("constant_row", 1),  # [1, 2, 4, 7]: σ² = 5.25, far above any usual ε
}


def stability_vector(name: str) -> np.ndarray:
    """One of the :data:`VECTORS`, as a 1-D float32 array."""
    if name not in VECTORS:
        raise ValueError(f"unknown vector {name!r}; choose one of {list(VECTORS)}")
    preset, row = VECTORS[name]
    return get_preset(preset).values[row]


def epsilon_snippet(vector: str, eps: float, dtype: str = "float32") -> str:
    """PyTorch code for the page's view (``lnviz/snippets/epsilon.py``): the chosen vector in
    the chosen dtype through ``F.layer_norm`` at ``eps`` with its gradient, then the page's
    other three experiments."""
    values = [float(v) for v in stability_vector(vector)]
    variance = float(np.var(np.asarray(values, dtype=np.float64)))
    where = (f"ε = σ² = {variance:.3g} is where it bends" if variance > 0
             else "σ² = 0: every output is 0/√ε = 0 (NaN at ε = 0)")
    return snippet("epsilon", values=values, dtype=Code(f"torch.{dtype}"), eps=eps,
                   notes={"where": where})


def fixed_upstream_gradient(size: int, seed: int = 0) -> torch.Tensor:
    """A fixed upstream gradient g (standard normal, float64) for the loss L = Σ y·g.

    Any fixed g would do: it stands for whatever the layers above send back. Fixing it makes
    ‖∂L/∂x‖ a property of the normalization alone.
    """
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(size, generator=generator, dtype=torch.float64)


def _output_and_grad(
    x: torch.Tensor, eps: float, upstream: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(LayerNorm result's x̂ and y, ∂L/∂x) for L = Σ y·g, by autograd through lnviz."""
    leaf = x.detach().clone().requires_grad_(True)
    result = layer_norm(leaf, leaf.shape[-1], eps=eps)
    loss = (result.output.to(upstream.dtype) * upstream.to(leaf.device)).sum()
    (grad,) = torch.autograd.grad(loss, leaf)
    return result.x_hat.detach(), result.output.detach(), grad


@dataclass(frozen=True)
class EpsilonSweep:
    """max|y| and ‖∂L/∂x‖ of one vector at each ε of ``eps``.

    ``variance`` is the vector's σ² as LayerNorm computed it: the ε at which the curves bend.
    Entries are inf or NaN where the precision overflowed (float16 gradients above 65504).
    """

    eps: np.ndarray
    max_output: np.ndarray
    grad_norm: np.ndarray
    variance: float

    def caption(self) -> str:
        """What the sweep's two log-log curves show for this vector: a bend at ε = σ², or, for a
        vector with no spread, an output of 0 at every ε and a gradient that only falls."""
        lead = ("Both axes are logarithmic. L = Σ yᵢ·gᵢ for a fixed random upstream gradient g "
                "(from the sidebar's seed), differentiated by autograd through "
                "lnviz.layer_norm. ")
        if self.variance > 0:
            return lead + ("Left of the green line ε = σ² the vector's own spread sets the "
                           "scale and ε hardly matters; right of it ε sets the scale and both "
                           "curves fall like 1/√ε.")
        return lead + ("This vector has σ² = 0, so there is no bend and no green line: the "
                       "output is 0 at every ε > 0 (a log axis cannot draw 0, so its curve is "
                       "missing) and the gradient falls like 1/√ε all the way.")

    @property
    def nonfinite(self) -> int:
        """How many points of either curve are inf or NaN (and so missing from a log plot)."""
        return int((~np.isfinite(self.max_output)).sum() + (~np.isfinite(self.grad_norm)).sum())


def epsilon_sweep(
    x: np.ndarray,
    eps: Sequence[float] = tuple(EPSILON_GRID),
    *,
    seed: int = 0,
    device: str = "cpu",
    dtype: str = "float32",
) -> EpsilonSweep:
    r"""LayerNorm of the 1-D vector ``x`` at every ε, with the sizes of its output and gradient.

    For each ε: y = (x − μ)/√(σ² + ε) and, with L = Σᵢ yᵢ gᵢ for the fixed
    :func:`fixed_upstream_gradient` g,

    .. math::
        \frac{\partial L}{\partial x} = \frac{1}{\sqrt{σ^2 + ε}}
            \Big(g - \bar g - \hat x\,\overline{g \hat x}\Big)

    (bars are means over the features). Both shrink like 1/√ε once ε ≫ σ²; while ε ≪ σ² they
    do not depend on ε. The gradient comes from autograd through :func:`lnviz.layer_norm`.
    """
    if np.ndim(x) != 1 or len(x) < 1:
        raise ValueError(f"the ε sweep takes one vector, got shape {list(np.shape(x))}")
    values = to_tensor(np.asarray(x), device, dtype)
    g = fixed_upstream_gradient(values.shape[0], seed)
    max_output, grad_norm = [], []
    for e in eps:
        _, y, grad = _output_and_grad(values, float(e), g)
        max_output.append(float(y.abs().max()))
        grad_norm.append(float(torch.linalg.vector_norm(grad.double())))
    _, variance, _ = mean_and_var(values.to(torch.promote_types(values.dtype, torch.float32)),
                                  (0,))
    return EpsilonSweep(np.asarray(eps, dtype=np.float64), np.array(max_output),
                        np.array(grad_norm), float(variance))


@dataclass(frozen=True)
class EpsilonSteps:
    """Every intermediate of LayerNorm on one vector at one ε (see :func:`epsilon_steps`).

    ``max_output`` is max |x̂| (NaN when any x̂ is NaN); the two counts say how many outputs and
    gradient entries are inf or NaN.
    """

    table: pd.DataFrame
    mean: float
    variance: float
    eps: float
    max_output: float
    nonfinite_outputs: int
    nonfinite_grads: int
    dtype: str = "float32"  # what the steps were computed in

    def explain(self, dtype: str) -> str | None:
        """Why some outputs or gradient entries are NaN or infinite; None when none are."""
        if not (self.nonfinite_outputs or self.nonfinite_grads):
            return None
        counts = (f"With ε = {self.eps:g} and σ² = {self.variance:g}: {self.nonfinite_outputs} "
                  f"outputs and {self.nonfinite_grads} gradient entries are NaN or infinite. ")
        if self.eps == 0 and self.variance == 0:
            return counts + (
                "Every x equals μ, so x − μ = 0, and √(σ² + ε) = √0 = 0: the formula asks for "
                "0/0, which has no value. Computers answer NaN (1/√0 = inf, then 0 · inf = NaN), "
                "and the NaN flows back through the gradient into every weight. This is not a "
                "bug of the implementation — it is what the formula means, and it is exactly why "
                "ε > 0.")
        largest = float(torch.finfo(getattr(torch, dtype)).max)
        wider = {"float16": "Choose float32 in the sidebar, or ",
                 "bfloat16": "Choose float32 in the sidebar, or ",
                 "float32": "Choose float64 in the sidebar, or "}.get(dtype, "Choose ")
        return counts + (
            f"ε > 0, so nothing here divides by zero: the numbers outgrow {dtype}, whose largest "
            f"is {largest:.5g}. 1/√(σ² + ε) = {1 / math.sqrt(self.variance + self.eps):.3g}, "
            "and the gradient grows with it (like 1/√ε when σ² is tiny), so it overflows to inf "
            f"(and inf − inf gives NaN). {wider}a larger ε.")

    def residue(self) -> str | None:
        """Why x − μ is a tiny nonzero number where x looks equal to μ, when it is: the stored
        values are not the decimals they print as, and their mean sits a hair away from some of
        them. lnviz's centring keeps that difference; rounding μ once more would lose it. None
        when no x − μ is nonzero and below a hundredth of the largest |x − μ|."""
        x = self.table["x"].to_numpy()
        centred = self.table["x − μ"].to_numpy()
        largest = float(np.abs(centred).max()) if centred.size else 0.0
        tiny = (centred != 0) & (np.abs(centred) < 1e-2 * largest)
        if not tiny.any():
            return None
        rows = np.flatnonzero(tiny)
        i = int(rows[0])
        exact = x - x.mean()  # float64 arithmetic on the stored numbers
        x_hat = float(self.table["x̂"].iloc[i])
        rstd = float(self.table["1/√(σ²+ε)"].iloc[i])
        stored = ", ".join(f"{v:.11g}" for v in np.unique(x))
        # x minus the stored μ: both are numbers of the accumulation dtype, so this difference
        # is what subtracting the once-more-rounded μ would give.
        naive = x[i] - self.mean
        if f"{naive:.4g}" == f"{centred[i]:.4g}":  # both routes print the same number here
            how = ("lnviz's centring subtracts the rounding error of its first mean from x − μ; "
                   "in this precision, rounding μ once more happens to give the same number. ")
        else:
            instead = "0" if naive == 0 else f"{naive:.4g}"
            how = ("lnviz's centring keeps that difference: it subtracts the rounding error of "
                   "its first mean from x − μ instead of rounding μ once more (which would give "
                   f"{instead} here). ")
        which = (f"element {rows[0]}" if rows.size == 1 else
                 "elements " + ", ".join(str(r) for r in rows[:-1]) + f" and {rows[-1]}")
        # float64 runs on the example as stored: float32 numbers, as the source's torch code
        # holds them (numpy's float64 of the typed decimals would centre some of them to 0)
        held = (" — float32 numbers, as the example is stored (and as the formula tutorial's "
                "torch code holds them): float64 computes on these, so their rounding stays"
                if self.dtype == "float64" and np.array_equal(x.astype(np.float32), x) else "")
        return (
            f"Why x − μ is {centred[i]:.4g} and not 0 at {which} of the vector: the stored "
            f"values are {stored}{held} (decimals like 0.001 have no exact binary form), and their "
            f"mean is {x.mean():.11g}, so those elements really sit {exact[i]:.4g} from it "
            f"(float64 arithmetic on the stored numbers). {how}"
            f"Times 1/√(σ² + ε) = {rstd:.4g} it is x̂ = {x_hat:.4g}: real, and "
            f"{abs(x_hat) / float(np.abs(self.table['x̂']).max()):.1e} of the largest |x̂|."
        ).replace("-", "−").replace("e−", "e-")

    def text_table(self) -> pd.DataFrame:
        """The table as text with 4 significant digits, NaN and inf spelled out (a table widget
        would show NaN as an empty cell, hiding exactly what ε = 0 produces)."""
        return self.table.map(lambda v: "NaN" if np.isnan(v) else f"{v:.4g}")


def epsilon_steps(
    x: np.ndarray, eps: float, *, seed: int = 0, device: str = "cpu", dtype: str = "float32"
) -> EpsilonSteps:
    r"""The steps μ → x − μ → σ² + ε → 1/√(σ² + ε) → x̂ → ∂L/∂x for one vector.

    Nothing is guarded: with ε = 0 on a constant vector, σ² = 0 gives 1/√0 = inf and
    x̂ = (x − μ)·inf = 0·inf = NaN — the 0/0 of the formula — and the gradient is NaN too.
    """
    if not eps >= 0:
        raise ValueError(f"ε must be ≥ 0, got {eps}")
    values = to_tensor(np.asarray(x), device, dtype)
    g = fixed_upstream_gradient(values.shape[0], seed)
    x_hat, _, grad = _output_and_grad(values, float(eps), g)
    acc = values.to(torch.promote_types(values.dtype, torch.float32))
    # x − μ exactly as layer_norm centres it, so that (x − μ)·1/√(σ² + ε) is the x̂ beside it
    mean, centered, n = centre(acc, (0,))
    var = centered.square().sum(dim=0, keepdim=True) / n
    rstd = torch.rsqrt(var + eps)
    table = pd.DataFrame({
        "x": to_numpy(acc),
        "x − μ": to_numpy(centered),
        "σ² + ε": np.full(values.shape[0], float(var + eps)),
        "1/√(σ²+ε)": np.full(values.shape[0], float(rstd)),
        "x̂": to_numpy(x_hat),
        "∂L/∂x": to_numpy(grad),
    })
    return EpsilonSteps(table, float(mean), float(var), float(eps), float(x_hat.abs().max()),
                        int((~torch.isfinite(x_hat)).sum()), int((~torch.isfinite(grad)).sum()),
                        dtype)


@dataclass(frozen=True)
class PrecisionSweep:
    """max |LN(x in dtype) − LN(x in float64)| per dtype, along ``values`` of ``axis``.

    NaN marks points where the dtype cannot hold the input at all (float16 above 65504).
    """

    axis: str
    values: np.ndarray
    errors: dict[str, np.ndarray]

    def caption(self) -> str:
        """What the curves show, with their numbers: gaps where float16 overflows (offset
        axis); how far each curve rises over the row lengths (size axis)."""
        if self.axis == "offset":
            gaps = self.values[self.values > 65504]
            text = (f"Gaps in the float16 curve are offsets above 65 504 ({gaps.size} of the "
                    f"{self.values.size} points), where float16 holds only inf and LayerNorm "
                    "returns NaN. " if gaps.size else "")
            return text + "Where the error reaches about 1, the normalized values are noise."
        finite = {d: e for d, e in self.errors.items() if np.isfinite(e).all()}
        ends = "; ".join(f"{d} from {e[0]:.2g} to {e[-1]:.2g}" for d, e in finite.items())
        if all(e[-1] >= e[0] for e in finite.values()):
            trend = (f"rises only slowly ({ends}): the worst is taken over more values, and the "
                     "largest of them sit further from 0, where rounding is coarser")
        elif all(e[-1] <= e[0] for e in finite.values()):
            trend = f"does not rise ({ends})"
        else:
            trend = f"rises for some precisions and falls for others ({ends})"
        return (f"From {self.values[0]:.0f} to {self.values[-1]:,.0f} values per row the worst "
                f"error {trend}. Summing in float32 keeps the mean and variance accurate, so "
                "the input's rounding is what costs digits.")


#: The x axes :func:`precision_sweep` can run along, with their default grids.
PRECISION_AXES = {
    "offset": np.logspace(-2, 6, 33),
    "size": 2 ** np.arange(2, 17),
}


def precision_sweep(
    axis: str = "offset",
    values: Sequence[float] | None = None,
    *,
    size: int = 256,
    offset: float = 0.0,
    seed: int = 0,
    dtypes: Sequence[str] = ("float16", "bfloat16", "float32"),
    device: str = "cpu",
) -> PrecisionSweep:
    """How much of LayerNorm's answer survives a lower precision.

    The input is ``size`` standard-normal values plus ``offset`` (float64, the reference). Each
    dtype gets that input rounded to it; the error is max |LN(x_dtype) − LN(x_float64)|. With
    ``axis="offset"`` the offset runs over ``values`` (size fixed); with ``axis="size"`` the size
    does (offset fixed). Rounding the input costs about |offset|·(machine ε of the dtype), so
    once the offset is that many times σ, the normalized values are mostly rounding noise;
    accumulating the statistics in float32 keeps the size from mattering much.
    """
    if axis not in PRECISION_AXES:
        raise ValueError(f"axis must be one of {list(PRECISION_AXES)}, got {axis!r}")
    grid = np.asarray(PRECISION_AXES[axis] if values is None else values, dtype=np.float64)
    errors: dict[str, list[float]] = {d: [] for d in dtypes}
    for value in grid:
        n, shift = (size, float(value)) if axis == "offset" else (int(value), offset)
        if n < 2:
            raise ValueError(f"a vector needs at least 2 values, got {n}")
        generator = torch.Generator().manual_seed(seed)
        x64 = torch.randn(n, generator=generator, dtype=torch.float64) + shift
        reference = layer_norm(x64, n).output
        for d in dtypes:
            y = layer_norm(to_tensor(x64, device, d), n).output.double().cpu()
            errors[d].append(float((y - reference).abs().max()))
    return PrecisionSweep(axis, grid, {d: np.array(e) for d, e in errors.items()})


# --- Three ways to compute a variance ----------------------------------------------------------


def naive_mean_and_var(x: torch.Tensor, dim: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    r"""μ and σ² in one pass as σ² = E[x²] − E[x]² — the textbook shortcut that fails.

    Both terms are about μ² when the values sit far from zero; their difference, σ², is what
    is left after subtracting two nearly equal numbers, each rounded to the dtype's ~7 (float32)
    significant digits. When μ²/σ² passes about 1/(machine ε), nothing of σ² survives and the
    result can even be negative. Shown for comparison; lnviz never uses it.
    """
    mean = x.mean(dim=dim)
    return mean, (x * x).mean(dim=dim) - mean * mean


def welford_mean_and_var(x: torch.Tensor, dim: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    r"""μ and σ² in one streaming pass with Welford's update, vectorized over the other dims.

    After the k-th value x_k the running mean and sum of squared deviations M₂ are

    .. math::
        μ_k = μ_{k-1} + \frac{x_k - μ_{k-1}}{k},\qquad
        M_{2,k} = M_{2,k-1} + (x_k - μ_{k-1})(x_k - μ_k)

    and σ² = M₂/n. Each update only adds deviations from the current mean, so no large terms
    cancel. Fused GPU kernels use this when they cannot afford a second pass over the data.
    """
    values = x.movedim(dim, 0)
    mean = torch.zeros_like(values[0])
    m2 = torch.zeros_like(values[0])
    for k, x_k in enumerate(values, start=1):
        delta = x_k - mean
        mean = mean + delta / k
        m2 = m2 + delta * (x_k - mean)
    return mean, m2 / values.shape[0]


@dataclass(frozen=True)
class CancellationSweep:
    """σ² of the same data computed three ways in one dtype, as its offset from zero grows.

    ``variances`` holds each method's result and ``relative_error`` its
    |σ²_method − σ²_true| / σ²_true, where σ²_true is the two-pass variance in float64 of the
    very numbers the dtype stored. ``term_errors`` holds how far the naive formula's two terms,
    E[x²] and E[x]² as the dtype computed them, each landed from their exact values.
    """

    offsets: np.ndarray
    true_variance: np.ndarray
    variances: dict[str, np.ndarray]
    relative_error: dict[str, np.ndarray]
    term_errors: dict[str, np.ndarray]

    def summary(self, method: str = "naive E[x²] − E[x]²") -> str:
        """Where ``method`` first errs by more than 100%, and where (if anywhere) it comes out
        negative, on this sweep's offsets."""
        error, variance = self.relative_error[method], self.variances[method]
        wrong = self.offsets[error > 1]
        negative = self.offsets[variance < 0]
        text = (f"Here the naive variance is first off by more than 100% at offset "
                f"{wrong[0]:,.0f}" if wrong.size else
                "Here the naive variance stays within 100% of the truth at every offset")
        if negative.size:
            return text + (f", and comes out negative at {negative.size} offset(s), first at "
                           f"{negative[0]:,.0f}.")
        return text + "; with this seed and row length it never comes out negative."


#: Part 3's "Before you look" question: the offset it asks about (on the sweep's grid), and how
#: far off the one-pass variance may land there.
CANCELLATION_OFFSET = 1e4
CANCELLATION_OPTIONS = ("within 1% of it", "1% or more off, perhaps even negative")


def cancellation_answer(sweep: CancellationSweep, offset: float = CANCELLATION_OFFSET,
                        dtype: str = "float32") -> Answer:
    """Which of :data:`CANCELLATION_OPTIONS` the naive E[x²] − E[x]² falls in at ``offset`` on
    ``sweep`` (computed in ``dtype``), and why: the size of both terms, the spacing of ``dtype``
    numbers of that size, what the naive and the two-pass variance came out."""
    naive_name = "naive E[x²] − E[x]²"
    k = int(np.argmin(np.abs(sweep.offsets - offset)))
    at, truth = float(sweep.offsets[k]), float(sweep.true_variance[k])
    naive, error = float(sweep.variances[naive_name][k]), float(sweep.relative_error[naive_name][k])
    two_pass = float(sweep.relative_error["two-pass"][k])
    # how far off is a matter of the draw (tens of percent to many times σ²): the question
    # asks only whether float32's rounding of two numbers near offset² leaves σ² standing
    option = CANCELLATION_OPTIONS[0 if naive >= 0 and error < 0.01 else 1]
    square = at * at + truth
    step = torch.finfo(DTYPES[dtype]).eps * 2.0 ** math.floor(math.log2(square))
    squares, mean_squared = (float(sweep.term_errors[t][k]) for t in ("E[x²]", "E[x]²"))

    def off(v: float) -> str:
        return f"{abs(v):.3g} {'above' if v > 0 else 'below'}"

    return Answer(option, (
        f"At offset {at:,.0f}, E[x²] and E[x]² are both about {short(square)} and differ by "
        f"σ² = {short(truth)}. {dtype} keeps about "
        f"{-math.log10(torch.finfo(DTYPES[dtype]).eps):.0f} significant digits: it stores a "
        f"number of that size only to the nearest multiple of {step:g}, and each square, "
        "each partial sum and the mean is rounded so: here E[x²] came out "
        f"{off(squares)} its exact value and E[x]² {off(mean_squared)} its own, against a "
        f"difference of {short(truth)}. The naive formula gives {short(naive)}, "
        f"{error:.0%} off"
        + (", a negative variance, which √ turns into NaN" if naive < 0 else "")
        + f". Two passes land {two_pass:.1e} off: they subtract μ from each stored value "
          "first, which loses little (the values are near μ), and only then square the small "
          "deviations and add them up, so no large sum has to be subtracted."))


#: Offsets from 1 to 10⁶ on a log axis: the x axis of :func:`cancellation_sweep`.
OFFSET_GRID = np.logspace(0, 6, 25)


def cancellation_sweep(
    offsets: Sequence[float] = tuple(OFFSET_GRID),
    *,
    size: int = 256,
    seed: int = 0,
    dtype: str = "float32",
) -> CancellationSweep:
    """The variance of ``size`` standard-normal values shifted by each offset, three ways.

    All offsets are computed at once, one row each: the naive E[x²] − E[x]², the two-pass
    :func:`lnviz.norms.mean_and_var` and :func:`welford_mean_and_var`, in ``dtype``. The spread
    is the same at every offset, so only the offset is to blame for any error.
    """
    if size < 2:
        raise ValueError(f"a variance needs at least 2 values, got {size}")
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn(size, generator=generator, dtype=torch.float64)
    shifts = torch.as_tensor(np.asarray(offsets, dtype=np.float64))
    x = (base + shifts[:, None]).to(DTYPES[dtype])
    _, truth, _ = mean_and_var(x.double(), (1,))
    truth = truth.squeeze(1)
    _, two_pass, _ = mean_and_var(x, (1,))
    computed = {
        "naive E[x²] − E[x]²": naive_mean_and_var(x)[1],
        "two-pass": two_pass.squeeze(1),
        "Welford": welford_mean_and_var(x)[1],
    }
    variances = {name: v.double().numpy() for name, v in computed.items()}
    truth_np = truth.numpy()
    errors = {name: np.abs(v - truth_np) / truth_np for name, v in variances.items()}
    exact = x.double()
    terms = {"E[x²]": ((x * x).mean(1).double() - (exact * exact).mean(1)).numpy(),
             "E[x]²": ((x.mean(1) ** 2).double() - exact.mean(1) ** 2).numpy()}
    return CancellationSweep(shifts.numpy(), truth_np, variances, errors, terms)


# --- The formula tutorial's "Error without epsilon"
# --------------------------------------------------------


@dataclass(frozen=True)
class NoEpsilonCell:
    """The formula tutorial's cell that normalizes without ε inside ``try``/``except Exception``,
    run on one
    vector: what it prints, whether its ``except`` branch ran, the warnings numpy emitted, and
    what the same division raises under ``np.errstate(all="raise")``."""

    printed: str
    raised: str | None
    warnings: tuple[str, ...]
    strict: str | None
    variance: float

    def explain(self) -> str:
        """Why the ``except`` branch does not run on this vector, and why it never can."""
        if self.raised is not None:  # numpy never raises here; say so if that ever changes
            return f"Here the except branch ran: {self.raised}."
        text = ("Here the except branch does not run: "
                + (f"numpy warned ({'; '.join(self.warnings)}) and returned NaN or inf instead "
                   "of raising, and a warning is not an exception. " if self.warnings else
                   f"σ² = {self.variance:.3g} is not 0, so nothing divides by zero and the cell "
                   "prints finite numbers. "))
        return text + (
            "It cannot run for any vector of floats under numpy's default settings: a "
            "floating-point division by zero returns inf "
            "or NaN (with a RuntimeWarning) rather than raising, so `except Exception` has "
            "nothing to catch. What ε prevents is a NaN, not an error"
            + (f"; only under np.errstate(all=\"raise\") does the division raise "
               f"({self.strict})." if self.strict else
               "; even under np.errstate(all=\"raise\") this vector divides by a nonzero "
               "number and raises nothing."))


def formula_module_without_epsilon(x: np.ndarray) -> NoEpsilonCell:
    """Run the formula tutorial's "without epsilon" step on ``x`` as the tutorial does: numpy
    float64 values
    (the decimals as typed, not their float32 storage), ``(x - mean) / np.sqrt(var)`` inside
    ``try``/``except Exception``."""
    values = np.array([float(f"{v:.7g}") for v in np.asarray(x, dtype=np.float64)])
    mean, var = np.mean(values), np.var(values)
    raised = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            normalized = (values - mean) / np.sqrt(var)
            printed = f"Normalized (no epsilon): {normalized}"
        except Exception as err:  # the tutorial's own catch-all, reproduced
            raised = f"{type(err).__name__}: {err}"
            printed = f"Error without epsilon: {err}"
    strict = None
    with np.errstate(all="raise"):
        try:
            (values - mean) / np.sqrt(var)
        except FloatingPointError as err:
            strict = f"FloatingPointError: {err}"
    return NoEpsilonCell(printed, raised, tuple(str(w.message) for w in caught), strict,
                         float(var))
