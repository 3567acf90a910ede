"""Inside Gemma 3: the facts behind the page, from runs of Gemma 3 270M (lnviz.models.gemma3).

Gemma 3 wraps each sublayer in two RMSNorms, one before it and one after it (the "sandwich"
that Peri-LN studies), normalizes each attention head's queries and keys (QK-norm), and stores
every norm's multiplier as 1 + γ. Each function here measures one of those on a prompt:

- :func:`sandwich`: per block, the size of the stream, of each sublayer's raw output and of
  what its post-norm adds to the stream (:func:`sandwich_answer`: which sets that size);
- :func:`design_streams`: the residual stream through depth in three designs — post-LN
  (all-MiniLM-L6-v2), pre-norm (SmolLM2) and sandwich (Gemma 3) — on the same text;
- :func:`qk_norm_removed`: the attention logits' largest size per block with q_norm and k_norm
  as trained and replaced by the identity;
- :func:`offset_runs`: what a reader that adds the 1 of 1 + γ again, or forgets it, does to
  the next token and to a reference text's loss;
- :func:`final_gamma`: the final norm's γ, where it is smallest and what it does to the logits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.analysis import BREAK_KINDS, Broken, broken_norms, next_token_loss, token_rms
from lnviz.lessons.common import BROKEN_AS, FROZEN_TEXT, PERI_LN, REFERENCE_TEXT, Answer, short
from lnviz.limits import GEMMA3_MAX_TOKENS
from lnviz.models.bert import MiniLM
from lnviz.models.bert import stream_names as encoder_stream_names
from lnviz.models.gemma import Gemma3, Gemma3Config
from lnviz.models.llama import DecoderRun, SmolLM2, rope, stream_names
from lnviz.terms import listed

__all__ = [
    "BREAK_TOKEN_RUNS",
    "DESIGNS",
    "GROWTH_OPTIONS",
    "KL_FLOOR",
    "LADDER_OPTIONS",
    "OFFSETS",
    "OFFSET_OPTIONS",
    "PRESETS",
    "QK_OPTIONS",
    "SIZE_OPTIONS",
    "SUBLAYERS",
    "TOKEN_RUNS",
    "WHERE_OPTIONS",
    "Analysis",
    "FinalGamma",
    "Ladder",
    "Offset",
    "QKNorm",
    "Sandwich",
    "analyze",
    "attention_logits",
    "checked_tokens",
    "design_streams",
    "final_gamma",
    "growth_answer",
    "ladder",
    "ladder_answer",
    "ladder_table",
    "ladder_work",
    "logit_peaks",
    "norm_label",
    "offset_answer",
    "offset_runs",
    "qk_answer",
    "qk_norm_removed",
    "sandwich",
    "sandwich_answer",
    "sandwich_caption",
    "where_answer",
]

#: Prompts the page offers; the first is the default.
PRESETS = (
    "The capital of France is",
    "def add(a, b):\n    return",
    "<start_of_turn>user\nWhat is the largest planet?<end_of_turn>\n<start_of_turn>model\n",
    "Layer normalization rescales every token so that",
    "Der Himmel über Berlin ist",
)
#: The queue's unit for this page's runs (lnviz.ui.jobs): tokens through the model.
TOKEN_RUNS = "Gemma 3 token-runs"
#: The same count for part 6's breaks (:func:`ladder_work`), paced apart: their runs start at
#: the norm's block and share their output heads (:func:`lnviz.analysis.broken_norms`), about
#: half the time of as many whole runs, so a pace measured on one would misjudge the other.
BREAK_TOKEN_RUNS = "Gemma 3 token-runs of broken norms"
#: The two sublayers of a block, as the page names them.
SUBLAYERS = ("attention", "feed-forward")
_POST = {"attention": "post_attention_layernorm", "feed-forward": "post_feedforward_layernorm"}
_WHERE = {"input_layernorm": "before attention", "self_attn.q_norm": "on attention's queries",
          "self_attn.k_norm": "on attention's keys", "post_attention_layernorm": "after attention",
          "pre_feedforward_layernorm": "before the feed-forward",
          "post_feedforward_layernorm": "after the feed-forward"}


def norm_label(name: str) -> str:
    """"block 3, after attention" for "model.layers.3.post_attention_layernorm"."""
    if name == "model.norm":
        return "final, before the output head"
    _, _, block, part = name.split(".", 3)
    return f"block {block}, {_WHERE[part]}"


def _median_rms(x: torch.Tensor) -> float:
    """The median token's RMS of a record's (1, T, C) tensor (with an even count of tokens,
    the mean of the two middle ones, as :func:`numpy.median` and the stream's take it)."""
    return float(np.median(x[0].double().square().mean(-1).sqrt().numpy()))




# --- 1. The sandwich ----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Sandwich:
    """Per block, sizes of the median token (RMS over the 640 features) in one run.

    Attributes:
        stream: the residual stream entering each block, then entering the final norm,
            (n_layer + 1,).
        raw: {sublayer: its output before its post-norm, (n_layer,)}.
        added: {sublayer: what its post-norm adds to the stream, (n_layer,)}.
        gamma: {sublayer: the RMS of its post-norm's multiplier 1 + γ, (n_layer,)}.
    """

    stream: np.ndarray
    raw: dict[str, np.ndarray]
    added: dict[str, np.ndarray]
    gamma: dict[str, np.ndarray]


def sandwich(model: Gemma3, run: DecoderRun) -> Sandwich:
    """:class:`Sandwich` of ``run``: the post-norms' inputs are the sublayers' raw outputs, their
    outputs what the block adds to the stream."""
    layers = range(model.config.n_layer)
    stream = np.median(token_rms(run, stream_names(model.config.n_layer)), axis=1)
    raw, added, gamma = {}, {}, {}
    for sublayer, post in _POST.items():
        records = [run.record(f"model.layers.{i}.{post}") for i in layers]
        raw[sublayer] = np.array([_median_rms(r.input) for r in records])
        added[sublayer] = np.array([_median_rms(r.output) for r in records])
        gamma[sublayer] = np.array([float(r.weight.double().square().mean().sqrt())
                                    for r in records])
    return Sandwich(stream, raw, added, gamma)


@dataclass(frozen=True, eq=False)
class Analysis:
    """What the page keeps of one run of the prompt (a run at 255 tokens holds about 160 MB):
    its pieces, most likely next tokens and :class:`Sandwich`."""

    tokens: tuple[str, ...]
    top: list[tuple[str, float]]
    sandwich: Sandwich


def checked_tokens(model: Gemma3, text: str) -> int:
    """How many tokens ``text`` is, <bos> included; ValueError, saying so, beyond
    :data:`lnviz.limits.GEMMA3_MAX_TOKENS`."""
    count = len(model.tokenize(text)[0])
    if count > GEMMA3_MAX_TOKENS:
        raise ValueError(f"this prompt is {count:,} tokens; the page runs at most "
                         f"{GEMMA3_MAX_TOKENS} (each of the 109 norms' inputs and outputs is "
                         "kept for every token): shorten it")
    return count


def analyze(model: Gemma3, text: str) -> Analysis:
    """The prompt through the model once, and what the page reads of the run (at most
    :data:`lnviz.limits.GEMMA3_MAX_TOKENS` tokens, :func:`checked_tokens`)."""
    checked_tokens(model, text)
    run = model.run(text, last_only=True)
    return Analysis(tuple(run.tokens), run.top(5), sandwich(model, run))



#: How large what a sublayer adds to the stream is (part 1's question): its RMS, binned.
SIZE_OPTIONS = ("under 0.5", "between 0.5 and 2", "over 2")


def sandwich_answer(s: Sandwich, block: int, sublayer: str = "feed-forward",
                    eps: float = Gemma3Config.eps) -> Answer:
    """Which of :data:`SIZE_OPTIONS` the RMS of what ``sublayer`` adds to the stream in
    ``block`` falls in, and why: the post-norm divides each token by its own RMS, so the raw
    output's size drops out (up to ε), and multiplies feature by feature by 1 + γ, so what is
    added is the RMS of 1 + γ times a factor set by how the raw output's direction meets it."""
    added = s.added[sublayer][block]
    raw, gamma = s.raw[sublayer][block], s.gamma[sublayer][block]
    option = SIZE_OPTIONS[0 if added < 0.5 else 1 if added <= 2 else 2]
    reason = (
        f"In block {block} what the {sublayer} adds to the stream has an RMS of {short(added)} "
        f"(median token), {short(added / raw)} times its raw output's {short(raw)}. The "
        "post-norm divides each token by the token's own RMS, so the raw output's size drops "
        f"out (twice the raw output would add the same, wherever its RMS is well above "
        f"√ε = {short(eps ** 0.5)}), and then multiplies feature "
        f"by feature by its 1 + γ, whose RMS is {short(gamma)}. What is added is that RMS of "
        "1 + γ times a factor set by how the raw output's direction meets 1 + γ (large "
        f"multipliers on the features it uses make it larger): here {short(added / gamma)}. "
        "1 + γ reshapes the "
        "direction too, feature by feature: the raw output gives the norm a direction, and "
        "the post-norm's 1 + γ decides, with it, what the block writes.")
    return Answer(option, reason)


def sandwich_caption(s: Sandwich, eps: float) -> str:
    """What part 1's figure shows, and by how much a sublayer's raw output misjudges what it
    adds to the stream (the largest ratio either way, over both sublayers and all blocks);
    where a raw output's RMS comes near √ε, ε keeps the post-norm from scaling it all the way
    to RMS 1, and the caption says in which blocks."""
    ratios = np.concatenate([s.added[k] / s.raw[k] for k in SUBLAYERS])
    worst = float(max(ratios.max(), 1 / ratios.min()))
    near = sorted({i for k in SUBLAYERS for i in np.flatnonzero(s.raw[k] < 10 * eps ** 0.5)})
    follows = np.concatenate([s.added[k] / s.gamma[k] for k in SUBLAYERS])
    return (
        "Dotted: each sublayer's raw output; solid: what its post-norm adds to the stream; "
        "dashed: the RMS of that post-norm's 1 + γ (the same for every prompt). A pre-norm "
        "block adds its raw output as it is. Here the raw output's size drops out"
        + (f" (but in block{'s' * (len(near) > 1)} {listed([str(i) for i in near])}, where "
           f"its RMS is within 10 times √ε = {short(eps ** 0.5)} and ε keeps the norm from "
           "scaling it all the way up)" if near else "")
        + f", and what is added is {short(follows.min())} to {short(follows.max())} times "
          "the RMS of the post-norm's 1 + γ, by how the raw output's direction meets 1 + γ. "
          "So “the "
          "attention output” of a sandwich model means what its post-norm puts out: the raw "
          f"output's size misjudges it here by up to {short(worst)} times.")


# --- 2. Three designs ---------------------------------------------------------------------------

#: The three designs, each by the model that has it.
DESIGNS = ("post-LN (all-MiniLM-L6-v2)", "pre-norm (SmolLM2)", "sandwich (Gemma 3)")
GROWTH_OPTIONS = DESIGNS


def design_streams(minilm: MiniLM, smollm2: SmolLM2, gemma: Gemma3, text: str
                   ) -> dict[str, np.ndarray]:
    """The median ordinary token's RMS in each design's residual stream through depth on
    ``text``, by :data:`DESIGNS`: MiniLM's after each LayerNorm that writes it (post-LN), the
    decoders' where each block's first norm reads it, then where the final norm does.

    Ordinary: the tokens after the first, and before MiniLM's closing [SEP]. A model's first
    token ([CLS], <bos>, or SmolLM2's first word) carries the massive activations, and in a
    one- or two-token text it would be the median (the 34th review: "Hello" made SmolLM2's
    "median token" its first, whose stream ends ten times above the others'). A text with no
    ordinary token in some model is refused."""
    runs = {DESIGNS[0]: token_rms(minilm.run(text), encoder_stream_names(),
                                  side="output")[:, 1:-1]}
    for design, model in ((DESIGNS[1], smollm2), (DESIGNS[2], gemma)):
        names = stream_names(model.config.n_layer)
        runs[design] = token_rms(model.run(text, last_only=True), names)[:, 1:]
    empty = [design for design, rms in runs.items() if rms.shape[1] == 0]
    if empty:
        raise ValueError(f"{listed(empty)} read{'s' * (len(empty) == 1)} this text as no "
                         "token besides the first: type a few more words to compare the three")
    return {design: np.median(rms, axis=1) for design, rms in runs.items()}


def post_norm_scale(gemma: Gemma3) -> float:
    """The median RMS of the 36 post-norms' 1 + γ (after attention and after the feed-forward,
    in every block): the size each sandwich block's additions are scaled to."""
    return float(np.median([
        float(gemma.weights[f"model.layers.{i}.{norm}.weight"].double().square().mean().sqrt())
        for i in range(gemma.config.n_layer)
        for norm in ("post_attention_layernorm", "post_feedforward_layernorm")]))


def growth_answer(streams: dict[str, np.ndarray], post_scale: float) -> Answer:
    """Which design's stream grows most from its first point to its last (by ratio), on this
    text; why each design sets its size where it does, and what the comparison cannot say
    (three models trained differently, not one placement changed)."""
    growth = {design: float(s[-1] / s[0]) for design, s in streams.items()}
    most = max(growth, key=growth.get)
    reason = ("From the first point to the last, the median ordinary token's RMS (the first "
              "token left out) goes "
              + "; ".join(f"from {short(streams[d][0])} to {short(streams[d][-1])} in {d} "
                          f"(×{short(growth[d])})" for d in DESIGNS)
              + ". Which grows most depends on the text (repeated words, for one, swell "
                "SmolLM2's stream); what each design fixes is where the size is set. Post-LN "
                "normalizes the stream itself after every layer, so its size is whatever that "
                "LayerNorm's γ and β make it, layer after layer. A pre-norm decoder normalizes "
                "only what each sublayer reads, and the sums pile up at whatever size the "
                "sublayers write. The sandwich normalizes what each sublayer writes as well, "
                "then scales it by the post-norm's 1 + γ (their median RMS here: "
                f"{short(post_scale)}), and never normalizes the stream itself. So Gemma's "
                "growth is what training set those weights to, not the placement alone: "
                f"{PERI_LN.cited} trains the placements side by side and finds norms on both "
                "sides keep the stream's variance growth more balanced than pre-norm. These "
                "are three different models, each as trained.")
    return Answer(most, reason)


# --- 3. QK-norm ---------------------------------------------------------------------------------


def attention_logits(model: Gemma3, run: DecoderRun, block: int) -> torch.Tensor:
    """Block ``block``'s attention logits (1, nh, T, T), from what the run's q_norm and k_norm
    put out: q·k times the query scale after the rotary embedding, −inf where a query may not
    look (later keys, and keys out of a sliding window). Their softmax is ``run.attention``."""
    attention = model.module.model.layers[block].self_attn
    q = rope(run.record(f"model.layers.{block}.self_attn.q_norm").output, attention.theta)
    k = rope(run.record(f"model.layers.{block}.self_attn.k_norm").output, attention.theta)
    logits = (q @ k.transpose(-2, -1)) * model.config.query_scale  # (1, nh, T, T)
    t = torch.arange(logits.shape[-1])
    seen = t[None, :] <= t[:, None]  # (T, T): keys at or before the query
    if attention.window is not None:
        seen &= t[None, :] > t[:, None] - attention.window
    return logits.masked_fill(~seen, float("-inf"))


def logit_peaks(model: Gemma3, run: DecoderRun) -> np.ndarray:
    """Per block, the largest |attention logit| over the heads and the pairs a query may see
    (:func:`attention_logits`): (n_layer,)."""
    peaks = []
    for block in range(model.config.n_layer):
        logits = attention_logits(model, run, block)
        peaks.append(float(logits[logits.isfinite()].abs().max()))
    return np.array(peaks)


@dataclass(frozen=True, eq=False)
class QKNorm:
    """The prompt with q_norm and k_norm as trained and replaced by the identity in every block.

    Attributes:
        trained, without: per block, the largest |attention logit| (:func:`logit_peaks`).
        top_before, top_after: the three most likely next tokens, with probabilities.
        loss_before, loss_after: the reference text's mean loss, nats per token.
    """

    trained: np.ndarray
    without: np.ndarray
    top_before: list[tuple[str, float]]
    top_after: list[tuple[str, float]]
    loss_before: float
    loss_after: float


def _identity_qk(model: Gemma3) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    return {name: (lambda x: x) for name in model.norm_names
            if name.endswith(("q_norm", "k_norm"))}


def qk_norm_removed(model: Gemma3, text: str) -> QKNorm:
    """:class:`QKNorm` of ``text`` (four runs: the prompt and :data:`REFERENCE_TEXT`, each
    with and without QK-norm)."""
    identity = _identity_qk(model)
    plain = model.run(text, last_only=True)
    bare = model.run(text, replace=identity, last_only=True)
    return QKNorm(logit_peaks(model, plain), logit_peaks(model, bare), plain.top(3),
                  bare.top(3), next_token_loss(model.run(REFERENCE_TEXT)),
                  next_token_loss(model.run(REFERENCE_TEXT, replace=identity)))


#: In how many blocks the largest attention logit grows without QK-norm (part 3's question).
QK_OPTIONS = ("in every block", "in most blocks, not all", "in half of them or fewer")


def qk_answer(qk: QKNorm, shown: Callable[[str], str] = str) -> Answer:
    """In how many blocks the largest attention logit grows once q_norm and k_norm are gone,
    how far, and what that does to the prediction and the loss."""
    grows = qk.without > qk.trained
    count, blocks = int(grows.sum()), len(grows)
    option = QK_OPTIONS[0 if count == blocks else 1 if 2 * count > blocks else 2]
    ratio = qk.without / qk.trained
    most, least = int(np.argmax(ratio)), int(np.argmin(ratio))
    reason = (
        f"Without q_norm and k_norm the largest |logit| grows in {count} of {blocks} blocks: "
        f"the most in block {most}, from {short(qk.trained[most])} to "
        f"{short(qk.without[most])} ({short(ratio[most])}×)"
        + (f", while in block {least} it falls from {short(qk.trained[least])} to "
           f"{short(qk.without[least])}" if ratio[least] < 1 else "")
        + ". Each head's query and key leave their norm with RMS 1 times a learned 1 + γ, "
          "so a logit is at most 256 × max|1 + γ_q| × max|1 + γ_k| / 16 whatever the input; "
          "without the norms it is whatever the projections make of the stream, larger or "
          "smaller. "
        + f"The next token goes from {_tops(qk.top_before, shown)} to "
          f"{_tops(qk.top_after, shown)}, and the "
          f"reference text's loss from {short(qk.loss_before, 3)} to "
          f"{short(qk.loss_after, 3)} nats per token: the model was trained with the norms, "
          "and the scale they set is part of what its weights expect.")
    return Answer(option, reason)


def _tops(top: list[tuple[str, float]], shown: Callable[[str], str]) -> str:
    """The most likely next tokens as a sentence lists them: "`␣the` (19%), …"."""
    return ", ".join(f"{shown(token)} ({p:.0%})" for token, p in top)


# --- 4. 1 + γ -----------------------------------------------------------------------------------

#: The three ways a reader can apply a Gemma norm's stored weight: what each multiplies by, as
#: the offset added to what the file stores (1 + γ).
OFFSETS = {"as the file stores it, 1 + γ": 0.0, "the 1 added again, 2 + γ": 1.0,
           "the 1 forgotten, γ alone": -1.0}


@dataclass(frozen=True)
class Offset:
    """The model with every norm's multiplier shifted as :data:`OFFSETS` says."""

    how: str
    top: list[tuple[str, float]]
    loss: float


def _shifted(model: Gemma3, offset: float) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    def norm(weight: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda x: F.rms_norm(x, (x.shape[-1],), weight + offset, model.config.eps)

    return {name: norm(model.weights[f"{name}.weight"]) for name in model.norm_names}


def offset_runs(model: Gemma3, text: str) -> list[Offset]:
    """The prompt's next token and :data:`REFERENCE_TEXT`'s loss with all 109 norms
    multiplying as each of :data:`OFFSETS` says."""
    out = []
    for how, offset in OFFSETS.items():
        replace = _shifted(model, offset) if offset else None
        out.append(Offset(how, model.run(text, replace=replace, last_only=True).top(3),
                          next_token_loss(model.run(REFERENCE_TEXT, replace=replace))))
    return out


#: What adding the 1 again does to the reference text's loss (part 4's question).
OFFSET_OPTIONS = ("about the same (within 10%)", "worse, but less than twice",
                  "more than twice as bad")


def offset_answer(runs: list[Offset], shown: Callable[[str], str] = str) -> Answer:
    """How much worse the reference loss gets when the 1 is added again, with the three runs'
    numbers."""
    stored, again, forgot = runs
    ratio = again.loss / stored.loss
    option = OFFSET_OPTIONS[0 if ratio <= 1.1 else 1 if ratio < 2 else 2]
    reason = (
        f"The reference text costs {short(stored.loss, 3)} nats per token as the file says, "
        f"{short(again.loss, 3)} with the 1 added again ({short(ratio)}×) and "
        f"{short(forgot.loss, 3)} with it forgotten. The next token: "
        f"{_tops(stored.top, shown)} as stored; {_tops(again.top, shown)} with 2 + γ; "
        f"{_tops(forgot.top, shown)} with γ alone. "
        "Gemma's norms learn γ starting from 0 and multiply by 1 + γ; llama.cpp's converter "
        "writes "
        "1 + γ into the file, so a reader of the file multiplies by what it finds, while "
        "transformers subtracts the 1 on loading and adds it back in the forward. A reader "
        "that mixes the two conventions shifts every one of the 109 multipliers by 1.")
    return Answer(option, reason)


# --- 5. The final norm's γ ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FinalGamma:
    """The final norm's multiplier and the stream it reads.

    Attributes:
        gamma: the final norm's 1 + γ, (C,).
        peak: per feature, the largest |x| over the tokens entering the final norm, (C,).
        smallest: the feature of the smallest multiplier.
        rank: where that feature's peak ranks among the features' (0: the largest).
        share: that feature's share of the last token's Σx² entering the norm.
        top_after, loss_before, loss_after: the next tokens and the reference loss with every
            multiplier set to their median, against the model's own loss.
        top_one, loss_one: the same with only the smallest multiplier raised to the median.
        top_rest, loss_rest: ... with every other multiplier set to the median, the smallest
            kept: which of the two changes does the damage.
    """

    gamma: np.ndarray
    peak: np.ndarray
    smallest: int
    rank: int
    share: float
    top_after: list[tuple[str, float]]
    loss_before: float
    loss_after: float
    top_one: list[tuple[str, float]]
    loss_one: float
    top_rest: list[tuple[str, float]]
    loss_rest: float


def final_gamma(model: Gemma3, text: str) -> FinalGamma:
    """:class:`FinalGamma` of ``text``: three runs with the final norm's multiplier changed
    (all to the median; the smallest alone raised to it; all others but the smallest), each on
    the prompt and :data:`REFERENCE_TEXT`."""
    run = model.run(text, last_only=True)
    gamma = model.weights["model.norm.weight"]
    x = run.record("model.norm").input[0].double()  # (T, C)
    peak = x.abs().amax(dim=0).numpy()
    smallest = int(gamma.argmin())
    share = float(x[-1, smallest].square() / x[-1].square().sum())
    median = float(gamma.median())
    one = gamma.clone()
    one[smallest] = median
    rest = torch.full_like(gamma, median)
    rest[smallest] = gamma[smallest]
    changed = []
    for weight in (torch.full_like(gamma, median), one, rest):
        replace = {"model.norm": (lambda w: lambda x: F.rms_norm(x, (x.shape[-1],), w,
                                                                 model.config.eps))(weight)}
        changed += [model.run(text, replace=replace, last_only=True).top(3),
                    next_token_loss(model.run(REFERENCE_TEXT, replace=replace))]
    return FinalGamma(gamma.double().numpy(), peak, smallest, int((peak > peak[smallest]).sum()),
                      share, changed[0], next_token_loss(model.run(REFERENCE_TEXT)), changed[1],
                      *changed[2:])


#: Where the final norm's multiplier is smallest (part 5's question).
WHERE_OPTIONS = ("at the feature where the stream's largest value sits",
                 "at a feature the stream hardly uses", "at no feature in particular")


def where_answer(g: FinalGamma, shown: Callable[[str], str] = str) -> Answer:
    """Which of :data:`WHERE_OPTIONS` the smallest multiplier's feature is, and what setting
    every multiplier to the median does."""
    option = WHERE_OPTIONS[0 if g.rank == 0 else 1 if g.peak[g.smallest] < np.median(g.peak)
                           else 2]
    median = float(np.median(g.gamma))
    reason = (
        f"The final norm multiplies feature {g.smallest} by {short(g.gamma[g.smallest])}, its "
        f"smallest (the median is {short(median)}, the largest {short(g.gamma.max())}). "
        f"Feature {g.smallest}'s largest |x| entering the norm is {short(g.peak[g.smallest])}, "
        + ("the largest of all 640 features'" if g.rank == 0 else
           f"number {g.rank + 1} by size of the 640 features'")
        + f" (their median is {short(float(np.median(g.peak)))}). The reference text costs "
          f"{short(g.loss_before, 3)} nats per token as trained. Set every multiplier to the "
          f"median: {short(g.loss_after, 3)}, and the next token becomes "
          f"{_tops(g.top_after, shown)}. Raise feature {g.smallest}'s alone to the median: "
          f"{short(g.loss_one, 3)} ({_tops(g.top_one, shown)}). Set every other one to the "
          f"median and keep feature {g.smallest}'s: {short(g.loss_rest, 3)} "
          f"({_tops(g.top_rest, shown)}). In the last token, the one whose next token is "
          f"predicted, feature {g.smallest} holds {g.share:.1%} of Σx² entering the norm"
          + (": dividing by the RMS shrinks the whole vector alike, so after the norm that "
             "feature is still the token's largest by far, and its small multiplier is what "
             "keeps it from deciding the logits." if g.share >= 0.5
             and g.loss_one > 2 * g.loss_before and g.loss_rest < g.loss_one / 2 else "."))
    return Answer(option, reason)


# --- 6. Breaking the norms on both sides of a sublayer ----------------------------------------

#: Each sublayer's norm before it and after it.
_AROUND = {"attention": ("input_layernorm", "post_attention_layernorm"),
           "feed-forward": ("pre_feedforward_layernorm", "post_feedforward_layernorm")}


@dataclass(frozen=True, eq=False)
class Ladder:
    """The norm before a sublayer and the norm after it, each broken the four ways of
    :data:`lnviz.analysis.BREAK_KINDS`, one at a time.

    Attributes:
        block, sublayer: where.
        names: (the norm before, the norm after).
        broken: {name: {how: :class:`lnviz.analysis.Broken`}}.
    """

    block: int
    sublayer: str
    names: tuple[str, str]
    broken: dict[str, dict[str, Broken]]

    def typical_kl(self, name: str) -> float:
        """The geometric mean of the four breaks' KL divergences: how much breaking this norm
        moves the prediction, typically, with no one way deciding it. A KL under
        :data:`KL_FLOOR` counts as the floor (the 34th review: two breaks that changed nothing
        but float32 rounding, 1e-9 nats, set a geometric mean on their own)."""
        kls = [max(b.kl, KL_FLOOR) for b in self.broken[name].values()]
        return float(np.exp(np.mean(np.log(kls))))

    def typical_loss(self, name: str) -> float:
        """The mean change of the reference text's loss over the four breaks of this norm
        (nats per token; below 0 where the breaks help on average)."""
        return float(np.mean([b.loss_after - b.loss_before for b in self.broken[name].values()]))


#: Below this KL (nats) a break changes nothing measurable: the same run repeated differs by
#: float32 rounding, about 1e-9 nats here, and the smallest changes a learner could read in
#: the top tokens' percentages are far above it.
KL_FLOOR = 1e-6
#: Two sides whose typical harm is within this factor of each other are "about the same", and
#: so are reference-loss changes both smaller than :data:`LOSS_FLOOR` nats per token.
SAME_WITHIN = 3.0
LOSS_FLOOR = 0.01


def ladder(model: Gemma3, text: str, block: int, sublayer: str) -> Ladder:
    """:class:`Ladder` of ``sublayer`` in ``block`` on ``text``: 8 breaks, each run on the
    prompt and :data:`REFERENCE_TEXT` (a frozen RMS and a fitted DyT read off
    :data:`FROZEN_TEXT`)."""
    names = tuple(f"model.layers.{block}.{norm}" for norm in _AROUND[sublayer])
    return Ladder(block, sublayer, names, broken_norms(
        model, text, names, BREAK_KINDS, reference=REFERENCE_TEXT, frozen=FROZEN_TEXT))


def ladder_work(prompt_tokens: int, reference_tokens: int, frozen_tokens: int) -> int:
    """:func:`ladder`'s work in tokens through the model: the prompt, the reference text and
    the frozen text once, then the prompt and the reference text with each of the 8 breaks
    (counted whole, though each starts at its norm's block: :data:`BREAK_TOKEN_RUNS` is paced
    apart)."""
    return (1 + 2 * len(BREAK_KINDS)) * (prompt_tokens + reference_tokens) + frozen_tokens


def ladder_table(ladder: Ladder) -> pd.DataFrame:
    """The eight breaks, one row each: which norm, how, the KL, whether the top token stays,
    and the reference text's loss."""
    rows = []
    for place, name in zip(("before", "after"), ladder.names, strict=True):
        for how, b in ladder.broken[name].items():
            rows.append({"norm": f"{place}: {name.split('.', 3)[-1]}", "broken": how,
                         "KL (nats)": b.kl, "top token stays": b.same_top,
                         "reference loss (nats per token)": b.loss_after})
    return pd.DataFrame(rows)


#: Which of a sublayer's two norms is broken with less harm (part 6's question).
LADDER_OPTIONS = ("the norm before it", "the norm after it", "about the same (within 3×)")


def _side(before: float, after: float, floor: float) -> str:
    """Which of :data:`LADDER_OPTIONS` a harm measured on each side makes right: the smaller
    side, unless the two are within :data:`SAME_WITHIN` of each other or both under
    ``floor``."""
    before, after = max(before, floor), max(after, floor)
    ratio = before / after
    return LADDER_OPTIONS[2 if 1 / SAME_WITHIN <= ratio <= SAME_WITHIN else
                          1 if ratio > SAME_WITHIN else 0]


def ladder_answer(ladder: Ladder) -> Answer:
    """Which of the two norms the four breaks hurt less, by two measures: the next token
    (:meth:`Ladder.typical_kl`) and the reference text's loss (:meth:`Ladder.typical_loss`),
    each "about the same" within :data:`SAME_WITHIN`. Where the two disagree, both answers are
    accepted and the reply says so (the 34th review: one prompt's next token ranked the norms
    one way, the table's loss the other)."""
    before, after = (ladder.typical_kl(n) for n in ladder.names)
    by_kl = _side(before, after, KL_FLOOR)
    loss_before, loss_after = (ladder.typical_loss(n) for n in ladder.names)
    by_loss = _side(loss_before, loss_after, LOSS_FLOOR)

    def kl(value: float) -> str:
        return f"under {short(KL_FLOOR)} (nothing measurable)" if value < KL_FLOOR else short(value)

    def ways(name: str) -> str:
        return "; ".join(f"{BROKEN_AS[how]}, {kl(b.kl)}"
                         + ("" if b.same_top else " (the top token changes)")
                         for how, b in ladder.broken[name].items())

    base = next(iter(ladder.broken[ladder.names[0]].values())).loss_before
    removed = ladder.broken[ladder.names[1]]["removed"].kl
    reason = (
        f"KL divergence of the next-token distribution, by way of breaking it — the norm before "
        f"block {ladder.block}'s {ladder.sublayer}: {ways(ladder.names[0])}; the norm after "
        f"it: {ways(ladder.names[1])}. Typically (the geometric mean of the four), "
        f"{kl(before)} nats before against {kl(after)} after. On the reference text the four "
        f"breaks change the loss (the model's own: {short(base, 3)} nats per token) by "
        f"{loss_before:+.3g} before against {loss_after:+.3g} after, on average; the table has "
        "each. ")
    if by_kl != by_loss:
        return Answer(by_kl, reason + (
            f"The two measures disagree here: by this prompt's next token, “{by_kl}”; by the "
            f"reference text's loss, “{by_loss}”. Either answer is accepted: which norm is "
            "gentler depends on what is asked of the model."), accepted=(by_loss,))
    return Answer(by_kl, reason + (
        "Both measures agree. After the sublayer, a frozen RMS and LayerNorm still divide what "
        "is added by a size, and DyT squashes it, so it stays near the scale the block was "
        f"trained to add; removing the norm adds the raw output at its own size ({kl(removed)} "
        "nats). Before it, a break changes each token's size relative to the others (one "
        "frozen RMS for all, say), which changes what the sublayer computes: the feed-forward "
        "is not linear, and attention mixes the tokens' values at their sizes. A change of "
        "scale shared by every token would cancel in q_norm, k_norm and the post-norm."
        if by_kl == LADDER_OPTIONS[1] else
        f"Both measures agree. Here the norm before the {ladder.sublayer} is the one broken "
        "with less harm: what the norm after it puts out is what the block adds to the "
        "stream, so any change there is added as it is." if by_kl == LADDER_OPTIONS[0] else
        f"Here neither side is clearly the gentler by either measure (within "
        f"{SAME_WITHIN:.0f}× of each other, or both too small to tell)."))
