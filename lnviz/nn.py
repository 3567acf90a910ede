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

Also here: the transformer block in each placement of its norms (:data:`PLACEMENTS`,
:func:`block`, :class:`TransformerBlock`), and three LSTM cells that share every line but the
normalization, so that comparing them measures the normalization alone: :class:`LSTMCell`, the
plain one; :class:`LayerNormLSTMCell` (Ba et al., 2016), which normalizes W x_t and U h_{t−1}
separately, each over its own 4H summed inputs of one sample, and the cell state before its tanh
(``single_bias=True`` drops the two projections' β for one shared bias b: β_x + β_h is one vector
in disguise); and :class:`BatchNormLSTMCell` (Cooijmans et al., 2016), the same with BatchNorm,
its statistics taken at every time step and kept as running averages per step.
:class:`SequenceClassifier` reads a sequence with one cell and classifies its last state
(:func:`make_model`); every cell returns the gate pre-activations next to h and c.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lnviz.norms import (
    _check_impl,
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    rms_norm,
)
from lnviz.terms import NormKind

__all__ = ["ACTIVATIONS", "DYT_ALPHA", "FINAL_NORMED", "GATES", "MODELS", "MODEL_LABELS",
           "NORM_KINDS", "PLACEMENTS", "BatchNorm1d", "BatchNorm2d", "BatchNormLSTMCell", "DyT",
           "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "LSTMCell", "LayerNorm",
           "LayerNormLSTMCell", "RMSNorm", "SequenceClassifier", "TransformerBlock", "block",
           "block_norms", "dyt", "feed_forward", "final_norm", "init_block", "make_model",
           "norm_params", "self_attention"]


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


def dyt(x: torch.Tensor, alpha: float | torch.Tensor, weight: torch.Tensor | None = None,
        bias: torch.Tensor | None = None) -> torch.Tensor:
    """Dynamic Tanh: ``weight·tanh(alpha·x) + bias`` over the last dim (γ and β of shape (C,))."""
    y = torch.tanh(alpha * x)  # (…, C): no mean, no variance, no reduction at all
    if weight is not None:
        y = y * weight  # (…, C)
    if bias is not None:
        y = y + bias  # (…, C)
    return y


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
        return dyt(input, self.alpha, self.weight, self.bias)

    def extra_repr(self) -> str:
        alpha = "?" if self.alpha.is_meta else f"{float(self.alpha.detach()):g}"
        return f"{self.normalized_shape}, alpha={alpha}"


# --- The transformer block in each placement ---------------------------------------------------
# Written out in plain tensor operations on a dict of weights (one attention head, a feed-forward
# network of 4·d hidden units), so that a page can print it and a test can follow each step.


#: Every placement :func:`block` builds: post-LN (the original transformer's), pre-LN (GPT-2's),
#: two of recent models (Peri-LN: a norm before and after each sublayer; OLMo-2: after each
#: sublayer only, inside the residual branch), and none.
PLACEMENTS = ("post-LN", "pre-LN", "Peri-LN", "OLMo-2", "none")
#: The placements whose stream ends in a final LayerNorm (``ln_f``) before the head.
FINAL_NORMED = ("pre-LN", "Peri-LN", "OLMo-2")
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"GELU": F.gelu, "ReLU": F.relu}


def init_block(d_model: int, gain: float, generator: torch.Generator,
               dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """Random weights for one block: W ~ N(0, gain²/fan_in), biases 0.

    Attention: ``wq``, ``wk``, ``wv``, ``wo`` (d × d). Feed-forward: ``w1`` (4d × d), ``b1``,
    ``w2`` (d × 4d), ``b2``. The LayerNorms have no γ and β here (they would start at 1 and 0);
    :func:`lnviz.train.init_race_model` adds them for training. The normal draws are made in
    float32 (four times faster than float64's, and as random) and then cast.
    """
    def weight(rows: int, cols: int) -> torch.Tensor:
        draw = torch.randn(rows, cols, generator=generator, dtype=torch.float32).to(dtype)
        return draw * (gain / math.sqrt(cols))

    hidden = 4 * d_model
    return {
        "wq": weight(d_model, d_model), "wk": weight(d_model, d_model),
        "wv": weight(d_model, d_model), "wo": weight(d_model, d_model),
        "w1": weight(hidden, d_model), "b1": torch.zeros(hidden, dtype=dtype),
        "w2": weight(d_model, hidden), "b2": torch.zeros(d_model, dtype=dtype),
    }


def self_attention(x: torch.Tensor, params: dict[str, torch.Tensor]) -> torch.Tensor:
    r"""Single-head self-attention over the sequence dim of ``(batch, seq, d)``:
    softmax(q kᵀ/√d) v, then the output projection, with q, k, v = x W_{q,k,v}ᵀ."""
    q, k, v = x @ params["wq"].T, x @ params["wk"].T, x @ params["wv"].T
    scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
    return (scores.softmax(dim=-1) @ v) @ params["wo"].T


def feed_forward(x: torch.Tensor, params: dict[str, torch.Tensor],
                 activation: Callable[[torch.Tensor], torch.Tensor] = F.gelu) -> torch.Tensor:
    """The position-wise network: act(x W₁ᵀ + b₁) W₂ᵀ + b₂, through 4·d hidden units."""
    return activation(x @ params["w1"].T + params["b1"]) @ params["w2"].T + params["b2"]


#: What a block's norms compute (:func:`_norm`): LayerNorm, RMSNorm, or Dynamic Tanh.
NORM_KINDS = (NormKind.LAYER, NormKind.RMS, "DyT")
#: DyT's α at initialization (the DyT paper's default outside large language models).
DYT_ALPHA = 0.5


def _norm(x: torch.Tensor, params: dict[str, torch.Tensor] | None = None, name: str = "",
          impl: str = "scratch", kind: str = NormKind.LAYER) -> torch.Tensor:
    """One of the block's norms over the last dim (``kind``, one of :data:`NORM_KINDS`), with
    γ and β ``params[name + "_weight"/"_bias"]`` when the block has them: lnviz's LayerNorm or
    RMSNorm (no β), or DyT, γ·tanh(αx) + β with α ``params[name + "_alpha"]``."""
    params = params or {}
    weight, bias = params.get(name + "_weight"), params.get(name + "_bias")
    if kind == NormKind.RMS:
        return rms_norm(x, x.shape[-1:], weight, impl=impl).output
    if kind == "DyT":
        return dyt(x, params[name + "_alpha"], weight, bias)
    if kind != NormKind.LAYER:
        raise ValueError(f"a norm is one of {list(NORM_KINDS)}, got {kind!r}")
    return layer_norm(x, x.shape[-1:], weight, bias, impl=impl).output


def block(x: torch.Tensor, params: dict[str, torch.Tensor], variant: str,
          activation: Callable[[torch.Tensor], torch.Tensor] = F.gelu, *, impl: str = "scratch",
          kind: str = NormKind.LAYER) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One transformer block: (new stream, what attention adds, what the FFN adds). The
    LayerNorms are lnviz's (``impl`` as in :func:`lnviz.layer_norm`), with γ, β from ``params``
    (``ln1_weight``, ``ln1_bias``, ``ln2_…``; Peri-LN's and OLMo-2's output norms ``ln1o_…``,
    ``ln2o_…``) where it has them. ``variant`` is one of :data:`PLACEMENTS`; ``kind`` says what
    each norm computes (:data:`NORM_KINDS`)."""
    def ln(h: torch.Tensor, name: str) -> torch.Tensor:
        return _norm(h, params, name, impl, kind)

    def ffn(h: torch.Tensor) -> torch.Tensor:
        return feed_forward(h, params, activation)

    if variant == "post-LN":  # the original transformer: normalize the sum
        attn = self_attention(x, params)
        x1 = ln(x + attn, "ln1")
        out = ffn(x1)
        return ln(x1 + out, "ln2"), attn, out
    if variant == "pre-LN":  # GPT-2, Llama: normalize what each sublayer reads
        attn = self_attention(ln(x, "ln1"), params)
        out = ffn(ln(x + attn, "ln2"))
        return x + attn + out, attn, out
    if variant == "Peri-LN":  # normalize what each sublayer reads and what it adds
        attn = ln(self_attention(ln(x, "ln1"), params), "ln1o")
        out = ln(ffn(ln(x + attn, "ln2")), "ln2o")
        return x + attn + out, attn, out
    if variant == "OLMo-2":  # normalize only what each sublayer adds
        attn = ln(self_attention(x, params), "ln1o")
        out = ln(ffn(x + attn), "ln2o")
        return x + attn + out, attn, out
    if variant == "none":
        attn = self_attention(x, params)
        out = ffn(x + attn)
        return x + attn + out, attn, out
    raise ValueError(f"variant must be one of {list(PLACEMENTS)}, got {variant!r}")


def final_norm(x: torch.Tensor, variant: str, params: dict[str, torch.Tensor] | None = None,
               *, impl: str = "scratch", kind: str = NormKind.LAYER) -> torch.Tensor:
    """What the head reads after the last block: the stream of the placements in
    :data:`FINAL_NORMED` goes through one more LayerNorm (GPT-2's ``ln_f``, γ and β
    ``params["lnf_weight"/"lnf_bias"]`` if given); post-LN's stream leaves its last block
    normalized already, and "none" has no norm to add."""
    return _norm(x, params, "lnf", impl, kind) if variant in FINAL_NORMED else x


def norm_params(name: str, d_model: int, placement: str, kind: str = NormKind.LAYER,
                dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """The parameters of the norm ``name`` (``ln1``, ``ln2``, ``ln1o``, ``ln2o``, ``lnf``) at
    their initial values: γ = 1 (``name_weight``), β = 0 (``name_bias``, not for an RMSNorm) and,
    for DyT, α = :data:`DYT_ALPHA` (``name_alpha``); none where the placement has no norms."""
    if placement == "none":
        return {}
    params = {name + "_weight": torch.ones(d_model, dtype=dtype)}
    if kind != NormKind.RMS:
        params[name + "_bias"] = torch.zeros(d_model, dtype=dtype)
    if kind == "DyT":
        params[name + "_alpha"] = torch.tensor(DYT_ALPHA, dtype=dtype)
    return params


def block_norms(placement: str) -> tuple[str, ...]:
    """The norms a block in ``placement`` has: before each sublayer (``ln1``, ``ln2``; post-LN's
    after each residual sum), and after each sublayer's output for Peri-LN and OLMo-2 (``ln1o``,
    ``ln2o``; OLMo-2 uses only those)."""
    return {"post-LN": ("ln1", "ln2"), "pre-LN": ("ln1", "ln2"),
            "Peri-LN": ("ln1", "ln2", "ln1o", "ln2o"), "OLMo-2": ("ln1o", "ln2o"),
            "none": ()}[placement]


class TransformerBlock(nn.Module):
    """:func:`block` as a module: one transformer block in ``placement`` (:data:`PLACEMENTS`),
    its norms computing ``norm`` (:data:`NORM_KINDS`), its weights parameters named as
    :func:`block` reads them (``wq`` … ``b2`` from :func:`init_block` with ``gain``, drawn from
    ``generator``; the norms' ``ln1_weight`` … from :func:`norm_params`). ``forward`` returns the
    new residual stream; :meth:`parts` also what attention and the feed-forward network add."""

    def __init__(self, d_model: int, placement: str = "pre-LN", norm: str = NormKind.LAYER,
                 activation: str = "GELU", *, gain: float = 1.0,
                 generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {list(PLACEMENTS)}, got {placement!r}")
        if norm not in NORM_KINDS:
            raise ValueError(f"norm must be one of {list(NORM_KINDS)}, got {norm!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}")
        self.placement, self.norm, self.activation = placement, norm, activation
        weights = init_block(d_model, gain, generator or torch.Generator().manual_seed(0), dtype)
        for name in block_norms(placement):
            weights |= norm_params(name, d_model, placement, norm, dtype)
        self.weights = nn.ParameterDict({k: nn.Parameter(v) for k, v in weights.items()})

    def parts(self, x: torch.Tensor, *, impl: str = "scratch"
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(new stream, what attention adds, what the feed-forward network adds)."""
        return block(x, dict(self.weights.items()), self.placement,
                     ACTIVATIONS[self.activation], impl=impl, kind=self.norm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.parts(x)[0]

    def extra_repr(self) -> str:
        return f"{self.placement}, norm={self.norm}, activation={self.activation}"


# --- LSTM cells with and without a norm ---------------------------------------------------------


#: The models a comparison can include, by their name in the app, the CLI and the JSON.
MODELS = ("lstm", "ln-lstm", "bn-lstm")
MODEL_LABELS = {"lstm": "LSTM", "ln-lstm": "LN-LSTM", "bn-lstm": "BN-LSTM"}


#: The four gates, in the order their rows sit in W, U and b (torch.nn.LSTMCell's order).
GATES = ("input i", "forget f", "candidate g", "output o")

State = tuple[torch.Tensor, torch.Tensor]


class LSTMCell(nn.Module):
    r"""The plain LSTM cell, written out so that a normalized cell can change one thing in it.

    .. math::
        z_t = \mathrm{norm}_x(W x_t) + \mathrm{norm}_h(U h_{t-1}) + b = (i, f, g, o)

        c_t = σ(f) ⊙ c_{t-1} + σ(i) ⊙ \tanh(g),\qquad
        h_t = σ(o) ⊙ \tanh(\mathrm{norm}_c(c_t))

    where every norm is the identity here; subclasses override :meth:`normalize`. Weights start
    uniform in ±1/√H and the bias at 0. With the same parameters it computes exactly what
    ``torch.nn.LSTMCell`` computes (whose two biases add up to b).

    Args:
        input_size: I, the features per time step.
        hidden_size: H, the units of h and c.
        bias: whether to add b (a normalized cell may carry its biases in its norms instead).

    Shape:
        - x: ``(N, I)``; h, c: ``(N, H)``; the gate pre-activations z: ``(N, 4H)``
    """

    def __init__(self, input_size: int, hidden_size: int, *, bias: bool = True) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size).uniform_(-bound,
                                                                                        bound))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size).uniform_(-bound,
                                                                                         bound))
        self.bias = nn.Parameter(torch.zeros(4 * hidden_size)) if bias else None

    def normalize(self, which: str, z: torch.Tensor, step: int) -> torch.Tensor:
        """The norm applied to ``which`` ("ih": W x, "hh": U h, "c": the cell state) at time
        ``step``; the identity for the plain LSTM.

        ``z`` is ``(N, size)``, or ``(N, T, size)`` for steps ``step … step + T − 1`` at once.
        """
        return z

    def project_input(self, x: torch.Tensor, step: int = 0) -> torch.Tensor:
        """norm_x(W x): the input's share of the gates, for one step ``(N, I)`` or for a whole
        sequence ``(N, T, I)`` at once (it does not depend on h, so it need not wait for it)."""
        return self.normalize("ih", x @ self.weight_ih.T, step)

    def recur(
        self, input_term: torch.Tensor, state: State | None, step: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One time step from the input's share ``norm_x(W x_t)``: returns (h_t, c_t, z_t)."""
        if state is None:
            zeros = input_term.new_zeros(input_term.shape[0], self.hidden_size)
            state = (zeros, zeros)
        h, c = state
        z = input_term + self.normalize("hh", h @ self.weight_hh.T, step)
        if self.bias is not None:
            z = z + self.bias
        i, f, g, o = z.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)  # forget, then write
        h = torch.sigmoid(o) * torch.tanh(self.normalize("c", c, step))  # read out
        return h, c, z

    def forward(
        self, x: torch.Tensor, state: State | None = None, step: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One time step: returns (h_t, c_t, z_t), z_t being the gate pre-activations."""
        return self.recur(self.project_input(x, step), state, step)

    def _add_affine(self, which: str, size: int, gamma_init: float, beta_init: float | None
                    ) -> None:
        """γ (and β unless ``beta_init`` is None) for the norm ``which``, filled with constants."""
        # float(): an int (γ₀ = 3) would make an integer tensor, which cannot learn
        self.register_parameter(f"gamma_{which}",
                                nn.Parameter(torch.full((size,), float(gamma_init))))
        beta = None if beta_init is None else nn.Parameter(torch.full((size,), float(beta_init)))
        self.register_parameter(f"beta_{which}", beta)

    def _add_norm_params(self, gamma_init: float, beta_init: float, single_bias: bool) -> None:
        """γ/β for the three norms; with ``single_bias`` the projections get γ only and b starts
        at 2·β so that both variants compute the same function at initialization."""
        four_h = 4 * self.hidden_size
        projection_beta = None if single_bias else beta_init
        self._add_affine("ih", four_h, gamma_init, projection_beta)
        self._add_affine("hh", four_h, gamma_init, projection_beta)
        self._add_affine("c", self.hidden_size, gamma_init, beta_init)
        if self.bias is not None:
            nn.init.constant_(self.bias, 2 * beta_init)


class LayerNormLSTMCell(LSTMCell):
    r"""The LSTM cell with Layer Normalization (Ba et al., 2016).

    .. math::
        z_t = \mathrm{LN}(W x_t; γ_x, β_x) + \mathrm{LN}(U h_{t-1}; γ_h, β_h),\qquad
        h_t = σ(o) ⊙ \tanh(\mathrm{LN}(c_t; γ_c, β_c))

    Each LN takes μ and σ² over one sample's 4H (or H) values at one time step, so the gates see
    sums of unit-scale terms however large W, U or c grow, and nothing depends on the batch.

    Args:
        input_size, hidden_size: I and H.
        gamma_init, beta_init: the constants γ and β start at (1 and 0 leave x̂ as it is).
        single_bias: drop β_x and β_h and add one bias b instead (4H parameters fewer, the same
            family of functions).
        eps: ε of every LN.
    """

    def __init__(self, input_size: int, hidden_size: int, *, gamma_init: float = 1.0,
                 beta_init: float = 0.0, single_bias: bool = False, eps: float = 1e-5) -> None:
        super().__init__(input_size, hidden_size, bias=single_bias)
        self.eps = eps
        self._add_norm_params(gamma_init, beta_init, single_bias)

    def normalize(self, which: str, z: torch.Tensor, step: int) -> torch.Tensor:
        """LN(z; γ, β) over z's last dim, with lnviz's teaching layer_norm."""
        gamma, beta = getattr(self, f"gamma_{which}"), getattr(self, f"beta_{which}")
        return layer_norm(z, z.shape[-1], gamma, beta, self.eps).output


class BatchNormLSTMCell(LSTMCell):
    r"""The LSTM cell with Batch Normalization per time step (Cooijmans et al., 2016).

    .. math::
        z_t = \mathrm{BN}_t(W x_t; γ_x, β_x) + \mathrm{BN}_t(U h_{t-1}; γ_h, β_h),\qquad
        h_t = σ(o) ⊙ \tanh(\mathrm{BN}_t(c_t; γ_c, β_c))

    BN_t normalizes each unit over the batch, with the statistics of time step t: in training
    mode those of the current batch (so one sample's output depends on the others), in
    evaluation mode running averages kept separately for each step. Steps beyond ``max_steps``
    reuse the last step's averages. This bookkeeping, and the batch dependence, are what make
    BatchNorm awkward in a recurrent network.

    Args:
        input_size, hidden_size: I and H.
        max_steps: the number of time steps that get their own running statistics.
        gamma_init, beta_init, single_bias: as for :class:`LayerNormLSTMCell`.
        momentum, eps: as for ``torch.nn.BatchNorm1d``.
    """

    def __init__(self, input_size: int, hidden_size: int, *, max_steps: int = 28,
                 gamma_init: float = 1.0, beta_init: float = 0.0, single_bias: bool = False,
                 momentum: float = 0.1, eps: float = 1e-5) -> None:
        super().__init__(input_size, hidden_size, bias=single_bias)
        self.momentum, self.eps = momentum, eps
        self._add_norm_params(gamma_init, beta_init, single_bias)
        for which, size in (("ih", 4 * hidden_size), ("hh", 4 * hidden_size),
                            ("c", hidden_size)):
            self.register_buffer(f"running_mean_{which}", torch.zeros(max_steps, size))
            self.register_buffer(f"running_var_{which}", torch.ones(max_steps, size))

    def normalize(self, which: str, z: torch.Tensor, step: int) -> torch.Tensor:
        """BN_t(z; γ, β) over the batch, with step t's own running statistics."""
        if z.dim() == 3:  # a whole sequence: each step with its own statistics
            return torch.stack([self.normalize(which, z[:, k], step + k)
                                for k in range(z.shape[1])], dim=1)
        running_mean = getattr(self, f"running_mean_{which}")
        t = min(step, running_mean.shape[0] - 1)
        return batch_norm(
            z, running_mean[t], getattr(self, f"running_var_{which}")[t],
            getattr(self, f"gamma_{which}"), getattr(self, f"beta_{which}"),
            training=self.training, momentum=self.momentum, eps=self.eps,
        ).output


class SequenceClassifier(nn.Module):
    """Read a sequence with one cell, then classify its last hidden state with a linear layer.

    logits = W_out h_T + b_out, where h_T comes from running the cell over t = 0 … T−1.

    Shape:
        - x: ``(N, T, I)``; logits: ``(N, num_classes)``; gates: ``(T, N, 4H)``
    """

    def __init__(self, cell: LSTMCell, num_classes: int) -> None:
        super().__init__()
        self.cell = cell
        self.head = nn.Linear(cell.hidden_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The class logits for each sequence of the batch."""
        return self.forward_with_gates(x, keep_gates=False)[0]

    def forward_with_gates(
        self, x: torch.Tensor, keep_gates: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logits, z) with z the gate pre-activations of every step, stacked as (T, N, 4H)."""
        state: State | None = None
        gates = []
        input_terms = self.cell.project_input(x)  # every step's norm_x(W x_t) in one go
        for t in range(x.shape[1]):
            h, c, z = self.cell.recur(input_terms[:, t], state, t)
            state = (h, c)
            if keep_gates:
                gates.append(z)
        return self.head(state[0]), torch.stack(gates) if keep_gates else None


def make_model(
    kind: str,
    input_size: int,
    hidden_size: int,
    num_classes: int,
    *,
    gamma_init: float = 1.0,
    beta_init: float = 0.0,
    single_bias: bool = False,
    max_steps: int = 28,
) -> SequenceClassifier:
    """A :class:`SequenceClassifier` around the cell named ``kind`` (one of :data:`MODELS`).

    ``gamma_init``, ``beta_init`` and ``single_bias`` configure the norms and are ignored by the
    plain LSTM; ``max_steps`` is the number of per-step running statistics of the BN-LSTM.
    """
    norm_options = dict(gamma_init=gamma_init, beta_init=beta_init, single_bias=single_bias)
    if kind == "lstm":
        cell: LSTMCell = LSTMCell(input_size, hidden_size)
    elif kind == "ln-lstm":
        cell = LayerNormLSTMCell(input_size, hidden_size, **norm_options)
    elif kind == "bn-lstm":
        cell = BatchNormLSTMCell(input_size, hidden_size, max_steps=max_steps, **norm_options)
    else:
        raise ValueError(f"unknown model {kind!r}; choose one of {', '.join(MODELS)}")
    return SequenceClassifier(cell, num_classes)
