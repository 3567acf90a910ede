"""impl="fast": the same :class:`~lnviz.norms.NormResult` as :mod:`lnviz.norms`, from torch's
fused native kernels.

Each native kernel (``torch.native_layer_norm``, ``torch.native_batch_norm``,
``torch.native_group_norm``, ``aten._fused_rms_norm``) returns the output and the statistics it
used (μ and 1/√(σ² + ε)) in one pass over the input, so a result costs about one read and one
write of the tensor. σ² is recovered from rstd as rstd⁻² − ε (exact up to rounding unless σ² is
far below ε), and x̂ is computed from the input only if someone reads ``NormResult.x_hat``.

The functions here are called by the public norms in :mod:`lnviz.norms` with ``impl="fast"``,
after those have checked the arguments; call those, not these.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch

from lnviz.norms import NormResult, _accumulation_dtype

__all__ = ["batch_norm", "group_norm", "instance_norm", "layer_norm", "rms_norm"]


def _lazy_x_hat(
    input: torch.Tensor, mean: torch.Tensor | None, rstd: torch.Tensor
) -> Callable[[], torch.Tensor]:
    """x̂ = (x − μ)·rstd (x·rstd without μ), as a function: a full-size tensor built on demand."""

    def x_hat() -> torch.Tensor:
        x = input.to(rstd.dtype)
        return (x - mean) * rstd if mean is not None else x * rstd

    return x_hat


def _var_from_rstd(rstd: torch.Tensor, eps: float) -> torch.Tensor:
    """σ² = rstd⁻² − ε, which the kernels do not return."""
    return (rstd.pow(-2) - eps).clamp_min(0)


def layer_norm(
    input: torch.Tensor,
    dims: tuple[int, ...],
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
) -> NormResult:
    """LayerNorm over the trailing ``dims``."""
    shape = [input.shape[d] for d in dims]
    output, mean, rstd = torch.native_layer_norm(input, shape, weight, bias, eps)
    stat_shape = tuple(input.shape[: input.dim() - len(dims)]) + (1,) * len(dims)
    mean, rstd = mean.reshape(stat_shape), rstd.reshape(stat_shape)
    return NormResult(output, mean, _var_from_rstd(rstd, eps), rstd,
                      _lazy_x_hat(input, mean, rstd), dims)


def rms_norm(
    input: torch.Tensor, dims: tuple[int, ...], weight: torch.Tensor | None, eps: float
) -> NormResult:
    """RMSNorm over the trailing ``dims``; ``var`` is the mean square."""
    shape = [input.shape[d] for d in dims]
    output, rstd = torch.ops.aten._fused_rms_norm(input, shape, weight, eps)
    stat_shape = tuple(input.shape[: input.dim() - len(dims)]) + (1,) * len(dims)
    rstd = rstd.to(_accumulation_dtype(input.dtype)).reshape(stat_shape)
    return NormResult(output, None, _var_from_rstd(rstd, eps), rstd,
                      _lazy_x_hat(input, None, rstd), dims)


def batch_norm(
    input: torch.Tensor,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    training: bool,
    momentum: float | None,
    eps: float,
    channel: int,
    num_batches_tracked: torch.Tensor | None = None,
) -> NormResult:
    """BatchNorm with the channels at dim ``channel`` (no mask: the kernel has none).

    In training mode the kernel updates the running statistics in place, as ``F.batch_norm``
    does, and ``num_batches_tracked`` counts the batch, as in the readable path.
    """
    dims = tuple(d for d in range(input.dim()) if d != channel)
    x = input.movedim(channel, 1) if channel != 1 else input
    output, save_mean, save_rstd = torch.native_batch_norm(
        x, weight, bias, running_mean, running_var, training, momentum or 0.0, eps
    )
    if training and num_batches_tracked is not None:
        num_batches_tracked.add_(1)
    stat_shape = [1] * input.dim()
    stat_shape[channel] = input.shape[channel]
    acc = _accumulation_dtype(input.dtype)
    if training:
        mean, rstd = save_mean.to(acc), save_rstd.to(acc)
    else:  # evaluation: the running statistics
        mean = running_mean.to(acc)
        rstd = torch.rsqrt(running_var.to(acc) + eps)
    mean, rstd = mean.reshape(stat_shape), rstd.reshape(stat_shape)
    output = output.movedim(1, channel) if channel != 1 else output
    return NormResult(output, mean, _var_from_rstd(rstd, eps), rstd,
                      _lazy_x_hat(input, mean, rstd), dims)


def group_norm(
    input: torch.Tensor,
    num_groups: int,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
) -> NormResult:
    """GroupNorm of an ``(N, C, *)`` input; each channel carries its group's statistics."""
    # torch's kernel refuses a strided view such as the (N, C, L) transpose of (N, L, C) tokens
    input = input.contiguous()
    n, c = input.shape[0], input.shape[1]
    spatial = math.prod(input.shape[2:])
    # CUDA's kernel wants γ and β in the input's dtype (the CPU one also takes float32 ones).
    weight = None if weight is None else weight.to(input.dtype)
    bias = None if bias is None else bias.to(input.dtype)
    output, mean, rstd = torch.native_group_norm(input, weight, bias, n, c, spatial, num_groups,
                                                 eps)
    # (N, G) statistics, repeated for each channel of a group so that they broadcast.
    stat_shape = (n, c) + (1,) * (input.dim() - 2)
    acc = _accumulation_dtype(input.dtype)
    mean = mean.to(acc).repeat_interleave(c // num_groups, dim=1).reshape(stat_shape)
    rstd = rstd.to(acc).repeat_interleave(c // num_groups, dim=1).reshape(stat_shape)
    return NormResult(output, mean, _var_from_rstd(rstd, eps), rstd,
                      _lazy_x_hat(input, mean, rstd), tuple(range(1, input.dim())))


def instance_norm(
    input: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> NormResult:
    """InstanceNorm of an ``(N, C, *)`` input: GroupNorm with one group per channel."""
    result = group_norm(input, input.shape[1], weight, bias, eps)
    return dataclasses.replace(result, reduce_dims=tuple(range(2, input.dim())))
