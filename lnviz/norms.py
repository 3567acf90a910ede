"""The five normalizations, written so that each line of the formula is visible.

Every function here has the arguments of its ``torch.nn.functional`` namesake (same names, order
and defaults), so a torch call can be replayed on lnviz and compared number by number. Instead of
only the output, each returns a :class:`NormResult` with every intermediate a learner wants to see:
the mean μ, the variance σ², the reciprocal standard deviation 1/√(σ² + ε), the normalized x̂ and
the output y = γ·x̂ + β.

All of them share one recipe and differ only in *which* values share a μ and σ:

=============  ================================================  ===========================
norm           statistics taken over                             one (μ, σ²) per
=============  ================================================  ===========================
LayerNorm      the trailing ``normalized_shape`` dims             sample (token)
RMSNorm        the trailing dims, no centering                    sample (token)
BatchNorm      every dim except the channel dim                   channel (feature)
GroupNorm      a group of channels and all spatial dims           (sample, group)
InstanceNorm   the spatial dims                                   (sample, channel)
=============  ================================================  ===========================

Statistics are accumulated in at least float32 (float16/bfloat16 inputs are promoted), and the
variance is computed in two passes — first μ, then the mean of (x − μ)² — never as E[x²] − E[x]²,
which cancels catastrophically when the values sit far from zero.

Every function also takes a keyword-only ``impl``: ``"scratch"`` (the default) is the readable
code below each docstring's formula, materialising every intermediate; ``"fast"`` returns the
same :class:`NormResult` from torch's fused native kernels (:mod:`lnviz.kernels`), building
``x_hat`` only when it is read. The app uses ``fast`` for large tensors; tests hold the two to
the same answers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType

import torch

__all__ = [
    "IMPLS",
    "NormResult",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "layer_norm",
    "mean_and_var",
    "rms_norm",
]


@dataclass(frozen=True)
class NormResult:
    """Everything a normalization computed, not just its output.

    Attributes:
        output: y = γ·x̂ + β, with the input's shape and dtype.
        mean: μ over ``reduce_dims`` (``None`` for RMSNorm, which does not center).
        var: σ², the biased variance used to normalize (for RMSNorm: the mean square).
        rstd: 1/√(σ² + ε).
        x_hat: x̂ = (x − μ)·rstd, the normalized values before γ and β.
        reduce_dims: the non-negative dims the statistics were taken over.

    ``mean``, ``var`` and ``rstd`` keep the reduced dims with size 1 so that they broadcast
    against the input; they and ``x_hat`` are in the accumulation dtype (float32 for float16 and
    bfloat16 inputs, otherwise the input's dtype). x̂ is given to the constructor (fifth, as
    ``_x_hat``) either as a tensor or as a function that computes it: the fast path builds it
    only when it is read, which saves a full-size tensor, and keeps it once built.
    """

    output: torch.Tensor
    mean: torch.Tensor | None
    var: torch.Tensor
    rstd: torch.Tensor
    _x_hat: torch.Tensor | Callable[[], torch.Tensor] = field(repr=False)
    reduce_dims: tuple[int, ...]

    @cached_property
    def x_hat(self) -> torch.Tensor:
        return self._x_hat() if callable(self._x_hat) else self._x_hat


IMPLS = ("scratch", "fast")


def _check_impl(impl: str) -> None:
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")


def _kernels() -> ModuleType:
    """:mod:`lnviz.kernels`, imported on first use: it imports :class:`NormResult` from here."""
    from lnviz import kernels

    return kernels


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    # Half-precision sums lose digits quickly; like torch's kernels, accumulate in float32.
    if not dtype.is_floating_point:
        raise TypeError(f"normalization needs a floating-point tensor, got {dtype}")
    return torch.promote_types(dtype, torch.float32)


def _mean(x: torch.Tensor, dims: tuple[int, ...], count: int | torch.Tensor) -> torch.Tensor:
    """μ = (1/n) Σ x, over ``dims``, keeping them with size 1."""
    return x.sum(dim=dims, keepdim=True) / count


def mean_and_var(
    x: torch.Tensor, dims: tuple[int, ...], weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | int]:
    """Two-pass μ and biased σ² over ``dims``; ``weights`` (0/1) leaves positions out.

    Returns (μ, σ², n) where n is the number of values each statistic was taken over.
    """
    _, mean, var, count = _centered_stats(x, dims, weights)
    return mean, var, count


def _centered_stats(
    x: torch.Tensor, dims: tuple[int, ...], weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | int]:
    """(x − μ, μ, σ², n): the first pass finds μ, the second averages the squared deviations."""
    if weights is None:
        count: torch.Tensor | int = math.prod(x.shape[d] for d in dims)
        mean = _mean(x, dims, count)
        centered = x - mean
        # The rounded μ can sit a last bit off; the mean of the deviations is that error, so one
        # correction makes μ exact to rounding (a constant row then centres to exactly 0).
        correction = _mean(centered, dims, count)
        var = _mean(centered.sub_(correction).square(), dims, count)
    else:
        count = weights.sum(dim=dims, keepdim=True)
        mean = _mean(x * weights, dims, count)
        centered = x - mean
        correction = _mean(centered * weights, dims, count)
        var = _mean((centered.sub_(correction) * weights).square(), dims, count)
    return centered, mean + correction, var, count


def _affine(
    x_hat: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    param_shape: Sequence[int],
) -> torch.Tensor:
    """y = γ·x̂ + β, with γ and β reshaped to ``param_shape`` so that they broadcast."""
    gamma = None if weight is None else weight.to(x_hat.dtype).reshape(param_shape)
    beta = None if bias is None else bias.to(x_hat.dtype).reshape(param_shape)
    if gamma is not None and beta is not None:
        return torch.addcmul(beta, x_hat, gamma)  # β + x̂·γ in one pass over the tensor
    if gamma is not None:
        return x_hat * gamma
    return x_hat + beta if beta is not None else x_hat


def _result(
    centered: torch.Tensor,
    mean: torch.Tensor | None,
    var: torch.Tensor,
    eps: float,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    param_shape: Sequence[int],
    reduce_dims: tuple[int, ...],
    input_dtype: torch.dtype,
) -> NormResult:
    """The steps every norm shares once x − μ (just x for RMSNorm) and σ² are known."""
    rstd = torch.rsqrt(var + eps)  # 1/√(σ² + ε); ε = 0 on a constant row gives the true inf
    x_hat = centered * rstd
    y = _affine(x_hat, weight, bias, param_shape)
    return NormResult(y.to(input_dtype), mean, var, rstd, x_hat, reduce_dims)


def _trailing_dims(input: torch.Tensor, normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) == 0 or len(shape) > input.dim() or tuple(input.shape[-len(shape) :]) != shape:
        raise ValueError(
            f"normalized_shape {list(shape)} must match the last {len(shape)} dim(s) of the "
            f"input, whose shape is {list(input.shape)}"
        )
    return tuple(range(input.dim() - len(shape), input.dim()))


def layer_norm(
    input: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    impl: str = "scratch",
) -> NormResult:
    r"""Layer Normalization (Ba et al., 2016): each sample is normalized over its own features.

    .. math::
        μ = \frac{1}{H}\sum_i x_i,\quad σ^2 = \frac{1}{H}\sum_i (x_i - μ)^2,\quad
        y = γ\,\frac{x - μ}{\sqrt{σ^2 + ε}} + β

    where the sums run over the last ``len(normalized_shape)`` dims (H values). Nothing is shared
    between samples, so the result does not depend on the batch and is the same in training and
    evaluation.

    Args:
        input: the activations.
        normalized_shape: the trailing shape to normalize over, e.g. ``d_model`` or ``(L, C)``.
        weight: γ, of shape ``normalized_shape`` (``None`` = 1).
        bias: β, of shape ``normalized_shape`` (``None`` = 0).
        eps: ε, added to σ² so that a constant row does not divide by zero.

    Shape:
        - input: ``(*, *normalized_shape)``
        - output: same shape as input; ``mean``/``var``/``rstd``: ``(*, 1, …, 1)``

    Example:
        >>> layer_norm(torch.tensor([[1.0, 2.0, 3.0]]), 3).output
        tensor([[-1.2247,  0.0000,  1.2247]])
    """
    dims = _trailing_dims(input, normalized_shape)
    _check_impl(impl)
    if impl == "fast":
        return _kernels().layer_norm(input, dims, weight, bias, eps)
    x = input.to(_accumulation_dtype(input.dtype))
    centered, mean, var, _ = _centered_stats(x, dims)  # μ, then σ² = mean((x − μ)²)
    param_shape = tuple(input.shape[d] for d in dims)
    return _result(centered, mean, var, eps, weight, bias, param_shape, dims, input.dtype)


def rms_norm(
    input: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    eps: float | None = None,
    *,
    impl: str = "scratch",
) -> NormResult:
    r"""RMSNorm (Zhang & Sennrich, 2019): LayerNorm without centering and without β.

    .. math::
        \mathrm{ms} = \frac{1}{H}\sum_i x_i^2,\quad y = γ\,\frac{x}{\sqrt{\mathrm{ms} + ε}}

    Only the scale of each sample is fixed; its mean is left where it was. ``var`` holds the mean
    square ms and ``mean`` is ``None``.

    Args:
        input: the activations.
        normalized_shape: the trailing shape to normalize over.
        weight: γ, of shape ``normalized_shape`` (``None`` = 1).
        eps: ε; ``None`` means the machine epsilon of the accumulation dtype (float32 for
            float16/bfloat16 inputs), which is what torch's kernel uses.

    Shape:
        - input: ``(*, *normalized_shape)``
        - output: same shape as input; ``var``/``rstd``: ``(*, 1, …, 1)``

    Example:
        >>> rms_norm(torch.tensor([[3.0, 4.0]]), 2).output
        tensor([[0.8485, 1.1314]])
    """
    dims = _trailing_dims(input, normalized_shape)
    _check_impl(impl)
    x = input.to(_accumulation_dtype(input.dtype))
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    if impl == "fast":
        return _kernels().rms_norm(input, dims, weight, eps)
    mean_square = _mean(x**2, dims, math.prod(x.shape[d] for d in dims))
    param_shape = tuple(input.shape[d] for d in dims)
    # No centering: x itself plays the part of x − μ.
    return _result(x, None, mean_square, eps, weight, None, param_shape, dims, input.dtype)


def _update_running(
    running: torch.Tensor,
    batch_stat: torch.Tensor,
    momentum: float | None,
    num_batches_tracked: torch.Tensor | None,
) -> None:
    """running ← (1 − m)·running + m·batch, in place; m = 1/k for a cumulative average."""
    if momentum is None:
        if num_batches_tracked is None:
            raise ValueError(
                "momentum=None (a cumulative average) needs num_batches_tracked, the count of "
                "batches seen so far, as nn.BatchNorm keeps it"
            )
        momentum = 1.0 / float(num_batches_tracked)
    running.mul_(1.0 - momentum).add_(batch_stat.to(running.dtype), alpha=momentum)


def batch_norm(
    input: torch.Tensor,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    training: bool = False,
    momentum: float | None = 0.1,
    eps: float = 1e-5,
    *,
    channel_dim: int = 1,
    mask: torch.Tensor | None = None,
    num_batches_tracked: torch.Tensor | None = None,
    impl: str = "scratch",
) -> NormResult:
    r"""Batch Normalization (Ioffe & Szegedy, 2015): each channel is normalized over the batch.

    .. math::
        μ_c = \frac{1}{m}\sum_{j} x_{j,c},\quad σ_c^2 = \frac{1}{m}\sum_j (x_{j,c} - μ_c)^2,\quad
        y = γ_c\,\frac{x - μ_c}{\sqrt{σ_c^2 + ε}} + β_c

    where j runs over every position except the channel dim (the batch, and the sequence or the
    spatial dims): one sample's output depends on every other sample in its batch.

    In training mode the batch's statistics are used, and ``running_mean``/``running_var`` (if
    given) are updated in place exactly as torch does::

        running_mean ← (1 − momentum)·running_mean + momentum·μ
        running_var  ← (1 − momentum)·running_var  + momentum·σ²·m/(m − 1)   (unbiased)

    With ``momentum=None`` the update is a cumulative average (momentum = 1/k at the k-th batch);
    pass ``num_batches_tracked``, a counter tensor incremented in place like nn.BatchNorm's. In
    evaluation mode the running statistics are used instead of the batch's.

    Args:
        input: the activations; torch's layout has the channels at ``channel_dim=1``.
        running_mean, running_var: buffers of shape ``(C,)``; required in evaluation mode.
        weight, bias: γ and β of shape ``(C,)``.
        training: use (and record) the batch statistics.
        momentum: weight of the new batch in the running averages, or ``None``.
        eps: ε added to σ².
        channel_dim: the dim holding the features; ``-1`` for a transformer's (batch, seq, C).
        mask: bool, the input's shape without ``channel_dim``; True marks a real token. Positions
            marked False (padding) are left out of the statistics.
        num_batches_tracked: with ``momentum=None``, a counter incremented in training mode.

    Shape:
        - input: ``(N, C)``, ``(N, C, L)``, ``(N, C, H, W)``…, or any layout with ``channel_dim``
        - output: same shape as input; ``mean``/``var``/``rstd``: size C along ``channel_dim``,
          1 elsewhere

    Example:
        >>> x = torch.tensor([[1.0, 10.0], [3.0, 30.0]])
        >>> batch_norm(x, None, None, training=True).output
        tensor([[-1.0000, -1.0000],
                [ 1.0000,  1.0000]])
    """
    _check_impl(impl)
    channel = channel_dim % input.dim() if input.dim() else 0
    dims = tuple(d for d in range(input.dim()) if d != channel)
    param_shape = [1] * input.dim()
    param_shape[channel] = input.shape[channel]
    x = input.to(_accumulation_dtype(input.dtype))
    use_batch_stats = training or running_mean is None or running_var is None

    if impl == "fast" and mask is None and (momentum is not None or not training):
        return _kernels().batch_norm(input, running_mean, running_var, weight, bias, training,
                                     momentum, eps, channel, dims, use_batch_stats)
    if not use_batch_stats:
        mean = running_mean.to(x.dtype).reshape(param_shape)
        var = running_var.to(x.dtype).reshape(param_shape)
        return _result(x - mean, mean, var, eps, weight, bias, param_shape, dims, input.dtype)
    if not training:
        raise ValueError(
            "running_mean and running_var must be given in evaluation mode (training=False); "
            "pass training=True to normalize with the batch's own statistics"
        )

    weights = None
    if mask is not None:
        expected = tuple(s for d, s in enumerate(input.shape) if d != channel)
        if tuple(mask.shape) != expected:
            raise ValueError(
                f"mask must have the input's shape without the channel dim, {list(expected)}; "
                f"got {list(mask.shape)}"
            )
        weights = mask.to(device=x.device, dtype=x.dtype).unsqueeze(channel)

    count = int(weights.sum()) if weights is not None else math.prod(input.shape[d] for d in dims)
    if count == 1:
        raise ValueError(
            "BatchNorm in training mode needs more than one value per channel to estimate a "
            f"variance; this input has one (shape {list(input.shape)})"
        )
    centered, mean, var, _ = _centered_stats(x, dims, weights)

    if count > 0:
        with torch.no_grad():
            if num_batches_tracked is not None:
                num_batches_tracked.add_(1)
            if running_mean is not None:
                _update_running(running_mean, mean.flatten(), momentum, num_batches_tracked)
            if running_var is not None:
                unbiased = var.flatten() * count / (count - 1)  # Bessel's correction
                _update_running(running_var, unbiased, momentum, num_batches_tracked)
    return _result(centered, mean, var, eps, weight, bias, param_shape, dims, input.dtype)


def group_norm(
    input: torch.Tensor,
    num_groups: int,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    impl: str = "scratch",
) -> NormResult:
    r"""Group Normalization (Wu & He, 2018): channels are split into groups, and each sample is
    normalized over one group of channels and all spatial positions.

    .. math::
        μ_{n,g} = \frac{1}{m}\sum_{c \in g,\,s} x_{n,c,s},\quad
        σ^2_{n,g} = \frac{1}{m}\sum_{c \in g,\,s} (x_{n,c,s} - μ_{n,g})^2,\quad
        y = γ_c\,\frac{x - μ_{n,g}}{\sqrt{σ^2_{n,g} + ε}} + β_c

    ``num_groups=1`` is LayerNorm over (C, *) with per-channel γ/β; ``num_groups=C`` is
    InstanceNorm. Like LayerNorm it does not look across the batch.

    Args:
        input: activations with channels at dim 1.
        num_groups: G, which must divide the number of channels C.
        weight, bias: per-channel γ and β of shape ``(C,)``.
        eps: ε added to σ².

    Shape:
        - input: ``(N, C, *)``
        - output: same shape; ``mean``/``var``/``rstd``: ``(N, C, 1, …)``, each channel carrying
          the statistics of its group so that they broadcast against the input

    Example:
        >>> x = torch.tensor([[[1.0], [3.0], [10.0], [30.0]]])
        >>> group_norm(x, 2).output.flatten()
        tensor([-1.0000,  1.0000, -1.0000,  1.0000])
    """
    if input.dim() < 2:
        raise ValueError(f"group_norm needs (N, C, *) input, got shape {list(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if num_groups < 1 or c % num_groups:
        raise ValueError(f"num_groups must divide the number of channels: {c} % {num_groups} != 0")
    if n * (c // num_groups) * math.prod(input.shape[2:]) == 1:
        # torch refuses this too: one value per group has no spread to normalize by.
        raise ValueError("group_norm needs more than one value per group; this input has one")
    _check_impl(impl)
    if impl == "fast":
        return _kernels().group_norm(input, num_groups, weight, bias, eps)
    x = input.to(_accumulation_dtype(input.dtype))
    # View the channels as (G, C/G) so that one group is a block of whole dims to reduce over.
    grouped = x.reshape(n, num_groups, c // num_groups, *input.shape[2:])
    group_dims = tuple(range(2, grouped.dim()))
    centered, mean, var, _ = _centered_stats(grouped, group_dims)
    stat_shape = (n, c) + (1,) * (input.dim() - 2)
    mean = mean.reshape(n, num_groups, 1).expand(n, num_groups, c // num_groups).reshape(stat_shape)
    var = var.reshape(n, num_groups, 1).expand(n, num_groups, c // num_groups).reshape(stat_shape)
    param_shape = (1, c) + (1,) * (input.dim() - 2)
    dims = tuple(range(1, input.dim()))
    return _result(centered.reshape(input.shape), mean, var, eps, weight, bias, param_shape, dims,
                   input.dtype)


def instance_norm(
    input: torch.Tensor,
    running_mean: torch.Tensor | None = None,
    running_var: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
    *,
    impl: str = "scratch",
) -> NormResult:
    r"""Instance Normalization (Ulyanov et al., 2016): each channel of each sample is normalized
    over its own spatial positions.

    .. math::
        μ_{n,c} = \frac{1}{m}\sum_s x_{n,c,s},\quad
        σ^2_{n,c} = \frac{1}{m}\sum_s (x_{n,c,s} - μ_{n,c})^2,\quad
        y = γ_c\,\frac{x - μ_{n,c}}{\sqrt{σ^2_{n,c} + ε}} + β_c

    With ``use_input_stats`` (the default) and running buffers given, the buffers are updated in
    place with the batch average of the per-instance μ and unbiased σ², as torch does; with
    ``use_input_stats=False`` the running statistics are used instead.

    Args:
        input: activations with channels at dim 1 and at least one spatial dim.
        running_mean, running_var: optional buffers of shape ``(C,)``.
        weight, bias: per-channel γ and β of shape ``(C,)``.
        use_input_stats: normalize with each instance's own statistics.
        momentum: weight of the new batch in the running averages.
        eps: ε added to σ².

    Shape:
        - input: ``(N, C, *)`` with at least one spatial dim
        - output: same shape; ``mean``/``var``/``rstd``: ``(N, C, 1, …)``

    Example:
        >>> instance_norm(torch.tensor([[[1.0, 3.0], [10.0, 30.0]]])).output
        tensor([[[-1.0000,  1.0000],
                 [-1.0000,  1.0000]]])
    """
    if input.dim() < 3:
        raise ValueError(
            f"instance_norm needs (N, C, *) input with a spatial dim, got {list(input.shape)}"
        )
    _check_impl(impl)
    c = input.shape[1]
    dims = tuple(range(2, input.dim()))
    param_shape = (1, c) + (1,) * len(dims)
    x = input.to(_accumulation_dtype(input.dtype))

    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("use_input_stats=False needs running_mean and running_var")
        mean = running_mean.to(x.dtype).reshape(param_shape)
        var = running_var.to(x.dtype).reshape(param_shape)
        return _result(x - mean, mean, var, eps, weight, bias, param_shape, dims, input.dtype)

    count = math.prod(input.shape[d] for d in dims)
    if count == 1:
        raise ValueError(
            "InstanceNorm needs more than one spatial position per channel; this input has one "
            f"(shape {list(input.shape)})"
        )
    if impl == "fast":
        result = _kernels().instance_norm(input, weight, bias, eps)
    else:
        centered, mean, var, _ = _centered_stats(x, dims)
        result = _result(centered, mean, var, eps, weight, bias, param_shape, dims, input.dtype)
    if input.shape[0] > 0 and count > 0:
        with torch.no_grad():
            # The running buffers see the batch average of the per-instance statistics.
            if running_mean is not None:
                _update_running(running_mean, result.mean.mean(dim=0).flatten(), momentum, None)
            if running_var is not None:
                unbiased = result.var * count / (count - 1)
                _update_running(running_var, unbiased.mean(dim=0).flatten(), momentum, None)
    return result

