r"""Where LayerNorm sits: its ``normalized_shape`` on 2-D, 3-D and 4-D tensors, and its place in a
transformer block.

**Shapes.** LayerNorm takes μ and σ² over the *trailing* dims named by ``normalized_shape``; every
leading index gets its own pair. On ``(batch, seq, features)`` the last dim gives one μ per token,
the last two one μ per sequence; on ``(batch, channels, H, W)`` the last three give one μ per
image. γ and β have the shape ``normalized_shape`` and μ, σ² the input's shape with the trailing
dims kept as size 1. The batch dim stays out only if it is in front: the two-word notes lay their
words out
as ``(words, batch, embedding)`` and normalizes over ``dims=(-2, -1)``, which pools the batch as
soon as it holds more than one sample (:func:`notes_batch_of_two`).

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

:func:`lnviz.analysis.depth_profiles` follows the forward pass,
:func:`lnviz.analysis.gradient_norms` the gradients of each block at initialization (a loss
through the final LayerNorm and a linear head), and :class:`lnviz.train.Race` trains a post-LN
and a pre-LN model side by side on a synthetic task (reversing a sequence of digits), in chunks
that the app can stop; this lesson says what their numbers show (:func:`depth_findings`,
:func:`gradient_findings`, :func:`race_findings`). The blocks (:func:`lnviz.nn.block`: one head of
attention, a feed-forward network of 4·d hidden units) are written out with plain tensor
operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lnviz.analysis import COMPARED, VARIANTS, DepthProfile, DepthSweep
from lnviz.batch import Batch, NormSpec, group_ids, normalize, to_grid
from lnviz.data import get_preset, image_batch, random_batch
from lnviz.lessons.common import Answer
from lnviz.norms import layer_norm
from lnviz.snippets import Code, snippet
from lnviz.terms import Layout, NormKind, listed
from lnviz.train import CHANCE_LOSS, RACE_VOCAB, SOLVED_ACCURACY, SOLVED_WINDOW, RaceResult

__all__ = [
    "NOTES_SAMPLE",
    "SECOND_SAMPLE",
    "SHAPE_EXAMPLES",
    "SHARES_OPTIONS",
    "NotesBatchOfTwo",
    "ShapeView",
    "batch_note",
    "batch_of_two_caption",
    "batch_of_two_snippet",
    "block_snippet",
    "dependence_table",
    "depth_findings",
    "gradient_findings",
    "layer_norm_shapes",
    "layer_norm_snippet",
    "notes_batch_of_two",
    "race_findings",
    "reshape_table",
    "shape_example",
    "shapes_try_this",
    "shares_answer",
    "twin_setting",
]


# --- normalized_shape on tensors of different rank ---------------------------------------------

#: The two-word notes' one sample, as it types it: ``torch.Tensor([[[0.2, 0.1, 0.3], [0.5, 0.1,
# 0.1]]])``
#: is (batch, words, embedding) = (1, 2, 3), two words of three values.
NOTES_SAMPLE = ((0.2, 0.1, 0.3), (0.5, 0.1, 0.1))
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
        return Batch(get_preset("two_words").values, Layout.NLC, row_labels=_word_rows(2, 1))
    if name == BATCH_OF_TWO:
        return Batch(notes_batch_of_two().permuted, Layout.NLC, row_labels=_word_rows(2, 2))
    if name == "2-D":
        return Batch(random_batch((4, 6), feature_spread=0.5, seed=seed), Layout.NC)
    if name == "3-D":
        preset = get_preset("padded_tokens")
        return Batch(preset.values, Layout.NLC, row_labels=preset.labels)
    if name == "4-D":
        return Batch(image_batch(2, 3, 4, 4, seed=seed), Layout.NCHW)
    raise ValueError(f"example must be one of {list(SHAPE_EXAMPLES)}, got {name!r}")


def batch_note(example: str, dims: int) -> str | None:
    """What normalizing :data:`SHAPE_EXAMPLES` ``example`` over its last ``dims`` dims does to
    the batch, when those dims include it (None when the batch keeps out of the statistics)."""
    names = SHAPE_EXAMPLES[example]
    if "batch" not in names[-dims:]:
        return None
    shape = shape_example(example).values.shape
    size = shape[names.index("batch")]
    pooled = (f"The last {dims} dims, ({', '.join(names[-dims:])}), include the batch dim: "
              "every μ and σ² is taken across the samples of the batch.")
    # γ and β take normalized_shape too: a layer built so holds the batch size in its weights
    fixed = (f" γ and β take that shape too, {tuple(shape[-dims:])}, batch dim included, so "
             f"nn.LayerNorm({tuple(shape[-dims:])}) accepts only batches of {size}: any other "
             "batch size is an error."
             + (" That is the two-word notes' slip: their inputs.size()[-2:] gives γ and β the "
                f"batch dim; they belong to the features alone, shape ({shape[-1]},)."
                if example in ("two words", BATCH_OF_TWO) else ""))
    if size == 1:
        return (pooled + " Here the batch holds one sample, so nothing is mixed and the result "
                "equals the last dim's." + fixed + " What a second sample does is the "
                f"question of “{BATCH_OF_TWO}” over the same dims.")
    return (pooled + f" With {size} samples, each sample's output depends on the others: this "
            "is no longer a per-sample norm." + fixed)


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
             f"σ² for each index of ({', '.join(names[:-dims])}): {view.groups} "
             f"(μ, σ²) pair{'s' if view.groups != 1 else ''}, each over {view.group_size} "
             f"value{'s' if view.group_size != 1 else ''}. ")
    note = batch_note(example, dims) or (
        "The batch dim is in front of them, so each sample gets statistics of its own and no "
        "other sample enters them.")
    # one sample over dims that pool the batch: "no", there is no other sample to depend on
    # (what a second one would do is the "two words ×2" question)
    return Answer(SHARES_OPTIONS[0 if mixed else 1], where + note)


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
    spec = NormSpec(NormKind.LAYER, dims=dims, eps=eps)
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
    """PyTorch code that builds the same LayerNorm and shows its shapes
    (``lnviz/snippets/shapes.py``)."""
    return snippet("shapes", shape=tuple(view.shape),
                   normalized_shape=tuple(view.normalized_shape),
                   notes={"params": str(list(view.normalized_shape)),
                          "stats": str(list(view.stats_shape)), "groups": str(view.groups),
                          "size": str(view.group_size)})


# --- The two words with a batch of two
# ---------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NotesBatchOfTwo:
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
        notes_dims: LayerNorm over the last two dims (the notes' ``dims=(-2, -1)``): one μ per word
            position, shared by both samples.
        alone: {dims: sample 0's two words normalized in a batch of their own, (words, 3)}.
        in_batch: {dims: sample 0's two words normalized inside the batch of two, (words, 3)}.
        dependence: {dims: max |in_batch − alone|}, how much sample 0's output moves because
            sample 1 is in the batch.
        notes_steps: the notes' own step-by-step lines on ``permuted``, (words, batch, embedding):
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
    notes_dims: np.ndarray
    alone: dict[int, np.ndarray]
    in_batch: dict[int, np.ndarray]
    dependence: dict[int, float]
    notes_steps: np.ndarray


def _ln_last(x: torch.Tensor, dims: int) -> torch.Tensor:
    return layer_norm(x, x.shape[-dims:]).output


def notes_batch_of_two(second: tuple[tuple[float, ...], ...] = SECOND_SAMPLE
                          ) -> NotesBatchOfTwo:
    """The two-word notes' reshape and its ``dims=(-2, -1)`` on a batch of two samples (see
    :class:`NotesBatchOfTwo`). With its batch of one, ``reshape`` and ``permute`` give the same
    tensor and the batch dim has size 1, so neither slip shows; with two, both do."""
    inputs = torch.tensor([NOTES_SAMPLE, second], dtype=torch.float64)  # (batch, words, emb)
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
    notes_steps = (permuted - mu) / torch.sqrt(sigma2 + 1e-5)
    return NotesBatchOfTwo(
        inputs=inputs.numpy(),
        reshaped=reshaped.numpy(),
        permuted=permuted.contiguous().numpy(),
        reshaped_source=flat,
        permuted_source=[(b, w) for w in range(words) for b in range(batch)],
        per_word=outputs[1].numpy(),
        notes_dims=outputs[2].numpy(),
        alone=alone,
        in_batch=in_batch,
        dependence={dims: float(np.abs(in_batch[dims] - alone[dims]).max()) for dims in (1, 2)},
        notes_steps=notes_steps.numpy(),
    )


def reshape_table(view: NotesBatchOfTwo) -> pd.DataFrame:
    """The two-word notes' ``reshape`` beside the ``permute`` it needed: for each (word, batch)
    position, which word of which sample it holds and its values."""
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


def dependence_table(view: NotesBatchOfTwo) -> pd.DataFrame:
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


def batch_of_two_caption(view: NotesBatchOfTwo) -> str:
    """What the batch of two shows, with its numbers: how far sample 0 moves over each choice
    of dims, and the notes' own step-by-step cells on the same batch."""
    return (
        f"Over the last dim, sample 0's output moves by {view.dependence[1]:.4g} when sample 1 "
        f"joins it; over the notes' last two dims, by up to {view.dependence[2]:.4f}. With a "
        "batch of one the two choices agree only because the batch dim has size 1. The notes' "
        "own step-by-step cells slip a third time on a batch of two: μ over the last dim, but "
        "σ² summed over the last two dims and divided by m = 3, the last dim's size, although "
        "the sum now has 6 terms: sample 0's first word comes out as "
        f"{_values(view.notes_steps[0, 0])} instead of {_values(view.alone[1][0])}.")


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
    slips (``lnviz/snippets/batch_of_two.py``)."""
    return snippet("batch_of_two", notes_sample=[list(w) for w in NOTES_SAMPLE],
                   second_sample=[list(w) for w in second])


# --- A stack of transformer blocks -------------------------------------------------------------


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
                     "predictions, worse than guessing in loss")
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
    parts = [(f"{listed(models)} tie at {value}" if len(models) > 1 else f"{models[0]} {value}")
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


# --- Code for the learner -----------------------------------------------------------------------


def block_snippet(d_model: int, activation: str = "GELU") -> str:
    """PyTorch code for the two placements of LayerNorm in a block, with nn.LayerNorm
    (``lnviz/snippets/block.py``)."""
    act = {"GELU": "F.gelu", "ReLU": "F.relu"}[activation]
    return snippet("block", d=d_model, activation=Code(act))
