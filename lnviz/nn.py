"""torch.nn drop-ins computed by lnviz: the normalization modules, and Dynamic Tanh.

Each norm module here *is* torch's (a subclass): the same constructor arguments, parameters,
buffers and state-dict keys, so a checkpoint loads into either, ``isinstance(m, nn.LayerNorm)``
holds, and :func:`lnviz.capture` records it as torch's. Only ``forward`` differs: it calls
:mod:`lnviz.norms`, whose every step is readable (``impl="scratch"``, the default) or torch's
fused kernels (``impl="fast"``). Outputs equal torch's to float rounding, and BatchNorm and
InstanceNorm update their running statistics in training mode as torch's do (BatchNorm: the
momentum, the cumulative average of ``momentum=None``, ``num_batches_tracked``; InstanceNorm,
as torch's, takes ``momentum=None`` as 0)::

    import lnviz.nn as lnn

    norm = lnn.LayerNorm(768)            # torch.nn.LayerNorm(768), computed by lnviz
    norm.load_state_dict(torch_norm.state_dict())
    lnn.DyT(768, alpha=0.5)              # γ·tanh(αx) + β, Zhu et al. 2025

``impl`` is a keyword-only constructor argument and an attribute, not part of the state dict.
"""

from __future__ import annotations

import torch
from torch import nn

from lnviz.norms import (
    _check_impl,
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    rms_norm,
)

__all__ = ["BatchNorm1d", "BatchNorm2d", "DyT", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d", "LayerNorm", "RMSNorm"]


class _Computed:
    """torch's constructor, plus ``impl`` (keyword-only, checked, not in the state dict): how
    :mod:`lnviz.norms` computes the forward."""

    impl: str

    def __init__(self, *args, impl: str = "scratch", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _check_impl(impl)
        self.impl = impl


class LayerNorm(_Computed, nn.LayerNorm):
    """:class:`torch.nn.LayerNorm`, computed by :func:`lnviz.layer_norm`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps,
                          impl=self.impl).output


class RMSNorm(_Computed, nn.RMSNorm):
    """:class:`torch.nn.RMSNorm`, computed by :func:`lnviz.rms_norm` (``eps=None`` as torch's:
    the machine epsilon of the dtype the statistics are computed in)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return rms_norm(input, self.normalized_shape, self.weight, self.eps,
                        impl=self.impl).output


class _BatchNormForward(_Computed):
    """torch's ``_BatchNorm.forward``, with :func:`lnviz.batch_norm` doing the arithmetic (and
    the running statistics' update, ``num_batches_tracked`` included)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        tracking = self.training and self.track_running_stats
        # eval mode normalizes with the running statistics, unless the module keeps none
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return batch_norm(
            input, self.running_mean if keep else None, self.running_var if keep else None,
            self.weight, self.bias, use_batch, self.momentum, self.eps,
            num_batches_tracked=self.num_batches_tracked if tracking else None,
            impl=self.impl).output


class BatchNorm1d(_BatchNormForward, nn.BatchNorm1d):
    """:class:`torch.nn.BatchNorm1d`, computed by :func:`lnviz.batch_norm`: (N, C) or
    (N, C, L)."""


class BatchNorm2d(_BatchNormForward, nn.BatchNorm2d):
    """:class:`torch.nn.BatchNorm2d`, computed by :func:`lnviz.batch_norm`: (N, C, H, W)."""


class GroupNorm(_Computed, nn.GroupNorm):
    """:class:`torch.nn.GroupNorm`, computed by :func:`lnviz.group_norm`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps,
                          impl=self.impl).output


class _InstanceNormForward(_Computed):
    """torch's ``_InstanceNorm.forward`` (an unbatched input gets a batch of one), with
    :func:`lnviz.instance_norm` doing the arithmetic."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.dim() not in (self._get_no_batch_dim(), self._get_no_batch_dim() + 1):
            raise ValueError(f"expected {self._get_no_batch_dim()}D or "
                             f"{self._get_no_batch_dim() + 1}D input (got {input.dim()}D input)")
        unbatched = input.dim() == self._get_no_batch_dim()
        batched = input.unsqueeze(0) if unbatched else input
        channels = batched.shape[1]
        if self.affine and channels != self.num_features:
            raise ValueError(f"expected input's size at dim=1 to match num_features "
                             f"({self.num_features}), but got: {channels}.")
        output = instance_norm(
            batched, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0, self.eps,
            impl=self.impl).output
        return output.squeeze(0) if unbatched else output


class InstanceNorm1d(_InstanceNormForward, nn.InstanceNorm1d):
    """:class:`torch.nn.InstanceNorm1d`, computed by :func:`lnviz.instance_norm`: (N, C, L) or
    (C, L)."""


class InstanceNorm2d(_InstanceNormForward, nn.InstanceNorm2d):
    """:class:`torch.nn.InstanceNorm2d`, computed by :func:`lnviz.instance_norm`: (N, C, H, W)
    or (C, H, W)."""


class DyT(nn.Module):
    """Dynamic Tanh (Zhu, Chen, He, LeCun and Liu, "Transformers without Normalization", CVPR
    2025): γ·tanh(αx) + β over the last dims, one value at a time — no mean, no variance. α is
    one learned number (initialised to ``alpha``, 0.5 in the paper), γ and β one per feature
    (ones and zeros), as in the paper's code: parameters ``alpha``, ``weight``, ``bias``."""

    def __init__(self, normalized_shape: int | tuple[int, ...], alpha: float = 0.5, *,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
            tuple(normalized_shape)
        self.normalized_shape = shape
        self.alpha = nn.Parameter(torch.full((1,), float(alpha), device=device, dtype=dtype))
        self.weight = nn.Parameter(torch.ones(shape, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(shape, device=device, dtype=dtype))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.weight * torch.tanh(self.alpha * input) + self.bias

    def extra_repr(self) -> str:
        alpha = "?" if self.alpha.is_meta else f"{float(self.alpha.detach()):g}"
        return f"{self.normalized_shape}, alpha={alpha}"
