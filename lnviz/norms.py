"""The five normalizations, written so that each line of the formula is visible.

Every function here has the arguments of its ``torch.nn.functional`` namesake (same names, order
and defaults), so a torch call can be replayed on lnviz and compared number by number. Instead of
only the output, each returns a :class:`NormResult` with every intermediate a learner wants to see:
the mean μ, the variance σ², the reciprocal standard deviation 1/√(σ² + ε), the normalized x̂ and
the output y = γ·x̂ + β.

All of them share one recipe and differ in *which* values share a μ and σ (RMSNorm also
skips the centering, and BatchNorm in eval mode uses its running statistics):

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
variance comes from three sums over the values, never from E[x²] − E[x]², which cancels
catastrophically when the values sit far from zero:

1. Σx gives μ;
2. Σ(x − μ) would be 0 with exact arithmetic: it is the rounding error of μ, and subtracting it
   from x − μ (adding it to μ) makes μ exact to rounding, so that a constant row centres to
   exactly 0;
3. Σ(x − μ)² gives σ².

Algebraically, with the rounded μ of step 1, this σ² is Σ(x − μ)²/n − (Σ(x − μ)/n)²: the
"corrected two-pass algorithm" of Chan, Golub & LeVeque (1983), two passes over the data in the
textbook's sense, three sums here.

Each function's body is that recipe one step a line, with the shape of every intermediate in a
comment (for the layout its docstring names). Every function also takes a keyword-only ``impl``:
``"scratch"`` (the default) runs that readable code, materialising every intermediate; ``"fast"``
returns the same :class:`NormResult` from torch's fused native kernels (:mod:`lnviz.kernels`),
building ``x_hat`` only when it is read; for LayerNorm and RMSNorm on a CUDA GPU, ``"fused"``
returns it from lnviz's own Triton kernel (:mod:`lnviz.fused`: one read of x, one write of y).
The app uses ``fast`` for large tensors; tests hold them all to the same answers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch

from lnviz import kernels
from lnviz.kernels import Kernel
from lnviz.kernels import accumulation_dtype as _accumulation_dtype

__all__ = [
    "IMPLS",
    "NormResult",
    "batch_norm",
    "centre",
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
    bfloat16 inputs, otherwise the input's dtype). σ² and x̂ are given to the constructor (third
    as ``_var``, fifth as ``_x_hat``) either as tensors or as functions that compute them: the
    fast path builds them only when they are read (x̂ is a full-size tensor, and σ² one more
    launch on a GPU), and keeps them once built.
    """

    output: torch.Tensor
    mean: torch.Tensor | None
    _var: torch.Tensor | Callable[[], torch.Tensor] = field(repr=False)
    rstd: torch.Tensor
    _x_hat: torch.Tensor | Callable[[], torch.Tensor] = field(repr=False)
    reduce_dims: tuple[int, ...]

    @cached_property
    def var(self) -> torch.Tensor:
        return self._var() if callable(self._var) else self._var

    @cached_property
    def x_hat(self) -> torch.Tensor:
        return self._x_hat() if callable(self._x_hat) else self._x_hat


IMPLS = ("scratch", "fast", "fused")


def _check_impl(impl: str) -> None:
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")


def _fast(impl: str, input: torch.Tensor, eps: float, dims: tuple[int, ...],
          kernel: Callable[..., Kernel | None], *args: object) -> NormResult | None:
    """The one choice between the readable code and a fused kernel: with ``impl="fast"``,
    torch's ``kernel``'s result, with ``impl="fused"`` lnviz's own for the same norm (σ² =
    rstd⁻² − ε and x̂ = (x − μ)·rstd built when read), or None where the kernel cannot take the
    call (:mod:`lnviz.kernels` and :mod:`lnviz.fused` say which) and the readable code runs."""
    _check_impl(impl)
    if impl == "scratch":
        return None
    if impl == "fused":
        kernel = _fused_kernel(kernel)
    result = kernel(*args)
    if result is None:
        return None
    output, mean, rstd = result

    def var() -> torch.Tensor:  # exact up to rounding unless σ² is far below ε
        return (rstd.pow(-2) - eps).clamp_min(0)

    def x_hat() -> torch.Tensor:
        x = input.to(rstd.dtype)
        return (x - mean) * rstd if mean is not None else x * rstd

    return NormResult(output, mean, var, rstd, x_hat, dims)


def _fused_kernel(kernel: Callable[..., Kernel | None]) -> Callable[..., Kernel | None]:
    """lnviz's Triton kernel (:mod:`lnviz.fused`) for the norm whose torch kernel is ``kernel``:
    LayerNorm and RMSNorm have one."""
    from lnviz import fused  # imports triton, which only impl="fused" needs

    found = {kernels.layer_norm: fused.layer_norm, kernels.rms_norm: fused.rms_norm}.get(kernel)
    if found is None:
        raise ValueError("impl='fused' exists for layer_norm and rms_norm only; use impl='fast'")
    return found


def _mean(
    x: torch.Tensor,
    dims: tuple[int, ...],
    n: int | torch.Tensor,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """(1/n)·Σ x over ``dims``, keeping them with size 1; ``weights`` (0/1) leaves values out."""
    if weights is not None:
        x = x * weights
    # sum(dim=()) would sum over every dim; no dims to reduce leaves each value on its own.
    return (x.sum(dim=dims, keepdim=True) if dims else x) / n


def centre(
    x: torch.Tensor, dims: tuple[int, ...], weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | int]:
    """μ and x − μ over ``dims`` exactly as the norms compute them (the first two of the three
    sums); ``weights`` (0/1) leaves positions out of μ.

    x − μ is (x − μ₁) − e, with μ₁ = Σx/n and e = Σ(x − μ₁)/n its rounding error, which is not
    always x minus the returned μ = μ₁ + e rounded: where x and μ agree to the last digit, the
    centred value keeps the tiny difference that rounding μ would lose.

    Returns (μ, x − μ, n) where n is the number of values μ was taken over.
    """
    n = math.prod(x.shape[d] for d in dims) if weights is None else weights.sum(dims, keepdim=True)
    mean = _mean(x, dims, n, weights)
    centered = x - mean
    error = _mean(centered, dims, n, weights)
    centered -= error
    return mean + error, centered, n


def mean_and_var(
    x: torch.Tensor, dims: tuple[int, ...], weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | int]:
    """μ and the biased σ² over ``dims``, from the three sums the norms take; ``weights`` (0/1)
    leaves positions out.

    Returns (μ, σ², n) where n is the number of values each statistic was taken over.
    """
    mean, centered, n = centre(x, dims, weights)
    var = _mean(centered.square(), dims, n, weights)
    return mean, var, n


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
    fast = _fast(impl, input, eps, dims, kernels.layer_norm, input, dims, weight, bias, eps)
    if fast is not None:
        return fast
    # Shapes for (B, T, C) activations normalized over C.
    x = input.to(_accumulation_dtype(input.dtype))  # (B, T, C)
    h = math.prod(x.shape[d] for d in dims)  # H = C, the values of one sample
    mean = _mean(x, dims, h)  # μ = Σx / H: (B, T, 1)
    centered = x - mean  # x − μ: (B, T, C)
    error = _mean(centered, dims, h)  # Σ(x − μ) / H, the rounding error of μ: (B, T, 1)
    centered -= error  # x − μ, now exactly 0 where x is constant
    mean = mean + error  # μ, exact to rounding
    var = _mean(centered.square(), dims, h)  # σ² = Σ(x − μ)² / H: (B, T, 1)
    rstd = torch.rsqrt(var + eps)  # 1/√(σ² + ε), inf for a constant row if ε = 0: (B, T, 1)
    x_hat = centered * rstd  # x̂ = (x − μ)/√(σ² + ε): (B, T, C)
    y = _affine(x_hat, weight, bias, x.shape[dims[0] :])  # y = γ·x̂ + β: (B, T, C)
    return NormResult(y.to(input.dtype), mean, var, rstd, x_hat, dims)


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
    acc = _accumulation_dtype(input.dtype)
    if eps is None:
        eps = torch.finfo(acc).eps  # torch's default
    fast = _fast(impl, input, eps, dims, kernels.rms_norm, input, dims, weight, eps)
    if fast is not None:
        return fast
    # Shapes for (B, T, C) activations normalized over C.
    x = input.to(acc)  # (B, T, C)
    h = math.prod(x.shape[d] for d in dims)  # H = C, the values of one sample
    mean_square = _mean(x**2, dims, h)  # ms = Σx² / H: (B, T, 1)
    rstd = torch.rsqrt(mean_square + eps)  # 1/√(ms + ε): (B, T, 1)
    x_hat = x * rstd  # x̂ = x/√(ms + ε), no centering: (B, T, C)
    y = _affine(x_hat, weight, None, x.shape[dims[0] :])  # y = γ·x̂: (B, T, C)
    return NormResult(y.to(input.dtype), None, mean_square, rstd, x_hat, dims)


def _normalize_with_running_stats(
    input: torch.Tensor,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
    stat_shape: Sequence[int],
    dims: tuple[int, ...],
) -> NormResult:
    """Evaluation mode of BatchNorm and InstanceNorm: the running statistics stand in for the
    batch's, so nothing depends on the other samples. Shapes for an (N, C, L) input."""
    x = input.to(_accumulation_dtype(input.dtype))  # (N, C, L)
    mean = running_mean.to(x.dtype).reshape(stat_shape)  # μ_c: (1, C, 1)
    var = running_var.to(x.dtype).reshape(stat_shape)  # σ²_c: (1, C, 1)
    rstd = torch.rsqrt(var + eps)  # 1/√(σ²_c + ε): (1, C, 1)
    x_hat = (x - mean) * rstd  # (N, C, L)
    y = _affine(x_hat, weight, bias, stat_shape)  # γ_c·x̂ + β_c: (N, C, L)
    return NormResult(y.to(input.dtype), mean, var, rstd, x_hat, dims)


def _update_running_stats(
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    batch_mean: torch.Tensor,
    batch_var: torch.Tensor,
    momentum: float | None,
    num_batches_tracked: torch.Tensor | None = None,
) -> None:
    """running ← (1 − m)·running + m·batch, in place and outside autograd, for μ and the
    unbiased σ² (either buffer may be None); m = 1/k at the k-th batch when ``momentum`` is None
    (a cumulative average), k counted in ``num_batches_tracked``."""
    with torch.no_grad():
        if num_batches_tracked is not None:
            num_batches_tracked.add_(1)
        for running, batch in ((running_mean, batch_mean), (running_var, batch_var)):
            if running is None:
                continue
            if momentum is None and num_batches_tracked is None:
                raise ValueError(
                    "momentum=None (a cumulative average) needs num_batches_tracked, the count "
                    "of batches seen so far, as nn.BatchNorm keeps it"
                )
            m = 1.0 / float(num_batches_tracked) if momentum is None else momentum
            running.mul_(1.0 - m).add_(batch.to(running.dtype), alpha=m)


def _mask_weights(
    mask: torch.Tensor | None, input: torch.Tensor, channel: int
) -> torch.Tensor | None:
    """The mask as 0/1 weights with size 1 along ``channel``, so that they broadcast."""
    if mask is None:
        return None
    expected = tuple(s for d, s in enumerate(input.shape) if d != channel)
    if tuple(mask.shape) != expected:
        raise ValueError(
            f"mask must have the input's shape without the channel dim, {list(expected)}; "
            f"got {list(mask.shape)}"
        )
    return mask.to(device=input.device, dtype=_accumulation_dtype(input.dtype)).unsqueeze(channel)


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
    evaluation mode the running statistics are used instead of the batch's. An input with no
    values is accepted as torch accepts it: the output is empty, the running statistics stay as
    they were, and a training call is still counted.

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
    channel = channel_dim % input.dim() if input.dim() else 0
    dims = tuple(d for d in range(input.dim()) if d != channel)  # every dim but the channels
    stat_shape = [1] * input.dim()
    stat_shape[channel] = input.shape[channel]
    if not training:
        if (running_mean is None or running_var is None) and input.numel() == 0:
            # torch returns an empty input before it asks for running statistics; there are
            # none to report, so μ and σ² are NaN.
            running_mean = running_var = torch.full(
                (input.shape[channel],), math.nan, dtype=_accumulation_dtype(input.dtype))
        if running_mean is None or running_var is None:
            raise ValueError(
                "running_mean and running_var must be given in evaluation mode (training=False); "
                "pass training=True to normalize with the batch's own statistics"
            )
        fast = _fast(impl, input, eps, dims, kernels.batch_norm, input, running_mean,
                     running_var, weight, bias, False, momentum, eps, channel, mask)
        if fast is not None:
            return fast
        return _normalize_with_running_stats(input, running_mean, running_var, weight, bias, eps,
                                             stat_shape, dims)

    w = _mask_weights(mask, input, channel)  # 1 = a real token, 0 = padding: (N, 1, L)
    m = math.prod(input.shape[d] for d in dims) if w is None else w.sum(dims, keepdim=True)
    count = int(m)  # m, the values per channel
    if w is not None and count == 0 and input.numel() > 0:
        raise ValueError(
            "the mask leaves no real token: BatchNorm's statistics would be taken over no "
            "value (0/0); mark at least two positions as real")
    if count == 1 and (input.dim() > 1 or input.numel() > 0):  # torch takes an empty (0,)
        raise ValueError(
            "BatchNorm in training mode needs more than one value per channel to estimate a "
            f"variance; this input has one (shape {list(input.shape)})"
        )
    fast = _fast(impl, input, eps, dims, kernels.batch_norm, input, running_mean, running_var,
                 weight, bias, True, momentum, eps, channel, mask, num_batches_tracked)
    if fast is not None:
        return fast
    # Shapes for torch's (N, C, L) layout; any other channel_dim works alike.
    x = input.to(_accumulation_dtype(input.dtype))  # (N, C, L)
    mean = _mean(x, dims, m, w)  # μ_c = Σx / m over the real tokens: (1, C, 1)
    centered = x - mean  # x − μ_c: (N, C, L)
    error = _mean(centered, dims, m, w)  # Σ(x − μ_c) / m, the rounding error of μ_c: (1, C, 1)
    centered -= error  # x − μ, now exactly 0 where x is constant
    mean = mean + error  # μ, exact to rounding
    var = _mean(centered.square(), dims, m, w)  # σ²_c = Σ(x − μ_c)² / m: (1, C, 1)
    if count > 0:
        unbiased = var.flatten() * count / (count - 1)  # σ²_c·m/(m − 1), Bessel's: (C,)
        _update_running_stats(running_mean, running_var, mean.flatten(), unbiased, momentum,
                              num_batches_tracked)
    elif num_batches_tracked is not None:  # an empty batch: counted, as nn.BatchNorm counts it
        num_batches_tracked.add_(1)
    rstd = torch.rsqrt(var + eps)  # 1/√(σ²_c + ε): (1, C, 1)
    x_hat = centered * rstd  # x̂ = (x − μ_c)/√(σ²_c + ε): (N, C, L)
    y = _affine(x_hat, weight, bias, stat_shape)  # y = γ_c·x̂ + β_c: (N, C, L)
    return NormResult(y.to(input.dtype), mean, var, rstd, x_hat, dims)


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
    fast = _fast(impl, input, eps, tuple(range(1, input.dim())), kernels.group_norm, input,
                 num_groups, weight, bias, eps)
    if fast is not None:
        return fast
    # Shapes for an (N, C, L) input with G groups of C/G channels.
    x = input.to(_accumulation_dtype(input.dtype))  # (N, C, L)
    # View the channels as (G, C/G), so that one group is a block of whole dims to reduce over.
    grouped = x.reshape(n, num_groups, c // num_groups, *input.shape[2:])  # (N, G, C/G, L)
    group_dims = tuple(range(2, grouped.dim()))
    m = math.prod(grouped.shape[d] for d in group_dims)  # the values of one group, C/G·L
    mean = _mean(grouped, group_dims, m)  # μ_{n,g} = Σx / m: (N, G, 1, 1)
    centered = grouped - mean  # x − μ_{n,g}: (N, G, C/G, L)
    error = _mean(centered, group_dims, m)  # Σ(x − μ) / m, the rounding error of μ: (N, G, 1, 1)
    centered -= error  # x − μ, now exactly 0 where x is constant
    mean = mean + error  # μ, exact to rounding
    var = _mean(centered.square(), group_dims, m)  # σ²_{n,g} = Σ(x − μ)² / m: (N, G, 1, 1)
    # Each channel carries its group's statistics, so that they broadcast against the input.
    stat_shape = (n, c) + (1,) * (input.dim() - 2)
    mean, var = (
        s.reshape(n, num_groups, 1).expand(n, num_groups, c // num_groups).reshape(stat_shape)
        for s in (mean, var)
    )  # (N, C, 1)
    rstd = torch.rsqrt(var + eps)  # 1/√(σ² + ε): (N, C, 1)
    x_hat = centered.reshape(input.shape) * rstd  # x̂ = (x − μ)/√(σ² + ε): (N, C, L)
    y = _affine(x_hat, weight, bias, (1, c) + (1,) * (input.dim() - 2))  # γ_c·x̂ + β_c: (N, C, L)
    return NormResult(y.to(input.dtype), mean, var, rstd, x_hat, tuple(range(1, input.dim())))


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
        input: activations with channels at dim 1 and at least one spatial dim (not needed
            with ``use_input_stats=False``, as in torch).
        running_mean, running_var: optional buffers of shape ``(C,)``.
        weight, bias: per-channel γ and β of shape ``(C,)``.
        use_input_stats: normalize with each instance's own statistics.
        momentum: weight of the new batch in the running averages.
        eps: ε added to σ².

    Shape:
        - input: ``(N, C, *)`` with at least one spatial dim (``(N, C)`` too with
          ``use_input_stats=False``)
        - output: same shape; ``mean``/``var``/``rstd``: ``(N, C, 1, …)``

    An empty batch (N = 0) turns the running buffers into NaN, the mean over no instances,
    exactly as torch's does.

    Example:
        >>> instance_norm(torch.tensor([[[1.0, 3.0], [10.0, 30.0]]])).output
        tensor([[[-1.0000,  1.0000],
                 [-1.0000,  1.0000]]])
    """
    # With the running statistics a spatial dim is not needed, as in torch: (N, C) is accepted.
    if input.dim() < (3 if use_input_stats else 2):
        raise ValueError(
            f"instance_norm needs (N, C, *) input with a spatial dim, got {list(input.shape)}"
        )
    _check_impl(impl)  # the running statistics' path below returns before _fast checks it
    c = input.shape[1]
    dims = tuple(range(2, input.dim()))  # the spatial dims
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("use_input_stats=False needs running_mean and running_var")
        return _normalize_with_running_stats(input, running_mean, running_var, weight, bias, eps,
                                             (1, c) + (1,) * len(dims), dims)

    m = math.prod(input.shape[d] for d in dims)  # the values of one instance
    if m == 1:
        raise ValueError(
            "InstanceNorm needs more than one spatial position per channel; this input has one "
            f"(shape {list(input.shape)})"
        )
    result = _fast(impl, input, eps, dims, kernels.instance_norm, input, weight, bias, eps)
    if result is None:
        # Shapes for an (N, C, L) input.
        x = input.to(_accumulation_dtype(input.dtype))  # (N, C, L)
        mean = _mean(x, dims, m)  # μ_{n,c} = Σx / m: (N, C, 1)
        centered = x - mean  # x − μ_{n,c}: (N, C, L)
        error = _mean(centered, dims, m)  # Σ(x − μ) / m, the rounding error of μ: (N, C, 1)
        centered -= error  # x − μ, now exactly 0 where x is constant
        mean = mean + error  # μ, exact to rounding
        var = _mean(centered.square(), dims, m)  # σ²_{n,c} = Σ(x − μ)² / m: (N, C, 1)
        rstd = torch.rsqrt(var + eps)  # 1/√(σ² + ε): (N, C, 1)
        x_hat = centered * rstd  # x̂ = (x − μ)/√(σ² + ε): (N, C, L)
        y = _affine(x_hat, weight, bias, (1, c) + (1,) * len(dims))  # γ_c·x̂ + β_c: (N, C, L)
        result = NormResult(y.to(input.dtype), mean, var, rstd, x_hat, dims)
    if m > 0 or input.shape[0] == 0:
        # The running buffers see the batch average of the per-instance statistics: NaN for an
        # empty batch (N = 0), the mean over no instances, as in torch.
        unbiased = result.var * m / (m - 1)  # Bessel's correction: (N, C, 1)
        _update_running_stats(running_mean, running_var, result.mean.mean(dim=0).flatten(),
                              unbiased.mean(dim=0).flatten(), momentum)
    return result
