"""What the Explorer computes for display: windows of the tensor, which cells share one μ/σ,
per-group statistics, a worked example, a check against torch and the sentences that explain it.

The batch, the settings and the norm itself are in :mod:`lnviz.batch`; this module turns an
:class:`Exploration` (one batch through one norm) into the small arrays, tables and sentences that
the Explorer page shows, so that the page never computes statistics itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lnviz.batch import (
    LAYOUTS,
    NORM_TABLE,
    Batch,
    GridView,
    NormSpec,
    channel_dim,
    group_ids,
    grouped,
    grouping,
    max_abs_difference,
    normalize,
    param_size,
    pick_impl,
    to_grid,
    torch_reference,
)
from lnviz.data import get_preset
from lnviz.devices import to_numpy, to_tensor
from lnviz.limits import CHECK_REFERENCE_LIMIT
from lnviz.norms import (
    NormResult,
    batch_norm,
    layer_norm,
    mean_and_var,
)
from lnviz.snippets import Code, snippet
from lnviz.terms import Layout, NormKind

__all__ = [
    "Exploration",
    "TorchCheck",
    "WorkedCheck",
    "check_against_torch",
    "check_tolerance",
    "describe_check",
    "explain",
    "explore",
    "group_rms",
    "group_sizes",
    "group_stats",
    "histogram",
    "impl_note",
    "padding_grid",
    "pytorch_snippet",
    "shared_outputs",
    "shared_title",
    "statistics_note",
    "stats_heading",
    "worked_checks",
]


def group_stats(
    x: torch.Tensor, layout: str, spec: NormSpec, mask: torch.Tensor | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (biased) standard deviation of ``x`` over each group of ``spec``'s norm, in the
    order of :func:`group_ids` — the batch's own statistics, even where the norm itself uses
    running ones. ``mask`` leaves padding out (masked BatchNorm)."""
    x = x.detach().to(torch.promote_types(x.dtype, torch.float32))
    mean, var, _ = mean_and_var(*grouped(x, layout, spec, mask))
    return to_numpy(mean).ravel(), to_numpy(var.sqrt()).ravel()


def group_rms(
    x: torch.Tensor, layout: str, spec: NormSpec, mask: torch.Tensor | None = None
) -> np.ndarray:
    """The root-mean-square √(mean(x²)) of ``x`` over each group of ``spec``'s norm, in the
    order of :func:`group_ids`: the statistic RMSNorm divides by (without its ε)."""
    x = x.detach().to(torch.promote_types(x.dtype, torch.float32))
    values, dims, weights = grouped(x, layout, spec, mask)
    mean_square, _, _ = mean_and_var(values.square(), dims, weights)
    return to_numpy(mean_square.sqrt()).ravel()


def group_sizes(
    x: torch.Tensor, layout: str, spec: NormSpec, mask: torch.Tensor | None = None
) -> np.ndarray:
    """How many values each group's statistics are taken over (real tokens only for masked
    BatchNorm), in the order of :func:`group_ids`."""
    values, dims, weights = grouped(x, layout, spec, mask)
    if weights is None:
        groups = grouping(tuple(x.shape), layout, spec)
        return np.full(groups.count, math.prod(values.shape[d] for d in dims), dtype=np.int64)
    return to_numpy(weights.expand(values.shape).sum(dims)).ravel().astype(np.int64)


def padding_grid(batch: Batch, view: GridView) -> np.ndarray | None:
    """Where the window ``view`` of ``batch``'s 2-D grid (:func:`lnviz.batch.to_grid`) holds
    padding: True at every feature of a pad token. None for a batch without a mask."""
    if batch.mask is None:
        return None
    # the mask has no channel dim: every channel of a pad position is padding
    pad = np.expand_dims(~batch.mask, channel_dim(batch.layout))
    return view.take(to_grid(np.broadcast_to(pad, batch.values.shape), batch.layout))


def pytorch_snippet(shape: tuple[int, ...], layout: str, spec: NormSpec, dtype: str = "float32",
                    device: str = "cpu", has_mask: bool = False) -> str:
    """PyTorch code that reproduces the current computation from the downloaded input.npy
    (``lnviz/snippets/explorer.py``, the view's sections kept)."""
    n = param_size(shape, layout, spec)
    masked = has_mask and spec.use_mask
    norm = NORM_TABLE[spec.norm]

    def param(value: float | tuple[float, ...]) -> Code:
        # γ, β and running statistics in x's dtype (float32 for half inputs, as torch's
        # kernels take them), on x's device: torch refuses float32 parameters with float64
        if isinstance(value, (tuple, list)):
            return Code(f"torch.tensor({[float(v) for v in value]}, dtype=param_dtype, "
                        "device=device)")
        return Code(f"torch.full((n,), {float(value)!r}, dtype=param_dtype, device=device)")

    keep = {spec.norm}
    values: dict[str, object] = {
        "device": device, "dtype": Code(f"torch.{dtype}"),
        "param_dtype": Code(f"torch.{'float64' if dtype == 'float64' else 'float32'}"),
        "n": n, "gamma": param(spec.gamma), "beta": param(spec.beta), "eps": spec.eps}
    if spec.norm != NormKind.RMS:  # RMSNorm has no β
        keep.add("beta")
    if norm.trailing:
        keep.add("trailing")
        values["normalized_shape"] = tuple(shape[-spec.dims:])
        if spec.dims > 1:
            keep.add("expand")
    else:
        keep.add("channels")
        values["c"] = channel_dim(layout)
    if spec.norm == NormKind.BATCH:
        keep |= {"mask"} if masked else {"all"}
        keep.add("training" if spec.training else "evaluation")
        if spec.training and spec.eps == 0:
            keep.add("eps-zero")
        values |= {"warmup_steps": spec.warmup_steps, "momentum": spec.momentum}
    elif spec.norm == NormKind.GROUP:
        values["groups"] = spec.groups
    return snippet("explorer", keep=keep, **values,
                   notes={"shape": str(tuple(shape)), "layout": str(layout),
                          "meaning": LAYOUTS[layout]})


#: How many unit roundoffs of error a correct implementation may show, per unit of conditioning.
ROUNDOFF_FACTOR = 8


def _unit_roundoff(dtype: torch.dtype) -> float:
    return float(torch.finfo(dtype).eps) / 2


def _largest(values: float | tuple[float, ...]) -> float:
    return max(abs(v) for v in values) if isinstance(values, (tuple, list)) else abs(values)


def check_tolerance(x: torch.Tensor, result: NormResult, spec: NormSpec,
                    scale: float = 1.0) -> float:
    """The largest error a correct float implementation may make on this input.

    Two sources: rounding the output (``u_out·|y|``), and centring, where x − μ loses the
    digits that x and μ share: an error of ``u·|x|`` in x − μ becomes ``u·|x|·|γ|/σ`` in y. So
    the tolerance grows with κ = max |x|/√(σ²+ε), the input's conditioning: about 1e4 for
    values near 10⁴ with σ ≈ 1, where even torch's float32 result is off in the third decimal.
    ``u`` is the unit roundoff of the dtype the statistics are accumulated in (at least
    float32, as torch does), ``u_out`` that of the output's dtype; ``scale`` is the outputs'
    size, max |y| (at least 1).
    """
    u_out = _unit_roundoff(x.dtype)
    u_acc = _unit_roundoff(torch.promote_types(x.dtype, torch.float32))
    dims = result.reduce_dims or tuple(range(x.dim()))
    with torch.no_grad():
        largest = x.abs().float().amax(dim=dims, keepdim=True) if x.numel() else x.float()
        kappa = largest * result.rstd.float()
        kappa = kappa[torch.isfinite(kappa)]
    k = float(kappa.max()) if kappa.numel() else 1.0
    gamma = max(1.0, _largest(spec.gamma))
    return ROUNDOFF_FACTOR * (u_out * max(1.0, scale) + u_acc * max(1.0, k) * gamma)


@dataclass(frozen=True)
class TorchCheck:
    """lnviz and ``torch.nn.functional`` on the same input, each judged against a float64
    evaluation of the same formula (torch's, in float64 on the CPU).

    Attributes:
        difference: max |lnviz − torch|; NaN when torch refused.
        lnviz_error: max |lnviz − reference|; NaN when there is no reference.
        torch_error: max |torch − reference|; NaN when torch refused or there is no reference.
        tolerance: the error a correct implementation may make here (:func:`check_tolerance`).
        refusal: torch's own message when it refuses the computation, else None.
        undefined: positions where σ² = 0 and ε = 0, so the formula is 0/0; left out of the
            comparison (lnviz gives NaN there, some torch kernels 0).
        both_nonfinite: compared positions where both are NaN or ±inf.
        torch_at_undefined: what torch returns at those positions ("0", "NaN", or "").
    """

    difference: float
    lnviz_error: float
    torch_error: float
    tolerance: float
    refusal: str | None = None
    undefined: int = 0
    torch_at_undefined: str = ""
    both_nonfinite: int = 0
    #: the size of the outputs (max |reference| over finite values, at least 1)
    scale: float = 1.0

    @property
    def ill_conditioned(self) -> bool:
        """The tolerance is a sizeable part of the outputs themselves: in this dtype, rounding
        alone may move an output by about its own size, so "within tolerance" says nothing."""
        return self.tolerance > 0.1 * self.scale

    @property
    def has_reference(self) -> bool:
        return not math.isnan(self.lnviz_error)

    @property
    def lnviz_ok(self) -> bool:
        """lnviz is within tolerance of the reference (of torch, when there is no reference)."""
        if self.has_reference:
            return self.lnviz_error <= self.tolerance
        return self.refusal is not None or self.difference <= self.tolerance

    @property
    def torch_ok(self) -> bool:
        if self.refusal is not None:
            return False
        if self.has_reference:
            return self.torch_error <= self.tolerance
        return self.difference <= self.tolerance


def check_against_torch(x: torch.Tensor, layout: str, spec: NormSpec, ours: torch.Tensor,
                        result: NormResult, mask: torch.Tensor | None = None) -> TorchCheck:
    """Run torch on the same input and judge both results against a float64 reference."""
    try:
        theirs, where = torch_reference(x, layout, spec, mask)
    except (RuntimeError, ValueError) as err:  # torch refuses, e.g. BatchNorm with ε = 0
        return TorchCheck(math.nan, math.nan, math.nan, 0.0, refusal=str(err))
    # Compare on full-shape boolean masks: masked BatchNorm compares the real tokens alone.
    keep = None if where is None else where.unsqueeze(channel_dim(layout)).expand(x.shape)
    count, torch_at = 0, ""
    if spec.eps == 0:
        undefined = (result.var == 0).expand(x.shape)
        if keep is not None:
            undefined = undefined & keep
        count = int(undefined.sum())
        if count:
            keep = ~undefined if keep is None else keep & ~undefined
            torch_at = ", ".join(sorted({"NaN" if math.isnan(v) else f"{v:g}"
                                         for v in theirs[undefined].float().unique().tolist()}))
    difference = max_abs_difference(ours, theirs, keep)
    both = ~torch.isfinite(ours) & ~torch.isfinite(theirs)
    both_nonfinite = int((both if keep is None else both & keep).sum())
    lnviz_error = torch_error = math.nan
    reference = theirs
    if x.numel() <= CHECK_REFERENCE_LIMIT:
        x64 = x.detach().to("cpu", torch.float64)
        mask64 = None if mask is None else mask.cpu()
        reference, _ = torch_reference(x64, layout, spec, mask64)
        keep64 = None if keep is None else keep.cpu()
        lnviz_error = max_abs_difference(ours.cpu(), reference, keep64)
        torch_error = max_abs_difference(theirs.cpu(), reference, keep64)
    finite = reference[torch.isfinite(reference)].abs()
    scale = max(1.0, float(finite.max())) if finite.numel() else 1.0
    tolerance = check_tolerance(x, result, spec, scale)
    return TorchCheck(difference, lnviz_error, torch_error, tolerance,
                      undefined=count, torch_at_undefined=torch_at, both_nonfinite=both_nonfinite,
                      scale=scale)


def _remedy(dtype: str, fix: str) -> str:
    """What to do about an input ``dtype`` cannot handle: float64, and ``fix`` (the input
    change that helps, "divide the input by a constant") where float64 is already chosen."""
    if dtype == "float64":
        return f"{fix[0].upper()}{fix[1:]} first: float64 is the widest precision."
    return f"Choose float64 under Precision in the sidebar, or {fix} first."


def describe_check(check: TorchCheck, spec: NormSpec, dtype: str,
                   overflowed: bool = False) -> tuple[str, str]:
    """(level, message) for the Explorer's "Check against PyTorch": level is "success",
    "warning" or "error". Says which side is closer to the float64 reference and why they
    differ; an error only where lnviz itself is wrong. ``overflowed``: σ² overflowed in
    ``dtype`` (see :func:`explain`)."""
    if check.refusal is not None:
        return "warning", (
            f"torch.nn.functional refuses this computation: “{check.refusal}”. "
            f"lnviz computes the formula as written (shown above) — with ε = {spec.eps:g} a "
            "feature whose values are all equal gives 0/0, which lnviz shows as NaN. There is "
            "nothing of torch's to compare with; choose ε > 0 to compare.")
    reference = "a float64 evaluation of the same formula on the same input"
    why = ("it grows with |x|/σ, because x − μ loses the digits x and μ share"
           if NORM_TABLE[spec.norm].centred else
           "RMSNorm subtracts nothing, so no digits are lost to centring; it grows with "
           "|x|/RMS, which is at most the square root of a group's size")
    errors = (f"lnviz is off by {check.lnviz_error:.3g}, torch by {check.torch_error:.3g} "
              f"(tolerance {check.tolerance:.3g} for this input in {dtype}: {why})")
    if check.undefined:
        statistic = "σ²" if NORM_TABLE[spec.norm].centred else "mean(x²)"
        undefined = (f" {check.undefined:,} value(s) sit in groups with {statistic} = 0 and "
                     "ε = 0, where "
                     "the formula is 0/0 and has no value: lnviz shows NaN, torch gives "
                     f"{check.torch_at_undefined or 'NaN'}; they are left out of the comparison.")
    else:
        undefined = ""
    if check.both_nonfinite:
        undefined += (f" {check.both_nonfinite:,} output value(s) are NaN or infinite in both "
                      "(see the warnings above); they count as agreeing, and the numbers here "
                      "compare the rest.")
    if not check.has_reference:
        verdict = "matches" if check.lnviz_ok else "differs from"
        message = (f"lnviz {verdict} torch.nn.functional: largest |lnviz − torch| = "
                   f"{check.difference:.3g} (tolerance {check.tolerance:.3g} for {dtype}; "
                   f"no float64 reference above {CHECK_REFERENCE_LIMIT:,} values).{undefined}")
        return ("success" if check.lnviz_ok else "error"), message
    closer = ("lnviz is the closer of the two" if check.lnviz_error < check.torch_error
              else "torch is the closer of the two" if check.torch_error < check.lnviz_error
              else "both are equally close")
    if overflowed:  # the float64 reference overflows too when the input is float64
        return "warning", (
            f"Both overflowed (see the warning above): largest |lnviz − torch| = "
            f"{check.difference:.3g}, and neither is the true output. "
            f"{_remedy(dtype, 'divide the input by a constant')}")
    if check.ill_conditioned:
        remedy = _remedy(dtype, "subtract a constant close to the values")
        return "warning", (
            f"This input is too ill-conditioned for {dtype} to settle the comparison: its values "
            f"sit so far from their groups' means, next to their spread, that rounding alone "
            f"may move an output by {check.tolerance:.3g}, more than a tenth of the outputs' "
            f"scale ({check.scale:.3g}: their largest |value|, or 1 when that is smaller). "
            f"Against {reference}, lnviz is off by "
            f"{check.lnviz_error:.3g} and torch by {check.torch_error:.3g}; {closer}, and they "
            f"differ from each other by {check.difference:.3g}. {remedy}{undefined}")
    if check.lnviz_ok and check.torch_ok:
        return "success", (
            f"lnviz matches torch.nn.functional: largest |lnviz − torch| = "
            f"{check.difference:.3g}. Against {reference}, {errors}.{undefined}")
    if check.lnviz_ok:
        return "warning", (
            f"lnviz and torch.nn.functional differ by {check.difference:.3g}, and the rounding "
            f"is torch's: against {reference}, {errors}; {closer}. torch's {dtype} kernels "
            f"lose digits here that lnviz's two-pass statistics keep.{undefined}")
    if check.torch_ok and dtype == "float64":
        # the reference is then torch's own float64 evaluation: it cannot referee between
        # them (±1e308 made torch's GroupNorm NaN where lnviz's 0 was exact)
        return "warning", (
            f"lnviz and torch.nn.functional differ by {check.difference:.3g}. In float64 the "
            f"reference is torch's own float64 evaluation, so it cannot say which is right: "
            f"{errors}. Where the values are this large or this far apart, either side's "
            "statistics can overflow or lose digits; dividing the input by a constant and "
            f"comparing again tells them apart.{undefined}")
    if check.torch_ok:
        return "error", (
            f"lnviz differs from torch.nn.functional by {check.difference:.3g}, and the error "
            f"is lnviz's: against {reference}, {errors}.{undefined}")
    return "warning", (
        f"Neither lnviz nor torch.nn.functional computes this accurately in {dtype}: against "
        f"{reference}, {errors}; {closer}. Choose float64 under Precision in the sidebar."
        f"{undefined}")


@dataclass(frozen=True, eq=False)
class Exploration:
    """Everything the Explorer shows for one batch and one setting, computed once."""

    x: torch.Tensor
    result: NormResult
    input_values: np.ndarray
    output_values: np.ndarray
    groups: np.ndarray
    mean_in: np.ndarray
    std_in: np.ndarray
    mean_out: np.ndarray
    std_out: np.ndarray
    check: TorchCheck
    impl: str
    nonfinite_inputs: int
    nonfinite_outputs: int
    histogram_in: tuple[np.ndarray, np.ndarray]
    histogram_out: tuple[np.ndarray, np.ndarray]
    #: values that were finite in the batch and became ±inf in the chosen dtype
    overflowed_inputs: int = 0
    #: groups whose σ² (the mean square for RMSNorm) overflowed to inf from finite values
    overflowed_groups: int = 0
    #: the fewest values any group's μ and σ are taken over
    smallest_group: int = 0
    #: the largest rounding of an input value by the conversion to the chosen dtype, relative
    #: to its group's spread (σ; the RMS for RMSNorm, which subtracts nothing; 0 when nothing
    #: was rounded, or above CHECK_REFERENCE_LIMIT values)
    rounding: float = 0.0
    #: the spread the norm divides by, per group, before and after: σ, or the RMS for RMSNorm
    spread_in: np.ndarray | None = None
    spread_out: np.ndarray | None = None
    #: how many values each group's statistics are taken over (real tokens for masked BatchNorm)
    sizes: np.ndarray | None = None
    #: BatchNorm in eval mode: the running μ and √(running σ²) it normalized with, per group
    running: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def agrees_with_torch(self) -> bool:
        """lnviz is right: within tolerance of the float64 reference (or of torch)."""
        return self.check.lnviz_ok

    @property
    def max_difference(self) -> float:
        return self.check.difference

    @property
    def tolerance(self) -> float:
        return self.check.tolerance

    def intermediates(self) -> dict[str, torch.Tensor]:
        """Input, μ (not for RMSNorm), σ², rstd, x̂ and output, by name, for downloading."""
        r = self.result
        named = {"input": self.x, "mean": r.mean, "var": r.var, "rstd": r.rstd,
                 "x_hat": r.x_hat, "output": r.output}
        return {name: t for name, t in named.items() if t is not None}


def explore(batch: Batch, spec: NormSpec, device: str = "cpu", dtype: str = "float32"
            ) -> Exploration:
    """Normalize ``batch`` on ``device`` in ``dtype``, check it against torch and derive the
    per-group statistics the figures show."""
    x = to_tensor(batch.values, device, dtype)
    mask = None if batch.mask is None else torch.as_tensor(batch.mask, device=x.device)
    impl = pick_impl(x.numel())
    with torch.no_grad():
        result = normalize(x, batch.layout, spec, mask, impl)
        check = check_against_torch(x, batch.layout, spec, result.output, result, mask)
    ids = group_ids(tuple(x.shape), batch.layout, spec)
    mean_in, std_in = group_stats(x, batch.layout, spec, mask)
    mean_out, std_out = group_stats(result.output, batch.layout, spec, mask)
    spread_in, spread_out = std_in, std_out
    if not NORM_TABLE[spec.norm].centred:  # RMSNorm divides by the RMS, not by σ
        spread_in = group_rms(x, batch.layout, spec, mask)
        spread_out = group_rms(result.output, batch.layout, spec, mask)
    input_values = _for_display(x)
    output_values = _for_display(result.output)
    nonfinite_inputs = _count_nonfinite(input_values)
    source_nonfinite = _count_nonfinite(np.asarray(batch.values))
    return Exploration(
        x=x, result=result, input_values=input_values, output_values=output_values,
        groups=ids, mean_in=mean_in, std_in=std_in, mean_out=mean_out, std_out=std_out,
        check=check, impl=impl,
        nonfinite_inputs=nonfinite_inputs,
        nonfinite_outputs=_count_nonfinite(output_values),
        histogram_in=histogram(input_values), histogram_out=histogram(output_values),
        overflowed_inputs=max(0, nonfinite_inputs - source_nonfinite),
        # σ² (the mean square for RMSNorm) is inf only when finite values overflowed: an inf
        # or NaN input makes it NaN instead.
        overflowed_groups=int(torch.isinf(result.var).sum()),
        smallest_group=int(np.bincount(ids.ravel()).min()) if ids.size else 0,
        rounding=_rounding(batch, x, ids, spread_in),
        spread_in=spread_in, spread_out=spread_out,
        sizes=group_sizes(x, batch.layout, spec, mask),
        running=(to_numpy(result.mean).ravel(), np.sqrt(to_numpy(result.var).ravel()))
        if spec.norm == NormKind.BATCH and not spec.training else None,
    )


#: Input rounding, relative to a group's σ, above which :func:`explain` speaks up: about the
#: effect float16's three digits have on ordinary data is ten times smaller.
ROUNDING_NOTE = 0.01


def _rounding(batch: Batch, x: torch.Tensor, ids: np.ndarray, std: np.ndarray) -> float:
    """max over groups of max |x in its dtype − x as given| / the group's spread ``std`` (σ of
    the rounded values; their RMS for RMSNorm): how much converting the input moved it, in
    units of what the norm divides by."""
    source = np.asarray(batch.values)
    if x.numel() > CHECK_REFERENCE_LIMIT or source.dtype.itemsize <= x.element_size():
        return 0.0
    with np.errstate(invalid="ignore"):  # inf − inf: NaN, set to 0 below
        error = np.abs(to_numpy(x) - source.astype(np.float64))
    error[~np.isfinite(error)] = 0.0  # values beyond the dtype: explain() names them apart
    if not error.any():
        return 0.0
    largest = np.zeros(len(std))
    np.maximum.at(largest, ids.ravel(), error.ravel())
    largest[np.bincount(ids.ravel(), minlength=len(std)) < 2] = 0.0  # one value: no spread
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(largest > 0, largest / std, 0.0)
    ratio = ratio[~np.isnan(ratio)]
    return float(ratio.max()) if ratio.size else 0.0


def impl_note(ex: Exploration) -> str:
    """Which code computed the figures: for a large tensor, lnviz's ``impl="fast"``, whose
    numbers are torch's fused kernels' (so their rounding, not the readable code's)."""
    if ex.impl != "fast":
        return (f"{ex.x.numel():,} values: computed with lnviz's readable code "
                "(`impl=\"scratch\"`), every intermediate kept.")
    return (f"{ex.x.numel():,} values: computed with lnviz's `impl=\"fast\"` path — the same "
            "formula as the readable code, evaluated by torch's fused kernels without the "
            "full-size intermediates, so its last digits are torch's rounding (the check below "
            "says how close that is).")


def _num(value: float) -> str:
    """A statistic as the notes print it: three decimals in the everyday range, three
    significant digits beyond it, and no "−0.000"."""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("∞" if value > 0 else "−∞")
    if abs(value) < 5e-4:
        return "0"
    text = f"{value:.3f}" if 1e-3 <= abs(value) < 1e4 else f"{value:.3g}"
    return text.replace("-", "−")


def _span(values: np.ndarray) -> str:
    """"a" when every finite value prints as a, else "a to b" (smallest to largest)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return "NaN"
    low, high = _num(float(finite.min())), _num(float(finite.max()))
    return low if low == high else f"{low} to {high}"


def _is_identity(spec: NormSpec) -> bool:
    def all_equal(value: float | tuple[float, ...], to: float) -> bool:
        return all(v == to for v in value) if isinstance(value, (tuple, list)) else value == to

    return all_equal(spec.gamma, 1.0) and all_equal(spec.beta, 0.0)


def stats_heading(spec: NormSpec) -> str:
    """The title over the figures: what the cells of one group share, for this norm and mode."""
    if not NORM_TABLE[spec.norm].centred:
        return "Which numbers share one root-mean-square"
    if spec.norm == NormKind.BATCH and not spec.training:
        return "Which numbers share one running mean and deviation"
    return "Which numbers share a mean and a deviation"


def shared_title(spec: NormSpec) -> str:
    """The title of the heatmap's middle panel: the cells that share one statistic."""
    if not NORM_TABLE[spec.norm].centred:
        return "cells sharing one RMS"
    if spec.norm == NormKind.BATCH and not spec.training:
        return "cells sharing one running μ, σ"
    return "cells sharing one μ, σ"


def statistics_note(ex: Exploration, spec: NormSpec) -> str:
    """What the before/after statistics chart shows for this norm and setting, with the numbers
    on it: the span of the groups' means and spreads after normalizing, and why they are what
    they are — 0 and 1 (up to ε) where a group is centred and scaled with its own statistics;
    RMS 1 and a mean that stays for RMSNorm; neither for BatchNorm in eval mode."""
    centred = NORM_TABLE[spec.norm].centred
    live = np.isfinite(ex.spread_in) & (ex.spread_in > 0)
    dead = int(np.count_nonzero(ex.spread_in == 0))
    # a spread too large for the dtype: its σ² overflowed (explain() warns), it is not "none"
    overflowed = int(np.count_nonzero(np.isposinf(ex.spread_in)))
    statistic = "σ²" if centred else "mean(x²)"
    too_large = (f"Here every group's {statistic} overflowed (see the warnings above)"
                 if overflowed else "")
    means, spreads = _span(ex.mean_out[live]), _span(ex.spread_out[live])
    identity = _is_identity(spec)
    if spec.norm == NormKind.BATCH and not spec.training:
        m = int(ex.sizes.min()) if ex.sizes is not None and ex.sizes.size else 0
        share = 1 - (1 - spec.momentum) ** spec.warmup_steps
        far = "nearly all the way" if share > 0.995 else f"{share:.0%} of the way"
        differ = [what for what, span, target in (("0", means, "0"), ("1", spreads, "1.000"))
                  if span != target]
        note = (f"In eval mode BatchNorm subtracts a running μ and divides by √(running σ² + ε) "
                f"(the ◆ markers), which start at 0 and 1 and move {spec.momentum:g} of the way "
                f"to this batch's statistics at each of the {spec.warmup_steps} training "
                f"pass(es): {far} by now. So the groups end with means {means} and deviations "
                f"{spreads}" + (f", not {' and '.join(differ)}" if differ else ""))
        if m > 1:
            note += (f". Even after many passes they would not reach deviation 1: the running σ² "
                     f"tends to the unbiased variance, m/(m − 1) = {m}/{m - 1} times σ² (m = {m} "
                     f"values per feature), so the deviation tends to about √((m − 1)/m) = "
                     f"{math.sqrt((m - 1) / m):.3f}")
        if not identity:
            note += "; the γ and β set here then scale and shift each feature"
    elif not centred:
        note = ("RMSNorm divides each group by its own √(mean(x²) + ε) and subtracts nothing, "
                "so every group's RMS becomes √(mean(x²)/(mean(x²) + ε)), 1 unless ε is "
                "comparable to mean(x²), while its mean keeps its sign: a group's mean after "
                "is its mean before divided by its RMS. ")
        if not live.any():
            note += too_large or "Here every group is all zeros"
        elif identity:
            note += f"Here the RMS after is {spreads} and the means are {means}"
        else:
            note += (f"With the γ set here, y = γ·x̂: the groups end with RMS {spreads} and "
                     f"means {means}")
        if dead:
            note += (f"; {dead:,} group(s) of zeros have no RMS to divide by: "
                     + ("0/0 makes them NaN at ε = 0" if spec.eps == 0 else "they stay 0"))
    else:
        note = ("Each group is centred on its own μ and divided by its own √(σ² + ε), so x̂ has "
                "mean 0 and deviation √(σ²/(σ² + ε)) in every group, 1 unless ε is comparable "
                "to σ². ")
        squeezed = ex.spread_in[live] ** 2 / (ex.spread_in[live] ** 2 + spec.eps)
        if not live.any():
            note += too_large or "Here no group has any spread"
        elif identity:
            note += f"Here the groups end with means {means} and deviations {spreads}"
        else:
            note += (f"The chart shows y = γ·x̂ + β: with the γ and β set here the groups end "
                     f"with means {means} and deviations {spreads}")
        if live.any() and squeezed.min() < 0.98:
            note += (f" (ε = {spec.eps:g} is comparable to or larger than σ² in "
                     f"{int(np.count_nonzero(squeezed < 0.98)):,} group(s), so their x̂ has "
                     f"deviation as low as {math.sqrt(squeezed.min()):.3g})")
        if dead:
            note += (f"; {dead:,} group(s) whose values are all equal have no spread to scale: "
                     + ("0/0 makes them NaN at ε = 0" if spec.eps == 0 else
                        "x − μ = 0 there, so x̂ = 0 and y = β"))
    if overflowed and live.any():
        note += (f"; {overflowed:,} group(s) whose {statistic} overflowed are left out of these "
                 "numbers")
    if ex.nonfinite_inputs:
        note += "; groups holding NaN or infinite inputs get NaN statistics instead"
    return note + "."


def explain(ex: Exploration, spec: NormSpec, dtype: str) -> list[str]:
    """Plain-language warnings about what in this input makes the output unusual, and why:
    values too large for ``dtype``, NaN or inf in the input, statistics that overflowed, 0/0
    at ε = 0, groups of a single value. Empty when nothing is unusual."""
    notes = []
    largest = float(torch.finfo(getattr(torch, dtype)).max)
    centred = NORM_TABLE[spec.norm].centred
    statistic = "σ²" if centred else "mean(x²)"
    if ex.overflowed_inputs:
        notes.append(
            f"{ex.overflowed_inputs:,} input values lie beyond {dtype}'s range (±{largest:.3g}) "
            "and became ±inf when converted, so their groups' outputs are NaN. Choose float64 "
            "under Precision in the sidebar, or rescale the input.")
    if ex.rounding > ROUNDING_NOTE:
        notes.append(
            f"Converting the input to {dtype} rounds some values by "
            + (f"{ex.rounding:.0%} of their group's {_spread_word(spec)}"
               if math.isfinite(ex.rounding)
               else "more than their group's whole spread (distinct values became equal)")
            + f": they carry more digits than {dtype} keeps ({_DIGITS.get(dtype, '')}). The "
            "normalized values move by as much, "
            + ("and lnviz and torch agree on the rounded input. " if ex.agrees_with_torch else
               "and both lnviz and torch start from the rounded input (the comparison below "
               "says how far they then differ). ")
            + "Choose float64 under Precision in the sidebar.")
    own = ex.nonfinite_inputs - ex.overflowed_inputs
    if own > 0:
        notes.append(
            f"The input holds {own:,} NaN or infinite values. Every group that contains one gets "
            f"{'a NaN mean square' if not centred else 'a NaN mean and variance'}, so its "
            "whole output is NaN; the other groups are unaffected.")
    if ex.overflowed_groups:
        finite = ex.input_values[np.isfinite(ex.input_values)]
        size = float(np.abs(finite).max()) if finite.size else largest
        square = (f"{size * size:.0e}" if math.isfinite(size * size)
                  else f"1e+{2 * math.floor(math.log10(size))}")
        notes.append(
            f"{statistic} overflowed in {ex.overflowed_groups:,} group(s): values around "
            f"{size:.0e} square to about {square}, beyond {dtype}'s largest number "
            f"({largest:.3g}). lnviz's {statistic} is then inf and its output 0 (torch gives "
            "NaN or 0), "
            "but the true output is finite — normalizing ignores the scale. "
            f"{_remedy(dtype, 'divide the input by a constant')}")
    if ex.nonfinite_outputs and not ex.nonfinite_inputs and not ex.overflowed_groups:
        notes.append(f"{ex.nonfinite_outputs:,} output values are NaN or infinite. "
                     + _nonfinite_output_cause(ex, spec, dtype, largest))
    if ex.smallest_group == 1 and centred and (spec.norm != NormKind.BATCH or spec.training):
        notes.append(
            "Some groups hold a single value, so μ = x and σ² = 0 there: x − μ = 0 and the "
            "output is β (or NaN with ε = 0). Normalizing needs at least two values per group "
            "— for LayerNorm, at least two features.")
    return notes


#: What each precision keeps exactly, for the rounding note.
_DIGITS = {
    "float32": "it holds integers exactly up to 2²⁴ = 16,777,216 and about 7 significant "
               "digits",
    "float16": "it holds integers exactly up to 2¹¹ = 2,048 and about 3 significant digits",
    "bfloat16": "it holds integers exactly up to 2⁸ = 256 and about 2 to 3 significant digits",
    "float64": "it holds integers exactly up to 2⁵³ and about 16 significant digits",
}


def _spread_word(spec: NormSpec) -> str:
    return "RMS" if not NORM_TABLE[spec.norm].centred else "spread σ"


def _nonfinite_output_cause(ex: Exploration, spec: NormSpec, dtype: str, largest: float) -> str:
    """Why a finite input gave a NaN or infinite output: γ/β beyond the dtype, 0/0 at ε = 0,
    1/√(σ²+ε) overflowing, or γ·x̂ + β overflowing."""
    params = max(_largest(spec.gamma), _largest(spec.beta))
    if params > largest:
        return (f"Some γ or β values ({params:.3g} in size) lie beyond {dtype}'s range "
                f"(±{largest:.3g}) and became ±inf, so y = γ·x̂ + β is ±inf or NaN there. Keep "
                f"γ and β within ±{largest:.3g}, or choose float64 under Precision.")
    rstd = ex.result.rstd
    if spec.eps == 0 and bool((ex.result.var == 0).any()) and not NORM_TABLE[spec.norm].centred:
        return ("With ε = 0, a group of zeros has mean(x²) = 0, so x = 0 is divided by "
                "√0 = 0, and in floating point 0/0 is NaN: the formula has no value there. "
                "ε > 0 is what gives such a group an output: 0/√ε = 0.")
    if spec.eps == 0 and bool((ex.result.var == 0).any()):
        return ("With ε = 0, a group whose values are all equal has σ² = 0, so x − μ = 0 is "
                "divided by √0 = 0, and in floating point 0/0 is NaN: the formula has no value "
                "there (torch's InstanceNorm returns 0 by convention; its BatchNorm refuses "
                "ε = 0 in training mode and gives NaN in evaluation mode). "
                "ε > 0 is what gives such a group an output: 0/√ε = 0.")
    if not bool(torch.isfinite(rstd).all()):
        return (f"1/√(σ²+ε) is too large for {dtype} in some groups (σ² + ε is below "
                f"{dtype}'s smallest normal numbers): raise ε or choose float64 under "
                "Precision.")
    return (f"The output γ·x̂ + β exceeds {dtype}'s range (±{largest:.3g}): |γ| up to "
            f"{_largest(spec.gamma):.3g} times |x̂| up to a few units, plus β. Use a smaller γ "
            "or β, or choose float64 under Precision.")


def _for_display(t: torch.Tensor) -> np.ndarray:
    """A tensor as numpy for figures: float64 stays float64 (its values may not fit float32)."""
    return to_numpy(t, torch.float64 if t.dtype == torch.float64 else torch.float32)


def _count_nonfinite(values: np.ndarray) -> int:
    return int(values.size - np.count_nonzero(np.isfinite(values)))


def histogram(values: np.ndarray, bins: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """(bin centres, counts) of the finite values; empty arrays when there are none.

    Binned in float64 after dividing by the largest magnitude, so that values near a dtype's
    limit (±3e38 in float32, ±1.8e308 in float64) do not overflow the range max − min.
    """
    finite = values[np.isfinite(values)] if _count_nonfinite(values) else values.ravel()
    if finite.size == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    finite = finite.astype(np.float64)
    scale = float(np.abs(finite).max()) or 1.0
    counts, edges = np.histogram(finite / scale, bins=bins)
    return (edges[:-1] / 2 + edges[1:] / 2) * scale, counts


# --- Rows that normalize alike, and the course notes' numbers checked ---------------------------


def _vector(values: np.ndarray) -> str:
    """[−1.22, 0, 1.22]: three significant digits, as the notes print a short vector."""
    def one(v: float) -> str:
        return "0" if abs(v) < 5e-4 else f"{v:.3g}".replace("-", "−")

    return "[" + ", ".join(one(float(v)) for v in values) + "]"


def _pattern(row: np.ndarray, centred: bool) -> tuple[np.ndarray, float, float] | None:
    """The row as a + b·p with b > 0 and p as plain as possible: p starts at 0 with a smallest
    step of 1 for LayerNorm ([1, 2, 3] = 1 + 1·[0, 1, 2]); for RMSNorm a = 0 and the smallest
    nonzero |p| is 1 ([2, 4, 6] = 2·[1, 2, 3]). None when the row has no spread to scale by."""
    if centred:
        a = float(row.min())
        steps = np.diff(np.unique(row))
        steps = steps[steps > 0]
        if steps.size == 0:
            return None
        b = float(steps.min())
    else:
        a = 0.0
        sizes = np.abs(row[row != 0])
        if sizes.size == 0:
            return None
        b = float(sizes.min())
    return (row - a) / b, a, b


def shared_outputs(ex: Exploration, spec: NormSpec, batch: Batch) -> str | None:
    """When several rows (tokens) of a per-row LayerNorm or RMSNorm come out the same, say so
    and say why, from the numbers: each such row is a + b·p for one shape p (LayerNorm) or b·p
    (RMSNorm), and the norm removes a and b. The two sentences' seven tokens are all a + b·[0, 1,
    2], so
    LayerNorm turns every one of them into [−1.22, 0, 1.22]. None when no two rows share an
    output (to four decimals), or for other norms."""
    if not NORM_TABLE[spec.norm].trailing or spec.dims != 1 or ex.x.numel() > CHECK_REFERENCE_LIMIT:
        return None
    centred = NORM_TABLE[spec.norm].centred
    width = ex.x.shape[-1]
    rows = to_numpy(ex.x).reshape(-1, width)
    x_hat = to_numpy(ex.result.x_hat).reshape(-1, width)
    keep = np.isfinite(x_hat).all(axis=1) & (to_numpy(ex.result.var).reshape(-1) > 0)
    if batch.mask is not None:
        keep &= batch.mask.reshape(-1)
    index = np.flatnonzero(keep)
    if width < 2 or index.size < 2:
        return None
    _, inverse, counts = np.unique(np.round(x_hat[index], 4), axis=0, return_inverse=True,
                                   return_counts=True)
    best = int(counts.argmax())
    if counts[best] < 2:
        return None
    members = index[inverse.ravel() == best]
    one = "token" if batch.layout == Layout.NLC else "row"
    noun = f"real {one}s" if batch.mask is not None else f"{one}s"
    labels = batch.row_labels if batch.row_labels and len(batch.row_labels) == len(rows) \
        else None

    def name(i: int) -> str:
        if labels:
            return f"“{labels[i]}”"
        lead = tuple(int(j) for j in np.unravel_index(i, tuple(ex.x.shape[:-1])))
        return str(lead) if len(lead) > 1 else f"row {lead[0]}"

    every = "Both" if members.size == 2 else f"All {members.size:,}"
    who = (f"{every} {noun}" if members.size == index.size
           else f"{members.size:,} of the {index.size:,} {noun}")
    if members.size <= 8:
        who += " (" + ", ".join(name(int(i)) for i in members) + ")"
    note = f"{who} normalize to the same x̂ = {_vector(x_hat[members[0]])}"
    first = _pattern(rows[members[0]], centred)
    fits = first is not None and width <= 8
    examples = []
    if fits:
        p = first[0]
        for i in (members[0], members[-1]):
            pattern = _pattern(rows[i], centred)
            if pattern is None or not np.allclose(pattern[0], p, rtol=1e-4, atol=1e-4):
                fits = False
                break
            _, a, b = pattern
            examples.append(f"{name(int(i))} = " + (f"{a:.4g} + " if centred else "")
                            + f"{b:.4g}·{_vector(p)}")
    if centred:
        if fits:
            note += (f": each is a + b·{_vector(p)} with its own a and b > 0 ("
                     + "; ".join(examples) + ")")
        return note + (f", and LayerNorm removes exactly that: subtracting each {one}'s mean "
                       f"takes away a and leaves b·(p − mean(p)), dividing by its deviation "
                       f"takes away b, and only the shape is left. After LayerNorm these "
                       f"{one}s can no longer be told apart by their mean or scale.")
    if fits:
        note += (f": each is b·{_vector(p)} with its own b > 0 (" + "; ".join(examples) + ")")
    return note + (f", and RMSNorm removes only that scale b. It subtracts no mean, so {one}s "
                   "that differ by more than a scale keep different outputs.")


@dataclass(frozen=True)
class WorkedCheck:
    """A course note's worked numbers for one preset, recomputed by lnviz: ``table`` has one row per
    claim ("step", "the source writes", "lnviz computes", "verdict"); ``note`` says how."""

    title: str
    table: pd.DataFrame
    note: str


def _minus(text: str) -> str:
    """A formatted number with a typographic minus sign."""
    return text.replace("-", "−")


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _judge(seed: str, exact: float, from_seed: float | None = None) -> str:
    """Whether the source's number ``seed`` (text, as printed) is ``exact`` rounded to the source's
    decimals; if not, whether it is ``exact`` cut off there, or what its own earlier rounded
    numbers (``from_seed``) give."""
    d = _decimals(seed)
    claimed = float(seed.replace("−", "-"))
    rounded = round(exact, d)
    # two digits beyond the source's, so that the rounding shown is the one made (1.2247, not
    # 1.225, "rounds to 1.22")
    shown = f"{exact:.{d + 2}f}".rstrip("0").rstrip(".") if d else f"{exact:.4g}"
    if rounded == claimed:
        return _minus(f"✓ {shown} rounds to {seed}")
    verdict = _minus(f"slip: {shown} rounds to {rounded:.{d}f}")
    if from_seed is not None and round(from_seed, d) == claimed:
        return verdict + _minus(f"; the source's {seed} follows from its own earlier rounding "
                                f"({from_seed:.{d + 2}f})")
    if math.trunc(exact * 10**d) / 10**d == claimed:
        return verdict + f"; the source cut the digits off instead of rounding ({seed})"
    return verdict + f", not {seed}"


def _article_check(key: str) -> WorkedCheck:
    preset = get_preset(key)
    x = torch.as_tensor(preset.values, dtype=torch.float64)
    labels = list(preset.labels or ())
    rows = []
    if key == "padded_tokens":
        # The transformer article counts the pad in the statistics (it has no mask) and uses no ε.
        bn = batch_norm(x, None, None, training=True, eps=0.0, channel_dim=-1)
        mean, sd = float(bn.mean[..., 0]), math.sqrt(float(bn.var[..., 0]))
        at = {t: bn.x_hat.reshape(-1, 3)[labels.index(t), 0].item() for t in ("I", "powerful")}
        values = x.reshape(-1, 3)[:, 0]
        rows += [
            ("BatchNorm, feature 0 with the pad: mean", "3.5", mean, None),
            ("… standard deviation", "2.29", sd, None),
            ("“I”: (1 − 3.5)/2.29", "−1.09", at["I"], (values[0].item() - 3.5) / 2.29),
            ("“powerful”: (7 − 3.5)/2.29", "1.52", at["powerful"],
             (values[labels.index("powerful")].item() - 3.5) / 2.29),
        ]
    ln = layer_norm(x.reshape(-1, 3)[:1], 3, eps=0.0)  # "I" = [1, 2, 3]
    rows += [
        ("LayerNorm of “I” = [1, 2, 3]: mean", "2", float(ln.mean), None),
        ("… standard deviation", "0.81", math.sqrt(float(ln.var)), None),
        ("… normalized: [−1.23, 0, 1.23]", "1.23", float(ln.x_hat[0, 2]), 1 / 0.81),
    ]
    table = pd.DataFrame(
        [(step, seed, _minus(f"{exact:.5g}"), _judge(seed, exact, own))
         for step, seed, exact, own in rows],
        columns=["step", "the source writes", "lnviz computes", "verdict"])
    return WorkedCheck(
        "The transformer article's numbers, checked", table,
        "lnviz recomputes each number in float64 with ε = 0, as the source's arithmetic has no "
        "ε; “from its own earlier rounding” repeats the source's step with the numbers it had "
        "already rounded.")


def _notes_check() -> WorkedCheck:
    words = torch.as_tensor(get_preset("two_words").values)  # (words, batch, embedding), float32
    exact = words.double()
    eps = 1e-5
    ln = layer_norm(exact, (1, 3), eps=eps)
    mean, var = ln.mean.flatten(), ln.var.flatten()
    sd = var.sqrt()
    first = exact[0, 0]  # [0.2, 0.1, 0.3]
    under_root = float((first[2] - mean[0]) / (var[0] + eps).sqrt())
    outside = float((first[2] - mean[0]) / (sd[0] + eps))
    m = words.shape[-1]
    wrong_mean = (1 / m) * words.sum(dim=0)
    across = words.mean(dim=0)
    one_two_three = float(layer_norm(torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64), 3,
                                     eps=eps).x_hat[0, 2])
    no_eps = float(layer_norm(exact, (1, 3), eps=0.0).x_hat[0, 0, 2])
    # The note's own float32 steps: μ = (1/m)·Σx, then (x − μ)/√(σ² + ε).
    mu = (1 / m) * words.sum(dim=-1, keepdim=True)
    sigma2 = (1 / m) * ((words - mu) ** 2).sum(dim=(-2, -1), keepdim=True)
    notes_first = float(((words - mu) / torch.sqrt(sigma2 + eps))[0, 0, 0])
    lnviz_first = float(layer_norm(words, (1, 3), eps=eps).x_hat[0, 0, 0])
    true_first = float(((exact - exact.mean(-1, keepdim=True))
                        / torch.sqrt(exact.var(-1, unbiased=False, keepdim=True) + eps))[0, 0, 0])

    def vec(t: torch.Tensor) -> str:
        return "[" + ", ".join(_minus(f"{float(v):.4g}") for v in t.flatten()) + "]"

    ratio = (2 / 3) / float(var[0])  # [1, 2, 3]'s σ² against the first word's

    rows = [
        ("μ, labelled “batch mean”", "batch mean", f"μ per word = {vec(mean)}",
         "one mean per word, over its (batch, embedding) = 3 values: the batch dim here has "
         "size 1, and nothing is averaged across samples"),
        ("σ², labelled “batch standard deviation”", "batch standard deviation",
         f"σ² per word = {vec(var)}",
         f"a variance, not a standard deviation (σ = {vec(sd)}), and again one per word"),
        # code in backticks: the table renders markdown, and "# …" would be a heading
        ("“add epsilon to the standard deviation”, `# std = epsilon + torch.sqrt(sigma2)`",
         "ε + σ", f"√(σ² + ε) = {math.sqrt(var[0] + eps):.6g}, ε + σ = {sd[0] + eps:.6g}",
         f"ε goes under the root, added to the variance (as its next cell does): x̂ of 0.3 is "
         f"{under_root:.5g} with √(σ² + ε), {outside:.5g} with ε + σ"),
        ("`# mu = (1 / m) * torch.sum(X, dim=0)`", "mean over dim=0",
         f"{vec(wrong_mean)}",
         f"dim 0 holds the words, so this averages across words feature by feature (BatchNorm's "
         f"direction; {vec(across)} with the right count) and divides by m = {m} features "
         f"although it sums {words.shape[0]} words; LayerNorm's μ is {vec(mean)}"),
        ("prints 1.2238 where torch's [1, 2, 3] gives 1.2247", "1.2238",
         f"{abs(float(ln.x_hat[0, 0, 2])):.5g}",
         f"[0.2, 0.1, 0.3] is 0.1·[2, 1, 3], a reordered [1, 2, 3]: without ε both give "
         f"±{no_eps:.5g}. But its σ² = {var[0]:.3g} is {ratio:.3g} times smaller than [1, 2, 3]'s, "
         f"so "
         f"ε = 1e-5 is {eps / var[0]:.2%} of it and x̂ shrinks by √(1 + ε/σ²): "
         f"{no_eps:.5g}/{math.sqrt(1 + eps / var[0]):.5g} = {abs(float(ln.x_hat[0, 0, 2])):.5g};"
         f" for [1, 2, 3] ε/σ² is {eps / (2 / 3):.1e} and x̂ stays {one_two_three:.5g}"),
        ("prints −0.0000 (−1.8236e-07 in Y) for 0.2 − μ", _minus(f"{notes_first:.5g}"),
         _minus(f"{lnviz_first:.4g}"),
         f"float32 stores 0.2, 0.1, 0.3 as {words[0, 0, 0].item():.9f}, "
         f"{words[0, 0, 1].item():.9f}, {words[0, 0, 2].item():.9f}, whose mean is not the "
         f"stored 0.2: x̂ is really {_minus(f'{true_first:.4g}')} (float64 of the stored "
         f"numbers). The notes' μ = (1/m)·Σx rounds once more, giving "
         f"{_minus(f'{notes_first:.5g}')}; lnviz's corrected two-pass mean gives "
         f"{_minus(f'{lnviz_first:.4g}')}"),
    ]
    table = pd.DataFrame(rows, columns=["step", "the source writes", "lnviz computes", "verdict"])
    return WorkedCheck(
        "The two-word notes' slips, named", table,
        "Each row runs the source's step (in float32, as its notebook does) beside lnviz's "
        "LayerNorm over the last two dims (ε = 1e-5). Its batch-dim questions — a reshape where "
        "a permute was meant, and dims = (−2, −1) pooling over the batch dim once it holds more "
        "than one sample — are worked through on the Shapes page.")


def worked_checks(key: str) -> WorkedCheck | None:
    """The worked numbers of the seed a preset comes from, recomputed: the transformer article's
    BatchNorm and
    LayerNorm arithmetic (padded_tokens, one_two_three) and the two-word notes' slips (two_words).
    None for a preset with no worked numbers to check."""
    if key in ("padded_tokens", "one_two_three"):
        return _article_check(key)
    if key == "two_words":
        return _notes_check()
    return None
