"""Inside a real LLM: SmolLM2-135M-Instruct, a pre-norm decoder with RMSNorm, on a prompt the
learner types.

Everything the page says about the model is computed here from the run, for the prompt on screen:

- :func:`analyze` runs the prompt once (:func:`lnviz.models.smollm2`) and keeps what the page
  draws of it (:class:`Analysis`): the next-token prediction, the massive activation, the
  residual stream's size where each block's first RMSNorm reads it, the attention sinks.
- **Massive activations** (Sun et al. 2024): one value of the first token grows to hundreds and
  then (from block 12 on, in prompts of two tokens or more) thousands of times the median;
  :class:`Massive` says where, and what RMSNorm makes of that token (its RMS, its output there,
  γ there).
- **Pre-norm against post-norm**: the residual stream's per-token RMS through depth here (the
  median token's, and the first token's, which carries the massive activation), against
  all-MiniLM-L6-v2's, whose stream is a LayerNorm's output after every layer
  (:func:`stream_rms`, :func:`encoder_stream_rms`).
- **Break a norm**: one RMSNorm's output replaced by its input (identity), by its input divided by
  a typical token's RMS frozen from another text, or by LayerNorm with the same γ; the next-token
  distribution and the loss on a reference text, before and after (:func:`break_norm`).
- **Attention sinks** (Xiao et al. 2024): the share of attention each block sends to the first
  token (:func:`sink_shares`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.analysis import (
    Broken,
    Prediction,
    Recorded,
    broken_norm,
    next_token_loss,
    norm_replacement,
    prediction,
    token_rms,
)
from lnviz.lessons.common import (
    BREAKS,
    BROKEN_AS,
    FROZEN_TEXT,
    REFERENCE_TEXT,
    REFERENCE_TEXTS,
    TOKEN_PLACES,
    Answer,
    apart,
    short,
    token_place,
)
from lnviz.limits import SMOLLM2_MAX_TOKENS
from lnviz.models.bert import stream_names as encoder_stream_names
from lnviz.models.llama import DecoderRun, SmolLM2, rms_norm_names, stream_names
from lnviz.terms import listed

__all__ = [
    "BREAKS",
    "BREAK_TOKEN_RUNS",
    "FROZEN_TEXT",
    "PRESETS",
    "REFERENCE_TEXT",
    "REFERENCE_TEXTS",
    "SURVIVES_OPTIONS",
    "SWEEP_TOKEN_RUNS",
    "TOKEN_RUNS",
    "Analysis",
    "Broken",
    "Massive",
    "Prediction",
    "Removals",
    "SinkLink",
    "analyze",
    "break_norm",
    "break_work",
    "encoder_stream_rms",
    "even_share",
    "gentlest_answer",
    "massive",
    "massive_answer",
    "norm_label",
    "prediction",
    "removals",
    "sink_link",
    "sink_link_text",
    "sink_shares",
    "sink_summary",
    "stream_rms",
    "sureness_answer",
    "survives_answer",
    "sweep_table",
    "sweep_work",
]

#: Prompts the page offers; the first is the default.
PRESETS = (
    "The capital of France is",
    "One, two, three, four,",
    "def add(a, b):\n    return",
    "<|im_start|>user\nWhat is the largest planet?<|im_end|>\n<|im_start|>assistant\n",
    "Layer normalization rescales every token so that",
)
def norm_label(name: str) -> str:
    """"block 3, before attention" for "model.layers.3.input_layernorm"."""
    if name == "model.norm":
        return "final, before the output head"
    _, _, i, part = name.split(".")
    where = "before attention" if part == "input_layernorm" else "before the feed-forward"
    return f"block {i}, {where}"


def encoder_stream_rms(run: Recorded) -> np.ndarray:
    """all-MiniLM-L6-v2's residual stream (post-LN: the output of the LayerNorm that ends each
    layer, after the embeddings' one): the median token's RMS, (n_layer + 1,)."""
    return np.median(token_rms(run, encoder_stream_names(), side="output"), axis=1)


def stream_rms(run: DecoderRun) -> tuple[np.ndarray, np.ndarray]:
    """The residual stream's per-token RMS where each block's first RMSNorm reads it, then where
    the final one does: (the median token's, the first token's), each (n_layer + 1,). The first
    token carries the massive activation, so an RMS over all tokens would be its alone."""
    per_token = token_rms(run, stream_names())  # (n_layer + 1, T)
    # the median token: one token's RMS, the lower middle one with an even count (the mean of
    # two would carry half the first token's massive value on a two-token prompt)
    typical = np.sort(per_token, axis=1)[:, (per_token.shape[1] - 1) // 2]
    return typical, per_token[:, 0]


@dataclass(frozen=True)
class Massive:
    """The largest value of the residual stream, block by block (where each block's first
    RMSNorm reads it), and what that RMSNorm makes of its token in the block where it peaks.

    Attributes:
        largest: (n_layer,) max |h| per block; ``token``/``feature``: where, per block.
        median: (n_layer,) median |h| per block.
        block: the block where max |h| is largest; ``value`` its signed value there.
        rms: that token's RMS there, √(mean h²): what its RMSNorm divides by.
        output: the RMSNorm's output at that feature; ``gamma`` its γ there.
        share: the share of that token's Σh² the one feature holds.
        tied: the tokens that tie with it for that largest value in that block (:data:`TIE`),
            itself first: a token that only repeats the tokens before it has the same hidden
            state.
        near: the other tokens whose largest |h| in that block comes within :data:`NEAR` of
            it, with their value in the same feature: (token, value) pairs.
    """

    largest: np.ndarray
    token: np.ndarray
    feature: np.ndarray
    median: np.ndarray
    block: int
    value: float
    rms: float
    output: float
    gamma: float
    share: float
    tied: tuple[int, ...] = ()
    near: tuple[tuple[int, float], ...] = ()


#: Tokens whose largest |h| lie within this relative distance of each other tie: a token that
#: repeats the one before it at the start of a prompt (two "↵") has the same hidden state up to
#: float32 rounding (1e-7 relative here), and its larger value is rounding's choice.
TIE = 1e-5
#: Tokens whose largest value comes this close to the peak (relatively) are named beside it.
NEAR = 0.05


def massive(run: DecoderRun, n_layer: int = 30) -> Massive:
    """:class:`Massive` of ``run``. Where tokens tie for the largest value (:data:`TIE`), the
    first of them holds it."""
    largest, token, feature, median, ties, peaks = [], [], [], [], [], []
    for i in range(n_layer):
        x = run.record(f"model.layers.{i}.input_layernorm").input[0].double()  # (T, C)
        per_token = x.abs().max(dim=1).values  # (T,)
        peaks.append(per_token)
        tied = [int(k) for k in torch.nonzero(per_token >= per_token.max() * (1 - TIE))[:, 0]]
        ties.append(tuple(tied))
        t = tied[0]
        f = int(x[t].abs().argmax())
        largest.append(float(x.abs().max()))
        token.append(t)
        feature.append(f)
        median.append(float(x.abs().median()))
    block = int(np.argmax(largest))
    record = run.record(f"model.layers.{block}.input_layernorm")
    t, f = token[block], feature[block]
    row = record.input[0, t].double()  # (C,)
    top = peaks[block]  # each token's largest |h| in that block, from the loop above
    close = torch.nonzero(top >= top.max() * (1 - NEAR))[:, 0].tolist()
    near = tuple((k, float(record.input[0, k, f])) for k in close if k not in ties[block])
    return Massive(np.array(largest), np.array(token), np.array(feature), np.array(median), block,
                   float(row[f]), float(row.square().mean().sqrt()),
                   float(record.output[0, t, f]), float(record.weight[f]),
                   float(row[f] ** 2 / row.square().sum()), ties[block], near)


def even_share(count: int) -> float:
    """The share of attention the first of ``count`` tokens would get, on average over the
    tokens after it, were each to spread its attention evenly over the tokens it may see
    (itself and those before it); 1 for a single token."""
    return float(np.mean([1 / (t + 1) for t in range(1, count)])) if count > 1 else 1.0


#: How many times the even share (:func:`even_share`) a first token's share must be for a
#: block to make it a sink (the sink link's reply uses the same bar).
SINK_OVER_EVEN = 1.5


def sink_summary(shares: np.ndarray, tokens: int, first: str) -> str:
    """Part 5's reading of its figure: per block ``shares`` (:func:`sink_shares` of a prompt of
    ``tokens`` tokens, at least two), in how many blocks the first token (``first``, as the page
    shows it) draws at least half of the later tokens' attention and at least
    :data:`SINK_OVER_EVEN` times the even share (half alone is an even share for two tokens),
    the block it draws most in, and, where no block reaches that, that it makes no sink."""
    count = len(shares)
    uniform = even_share(tokens)
    bar = max(0.5, SINK_OVER_EVEN * uniform)
    top = int(np.nanargmax(shares))
    above = int((shares >= bar).sum())
    return (f"Spread evenly over the tokens each one may see, the first token would get "
            f"{uniform:.0%} of the later tokens' attention on average. In {above} of {count} "
            f"blocks they send it at least {bar:.0%} (half, and at least {SINK_OVER_EVEN:g} "
            f"times that even share), on average over them and over the heads; block {top} "
            f"sends the first token, {first}, {shares[top]:.0%}."
            + (" On this prompt the first token is an attention sink." if above else
               " On this prompt no block makes the first token a sink."))


def sink_shares(run: DecoderRun) -> np.ndarray:
    """Per block, the share of attention the tokens after the first send to the first token,
    averaged over heads and over those tokens: (n_layer,). NaN for a one-token prompt."""
    attention = run.attention  # (n_layer, nh, T, T)
    if attention.shape[-1] < 2:
        return np.full(attention.shape[0], np.nan)
    return attention[:, :, 1:, 0].double().mean(dim=(1, 2)).numpy()


@dataclass(frozen=True, eq=False)
class SinkLink:
    """The massive activation and the attention sink in one block (where the prompt's stream
    peaks), on the prompt and on the other :data:`PRESETS` (Sun et al. 2024, section 4).

    Attributes:
        block, feature: the block, and the feature of its largest value.
        token: the prompt's token that holds it.
        texts: the prompt, then the other presets that open with another token; ``firsts`` their
            first tokens, all different.
        before: (C,) the prompt's first token entering the block's first RMSNorm.
        share: the share of that token's Σh² its one feature holds.
        after: (P, C) each text's first token leaving that RMSNorm.
        keys: (P, K) each text's first token's key (every key head side by side; at position 0
            the rotary embedding turns nothing).
        gamma_ratio: γ at the feature over the median |γ| of the RMSNorm.
        before_cosine, after_cosine, key_cosine: the smallest cosine similarity between the
            prompt's first token and another text's, entering the RMSNorm, leaving it (dividing
            by the RMS turns no vector; γ after it turns them a little) and as keys;
            ``second_cosine`` the same for the texts' second tokens entering the RMSNorm (NaN
            where a text has one token).
        lengths_before, lengths_after: the smallest and largest ‖h‖ of the texts' first tokens
            entering and leaving the RMSNorm: what the norm does to them.
        column: (T − 1,) the share of attention each later token of the prompt sends to the
            first in this block, the mean of the heads; ``uniform`` what an even spread over the
            tokens each one may see would give, on average.
    """

    block: int
    feature: int
    token: int
    texts: tuple[str, ...]
    firsts: tuple[str, ...]
    before: np.ndarray
    share: float
    after: np.ndarray
    keys: np.ndarray
    gamma_ratio: float
    before_cosine: float
    lengths_before: tuple[float, float]
    lengths_after: tuple[float, float]
    after_cosine: float
    key_cosine: float
    second_cosine: float
    column: np.ndarray
    uniform: float


def _cosines(rows: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of the first row with each of the others."""
    rows = F.normalize(rows.double(), dim=-1)
    return rows[1:] @ rows[0]


def _extent(values: torch.Tensor) -> tuple[float, float]:
    return float(values.min()), float(values.max())


def sink_link(model: SmolLM2, text: str) -> SinkLink:
    """:class:`SinkLink` for ``text``: its run and one run of each other preset whose first
    token is another (a text opening as the prompt does would match it trivially)."""
    runs = [model.run(text)]
    texts = [text]
    for other in (t for t in PRESETS if t != text):  # the prompt is run once, above
        run = model.run(other)
        if run.tokens[0] not in {r.tokens[0] for r in runs}:
            texts.append(other)
            runs.append(run)
    m = massive(runs[0], model.config.n_layer)
    block, feature = m.block, int(m.feature[m.block])
    name = f"model.layers.{block}.input_layernorm"
    records = [run.record(name) for run in runs]
    before = torch.stack([r.input[0, 0] for r in records]).double()  # (P, C)
    after = torch.stack([r.output[0, 0] for r in records])  # (P, C)
    keys = model.module.get_submodule(f"model.layers.{block}.self_attn.k_proj")(after)  # (P, K)
    seconds = [r.input[0, 1] for r in records if r.input.shape[1] > 1]
    second = (float(_cosines(torch.stack(seconds)).min())
              if len(seconds) > 1 and records[0].output.shape[1] > 1 else float("nan"))
    gamma = records[0].weight.double()
    column = runs[0].attention[block, :, 1:, 0].double().mean(dim=0)  # (T − 1,)
    count = len(runs[0].tokens)
    return SinkLink(
        block=block, feature=feature, token=int(m.token[block]), texts=tuple(texts),
        firsts=tuple(run.tokens[0] for run in runs),
        before=records[0].input[0, 0].double().numpy(),
        share=float(records[0].input[0, 0, feature].double() ** 2
                    / records[0].input[0, 0].double().square().sum()),
        after=after.double().numpy(), keys=keys.double().numpy(),
        gamma_ratio=float(gamma[feature].abs() / gamma.abs().median()),
        before_cosine=float(_cosines(before).min()),
        lengths_before=_extent(before.norm(dim=1)),
        lengths_after=_extent(after.double().norm(dim=1)),
        after_cosine=float(_cosines(after).min()), key_cosine=float(_cosines(keys).min()),
        second_cosine=second, column=column.numpy(),
        uniform=even_share(count))


def sink_link_text(link: SinkLink, shown: Callable[[str], str] = str) -> str:
    """What the four panels of the link show, in the link's numbers."""
    firsts = ", ".join(shown(t) for t in link.firsts)
    where = ("" if link.token == 0 else
             f" (On this prompt the block's largest value is token {link.token}'s, not the "
             "first token's: the panels follow the first token, as the other texts do.)")
    (b0, b1), (a0, a1) = apart(*link.lengths_before), apart(*link.lengths_after)
    text = (
        f"In block {link.block} the first token enters the RMSNorm with {link.share:.1%} of "
        f"its Σh² in feature {link.feature}, and whatever that first token is ({firsts}) it "
        f"already points the same way: the cosine similarity of the prompt's first token "
        f"with each other text's is at least {link.before_cosine:.5f} before the norm")
    if not np.isnan(link.second_cosine):
        text += (f", against as little as {short(link.second_cosine)} for the same texts' "
                 "second tokens")
    text += (
        ". Dividing by the RMS turns no vector (γ, multiplied in after it, turns them a "
        f"little: cosine at least {link.after_cosine:.5f} leaving the norm); what the norm does "
        f"is make their lengths alike too: ‖h‖ from {b0}–{b1} entering it to {a0}–{a1} "
        "leaving it")
    text += (
        f". γ at feature {link.feature} is {short(link.gamma_ratio)} times the median |γ|, "
        + ("so the spike leaves scaled down but still the largest value. "
           if int(np.abs(link.after[0]).argmax()) == link.feature else
           "so the spike leaves scaled down below the token's largest value. ")
        + f"Its key is as fixed (cosine at least {link.key_cosine:.5f}): a key every query of "
          "this block can find, whatever the text.")
    if link.column.size:
        text += (f" The later tokens send the first {link.column.mean():.0%} of their attention "
                 f"in this block, on average over the heads and the tokens (an even spread "
                 f"would give {link.uniform:.0%})"
                 + ("." if link.column.mean() >= SINK_OVER_EVEN * link.uniform else
                    ": on this prompt the first token draws no more than about an even share, "
                    "so here the spike and its fixed key make no sink."))
    return text + where


@dataclass(frozen=True, eq=False)
class Analysis:
    """What the page draws of one prompt: kept for the learner instead of the run it comes from,
    which at 255 tokens holds about 190 MB (every position's logits, 61 records, every block's
    attention) against a few kilobytes here.

    Attributes:
        tokens: the prompt's pieces.
        prediction: the most likely next tokens (:func:`prediction`).
        massive: the residual stream's largest values (:func:`massive`).
        stream: the median token's and the first token's RMS through depth (:func:`stream_rms`).
        sinks: each block's share of attention to the first token (:func:`sink_shares`).
    """

    tokens: tuple[str, ...]
    prediction: Prediction
    massive: Massive
    stream: tuple[np.ndarray, np.ndarray]
    sinks: np.ndarray


def analyze(model: SmolLM2, text: str) -> Analysis:
    """The prompt through the model once, and what the page reads of the run (a cache key of its
    own: the page caches this call), at most :data:`lnviz.limits.SMOLLM2_MAX_TOKENS` tokens
    (ValueError beyond, saying so)."""
    tokens, _ = model.tokenize(text)
    if len(tokens) > SMOLLM2_MAX_TOKENS:
        raise ValueError(f"this prompt is {len(tokens):,} tokens; the page runs at most "
                         f"{SMOLLM2_MAX_TOKENS} (every block's attention is computed, T² "
                         "numbers each): shorten it")
    run = model.run(text)
    return Analysis(tuple(run.tokens), prediction(run), massive(run), stream_rms(run),
                    sink_shares(run))


def break_norm(model: SmolLM2, text: str, name: str, how: str) -> Broken:
    """:class:`lnviz.analysis.Broken` for norm ``name`` replaced as ``how`` says
    (:data:`lnviz.lessons.common.BREAKS`), on ``text`` and :data:`REFERENCE_TEXT`, a frozen
    RMS and a fitted DyT read off :data:`FROZEN_TEXT`."""
    return broken_norm(model, text, name, how, reference=REFERENCE_TEXT, frozen=FROZEN_TEXT)


def perplexity(loss: float) -> float:
    """e^loss: the number of equally likely tokens the loss amounts to."""
    return math.exp(loss)


@dataclass(frozen=True)
class Removals:
    """Each RMSNorm broken in turn (as ``how`` says, :data:`BREAKS`), on the prompt and on
    :data:`REFERENCE_TEXTS`.

    Attributes:
        how: how each norm was broken; ``names``: the norms, in forward order.
        kl: (N,) KL(before ‖ after) of the next-token distribution after the prompt, in nats.
        same_top: (N,) whether the most likely next token stayed the same.
        loss: (N, S) each reference text's loss with that norm broken; ``loss_before`` (S,)
            with every norm in place.
    """

    how: str
    names: tuple[str, ...]
    kl: np.ndarray
    same_top: np.ndarray
    loss: np.ndarray
    loss_before: np.ndarray

    @property
    def mean_loss(self) -> np.ndarray:
        """(N,) the loss with each norm broken, the mean over the reference texts."""
        return self.loss.mean(axis=1)

    def at_most_worse(self, share: float = 0.1) -> int:
        """How many breaks leave the reference texts' mean loss at most ``share`` worse than
        with every norm in place (mean loss ≤ (1 + share)·mean loss before)."""
        return int((self.mean_loss <= (1 + share) * self.loss_before.mean()).sum())

    def worst(self, k: int = 3) -> list[int]:
        """The ``k`` norms whose break costs the most mean loss, costliest first."""
        return [int(i) for i in np.argsort(-self.mean_loss, kind="stable")[:k]]


#: What a place in the server's line counts for whole runs of the model (the first tokens'
#: runs): tokens through the model, all runs together.
TOKEN_RUNS = "SmolLM2 token-runs"
#: The same count for a broken norm (:func:`break_work`), paced apart: its runs with the break
#: start at the norm's block (:func:`lnviz.analysis.broken_norms`), about half a whole run's
#: work on average, so a pace measured on one would misjudge the other about two times over.
BREAK_TOKEN_RUNS = "SmolLM2 token-runs of a broken norm"
#: The same count for the norm sweep (:func:`sweep_work`), paced apart: a sweep's 124 runs of a
#: few tokens each are dominated by each run's fixed cost, which a broken norm's four runs do not
#: show, so a pace measured on one would misjudge the other several times over.
SWEEP_TOKEN_RUNS = "SmolLM2 token-runs in a norm sweep"


def sweep_table(sweeps: list[Removals]) -> pd.DataFrame:
    """Sweeps side by side, one row per way of breaking the norms: how many breaks keep the
    prompt's most likely next token and the mean loss at most 10% worse, and the three
    costliest norms with their mean loss."""
    rows = []
    for gone in sorted(sweeps, key=lambda g: list(BREAKS).index(g.how)):
        rows.append({
            "each norm": BROKEN_AS[gone.how],
            "next token kept": f"{int(gone.same_top.sum())} of {len(gone.names)}",
            "loss at most 10% worse": f"{gone.at_most_worse(0.1)} of {len(gone.names)}",
            "costliest (mean loss)": "; ".join(
                f"{norm_label(gone.names[k])} ({short(gone.mean_loss[k], 3)})"
                for k in gone.worst(3))})
    return pd.DataFrame(rows)


def sweep_work(prompt_tokens: int, reference_tokens: int, norms: int = 61) -> int:
    """The norm sweep's work (:func:`removals`), in tokens through the model: the prompt and the
    reference texts (``reference_tokens``, all of them) once as they are and once per norm
    broken. (A break's run starts at the norm's block, half the model on average: the sweep's
    pace, measured in these units, counts that in.)"""
    return (norms + 1) * (prompt_tokens + reference_tokens)


#: Part 1's question: how sure the model is of its most likely next token.
SURENESS_OPTIONS = ("under 25%", "25% to 50%", "50% to 75%", "over 75%")


def sureness_answer(prediction: Prediction, shown: Callable[[str], str] = str) -> Answer:
    """Which of :data:`SURENESS_OPTIONS` the most likely next token's probability falls in."""
    p = prediction.probabilities[0]
    option = SURENESS_OPTIONS[min(int(p // 0.25), 3)]
    # a whole percent would round 74.96% to the boundary it lies under: one more digit there
    said = f"{p:.1%}" if round(100 * p) in (25, 50, 75) else f"{p:.0%}"
    # exactly on a boundary (a quarter, a half, three quarters) both options that meet there hold
    accepted = ((SURENESS_OPTIONS[int(4 * p) - 1],) if 0 < p < 1 and 4 * p == int(4 * p)
                else ())
    return Answer(option, (
        f"The most likely next token is {shown(prediction.tokens[0])}, with probability "
        f"{said}; the five most likely hold {sum(prediction.probabilities):.0%} between them."),
        accepted)


#: Part 4's first question: does the prompt's most likely next token survive the break?
SURVIVES_OPTIONS = ("it stays", "it changes")


def massive_answer(run: Analysis, shown: Callable[[str], str] = str) -> Answer:
    """Which of :data:`lnviz.lessons.common.TOKEN_PLACES` holds the residual stream's largest
    value in ``run`` (where it peaks over the blocks), and what RMSNorm makes of that token.
    ``shown`` writes a token as the page shows it."""
    m = run.massive
    token = int(m.token[m.block])
    feature = int(m.feature[m.block])
    reason = (
        f"The residual stream's largest value peaks at block {m.block}: {short(m.value, 4)} in "
        f"feature {feature} of {shown(run.tokens[token])} (token {token}), "
        f"{short(m.largest[m.block] / m.median[m.block])} times the median |h| of "
        f"{short(m.median[m.block])}. That one feature holds {m.share:.1%} of its token's Σh²"
        + (f", so the token's RMS, {short(m.rms, 4)}, is almost that value alone divided by "
           f"√576 = 24. RMSNorm divides the whole token by it: feature {feature} leaves as "
           f"{short(m.output, 4)} (γ = {short(m.gamma, 3)} there), and the token's other "
           "features, divided by the same large RMS, come out small."
           if m.share > 0.9 else
           f"; the token's RMS is {short(m.rms, 4)}, and RMSNorm divides the whole token by "
           f"it: feature {feature} leaves as {short(m.output, 4)} (γ = {short(m.gamma, 3)} "
           "there)."))
    # with one token the first is also the last; tokens that tie for the value (a repeated
    # token, the same hidden state) hold it alike: each place is right
    count = len(run.tokens)
    place = token_place(token, count)
    accepted = tuple(dict.fromkeys(
        [TOKEN_PLACES[2]] * (count == 1)
        + [token_place(k, count) for k in (*m.tied, *(k for k, _ in m.near))
           if token_place(k, count) != place]))
    if len(m.tied) > 1:
        reason += (f" Tokens {listed([str(k) for k in m.tied])} tie for it (to a relative "
                   f"{TIE:g}): a token that only repeats the tokens before it has the same "
                   "hidden state, so each of their places is right.")
    if m.near:
        reason += (f" Close behind, within {NEAR:.0%}: "
                   + listed([f"token {k}'s {short(v, 4)}" for k, v in m.near])
                   + f" in the same feature {feature}: the massive activation sits on more than "
                     "one token here, and each of their places is right too.")
    return Answer(place, reason, accepted)


def survives_answer(broken: Broken, shown: Callable[[str], str] = str, *,
                    probabilities: bool = True) -> Answer:
    """Whether the prompt's most likely next token survives ``broken`` (one of
    :data:`SURVIVES_OPTIONS`), with the probabilities before and after (left out where
    ``probabilities`` is False: how likely the token was is part 1's question, still open)."""
    before, after = broken.before, broken.after
    top, as_ = shown(before.tokens[0]), f"with the norm {BROKEN_AS[broken.how]}"
    if not probabilities:  # part 1's figure names the token too: "the most likely next token"
        reason = (f"The most likely next token stays {as_}." if broken.same_top else
                  f"The most likely next token gives way to {shown(after.tokens[0])} {as_}.")
    elif broken.same_top:
        reason = (f"{top} stays the most likely next token: {before.probabilities[0]:.0%} "
                  f"before, {after.probabilities[0]:.0%} {as_}.")
    else:
        reason = (f"{top} ({before.probabilities[0]:.0%} before) gives way to "
                  f"{shown(after.tokens[0])} ({after.probabilities[0]:.0%}) {as_}.")
    return Answer(SURVIVES_OPTIONS[0 if broken.same_top else 1], reason)


def gentlest_answer(ladder: dict[str, Broken], kept_shown: Collection[str] = BREAKS) -> Answer:
    """Which of :data:`BREAKS` moves the prompt's next-token distribution least (the smallest
    KL divergence) among the ``ladder`` of one norm's four replacements, with every rung's KL
    and its loss on the reference text, and whether its top token stayed for the rungs in
    ``kept_shown`` (the others' are questions of their own, still open)."""
    ranked = sorted(ladder, key=lambda how: ladder[how].kl)
    loss = next(iter(ladder.values())).loss_before
    rungs = "; ".join(
        f"{how}: {short(ladder[how].kl)} nats, "
        + (f"top token {'kept' if ladder[how].same_top else 'lost'}, " if how in kept_shown
           else "")
        + f"loss {short(ladder[how].loss_after, 3)}"
        for how in BREAKS if how in ladder)
    return Answer(ranked[0], (
        f"The next-token distribution moves least with the norm {BROKEN_AS[ranked[0]]} and "
        f"most with it {BROKEN_AS[ranked[-1]]}, measured by the KL divergence from the "
        f"model's own: {rungs} (the reference text's loss is {short(loss, 3)} with the norm "
        "in place)."))


def break_work(prompt_tokens: int, reference_tokens: int) -> int:
    """One broken norm's work (:func:`break_norm`), in tokens through the model: the prompt and
    the reference text, each with and without the break (a run with the break counted whole,
    though it starts at the norm's block: :data:`BREAK_TOKEN_RUNS` is paced apart)."""
    return 2 * (prompt_tokens + reference_tokens)


def removals(model: SmolLM2, text: str, names: tuple[str, ...] | None = None,
             progress: Callable[[float, str], None] | None = None, how: str = "removed",
             references: tuple[str, ...] = REFERENCE_TEXTS) -> Removals:
    """:class:`Removals` for ``names`` (every RMSNorm by default), each broken as ``how`` says:
    one run of the prompt and of each of ``references`` per norm. ``progress(fraction,
    message)`` is called before each norm."""
    names = tuple(names or rms_norm_names(model.config.n_layer))
    prompt = model.run(text, last_only=True)  # the next token reads the last position alone
    texts = [model.run(reference) for reference in references]
    frozen = model.run(FROZEN_TEXT) if how in ("frozen RMS", "fitted DyT") else None
    plain = prompt.logits[-1].double().log_softmax(-1)
    kl, same, loss = [], [], []
    for k, name in enumerate(names):
        if progress is not None:
            progress(k / len(names), f"{norm_label(name)}: {BROKEN_AS[how]}")
        # each break run from the norm's block on (SmolLM2.rerun): the blocks before it
        # compute what they computed in the runs above
        replace = {name: norm_replacement(model, name, how, frozen)}
        broken = model.rerun(prompt, replace, last_only=True)[-1].double().log_softmax(-1)
        kl.append(float((plain.exp() * (plain - broken)).sum()))
        same.append(int(plain.argmax()) == int(broken.argmax()))
        loss.append([next_token_loss(run, model.rerun(run, replace)) for run in texts])
    if progress is not None:
        progress(1.0, "done")
    return Removals(how, names, np.array(kl), np.array(same), np.array(loss),
                    np.array([next_token_loss(run) for run in texts]))
