"""BatchNorm in a real network: EfficientNet-Lite0's 49 BatchNorms on photographs.

The failures learners meet in real image networks, each measured on the page's pictures (seven
photographs that packages ship, four crops of each: :func:`photo_pool`) and on the learner's
own:

1. train mode on a batch of one (:func:`alone`): every BatchNorm then normalizes each channel
   over this one picture's positions, and the classifier's 1,280 inputs of different pictures
   come out nearly parallel: the class is lost;
2. batch-mates (:func:`batch_mates`): how the picture's class comes back as the batch grows,
   over several draws of mates, and what mates cut from the picture itself do instead;
3. the batch's statistics against the running ones, layer by layer (:func:`layer_gaps`);
4. folding each BatchNorm into the convolution before it (:func:`fold`);
5. shifted pictures, and the running statistics re-estimated on them (:func:`shifted`;
   Schneider et al. 2020);
6. a per-sample norm in each BatchNorm's place with the same γ and β (:func:`swapped`).

Every sentence a learner reads is built here from those numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.capture import Replacement
from lnviz.data.files import load_image
from lnviz.data.photos import PHOTOS, photo, photos
from lnviz.lessons.common import Answer, Paper, short
from lnviz.models.efficientnet import (
    INPUT_MEAN,
    INPUT_STD,
    EfficientNetLite0,
    EfficientNetLite0Config,
    batch_norm_names,
    preprocess,
)
from lnviz.norms import batch_norm, group_norm, layer_norm
from lnviz.terms import listed

__all__ = [
    "ALONE_OPTIONS",
    "BATCH_SIZES",
    "BLOCK_RUNS",
    "CROPS",
    "DECODE_SIDE",
    "DRAWS",
    "FOLD_OPTIONS",
    "GAP_BATCH",
    "GAP_OPTIONS",
    "IMAGE_RUNS",
    "MATES_OPTIONS",
    "REESTIMATE_OPTIONS",
    "SCHNEIDER",
    "SHIFTS",
    "SWAPS",
    "SWAP_OPTIONS",
    "Alone",
    "Fold",
    "LayerGaps",
    "Mates",
    "Pool",
    "Shifted",
    "Swapped",
    "alone",
    "alone_answer",
    "batch_mates",
    "credits",
    "first_size_back",
    "fold",
    "fold_answer",
    "gap_batch",
    "gaps_answer",
    "layer_gaps",
    "mates_answer",
    "own_crops",
    "percent",
    "photo_pool",
    "prepared",
    "prepared_photo",
    "prepared_upload",
    "shift",
    "shifted",
    "shifted_answer",
    "shown_picture",
    "source_of",
    "swap_answer",
    "swap_table",
    "swapped",
]

#: The queue's unit for this page's runs (lnviz.ui.jobs): pictures through the network.
IMAGE_RUNS = "EfficientNet image-runs"
#: The same count for part 3 (:func:`layer_gaps`), paced apart: its runs start at their norm's
#: block, a third of a whole run's time on average, so a pace measured on one would misjudge
#: the other about three times over.
BLOCK_RUNS = "EfficientNet image-runs from a norm's block"
#: Crops of each photo in the pool, besides the whole photo.
CROPS = 4
#: The batch sizes part 2 tries, and how many draws of batch-mates at each.
BATCH_SIZES = (1, 2, 4, 8, 16, 31)
DRAWS = 3

SCHNEIDER = Paper("Schneider et al.", "Schneider et al.", "Improving robustness against "
                  "common corruptions by covariate shift adaptation", "2006.16971",
                  "NeurIPS 2020")


def _pooled(pictures: Sequence[np.ndarray], names: Sequence[str], seed: int
            ) -> tuple[torch.Tensor, tuple[str, ...], tuple[str, ...]]:
    """Each picture and :data:`CROPS` square crops of it (half the shorter side to all of
    it, every other one mirrored), preprocessed: (images, the photo each came from, a
    label)."""
    generator = np.random.default_rng(seed)
    kept, sources, labels = [], [], []
    for picture, name in zip(pictures, names, strict=True):
        kept.append(picture)
        sources.append(name)
        labels.append(name)
        height, width = picture.shape[:2]
        short_side = min(height, width)
        for k in range(CROPS):
            side = int(generator.integers(max(1, short_side // 2), short_side + 1))
            top = int(generator.integers(0, height - side + 1))
            left = int(generator.integers(0, width - side + 1))
            crop = picture[top:top + side, left:left + side]
            kept.append(crop[:, ::-1] if k % 2 else crop)  # preprocess copies each
            sources.append(name)
            labels.append(f"{name}, crop {k + 1}")
    return preprocess(kept), tuple(sources), tuple(labels)


@dataclass(frozen=True, eq=False)
class Pool:
    """The page's pictures: each photo of :data:`lnviz.data.photos.PHOTOS` and
    :data:`CROPS` crops of it, preprocessed, (N, 3, 224, 224); ``sources[i]`` names the photo
    image ``i`` came from."""

    images: torch.Tensor
    sources: tuple[str, ...]
    labels: tuple[str, ...]

    def others(self, source: str | None) -> np.ndarray:
        """The indices of the pictures that do not come from ``source``."""
        return np.array([i for i, s in enumerate(self.sources) if s != source])


def photo_pool() -> Pool:
    """:class:`Pool` of the seven photos (the same for every learner: built once per server
    with ``lnviz.ui.cache.shared``)."""
    pictures = photos()
    return Pool(*_pooled(list(pictures.values()), list(pictures), seed=0))


#: An upload's shorter side is decoded at no more than twice this (and no less): the network
#: reads 224 × 224 of 87.5% of it.
DECODE_SIDE = 512


def prepared(picture: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """A picture as the page keeps it: preprocessed (1, 3, 224, 224), and :data:`CROPS` crops
    of it (:func:`own_crops`); the picture itself is not kept."""
    return preprocess(picture), own_crops(picture)


def prepared_photo(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`prepared` of the page's photo ``name``."""
    return prepared(photo(name))


def prepared_upload(data: bytes, *, max_bytes: int, max_pixels: int
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`prepared` of an uploaded PNG or JPEG, decoded by
    :func:`lnviz.data.files.load_image` within ``max_bytes`` and ``max_pixels``."""
    return prepared(load_image(data, max_bytes=max_bytes, max_pixels=max_pixels,
                               max_side=DECODE_SIDE))


def shown_picture(image: torch.Tensor) -> np.ndarray:
    """A preprocessed picture (1, 3, H, W) back as the (H, W, 3) uint8 pixels the network
    read."""
    pixels = (image[0] * INPUT_STD + INPUT_MEAN).round().clamp(0, 255)
    return pixels.to(torch.uint8).permute(1, 2, 0).numpy()


def own_crops(picture: np.ndarray) -> torch.Tensor:
    """:data:`CROPS` crops of the learner's picture, as the pool's are cut (4, 3, 224, 224)."""
    images, _, _ = _pooled([picture], ["yours"], seed=1)
    return images[1:]


def percent(p: float) -> str:
    """A probability as a percentage with two significant digits ("0.12%", "41%"), so that
    two numbers a sentence compares are printed alike."""
    return f"{100 * p:.2g}%"


def source_of(pool: Pool, image: torch.Tensor) -> str | None:
    """The pool's photo that ``image`` (1, 3, 224, 224) is, preprocessed (a learner's upload
    of one of the page's photos), or None."""
    for i, label in enumerate(pool.labels):
        if label == pool.sources[i] and torch.equal(pool.images[i], image[0]):
            return label
    return None


# --- 1. A batch of one --------------------------------------------------------------------------

#: How sure train mode is, alone in its batch, of the picture's eval-mode class.
ALONE_OPTIONS = ("about as sure as in eval mode", "less sure, but the same top class",
                 "the class is lost: another one comes first")


@dataclass(frozen=True)
class Alone:
    """One picture in eval mode and, alone in its batch, in train mode.

    Attributes:
        eval_top, train_top: the five most likely classes in each mode.
        label: the eval-mode top class; eval_p, train_p: its probability in each mode.
        same_top: whether train mode puts the same class first.
        cos_eval, cos_train: the median cosine between this picture's 1,280 classifier inputs
            and each photo's of the pool (each run alone in train mode).
    """

    eval_top: list[tuple[str, float]]
    train_top: list[tuple[str, float]]
    label: str
    eval_p: float
    train_p: float
    same_top: bool
    cos_eval: float
    cos_train: float


def alone(model: EfficientNetLite0, image: torch.Tensor, pool: Pool) -> Alone:
    """:class:`Alone` for ``image`` (1, 3, 224, 224)."""
    seen = model.run(image, record=False)
    trained = model.run(image, training=True, record=False)
    label = int(seen.logits[0].argmax())
    whole = [i for i, name in enumerate(pool.labels) if name == pool.sources[i]]
    others_eval = model.run(pool.images[whole], record=False).features
    others_train = torch.cat([model.run(pool.images[i:i + 1], training=True,
                                        record=False).features for i in whole])

    def median_cos(one: torch.Tensor, many: torch.Tensor) -> float:
        cos = F.cosine_similarity(one, many, dim=-1)
        return float(cos[cos < 1 - 1e-6].median()) if (cos < 1 - 1e-6).any() else 1.0

    return Alone(seen.top(5), trained.top(5), model.class_names[label],
                 float(seen.probabilities[0, label]), float(trained.probabilities[0, label]),
                 int(trained.logits[0].argmax()) == label,
                 median_cos(seen.features, others_eval),
                 median_cos(trained.features, others_train))


def alone_answer(a: Alone) -> Answer:
    """Which of :data:`ALONE_OPTIONS` the two runs bear out, and why a batch of one does it."""
    option = ALONE_OPTIONS[2 if not a.same_top else 0 if a.train_p >= a.eval_p / 2 else 1]
    reason = (
        f"In eval mode the network gives “{a.label}” {a.eval_p:.1%}; in train mode, alone "
        f"in its batch, {a.train_p:.2%} (1 in 1,000 would be a uniform guess), and its first "
        f"class is “{a.train_top[0][0]}” at {a.train_top[0][1]:.2%}. In train mode each "
        "BatchNorm normalizes a channel with the batch's own mean and variance, over every "
        "picture and position in the batch. With one picture that is over its positions "
        "alone, so every channel of every layer comes out with the same mean, β, whatever the "
        "picture, and the same spread, |γ|, wherever the channel varies well beyond "
        f"ε = {EfficientNetLite0Config.eps:g}: what made this picture's channels differ from "
        "another's is divided out. "
        "The classifier reads 1,280 averages of the last layer; for two different "
        f"photos they point the same way (median cosine {a.cos_train:.2f}, against "
        f"{a.cos_eval:.2f} in eval mode). This is what a forgotten model.eval() does to a "
        "single prediction.")
    return Answer(option, reason)


# --- 2. Batch-mates -----------------------------------------------------------------------------

#: At what batch size train mode gives back the eval-mode top class (most draws).
MATES_OPTIONS = ("with 2 to 4 pictures", "with 8 to 16", "only with 31, or not even then")


@dataclass(frozen=True)
class Mates:
    """The picture in train mode with batch-mates from the pool's other photos.

    Attributes:
        sizes: the batch sizes (the picture included).
        p: the probability of its eval-mode class, (DRAWS, len(sizes)): one row per draw of
            mates.
        top: whether that class comes first, (DRAWS, len(sizes)).
        eval_p: its probability in eval mode.
        own_p: in a batch of itself and :data:`CROPS` crops of itself.
        other_p: in batches of the same size with mates from other photos, one per draw.
        mates: how many pictures the mates were drawn from.
    """

    sizes: tuple[int, ...]
    p: np.ndarray
    top: np.ndarray
    eval_p: float
    own_p: float
    other_p: np.ndarray
    mates: int


#: Below this probability in eval mode, the picture's top class is itself nearly a uniform
#: guess (1 in 1,000), and part 2 says so.
NEAR_UNIFORM = 0.005


def batch_mates(model: EfficientNetLite0, image: torch.Tensor, crops: torch.Tensor,
                pool: Pool, source: str | None) -> Mates:
    """:class:`Mates` for ``image`` (1, 3, 224, 224), its mates drawn from the pool's photos
    other than ``source`` (all of them for the learner's own picture), and ``crops`` of the
    picture itself for the batch of its own."""
    seen = model.run(image, record=False)
    label = int(seen.logits[0].argmax())
    others = pool.others(source)
    sizes = tuple(s for s in BATCH_SIZES if s <= len(others) + 1)

    def with_mates(mates: torch.Tensor) -> torch.Tensor:
        """The picture's probabilities in train mode, batched with ``mates``."""
        return model.run(torch.cat([image, mates]), training=True,
                         record=False).probabilities[0]

    p = np.zeros((DRAWS, len(sizes)))
    top = np.zeros((DRAWS, len(sizes)), dtype=bool)
    other_p = np.zeros(DRAWS)
    for draw in range(DRAWS):
        order = np.random.default_rng(draw).permutation(others)
        for j, size in enumerate(sizes):
            q = with_mates(pool.images[order[:size - 1]])
            p[draw, j], top[draw, j] = float(q[label]), int(q.argmax()) == label
        other_p[draw] = float(with_mates(pool.images[order[:len(crops)]])[label])
    return Mates(sizes, p, top, float(seen.probabilities[0, label]),
                 float(with_mates(crops)[label]), other_p, len(others))


def first_size_back(m: Mates) -> int | None:
    """The smallest batch size at which most draws put the eval-mode class first."""
    for j, size in enumerate(m.sizes):
        if 2 * m.top[:, j].sum() > len(m.top):
            return size
    return None


def mates_answer(m: Mates, label: str) -> Answer:
    """Which of :data:`MATES_OPTIONS` the draws bear out, the spread between draws, and what
    mates cut from the picture itself do."""
    back = first_size_back(m)
    option = MATES_OPTIONS[0 if back is not None and back <= 4 else
                           1 if back is not None and back <= 16 else 2]
    last = m.p[:, -1]
    when = (f"“{label}” comes first again in most draws from a batch of {back}"
            if back is not None else
            f"“{label}” does not come first in most draws at any size up to {m.sizes[-1]}")
    printed = [percent(v) for v in last]
    one_batch = m.sizes[-1] == m.mates + 1
    at_last = (f"with all {m.mates} others as mates (one batch, whatever the draw), "
               f"{printed[0]}" if one_batch else
               f"{printed[0]}" if len(set(printed)) == 1 else listed(printed))
    near_uniform = ("" if m.eval_p >= NEAR_UNIFORM else
                    f" (In eval mode “{label}” itself has only {percent(m.eval_p)}, close to a "
                    "uniform guess's 0.1%: there is little to bring back.)")
    reason = (
        f"Over {DRAWS} draws of batch-mates, {when}. At {m.sizes[-1]} pictures its probability "
        f"is {at_last}, against {percent(m.eval_p)} in eval mode.{near_uniform} The "
        "batch's statistics stand in for the running ones only as well as the batch stands "
        "in for the training data, and these pictures are a few scenes, not ImageNet's "
        "thousand classes. The same picture scores differently with different mates (the "
        "band): its prediction depends on who else is in the batch. "
        + (f"Mates cut from the picture itself do worse than any draw of others: in a batch "
           f"of {1 + CROPS} with {CROPS} crops of itself it gets {percent(m.own_p)}, against "
           f"{listed([percent(v) for v in m.other_p])} with mates from other photos. In the "
           "deep layers a channel answers to what is in the picture; when every picture of "
           "the batch shows the same thing, the batch mean holds that answer, and "
           "subtracting it removes the evidence."
           if percent(m.own_p) != percent(m.other_p.min()) and m.own_p < m.other_p.min() else
           f"With {CROPS} crops of itself as mates it gets {percent(m.own_p)}, against "
           f"{listed([percent(v) for v in m.other_p])} with mates from other photos."))
    return Answer(option, reason)


# --- 3. Batch statistics against the running ones -----------------------------------------------

GAP_OPTIONS = ("in the first third of the 49", "in the middle third", "in the last third")
#: Part 3's batch: each photo and its first crop.
GAP_BATCH = 14


@dataclass(frozen=True)
class LayerGaps:
    """One BatchNorm at a time in train mode (the batch's own statistics), the other 48 in
    evaluation mode, on a batch of the pool's pictures (:data:`GAP_BATCH`).

    Attributes:
        names: the BatchNorms, in forward order.
        gap: per BatchNorm, the median over its channels of |log(batch variance / running
            variance)|: the batch's statistics against the running ones, as a factor e^gap
            (channels whose running variance is 0, dead filters, left out).
        cost: per BatchNorm, the mean KL divergence (nats) of the pictures' predictions from
            their eval-mode ones when that BatchNorm alone uses the batch's statistics.
        pictures: the batch's size.
    """

    names: list[str]
    gap: np.ndarray
    cost: np.ndarray
    pictures: int


def gap_batch(pool: Pool) -> torch.Tensor:
    """Part 3's batch: each photo of the pool and its first crop."""
    chosen = [i for i, label in enumerate(pool.labels)
              if label == pool.sources[i] or label.endswith(", crop 1")]
    return pool.images[chosen][:GAP_BATCH]


def layer_gaps(model: EfficientNetLite0, pool: Pool) -> LayerGaps:
    """:class:`LayerGaps` on :func:`gap_batch`: 49 runs of the batch, each from its norm's
    block on (:meth:`~lnviz.models.efficientnet.EfficientNetLite0.each_replaced`)."""
    images = gap_batch(pool)
    p = model.run(images, record=False).logits.log_softmax(-1)
    names, seen = batch_norm_names(), {}

    def own_statistics(name: str) -> Replacement:
        bn = model.module.get_submodule(name)

        def normalize(x: torch.Tensor) -> torch.Tensor:
            result = batch_norm(x, None, None, bn.weight, bn.bias, True, eps=bn.eps,
                                impl="fast")
            live = bn.running_var > 0
            ratio = (result.var.flatten() + bn.eps) / (bn.running_var + bn.eps)
            seen[name] = float(ratio.log().abs()[live].median())
            return result.output

        return normalize

    logits = model.each_replaced(images, {name: own_statistics(name) for name in names})
    costs = [float((p.exp() * (p - logits[name].log_softmax(-1))).sum(-1).mean())
             for name in names]
    return LayerGaps(names, np.array([seen[name] for name in names]), np.array(costs),
                     len(images))


def gaps_answer(g: LayerGaps) -> Answer:
    """Where the one BatchNorm sits that, alone in train mode, moves the predictions most (its
    third of the 49), with the next ones, each third's median cost (most cost little wherever
    they sit: a mean would be the few costly ones' alone, the 35th review) and whether the
    costliest is also the one whose statistics differ most."""
    thirds = np.array_split(np.arange(len(g.names)), 3)
    worst = int(np.argmax(g.cost))
    option = GAP_OPTIONS[next(k for k, t in enumerate(thirds) if worst in t)]
    order = np.argsort(g.cost)[::-1]
    medians = [short(float(np.median(g.cost[t]))) for t in thirds]
    widest = int(np.argmax(g.gap))
    reason = (
        f"Alone in train mode on this batch of {g.pictures}, {g.names[worst]} moves the "
        f"predictions most: a mean KL divergence of {short(float(g.cost[worst]))} nats from "
        "their eval-mode ones; next come "
        + listed([f"{g.names[k]} ({short(float(g.cost[k]))})" for k in order[1:3]])
        + f". Most BatchNorms cost far less wherever they sit: the median over each third of "
          f"the 49 (first, middle, last) is {listed(medians)} nats. "
        + (f"{g.names[worst]} is also the one whose batch variance is furthest from its "
           f"running one (a median factor of ×{np.exp(g.gap[worst]):.2f} over its channels): "
           "this batch of a few scenes differs from ImageNet's photos most in what that layer "
           "answers to." if widest == worst else
           f"Its batch variance is ×{np.exp(g.gap[worst]):.2f} its running one (the median "
           f"over its channels), while the furthest, {g.names[widest]}'s, is "
           f"×{np.exp(g.gap[widest]):.2f}: a layer's cost depends on how the layers after it "
           "carry its error to the class scores, not only on the error's size.")
        + (" The classifier reads the last layer's channels, averaged, directly."
           if option == GAP_OPTIONS[2] else "")
        + " These are one batch's numbers; another batch of pictures gives others.")
    return Answer(option, reason)


# --- 4. Folding ---------------------------------------------------------------------------------

FOLD_OPTIONS = ("not at all: bit for bit", "by float rounding only (under 0.001)",
                "visibly (0.001 or more)")


@dataclass(frozen=True)
class Fold:
    """The network with each BatchNorm folded into its convolution, against the original, on
    the pool (evaluation mode).

    Attributes:
        max_change: the largest |logit change|; largest: the largest |logit|.
        same_top: how many pictures keep their top class (of ``pictures``).
        ms, folded_ms: a batch of :data:`TIMED_BATCH`, the median of :data:`TIMED` runs each
            (measured now).
        parameters, folded_parameters: the networks' parameter counts.
        buffers: the running means and variances the folded network no longer keeps.
    """

    max_change: float
    largest: float
    same_top: int
    pictures: int
    ms: float
    folded_ms: float
    parameters: int
    folded_parameters: int
    buffers: int


#: Runs of each network the timing takes the median of, after one that sets up the kernels ...
TIMED = 5
#: ... each a batch of the pool's first this many pictures.
TIMED_BATCH = 8


def _median_ms(forward: Callable[[], object]) -> float:
    forward()  # the first run sets up the kernels
    times = []
    for _ in range(TIMED):
        start = time.perf_counter()
        forward()
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


@torch.no_grad()
def fold(model: EfficientNetLite0, pool: Pool) -> Fold:
    """:class:`Fold` on the pool, timed on its first :data:`TIMED_BATCH` pictures."""
    folded = model.folded()
    logits = model.run(pool.images, record=False).logits
    folded_logits = folded(pool.images)
    batch = pool.images[:TIMED_BATCH]
    ms = _median_ms(lambda: model.module(batch))
    folded_ms = _median_ms(lambda: folded(batch))
    buffers = sum(2 * model.module.get_submodule(n).num_features for n in batch_norm_names())
    return Fold(float((folded_logits - logits).abs().max()), float(logits.abs().max()),
                int((folded_logits.argmax(1) == logits.argmax(1)).sum()), len(logits), ms,
                folded_ms, sum(p.numel() for p in model.module.parameters()),
                sum(p.numel() for p in folded.parameters()), buffers)


def fold_answer(f: Fold) -> Answer:
    option = FOLD_OPTIONS[0 if f.max_change == 0 else 1 if f.max_change < 1e-3 else 2]
    saved = f.parameters - f.folded_parameters
    reason = (
        f"The largest logit change over the {f.pictures} pictures is {short(f.max_change)}, "
        f"on logits as large as {short(f.largest)}; {f.same_top} of {f.pictures} keep their top "
        "class. In evaluation mode a BatchNorm is a fixed multiply and add per channel, "
        "γ(x − μ)/√(σ² + ε) + β, and the convolution before it is linear: the two are one "
        "convolution with weights W·γ/√(σ² + ε) and a bias β − γμ/√(σ² + ε). Only the order of "
        "the float arithmetic changes, so the logits move by rounding. The folded network has "
        f"{saved:,} fewer parameters ({f.parameters:,} → {f.folded_parameters:,}: each "
        f"channel's γ and β become one bias) and no {f.buffers:,} running statistics; here a "
        f"batch of {TIMED_BATCH} took {f.ms:.0f} ms with the BatchNorms and "
        f"{f.folded_ms:.0f} ms folded (measured now, on this server: times vary from run to "
        "run). Folding needs the statistics fixed: in train mode they come from each batch "
        "and cannot be folded.")
    return Answer(option, reason)


# --- 5. Shifted pictures ------------------------------------------------------------------------


def _darker(pixels: torch.Tensor) -> torch.Tensor:
    return pixels * 0.4


def _flatter(pixels: torch.Tensor) -> torch.Tensor:
    mean = pixels.mean(dim=(1, 2, 3), keepdim=True)
    return mean + (pixels - mean) * 0.3


def _blurred(pixels: torch.Tensor) -> torch.Tensor:
    taps = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0]) / 16
    kernel = (taps[:, None] * taps[None, :]).expand(3, 1, 5, 5)
    for _ in range(3):  # three passes of the 5-tap binomial: σ = √3 ≈ 1.7 pixels
        pixels = F.conv2d(F.pad(pixels, (2, 2, 2, 2), mode="replicate"), kernel, groups=3)
    return pixels


#: The shifts part 5 offers, applied to the pixels (0–255) of the preprocessed pictures.
SHIFTS: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "darker (pixels × 0.4)": ("darkened", _darker),
    "lower contrast (× 0.3 around each picture's mean)": ("flattened", _flatter),
    "blurred (σ ≈ 1.7 pixels)": ("blurred", _blurred),
}


def shift(images: torch.Tensor, how: str) -> torch.Tensor:
    """``images`` (preprocessed) shifted as :data:`SHIFTS` says, back in the network's
    scale."""
    pixels = images * INPUT_STD + INPUT_MEAN
    return (SHIFTS[how][1](pixels).clamp(0, 255) - INPUT_MEAN) / INPUT_STD


REESTIMATE_OPTIONS = ("re-estimating the first BatchNorm only", "re-estimating all 49",
                      "neither: both do worse than the running statistics")


@dataclass(frozen=True)
class Shifted:
    """The pool shifted (:data:`SHIFTS`), and how many pictures keep their clean eval-mode top
    class: with the running statistics; with the first BatchNorm's, or all 49, re-estimated on
    the shifted pool (the mean and variance of each BatchNorm's input in train mode); and,
    as a yardstick, with all 49 re-estimated on the clean pool."""

    how: str
    pictures: int
    kept: int
    kept_first: int
    kept_all: int
    kept_clean_all: int


def _with_statistics(model: EfficientNetLite0,
                     statistics: dict[str, tuple[torch.Tensor, torch.Tensor]]
                     ) -> dict[str, Replacement]:
    """Replacements computing each named BatchNorm in evaluation mode with other running
    statistics: its own γ, β and ε."""
    def norm(name: str, mean: torch.Tensor, var: torch.Tensor) -> Replacement:
        bn = model.module.get_submodule(name)
        return lambda x: batch_norm(x, mean, var, bn.weight, bn.bias, False, eps=bn.eps,
                                    impl="fast").output
    return {name: norm(name, mean, var) for name, (mean, var) in statistics.items()}


def shifted(model: EfficientNetLite0, pool: Pool, how: str) -> Shifted:
    """:class:`Shifted` for the shift ``how``."""
    clean = model.run(pool.images, record=False).logits.argmax(1)
    images = shift(pool.images, how)
    stats = model.batch_statistics(images)
    first = batch_norm_names()[0]

    def kept(replace: dict[str, Replacement] | None = None, x: torch.Tensor = images) -> int:
        return int((model.run(x, replace=replace, record=False).logits.argmax(1)
                    == clean).sum())

    return Shifted(how, len(clean), kept(),
                   kept(_with_statistics(model, {first: stats[first]})),
                   kept(_with_statistics(model, stats)),
                   kept(_with_statistics(model, model.batch_statistics(pool.images)),
                        pool.images))


def shifted_answer(s: Shifted) -> Answer:
    best = max(s.kept_first, s.kept_all)
    if best <= s.kept:
        option, accepted = REESTIMATE_OPTIONS[2], ()
    elif s.kept_first == s.kept_all:
        option, accepted = REESTIMATE_OPTIONS[0], (REESTIMATE_OPTIONS[1],)
    else:
        option, accepted = REESTIMATE_OPTIONS[0 if s.kept_first > s.kept_all else 1], ()
    n = s.pictures
    reason = (
        f"Of the {n} pictures {SHIFTS[s.how][0]}, {s.kept} keep their clean top class with the "
        f"running statistics; {s.kept_first} with the first BatchNorm's statistics "
        f"re-estimated on the shifted pictures, {s.kept_all} with all 49 re-estimated. The "
        f"yardstick: with all 49 re-estimated on the clean pictures themselves, {s.kept_clean_all} "
        f"of {n} keep their class. {n} pictures of seven scenes are too few and too alike to "
        "stand in for the training data in the deep layers, whose new statistics describe "
        "these scenes rather than the shift. A change of brightness or contrast changes the "
        "mean and scale of what the first convolution puts out, which the first BatchNorm "
        "normalizes away, in part, once its statistics are re-estimated; a blur changes the "
        "edges every later layer is built from. "
        f"{SCHNEIDER.cited} replace the statistics with those of many corrupted pictures of "
        "ImageNet's own classes (blended with the training statistics by a pseudo sample "
        "size) and take ResNet-50's mean corruption error on ImageNet-C from 76.7% to 62.2%.")
    return Answer(option, reason, accepted)


# --- 6. A per-sample norm in BatchNorm's place --------------------------------------------------

#: The per-sample norms part 6 puts in each BatchNorm's place, with its γ, β and ε.
SWAPS: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]] = {
    "LayerNorm over each position's channels":
        lambda x, w, b, eps: layer_norm(x.movedim(1, -1), (x.shape[1],), w, b, eps,
                                        impl="fast").output.movedim(-1, 1),
    "GroupNorm with one group (each picture's C × H × W)":
        lambda x, w, b, eps: group_norm(x, 1, w, b, eps, impl="fast").output,
    "InstanceNorm (each picture's channels, over H × W)":
        lambda x, w, b, eps: group_norm(x, x.shape[1], w, b, eps, impl="fast").output,
}

SWAP_OPTIONS = ("most (over half)", "a few (1 to half)", "none")


@dataclass(frozen=True)
class Swapped:
    """Each per-sample norm of :data:`SWAPS` in all 49 BatchNorms' places: how many of the
    pool's pictures keep their eval-mode top class, and the median top probability; and per
    BatchNorm, the spread of its running standard deviations over its channels (largest over
    smallest, dead channels aside): what one σ per picture or position cannot match."""

    pictures: int
    kept: dict[str, int]
    top_p: dict[str, float]
    names: list[str]
    spread: np.ndarray


def swapped(model: EfficientNetLite0, pool: Pool) -> Swapped:
    clean = model.run(pool.images, record=False).logits.argmax(1)
    names = batch_norm_names()
    kept, top_p = {}, {}
    for how, norm in SWAPS.items():
        def swap(name: str, norm=norm) -> Replacement:
            bn = model.module.get_submodule(name)
            return lambda x: norm(x, bn.weight, bn.bias, bn.eps)
        run = model.run(pool.images, replace={n: swap(n) for n in names}, record=False)
        kept[how] = int((run.logits.argmax(1) == clean).sum())
        top_p[how] = float(run.probabilities.max(1).values.median())
    spread = []
    for name in names:
        var = model.module.get_submodule(name).running_var
        std = var[var > 0].sqrt()
        spread.append(float(std.max() / std.min()))
    return Swapped(len(clean), kept, top_p, names, np.array(spread))


def swap_answer(s: Swapped) -> Answer:
    first = next(iter(SWAPS))
    k = s.kept[first]
    option = SWAP_OPTIONS[0 if 2 * k > s.pictures else 2 if k == 0 else 1]
    widest = int(np.argmax(s.spread))
    reason = (
        f"With {first} in every BatchNorm's place, {k} of {s.pictures} pictures keep their "
        f"top class; the other two: "
        + "; ".join(f"{how}, {s.kept[how]}" for how in list(SWAPS)[1:])
        + f". The median top probability falls to {percent(s.top_p[first])}. Each "
          "BatchNorm learned its γ and β for inputs divided by its own channel's running "
          "standard deviation, and those differ from channel to channel by up to "
          f"×{short(float(s.spread[widest]))} (in {s.names[widest]}; a median of "
          f"×{short(float(np.median(s.spread)))} over the 49). LayerNorm and GroupNorm with "
          "one group divide all the channels they pool by one σ, so each channel reaches γ "
          "and β at another scale than the one they were trained for. InstanceNorm gives "
          "each channel its own σ but takes it, and the mean, from the picture alone: it is "
          "part 1's train mode with a batch of one, and fails the same way, each picture's "
          "own channel means subtracted. Either way the network's arithmetic no longer fits. "
          "A "
          "network meant for small or single-picture batches (LayerNorm in ConvNeXt, GroupNorm "
          "in some detection models) is trained with that norm from the start.")
    return Answer(option, reason)


def swap_table(s: Swapped) -> pd.DataFrame:
    """Part 6's table: each per-sample norm, the pictures that keep their class, the median
    top probability."""
    return pd.DataFrame([{"in every BatchNorm's place": how,
                          f"keep their top class (of {s.pictures})": s.kept[how],
                          "median top probability": s.top_p[how]} for how in SWAPS])


def credits() -> str:
    """The photos' credits, one line."""
    return "; ".join(f"{p.name}: {p.credit}" for p in PHOTOS)
