"""Beyond LayerNorm: what recent models do instead, measured on the models the app ships.

Dynamic Tanh (Zhu, Chen, He, LeCun and Liu, "Transformers without Normalization", CVPR 2025)
replaces a LayerNorm by ``DyT(x) = γ·tanh(αx) + β``: one learned scalar α per layer and no
statistics at all. Its premise is an observation about trained transformers: plotted value by
value, a LayerNorm's input against its normalized output (x̂, before γ and β) follows an S-shaped
curve. :func:`lnviz.analysis.tanh_fits` measures that on all-MiniLM-L6-v2's thirteen
LayerNorms for one sentence (the best ``s·tanh(αx)`` through the scatter, against the best
straight line, with every value and without the few values of largest |x| that make its bend:
on MiniLM one to a dozen values, a massive activation among them, make every bend,
:func:`shape_of`); :func:`yardstick` anchors a cosine between sentence embeddings at both ends;
and :func:`substitute` puts the fitted curves in place of chosen
LayerNorms and says how far the sentence embedding moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lnviz.analysis import TanhFit
from lnviz.capture import NormRecord
from lnviz.data.texts import PAIRS
from lnviz.lessons.common import Paper, defined
from lnviz.models.bert import MiniLM, ModelRun, Replacement, indices_after, sublayer_of
from lnviz.norms import rms_norm
from lnviz.terms import NormKind

__all__ = [
    "ADDED_STOP",
    "CAUTION",
    "CAUTION_LOSS",
    "CAUTION_SIZES",
    "DERF",
    "DYISRU",
    "DYT",
    "FAN",
    "FIRST_LEFT_OUT",
    "HEIMERSHEIM",
    "KERNEL_SHAPES",
    "LINE_FITS",
    "LN_FREE",
    "LN_FREE_LOSS",
    "MINILM_TOKEN_RUNS",
    "NEIGHBOURS",
    "ONE_MEANING",
    "OTHER_TOPICS",
    "PARAPHRASE",
    "RMSNORM",
    "RMSNORM_SAVING",
    "SAME_FRAME",
    "SMALL_EDIT",
    "STRAIGHT_BUT_EXTREMES",
    "UNRELATED",
    "VIT_TOP1",
    "Anchor",
    "Substitution",
    "Swaps",
    "freeze_sigma",
    "frozen_caption",
    "frozen_sigma",
    "kernel_savings",
    "mean_shares",
    "placed",
    "rms_instead",
    "run_sentence",
    "shape_of",
    "standard_substitutions",
    "substitute",
    "swap_runs",
    "worst_sublayer",
    "yardstick",
]


DYT = Paper("DyT", "Zhu, Chen, He, LeCun and Liu", "Transformers without Normalization",
            "2503.10622", "CVPR 2025")
DERF = Paper("Derf", "Chen, Lu, Zhu, Sun and Liu", "Stronger Normalization-Free Transformers",
             "2512.10938", "CVPR 2026")
DYISRU = Paper("DyISRU", "Stollenwerk", "On the Mathematical Relationship Between Layer "
               "Normalization and Dynamic Activation Functions", "2503.21708", "EACL 2026")
CAUTION = Paper("A caution", "Verma", "When Does Removing LayerNorm Help? Activation Bounding "
                "as a Regime-Dependent Implicit Regularizer", "2604.23434")
#: ImageNet-1K top-1 accuracy (%) of the ViT-B the DyT and Derf papers compare, as they report
#: it (their repositories' tables).
VIT_TOP1 = {NormKind.LAYER: 82.3, "DyT": 82.5, "Derf": 82.8}
#: arXiv 2604.23434 on GPT-2 at 64M parameters: DyT's change of validation loss (%) against
#: LayerNorm, by the tokens trained on (negative: better), and the model sizes it spans.
CAUTION_LOSS = {"1M": -27.3, "118M": 18.8}
CAUTION_SIZES = ("64M", "3.78B")


@dataclass(frozen=True)
class Substitution:
    """MiniLM with some LayerNorms replaced by their fitted DyT, against the model as it is.
    What the page reads and nothing more: the two runs it compares (every record and attention
    map, tens of MB for a long sentence) are not kept.

    Attributes:
        replaced: the LayerNorms replaced, in forward order.
        cosine: cosine similarity of the sentence embeddings (1: unchanged).
        embedding: the sentence embedding with the replacements, (hidden,).
    """

    replaced: tuple[str, ...]
    cosine: float
    embedding: torch.Tensor


def substitute(model: MiniLM, text: str, fits: Iterable[TanhFit],
               original: ModelRun | None = None) -> Substitution:
    """Run ``text`` through ``model`` with each LayerNorm in ``fits`` replaced by its fitted
    DyT (:meth:`TanhFit.replacement`, with the LayerNorm's own γ and β)."""
    fits = list(fits)
    original = original if original is not None else model.run(text)
    replace = {f.name: f.replacement(model.weights[f"{f.name}.weight"],
                                     model.weights[f"{f.name}.bias"]) for f in fits}
    run = model.run(text, replace=replace)
    cosine = float(F.cosine_similarity(original.embedding, run.embedding, dim=0))
    order = [r.name for r in original.records]
    return Substitution(tuple(sorted(replace, key=order.index)), cosine,
                        run.embedding.detach().clone())


#: What the page's heavy computations count, for the server's line: tokens through MiniLM.
MINILM_TOKEN_RUNS = "MiniLM token-runs"


def run_sentence(model: MiniLM, text: str) -> ModelRun:
    """``model.run(text)`` without its attention maps (:meth:`ModelRun.without_attention`): the
    run every fit and substitution on the page starts from, which reads its LayerNorms alone."""
    return model.run(text).without_attention()


#: What :func:`shape_of` calls a mapping that a line fits once its extremes are left out.
STRAIGHT_BUT_EXTREMES = "straight but for its extremes"
#: ... and where no one line (nor tanh) explains the points well: each token's values lie on a
#: line of their own (slope 1/σ), and the tokens' lines spread apart.
FAN = "a fan of per-token lines"
#: The R² a line must reach (with every value where the mapping is straight, without the
#: extremes where they alone make the bend) for the mapping to be called a line.
LINE_FITS = 0.85


def shape_of(fit: TanhFit) -> str:
    """What the scatter looks like, from the fits: "straight" where the best tanh is a line
    (:attr:`TanhFit.straight`) or explains less than :data:`~lnviz.analysis.BENT` more of x̂'s
    variance than a line; :data:`STRAIGHT_BUT_EXTREMES` where it does, but no longer once a few
    of the values of largest |x| are left out (at most the :data:`~lnviz.analysis.TRIM` share,
    :attr:`TanhFit.bend`): those values alone make the bend; "S-shaped" where the bend
    outlasts leaving out that share (at least 0.05 more without it), else "slightly bent".
    Where that line explains less than :data:`LINE_FITS` of x̂'s variance, :data:`FAN`: the
    tokens' lines spread too far apart for one line (the 31st review: 0.64 on eight "dog"s)."""
    if fit.straight or fit.bend == 0:
        return "straight" if fit.r2_line >= LINE_FITS else FAN
    if fit.bend is not None:
        return STRAIGHT_BUT_EXTREMES if fit.r2_line_trimmed >= LINE_FITS else FAN
    return "S-shaped" if fit.r2_tanh_trimmed - fit.r2_line_trimmed >= 0.05 else "slightly bent"


def standard_substitutions(model: MiniLM, text: str, fits: Sequence[TanhFit],
                           original: ModelRun) -> list[tuple[str, Substitution]]:
    """The replacements the page compares, each with its label: the first feed-forward
    LayerNorm alone, all six after the feed-forward, all six after attention, all thirteen."""
    by_name = {f.name: f for f in fits}
    ffn = [by_name[n] for n in by_name if sublayer_of(n) == "feed-forward"]
    attention = [by_name[n] for n in by_name if sublayer_of(n) == "attention"]
    cases = [("layer 0's after-feed-forward LayerNorm", ffn[:1]),
             ("the 6 after the feed-forward", ffn),
             ("the 6 after attention", attention),
             ("all 13", list(by_name.values()))]
    return [(label, substitute(model, text, chosen, original)) for label, chosen in cases]


#: For each example sentence: the same meaning in other words, and the same frame with another
#: meaning. With a small edit of any sentence and unrelated sentences they anchor both ends of
#: the cosine yardstick (:func:`yardstick`).
NEIGHBOURS = {
    "The cat sat on the mat.": ("A cat was sitting on the mat.", "The dog sat on the rug."),
    "Layer normalization rescales every token to zero mean and unit variance.": (
        "Each token is normalized by layer norm to have mean zero and variance one.",
        "Batch normalization rescales every feature over the batch."),
    "Paris is the capital of France.": ("The capital city of France is Paris.",
                                        "Berlin is the capital of Germany."),
    "I love deep learning": ("I really enjoy deep learning", "I love baking bread"),
    "Transformers are powerful": ("Transformer models are very capable",
                                  "Bulldozers are powerful"),
}
#: The yardstick's kinds of sentence, from the nearest meaning to none.
SMALL_EDIT = "the same sentence, its last word left out"
#: ... where the text is one word: the same word and a full stop; past the 512 tokens the model
#: reads: the same text without its first word.
ADDED_STOP = "the same text, a full stop added"
FIRST_LEFT_OUT = "the same text, its first word left out"
PARAPHRASE = "the same meaning in other words"
SAME_FRAME = "the same frame, another meaning"
UNRELATED = "a sentence on another topic"
#: The yardstick's near end for any sentence: two other sentences of one meaning
#: (lnviz.data.texts.PAIRS' first pair), their cosine with each other.
ONE_MEANING = "two other sentences of one meaning, with each other"
#: The yardstick's far end: sentences picked to share no topic with the example sentences.
OTHER_TOPICS = ("Stock markets fell sharply today.", "Add two eggs to the flour.",
                "The train leaves at noon.")


@dataclass(frozen=True)
class Anchor:
    """One sentence on the cosine yardstick: its kind (:data:`SMALL_EDIT` …), its text, and
    its embedding's cosine with the sentence's."""

    kind: str
    text: str
    cosine: float


def yardstick(model: MiniLM, original: ModelRun, unrelated: Iterable[str] = OTHER_TOPICS
              ) -> list[Anchor]:
    """What a cosine between sentence embeddings means, anchored at both ends: ``original``'s
    sentence against a small edit of itself (its last word left out where it has two or more,
    a full stop added to one word, its first word left out where the model reads only its
    first 512 tokens), for an example sentence its paraphrase and a sentence of the same frame
    with another meaning (:data:`NEIGHBOURS`), and the ``unrelated`` sentences (others than
    itself), nearest first. Every text gets a small edit: the near end of its own."""
    text = original.text
    words = text.split()
    if original.truncated:  # the model reads the first 512 tokens: an edit the model sees
        kinds = [(FIRST_LEFT_OUT, " ".join(words[1:]))]
    elif len(words) >= 2:
        kinds = [(SMALL_EDIT, " ".join(words[:-1]))]
    else:  # one word, or nothing but [CLS] and [SEP]
        kinds = [(ADDED_STOP, f"{text.strip()}.")]
    if text in NEIGHBOURS:
        paraphrase, frame = NEIGHBOURS[text]
        kinds += [(PARAPHRASE, paraphrase), (SAME_FRAME, frame)]
    kinds += [(UNRELATED, other) for other in unrelated if other != text]
    anchors = [Anchor(kind, other, float(F.cosine_similarity(
        original.embedding, model.run(other).embedding, dim=0))) for kind, other in kinds]
    first, second = PAIRS[0]
    anchors.append(Anchor(ONE_MEANING, f"{first}” and “{second}", float(F.cosine_similarity(
        model.run(first).embedding, model.run(second).embedding, dim=0))))
    return sorted(anchors, key=lambda a: -a.cosine)


def placed(cosine: float, anchors: Sequence[Anchor]) -> str:
    """Where ``cosine`` falls on the yardstick, in words: between which two anchors (by kind),
    or above or below them all."""
    above = [a for a in anchors if a.cosine >= cosine]
    below = [a for a in anchors if a.cosine < cosine]
    if not above:
        return f"above every anchor, {anchors[0].kind} included" if anchors else ""
    if not below:
        return f"below every anchor, {anchors[-1].kind} included"
    return (f"between {above[-1].kind} ({above[-1].cosine:.2f}) and {below[0].kind} "
            f"({below[0].cosine:.2f})")


# --- Removing the norm: σ frozen ---------------------------------------------------------------

HEIMERSHEIM = Paper("LN removal", "Heimersheim", "You can remove GPT2's LayerNorm by fine-tuning",
                    "2409.13710")
LN_FREE = Paper("LN-free GPT-2", "Baroni, Khara, Schaeffer, Subkhankulov and Heimersheim",
                "Transformers Don't Need LayerNorm at Inference Time", "2507.02559")
#: The papers' change of cross-entropy loss (nats per token) after LayerNorm is removed and
#: the model fine-tuned: GPT-2 small (arXiv 2409.13710) and GPT-2 XL (arXiv 2507.02559).
LN_FREE_LOSS = {"GPT-2 small": 0.05, "GPT-2 XL": 0.03}


def _scale_of(record: NormRecord, eps: float) -> torch.Tensor:
    """Each token's √(σ² + ε) (a LayerNorm) or √(mean x² + ε) (an RMSNorm), (T,)."""
    x = record.input.detach()[0].double()  # (T, C)
    if record.kind == NormKind.RMS:
        return (x.square().mean(-1) + eps).sqrt()
    return (x.var(-1, unbiased=False) + eps).sqrt()


def freeze_sigma(record: NormRecord, eps: float) -> Replacement:
    """The LayerNorm of ``record`` with σ frozen: γ·(x − μ)/σ̄ + β, where μ is still each
    token's mean and σ̄ is one number, the median of √(σ² + ε) over the tokens ``record`` saw
    (a median, so that one token's massive activation does not set it)."""
    sigma = float(_scale_of(record, eps).median())
    weight, bias = record.weight, record.bias

    def frozen(x: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(-1, keepdim=True)  # (B, T, C): the mean stays per token
        return centred / sigma * weight + bias  # (B, T, C): one σ̄ for every token

    return frozen


@dataclass(frozen=True, eq=False)
class Swaps:
    """Each of MiniLM's LayerNorms changed in turn, and all of them at once.

    Attributes:
        names: the LayerNorms, in forward order.
        alone: (13,) the embedding's cosine with the model's own when only that one changes.
        together: the cosine when all 13 change.
        measure: (13,) what predicts the damage (for σ frozen: the largest token's √(σ² + ε)
            over σ̄, the median token's; for RMSNorm: the largest token's |μ|/σ).
        by_sublayer: the cosine when the LayerNorms after one sublayer
            (:data:`lnviz.models.bert.SUBLAYERS`) change together, by sublayer.
    """

    names: tuple[str, ...]
    alone: np.ndarray
    together: float
    measure: np.ndarray
    by_sublayer: dict[str, float]


def swap_runs(norms: int) -> int:
    """How many model runs :func:`frozen_sigma` or :func:`rms_instead` takes on a model with
    ``norms`` LayerNorms: each alone, all together, and the groups after attention and after the
    feed-forward (the embeddings' group is its one LayerNorm alone)."""
    return norms + 1 + 2


def _cosine(a: ModelRun, b: ModelRun) -> float:
    return float(F.cosine_similarity(a.embedding, b.embedding, dim=0))


def _swaps(model: MiniLM, text: str, original: ModelRun,
           replacements: dict[str, Replacement], measure: np.ndarray) -> Swaps:
    names = tuple(r.name for r in original.records)
    alone = np.asarray([_cosine(original, model.run(text, replace={n: replacements[n]}))
                        for n in names])
    together = _cosine(original, model.run(text, replace=replacements))
    by_sublayer = {"embeddings": float(alone[0])}  # one LayerNorm: the run above
    for sublayer in ("attention", "feed-forward"):
        group = {names[i]: replacements[names[i]] for i in indices_after(names, sublayer)}
        by_sublayer[sublayer] = _cosine(original, model.run(text, replace=group))
    return Swaps(names, alone, together, measure, by_sublayer)


def frozen_sigma(model: MiniLM, text: str, original: ModelRun) -> Swaps:
    """MiniLM with σ frozen (:func:`freeze_sigma`) in each LayerNorm alone and in all 13,
    σ̄ taken from ``original``'s run of the same text (the median token is left exactly as it
    was)."""
    eps = model.config.eps
    scales = [_scale_of(r, eps) for r in original.records]
    return _swaps(model, text, original,
                  {r.name: freeze_sigma(r, eps) for r in original.records},
                  np.asarray([float(s.max() / s.median()) for s in scales]))


# --- RMSNorm: dropping the mean ----------------------------------------------------------------

RMSNORM = Paper(NormKind.RMS, "Zhang and Sennrich", "Root Mean Square Layer Normalization",
                "1910.07467", "NeurIPS 2019")
#: The running time RMSNorm saves over LayerNorm in its paper's models (%, smallest and largest).
RMSNORM_SAVING = (7, 64)
#: The shapes (rows × features) whose recorded GPU timings the page compares: SmolLM2's width
#: (576), BERT-base's (768), then wider, at 16,384 rows.
KERNEL_SHAPES = ((16384, 576), (16384, 768), (16384, 1024), (16384, 4096))


def mean_shares(records: Sequence[NormRecord]) -> tuple[np.ndarray, np.ndarray]:
    """How far each norm's input sits from mean 0, per token: |μ|/σ (σ the biased standard
    deviation), its median and its largest over the tokens, one of each per norm. RMSNorm's
    output is LayerNorm's times 1/√(1 + (μ/σ)²) (per token, with ε = 0 and β = 0), with the
    mean left in."""
    median, largest = [], []
    for record in records:
        x = record.input.detach()[0].double()  # (T, C)
        ratio = x.mean(-1).abs() / x.std(-1, unbiased=False)  # (T,)
        median.append(float(ratio.median()))
        largest.append(float(ratio.max()))
    return np.asarray(median), np.asarray(largest)


def rms_instead(model: MiniLM, text: str, original: ModelRun) -> Swaps:
    """MiniLM with each LayerNorm turned into an RMSNorm (x/√(mean x² + ε), the same γ and β)
    alone and all 13 at once."""
    eps = model.config.eps

    def as_rms(record: NormRecord) -> Replacement:
        weight, bias = record.weight, record.bias
        return lambda x: rms_norm(x, x.shape[-1], weight, eps).output + bias

    return _swaps(model, text, original, {r.name: as_rms(r) for r in original.records},
                  mean_shares(original.records)[1])


def kernel_savings(rows: Sequence, shapes: Sequence[tuple[int, int]]
                   ) -> list[tuple[tuple[int, int], float, float]]:
    """For each shape measured: (shape, the share of time RMSNorm saves over LayerNorm with
    torch's kernels, the same with lnviz's fused kernels), from benchmark rows
    (:class:`lnviz.lessons.performance.Row`)."""
    def seconds(norm: str, impl: str, shape: tuple[int, int]) -> float | None:
        return next((r.seconds for r in rows if (r.norm, r.impl, (r.rows, r.cols))
                     == (norm, impl, tuple(shape))), None)

    savings = []
    for shape in shapes:
        times = [seconds(n, i, shape) for i in ("torch", "fused")
                 for n in (NormKind.LAYER, NormKind.RMS)]
        if None not in times:
            savings.append((tuple(shape), 1 - times[1] / times[0], 1 - times[3] / times[2]))
    return savings


def rank_correlation(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's ρ: the correlation of the ranks of ``a`` and ``b`` (ties ranked in order)."""
    ranks = [np.argsort(np.argsort(np.asarray(v, dtype=np.float64), kind="stable"))
             for v in (a, b)]
    return float(np.corrcoef(*ranks)[0, 1])


def worst_sublayer(swaps: Swaps) -> str:
    """The group of LayerNorms (those after one of :data:`lnviz.models.bert.SUBLAYERS`)
    whose change, all of the group together, moves the embedding most."""
    return min(swaps.by_sublayer, key=swaps.by_sublayer.get)


def frozen_caption(rho: float, worst: str, massive_seen: bool = True) -> str:
    """Section 3's caption: what a frozen σ does to each token, and, in the rank correlation
    ``rho`` of the worst token's σ/σ̄ with the drop in cosine across the 13 LayerNorms, whether
    the tokens far from σ̄ are what breaks here (only where ``rho`` > 0.7 is that said);
    ``worst`` is the group of LayerNorms hurt most (:func:`worst_sublayer`). Where the massive
    activation sits is named only when ``massive_seen`` (section 1's question, whose answer it
    gives, was answered)."""
    return (
        "A frozen σ is wrong by the factor σ/σ̄ for each token: a token whose σ is 5× the "
        "median's comes out 5× too large, one whose σ is half of it twice too small, and every "
        "later layer reads them so. "
        + (f"Across the 13, the larger that factor for the worst token, the lower the cosine "
           f"({defined('rank correlation')} of the factor with the drop in cosine: {rho:.2f})"
           ": what breaks is the tokens whose σ is "
           "far from the rest"
           + (" — here after the feed-forward, where the massive activation of *Inside a real "
              "transformer* sits." if worst == "feed-forward" and massive_seen else ".")
           if rho > 0.7 else
           f"Across the 13 the factor for the worst token does not rank the damage well here "
           f"({defined('rank correlation')} {rho:.2f}).")
        + " The papers switch the LayerNorms off while fine-tuning, so that the weights learn "
          "to work without a per-token σ"
        + ("; without fine-tuning, as here, the tokens far from σ̄ are what breaks."
           if rho > 0.7 else
           "; without fine-tuning, as here, this sentence's damage is not ranked by how far "
           "its worst token's σ lies from σ̄."))
