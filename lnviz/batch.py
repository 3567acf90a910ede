"""A batch, the settings of a norm, and the one place that runs a norm by its name.

A :class:`Batch` is a tensor in one of three layouts (a feature table ``NC``, token sequences
``NLC``, images ``NCHW``) with an optional padding mask. A :class:`NormSpec` is every setting a
learner can move. :func:`normalize` runs the lnviz norm; :func:`torch_reference` runs the same
computation through ``torch.nn.functional`` for the check. The layout helpers turn a tensor into
the 2-D grid that figures show (:func:`to_grid`, :func:`grid_view`, :func:`grid_labels`) and say
which cells share one μ/σ (:func:`group_ids`). Every lesson builds on these.
"""


from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lnviz.norms import (
    NormResult,
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    rms_norm,
)

__all__ = [
    "FAST_ABOVE",
    "LAYOUTS",
    "NORMS",
    "TABLE_NORMS",
    "Batch",
    "GridView",
    "NormSpec",
    "affine_params",
    "channel_dim",
    "channels_first",
    "grid_labels",
    "grid_view",
    "group_ids",
    "max_abs_difference",
    "normalize",
    "param_broadcast_shape",
    "param_size",
    "pick_impl",
    "table_norm",
    "to_grid",
    "torch_reference",
]


NORMS = ("BatchNorm", "LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm")
#: The layouts a batch can have, and what each letter means to a learner.
LAYOUTS = {
    "NC": "(batch, features)",
    "NLC": "(batch, sequence, features)",
    "NCHW": "(batch, channels, height, width)",
}


@dataclass(frozen=True, eq=False)
class Batch:
    """A tensor to normalize, with its layout and (for padded sequences) its mask.

    ``mask`` has the values' shape without the channel dim; True marks a real token.
    ``row_labels`` names the rows of the 2-D grid (e.g. the tokens of seed 002), if known.
    """

    values: np.ndarray
    layout: str
    mask: np.ndarray | None = None
    row_labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {self.layout!r}")
        if self.values.ndim != len(self.layout):
            raise ValueError(
                f"a {self.layout} batch {LAYOUTS[self.layout]} needs {len(self.layout)} dims, "
                f"got shape {list(self.values.shape)}"
            )
        if self.mask is not None:
            expected = tuple(s for d, s in enumerate(self.values.shape)
                             if d != channel_dim(self.layout))
            if self.mask.shape != expected:
                raise ValueError(f"mask shape {list(self.mask.shape)} does not match "
                                 f"{list(expected)}")


@dataclass(frozen=True)
class NormSpec:
    """Every setting of a normalization a learner can move.

    Attributes:
        norm: one of :data:`NORMS`.
        dims: LayerNorm/RMSNorm: how many trailing dims to normalize over.
        training: BatchNorm: batch statistics (True) or running statistics (False).
        warmup_steps: BatchNorm in evaluation: how many training passes over this batch built the
            running statistics (starting from μ = 0, σ² = 1).
        momentum: BatchNorm's running-average momentum.
        use_mask: BatchNorm: leave padding out of the statistics when the batch has a mask.
        groups: GroupNorm's number of groups.
        eps: ε.
        gamma, beta: γ and β, one number for all features or one per feature.
    """

    norm: str = "LayerNorm"
    dims: int = 1
    training: bool = True
    warmup_steps: int = 10
    momentum: float = 0.1
    use_mask: bool = True
    groups: int = 1
    eps: float = 1e-5
    gamma: float | tuple[float, ...] = 1.0
    beta: float | tuple[float, ...] = 0.0

    def __post_init__(self) -> None:
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {list(NORMS)}, got {self.norm!r}")
        if not (self.eps >= 0 and math.isfinite(self.eps)):
            raise ValueError(f"ε must be a finite number ≥ 0, got {self.eps}")


def channel_dim(layout: str) -> int:
    """The dim that holds features/channels: last for token sequences, 1 otherwise."""
    return len(layout) - 1 if layout == "NLC" else 1


def param_size(shape: tuple[int, ...], layout: str, spec: NormSpec) -> int:
    """How many per-feature γ/β values the norm takes: the last dim for LayerNorm/RMSNorm
    (broadcast over the other normalized dims), the channel count otherwise."""
    if spec.norm in ("LayerNorm", "RMSNorm"):
        return shape[-1]
    return shape[channel_dim(layout)]


def affine_params(
    spec: NormSpec, x: torch.Tensor, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """γ and β as tensors of the shape the norm's ``weight``/``bias`` take."""
    shape = tuple(x.shape)
    n = param_size(shape, layout, spec)
    param_shape = shape[-spec.dims:] if spec.norm in ("LayerNorm", "RMSNorm") else (n,)
    params = []
    for value, name in ((spec.gamma, "γ"), (spec.beta, "β")):
        if isinstance(value, (tuple, list)):
            if len(value) != n:
                raise ValueError(f"per-feature {name} needs {n} values, got {len(value)}")
            tensor = torch.tensor(value, dtype=torch.float64)
        else:
            tensor = torch.full((n,), float(value), dtype=torch.float64)
        params.append(tensor.expand(param_shape).to(device=x.device, dtype=_param_dtype(x)))
    return params[0], params[1]


def param_broadcast_shape(shape: tuple[int, ...], layout: str, spec: NormSpec) -> tuple[int, ...]:
    """The shape that makes a norm's weight/bias broadcast against the input."""
    if spec.norm in ("LayerNorm", "RMSNorm"):
        return shape[-spec.dims:]
    return tuple(s if d == channel_dim(layout) else 1 for d, s in enumerate(shape))


def _param_dtype(x: torch.Tensor) -> torch.dtype:
    # torch's CPU kernels accept half inputs with float32 parameters, and so does lnviz.
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _check_dims(x: torch.Tensor, layout: str, spec: NormSpec) -> None:
    if spec.norm in ("LayerNorm", "RMSNorm") and not 1 <= spec.dims <= x.dim():
        raise ValueError(f"{spec.norm} can normalize over the last 1 to {x.dim()} dims, "
                         f"not {spec.dims}")
    if spec.norm == "InstanceNorm" and layout == "NC":
        raise ValueError("InstanceNorm needs a sequence or spatial dim to take statistics over; "
                         "a (batch, features) table has none — choose a sequence or image batch")
    if spec.norm == "GroupNorm":
        c = x.shape[channel_dim(layout)]
        if spec.groups < 1 or c % spec.groups:
            raise ValueError(f"GroupNorm needs a number of groups that divides the {c} "
                             f"channels; {spec.groups} does not")


def _mask(batch_mask: torch.Tensor | None, spec: NormSpec) -> torch.Tensor | None:
    return batch_mask if spec.use_mask else None


def channels_first(x: torch.Tensor, layout: str) -> torch.Tensor:
    """GroupNorm and InstanceNorm take torch's (N, C, *) layout; tokens are (N, L, C)."""
    return x.transpose(1, 2) if layout == "NLC" else x


def _result_channels_last(r: NormResult) -> NormResult:
    swap = {1: 2, 2: 1}
    return NormResult(
        r.output.transpose(1, 2),
        None if r.mean is None else r.mean.transpose(1, 2),
        r.var.transpose(1, 2),
        r.rstd.transpose(1, 2),
        lambda: r.x_hat.transpose(1, 2),
        tuple(sorted(swap.get(d, d) for d in r.reduce_dims)),
    )


#: The norms :func:`table_norm` offers.
TABLE_NORMS = ("BatchNorm", "LayerNorm")


def table_norm(
    x: torch.Tensor,
    norm: str,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> NormResult:
    """A (batch, features) table through LayerNorm (statistics per sample) or BatchNorm in
    training mode (statistics per feature), with γ/β as tensors so autograd reaches them."""
    if x.dim() != 2:
        raise ValueError(f"expected a (batch, features) table, (N, C), got shape "
                         f"{list(x.shape)}")
    if norm == "LayerNorm":
        return layer_norm(x, x.shape[-1:], weight, bias, eps)
    if norm == "BatchNorm":
        return batch_norm(x, None, None, weight, bias, True, 0.1, eps)
    raise ValueError(f"norm must be one of {list(TABLE_NORMS)}, got {norm!r}")


#: Above this many values the Explorer computes with impl="fast" (torch's fused kernels).
FAST_ABOVE = 1_000_000


def pick_impl(numel: int) -> str:
    """``"fast"`` for large tensors, where the scratch code's intermediates would cost seconds
    and gigabytes; the readable ``"scratch"`` code otherwise."""
    return "fast" if numel > FAST_ABOVE else "scratch"


def normalize(
    x: torch.Tensor, layout: str, spec: NormSpec, mask: torch.Tensor | None = None,
    impl: str = "scratch",
) -> NormResult:
    """Run the chosen lnviz norm on ``x`` with every setting of ``spec``."""
    _check_dims(x, layout, spec)
    weight, bias = affine_params(spec, x, layout)
    if spec.norm == "LayerNorm":
        return layer_norm(x, x.shape[-spec.dims:], weight, bias, spec.eps, impl=impl)
    if spec.norm == "RMSNorm":
        return rms_norm(x, x.shape[-spec.dims:], weight, spec.eps, impl=impl)
    if spec.norm == "BatchNorm":
        c, m = channel_dim(layout), _mask(mask, spec)
        if spec.training:
            return batch_norm(x, None, None, weight, bias, True, spec.momentum, spec.eps,
                              channel_dim=c, mask=m, impl=impl)
        running_mean, running_var = _warm_up(x, spec, c, m, impl)
        return batch_norm(x, running_mean, running_var, weight, bias, False, spec.momentum,
                          spec.eps, channel_dim=c, impl=impl)
    xc = channels_first(x, layout)
    if spec.norm == "GroupNorm":
        result = group_norm(xc, spec.groups, weight, bias, spec.eps, impl=impl)
    else:
        result = instance_norm(xc, None, None, weight, bias, True, spec.momentum, spec.eps,
                               impl=impl)
    return _result_channels_last(result) if layout == "NLC" else result


def _warm_up(
    x: torch.Tensor, spec: NormSpec, c: int, mask: torch.Tensor | None, impl: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Running statistics after ``warmup_steps`` training passes over ``x`` from (0, 1)."""
    n = x.shape[c]
    running_mean = torch.zeros(n, device=x.device, dtype=_param_dtype(x))
    running_var = torch.ones(n, device=x.device, dtype=_param_dtype(x))
    for _ in range(spec.warmup_steps):
        batch_norm(x, running_mean, running_var, None, None, True, spec.momentum, spec.eps,
                   channel_dim=c, mask=mask, impl=impl)
    return running_mean, running_var


def torch_reference(
    x: torch.Tensor, layout: str, spec: NormSpec, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The same computation through ``torch.nn.functional``: (output, positions to compare).

    torch has no mask, so masked BatchNorm is replayed on the real tokens alone and compared at
    those positions (the second element; ``None`` means every position).
    """
    _check_dims(x, layout, spec)
    weight, bias = affine_params(spec, x, layout)
    if spec.norm == "LayerNorm":
        return F.layer_norm(x, x.shape[-spec.dims:], weight, bias, spec.eps), None
    if spec.norm == "RMSNorm":
        return F.rms_norm(x, x.shape[-spec.dims:], weight, spec.eps), None
    if spec.norm == "BatchNorm":
        return _torch_batch_norm(x, layout, spec, weight, bias, _mask(mask, spec))
    xc = channels_first(x, layout)
    if spec.norm == "GroupNorm":
        out = F.group_norm(xc, spec.groups, weight, bias, spec.eps)
    else:
        out = F.instance_norm(xc, None, None, weight, bias, True, spec.momentum, spec.eps)
    return (out.transpose(1, 2) if layout == "NLC" else out), None


def _torch_batch_norm(
    x: torch.Tensor,
    layout: str,
    spec: NormSpec,
    weight: torch.Tensor,
    bias: torch.Tensor,
    mask: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    c = channel_dim(layout)
    # torch wants (N, C, *): move the channels to dim 1, and keep only real tokens if masked.
    xc = x.movedim(c, 1) if mask is None else x[mask]
    n = x.shape[c]
    running_mean = torch.zeros(n, device=x.device, dtype=_param_dtype(x))
    running_var = torch.ones(n, device=x.device, dtype=_param_dtype(x))
    if spec.training:
        out = F.batch_norm(xc, None, None, weight, bias, True, spec.momentum, spec.eps)
    else:
        # The running statistics do not depend on ε; torch refuses ε = 0 in training passes,
        # so the warm-up passes use a positive one and only the eval pass uses spec.eps.
        warmup_eps = spec.eps or 1e-5
        for _ in range(spec.warmup_steps):
            F.batch_norm(xc, running_mean, running_var, None, None, True, spec.momentum,
                         warmup_eps)
        out = F.batch_norm(x.movedim(c, 1), running_mean, running_var, weight, bias, False,
                           spec.momentum, spec.eps)
        return out.movedim(1, c), None
    if mask is None:
        return out.movedim(1, c), None
    full = torch.zeros_like(x)
    full[mask] = out
    return full, mask


def max_abs_difference(
    ours: torch.Tensor, reference: torch.Tensor, where: torch.Tensor | None = None
) -> float:
    """max |ours − reference| over ``where`` (all positions if None); NaN where both are NaN
    and equal infinities count as agreement, NaN on one side only as an infinite difference."""
    dtype = torch.promote_types(torch.promote_types(ours.dtype, reference.dtype), torch.float32)
    a, b = ours.to(dtype), reference.to(dtype)
    if where is not None:
        a, b = a[where], b[where]
    if a.numel() == 0:
        return 0.0
    diff = (a - b).abs_()
    largest = float(diff.max())
    if math.isnan(largest):  # only NaN/inf values pay for the careful comparison
        agree = (torch.isnan(a) & torch.isnan(b)) | (a == b)
        diff = torch.where(agree, torch.zeros_like(diff), diff.nan_to_num(nan=math.inf))
        largest = float(diff.max())
    return largest


def to_grid(array: np.ndarray, layout: str) -> np.ndarray:
    """The tensor as a 2-D table: one row per sample (NC), token (NLC) or (sample, channel)
    image plane (NCHW), one column per feature (NC, NLC) or pixel (NCHW)."""
    if layout == "NCHW":
        n, c, h, w = array.shape
        return array.reshape(n * c, h * w)
    return array.reshape(-1, array.shape[-1])


def grid_labels(
    shape: tuple[int, ...], layout: str, row_labels: tuple[str, ...] | None = None,
    view: GridView | None = None,
) -> tuple[list[str], list[str]]:
    """Names for the rows and columns of :func:`to_grid`'s table; with ``view``, for its rows
    and columns only (a label takes about 60 bytes: naming every row or column of a large
    tensor would take more memory than the tensor)."""
    n_rows = math.prod(shape[:2]) if layout == "NCHW" else math.prod(shape[:-1])
    n_cols = math.prod(shape[2:]) if layout == "NCHW" else shape[-1]
    picked_rows = range(n_rows) if view is None else view.rows.tolist()
    picked_cols = range(n_cols) if view is None else view.cols.tolist()
    if row_labels is not None and len(row_labels) == n_rows:
        rows = [row_labels[i] for i in picked_rows]
    elif layout == "NC":
        rows = [f"sample {i}" for i in picked_rows]
    else:
        word, inner = ("seq", "pos") if layout == "NLC" else ("image", "ch")
        rows = [f"{word} {i // shape[1]} · {inner} {i % shape[1]}" for i in picked_rows]
    if layout == "NCHW":
        cols = [f"({j // shape[3]}, {j % shape[3]})" for j in picked_cols]
    else:
        cols = [f"feature {j}" for j in picked_cols]
    return rows, cols


def group_ids(shape: tuple[int, ...], layout: str, spec: NormSpec) -> np.ndarray:
    """For every element, the index of the group whose μ and σ normalize it."""
    index = np.indices(shape, sparse=True)
    c = channel_dim(layout)
    if spec.norm in ("LayerNorm", "RMSNorm"):
        lead = shape[: len(shape) - spec.dims]
        ids = np.ravel_multi_index(tuple(index[: len(lead)]), lead) if lead else 0
    elif spec.norm == "BatchNorm":
        ids = index[c]
    elif spec.norm == "GroupNorm":
        per_group = shape[c] // spec.groups
        ids = index[0] * spec.groups + index[c] // per_group
    else:  # InstanceNorm: one group per (sample, channel)
        ids = index[0] * shape[c] + index[c]
    return np.broadcast_to(ids, shape)


@dataclass(frozen=True)
class GridView:
    """A window of the 2-D grid small enough to draw: the rows and columns it keeps."""

    rows: np.ndarray
    cols: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.cols)

    def take(self, grid: np.ndarray) -> np.ndarray:
        return grid[np.ix_(self.rows, self.cols)]


def grid_view(
    grid_shape: tuple[int, int],
    max_rows: int = 128,
    max_cols: int = 128,
    mode: str = "downsample",
    start_row: int = 0,
    start_col: int = 0,
) -> GridView:
    """Which rows and columns to draw so that a figure stays small whatever the tensor's size.

    ``mode="slice"`` keeps a contiguous window starting at (start_row, start_col);
    ``mode="downsample"`` keeps evenly spaced rows and columns across the whole tensor.
    """
    if mode not in ("slice", "downsample"):
        raise ValueError(f"mode must be 'slice' or 'downsample', got {mode!r}")

    def pick(size: int, limit: int, start: int) -> np.ndarray:
        if size <= limit:
            return np.arange(size)
        if mode == "slice":
            first = min(max(start, 0), size - limit)
            return np.arange(first, first + limit)
        return np.unique(np.linspace(0, size - 1, limit).round().astype(np.int64))

    return GridView(pick(grid_shape[0], max_rows, start_row),
                    pick(grid_shape[1], max_cols, start_col))
