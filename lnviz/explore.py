"""What the Explorer computes: one batch, one choice of norm, and everything derived for display.

A :class:`Batch` is a tensor in one of three layouts (a feature table ``NC``, token sequences
``NLC``, images ``NCHW``) with an optional padding mask. A :class:`NormSpec` is every setting a
learner can move. :func:`normalize` runs the lnviz norm; :func:`torch_reference` runs the same
computation through ``torch.nn.functional`` for the check; the rest turns results into the small
arrays and tables that figures show (a 2-D grid of the tensor, which cells share one μ/σ, per-group
statistics, a worked example), so that pages never compute statistics themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.devices import to_tensor
from lnviz.norms import (
    NormResult,
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    mean_and_var,
    rms_norm,
)

__all__ = [
    "FAST_ABOVE",
    "LAYOUTS",
    "NORMS",
    "TABLE_NORMS",
    "TOLERANCE",
    "Batch",
    "Exploration",
    "GridView",
    "NormSpec",
    "channel_dim",
    "explain",
    "explore",
    "grid_labels",
    "grid_view",
    "group_ids",
    "group_stats",
    "histogram",
    "max_abs_difference",
    "normalize",
    "param_size",
    "pick_impl",
    "pytorch_snippet",
    "step_by_step",
    "table_norm",
    "to_grid",
    "torch_reference",
    "worked_example_latex",
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


def _affine(
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


def _broadcast_shape(shape: tuple[int, ...], layout: str, spec: NormSpec) -> tuple[int, ...]:
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


def _channels_first(x: torch.Tensor, layout: str) -> torch.Tensor:
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
    weight, bias = _affine(spec, x, layout)
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
    xc = _channels_first(x, layout)
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
    weight, bias = _affine(spec, x, layout)
    if spec.norm == "LayerNorm":
        return F.layer_norm(x, x.shape[-spec.dims:], weight, bias, spec.eps), None
    if spec.norm == "RMSNorm":
        return F.rms_norm(x, x.shape[-spec.dims:], weight, spec.eps), None
    if spec.norm == "BatchNorm":
        return _torch_batch_norm(x, layout, spec, weight, bias, _mask(mask, spec))
    xc = _channels_first(x, layout)
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
        for _ in range(spec.warmup_steps):
            F.batch_norm(xc, running_mean, running_var, None, None, True, spec.momentum,
                         spec.eps)
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


# --- From tensors to what figures show --------------------------------------------------------


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


def group_stats(
    x: torch.Tensor, layout: str, spec: NormSpec, mask: torch.Tensor | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (biased) standard deviation of ``x`` over each group of ``spec``'s norm, in the
    order of :func:`group_ids` — the batch's own statistics, even where the norm itself uses
    running ones. ``mask`` leaves padding out (masked BatchNorm)."""
    x = x.detach().to(torch.promote_types(x.dtype, torch.float32))
    weights = None
    if spec.norm in ("LayerNorm", "RMSNorm"):
        dims = tuple(range(x.dim() - spec.dims, x.dim()))
    elif spec.norm == "BatchNorm":
        c = channel_dim(layout)
        dims = tuple(d for d in range(x.dim()) if d != c)
        if mask is not None and spec.use_mask:
            weights = mask.unsqueeze(c).to(x.dtype)
    else:
        x = _channels_first(x, layout)
        if spec.norm == "GroupNorm":
            x = x.reshape(x.shape[0], spec.groups, -1)
        dims = tuple(range(2, x.dim()))
    mean, var, _ = mean_and_var(x, dims, weights)
    return mean.double().cpu().numpy().ravel(), var.sqrt().double().cpu().numpy().ravel()


def step_by_step(
    x: torch.Tensor, result: NormResult, spec: NormSpec, ids: np.ndarray, group: int,
    layout: str, max_rows: int = 64, mask: np.ndarray | None = None,
) -> pd.DataFrame:
    """The worked example for one group: x, μ, σ², √(σ²+ε), x̂, γ, β and y for its elements
    (the first ``max_rows``), with a padding column when the batch has a ``mask``."""
    positions = np.flatnonzero(ids.ravel() == group)[:max_rows]
    if positions.size == 0:
        raise ValueError(f"there is no group {group}")
    shape = tuple(x.shape)
    idx = np.unravel_index(positions, shape)

    def at(t: torch.Tensor | None) -> np.ndarray:
        if t is None:
            return np.zeros(positions.size)
        full = t.detach().expand(shape) if t.shape != shape else t.detach()
        return full.double().cpu().numpy()[idx]

    gamma, beta = (p.reshape(_broadcast_shape(shape, layout, spec)) for p in
                   _affine(spec, x, layout))
    var = at(result.var)
    table = {
        "position": [str(tuple(int(i) for i in p)) for p in zip(*idx, strict=True)],
        "x": at(x),
        "μ": at(result.mean),
        "σ²" if spec.norm != "RMSNorm" else "mean(x²)": var,
        "√(σ²+ε)": np.sqrt(var + spec.eps),
        "x̂": at(result.x_hat),
        "γ": at(gamma),
        "β": at(beta) if spec.norm != "RMSNorm" else np.zeros(positions.size),
        "y": at(result.output),
    }
    if mask is not None:
        c = channel_dim(layout)
        table["padding"] = ~mask[tuple(i for d, i in enumerate(idx) if d != c)]
    return pd.DataFrame(table)


def worked_example_latex(row: pd.Series, eps: float, rms: bool = False) -> str:
    """The formula with one element's numbers substituted, as a textbook would print it."""

    def f(v: float) -> str:
        text = f"{v:.4g}".replace("inf", r"\infty").replace("nan", r"\mathrm{NaN}")
        if "e" in text:  # 1e-05 -> 1 \times 10^{-5}, as a textbook would print it
            mantissa, exponent = text.split("e")
            power = rf"10^{{{int(exponent)}}}"
            text = power if mantissa in ("1", "-1") else rf"{mantissa} \times {power}"
            text = f"-{text}" if mantissa == "-1" else text
        return f"({text})" if v < 0 else text

    var_name = "mean(x²)" if rms else "σ²"
    var = row[var_name]
    centred = rf"{f(row['x'])}" if rms else rf"({f(row['x'])} - {f(row['μ'])})"
    symbol = r"x" if rms else r"(x - \mu)"
    denominator = r"\sqrt{\overline{x^2} + \epsilon}" if rms else r"\sqrt{\sigma^2 + \epsilon}"
    shift = "" if rms else r" + \beta"
    shift_value = "" if rms else rf" + {f(row['β'])}"
    return (
        rf"y = \gamma \cdot \frac{{{symbol}}}{{{denominator}}}{shift}"
        rf" = {f(row['γ'])} \cdot \frac{{{centred}}}{{\sqrt{{{f(var)} + {f(eps)}}}}}{shift_value}"
        rf" = {f(row['γ'])} \cdot {f(row['x̂'])}{shift_value} = {f(row['y'])}"
    )


def pytorch_snippet(shape: tuple[int, ...], layout: str, spec: NormSpec, dtype: str = "float32",
                    device: str = "cpu", has_mask: bool = False) -> str:
    """PyTorch code that reproduces the current computation from the downloaded input.npy."""
    n = param_size(shape, layout, spec)
    masked = has_mask and spec.use_mask

    def param(value: float | tuple[float, ...]) -> str:
        if isinstance(value, (tuple, list)):
            return f"torch.tensor({[round(v, 6) for v in value]})"
        return f"torch.full(({n},), {float(value)!r})"

    lines = [
        "import numpy as np",
        "import torch",
        "import torch.nn.functional as F",
        "",
        f"# input.npy: the Explorer's input, shape {tuple(shape)}, layout {layout} "
        f"{LAYOUTS[layout]}",
        f"x = torch.from_numpy(np.load('input.npy')).to({device!r}, torch.{dtype})",
        f"gamma = {param(spec.gamma)}",
        f"beta = {param(spec.beta)}",
    ]
    if spec.norm in ("LayerNorm", "RMSNorm"):
        dims = tuple(shape[-spec.dims:])
        lines.append(f"normalized_shape = {dims}")
        if spec.dims > 1:
            lines.append("gamma, beta = gamma.expand(normalized_shape), "
                         "beta.expand(normalized_shape)")
        if spec.norm == "LayerNorm":
            lines.append(f"y = F.layer_norm(x, normalized_shape, gamma, beta, eps={spec.eps!r})")
        else:
            lines.append(f"y = F.rms_norm(x, normalized_shape, gamma, eps={spec.eps!r})")
    elif spec.norm == "BatchNorm":
        c = channel_dim(layout)
        move, back = (f".movedim({c}, 1)", f".movedim(1, {c})") if c != 1 else ("", "")
        batch = f"x{move}"
        if masked:
            lines += [
                "# mask.npy: True at real tokens; torch has no mask, so take statistics from",
                "# the real tokens alone: x[mask] is (real tokens, features)",
                "mask = torch.from_numpy(np.load('mask.npy')).bool()",
            ]
            batch = "x[mask]"
        if spec.training and masked:
            lines += [
                "y = torch.zeros_like(x)",
                f"y[mask] = F.batch_norm(x[mask], None, None, gamma, beta, training=True, "
                f"eps={spec.eps!r})",
            ]
        elif spec.training:
            lines.append(f"y = F.batch_norm(x{move}, None, None, gamma, beta, training=True, "
                         f"eps={spec.eps!r}){back}")
        else:
            lines += [
                f"running_mean, running_var = torch.zeros({n}), torch.ones({n})",
                f"for _ in range({spec.warmup_steps}):  # training passes build the running stats",
                f"    F.batch_norm({batch}, running_mean, running_var, training=True, "
                f"momentum={spec.momentum!r}, eps={spec.eps!r})",
                f"y = F.batch_norm(x{move}, running_mean, running_var, gamma, beta, "
                f"training=False, eps={spec.eps!r}){back}",
            ]
    else:
        move = ".transpose(1, 2)" if layout == "NLC" else ""
        if spec.norm == "GroupNorm":
            call = f"F.group_norm(x{move}, {spec.groups}, gamma, beta, eps={spec.eps!r})"
        else:
            call = f"F.instance_norm(x{move}, weight=gamma, bias=beta, eps={spec.eps!r})"
        lines.append(f"y = {call}{move}")
    return "\n".join(lines) + "\n"



#: Largest |lnviz − torch| accepted as agreement, relative to the output's magnitude.
TOLERANCE = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-1}


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
    max_difference: float
    tolerance: float
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

    @property
    def agrees_with_torch(self) -> bool:
        return self.max_difference <= self.tolerance

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
        reference, where = torch_reference(x, batch.layout, spec, mask)
    difference = max_abs_difference(result.output, reference, where)
    magnitude = reference.float().abs().nan_to_num(nan=0.0, posinf=0.0)
    scale = float(magnitude.max()) if magnitude.numel() else 1.0
    ids = group_ids(tuple(x.shape), batch.layout, spec)
    mean_in, std_in = group_stats(x, batch.layout, spec, mask)
    mean_out, std_out = group_stats(result.output, batch.layout, spec, mask)
    input_values = x.detach().float().cpu().numpy()
    output_values = result.output.detach().float().cpu().numpy()
    nonfinite_inputs = _count_nonfinite(input_values)
    source_nonfinite = _count_nonfinite(np.asarray(batch.values))
    return Exploration(
        x=x, result=result, input_values=input_values, output_values=output_values,
        groups=ids, mean_in=mean_in, std_in=std_in, mean_out=mean_out, std_out=std_out,
        max_difference=difference, tolerance=TOLERANCE[dtype] * max(1.0, scale), impl=impl,
        nonfinite_inputs=nonfinite_inputs,
        nonfinite_outputs=_count_nonfinite(output_values),
        histogram_in=histogram(input_values), histogram_out=histogram(output_values),
        overflowed_inputs=max(0, nonfinite_inputs - source_nonfinite),
        # σ² (the mean square for RMSNorm) is inf only when finite values overflowed: an inf
        # or NaN input makes it NaN instead.
        overflowed_groups=int(torch.isinf(result.var).sum()),
        smallest_group=int(np.bincount(ids.ravel()).min()) if ids.size else 0,
    )


def explain(ex: Exploration, spec: NormSpec, dtype: str) -> list[str]:
    """Plain-language warnings about what in this input makes the output unusual, and why:
    values too large for ``dtype``, NaN or inf in the input, statistics that overflowed, 0/0
    at ε = 0, groups of a single value. Empty when nothing is unusual."""
    notes = []
    largest = float(torch.finfo(getattr(torch, dtype)).max)
    if ex.overflowed_inputs:
        notes.append(
            f"{ex.overflowed_inputs:,} input values lie beyond {dtype}'s range (±{largest:.3g}) "
            "and became ±inf when converted, so their groups' outputs are NaN. Choose float64 "
            "under Precision in the sidebar, or rescale the input.")
    own = ex.nonfinite_inputs - ex.overflowed_inputs
    if own > 0:
        notes.append(
            f"The input holds {own:,} NaN or infinite values. Every group that contains one gets "
            "a NaN mean and variance, so its whole output is NaN; the other groups are "
            "unaffected.")
    if ex.overflowed_groups:
        finite = ex.input_values[np.isfinite(ex.input_values)]
        size = float(np.abs(finite).max()) if finite.size else largest
        notes.append(
            f"σ² overflowed in {ex.overflowed_groups:,} group(s): values around {size:.0e} "
            f"square to about {size * size:.0e}, beyond {dtype}'s largest number "
            f"({largest:.3g}). lnviz's σ² is then inf and its output 0 (torch's is NaN), but "
            "the true output is finite — normalizing ignores the scale. Choose float64 under "
            "Precision in the sidebar, or divide the input by a constant first.")
    if ex.nonfinite_outputs and not ex.nonfinite_inputs and not ex.overflowed_groups:
        notes.append(
            f"{ex.nonfinite_outputs:,} output values are NaN or infinite. "
            + (f"With ε = {spec.eps:g}, a group whose values are all equal has σ² = 0, so "
               "x − μ = 0 is divided by √0 = 0: 0/0 is NaN. This is the true answer of the "
               "formula — ε > 0 is what prevents it." if spec.eps == 0 else
               f"Their groups' statistics are too large or too small for {dtype}: choose "
               "float64 under Precision in the sidebar."))
    if ex.smallest_group == 1:
        notes.append(
            "Some groups hold a single value, so μ = x and σ² = 0 there: x − μ = 0 and the "
            "output is β (or NaN with ε = 0). Normalizing needs at least two values per group "
            "— for LayerNorm, at least two features.")
    return notes


def _count_nonfinite(values: np.ndarray) -> int:
    return int(values.size - np.count_nonzero(np.isfinite(values)))


def histogram(values: np.ndarray, bins: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """(bin centres, counts) of the finite values; empty arrays when there are none."""
    finite = values[np.isfinite(values)] if _count_nonfinite(values) else values.ravel()
    if finite.size == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    counts, edges = np.histogram(finite, bins=bins)
    return (edges[:-1] + edges[1:]) / 2, counts
