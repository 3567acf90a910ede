"""Inside a real transformer: all-MiniLM-L6-v2's 13 LayerNorms on a sentence the learner types.

Everything the page says about the model is computed here from the run, so that it holds for the
sentence on screen:

- :func:`analyze` runs the sentence once (:func:`lnviz.models.minilm`) and summarizes each
  LayerNorm: its largest value, the median size of its values, the share of Σx² the first token
  holds, the attention each layer sends to the first token.
- **Massive activations** (Sun et al. 2024, "Massive Activations in Large Language Models"): at
  layer 0's feed-forward LayerNorm one value of the first token ([CLS]) is hundreds of times the
  median (:class:`Massive`); :func:`first_word_run` leaves [CLS] and [SEP] out, and the first word
  takes the value over; :func:`across_sentences` shows it is nearly the same for every sentence.
- **Outlier features** (Kovaleva et al. 2021, "BERT Busters"): one feature is large in every
  token, and LayerNorm's γ is extreme in the same features (:class:`Outliers`).
- **Attention sink** (Xiao et al. 2024): middle layers send much of their attention to [CLS]
  (:class:`Sink`).
- **Ablation**: γ and β of one feature set to 0 in all 13 LayerNorms, sentence embeddings
  compared with the original (:func:`ablation`).
- **int8** (Dettmers et al. 2022, "LLM.int8()"): absmax quantization of a LayerNorm's input with
  one scale for the tensor, one per token, or one for the tensor with the outlier features kept
  in full precision (:func:`int8_errors`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.batch import Batch
from lnviz.capture import Capture, NormRecord
from lnviz.data.texts import PAIRS
from lnviz.lessons.common import Answer, short, token_place
from lnviz.limits import MINILM_MAX_DRAWN_TOKENS, MODEL_MAX_CHARS
from lnviz.models import MiniLM, ModelRun
from lnviz.models.bert import indices_after, sublayer_of
from lnviz.terms import Layout, listed

__all__ = [
    "FIRST_FFN",
    "INT8_THRESHOLD",
    "PRESETS",
    "Ablation",
    "LayerView",
    "Massive",
    "Outliers",
    "Sink",
    "TransformerRun",
    "ablation",
    "ablation_text",
    "across_sentences",
    "across_text",
    "analyze",
    "capture_bytes",
    "control_feature",
    "explorer_batch",
    "first_word_run",
    "first_word_text",
    "int8_errors",
    "int8_text",
    "layer_label",
    "layer_text",
    "layer_view",
    "massive_text",
    "outlier_text",
    "pair_similarities",
    "peak_answer",
    "sink_text",
    "truncation_note",
]

#: Sentences to start from (any typed text works).
PRESETS = (
    "The cat sat on the mat.",
    "Layer normalization rescales every token to zero mean and unit variance.",
    "Paris is the capital of France.",
    "I love deep learning",
    "Transformers are powerful",
    "Ünïcödé wörks too: 東京タワー and emoji 🙂.",
)
#: The layer where the massive activation first appears: layer 0's feed-forward LayerNorm.
FIRST_FFN = "encoder.layer.0.output.LayerNorm"
#: LLM.int8()'s outlier threshold: features with a value this large in any token stay float.
INT8_THRESHOLD = 6.0


def layer_label(name: str) -> str:
    """A LayerNorm's place in words: "embeddings", "layer 0 · after attention", "layer 0 · after
    feed-forward"."""
    if sublayer_of(name) == "embeddings":
        return "embeddings"
    return f"layer {name.split('.')[2]} · after {sublayer_of(name)}"


def _grid(tensor: torch.Tensor) -> np.ndarray:
    return tensor[0].detach().numpy().astype(np.float32)  # (1, T, C) -> (T, C)


@dataclass(frozen=True)
class Massive:
    """The largest value at layer 0's feed-forward LayerNorm input, and where it goes.

    Attributes:
        feature, token: where it is (the first token is [CLS] when special tokens are on).
        value: the value there; ``median``: the median |x| of that LayerNorm's input.
        per_layer: the value at (token, feature) in each layer's feed-forward LN input (6,).
        per_layer_median: the median |x| of each of those inputs (6,).
        share: the token's share of Σx² in each of those inputs (6,).
        sigma: σ of the token's row at layer 0's feed-forward LN, what the LN divides it by.
        out_value: the LN's output at (token, feature), after γ and β.
        row_others, rest_others: median |x̂| of the token's other features, and of every other
            token's features: how much the LN squashed the rest of that row.
        x_hat: x̂ at (token, feature), before γ and β.
    """

    feature: int
    token: int
    value: float
    median: float
    per_layer: np.ndarray
    per_layer_median: np.ndarray
    share: np.ndarray
    sigma: float
    out_value: float
    row_others: float
    rest_others: float
    x_hat: float

    @property
    def ratio(self) -> float:
        return self.value / self.median


@dataclass(frozen=True)
class Outliers:
    """The feature that is large in every token (not only the first), and LayerNorm's γ there.

    Attributes:
        feature: the feature with the largest median |x| over the ordinary tokens (no special
            token such as [CLS] or [SEP], typed ones included) in the most LayerNorm inputs.
        ordinary: how many such tokens the text has (the median needs :data:`MIN_ORDINARY`).
        median: its median |x| over those tokens at each LN input (13,).
        typical: the median |x| of all features over those tokens at each LN input (13,).
        gamma_rank: for each LN, the rank of |γ| at ``feature`` among the 384 (1 = largest).
        massive_gamma_rank: the same for the massive activation's feature.
    """

    feature: int
    ordinary: int
    median: np.ndarray
    typical: np.ndarray
    gamma_rank: np.ndarray
    massive_gamma_rank: np.ndarray


@dataclass(frozen=True)
class Sink:
    """Attention to the first token: ``share`` per layer (6,), averaged over heads and query
    tokens; ``per_head`` (6, 12); ``mean_map`` each layer's attention averaged over heads
    (6, T, T)."""

    share: np.ndarray
    per_head: np.ndarray
    mean_map: np.ndarray

    @property
    def uniform(self) -> float:
        """The share the first token would get if every token got the same."""
        return 1.0 / self.mean_map.shape[-1]

    def sink_layers(self) -> list[int]:
        """Layers that send at least half of their attention to the first token."""
        return [i for i, s in enumerate(self.share) if s >= 0.5]


@dataclass(frozen=True, eq=False)
class TransformerRun:
    """One sentence through the model, summarized for the page: the run's records, and the
    findings computed from them."""

    text: str
    tokens: list[str]
    total_tokens: int
    records: list[NormRecord]
    names: list[str]
    peak: np.ndarray  # (13,) largest |x| of each LN input
    peak_at: list[tuple[int, int]]  # (token, feature) of each
    median: np.ndarray  # (13,) median |x| of each LN input
    first_share: np.ndarray  # (13,) share of Σx² in the first token, per LN input
    massive: Massive
    outliers: Outliers
    sink: Sink
    embedding: np.ndarray

    @property
    def truncated(self) -> bool:
        return self.total_tokens > len(self.tokens)


def analyze(model: MiniLM, text: str) -> TransformerRun:
    """Run ``text`` through all-MiniLM-L6-v2 and compute everything the page shows about it."""
    if len(text) > MODEL_MAX_CHARS:
        raise ValueError(f"this text has {len(text):,} characters; the page takes at most "
                         f"{MODEL_MAX_CHARS:,} (the model reads at most 512 tokens anyway)")
    if not text.strip():
        raise ValueError("type a sentence: the text is empty")
    run = model.run(text)
    if len(run.tokens) <= 2:  # e.g. zero-width spaces: the tokenizer keeps nothing of them
        raise ValueError("type a sentence: the model's tokenizer keeps nothing of this text, "
                         "only its own [CLS] and [SEP]")
    return _summarize(run)


def _summarize(run: ModelRun) -> TransformerRun:
    grids = [_grid(r.input) for r in run.records]
    peaks, where = [], []
    for x in grids:
        flat = int(np.abs(x).argmax())
        peaks.append(float(np.abs(x).flat[flat]))
        where.append(divmod(flat, x.shape[1]))
    median = np.array([float(np.median(np.abs(x))) for x in grids])
    energy = [np.square(x.astype(np.float64)) for x in grids]
    first_share = np.array([e[0].sum() / e.sum() for e in energy])
    names = [r.name for r in run.records]
    massive = _massive(run, grids, names)
    return TransformerRun(
        text=run.text, tokens=run.tokens, total_tokens=run.total_tokens, records=run.records,
        names=names, peak=np.array(peaks), peak_at=where, median=median, first_share=first_share,
        massive=massive, outliers=_outliers(run, grids, massive.feature), sink=_sink(run),
        embedding=run.embedding.numpy())


def _massive(run: ModelRun, grids: list[np.ndarray], names: list[str]) -> Massive:
    k = names.index(FIRST_FFN)
    x = grids[k]
    token, feature = divmod(int(np.abs(x).argmax()), x.shape[1])
    ffn = indices_after(names, "feed-forward")
    per_layer = np.array([grids[i][token, feature] for i in ffn])
    per_layer_median = np.array([np.median(np.abs(grids[i])) for i in ffn])
    share = np.array([np.square(grids[i][token].astype(np.float64)).sum()
                      / np.square(grids[i].astype(np.float64)).sum() for i in ffn])
    result = run.records[k].replay()
    x_hat = result.x_hat[0].numpy()
    others = np.delete(x_hat[token], feature)
    rest = np.delete(x_hat, token, axis=0)
    sigma = float(torch.sqrt(result.var[0, token, 0]))
    return Massive(feature, token, float(x[token, feature]), float(np.median(np.abs(x))),
                   per_layer, per_layer_median, share, sigma,
                   float(run.records[k].output[0, token, feature]),
                   float(np.median(np.abs(others))),
                   float(np.median(np.abs(rest))) if rest.size else float("nan"),
                   float(x_hat[token, feature]))


#: The special tokens of all-MiniLM-L6-v2's vocabulary: a typed "[CLS]" is read as one.
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")
#: The fewest ordinary tokens a median over "every token" is taken over.
MIN_ORDINARY = 3


def _outliers(run: ModelRun, grids: list[np.ndarray], massive_feature: int) -> Outliers:
    ordinary = [i for i, t in enumerate(run.tokens) if t not in SPECIAL_TOKENS]
    rows = ordinary or list(range(min(1, len(run.tokens) - 1), len(run.tokens)))
    rest = [np.abs(x[rows]) for x in grids]
    medians = [np.median(r, axis=0) for r in rest]  # (C,) per LN
    feature = Counter(int(m.argmax()) for m in medians).most_common(1)[0][0]

    def rank(record: NormRecord, f: int) -> int:
        g = record.weight.abs()
        return int((g > g[f]).sum()) + 1

    return Outliers(
        feature=feature, ordinary=len(ordinary),
        median=np.array([m[feature] for m in medians]),
        typical=np.array([float(np.median(r)) for r in rest]),
        gamma_rank=np.array([rank(r, feature) for r in run.records]),
        massive_gamma_rank=np.array([rank(r, massive_feature) for r in run.records]))


def _sink(run: ModelRun) -> Sink:
    att = run.attention  # (L, nh, T, T)
    to_first = att[..., 0]  # (L, nh, T): what each query sends to the first token
    return Sink(share=to_first.mean(dim=(1, 2)).numpy(),
                per_head=to_first.mean(dim=2).numpy(),
                mean_map=att.mean(dim=1).numpy())


@dataclass(frozen=True)
class LayerView:
    """One LayerNorm of the run, ready to draw (the first :data:`MINILM_MAX_DRAWN_TOKENS` tokens for
    the grids; statistics for every token)."""

    name: str
    label: str
    tokens: list[str]  # every token
    input: np.ndarray  # (T', C), T' = min(T, MINILM_MAX_DRAWN_TOKENS)
    output: np.ndarray  # (T', C)
    mean: np.ndarray  # (T,) μ per token
    std: np.ndarray  # (T,) σ = √σ² per token
    peak_in: np.ndarray  # (T,) largest |x| per token
    peak_out: np.ndarray  # (T,) largest |y| per token
    gamma: np.ndarray  # (C,)
    beta: np.ndarray  # (C,)
    color_limit: float  # the colour scale's end for the input grid (99.5th percentile of |x|)

    @property
    def drawn(self) -> int:
        return self.input.shape[0]


def layer_view(run: TransformerRun, name: str) -> LayerView:
    """The LayerNorm ``name`` of ``run``: its input and output grids, per-token μ, σ and largest
    values before and after, γ and β."""
    record = run.records[run.names.index(name)]
    result = record.replay()
    x, y = _grid(record.input), _grid(record.output)
    drawn = min(len(x), MINILM_MAX_DRAWN_TOKENS)
    return LayerView(
        name=name, label=layer_label(name), tokens=run.tokens, input=x[:drawn],
        output=y[:drawn], mean=result.mean[0, :, 0].numpy(),
        std=torch.sqrt(result.var[0, :, 0]).numpy(), peak_in=np.abs(x).max(axis=1),
        peak_out=np.abs(y).max(axis=1), gamma=record.weight.numpy(), beta=record.bias.numpy(),
        color_limit=float(np.percentile(np.abs(x), 99.5)))


def peak_answer(run: TransformerRun, name: str) -> Answer:
    """Which of :data:`lnviz.lessons.common.TOKEN_PLACES` holds the largest |x| of the
    LayerNorm ``name``'s input in ``run``, and where exactly: its token, feature and value, and
    how the other tokens' largest |x| compare."""
    x = _grid(run.records[run.names.index(name)].input)
    magnitude = np.abs(x)
    token, feature = (int(i) for i in np.unravel_index(int(magnitude.argmax()), x.shape))
    reason = (f"In this LayerNorm's input ({layer_label(name)}) the largest |x| is "
              f"{short(float(x[token, feature]), 4)}: token {token}, {run.tokens[token]}, "
              f"feature {feature}.")
    others = np.delete(magnitude.max(axis=1), token)
    if others.size:
        median = float(np.median(others))
        reason += (f" The other {others.size} tokens' largest |x| have a median of "
                   f"{short(median)}"
                   + (f", {short(token_lead(run, name))} times smaller." if median > 0 else "."))
    return Answer(token_place(token, len(x)), reason)


def token_lead(run: TransformerRun, name: str) -> float:
    """How many times the median of the other tokens' largest |x| the largest |x| of the
    LayerNorm ``name``'s input is (inf where there are no other tokens, or their largest are
    all 0): a massive activation belongs to one token, so it leads the others by far."""
    magnitude = np.abs(_grid(run.records[run.names.index(name)].input))
    peaks = magnitude.max(axis=1)  # (T,): each token's largest |x|
    others = np.delete(peaks, int(peaks.argmax()))
    median = float(np.median(others)) if others.size else 0.0
    return float(peaks.max()) / median if median > 0 else float("inf")


def truncation_note(run: TransformerRun) -> str | None:
    """What the page says when the text was cut at 512 tokens (None when it was not)."""
    if not run.truncated:
        return None
    return (f"This text has {run.total_tokens:,} tokens; the model reads at most 512 (its "
            f"position embeddings end there), so it was cut after the first "
            f"{len(run.tokens) - 2:,} word pieces, and [SEP] closes it. Everything below is "
            "about those 512.")


def first_word_run(model: MiniLM, text: str) -> tuple[str, int, float] | None:
    """Without [CLS] and [SEP]: (token, feature, value) of the largest |x| at layer 0's
    feed-forward LN input, or None when the text has no word piece."""
    try:
        run = model.run(text, special_tokens=False)
    except ValueError:
        return None
    x = _grid(run.record(FIRST_FFN).input)
    token, feature = divmod(int(np.abs(x).argmax()), x.shape[1])
    return run.tokens[token], feature, float(x[token, feature])


def across_sentences(model: MiniLM, feature: int,
                     sentences: Sequence[str] = PRESETS) -> pd.DataFrame:
    """The first token's value in ``feature`` at layer 0's feed-forward LN input, and that
    input's median |x|, for each sentence."""
    rows = []
    for text in sentences:
        x = _grid(model.run(text).record(FIRST_FFN).input)
        rows.append({"sentence": text, "tokens": len(x), "[CLS] value": float(x[0, feature]),
                     "median |x|": float(np.median(np.abs(x)))})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Ablation:
    """γ and β of ``feature`` set to 0 in all 13 LayerNorms, against a ``control`` feature:
    the cosine similarity of the sentence's embedding to the original, after each."""

    feature: int
    control: int
    cosine: float
    control_cosine: float


def control_feature(model: MiniLM, ablated: int | None = None) -> int:
    """A typical feature to compare an ablation with, the same for every sentence: the one whose
    |γ|, averaged over the 13 LayerNorms, is the median of the 384 (ties: the lowest number),
    or the next above it where that is the ``ablated`` feature itself."""
    names = [n for n in model.weights if n.endswith("LayerNorm.weight")]
    mean_gamma = torch.stack([model.weights[n].abs() for n in names]).mean(dim=0)  # (C,)
    order = np.argsort(mean_gamma.numpy(), kind="stable")
    median = len(order) // 2
    return int(order[median + 1] if order[median] == ablated else order[median])


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(F.cosine_similarity(a, b, dim=0))


def ablation(model: MiniLM, text: str, feature: int, control: int) -> Ablation:
    """The embedding of ``text`` with γ and β of ``feature`` (and, separately, of ``control``)
    zeroed in every LayerNorm, compared with the original."""
    original = model.run(text).embedding
    return Ablation(feature, control,
                    _cosine(model.run(text, zero_features=[feature]).embedding, original),
                    _cosine(model.run(text, zero_features=[control]).embedding, original))


def pair_similarities(model: MiniLM, feature: int, control: int,
                      pairs: Sequence[tuple[str, str]] = PAIRS) -> pd.DataFrame:
    """Cosine similarity of each pair's sentence embeddings: originally, with γ and β of
    ``feature`` zeroed in every LayerNorm, and with those of ``control`` zeroed."""
    done: dict[tuple[str, int | None], torch.Tensor] = {}

    def embed(sentence: str, zeroed: int | None = None) -> torch.Tensor:
        if (sentence, zeroed) not in done:  # pairs share sentences: each runs once
            done[sentence, zeroed] = model.run(
                sentence, zero_features=() if zeroed is None else [zeroed]).embedding
        return done[sentence, zeroed]

    return pd.DataFrame([
        {"sentence A": a, "sentence B": b, "similarity": _cosine(embed(a), embed(b)),
         f"without feature {feature}": _cosine(embed(a, feature), embed(b, feature)),
         f"without feature {control} (control)": _cosine(embed(a, control), embed(b, control))}
        for a, b in pairs])


def _absmax_int8(x: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """x rounded to int8 levels of ``scale`` (absmax / 127) and scaled back."""
    scale = np.where(np.asarray(scale) == 0, 1.0, scale)
    return np.clip(np.round(x / scale), -127, 127) * scale


def int8_errors(x: np.ndarray, threshold: float = INT8_THRESHOLD) -> tuple[pd.DataFrame,
                                                                          list[int]]:
    """absmax int8 of a LayerNorm input ``x`` (T, C) three ways, and the features kept in full
    precision by the third.

    Rows: per tensor (one scale, max |x| / 127); per token (one scale per row); per tensor with
    the outlier features (any |x| ≥ ``threshold``, LLM.int8()'s rule) kept in float and the
    others quantized with their own max. Columns: the scale(s), the share of nonzero values that
    became 0, the mean |error|, and the relative error ‖x̃ − x‖/‖x‖ over the tokens after the
    first (the first token's huge row would otherwise hide everyone else's error).
    """
    x = x.astype(np.float64)
    outliers = [int(f) for f in np.flatnonzero((np.abs(x) >= threshold).any(axis=0))]
    rest = np.delete(x, outliers, axis=1)
    kept = np.zeros_like(x)
    kept[:, outliers] = x[:, outliers]
    inner = [f for f in range(x.shape[1]) if f not in outliers]
    rest_scale = np.abs(rest).max() / 127 if rest.size else 1.0
    kept[:, inner] = _absmax_int8(rest, rest_scale)
    tensor_scale = np.abs(x).max() / 127
    token_scale = np.abs(x).max(axis=1, keepdims=True) / 127
    ways = {
        "per tensor": (_absmax_int8(x, tensor_scale), f"{tensor_scale:.3g}"),
        "per token": (_absmax_int8(x, token_scale),
                      f"{token_scale.min():.3g} to {token_scale.max():.3g}"),
        f"per tensor, {len(outliers)} outlier feature{'s' if len(outliers) != 1 else ''} "
        "kept in float": (kept, f"{rest_scale:.3g}"),
    }
    nonzero = x != 0
    later = slice(1, None) if len(x) > 1 else slice(None)
    rows = []
    for name, (q, scale) in ways.items():
        err = q - x
        rows.append({
            "int8 scheme": name, "scale": scale,
            "values turned to 0": float(((q == 0) & nonzero).sum() / max(nonzero.sum(), 1)),
            "mean |error|": float(np.abs(err).mean()),
            "relative error (tokens after the first)":
                float(np.linalg.norm(err[later]) / np.linalg.norm(x[later])),
        })
    return pd.DataFrame(rows), outliers


def capture_bytes(run: TransformerRun) -> bytes:
    """The run's 13 LayerNorm records as a capture file (:meth:`lnviz.capture.Capture.save`'s
    format), which :func:`lnviz.capture.read_capture` and the app's inspector open."""
    return Capture(output=None, records=run.records).to_bytes()


def explorer_batch(run: TransformerRun, name: str) -> Batch:
    """The input of LayerNorm ``name`` as an Explorer batch: one sequence (NLC), every token,
    384 features, rows labelled by token."""
    x = run.records[run.names.index(name)].input.numpy()  # (1, T, C)
    return Batch(x.copy(), Layout.NLC, row_labels=tuple(f"{i} {t}" for i, t in
                                                   enumerate(run.tokens)))


# --- What the page says: sentences built from the numbers of this run --------------------------


def _token(run: TransformerRun, index: int) -> str:
    return f"“{run.tokens[index]}” (token {index})"


def layer_text(run: TransformerRun, view: LayerView) -> str:
    """What the chosen LayerNorm did: its largest input value, and what it did to that row."""
    k = run.names.index(view.name)
    token, feature = run.peak_at[k]
    value = float(run.records[k].input[0, token, feature])
    sigma = float(view.std[token])
    typical = float(np.median(view.std))
    return (f"At this LayerNorm the input value of largest size is **{short(value, 4)}**, in "
            f"feature "
            f"{feature} of {_token(run, token)}: {run.peak[k] / run.median[k]:,.0f} times the "
            f"median |x| of {run.median[k]:.3g}. The LayerNorm divides each token's row by its "
            f"own σ: **{sigma:.3g}** for that token, against a median σ of {typical:.3g} over "
            f"the {len(run.tokens)} tokens. Its largest output in size, |y|, is "
            f"{float(view.peak_out.max()):.3g}.")


def massive_text(run: TransformerRun) -> str:
    """The massive activation at layer 0's feed-forward LayerNorm, in numbers of this run."""
    m = run.massive
    values = ", ".join(f"{v:.3g}" for v in m.per_layer)
    top = [i for i, s in enumerate(m.share) if s >= 0.5]
    held = (f"In layers {listed([str(i) for i in top])} that one token holds more than "
            "half of the input's Σx² (" + ", ".join(f"{m.share[i]:.0%}" for i in top) + ")."
            if top else "In no layer does that token hold half of the input's Σx².")
    return (f"At layer 0's feed-forward LayerNorm, {_token(run, m.token)} has **{m.value:.4g}** "
            f"in feature **{m.feature}**: {m.ratio:,.0f} times the median |x| of "
            f"{m.median:.3g}. Through the layers' feed-forward LayerNorms that value is "
            f"{values}. {held} The LayerNorm divides that row by its σ = **{m.sigma:.3g}** "
            f"(after subtracting its μ): feature {m.feature}'s x̂ is {m.x_hat:.3g}, which γ and "
            f"β there turn into {m.out_value:.3g}, and the row's other features are squashed to "
            f"a median |x̂| of {m.row_others:.3g}"
            + (f", against {m.rest_others:.3g} for the other tokens." if np.isfinite(
                m.rest_others) else "."))


def first_word_text(found: tuple[str, int, float] | None, feature: int) -> str:
    """What happens without the [CLS] and [SEP] the tokenizer adds around the text (a special
    token typed in the text itself stays)."""
    if found is None:
        return "Without [CLS] and [SEP] this text has no token left to run."
    token, f, value = found
    where = (f"the same feature, {f}," if f == feature else f"feature {f} (not {feature})")
    typed = (": typed in the text itself, it stays, and the tokenizer reads it as the special "
             "token" if token in ("[CLS]", "[SEP]") else "")
    return (f"Run the same text without the [CLS] and [SEP] the tokenizer adds around it, and "
            f"the largest value at that LayerNorm is {value:.4g}, in {where} of “{token}”, now "
            f"the first token{typed}.")


def across_text(table: pd.DataFrame, feature: int) -> str:
    values = table["[CLS] value"].to_numpy()
    return (f"Over the {len(values)} example sentences, [CLS]'s feature {feature} at that "
            f"LayerNorm ranges from {values.min():.4g} to {values.max():.4g}, while the "
            f"sentences' median |x| ranges from {table['median |x|'].min():.3g} to "
            f"{table['median |x|'].max():.3g}.")


def outlier_text(run: TransformerRun) -> str:
    """The outlier feature through the layers, and γ's rank there."""
    o = run.outliers
    names = run.names
    attn = indices_after(names, "attention")
    ffn = indices_after(names, "feed-forward")
    peak = int(np.argmax(o.median))

    def ranks(indices: list[int], which: np.ndarray) -> str:
        return ", ".join(str(int(which[i])) for i in indices)

    if o.ordinary < MIN_ORDINARY:
        return (f"This text has {o.ordinary} ordinary token{'s' * (o.ordinary != 1)} (special "
                f"tokens such as [CLS] and [SEP] aside, typed ones too): too few for a median "
                f"over every token to say which feature is large in all of them. Type a text "
                f"of {MIN_ORDINARY} words or more.")
    same = o.feature == run.massive.feature
    where = (f"feature {o.feature}, the massive activation's feature too, ranks "
             f"{ranks(attn, o.gamma_rank)} (1 = largest); in the LayerNorms after the "
             f"feed-forward it ranks {ranks(ffn, o.gamma_rank)}" if same else
             f"feature {o.feature} ranks {ranks(attn, o.gamma_rank)} and feature "
             f"{run.massive.feature} ranks {ranks(attn, o.massive_gamma_rank)} (1 = largest); "
             f"in the LayerNorms after the feed-forward they rank {ranks(ffn, o.gamma_rank)} "
             f"and {ranks(ffn, o.massive_gamma_rank)}")
    return (f"Feature **{o.feature}** is the largest in the most LayerNorm inputs, and not only "
            f"in [CLS]: its median |x| over the {o.ordinary} ordinary tokens (special tokens "
            f"aside) grows from {o.median[0]:.2g} at the embeddings to {o.median[peak]:.3g} at "
            f"{layer_label(names[peak])}, where all features' median is "
            f"{o.typical[peak]:.2g}. Where γ ranks it: among the 384 |γ| of each LayerNorm "
            f"after attention (layers 0–5), {where} (384 = smallest).")


def sink_text(run: TransformerRun) -> str:
    s = run.sink
    layers = s.sink_layers()
    shares = ", ".join(f"{v:.0%}" for v in s.share)
    uniform = f"{s.uniform:.0%}" if s.uniform >= 0.01 else f"{s.uniform:.2%}"
    if layers:
        lead = (f"Layers {listed([str(i) for i in layers])} send at least half of all "
                f"their attention to the first token")
    else:
        lead = "No layer sends half of its attention to the first token"
    return (f"{lead} (per layer, averaged over the 12 heads and every token: {shares}); with "
            f"{len(run.tokens)} tokens, uniform attention would give it {uniform}.")


def ablation_text(result: Ablation, pairs: pd.DataFrame) -> str:
    moved = pairs[f"without feature {result.feature}"] - pairs["similarity"]
    control = pairs[f"without feature {result.control} (control)"] - pairs["similarity"]
    return (f"With γ and β of feature {result.feature} set to 0 in all 13 LayerNorms, the "
            f"sentence's embedding keeps a cosine of **{result.cosine:.3f}** to the original; "
            f"without the control feature {result.control}, **{result.control_cosine:.3f}**. "
            f"Across the pairs below, removing feature {result.feature} moves their similarity "
            f"by up to {np.abs(moved).max():.3f}, the control by up to "
            f"{np.abs(control).max():.3f}.")


#: How many times the median |x| a LayerNorm input's largest value must be to be called a
#: massive activation (layer 0's feed-forward LayerNorm holds about 600 times) ...
MASSIVE_RATIO = 100
#: ... and how many times the other tokens' largest |x| (their median): it is one token's
#: (layer 0's feed-forward LayerNorm: about 31 times; the embeddings' largest, about 3).
MASSIVE_LEAD = 10


def int8_reader(names: Sequence[str], k: int) -> str:
    """What reads LayerNorm ``k``'s output in this post-LN encoder: the next attention's Q, K
    and V after the embeddings or a feed-forward, the same layer's feed-forward after
    attention, and no matrix multiplication after the last feed-forward (the output is
    pooled into the sentence embedding)."""
    if sublayer_of(names[k]) == "attention":
        return "this layer's feed-forward reads it"
    if k == len(names) - 1:
        return "no matrix multiplication reads it: it is pooled into the sentence embedding"
    return ("layer 0's Q, K and V read it" if k == 0 else "the next layer's Q, K and V read it")


def int8_intro(names: Sequence[str], k: int) -> str:
    """The int8 section's opening: what LLM.int8() rounds, and what reads LayerNorm ``k``'s
    output (:func:`int8_reader`); the last one's output no matmul reads, so it is rounded for
    comparison only."""
    reader = int8_reader(names, k)
    label = f"LayerNorm {k} ({layer_label(names[k])})"
    if reader.startswith("no matrix multiplication"):
        return ("LLM.int8() rounds what a matrix multiplication reads. No matrix "
                f"multiplication reads the output of {label}: it is pooled into the sentence "
                "embedding, and it is rounded here only for comparison with the others.")
    return (f"LLM.int8() rounds what a matrix multiplication reads. Here that is the output of "
            f"{label}: {reader}.")


def int8_input_text(inputs: pd.DataFrame, outputs: pd.DataFrame, ratio: float,
                    lead: float, normalized: pd.DataFrame) -> str:
    """The LayerNorm's input rounded the same way, beside its output, and what that says: where
    the input is the harder one to round, the LayerNorm keeps its outlier out of the matmuls,
    which read its output; the outlier is called a massive activation only where it is one
    (``ratio``, its largest |x| over the median |x|, at least :data:`MASSIVE_RATIO`, and
    ``lead``, over the other tokens' largest (:func:`token_lead`), at least
    :data:`MASSIVE_LEAD`). Where the output is the harder one to round, ``normalized`` (x̂,
    before γ and β, rounded the same way) says which step made it so: the normalization, or γ
    (the 33rd review: a [CLS] spike the normalization keeps at x̂ ≈ 18 is the input's, which γ
    only enlarges)."""
    rel = "relative error (tokens after the first)"
    zero_in = inputs["values turned to 0"].iloc[0]
    rel_in, rel_out, rel_hat = (t[rel].iloc[0] for t in (inputs, outputs, normalized))
    text = (f" The LayerNorm's input, rounded the same way with one scale: {zero_in:.0%} of its "
            f"values turned into 0, a relative error of {rel_in:.1%}.")
    if rel_in > rel_out:
        massive = ratio >= MASSIVE_RATIO and lead >= MASSIVE_LEAD
        return text + (
            f" Its largest value is {ratio:,.0f} times the median |x|"
            + (", a massive activation" if massive else
               f" but only {short(lead)} times the other tokens' largest (their median): an "
               "outlier, not one token's massive activation")
            + ", and no matrix multiplication reads this input in the post-LN model: the "
              "LayerNorm keeps it out of the int8 matmuls.")
    if rel_out > rel_in:
        steps = (f" Here the output is the harder one to round. x̂, the normalized values "
                 f"before γ and β, rounds with a relative error of {rel_hat:.1%}")
        if rel_hat <= rel_in:
            return text + steps + (f", no worse than the input: γ and β take it to "
                                   f"{rel_out:.1%}.")
        return text + steps + (f": normalizing alone makes it harder to round than the "
                               f"input, and γ and β take it to {rel_out:.1%}.")
    return text


def int8_text(table: pd.DataFrame, outliers: list[int]) -> str:
    rows = table.set_index("int8 scheme")
    zero = rows["values turned to 0"]
    rel = rows["relative error (tokens after the first)"]
    kept = (f"keeping feature{'s' if len(outliers) != 1 else ''} "
            f"{listed([str(f) for f in outliers])} in float"
            if outliers else "outlier features kept in float (none passes the threshold here, "
                             "so it is the whole-tensor scale again)")
    return (f"One scale for the whole tensor (its largest value in size / 127 = "
            f"{rows.iloc[0]['scale']}) "
            f"turns **{zero.iloc[0]:.0%}** of the values into 0, and the tokens after the first "
            f"come back with a relative error of **{rel.iloc[0]:.0%}**. A scale per token: "
            f"{zero.iloc[1]:.0%} zeros, {rel.iloc[1]:.1%} error. One scale, {kept}: "
            f"{zero.iloc[2]:.0%} zeros, {rel.iloc[2]:.1%} error.")
