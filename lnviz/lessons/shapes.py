r"""Where LayerNorm sits: its ``normalized_shape`` on 2-D, 3-D and 4-D tensors, and its place in a
transformer block.

**Shapes.** LayerNorm takes μ and σ² over the *trailing* dims named by ``normalized_shape``; every
leading index gets its own pair. On ``(batch, seq, features)`` the last dim gives one μ per token,
the last two one μ per sequence; on ``(batch, channels, H, W)`` the last three give one μ per
image. γ and β have the shape ``normalized_shape`` and μ, σ² the input's shape with the trailing
dims kept as size 1. The batch dim stays out only if it is in front: the two-word notes lay their
words out
as ``(words, batch, embedding)`` and normalizes over ``dims=(-2, -1)``, which pools the batch as
soon as it holds more than one sample (:func:`seed_003_batch_of_two`).

**Blocks.** A transformer block adds two sublayers — self-attention, then a feed-forward network
— to a residual stream x. Where the LayerNorm goes decides how the stream's scale evolves with
depth, and how large the gradients of each block are:

.. math::
    \text{post-LN:}\quad x_1 = \mathrm{LN}(x + \mathrm{Attn}(x)),\quad
        x_{\text{out}} = \mathrm{LN}(x_1 + \mathrm{FFN}(x_1))

    \text{pre-LN:}\quad x_1 = x + \mathrm{Attn}(\mathrm{LN}(x)),\quad
        x_{\text{out}} = x_1 + \mathrm{FFN}(\mathrm{LN}(x_1)),\quad
        \text{and after the last block } \mathrm{LN}_f(x_L)

Post-LN re-normalizes the stream after every sublayer, so its RMS is 1 after every block — by
construction, which says nothing about how well it trains. Pre-LN feeds each sublayer a
normalized copy and normalizes the stream itself only once, after the last block (GPT-2's
``ln_f``): in between, every block adds a contribution that does not grow with the stream, so the
stream's variance grows with depth. Without any norm a sublayer's output grows with its input and
the stream grows geometrically.

:func:`depth_profiles` follows the forward pass, :func:`gradient_norms` the gradients of each
block at initialization (a loss through the final LayerNorm and a linear head), and
:class:`Race` trains a post-LN and a pre-LN model side by side on a synthetic task (reversing a
sequence of digits), in chunks that the app can stop. The attention (one head) and the
feed-forward network (4·d hidden units) are written out with plain tensor operations.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.batch import Batch, NormSpec, group_ids, normalize, to_grid
from lnviz.chunked import Chunked
from lnviz.data import get_preset, image_batch, random_batch
from lnviz.lessons.beyond import dyt
from lnviz.lessons.common import Answer
from lnviz.norms import layer_norm, rms_norm

__all__ = [
    "ACTIVATIONS",
    "COMPARED",
    "DYT_ALPHA",
    "ENTRANTS",
    "FINAL_NORMED",
    "GRADIENT_DEPTHS",
    "NORM_KINDS",
    "NORM_RACE",
    "PLACEMENTS",
    "RACE_MAX_SEEDS",
    "RACE_TASKS",
    "SECOND_SAMPLE",
    "SEED_003_SAMPLE",
    "SHAPE_EXAMPLES",
    "SHARES_OPTIONS",
    "VARIANTS",
    "DepthProfile",
    "DepthSweep",
    "Race",
    "RaceConfig",
    "RaceProgress",
    "RaceResult",
    "SeedBatchOfTwo",
    "ShapeView",
    "StackConfig",
    "batch_note",
    "batch_of_two_caption",
    "batch_of_two_snippet",
    "block",
    "block_snippet",
    "dependence_table",
    "depth_findings",
    "depth_profiles",
    "depth_sweep",
    "feed_forward",
    "final_norm",
    "first_blocks",
    "gradient_findings",
    "gradient_norms",
    "init_block",
    "init_race_model",
    "layer_norm_shapes",
    "layer_norm_snippet",
    "race_findings",
    "race_logits",
    "race_targets",
    "race_work",
    "reshape_table",
    "rms",
    "seed_003_batch_of_two",
    "self_attention",
    "shape_example",
    "shapes_try_this",
    "shares_answer",
    "twin_setting",
    "warmup_lr",
]

#: torch's intra-op threads when this module was imported: what :func:`_one_thread` restores.
_DEFAULT_THREADS = torch.get_num_threads()


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run torch single-threaded inside the block. This lesson's tensors are tiny (a few
    thousand values), so intra-op threads cannot speed it up; on a CPU that other work shares
    they wait on each other at every one of thousands of small operations instead: a 300-step
    race of 6 blocks took 434 s with torch's 2 threads against 14.5 s with one, on the 2-core
    machine this was written on while other work kept it busy (6.6 s against 6.1 s for 200
    steps when it was nearly idle). torch applies the setting to the calling thread (and to
    threads started meanwhile), so it is set back to the import-time default afterwards."""
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(_DEFAULT_THREADS)


def _single_threaded(func: Callable) -> Callable:
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _one_thread():
            return func(*args, **kwargs)
    return wrapper


# --- normalized_shape on tensors of different rank ---------------------------------------------

#: The two-word notes' one sample, as it types it: ``torch.Tensor([[[0.2, 0.1, 0.3], [0.5, 0.1,
# 0.1]]])``
#: is (batch, words, embedding) = (1, 2, 3), two words of three values.
SEED_003_SAMPLE = ((0.2, 0.1, 0.3), (0.5, 0.1, 0.1))
#: A second sample of two words (not the notes'), larger than the first so that sharing
#: statistics with it visibly moves the first sample's output.
SECOND_SAMPLE = ((0.9, 0.7, 0.8), (0.3, 0.6, 0.9))

#: The example tensors: short names (they go in the URL) → what their dims mean.
#: The two-word notes' tensor beside a second sample: the page's folded part works it through.
BATCH_OF_TWO = "two words ×2"
SHAPE_EXAMPLES = {
    "two words": ("words", "batch", "embedding"),
    BATCH_OF_TWO: ("words", "batch", "embedding"),
    "2-D": ("batch", "features"),
    "3-D": ("batch", "seq", "features"),
    "4-D": ("batch", "channels", "H", "W"),
}


def _word_rows(words: int, batch: int) -> tuple[str, ...]:
    return tuple(f"word {w} · batch {b}" for w in range(words) for b in range(batch))


def shape_example(name: str, seed: int = 0) -> Batch:
    """One of :data:`SHAPE_EXAMPLES`: the two-word notes' (2, 1, 3) word vectors, the same words
    with a
    second sample as (2, 2, 3), a (4, 6) feature table, the transformer article's (2, 4, 3) padded
    token batch,
    or (2, 3, 4, 4) synthetic images."""
    if name == "two words":
        return Batch(get_preset("two_words").values, "NLC", row_labels=_word_rows(2, 1))
    if name == BATCH_OF_TWO:
        return Batch(seed_003_batch_of_two().permuted, "NLC", row_labels=_word_rows(2, 2))
    if name == "2-D":
        return Batch(random_batch((4, 6), feature_spread=0.5, seed=seed), "NC")
    if name == "3-D":
        preset = get_preset("padded_tokens")
        return Batch(preset.values, "NLC", row_labels=preset.labels)
    if name == "4-D":
        return Batch(image_batch(2, 3, 4, 4, seed=seed), "NCHW")
    raise ValueError(f"example must be one of {list(SHAPE_EXAMPLES)}, got {name!r}")


def batch_note(example: str, dims: int) -> str | None:
    """What normalizing :data:`SHAPE_EXAMPLES` ``example`` over its last ``dims`` dims does to
    the batch, when those dims include it (None when the batch keeps out of the statistics)."""
    names = SHAPE_EXAMPLES[example]
    if "batch" not in names[-dims:]:
        return None
    size = shape_example(example).values.shape[names.index("batch")]
    pooled = (f"The last {dims} dims, ({', '.join(names[-dims:])}), include the batch dim: "
              "every μ and σ² is taken across the samples of the batch.")
    if size == 1:
        return (pooled + " Here the batch holds one sample, so nothing is mixed and the result "
                f"equals the last dim's. What a second sample does is the question of "
                f"“{BATCH_OF_TWO}” over the same dims.")
    return (pooled + f" With {size} samples, each sample's output depends on the others: this "
            "is no longer a per-sample norm.")


#: The normalized_shape question: does a sample's output depend on its batch-mates?
SHARES_OPTIONS = ("yes", "no")


def shares_answer(example: str, dims: int, view: ShapeView) -> Answer:
    """Whether normalizing :data:`SHAPE_EXAMPLES` ``example`` over its last ``dims`` dims (as
    ``view`` describes it) lets one sample's output depend on another's, and why: which dims
    each μ and σ² is taken per, and over, and where the batch dim is."""
    names = SHAPE_EXAMPLES[example]
    size = int(view.shape[names.index("batch")])
    mixed = "batch" in names[-dims:] and size > 1
    where = (f"normalized_shape = {tuple(view.normalized_shape)} covers the last {dims} "
             f"dim{'s' if dims > 1 else ''}, ({', '.join(names[-dims:])}): there is one μ and "
             f"σ² for each index of ({', '.join(names[:-dims])}), {view.groups} pairs over "
             f"{view.group_size} values each. ")
    note = batch_note(example, dims) or (
        "The batch dim is in front of them, so each sample gets statistics of its own and no "
        "other sample enters them.")
    # one sample over dims that pool the batch: "no" (there is no other sample), and "yes" read
    # as "it would, beside another" is as right
    pooled_alone = "batch" in names[-dims:] and size == 1
    return Answer(SHARES_OPTIONS[0 if mixed else 1], where + note,
                  (SHARES_OPTIONS[0],) if pooled_alone else ())


def twin_setting(example: str, dims: int) -> tuple[str, int] | None:
    """The other tensor and dims whose "does a sample depend on its batch-mates?" question the
    reply for ``example`` over ``dims`` settles: the two words and the same words beside a
    second sample, over the last 2 dims (batch, embedding), where the dims pool the batch.
    None for every other setting."""
    twins = {"two words": BATCH_OF_TWO, BATCH_OF_TWO: "two words"}
    return (twins[example], dims) if example in twins and dims == 2 else None


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

    ``dims`` must leave the first dim out (1 ≤ dims < ndim): normalizing over every dim would
    give the whole tensor one μ. Whether the batch is left out depends on where the layout puts
    it (see :func:`batch_note`).
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


# --- The two words with a batch of two
# ---------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SeedBatchOfTwo:
    """The two-word notes' steps on a batch of two samples instead of one.

    Attributes:
        inputs: (batch, words, embedding) = (2, 2, 3), batch first, as the notes type their tensor:
            sample 0 is the two-word notes' words, sample 1 is :data:`SECOND_SAMPLE`.
        reshaped: ``inputs.reshape(words, batch, embedding)``, the notes' line. A reshape keeps
            the memory order and only relabels it, so row (word w, batch b) holds sample w's
            word b.
        permuted: ``inputs.permute(1, 0, 2)``, the (words, batch, embedding) tensor the seed
            meant: row (word w, batch b) holds sample b's word w.
        reshaped_source, permuted_source: for each (word, batch) row, the (sample, word) of
            ``inputs`` it holds.
        per_word: LayerNorm over the last dim of ``permuted``: one μ per word of each sample.
        seed_dims: LayerNorm over the last two dims (the notes' ``dims=(-2, -1)``): one μ per word
            position, shared by both samples.
        alone: {dims: sample 0's two words normalized in a batch of their own, (words, 3)}.
        in_batch: {dims: sample 0's two words normalized inside the batch of two, (words, 3)}.
        dependence: {dims: max |in_batch − alone|}, how much sample 0's output moves because
            sample 1 is in the batch.
        seed_steps: the notes' own step-by-step lines on ``permuted``, (words, batch, embedding):
            μ over the last dim, σ² summed over ``dims=(-2, -1)`` but divided by
            m = ``X.size()[-1]`` = 3, then (X − μ)/√(σ² + ε). With a batch of two the sum has
            six terms, so σ² is not a variance of anything.
    """

    inputs: np.ndarray
    reshaped: np.ndarray
    permuted: np.ndarray
    reshaped_source: list[tuple[int, int]]
    permuted_source: list[tuple[int, int]]
    per_word: np.ndarray
    seed_dims: np.ndarray
    alone: dict[int, np.ndarray]
    in_batch: dict[int, np.ndarray]
    dependence: dict[int, float]
    seed_steps: np.ndarray


def _ln_last(x: torch.Tensor, dims: int) -> torch.Tensor:
    return layer_norm(x, x.shape[-dims:]).output


def seed_003_batch_of_two(second: tuple[tuple[float, ...], ...] = SECOND_SAMPLE
                          ) -> SeedBatchOfTwo:
    """The two-word notes' reshape and its ``dims=(-2, -1)`` on a batch of two samples (see
    :class:`SeedBatchOfTwo`). With its batch of one, ``reshape`` and ``permute`` give the same
    tensor and the batch dim has size 1, so neither slip shows; with two, both do."""
    inputs = torch.tensor([SEED_003_SAMPLE, second], dtype=torch.float64)  # (batch, words, emb)
    batch, words, embedding = inputs.shape
    reshaped = inputs.reshape(words, batch, embedding)  # the notes' line: relabels memory
    permuted = inputs.permute(1, 0, 2)  # (words, batch, emb): moves the data
    flat = [(s, w) for s in range(batch) for w in range(words)]  # memory order of ``inputs``
    alone_input = inputs[:1].permute(1, 0, 2)  # sample 0 by itself: (words, 1, emb), the notes'
    outputs = {dims: _ln_last(permuted, dims) for dims in (1, 2)}
    alone = {dims: _ln_last(alone_input, dims)[:, 0].numpy() for dims in (1, 2)}
    in_batch = {dims: out[:, 0].numpy() for dims, out in outputs.items()}
    # the notes' step-by-step cells, as it runs them (its m stays the last dim's size)
    m = permuted.shape[-1]
    mu = (1 / m) * torch.sum(permuted, dim=-1, keepdim=True)
    sigma2 = (1 / m) * torch.sum((permuted - mu) ** 2, dim=(-2, -1), keepdim=True)
    seed_steps = (permuted - mu) / torch.sqrt(sigma2 + 1e-5)
    return SeedBatchOfTwo(
        inputs=inputs.numpy(),
        reshaped=reshaped.numpy(),
        permuted=permuted.contiguous().numpy(),
        reshaped_source=flat,
        permuted_source=[(b, w) for w in range(words) for b in range(batch)],
        per_word=outputs[1].numpy(),
        seed_dims=outputs[2].numpy(),
        alone=alone,
        in_batch=in_batch,
        dependence={dims: float(np.abs(in_batch[dims] - alone[dims]).max()) for dims in (1, 2)},
        seed_steps=seed_steps.numpy(),
    )


def reshape_table(view: SeedBatchOfTwo) -> pd.DataFrame:
    """The seed's ``reshape`` beside the ``permute`` it needed: for each (word, batch) position,
    which word of which sample it holds and its values."""
    rows = []
    words, batch = view.permuted.shape[:2]
    for w in range(words):
        for b in range(batch):
            i = w * batch + b
            rows.append({
                "position (word, batch)": f"({w}, {b})",
                "reshape holds": "sample {}, word {}".format(*view.reshaped_source[i]),
                "reshape values": _values(view.reshaped[w, b]),
                "permute holds": "sample {}, word {}".format(*view.permuted_source[i]),
                "permute values": _values(view.permuted[w, b]),
            })
    return pd.DataFrame(rows)


def dependence_table(view: SeedBatchOfTwo) -> pd.DataFrame:
    """Sample 0's outputs normalized alone and inside the batch of two, over the last dim and
    over the notes' last two dims."""
    rows = []
    for dims, label in ((1, "last dim, (embedding,)"), (2, "last 2 dims, (batch, embedding)")):
        for w in range(view.alone[dims].shape[0]):
            rows.append({"normalized over": label, "sample 0": f"word {w}",
                         "alone (batch of 1)": _values(view.alone[dims][w]),
                         "beside sample 1 (batch of 2)": _values(view.in_batch[dims][w]),
                         "max |change|": float(np.abs(view.in_batch[dims][w]
                                                      - view.alone[dims][w]).max())})
    return pd.DataFrame(rows)


def batch_of_two_caption(view: SeedBatchOfTwo) -> str:
    """What the batch of two shows, with its numbers: how far sample 0 moves over each choice
    of dims, and the notes' own step-by-step cells on the same batch."""
    return (
        f"Over the last dim, sample 0's output moves by {view.dependence[1]:.4g} when sample 1 "
        f"joins it; over the notes' last two dims, by up to {view.dependence[2]:.4f}. With a "
        "batch of one the two choices agree only because the batch dim has size 1. The notes' "
        "own step-by-step cells slip a third time on a batch of two: μ over the last dim, but "
        "σ² summed over the last two dims and divided by m = 3, the last dim's size, although "
        "the sum now has 6 terms: sample 0's first word comes out as "
        f"{_values(view.seed_steps[0, 0])} instead of {_values(view.alone[1][0])}.")


def shapes_try_this() -> str:
    """The "try this" under the normalized_shape figure: the other tensors and dims to predict
    before looking, each its own question on the page (its outcome is that question's reply, so
    none is stated here)."""
    return (
        "**Try this.** Predict each before you switch to it: the two words over the last 2 dims "
        "(the last two are then (batch, embedding), with a batch of one sample: what does that "
        "size-1 dim change?); “two words ×2” over the last 2 dims; the 3-D batch over the last "
        "1 dim and then the last 2 (whose statistics does the pad token share?); the images over "
        "the last 3 dims (which GroupNorm computes the same?). And a LayerNorm over each pixel's "
        "channels, as ConvNeXt uses: what must happen to the tensor first?")


def _values(row: np.ndarray) -> str:
    # a rounding residue such as -1.8e-07 prints as 0, not as -0.0000
    return "[" + ", ".join(f"{v if abs(v) >= 5e-5 else 0.0:.4f}" for v in row) + "]"


def batch_of_two_snippet(second: tuple[tuple[float, ...], ...] = SECOND_SAMPLE) -> str:
    """PyTorch code that repeats the two-word notes' steps with a batch of two and shows both
    slips."""
    return f'''import torch
import torch.nn.functional as F

# (batch, words, embedding) = (2, 2, 3): the notes' sample, then a second one
inputs = torch.tensor([{[list(w) for w in SEED_003_SAMPLE]}, {[list(w) for w in second]}])
batch_size, sequence_size, embedding_size = inputs.shape
reshaped = inputs.reshape(sequence_size, batch_size, embedding_size)  # the notes' line
permuted = inputs.permute(1, 0, 2)  # what it meant: (words, batch, embedding)
print(torch.equal(reshaped, permuted))  # False: reshape only relabels memory
print(reshaped[0, 1].tolist())  # sample 0's word 1, filed as word 0 of sample 1

alone = F.layer_norm(inputs[:1].permute(1, 0, 2), (1, 3))[:, 0]  # the notes: batch of one
pooled = F.layer_norm(permuted, (2, 3))[:, 0]  # dims=(-2, -1): sample 0 beside sample 1
per_word = F.layer_norm(permuted, (3,))[:, 0]  # dims=-1: one μ per word of each sample
print((pooled - alone).abs().max().item() > 0.1)  # True: sample 1 moved sample 0's output
print(torch.allclose(per_word, alone))  # True: over the last dim alone, nothing is shared
'''


# --- A stack of transformer blocks -------------------------------------------------------------

#: Where the LayerNorms go, as the Shapes lesson compares them.
VARIANTS = ("post-LN", "pre-LN", "none")
#: Every placement :func:`block` builds: the Shapes lesson's, and two of recent models (Peri-LN:
#: a LayerNorm before and after each sublayer; OLMo-2: after each sublayer only, inside the
#: residual branch), compared on the placement lesson.
PLACEMENTS = ("post-LN", "pre-LN", "Peri-LN", "OLMo-2", "none")
#: The placements whose stream ends in a final LayerNorm (``ln_f``) before the head.
FINAL_NORMED = ("pre-LN", "Peri-LN", "OLMo-2")
#: The two placements whose gradients and training the page compares.
COMPARED = ("post-LN", "pre-LN")
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
    ``w2`` (d × 4d), ``b2``. The LayerNorms have no γ and β here (they would start at 1 and 0);
    :func:`init_race_model` adds them for training. The normal draws are made in float32 (four
    times faster than float64's, and as random) and then cast.
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


#: What a block's norms compute (:func:`_ln`): LayerNorm, RMSNorm, or Dynamic Tanh.
NORM_KINDS = ("LayerNorm", "RMSNorm", "DyT")
#: DyT's α at initialization (the DyT paper's default outside large language models).
DYT_ALPHA = 0.5


def _ln(x: torch.Tensor, params: dict[str, torch.Tensor] | None = None, name: str = "",
        impl: str = "scratch", kind: str = "LayerNorm") -> torch.Tensor:
    """One of the block's norms over the last dim (``kind``, one of :data:`NORM_KINDS`), with
    γ and β ``params[name + "_weight"/"_bias"]`` when the block has them: lnviz's LayerNorm or
    RMSNorm (no β), or DyT, γ·tanh(αx) + β with α ``params[name + "_alpha"]``."""
    params = params or {}
    weight, bias = params.get(name + "_weight"), params.get(name + "_bias")
    if kind == "RMSNorm":
        return rms_norm(x, x.shape[-1:], weight, impl=impl).output
    if kind == "DyT":
        return dyt(x, params[name + "_alpha"], weight, bias)
    if kind != "LayerNorm":
        raise ValueError(f"a norm is one of {list(NORM_KINDS)}, got {kind!r}")
    return layer_norm(x, x.shape[-1:], weight, bias, impl=impl).output


def block(x: torch.Tensor, params: dict[str, torch.Tensor], variant: str,
          activation: Callable[[torch.Tensor], torch.Tensor] = F.gelu, *, impl: str = "scratch",
          kind: str = "LayerNorm") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One transformer block: (new stream, what attention adds, what the FFN adds). The
    LayerNorms are lnviz's (``impl`` as in :func:`lnviz.layer_norm`), with γ, β from ``params``
    (``ln1_weight``, ``ln1_bias``, ``ln2_…``; Peri-LN's and OLMo-2's output norms ``ln1o_…``,
    ``ln2o_…``) where it has them. ``variant`` is one of :data:`PLACEMENTS`; ``kind`` says what
    each norm computes (:data:`NORM_KINDS`)."""
    def ln(h: torch.Tensor, name: str) -> torch.Tensor:
        return _ln(h, params, name, impl, kind)

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
               *, impl: str = "scratch", kind: str = "LayerNorm") -> torch.Tensor:
    """What the head reads after the last block: the stream of the placements in
    :data:`FINAL_NORMED` goes through one more LayerNorm (GPT-2's ``ln_f``, γ and β
    ``params["lnf_weight"/"lnf_bias"]`` if given); post-LN's stream leaves its last block
    normalized already, and "none" has no norm to add."""
    return _ln(x, params, "lnf", impl, kind) if variant in FINAL_NORMED else x


def rms(x: torch.Tensor) -> float:
    """√(mean x²): the typical size of an entry (the stream's scale)."""
    return float(x.detach().square().mean().sqrt())


@dataclass(frozen=True, eq=False)
class DepthProfile:
    """How the scale evolves through the stack, for one variant.

    Attributes:
        stream: RMS of the residual stream at the input (index 0) and after each block.
        attention, ffn: RMS of what each block's attention and feed-forward sublayers output.
        head_input: RMS of what a head would read if the stack ended there (index 0 = the
            input): :func:`final_norm` of the stream, 1 for pre-LN after its ``ln_f``.

    Values that overflowed float64 are NaN.
    """

    stream: np.ndarray
    attention: np.ndarray
    ffn: np.ndarray
    head_input: np.ndarray


def _stack(config: StackConfig) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
    """The input batch (RMS ≈ 1), then the blocks one after another, from ``config.seed``: a
    shallower stack is the first blocks of a deeper one."""
    generator = torch.Generator().manual_seed(config.seed)
    x0 = torch.randn(config.batch, config.seq_len, config.d_model, generator=generator,
                     dtype=torch.float64)
    return x0, [init_block(config.d_model, config.init_gain, generator)
                for _ in range(config.depth)]


@_single_threaded
def depth_profiles(config: StackConfig, variants: tuple[str, ...] = VARIANTS
                   ) -> dict[str, DepthProfile]:
    """Send one random batch (RMS ≈ 1) through the same random stack, arranged as each of
    ``variants`` (:data:`PLACEMENTS`), and record the RMS of the stream and of what the
    sublayers add to it.

    A shallower stack is the first blocks of a deeper one with the same seed (:func:`_stack`):
    its profile is a prefix of the deeper one's.
    """
    x0, stack = _stack(config)
    activation = ACTIVATIONS[config.activation]
    profiles = {}
    with torch.no_grad():
        for variant in variants:
            x, stream, attention, ffn = x0, [rms(x0)], [], []
            head = [rms(final_norm(x0, variant))]
            for params in stack:
                x, attn, out = block(x, params, variant, activation)
                stream.append(rms(x))
                head.append(rms(final_norm(x, variant)))
                attention.append(rms(attn))
                ffn.append(rms(out))
            profiles[variant] = DepthProfile(
                *(_finite(v) for v in (stream, attention, ffn, head)))
    return profiles


def first_blocks(profiles: dict[str, DepthProfile], depth: int) -> dict[str, DepthProfile]:
    """The profiles of the first ``depth`` blocks of a deeper stack (see :func:`depth_profiles`)."""
    return {variant: DepthProfile(p.stream[:depth + 1], p.attention[:depth], p.ffn[:depth],
                                  p.head_input[:depth + 1])
            for variant, p in profiles.items()}


def _finite(values: list[float]) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    array[~np.isfinite(array)] = np.nan  # overflow: no scale left to report
    return array


def depth_findings(profiles: dict[str, DepthProfile]) -> list[str]:
    """What the forward chart shows for these profiles, one sentence per variant, with its
    numbers (the page's "try this" reads them off here rather than assuming them)."""
    post, pre, none = (profiles[v] for v in VARIANTS)
    depth = len(post.ffn)
    notes = [f"Post-LN's stream has RMS {np.nanmin(post.stream[1:]):.3f} to "
             f"{np.nanmax(post.stream[1:]):.3f} after every block: its last operation is a "
             "LayerNorm, so this is true by construction and says nothing yet about training."]
    growth = (pre.stream[-1] ** 2 - pre.stream[0] ** 2) / depth
    notes.append(
        f"Pre-LN's stream goes from RMS {pre.stream[0]:.3g} to {pre.stream[-1]:.3g} in {depth} "
        f"block{'s' * (depth > 1)}: its sublayers read normalized copies, so their outputs stay "
        f"between {np.nanmin(np.r_[pre.attention, pre.ffn]):.2g} and "
        f"{np.nanmax(np.r_[pre.attention, pre.ffn]):.2g} (right panel) however large the "
        f"stream gets, and what they add accumulates: RMS² grows by about {growth:.2g} per "
        "block on average. "
        f"The final LayerNorm (ln_f) brings what the head reads back to RMS "
        f"{pre.head_input[-1]:.3f}.")
    finite = np.isfinite(none.stream)
    if not finite.all():
        first_nan = int(np.argmin(finite))
        notes.append(f"Without LayerNorm each sublayer's output grows with its input, until the "
                     f"stream overflows float64 in block {first_nan}.")
    else:
        per_block = (none.stream[-1] / none.stream[0]) ** (1 / depth)
        ahead = np.flatnonzero(none.stream > 1.1 * pre.stream)
        notes.append(
            f"Without LayerNorm each sublayer's output grows with its input: the stream grows "
            f"×{per_block:.3g} per block on average, to RMS {none.stream[-1]:.3g}"
            + (f"; it first exceeds pre-LN's by more than 10 % after block {ahead[0]}."
               if len(ahead) else "; it stays within 10 % of pre-LN's in these blocks."))
    return notes


# --- Gradients at initialization ----------------------------------------------------------------

#: Classes of the random head through which the gradients are taken.
HEAD_CLASSES = 16
#: Depths of the sweep that compares the first and last blocks' gradients as the stack deepens.
GRADIENT_DEPTHS = (1, 2, 3, 6, 12, 24, 48)


def _block_gradient_norm(params: dict[str, torch.Tensor]) -> float:
    return math.sqrt(sum(float(p.grad.square().sum()) for p in params.values()))


@_single_threaded
def gradient_norms(config: StackConfig, variants: tuple[str, ...] = COMPARED
                   ) -> dict[str, np.ndarray]:
    """‖∂L/∂θ_b‖₂ at initialization for every block b (all its weights together), for each of
    ``variants`` (post-LN and pre-LN unless told), on the stack and batch of
    :func:`depth_profiles`.

    L is a cross-entropy on random labels through :func:`final_norm` (pre-LN's ``ln_f``) and a
    random linear head of :data:`HEAD_CLASSES` classes, drawn from ``seed + 1`` so that stacks of
    every depth share them. NaN where the gradient overflowed.
    """
    x0, stack = _stack(config)
    draw = torch.Generator().manual_seed(config.seed + 1)
    head = torch.randn(HEAD_CLASSES, config.d_model, generator=draw,
                       dtype=torch.float64) / math.sqrt(config.d_model)
    labels = torch.randint(HEAD_CLASSES, (config.batch, config.seq_len), generator=draw)
    activation = ACTIVATIONS[config.activation]
    norms = {}
    for variant in variants:
        params = [{k: w.clone().requires_grad_() for k, w in p.items()} for p in stack]
        x = x0
        for p in params:
            x = block(x, p, variant, activation)[0]
        logits = final_norm(x, variant) @ head.T
        F.cross_entropy(logits.reshape(-1, HEAD_CLASSES), labels.reshape(-1)).backward()
        norms[variant] = _finite([_block_gradient_norm(p) for p in params])
    return norms


@dataclass(frozen=True, eq=False)
class DepthSweep:
    """The first and the last block's gradient norms at initialization, as the stack deepens.

    Attributes:
        depths: the stack depths (:data:`GRADIENT_DEPTHS`).
        first, last: {variant: ‖∂L/∂θ‖ of block 1 / of the last block, per depth}.
        blocks: {depth: :func:`gradient_norms` of that stack, every block's}: a page that
            shows one of these depths block by block reads it here instead of computing it
            again.
    """

    depths: np.ndarray
    first: dict[str, np.ndarray]
    last: dict[str, np.ndarray]
    blocks: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)


def depth_sweep(config: StackConfig, depths: tuple[int, ...] = GRADIENT_DEPTHS) -> DepthSweep:
    """:func:`gradient_norms` of the first ``d`` blocks of the same stack, for each ``d``."""
    runs = [gradient_norms(replace(config, depth=d)) for d in depths]
    return DepthSweep(np.asarray(depths),
                      {v: np.asarray([r[v][0] for r in runs]) for v in COMPARED},
                      {v: np.asarray([r[v][-1] for r in runs]) for v in COMPARED},
                      dict(zip(depths, runs, strict=True)))


def _times(ratio: float) -> str:
    return f"{ratio:.2g}×"


def gradient_findings(norms: dict[str, np.ndarray], sweep: DepthSweep) -> list[str]:
    """What the gradient charts show, with their numbers: along this stack (first against last
    block), post-LN against pre-LN at the output end, and the last block as the stack deepens,
    set against what Xiong et al. (2020) predict."""
    notes = []
    depth = len(norms["post-LN"])
    if depth > 1:
        for variant in COMPARED:
            first, last = norms[variant][0], norms[variant][-1]
            trend = ("about the same" if 0.8 <= last / first <= 1.25 else
                     f"{_times(last / first)} block 1's")
            notes.append(f"{variant}: block 1's gradient norm is {first:.3g}, block {depth}'s "
                         f"{last:.3g} ({trend}).")
    ratio = norms["post-LN"][-1] / norms["pre-LN"][-1]
    notes.append(f"At the last block, post-LN's gradient is {_times(ratio)} pre-LN's.")
    d0, d1 = sweep.depths[0], sweep.depths[-1]
    post = sweep.last["post-LN"][-1] / sweep.last["post-LN"][0]
    pre = sweep.last["pre-LN"][-1] / sweep.last["pre-LN"][0]
    line = (f"From {d0} to {d1} blocks (right panel), the last block's gradient changes by "
            f"{_times(post)} in post-LN and {_times(pre)} in pre-LN")
    if pre < 0.8 and post > 0.8:
        how = "grows" if post > 1.25 else "stays about the same"
        steps = len(sweep.depths) - 1
        downs = int((np.diff(sweep.last["pre-LN"]) < 0).sum())
        ups = int((np.diff(sweep.last["post-LN"]) > 0).sum())
        line += (f": pre-LN's shrinks as blocks are added (down at {downs} of the {steps} "
                 f"steps of depth) and post-LN's does not (it {how} overall, up at {ups} of "
                 f"the {steps}). "
                 "Xiong et al. prove bounds, not values: pre-LN's last-block gradient is at "
                 "most a size that shrinks like 1/√depth (which would give "
                 f"{1 / math.sqrt(d1 / d0):.2f}× here), post-LN's at most one that does not "
                 "depend on the depth — so the figure agrees with them, and what post-LN's "
                 "does beyond not shrinking is this stack's own.")
    else:
        line += (": at these settings the sweep does not show Xiong et al.'s pattern "
                 "(pre-LN's shrinking, post-LN's not).")
    notes.append(line)
    return notes


# --- A training race ----------------------------------------------------------------------------

#: The synthetic tasks: read a sequence of digits, output it as it is or backwards.
RACE_TASKS = ("reverse", "copy")
#: Digits per sequence and the vocabulary they are drawn from.
RACE_SEQ_LEN, RACE_VOCAB = 8, 10
#: Token accuracy (averaged over this many consecutive steps) that counts as "learned".
SOLVED_ACCURACY, SOLVED_WINDOW = 0.9, 10
#: The models a race can train, by name: where the norms sit (:data:`PLACEMENTS`) and what
#: they compute (:data:`NORM_KINDS`). "no norm" has none at all.
ENTRANTS = {"post-LN": ("post-LN", "LayerNorm"), "pre-LN": ("pre-LN", "LayerNorm"),
            "Peri-LN": ("Peri-LN", "LayerNorm"),
            "pre-RMSNorm": ("pre-LN", "RMSNorm"), "pre-DyT": ("pre-LN", "DyT"),
            "no norm": ("none", "LayerNorm")}
#: The weight matrices of a block whose size :class:`Race` follows (``weight norm``).
BLOCK_MATRICES = ("wq", "wk", "wv", "wo", "w1", "w2")
#: What replaces LayerNorm, raced in the pre-norm position: Beyond LayerNorm's race.
NORM_RACE = ("pre-LN", "pre-RMSNorm", "pre-DyT", "no norm")
#: What a race records at every step of every model: its loss and token accuracy on that step's
#: batch, and before the step ‖W‖ (:func:`weight_norm`) and the mean square of the stream
#: leaving the last block.
RACE_CURVES = ("loss", "accuracy", "weight norm", "stream")
#: The most seeds a race trains each model from.
RACE_MAX_SEEDS = 5


@dataclass(frozen=True)
class RaceConfig:
    """Small transformers trained side by side with Adam: ``entrants`` (names of
    :data:`ENTRANTS`; post-LN and pre-LN unless told), each from ``seeds`` seeds.

    The learning rate rises linearly from lr/``warmup`` to ``lr`` over the first ``warmup``
    steps (none if 0) and then stays. For each seed (``seed``, ``seed + 1``, …) every model
    starts from the same weights and sees the same mini-batches of ``batch`` random sequences.
    """

    depth: int = 6
    d_model: int = 64
    lr: float = 3e-3
    warmup: int = 0
    steps: int = 200
    batch: int = 32
    task: str = "reverse"
    seed: int = 0
    entrants: tuple[str, ...] = COMPARED
    seeds: int = 1

    def __post_init__(self) -> None:
        if self.task not in RACE_TASKS:
            raise ValueError(f"task must be one of {list(RACE_TASKS)}, got {self.task!r}")
        unknown = [e for e in self.entrants if e not in ENTRANTS]
        if not self.entrants or unknown or len(set(self.entrants)) != len(self.entrants):
            raise ValueError(f"entrants must be distinct names from {list(ENTRANTS)}, got "
                             f"{list(self.entrants)}")
        if not 1 <= self.seeds <= RACE_MAX_SEEDS:
            raise ValueError(f"seeds must be between 1 and {RACE_MAX_SEEDS}, got {self.seeds}")
        for name, high in (("depth", 24), ("d_model", 256), ("steps", 2000), ("batch", 256)):
            if not 1 <= getattr(self, name) <= high:
                raise ValueError(f"{name} must be between 1 and {high}, got {getattr(self, name)}")
        if not 0 < self.lr <= 1:
            raise ValueError(f"lr must be in (0, 1], got {self.lr}")
        if not 0 <= self.warmup <= self.steps:
            raise ValueError(f"warmup must be between 0 and steps ({self.steps}), "
                             f"got {self.warmup}")


def race_work(config: RaceConfig) -> int:
    """A race's size in block-steps: models × seeds × steps × blocks, what its time grows with
    (d_model and the batch are the same in every race a page offers)."""
    return len(config.entrants) * config.seeds * config.steps * config.depth


def warmup_lr(step: int, config: RaceConfig) -> float:
    """The learning rate of optimizer step ``step`` (0-based): linear warm-up, then constant."""
    if config.warmup == 0:
        return config.lr
    return config.lr * min(1.0, (step + 1) / config.warmup)


def race_targets(tokens: torch.Tensor, task: str) -> torch.Tensor:
    """What the model must output at each position: the sequence backwards, or as it is."""
    return tokens.flip(-1) if task == "reverse" else tokens


def init_race_model(config: RaceConfig, entrant: str, seed: int | None = None
                    ) -> dict[str, object]:
    """A small transformer in plain tensors, arranged as ``entrant`` (:data:`ENTRANTS`): token
    and position embeddings (each N(0, ½), so their sum has RMS ≈ 1), ``depth`` blocks of
    :func:`init_block` (gain 1) with γ = 1, β = 0 in both norms (and DyT's α =
    :data:`DYT_ALPHA`), a final norm where the placement has one, and a linear head. The same
    ``seed`` (``config.seed`` unless given) gives every entrant the same weights. Every tensor
    requires grad."""
    variant, kind = ENTRANTS[entrant]
    generator = torch.Generator().manual_seed(config.seed if seed is None else seed)
    d = config.d_model

    def norm_params(name: str) -> dict[str, torch.Tensor]:
        if variant == "none":
            return {}
        params = {name + "_weight": torch.ones(d)}
        if kind != "RMSNorm":
            params[name + "_bias"] = torch.zeros(d)
        if kind == "DyT":
            params[name + "_alpha"] = torch.tensor(DYT_ALPHA)
        return params

    blocks = []
    for _ in range(config.depth):
        params = init_block(d, 1.0, generator, dtype=torch.float32)
        params |= norm_params("ln1") | norm_params("ln2")
        if variant in ("Peri-LN", "OLMo-2"):  # and a norm on what each sublayer adds
            params |= norm_params("ln1o") | norm_params("ln2o")
        blocks.append(params)
    top = {
        "embed": torch.randn(RACE_VOCAB, d, generator=generator) * math.sqrt(0.5),
        "position": torch.randn(RACE_SEQ_LEN, d, generator=generator) * math.sqrt(0.5),
        "head": torch.randn(RACE_VOCAB, d, generator=generator) / math.sqrt(d),
    }
    if variant in FINAL_NORMED:
        top |= norm_params("lnf")
    for tensor in [*top.values(), *(t for p in blocks for t in p.values())]:
        tensor.requires_grad_()
    return {"variant": variant, "kind": kind, "blocks": blocks, "top": top}


def race_stream(model: dict[str, object], tokens: torch.Tensor) -> torch.Tensor:
    """(batch, seq) digits → the residual stream leaving the last block, (batch, seq, d)."""
    top, variant, kind = model["top"], model["variant"], model["kind"]
    x = top["embed"][tokens] + top["position"]
    for params in model["blocks"]:
        x = block(x, params, variant, impl="fast", kind=kind)[0]
    return x


def race_logits(model: dict[str, object], tokens: torch.Tensor,
                stream: torch.Tensor | None = None) -> torch.Tensor:
    """(batch, seq) digits → (batch, seq, vocab) logits (from ``stream``, the tokens'
    :func:`race_stream`, where given)."""
    top, variant, kind = model["top"], model["variant"], model["kind"]
    x = race_stream(model, tokens) if stream is None else stream
    return final_norm(x, variant, top, impl="fast", kind=kind) @ top["head"].T


def weight_norm(model: dict[str, object]) -> float:
    """‖W‖: the Frobenius norm of every block's weight matrices (:data:`BLOCK_MATRICES`)
    together."""
    return math.sqrt(sum(float(p[name].detach().square().sum())
                         for p in model["blocks"] for name in BLOCK_MATRICES))


def _parameters(model: dict[str, object]) -> list[torch.Tensor]:
    return [*model["top"].values(), *(t for p in model["blocks"] for t in p.values())]


class _Runner:
    """One model of the race from one seed: its weights, Adam, its own batch sampler and its
    curves."""

    def __init__(self, config: RaceConfig, entrant: str, seed: int | None = None) -> None:
        seed = config.seed if seed is None else seed
        self.config, self.entrant, self.seed = config, entrant, seed
        self.model = init_race_model(config, entrant, seed)
        self.optimizer = torch.optim.Adam(_parameters(self.model), lr=config.lr)
        self.generator = torch.Generator().manual_seed(seed + 1)  # the same batches for all
        self.loss: list[float] = []
        self.accuracy: list[float] = []
        # before each step: ‖W‖ and the mean square of the stream leaving the last block
        self.weight_norm: list[float] = []
        self.stream: list[float] = []

    @property
    def step(self) -> int:
        return len(self.loss)

    def train_step(self) -> None:
        config = self.config
        tokens = torch.randint(RACE_VOCAB, (config.batch, RACE_SEQ_LEN), generator=self.generator)
        target = race_targets(tokens, config.task)
        stream = race_stream(self.model, tokens)
        self.weight_norm.append(weight_norm(self.model))
        self.stream.append(float(stream.detach().double().square().mean()))
        logits = race_logits(self.model, tokens, stream)
        loss = F.cross_entropy(logits.reshape(-1, RACE_VOCAB), target.reshape(-1))
        for group in self.optimizer.param_groups:
            group["lr"] = warmup_lr(self.step, config)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.loss.append(float(loss.detach()))
        self.accuracy.append(float((logits.detach().argmax(-1) == target).double().mean()))


@dataclass(frozen=True)
class RaceProgress:
    """Where a :class:`Race` stands: steps taken out of all (``fraction``), a line for the
    progress bar, and the curves so far."""

    fraction: float
    text: str
    curves: dict[str, dict[str, list[float]]]


@dataclass(frozen=True, eq=False)
class RaceResult:
    """A finished (or stopped) race as plain numbers.

    Attributes:
        config: the settings it ran with.
        curves: {entrant: {"loss": per step, "accuracy": token accuracy per step, "weight
            norm": ‖W‖ before each step, "stream": the stream's mean square before each step}}
            (:data:`RACE_CURVES`), the mean over the seeds; each step's batch is fresh, so these
            are measured on sequences the model had not seen.
        steps_done: steps every model took.
        stopped: whether the learner stopped it before ``config.steps``.
        seconds: wall-clock time of the whole race (on a shared machine: a rough guide).
        seed_curves: {entrant: the same curves, one per seed} (empty: one seed, ``curves``).
    """

    config: RaceConfig
    curves: dict[str, dict[str, list[float]]]
    steps_done: int
    stopped: bool
    seconds: float
    seed_curves: dict[str, list[dict[str, list[float]]]] = field(default_factory=dict)

    def per_seed(self, entrant: str) -> list[dict[str, list[float]]]:
        """``entrant``'s curves, one per seed."""
        return self.seed_curves.get(entrant) or [self.curves[entrant]]

    def band(self, entrant: str, key: str) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and the highest seed's value of ``key`` ("loss", "accuracy") per step."""
        values = np.asarray([c[key] for c in self.per_seed(entrant)], dtype=np.float64)
        return values.min(axis=0), values.max(axis=0)

    def final_accuracies(self, entrant: str) -> list[float]:
        """Each seed's mean token accuracy over its last :data:`SOLVED_WINDOW` steps."""
        return [float(np.mean(c["accuracy"][-SOLVED_WINDOW:])) for c in self.per_seed(entrant)]

    def solved_at(self, variant: str) -> int | None:
        """The first step (1-based) at which the token accuracy, averaged over the last
        :data:`SOLVED_WINDOW` steps, reached :data:`SOLVED_ACCURACY`; None if it never did."""
        accuracy = np.asarray(self.curves[variant]["accuracy"])
        if len(accuracy) < SOLVED_WINDOW:
            return None
        mean = np.convolve(accuracy, np.ones(SOLVED_WINDOW) / SOLVED_WINDOW, mode="valid")
        hits = np.flatnonzero(mean >= SOLVED_ACCURACY)
        return int(hits[0]) + SOLVED_WINDOW if len(hits) else None

    def final_loss(self, variant: str) -> float:
        """The mean loss of the last :data:`SOLVED_WINDOW` steps (NaN if it diverged)."""
        return float(np.mean(self.curves[variant]["loss"][-SOLVED_WINDOW:]))

    def final_accuracy(self, variant: str) -> float:
        """The mean token accuracy of the last :data:`SOLVED_WINDOW` steps."""
        return float(np.mean(self.curves[variant]["accuracy"][-SOLVED_WINDOW:]))


#: The loss of guessing uniformly among the digits.
CHANCE_LOSS = math.log(RACE_VOCAB)


def race_findings(result: RaceResult) -> list[str]:
    """What this run shows, one sentence per model and one comparing them, all read off its
    curves (the mean over the seeds, with each seed's range) and prefixed by the conditions it
    ran under."""
    cfg = result.config
    if result.steps_done == 0:
        return []
    warm = (f"a {cfg.warmup}-step warm-up" if cfg.warmup else "no warm-up")
    seeds = (f"seed {cfg.seed}" if cfg.seeds == 1 else
             f"{cfg.seeds} seeds, {cfg.seed} to {cfg.seed + cfg.seeds - 1}, averaged")
    notes = [f"In this run ({cfg.task}, {cfg.depth} blocks, learning rate {cfg.lr:g}, {warm}, "
             f"{result.steps_done} steps, {seeds}):"]
    reach = f"{SOLVED_ACCURACY:.0%} token accuracy (the mean of {SOLVED_WINDOW} steps)"
    for variant in cfg.entrants:
        loss, solved = result.final_loss(variant), result.solved_at(variant)
        if not math.isfinite(loss):
            notes.append(f"{variant} diverged: its loss became NaN or infinite.")
            continue
        if result.steps_done < SOLVED_WINDOW:
            line = f"{variant}: too few steps to average {SOLVED_WINDOW} of them"
        elif solved:
            line = f"{variant} reached {reach} at step {solved}"
        else:
            line = f"{variant} did not reach {reach}"
        line += (f"; over its last {SOLVED_WINDOW} steps the loss averaged {loss:.3g} and the "
                 f"accuracy {result.final_accuracy(variant):.0%}")
        if cfg.seeds > 1:
            finals = result.final_accuracies(variant)
            line += f" (seeds: {min(finals):.0%} to {max(finals):.0%})"
        guessing = f"guessing's (ln {RACE_VOCAB} = {CHANCE_LOSS:.2f})"
        if loss >= 2 * CHANCE_LOSS:
            line += (f"; that loss is far above {guessing}: the model makes confident wrong "
                     "predictions, worse than guessing")
        elif loss >= 0.95 * CHANCE_LOSS and result.final_accuracy(variant) < 2 / RACE_VOCAB:
            line += (f", no better than guessing (ln {RACE_VOCAB} = {CHANCE_LOSS:.2f}): it "
                     "learned nothing")
        elif loss >= CHANCE_LOSS:
            line += (f"; a loss above {guessing} with that accuracy means confident "
                     "mistakes")
        notes.append(line + ".")
    if set(COMPARED) <= set(cfg.entrants):
        post, pre = (result.solved_at(v) for v in COMPARED)
        if post and pre and post != pre:
            first = "pre-LN" if pre < post else "post-LN"
            gap = abs(post - pre)
            notes.append(f"{first} got there {gap} step{'s' * (gap > 1)} sooner.")
        elif post and pre:
            notes.append("Both got there at the same step.")
    if len(cfg.entrants) > 2 and result.steps_done >= SOLVED_WINDOW:
        notes.append(_ranking({v: result.final_accuracies(v) for v in cfg.entrants}))
    return notes


def _ranking(finals: dict[str, list[float]]) -> str:
    """The models by mean final accuracy, those that round to the same percentage named as a
    tie, and whether the leaders' seeds leave their order in doubt."""
    groups: dict[str, list[str]] = {}
    for model in sorted(finals, key=lambda v: -np.mean(finals[v])):
        groups.setdefault(f"{np.mean(finals[model]):.0%}", []).append(model)
    parts = [(f"{_joined(models)} tie at {value}" if len(models) > 1 else f"{models[0]} {value}")
             for value, models in groups.items()]
    text = "By final accuracy: " + "; ".join(parts) + "."
    seeds = len(next(iter(finals.values())))
    first = next(iter(groups.values()))
    if seeds == 1:
        return text + " One seed each: the order may be luck."
    if len(first) == 1 and len(groups) > 1:
        leader, runner = first[0], next(iter(list(groups.values())[1]))
        if min(finals[leader]) > max(finals[runner]):
            return text + f" {leader}'s worst seed beats {runner}'s best."
        return text + f" {leader}'s and {runner}'s seeds overlap: their order may be luck."
    return text


def _joined(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class Race(Chunked):
    """``config``'s entrants (post-LN and pre-LN unless told), each from ``config.seeds``
    seeds, trained on its task, advanced in chunks (:class:`lnviz.chunked.Chunked`): a piece is
    one step of the model behind, on one torch thread; ``result()`` gives what they learned so
    far as a :class:`RaceResult`. Building one is instant: the models are made on first use.
    """

    def __init__(self, config: RaceConfig) -> None:
        super().__init__()
        self.config = config
        self._runners: list[_Runner] = []

    @property
    def runners(self) -> list[_Runner]:
        with self._lock:
            if not self._runners:
                self._runners = [_Runner(self.config, entrant, self.config.seed + k)
                                 for entrant in self.config.entrants
                                 for k in range(self.config.seeds)]
            return self._runners

    @property
    def step(self) -> int:
        """Steps every model has taken."""
        return min(r.step for r in self.runners)

    def _finished(self) -> bool:
        return self.step >= self.config.steps

    def _work(self) -> None:
        min(self.runners, key=lambda r: r.step).train_step()

    def _working(self) -> AbstractContextManager[None]:
        return _one_thread()

    def advance(self, steps: int) -> None:
        """Up to ``steps`` more steps for each model (fewer at the end)."""
        with self._lock, _one_thread():
            target = min(self.step + steps, self.config.steps)
            while not self.stopped and self.step < target:
                min(self.runners, key=lambda r: r.step).train_step()

    def seed_curves(self, steps: int | None = None) -> dict[str, list[dict[str, list[float]]]]:
        """Each entrant's curves, one per seed (the first ``steps`` steps of each)."""
        return {entrant: [{"loss": r.loss[:steps], "accuracy": r.accuracy[:steps],
                           "weight norm": r.weight_norm[:steps], "stream": r.stream[:steps]}
                          for r in self.runners if r.entrant == entrant]
                for entrant in self.config.entrants}

    def curves(self, steps: int | None = None) -> dict[str, dict[str, list[float]]]:
        """Each entrant's curves, the mean over its seeds at every step they all took."""
        means = {}
        for entrant, runs in self.seed_curves(steps).items():
            common = min(len(r["loss"]) for r in runs)
            means[entrant] = {key: list(np.mean([r[key][:common] for r in runs], axis=0))
                              if common else [] for key in RACE_CURVES}
        return means

    def progress(self) -> RaceProgress:
        curves = self.curves()
        latest = ", ".join(f"{v} {c['accuracy'][-1]:.0%}" for v, c in curves.items()
                           if c["accuracy"])
        return RaceProgress(self.step / self.config.steps,
                            f"Step {self.step} of {self.config.steps}"
                            + (f" · token accuracy: {latest}" if latest else ""), curves)

    def result(self) -> RaceResult:
        with self._lock:
            steps = self.step
            return RaceResult(self.config, self.curves(steps), steps,
                              self.stopped and steps < self.config.steps, self.seconds,
                              self.seed_curves(steps) if self.config.seeds > 1 else {})


# --- Code for the learner -----------------------------------------------------------------------


def block_snippet(d_model: int, activation: str = "GELU") -> str:
    """PyTorch code for the two placements of LayerNorm in a block, with nn.LayerNorm."""
    act = {"GELU": "F.gelu", "ReLU": "F.relu"}[activation]
    return f'''import math
import torch
import torch.nn.functional as F
from torch import nn

d = {d_model}
ln1, ln2 = nn.LayerNorm(d), nn.LayerNorm(d)  # γ = 1, β = 0 at initialisation
ln_f = nn.LayerNorm(d)  # pre-LN's final LayerNorm, after the last block
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


def pre_ln_stack(x, depth):  # one block repeated, for brevity; the head reads ln_f(x)
    for _ in range(depth):
        x = pre_ln(x)
    return ln_f(x)
'''
