"""impl="fast": torch's fused native kernels, each one pass over the input.

Each native kernel (``torch.native_layer_norm``, ``torch.native_batch_norm``,
``torch.native_group_norm``, ``aten._fused_rms_norm``) returns the output and the statistics it
used, μ and 1/√(σ² + ε), in one read and one write of the tensor. The functions here call one
kernel each and give back a `Kernel`: the output, and μ and rstd shaped to broadcast against the
input, in the accumulation dtype. :mod:`lnviz.norms` turns that into a
:class:`~lnviz.norms.NormResult` (σ² and x̂ built from μ and rstd only when read).

A function returns None for a call its kernel cannot take (a mask, a cumulative average, an
empty input): the readable code in :mod:`lnviz.norms` then computes it. What each kernel takes is
said here, where the kernel is; the norms decide nothing about it. They have checked the
arguments before calling; call them, not these.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

__all__ = ["Kernel", "accumulation_dtype", "batch_norm", "group_norm", "instance_norm",
           "layer_norm", "rms_norm"]


class Kernel(NamedTuple):
    """What a fused kernel returns: y, and μ (None for RMSNorm) and 1/√(σ² + ε) shaped to
    broadcast against the input."""

    output: torch.Tensor
    mean: torch.Tensor | None
    rstd: torch.Tensor


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype statistics are summed in: float32 at least, as torch's kernels do (half-precision
    sums lose digits quickly)."""
    if not dtype.is_floating_point:
        raise TypeError(f"normalization needs a floating-point tensor, got {dtype}")
    return torch.promote_types(dtype, torch.float32)


def layer_norm(
    input: torch.Tensor,
    dims: tuple[int, ...],
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
) -> Kernel:
    """LayerNorm over the trailing ``dims``."""
    shape = [input.shape[d] for d in dims]
    output, mean, rstd = torch.native_layer_norm(input, shape, weight, bias, eps)
    stat_shape = tuple(input.shape[: input.dim() - len(dims)]) + (1,) * len(dims)
    return Kernel(output, mean.reshape(stat_shape), rstd.reshape(stat_shape))


def rms_norm(
    input: torch.Tensor, dims: tuple[int, ...], weight: torch.Tensor | None, eps: float
) -> Kernel:
    """RMSNorm over the trailing ``dims``."""
    shape = [input.shape[d] for d in dims]
    output, rstd = torch.ops.aten._fused_rms_norm(input, shape, weight, eps)
    stat_shape = tuple(input.shape[: input.dim() - len(dims)]) + (1,) * len(dims)
    return Kernel(output, None, rstd.to(accumulation_dtype(input.dtype)).reshape(stat_shape))


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
    mask: torch.Tensor | None,
    num_batches_tracked: torch.Tensor | None = None,
) -> Kernel | None:
    """BatchNorm with the channels at dim ``channel``. The kernel takes no mask, no cumulative
    average (momentum None) in training, no empty input and no input without a channel dim.

    In training mode the kernel updates the running statistics in place, as ``F.batch_norm``
    does, and ``num_batches_tracked`` counts the batch, as in the readable path.
    """
    if mask is not None or input.dim() < 2 or (training and (
            momentum is None or input.numel() == 0)):
        return None
    x = input.movedim(channel, 1) if channel != 1 else input
    output, save_mean, save_rstd = torch.native_batch_norm(
        x, weight, bias, running_mean, running_var, training, momentum or 0.0, eps
    )
    if training and num_batches_tracked is not None:
        num_batches_tracked.add_(1)
    stat_shape = [1] * input.dim()
    stat_shape[channel] = input.shape[channel]
    acc = accumulation_dtype(input.dtype)
    if training:
        mean, rstd = save_mean.to(acc), save_rstd.to(acc)
    else:  # evaluation: the running statistics
        mean = running_mean.to(acc)
        rstd = torch.rsqrt(running_var.to(acc) + eps)
    output = output.movedim(1, channel) if channel != 1 else output
    return Kernel(output, mean.reshape(stat_shape), rstd.reshape(stat_shape))


def group_norm(
    input: torch.Tensor,
    num_groups: int,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
) -> Kernel | None:
    """GroupNorm of an ``(N, C, *)`` input; each channel carries its group's statistics. The
    kernel takes no input without channels."""
    if input.numel() == 0:
        return None
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
    acc = accumulation_dtype(input.dtype)
    mean = mean.to(acc).repeat_interleave(c // num_groups, dim=1).reshape(stat_shape)
    rstd = rstd.to(acc).repeat_interleave(c // num_groups, dim=1).reshape(stat_shape)
    return Kernel(output, mean, rstd)


def instance_norm(
    input: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> Kernel | None:
    """InstanceNorm of an ``(N, C, *)`` input: GroupNorm with one group per channel."""
    return group_norm(input, input.shape[1], weight, bias, eps)
