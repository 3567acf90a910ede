r"""Where LayerNorm sits: its ``normalized_shape`` on 2-D, 3-D and 4-D tensors, and its place in a
transformer block.

**Shapes.** LayerNorm takes μ and σ² over the *trailing* dims named by ``normalized_shape``; every
leading index gets its own pair. On ``(batch, seq, features)`` the last dim gives one μ per token,
the last two one μ per sequence; on ``(batch, channels, H, W)`` the last three give one μ per
image. γ and β have the shape ``normalized_shape`` and μ, σ² the input's shape with the trailing
dims kept as size 1.

**Blocks.** A transformer block adds two sublayers — self-attention, then a feed-forward network
— to a residual stream x. Where the LayerNorm goes decides how the stream's scale evolves with
depth:

.. math::
    \text{post-LN:}\quad x_1 = \mathrm{LN}(x + \mathrm{Attn}(x)),\quad
        x_{\text{out}} = \mathrm{LN}(x_1 + \mathrm{FFN}(x_1))

    \text{pre-LN:}\quad x_1 = x + \mathrm{Attn}(\mathrm{LN}(x)),\quad
        x_{\text{out}} = x_1 + \mathrm{FFN}(\mathrm{LN}(x_1))

Post-LN re-normalizes the stream after every sublayer, so its RMS stays at 1. Pre-LN feeds each
sublayer a normalized copy, so every block adds a contribution of about the same size to a stream
that is never normalized: its variance grows roughly linearly, its RMS like √depth. Without any
norm, a sublayer's output grows with its input and the stream grows geometrically.

The attention (one head) and the feed-forward network (4·d hidden units) are written out with
plain tensor operations; the weights are drawn at random and nothing is trained.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lnviz.batch import Batch, NormSpec, group_ids, normalize, to_grid
from lnviz.data import get_preset, image_batch, random_batch
from lnviz.norms import layer_norm

__all__ = [
    "ACTIVATIONS",
    "SHAPE_EXAMPLES",
    "VARIANTS",
    "DepthProfile",
    "ShapeView",
    "StackConfig",
    "block",
    "block_snippet",
    "depth_profiles",
    "feed_forward",
    "first_blocks",
    "init_block",
    "layer_norm_shapes",
    "layer_norm_snippet",
    "rms",
    "self_attention",
    "shape_example",
]

# --- normalized_shape on tensors of different rank ---------------------------------------------

#: The example tensors: short names (they go in the URL) → what their dims mean.
SHAPE_EXAMPLES = {
    "seed 003": ("words", "batch", "embedding"),
    "2-D": ("batch", "features"),
    "3-D": ("batch", "seq", "features"),
    "4-D": ("batch", "channels", "H", "W"),
}


def shape_example(name: str, seed: int = 0) -> Batch:
    """One of :data:`SHAPE_EXAMPLES`: seed 003's (2, 1, 3) word vectors, a (4, 6) feature table,
    seed 002's (2, 4, 3) padded token batch, or (2, 3, 4, 4) synthetic images."""
    if name == "seed 003":
        return Batch(get_preset("two_words").values, "NLC",
                     row_labels=("word 0 · batch 0", "word 1 · batch 0"))
    if name == "2-D":
        return Batch(random_batch((4, 6), feature_spread=0.5, seed=seed), "NC")
    if name == "3-D":
        preset = get_preset("padded_tokens")
        return Batch(preset.values, "NLC", row_labels=preset.labels)
    if name == "4-D":
        return Batch(image_batch(2, 3, 4, 4, seed=seed), "NCHW")
    raise ValueError(f"example must be one of {list(SHAPE_EXAMPLES)}, got {name!r}")


@dataclass(frozen=True, eq=False)
class ShapeView:
    """LayerNorm over the last ``dims`` dims of one tensor, described by its shapes.

    Attributes:
        shape: the input's shape.
        normalized_shape: the trailing shape that shares one μ and σ² (also γ's and β's shape).
        stats_shape: the shape of μ, σ² and rstd (trailing dims kept with size 1).
        groups: how many (μ, σ²) pairs there are — the product of the leading dims.
        group_size: how many values each pair is taken over.
        input_grid, output_grid, group_grid: the input, output and group ids as 2-D tables
            (:func:`lnviz.batch.to_grid`), ready to draw.
    """

    shape: tuple[int, ...]
    normalized_shape: tuple[int, ...]
    stats_shape: tuple[int, ...]
    groups: int
    group_size: int
    input_grid: np.ndarray
    output_grid: np.ndarray
    group_grid: np.ndarray


def layer_norm_shapes(batch: Batch, dims: int, eps: float = 1e-5) -> ShapeView:
    """Run LayerNorm over the last ``dims`` dims of ``batch`` and describe the shapes involved.

    ``dims`` must leave the batch dim out (1 ≤ dims < ndim): normalizing over every dim would
    make the samples share one μ, which is no longer a per-sample norm.
    """
    shape = tuple(batch.values.shape)
    if not 1 <= dims < len(shape):
        raise ValueError(f"a {len(shape)}-D tensor can be layer-normalized over its last 1 to "
                         f"{len(shape) - 1} dims, not {dims}")
    spec = NormSpec("LayerNorm", dims=dims, eps=eps)
    x = torch.from_numpy(batch.values)
    with torch.no_grad():
        result = normalize(x, batch.layout, spec)
    return ShapeView(
        shape=shape,
        normalized_shape=shape[-dims:],
        stats_shape=tuple(result.mean.shape),
        groups=math.prod(shape[:-dims]),
        group_size=math.prod(shape[-dims:]),
        input_grid=to_grid(batch.values, batch.layout),
        output_grid=to_grid(result.output.numpy(), batch.layout),
        group_grid=to_grid(group_ids(shape, batch.layout, spec), batch.layout),
    )


def layer_norm_snippet(view: ShapeView) -> str:
    """PyTorch code that builds the same LayerNorm and shows its shapes."""
    return "\n".join([
        "import torch",
        "",
        f"x = torch.randn{view.shape}",
        f"ln = torch.nn.LayerNorm({view.normalized_shape})  # normalized_shape",
        f"print(ln.weight.shape, ln.bias.shape)  # γ, β: torch.Size({list(view.normalized_shape)})",
        "y = ln(x)",
        f"dims = tuple(range(-{len(view.normalized_shape)}, 0))  # the trailing dims",
        "mu = x.mean(dim=dims, keepdim=True)",
        f"print(mu.shape)  # torch.Size({list(view.stats_shape)}): {view.groups} groups "
        f"of {view.group_size} values",
    ]) + "\n"


# --- A stack of transformer blocks -------------------------------------------------------------

#: Where the LayerNorms go.
VARIANTS = ("post-LN", "pre-LN", "none")
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"GELU": F.gelu, "ReLU": F.relu}


@dataclass(frozen=True)
class StackConfig:
    """A stack of randomly initialised blocks and the batch sent through it.

    ``init_gain`` sets every weight's standard deviation to gain/√fan_in: 1 keeps a linear
    layer's output variance equal to its input's, √2 does so after a ReLU (He).
    """

    depth: int = 48
    d_model: int = 64
    seq_len: int = 16
    batch: int = 4
    activation: str = "GELU"
    init_gain: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, "
                             f"got {self.activation!r}")
        for name in ("depth", "d_model", "seq_len", "batch"):
            if not 1 <= getattr(self, name) <= 1024:
                raise ValueError(f"{name} must be between 1 and 1024, got {getattr(self, name)}")
        if not 0 < self.init_gain <= 10:
            raise ValueError(f"init_gain must be in (0, 10], got {self.init_gain}")


def init_block(d_model: int, gain: float, generator: torch.Generator,
               dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """Random weights for one block: W ~ N(0, gain²/fan_in), biases 0.

    Attention: ``wq``, ``wk``, ``wv``, ``wo`` (d × d). Feed-forward: ``w1`` (4d × d), ``b1``,
    ``w2`` (d × 4d), ``b2``. LayerNorm's γ and β stay at their initial 1 and 0. The normal
    draws are made in float32 (four times faster than float64's, and as random) and then cast.
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


def _ln(x: torch.Tensor) -> torch.Tensor:
    return layer_norm(x, x.shape[-1:]).output


def block(x: torch.Tensor, params: dict[str, torch.Tensor], variant: str,
          activation: Callable[[torch.Tensor], torch.Tensor] = F.gelu
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One transformer block: (new stream, attention's output, the FFN's output)."""
    if variant == "post-LN":
        attn = self_attention(x, params)
        x1 = _ln(x + attn)
        ffn = feed_forward(x1, params, activation)
        return _ln(x1 + ffn), attn, ffn
    if variant == "pre-LN":
        attn = self_attention(_ln(x), params)
        x1 = x + attn
        ffn = feed_forward(_ln(x1), params, activation)
        return x1 + ffn, attn, ffn
    if variant == "none":
        attn = self_attention(x, params)
        x1 = x + attn
        ffn = feed_forward(x1, params, activation)
        return x1 + ffn, attn, ffn
    raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")


def rms(x: torch.Tensor) -> float:
    """√(mean x²): the typical size of an entry (the stream's scale)."""
    return float(x.square().mean().sqrt())


@dataclass(frozen=True, eq=False)
class DepthProfile:
    """How the scale evolves through the stack, for one variant.

    Attributes:
        stream: RMS of the residual stream at the input (index 0) and after each block.
        attention, ffn: RMS of what each block's attention and feed-forward sublayers output.

    Values that overflowed float64 are NaN.
    """

    stream: np.ndarray
    attention: np.ndarray
    ffn: np.ndarray


def depth_profiles(config: StackConfig) -> dict[str, DepthProfile]:
    """Send one random batch (RMS ≈ 1) through the same random stack, arranged as each of
    :data:`VARIANTS`, and record the RMS of the stream and of the sublayer outputs.

    The batch is drawn first and then the blocks one after another, so a shallower stack is the
    first blocks of a deeper one with the same seed: its profile is a prefix of the deeper one's.
    """
    generator = torch.Generator().manual_seed(config.seed)
    x0 = torch.randn(config.batch, config.seq_len, config.d_model, generator=generator,
                     dtype=torch.float64)
    stack = [init_block(config.d_model, config.init_gain, generator) for _ in range(config.depth)]
    activation = ACTIVATIONS[config.activation]
    profiles = {}
    with torch.no_grad():
        for variant in VARIANTS:
            x, stream, attention, ffn = x0, [rms(x0)], [], []
            for params in stack:
                x, attn, out = block(x, params, variant, activation)
                stream.append(rms(x))
                attention.append(rms(attn))
                ffn.append(rms(out))
            profiles[variant] = DepthProfile(*(_finite(v) for v in (stream, attention, ffn)))
    return profiles


def first_blocks(profiles: dict[str, DepthProfile], depth: int) -> dict[str, DepthProfile]:
    """The profiles of the first ``depth`` blocks of a deeper stack (see :func:`depth_profiles`)."""
    return {variant: DepthProfile(p.stream[:depth + 1], p.attention[:depth], p.ffn[:depth])
            for variant, p in profiles.items()}


def _finite(values: list[float]) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    array[~np.isfinite(array)] = np.nan  # overflow: no scale left to report
    return array


def block_snippet(d_model: int, activation: str = "GELU") -> str:
    """PyTorch code for the two placements of LayerNorm in a block, with nn.LayerNorm."""
    act = {"GELU": "F.gelu", "ReLU": "F.relu"}[activation]
    return f'''import math
import torch
import torch.nn.functional as F
from torch import nn

d = {d_model}
ln1, ln2 = nn.LayerNorm(d), nn.LayerNorm(d)  # γ = 1, β = 0 at initialisation
wq, wk, wv, wo = (torch.randn(d, d) / math.sqrt(d) for _ in range(4))
w1, w2 = torch.randn(4 * d, d) / math.sqrt(d), torch.randn(d, 4 * d) / math.sqrt(4 * d)


def attn(x):  # one head, (batch, seq, d)
    q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
    return ((q @ k.transpose(-2, -1)) / math.sqrt(d)).softmax(-1) @ v @ wo.T


def ffn(x):
    return {act}(x @ w1.T) @ w2.T


def post_ln(x):  # the original transformer
    x = ln1(x + attn(x))
    return ln2(x + ffn(x))


def pre_ln(x):  # GPT-2 and most models since
    x = x + attn(ln1(x))
    return x + ffn(ln2(x))
'''
