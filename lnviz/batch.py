"""A batch, the settings of a norm, and the one place that runs a norm by its name.

A :class:`Batch` is a tensor in one of three layouts (a feature table ``NC``, token sequences
``NLC``, images ``NCHW``) with an optional padding mask. A :class:`NormSpec` is every setting a
learner can move. :data:`NORM_TABLE` maps each norm's name to everything the code needs to run
it (a :class:`Norm`): its lnviz function, the ``torch.nn.functional`` function it mirrors, the
arguments both take, and which values share one μ/σ (its :class:`Grouping`, from which the group
ids, the values arranged for the statistics and the browser's groups all come). Every path goes
through it:
:func:`normalize` runs the lnviz norm; :func:`torch_reference` runs the same computation through
``torch.nn.functional`` for the check; :func:`table_norm` and :func:`torch_table_norm` run a
(batch, features) table with nothing set but ε (the lessons' autograd and the timings). The
layout helpers turn a tensor into the 2-D grid that figures show (:func:`to_grid`,
:func:`grid_view`; :func:`lnviz.charts.base.grid_labels` names its rows and columns) and say
which cells share one μ/σ (:func:`group_ids`).
Every lesson builds on these.
"""


from __future__ import annotations

import functools
import math
from collections.abc import Callable
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
from lnviz.terms import Layout, NormKind

__all__ = [
    "FAST_ABOVE",
    "LAYOUTS",
    "NORMS",
    "NORM_TABLE",
    "TABLE_NORMS",
    "Batch",
    "GridView",
    "Grouping",
    "Norm",
    "NormSpec",
    "affine_params",
    "channel_dim",
    "channels_first",
    "grid_view",
    "group_ids",
    "grouped",
    "grouping",
    "max_abs_difference",
    "normalize",
    "norms_where",
    "param_broadcast_shape",
    "param_ids",
    "param_size",
    "pick_impl",
    "table_norm",
    "to_grid",
    "torch_reference",
    "torch_table_norm",
]

#: The layouts a batch can have, and what each letter means to a learner.
LAYOUTS = {
    Layout.NC: "(batch, features)",
    Layout.NLC: "(batch, sequence, features)",
    Layout.NCHW: "(batch, channels, height, width)",
}


@dataclass(frozen=True, eq=False)
class Batch:
    """A tensor to normalize, with its layout and (for padded sequences) its mask.

    ``mask`` has the values' shape without the channel dim; True marks a real token.
    ``row_labels`` names the rows of the 2-D grid (e.g. the tokens of the transformer article), if
    known.
    """

    values: np.ndarray
    layout: Layout
    mask: np.ndarray | None = None
    row_labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        object.__setattr__(self, "layout", Layout(self.layout))  # the term, however it came
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
        norm: one of :data:`NORMS` (a row of :data:`NORM_TABLE`).
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

    norm: NormKind = NormKind.LAYER
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
            raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {self.norm!r}")
        object.__setattr__(self, "norm", NormKind(self.norm))  # the term, however it came
        if not (self.eps >= 0 and math.isfinite(self.eps)):
            raise ValueError(f"ε must be a finite number ≥ 0, got {self.eps}")


def channel_dim(layout: str) -> int:
    """The dim that holds features/channels: last for token sequences, 1 otherwise."""
    return len(layout) - 1 if layout == Layout.NLC else 1


def channels_first(x: torch.Tensor, layout: str) -> torch.Tensor:
    """GroupNorm and InstanceNorm take torch's (N, C, *) layout; tokens are (N, L, C)."""
    return x.transpose(1, 2) if layout == Layout.NLC else x


# --- The one dispatcher: a norm's name -> everything the code needs to run it ------------------
#
# Each norm is a row of NORM_TABLE, built from the small functions below: the arguments its
# lnviz and torch functions take, which values share one μ/σ in each layout, and what it refuses.


def _layer_arguments(x: torch.Tensor, spec: NormSpec, weight: torch.Tensor | None,
                     bias: torch.Tensor | None) -> tuple[object, ...]:
    return x.shape[-spec.dims:], weight, bias, spec.eps


def _rms_arguments(x: torch.Tensor, spec: NormSpec, weight: torch.Tensor | None,
                   bias: torch.Tensor | None) -> tuple[object, ...]:
    return x.shape[-spec.dims:], weight, spec.eps  # RMSNorm has no β


def _batch_arguments(x: torch.Tensor, spec: NormSpec, weight: torch.Tensor | None,
                     bias: torch.Tensor | None) -> tuple[object, ...]:
    return None, None, weight, bias, spec.training, spec.momentum, spec.eps


def _group_arguments(x: torch.Tensor, spec: NormSpec, weight: torch.Tensor | None,
                     bias: torch.Tensor | None) -> tuple[object, ...]:
    return spec.groups, weight, bias, spec.eps


def _instance_arguments(x: torch.Tensor, spec: NormSpec, weight: torch.Tensor | None,
                        bias: torch.Tensor | None) -> tuple[object, ...]:
    return None, None, weight, bias, True, spec.momentum, spec.eps


# --- Who shares μ and σ: the one grouping every norm's statistics, ids and figures derive from --

@dataclass(frozen=True)
class Grouping:
    """Which values share one μ and σ, for one norm on one shape.

    The channel dim ``c`` is split in two, (groups, channels per group), giving the *split
    shape*; ``kept`` are the axes of the split shape that tell the groups apart, and the values
    along every other axis share one μ and σ. One line per norm (:func:`grouping`):

    - LayerNorm, RMSNorm: one group per position of the leading dims (all but the last
      ``dims``), whatever the channel dim.
    - BatchNorm: one group per channel (split C × 1, the C part kept).
    - GroupNorm: one per (sample, group of C/G channels).
    - InstanceNorm: one per (sample, channel).

    From it come the groups' ids (:meth:`ids`: what the figures colour and the live panels are
    sent), the values arranged for the statistics (:meth:`arrange`), and the count.
    """

    shape: tuple[int, ...]
    channel: int  # the original tensor's channel dim
    groups: int  # the channel dim's first part: groups of C / groups channels
    kept: tuple[int, ...]  # axes of the split shape that index a group

    @property
    def split(self) -> tuple[int, ...]:
        c, s = self.channel, self.shape
        return (*s[:c], self.groups, s[c] // self.groups, *s[c + 1:])

    @property
    def reduced(self) -> tuple[int, ...]:
        """The split shape's axes whose values share one μ and σ."""
        return tuple(a for a in range(len(self.split)) if a not in self.kept)

    @property
    def count(self) -> int:
        """How many groups there are."""
        return math.prod(self.split[a] for a in self.kept)

    def ids(self) -> np.ndarray:
        """For every element, the index of its group, in the order the statistics come out
        (a read-only broadcast view: it costs memory only along the kept axes)."""
        c, per = self.channel, max(self.split[self.channel + 1], 1)
        index = list(np.indices(self.shape, sparse=True))
        split = [*index[:c], index[c] // per, index[c] % per, *index[c + 1:]]
        kept = tuple(split[a] for a in self.kept)
        ids = np.ravel_multi_index(kept, tuple(self.split[a] for a in self.kept)) if kept else 0
        return np.broadcast_to(ids, self.shape)

    def arrange(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> Grouped:
        """``x`` in the split shape, the axes its statistics reduce, and the weights that leave
        padding out (``mask``: one per position of the shape without the channel dim) or None."""
        c = self.channel
        weights = None if mask is None else mask.unsqueeze(c).unsqueeze(c).to(x.dtype)
        return x.reshape(self.split), self.reduced, weights


#: Values arranged for the statistics: (x in the split shape, the axes reduced, weights or None).
Grouped = tuple[torch.Tensor, tuple[int, ...], torch.Tensor | None]


def _split_axes(dims: range | tuple[int, ...], c: int) -> tuple[int, ...]:
    """The split shape's axes of the original ``dims`` (the channel dim is two axes there)."""
    return tuple(a for d in dims for a in ((d, d + 1) if d == c else (d + (d > c),)))


def _per_sample(shape: tuple[int, ...], c: int, spec: NormSpec) -> Grouping:
    return Grouping(shape, c, 1, _split_axes(range(len(shape) - spec.dims), c))


def _per_channel(shape: tuple[int, ...], c: int, spec: NormSpec) -> Grouping:
    return Grouping(shape, c, shape[c], (c,))


def _per_group(shape: tuple[int, ...], c: int, spec: NormSpec) -> Grouping:
    return Grouping(shape, c, spec.groups, (0, c))


def _per_instance(shape: tuple[int, ...], c: int, spec: NormSpec) -> Grouping:
    return Grouping(shape, c, shape[c], (0, c))


def _check_trailing(shape: tuple[int, ...], layout: str, spec: NormSpec) -> None:
    if not 1 <= spec.dims <= len(shape):
        raise ValueError(f"{spec.norm} can normalize over the last 1 to {len(shape)} dims, "
                         f"not {spec.dims}")


def _check_positions(shape: tuple[int, ...], layout: str, spec: NormSpec) -> None:
    if layout == Layout.NC:
        raise ValueError("InstanceNorm needs a sequence or spatial dim to take statistics over; "
                         "a (batch, features) table has none — choose a sequence or image batch")


def _check_groups(shape: tuple[int, ...], layout: str, spec: NormSpec) -> None:
    c = shape[channel_dim(layout)]
    if spec.groups < 1 or c % spec.groups:
        raise ValueError(f"GroupNorm needs a number of groups that divides the {c} "
                         f"channels; {spec.groups} does not")


@dataclass(frozen=True)
class Norm:
    """Everything the code needs to run one norm: a row of :data:`NORM_TABLE`.

    lnviz's function and its ``torch.nn.functional`` namesake take the same arguments in the
    same order, so one ``arguments`` serves both::

        lnviz(x, *arguments(x, spec, weight, bias), impl=impl)   # a NormResult
        functional(x, *arguments(x, spec, weight, bias))         # the output alone

    Attributes:
        lnviz: the teaching implementation, from :mod:`lnviz.norms`.
        functional: the ``torch.nn.functional`` function it mirrors, for the check.
        arguments: ``(x, spec, weight, bias)`` -> the arguments after the input.
        grouping: ``(shape, channel dim, spec)`` -> the :class:`Grouping`: which values share
            one μ and σ (see :func:`grouping`).
        trailing: statistics over the last ``spec.dims`` dims, with γ/β for each of their
            elements (LayerNorm, RMSNorm); otherwise one γ/β per channel.
        channels_first: the functions take torch's (N, C, *) layout, so tokens (N, L, C) are
            transposed on the way in and back on the way out.
        table: runs on a (batch, features) table with nothing set but ε (:func:`table_norm`).
        centred: subtracts μ (every norm but RMSNorm).
        check: ``(shape, layout, spec)`` -> raises ValueError for settings the norm cannot run
            with; None if it takes any.
    """

    lnviz: Callable[..., NormResult]
    functional: Callable[..., torch.Tensor]
    arguments: Callable[[torch.Tensor, NormSpec, torch.Tensor | None, torch.Tensor | None],
                        tuple[object, ...]]
    grouping: Callable[[tuple[int, ...], int, NormSpec], Grouping]
    trailing: bool = False
    channels_first: bool = False
    table: bool = False
    centred: bool = True
    check: Callable[[tuple[int, ...], str, NormSpec], None] | None = None

    def run(self, x: torch.Tensor, layout: str, spec: NormSpec, weight: torch.Tensor | None,
            bias: torch.Tensor | None, mask: torch.Tensor | None = None,
            impl: str = "scratch") -> NormResult:
        """The lnviz norm on ``x`` with ``spec``'s settings and these γ and β."""
        flip = self.channels_first and layout == Layout.NLC
        xc = channels_first(x, layout) if flip else x
        result = self.lnviz(xc, *self.arguments(xc, spec, weight, bias), impl=impl)
        return _result_channels_last(result) if flip else result

    def reference(self, x: torch.Tensor, layout: str, spec: NormSpec,
                  weight: torch.Tensor | None, bias: torch.Tensor | None,
                  mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The same through ``torch.nn.functional``: (output, positions to compare or None)."""
        flip = self.channels_first and layout == Layout.NLC
        xc = channels_first(x, layout) if flip else x
        out = self.functional(xc, *self.arguments(xc, spec, weight, bias))
        return (out.transpose(1, 2) if flip else out), None


class _BatchNorm(Norm):
    """BatchNorm's settings are more than arguments: its statistics run along the layout's
    channel dim, can leave padding out, and in evaluation come from the running statistics that
    ``spec.warmup_steps`` training passes over the batch built, starting from μ = 0, σ² = 1."""

    def run(self, x: torch.Tensor, layout: str, spec: NormSpec, weight: torch.Tensor | None,
            bias: torch.Tensor | None, mask: torch.Tensor | None = None,
            impl: str = "scratch") -> NormResult:
        c, m = channel_dim(layout), _mask(mask, spec)
        if spec.training:
            return self.lnviz(x, *self.arguments(x, spec, weight, bias), channel_dim=c, mask=m,
                              impl=impl)
        running_mean, running_var = _initial_running_stats(x, x.shape[c])
        for _ in range(spec.warmup_steps):
            self.lnviz(x, running_mean, running_var, None, None, True, spec.momentum, spec.eps,
                       channel_dim=c, mask=m, impl=impl)
        return self.lnviz(x, running_mean, running_var, weight, bias, False, spec.momentum,
                          spec.eps, channel_dim=c, impl=impl)

    def reference(self, x: torch.Tensor, layout: str, spec: NormSpec,
                  weight: torch.Tensor | None, bias: torch.Tensor | None,
                  mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """torch has no mask, so masked BatchNorm is replayed on the real tokens alone and
        compared at those positions."""
        c, m = channel_dim(layout), _mask(mask, spec)
        # torch wants (N, C, *): move the channels to dim 1, and keep only real tokens if masked.
        xc = x.movedim(c, 1) if m is None else x[m]
        if spec.training:
            out = self.functional(xc, *self.arguments(xc, spec, weight, bias))
            if m is None:
                return out.movedim(1, c), None
            full = torch.zeros_like(x)
            full[m] = out
            return full, m
        running_mean, running_var = _initial_running_stats(x, x.shape[c])
        # The running statistics do not depend on ε; torch refuses ε = 0 in training passes,
        # so the warm-up passes use a positive one and only the eval pass uses spec.eps.
        warmup_eps = spec.eps or 1e-5
        for _ in range(spec.warmup_steps):
            self.functional(xc, running_mean, running_var, None, None, True, spec.momentum,
                            warmup_eps)
        out = self.functional(x.movedim(c, 1), running_mean, running_var, weight, bias, False,
                              spec.momentum, spec.eps)
        return out.movedim(1, c), None


def _initial_running_stats(x: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """μ = 0 and σ² = 1 for each of ``n`` channels, as BatchNorm's running statistics start."""
    return (torch.zeros(n, device=x.device, dtype=_param_dtype(x)),
            torch.ones(n, device=x.device, dtype=_param_dtype(x)))


#: Every norm by its name, in the order the Explorer offers them.
NORM_TABLE: dict[NormKind, Norm] = {
    NormKind.BATCH: _BatchNorm(
        lnviz=batch_norm, functional=F.batch_norm, arguments=_batch_arguments,
        grouping=_per_channel, table=True),
    NormKind.LAYER: Norm(
        lnviz=layer_norm, functional=F.layer_norm, arguments=_layer_arguments,
        grouping=_per_sample, trailing=True,
        table=True, check=_check_trailing),
    NormKind.RMS: Norm(
        lnviz=rms_norm, functional=F.rms_norm, arguments=_rms_arguments,
        grouping=_per_sample, trailing=True,
        table=True, centred=False, check=_check_trailing),
    NormKind.GROUP: Norm(
        lnviz=group_norm, functional=F.group_norm, arguments=_group_arguments,
        grouping=_per_group,
        channels_first=True, check=_check_groups),
    NormKind.INSTANCE: Norm(
        lnviz=instance_norm, functional=F.instance_norm, arguments=_instance_arguments,
        grouping=_per_instance,
        channels_first=True, check=_check_positions),
}

#: The one tuple of norm names; every other is a subset of it (:func:`norms_where`).
NORMS = tuple(NORM_TABLE)


def norms_where(test: Callable[[Norm], bool]) -> tuple[str, ...]:
    """The names of the norms whose :class:`Norm` passes ``test``, in the order of :data:`NORMS`,
    e.g. ``norms_where(lambda n: n.table)`` for the norms :func:`table_norm` runs."""
    return tuple(name for name, norm in NORM_TABLE.items() if test(norm))


#: The norms :func:`table_norm` runs: those that need nothing but ε on a (batch, features) table.
TABLE_NORMS = norms_where(lambda norm: norm.table)


def param_size(shape: tuple[int, ...], layout: str, spec: NormSpec) -> int:
    """How many per-feature γ/β values the norm takes: the last dim for LayerNorm/RMSNorm
    (broadcast over the other normalized dims), the channel count otherwise."""
    if NORM_TABLE[spec.norm].trailing:
        return shape[-1]
    return shape[channel_dim(layout)]


def param_ids(shape: tuple[int, ...], layout: str, spec: NormSpec) -> np.ndarray:
    """For every element, the index of its γ and β among :func:`param_size`'s (a broadcast
    view)."""
    index = np.indices(shape, sparse=True)
    dim = -1 if NORM_TABLE[spec.norm].trailing else channel_dim(layout)
    return np.broadcast_to(index[dim], shape)


def affine_params(
    spec: NormSpec, x: torch.Tensor, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """γ and β as tensors of the shape the norm's ``weight``/``bias`` take."""
    shape = tuple(x.shape)
    n = param_size(shape, layout, spec)
    param_shape = shape[-spec.dims:] if NORM_TABLE[spec.norm].trailing else (n,)
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
    if NORM_TABLE[spec.norm].trailing:
        return shape[-spec.dims:]
    return tuple(s if d == channel_dim(layout) else 1 for d, s in enumerate(shape))


def _param_dtype(x: torch.Tensor) -> torch.dtype:
    # torch's CPU kernels accept half inputs with float32 parameters, and so does lnviz.
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _check_dims(x: torch.Tensor, layout: str, spec: NormSpec) -> None:
    check = NORM_TABLE[spec.norm].check
    if check is not None:
        check(tuple(x.shape), layout, spec)


def _mask(batch_mask: torch.Tensor | None, spec: NormSpec) -> torch.Tensor | None:
    return batch_mask if spec.use_mask else None


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


@functools.lru_cache(maxsize=64)
def _table_spec(norm: str, eps: float) -> NormSpec:
    # Built once per (norm, ε): the timings call table_norm thousands of times.
    return NormSpec(norm=norm, dims=1, training=True, momentum=0.1, eps=eps)


def _table(x: torch.Tensor, norm: str, eps: float) -> tuple[Norm, NormSpec]:
    if x.dim() != 2:
        raise ValueError(f"expected a (batch, features) table, (N, C), got shape "
                         f"{list(x.shape)}")
    if norm not in TABLE_NORMS:
        raise ValueError(f"norm must be one of {', '.join(TABLE_NORMS)}, got {norm!r}")
    return NORM_TABLE[norm], _table_spec(norm, eps)


def table_norm(
    x: torch.Tensor,
    norm: str,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    impl: str = "scratch",
) -> NormResult:
    """A (batch, features) table through one of :data:`TABLE_NORMS`: LayerNorm or RMSNorm
    (statistics per sample) or BatchNorm in training mode (statistics per feature), with γ/β as
    tensors (or None) so that autograd reaches them."""
    entry, spec = _table(x, norm, eps)
    return entry.lnviz(x, *entry.arguments(x, spec, weight, bias), impl=impl)


def torch_table_norm(
    x: torch.Tensor,
    norm: str,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """:func:`table_norm`'s output through ``torch.nn.functional``."""
    entry, spec = _table(x, norm, eps)
    return entry.functional(x, *entry.arguments(x, spec, weight, bias))


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
    return NORM_TABLE[spec.norm].run(x, layout, spec, weight, bias, mask, impl)


def torch_reference(
    x: torch.Tensor, layout: str, spec: NormSpec, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The same computation through ``torch.nn.functional``: (output, positions to compare).

    torch has no mask, so masked BatchNorm is replayed on the real tokens alone and compared at
    those positions (the second element; ``None`` means every position).
    """
    _check_dims(x, layout, spec)
    weight, bias = affine_params(spec, x, layout)
    return NORM_TABLE[spec.norm].reference(x, layout, spec, weight, bias, mask)


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
    if layout == Layout.NCHW:
        n, c, h, w = array.shape
        return array.reshape(n * c, h * w)
    return array.reshape(-1, array.shape[-1])


def grouping(shape: tuple[int, ...], layout: str, spec: NormSpec) -> Grouping:
    """Which values share one μ and σ under ``spec``'s norm (:class:`Grouping`)."""
    return NORM_TABLE[spec.norm].grouping(tuple(shape), channel_dim(layout), spec)


def group_ids(shape: tuple[int, ...], layout: str, spec: NormSpec) -> np.ndarray:
    """For every element, the index of the group whose μ and σ normalize it."""
    return grouping(shape, layout, spec).ids()


def grouped(x: torch.Tensor, layout: str, spec: NormSpec,
            mask: torch.Tensor | None = None) -> Grouped:
    """``x`` arranged for its groups' statistics (:meth:`Grouping.arrange`); ``mask`` leaves
    padding out where the norm uses one (masked BatchNorm)."""
    kept = _mask(mask, spec) if spec.norm == NormKind.BATCH else None
    return grouping(tuple(x.shape), layout, spec).arrange(x, kept)


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
