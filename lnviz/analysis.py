"""Fits and measures that several lessons share, computed from what :func:`lnviz.capture`
records.

The tanh fits: plotted value by value, a LayerNorm's (or an RMSNorm's) input against its
normalized output x̂ (before γ and β) — does it follow an S-shaped curve, as Dynamic Tanh's
premise says (Zhu, Chen, He, LeCun and Liu, "Transformers without Normalization", CVPR 2025)?
:func:`fit_record` fits the best ``s·tanh(αx)`` and the best straight line through one norm's
points, with every value and without the few values of largest |x| that make its bend
(:func:`bend_size`), so that one high-leverage point cannot decide the verdict.

The toy stack: one random batch through the same randomly initialised transformer blocks
(:func:`lnviz.nn.block`) in each placement — how the stream's scale evolves with depth
(:func:`depth_profiles`), and each block's gradient at initialization (:func:`gradient_norms`,
:func:`depth_sweep`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F

from lnviz.capture import NormRecord, Replacement
from lnviz.devices import single_threaded, to_numpy
from lnviz.nn import ACTIVATIONS, block, dyt, final_norm, init_block
from lnviz.norms import layer_norm, rms_norm
from lnviz.terms import NormKind

__all__ = [
    "ALPHA_GRID",
    "BENT",
    "BREAK_KINDS",
    "COMPARED",
    "GRADIENT_DEPTHS",
    "HEAD_CLASSES",
    "SEARCH_POINTS",
    "TRIM",
    "VARIANTS",
    "Broken",
    "DepthProfile",
    "DepthSweep",
    "LanguageModel",
    "Prediction",
    "Recorded",
    "StackConfig",
    "TanhFit",
    "TokenRun",
    "bend_size",
    "broken_norm",
    "broken_norms",
    "depth_profiles",
    "depth_sweep",
    "extremes",
    "first_blocks",
    "fit_line",
    "fit_record",
    "fit_tanh",
    "gradient_norms",
    "next_token_loss",
    "norm_replacement",
    "prediction",
    "rms",
    "tanh_fits",
    "token_rms",
]


class Recorded(Protocol):
    """What a fit reads from a model's run or a capture: the norms' records, in call order."""

    records: list[NormRecord]


#: How many points the search for α looks at (a long sentence gives 13 × 196,608).
SEARCH_POINTS = 20_000
#: The α searched: a log grid wide enough for any LayerNorm input the shipped models give
#: (their values span about 1e-3 to 1e3), refined around the best point.
ALPHA_GRID = np.logspace(-5, 3, 161)


def _r2(y: np.ndarray, fitted: np.ndarray) -> float:
    """1 − (residual sum of squares)/(total sum of squares): the share of y's variance the
    fitted values explain."""
    total = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - fitted) ** 2)) / total if total > 0 else math.nan


def _best_scale(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[float, float]:
    """For one α: the least-squares s in y ≈ s·tanh(αx), and the residual sum of squares."""
    t = np.tanh(alpha * x)
    tt = float(t @ t)
    s = float(t @ y) / tt if tt > 0 else 0.0
    r = y - s * t
    return s, float(r @ r)


def fit_tanh(x: np.ndarray, y: np.ndarray, search_points: int | None = SEARCH_POINTS
             ) -> tuple[float, float, float]:
    """The least-squares curve ``y ≈ s·tanh(αx)`` (α > 0) through the points (x, y): (α, s, R²).

    For a given α the best s is a projection (closed form), so the fit is a search over α
    alone: the best point of :data:`ALPHA_GRID`, then a golden-section search between its
    neighbours (the residual is smooth in log α). With more than ``search_points`` points the
    search runs on that many of them, evenly spread in the order of x (the extremes, which
    decide the bend, always among them); s and R² are then those of all the points."""
    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    if x.size != y.size or x.size < 2:
        raise ValueError("fit_tanh needs as many x as y values, at least two")
    all_x, all_y = x, y
    if search_points is not None and x.size > search_points:
        order = np.argsort(x, kind="stable")
        keep = order[np.linspace(0, x.size - 1, search_points).round().astype(int)]
        x, y = x[keep], y[keep]
    errors = [_best_scale(x, y, a)[1] for a in ALPHA_GRID]
    k = int(np.argmin(errors))
    last = len(ALPHA_GRID) - 1
    lo, hi = math.log(ALPHA_GRID[max(k - 1, 0)]), math.log(ALPHA_GRID[min(k + 1, last)])
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = _best_scale(x, y, math.exp(a))[1], _best_scale(x, y, math.exp(b))[1]
    for _ in range(60):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = _best_scale(x, y, math.exp(a))[1]
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = _best_scale(x, y, math.exp(b))[1]
    alpha = math.exp((lo + hi) / 2)
    s, _ = _best_scale(all_x, all_y, alpha)
    return alpha, s, _r2(all_y, s * np.tanh(alpha * all_x))


#: The most of a norm's points, those of largest |x|, that :func:`bend_size` leaves out to find
#: what makes a bend: a bend that goes once at most this share is left out is those few
#: values', not the layer's. On MiniLM one massive activation decides the plain fit of an
#: after-feed-forward LayerNorm (one point in 3,456 on the first preset: 0.03 %).
TRIM = 0.01
#: How much more of x̂'s variance the tanh must explain than a line for a bend to count.
BENT = 0.01


def extremes(x: np.ndarray, count: int) -> np.ndarray:
    """The indices of the ``count`` points of largest |x|, largest last."""
    x = np.asarray(x).ravel()
    return np.argsort(np.abs(x), kind="stable")[x.size - count:]


def _gain(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """R² of the best tanh and of the best line through (x, y)."""
    return fit_tanh(x, y)[2], fit_line(x, y)[2]


def bend_size(x: np.ndarray, y: np.ndarray, share: float = TRIM
              ) -> tuple[int | None, float, float]:
    """How few of the values of largest |x| make the bend: the first count k on the grid 1, 2,
    3, 4, 6, 8, 12, 16, … up to ⌈share·n⌉ after whose removal the best tanh explains less than
    :data:`BENT` more of y's variance than the best line (None if none does), with the two R²
    without those k values (without the ⌈share·n⌉ when None). The grid finds "these k values
    suffice", not the fewest: the gain need not fall steadily as values are left out."""
    x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    limit = max(1, math.ceil(share * x.size))
    order = np.argsort(np.abs(x), kind="stable")
    grid, k = [], 1
    while k < limit:
        grid.append(k)
        k = k + 1 if k < 4 else k + k // 2  # 1, 2, 3, 4, 6, 9, 13, 19, …
    grid.append(limit)
    r2_tanh = r2_line = math.nan
    for k in grid:
        kept = order[: x.size - k]
        if kept.size < 2:
            return None, math.nan, math.nan
        r2_tanh, r2_line = _gain(x[kept], y[kept])
        if r2_tanh - r2_line < BENT:
            return k, r2_tanh, r2_line
    return None, r2_tanh, r2_line


def fit_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """The least-squares straight line ``y ≈ a·x + b``: (a, b, R²)."""
    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    a, b = np.polyfit(x, y, 1)
    return float(a), float(b), _r2(y, a * x + b)


@dataclass(frozen=True)
class TanhFit:
    """One LayerNorm's input against its normalized output x̂ (every token's every value).

    Attributes:
        name: the LayerNorm (transformers' BertModel module path).
        alpha, scale: the curve x̂ ≈ scale·tanh(alpha·x).
        r2_tanh: the share of x̂'s variance the curve explains.
        slope, intercept, r2_line: the same for the best straight line.
        x, x_hat: the points, float64, (tokens·C,).
        width: C, the features of each token: the points run token by token, C at a time
            (:attr:`tokens`).
        extreme: the points of largest |x| that the trimmed fits leave out: the few that make
            the bend (:func:`bend_size`), or the :data:`TRIM` share when no fewer do.
        bend: how many values make the bend (:func:`bend_size`): 0 for a mapping a line fits
            with every value, None for a bend that outlasts leaving out the TRIM share.
        r2_tanh_trimmed, r2_line_trimmed: R² of the best tanh and the best line fitted
            without those points: what a few high-leverage values cannot decide.
        sigmas: the smallest, median and largest of the tokens' √(σ² + ε).
    """

    name: str
    alpha: float
    scale: float
    r2_tanh: float
    slope: float
    intercept: float
    r2_line: float
    x: np.ndarray
    x_hat: np.ndarray
    width: int
    extreme: np.ndarray
    bend: int | None
    r2_tanh_trimmed: float
    r2_line_trimmed: float
    sigmas: tuple[float, float, float] = (math.nan, math.nan, math.nan)

    def sample(self, n: int = 3000) -> np.ndarray:
        """The indices of at most ``n`` of the points, evenly spaced in the order of x (so the
        extremes, where the curve bends, are always among them): what a scatter can draw."""
        order = np.argsort(self.x, kind="stable")
        return order[np.unique(np.linspace(0, order.size - 1, min(n, order.size)).round()
                               .astype(int))]

    @property
    def tokens(self) -> np.ndarray:
        """Each point's token (its position in the sentence), (tokens·C,)."""
        return np.arange(self.x.size) // self.width

    @property
    def extreme_tokens(self) -> tuple[int, ...]:
        """The tokens the trimmed fits' left-out points belong to, in sentence order."""
        return tuple(int(t) for t in np.unique(self.tokens[self.extreme]))

    def curve(self, points: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The fitted tanh and line over the points' range: (x, tanh's x̂, line's x̂)."""
        x = np.linspace(float(self.x.min()), float(self.x.max()), points)
        return (x, self.scale * np.tanh(self.alpha * x), self.slope * x + self.intercept)

    @property
    def straight(self) -> bool:
        """Whether the best tanh is a straight line over these points: α·max|x| under 0.1,
        where tanh bends by less than 0.4 %."""
        return self.alpha * float(np.abs(self.x).max()) < 0.1

    def replacement(self, weight: torch.Tensor, bias: torch.Tensor | None) -> Replacement:
        """The norm as DyT with this fit: γ·(scale·tanh(αx)) + β (no β for an RMSNorm: None),
        for the models' ``run(replace=...)``."""
        alpha = self.alpha
        scaled = weight * self.scale  # (C,): the fitted s folded into γ, as DyT's γ learns it
        return lambda x: dyt(x, alpha, scaled, bias)


def fit_record(record: NormRecord, eps: float) -> TanhFit:
    """:func:`fit_tanh` and :func:`fit_line` for one norm's input values against its
    normalized output before γ (and β), per token as the norm computes it: x̂ = (x − μ)/√(σ²+ε)
    for a LayerNorm, x/√(mean x² + ε) for an RMSNorm."""
    x = record.input.detach()  # (1, T, C)
    if record.kind == NormKind.RMS:
        result = rms_norm(x, x.shape[-1], eps=eps)
    elif record.kind == NormKind.LAYER:
        result = layer_norm(x, x.shape[-1], None, None, eps)
    else:
        raise ValueError(f"a tanh is fitted to a LayerNorm or an RMSNorm, not a {record.kind}")
    sigma = to_numpy(1 / result.rstd, torch.float64).ravel()  # (T,): each token's scale
    xs = to_numpy(x, torch.float64).ravel()
    ys = to_numpy(result.output, torch.float64).ravel()
    alpha, scale, r2_tanh = fit_tanh(xs, ys)
    slope, intercept, r2_line = fit_line(xs, ys)
    if r2_tanh - r2_line < BENT or alpha * float(np.abs(xs).max()) < 0.1:  # a line already
        bend, r2_tanh_trimmed, r2_line_trimmed = 0, r2_tanh, r2_line
        extreme = extremes(xs, 1)  # the largest, to name
    else:
        bend, r2_tanh_trimmed, r2_line_trimmed = bend_size(xs, ys)
        extreme = extremes(xs, bend if bend else max(1, math.ceil(TRIM * xs.size)))
    return TanhFit(record.name, alpha, scale, r2_tanh, slope, intercept, r2_line, xs, ys,
                   int(x.shape[-1]), extreme, bend, r2_tanh_trimmed, r2_line_trimmed,
                   # the lower middle token with an even count, as σ̄ is taken (torch's median)
                   (float(sigma.min()), float(np.sort(sigma)[(sigma.size - 1) // 2]),
                    float(sigma.max())))


def tanh_fits(run: Recorded, eps: float = 1e-12) -> list[TanhFit]:
    """:func:`fit_record` for each norm ``run`` recorded (a model's run, or a
    :class:`lnviz.capture.Capture`): its input values against x̂ = (x − μ)/√(σ² + ε), per token
    as the norm computes it."""
    return [fit_record(record, eps) for record in run.records]


# --- A stack of transformer blocks at initialization --------------------------------------------


#: The placements :func:`depth_profiles` compares unless told: the original transformer's, GPT-2's,
#: and none.
VARIANTS = ("post-LN", "pre-LN", "none")
#: The two placements whose gradients :func:`gradient_norms` compares unless told (and a race
#: trains, :class:`lnviz.train.RaceConfig`).
COMPARED = ("post-LN", "pre-LN")


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


def token_rms(run: Recorded, names: Sequence[str], *, side: str = "input") -> np.ndarray:
    """Each token's RMS at the named records' inputs (``side="output"``: their outputs):
    (len(names), T), in float64. A residual stream's size through depth, where
    ``names`` are the norms that read it (``lnviz.models.llama.stream_names``) or write it
    (``lnviz.models.bert.stream_names``)."""
    by_name = {r.name: r for r in run.records}
    return np.stack([getattr(by_name[name], side)[0].double().square().mean(-1).sqrt().numpy()
                     for name in names])  # each record's (1, T, C) → (T,)


class TokenRun(Protocol):
    """A language model's run of a text: its token ids and next-token logits."""

    ids: torch.Tensor
    logits: torch.Tensor


class LanguageModel(Protocol):
    """A language model of lnviz.models (SmolLM2, Gemma 3): its weights by name, its norms' ε,
    and runs of a text, with norms replaced by name."""

    weights: Any
    config: Any

    def run(self, text: str, *, replace: Any = None, last_only: bool = False) -> Any: ...

    def reruns(self, run: Any, replaces: Any, *, last_only: bool = False) -> Any: ...


#: Rows of logits one batched output head computes at most in :func:`broken_norms` (Gemma 3's
#: are 1 MB each): two runs a call of the reference text, 18 tokens to Gemma 3. Its ladder (eight
#: breaks) took 2.5 s with 36 or 64, 3.1 s one run a call; its peak rose by 148 MB during it
#: against 130 MB one run a call (105 MB before the breaks shared their heads), below the
#: model's load (2026-12-01).
HEAD_ROWS = 36

#: The ways a norm can be broken (:func:`norm_replacement`), as the pages offer them.
BREAK_KINDS = ("removed", "frozen RMS", NormKind.LAYER, "fitted DyT")


def norm_replacement(model: LanguageModel, name: str, how: str, frozen: Any = None
                     ) -> Replacement:
    """What norm ``name`` computes broken as ``how`` says (:data:`BREAK_KINDS`), with the norm's
    own weight (the multiplier it applies): its input unchanged; its input times γ over one
    number, the median token's RMS the norm saw in ``frozen`` (a run of another text: a median,
    so that one token's massive value does not set it); LayerNorm with the same γ; or Dynamic
    Tanh fitted to what the norm saw in ``frozen``."""
    weight = model.weights[f"{name}.weight"]
    eps = model.config.eps
    if how == "removed":
        return lambda x: x
    if how == NormKind.LAYER:
        return lambda x: F.layer_norm(x, (x.shape[-1],), weight, None, eps)
    if how not in BREAK_KINDS:
        raise ValueError(f"a norm can be broken as {', '.join(BREAK_KINDS)}, not {how!r}")
    if frozen is None:
        raise ValueError(f"breaking a norm as {how!r} reads a run of another text: none given")
    seen = frozen.record(name)
    if how == "frozen RMS":
        rms = float(seen.input[0].double().square().mean(-1).sqrt().median())
        return lambda x: x / rms * weight
    return fit_record(seen, eps).replacement(weight, None)


@dataclass(frozen=True)
class Prediction:
    """The most likely next tokens after a prompt: pieces and probabilities, largest first."""

    tokens: tuple[str, ...]
    probabilities: tuple[float, ...]


def prediction(run: Any, k: int = 5, logits: Any = None) -> Prediction:
    """The ``k`` most likely next tokens of a language model's ``run`` (by ``logits`` instead
    of the run's where given: a rerun's)."""
    top = run.top(k) if logits is None else run.top(k, logits)
    return Prediction(tuple(t for t, _ in top), tuple(p for _, p in top))


@dataclass(frozen=True)
class Broken:
    """One norm broken (:data:`BREAK_KINDS`) on a prompt and on a reference text.

    Attributes:
        name, how: which norm, and how it was broken.
        before, after: the top next tokens without and with the break.
        kl: KL(before ‖ after) of the next-token distributions, in nats.
        same_top: whether the most likely next token stayed the same.
        loss_before, loss_after: mean cross-entropy (nats per token) of the model's predictions
            of the reference text's tokens, without and with the break.
    """

    name: str
    how: str
    before: Prediction
    after: Prediction
    kl: float
    same_top: bool
    loss_before: float
    loss_after: float


def broken_norm(model: LanguageModel, text: str, name: str, how: str, *, reference: str,
                frozen: str) -> Broken:
    """:class:`Broken` for norm ``name`` replaced as ``how`` says on ``text`` and on the text
    ``reference``; a frozen RMS and a fitted DyT read what the norm saw on the text
    ``frozen``."""
    return broken_norms(model, text, [name], [how], reference=reference, frozen=frozen)[name][how]


def broken_norms(model: LanguageModel, text: str, names: Sequence[str], hows: Sequence[str], *,
                 reference: str, frozen: str) -> dict[str, dict[str, Broken]]:
    """:func:`broken_norm` for every norm of ``names`` broken every way of ``hows``, one at a
    time, as {name: {how: Broken}}: the model's own runs of ``text``, ``reference`` and
    ``frozen`` are made once for all of them, and each break's runs start at its norm's block
    (the model's ``reruns``: the blocks before compute the same with or without it)."""
    plain = model.run(text, last_only=True)  # the next token reads the last position alone
    p = plain.logits[-1].double().log_softmax(-1)
    before = prediction(plain)
    reference_run = model.run(reference)
    loss_before = next_token_loss(reference_run)
    seen = model.run(frozen) if {"frozen RMS", "fitted DyT"} & set(hows) else None
    breaks = [(name, how) for name in names for how in hows]
    replaces = [{name: norm_replacement(model, name, how, seen)} for name, how in breaks]
    # the output heads batched (the model's ``reruns``): the prompt's last rows all at once,
    # the reference text's in groups of at most HEAD_ROWS rows
    lasts = model.reruns(plain, replaces, last_only=True)  # (1, vocab) each
    group, losses = max(1, HEAD_ROWS // len(reference_run.ids)), []
    for start in range(0, len(replaces), group):
        batch = model.reruns(reference_run, replaces[start:start + group])
        losses += [next_token_loss(reference_run, logits) for logits in batch]
        del batch  # one group's logits at a time
    out: dict[str, dict[str, Broken]] = {name: {} for name in names}
    for (name, how), logits, loss in zip(breaks, lasts, losses, strict=True):
        q = logits[-1].double().log_softmax(-1)
        out[name][how] = Broken(
            name, how, before, prediction(plain, logits=logits),
            float((p.exp() * (p - q)).sum()), int(p.argmax()) == int(q.argmax()),
            loss_before, loss)
    return out


def next_token_loss(run: TokenRun, logits: torch.Tensor | None = None) -> float:
    """Mean cross-entropy of the run's predictions of its own next tokens, in nats (of
    ``logits`` (T, vocab) instead of the run's where given: a rerun's)."""
    logits = run.logits if logits is None else logits
    return float(F.cross_entropy(logits[:-1].double(), run.ids[1:]))


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


@single_threaded
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


#: Classes of the random head through which the gradients are taken.
HEAD_CLASSES = 16
#: Depths of the sweep that compares the first and last blocks' gradients as the stack deepens.
GRADIENT_DEPTHS = (1, 2, 3, 6, 12, 24, 48)


def _block_gradient_norm(params: dict[str, torch.Tensor]) -> float:
    return math.sqrt(sum(float(p.grad.square().sum()) for p in params.values()))


@single_threaded
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
