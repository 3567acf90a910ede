"""Where the norm sits: around the sublayers (post-LN, pre-LN, Peri-LN, OLMo-2's reordered norm)
and inside attention (QK-norm).

The placements are built on the random blocks the Shapes lesson uses (:func:`lnviz.nn.block`,
one home for a block), so the numbers here are that lesson's stack at initialization: the
residual stream's variance after every block and each block's gradient norm, for every
placement, and how the stream's growth depends on the scale of the weights.

QK-norm is measured on all-MiniLM-L6-v2's real queries and keys: scale them by ``c`` (as if
W_q and W_k had grown ``c``-fold in training) and the attention logits grow like c², so each
row's softmax sharpens towards one token and its entropy falls towards 0. A LayerNorm on each
head's q and k (ViT-22B's fix) takes their scale out: the pattern no longer depends on ``c``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.analysis import StackConfig, depth_profiles, gradient_norms
from lnviz.devices import to_numpy
from lnviz.lessons.common import OLMO2, PERI_LN, VIT22B, Paper, apart, short
from lnviz.models.bert import MiniLM, ModelRun
from lnviz.nn import PLACEMENTS
from lnviz.norms import layer_norm
from lnviz.train import RaceConfig, RaceResult

__all__ = [
    "GAINS",
    "GROWTH_RACE",
    "INIT_SCALES",
    "LAARHOVEN",
    "LOSS_WINDOW",
    "OLMO2",
    "PERI_LN",
    "PERI_LN_SIZE",
    "PLACEMENTS",
    "QK_EPS",
    "QK_SCALES",
    "STEADY_WITHIN",
    "VIT22B",
    "VIT22B_DIVERGED",
    "WEIGHT_DECAYS",
    "XIONG",
    "AttentionScaling",
    "Placements",
    "ScaleConfig",
    "ScaleRun",
    "attention_scaling",
    "gain_sensitivity",
    "gain_table",
    "grows_faster",
    "growth_race",
    "growth_text",
    "learns",
    "norm_change",
    "normalized_adds",
    "placement_findings",
    "placements",
    "scale_run",
    "scale_runs",
    "steady_placements",
]

#: The largest models the Peri-LN paper trains.
PERI_LN_SIZE = "3.2B"
#: The size at which ViT-22B's authors saw training diverge without QK-norm.
VIT22B_DIVERGED = "8B"
XIONG = Paper("Xiong et al.", "Xiong et al.",
              "On Layer Normalization in the Transformer Architecture", "2002.04745", "ICML 2020")

#: The weights' scales (init gain) compared for each placement.
GAINS = (0.5, 1.0, 1.5, 2.0)
#: A last-block variance that changes by less than this factor across :data:`GAINS` (a range of
#: 4× in the weights' scale, 16× in their square) hardly depends on it.
STEADY_WITHIN = 1.5


@dataclass(frozen=True, eq=False)
class Placements:
    """Every placement of :data:`PLACEMENTS` on one random stack at initialization.

    Attributes:
        config: the stack (depth, width, init gain, seed).
        variance: {placement: the stream's mean square, at the input (index 0) and after each
            block}; the stream's variance about 0, RMS².
        adds: {placement: RMS of what each block's feed-forward adds to the stream}.
        gradient: {placement: ‖∂L/∂θ_b‖ of every block b at initialization}.
    NaN where a value overflowed float64.
    """

    config: StackConfig
    variance: dict[str, np.ndarray]
    adds: dict[str, np.ndarray]
    gradient: dict[str, np.ndarray]


def placements(config: StackConfig) -> Placements:
    """The stream's variance, what the feed-forward adds, and the gradient per block, for every
    placement on ``config``'s stack (:func:`lnviz.analysis.depth_profiles` and
    :func:`~lnviz.analysis.gradient_norms`)."""
    profiles = depth_profiles(config, PLACEMENTS)
    gradients = gradient_norms(config, PLACEMENTS)
    return Placements(config, {v: p.stream ** 2 for v, p in profiles.items()},
                      {v: p.ffn for v, p in profiles.items()}, gradients)


def gain_sensitivity(config: StackConfig, gains: tuple[float, ...] = GAINS
                     ) -> dict[str, np.ndarray]:
    """{placement: the stream's variance after the last block, at each of ``gains``}: how much
    the weights' scale decides the stream's growth."""
    runs = [depth_profiles(replace(config, init_gain=g), PLACEMENTS) for g in gains]
    return {v: np.asarray([r[v].stream[-1] ** 2 for r in runs]) for v in PLACEMENTS}


def gain_table(sensitivity: dict[str, np.ndarray], gains: tuple[float, ...] = GAINS
               ) -> pd.DataFrame:
    """The last-block variances of :func:`gain_sensitivity` as text, one row per placement
    and one column per gain (3 significant digits; "overflowed" for NaN)."""
    return pd.DataFrame({f"gain {g:g}": [_number(float(sensitivity[v][k])) for v in sensitivity]
                         for k, g in enumerate(gains)}, index=list(sensitivity))


def _spread(values: np.ndarray) -> float:
    """Largest over smallest (inf when a value overflowed or is 0)."""
    if not np.all(np.isfinite(values)) or values.min() <= 0:
        return math.inf
    return float(values.max() / values.min())


def steady_placements(sensitivity: dict[str, np.ndarray], within: float = STEADY_WITHIN
                      ) -> list[str]:
    """The placements whose last-block variance changes by less than ``within``× across the
    gains: those whose stream's growth does not depend on the weights' scale."""
    return [v for v, values in sensitivity.items() if _spread(values) < within]


def grows_faster(sensitivity: dict[str, np.ndarray], first: str, second: str,
                 within: float = STEADY_WITHIN) -> str | None:
    """Which of two placements' last-block variance grows more from the smallest gain to the
    largest (None when their growth differs by less than ``within``×)."""
    growth = {v: sensitivity[v][-1] / sensitivity[v][0] for v in (first, second)}
    if not all(math.isfinite(g) for g in growth.values()):
        finite = [v for v, g in growth.items() if math.isfinite(g)]
        return None if not finite else next(v for v in growth if v not in finite)
    if max(growth.values()) < within * min(growth.values()):
        return None
    return max(growth, key=growth.get)


def normalized_adds(result: Placements) -> tuple[float, float]:
    """The smallest and the largest average growth of the stream's variance per block among
    the placements whose sublayers add a normalized vector (Peri-LN, OLMo-2)."""
    depth = result.config.depth
    growth = [(result.variance[v][-1] - result.variance[v][0]) / depth
              for v in ("Peri-LN", "OLMo-2")]
    return min(growth), max(growth)


def _number(value: float) -> str:
    return "overflowed" if not math.isfinite(value) else f"{value:.3g}"


#: Section 1's training: pre-LN against Peri-LN, trained side by side as Shapes' race trains
#: (Adam, the reverse task, width 64), 12 blocks for 300 steps.
GROWTH_RACE = RaceConfig(entrants=("pre-LN", "Peri-LN"), depth=12, steps=300, seeds=1)


def growth_race(seed: int = 0) -> RaceConfig:
    """:data:`GROWTH_RACE` from ``seed``."""
    return replace(GROWTH_RACE, seed=seed)


def _peri_growth(curve: dict[str, list[float]], grew: float) -> str:
    """Where Peri-LN's stream growth came from: each sublayer adds γ ⊙ (a vector of RMS 1) + β,
    so its weights' size cannot grow it; its output norms' γ can, by about the square of their
    RMS's change in the mean square (exactly where the normalized vector spreads evenly over
    the features; max γ² bounds it), and the rest is the added vectors lining up with the
    stream and with each
    other (their cross terms)."""
    g0, g1 = curve["output gain"][0], curve["output gain"][-1]
    by_gamma = (g1 / g0) ** 2
    start, end = apart(g0, g1)
    text = (f"Peri-LN normalizes what each sublayer adds, so its weights' size cannot grow it: "
            f"only its output norms' γ (RMS {start} → {end}, about "
            f"{short(by_gamma)}× in the mean square) and β, or those added vectors lining up "
            "with the stream and with one another")
    if by_gamma < 1.2 and grew > 1.5:
        return text + (f". With γ near where it started, the stream's {short(grew)}× is "
                       "nearly all that lining up. ")
    return text + f": here the stream grew {short(grew)}×. "


def growth_text(result: RaceResult) -> str:
    """What the race's ‖W‖ and stream did, per placement, first step against last, and what
    that has to do with the init gain above, in the race's numbers."""
    if result.steps_done < 2:
        return ""
    parts, first, last = [], {}, {}
    for entrant in result.config.entrants:
        curve = result.curves[entrant]
        w0, w1 = apart(curve["weight norm"][0], curve["weight norm"][-1], 4)
        first[entrant], last[entrant] = curve["stream"][0], curve["stream"][-1]
        parts.append(f"{entrant}'s ‖W‖ went from {w0} to {w1} and its stream's mean square from "
                     f"{short(first[entrant])} to {short(last[entrant])} "
                     f"({short(last[entrant] / first[entrant])}×)")
    text = (f"Over {result.steps_done} steps, " + "; ".join(parts) + ". ")
    weights = [result.curves[e]["weight norm"] for e in result.config.entrants]
    change = max(abs(w[-1] / w[0] - 1) for w in weights)
    if change < 0.1:
        text += (f"The weights' overall size barely moved (at most {change:.1%}), so what grew "
                 "is what the sublayers add: training turns the weights toward directions "
                 "that add more to the stream. ")
    else:
        text += f"The weights grew by up to {change:.0%}, and what the sublayers add with them. "
    if {"pre-LN", "Peri-LN"} <= set(first):
        grew = {e: last[e] / first[e] for e in ("pre-LN", "Peri-LN")}
        steadier = min(grew, key=grew.get)
        other = "pre-LN" if steadier == "Peri-LN" else "Peri-LN"
        text += (f"{steadier}'s stream grew less ({short(grew[steadier])}× against "
                 f"{short(grew[other])}×) and ends "
                 + ("smaller" if last[steadier] < last[other] else "larger")
                 + f" ({short(last[steadier])} against {short(last[other])}), from a start "
                 + ("below" if first[steadier] < first[other] else "above")
                 + f" {other}'s. ")
        if steadier == "Peri-LN":
            text += ("A larger init gain (above) and training do the same to pre-LN: its "
                     "sublayers add more to the stream. ")
        if "Peri-LN" in first:
            text += _peri_growth(result.curves["Peri-LN"], last["Peri-LN"] / first["Peri-LN"])
    return text + "One seed and one small task: a sketch of the effect, not a measurement of it."


def placement_findings(result: Placements, sensitivity: dict[str, np.ndarray],
                       gains: tuple[float, ...] = GAINS) -> list[str]:
    """One sentence per placement with the numbers the figure and the table show: the
    stream's variance after the last block and its growth per block, the gradient of the first
    and the last block, and the last-block variance at the smallest and the largest gain."""
    depth = result.config.depth
    notes = []
    for v in PLACEMENTS:
        var, grad = result.variance[v], result.gradient[v]
        low, high = sensitivity[v][0], sensitivity[v][-1]
        line = f"**{v}**: the stream's variance goes from {var[0]:.3g} to {_number(var[-1])}"
        if v not in ("post-LN", "none") and math.isfinite(var[-1]):
            line += f" ({(var[-1] - var[0]) / depth:.3g} per block on average)"
        if math.isfinite(grad[0]) and math.isfinite(grad[-1]) and depth > 1:
            line += (f"; block 1's gradient norm is {grad[0]:.3g}, block {depth}'s "
                     f"{grad[-1]:.3g} (block 1 ÷ block {depth}: {grad[0] / grad[-1]:.3g})")
        else:
            line += "; its gradients overflowed float64"
        line += (f". At init gain {gains[0]:g} its last variance is {_number(low)}, at "
                 f"{gains[-1]:g} {_number(high)}.")
        notes.append(line)
    return notes


# --- QK-norm ----------------------------------------------------------------------------------

#: The scales ``c`` of W_q and W_k the entropy curve is drawn at.
QK_SCALES = tuple(float(c) for c in np.logspace(-1, 2, 31))
#: The ε of the LayerNorm on each head's queries and keys.
QK_EPS = 1e-6


@dataclass(frozen=True, eq=False)
class AttentionScaling:
    """One head of one MiniLM layer with W_q and W_k scaled by ``c``, without and with QK-norm.

    Attributes:
        tokens: the sentence's pieces.
        layer, head: which attention head.
        scales: the ``c`` of the curves.
        entropy: {"without", "with"}: the mean over rows of each row's attention entropy
            (nats), at each scale.
        uniform: ln T, the entropy of attending to every token equally (the most there is).
        scale: the ``c`` the learner chose.
        attention: {"without", "with"}: the (T, T) attention at ``scale``.
        largest_logit: {"without", "with"}: the largest |logit| at ``scale``.
        bound: √hs, the largest |logit| QK-norm (γ = 1) allows: ‖q̂‖ = ‖k̂‖ = √hs.

    At c = 1 without QK-norm, ``attention["without"]`` is the head's own attention as the model
    computes it (``ModelRun.attention[layer, head]``): the run it starts from needs only its
    LayerNorms' records, not its attention maps.
    """

    tokens: list[str]
    layer: int
    head: int
    scales: np.ndarray
    entropy: dict[str, np.ndarray]
    uniform: float
    scale: float
    attention: dict[str, np.ndarray]
    largest_logit: dict[str, float]
    bound: float


def _qk(model: MiniLM, run: ModelRun, layer: int, head: int) -> tuple[torch.Tensor,
                                                                      torch.Tensor]:
    """The head's queries and keys, (T, hs) each, from the layer's input in ``run``."""
    config = model.config
    if not 0 <= layer < config.n_layer or not 0 <= head < config.n_head:
        raise ValueError(f"layers are 0 to {config.n_layer - 1}, heads 0 to "
                         f"{config.n_head - 1}")
    hs = config.n_embd // config.n_head
    x = run.records[2 * layer].output[0].double()  # (T, C): the layer's input
    rows = slice(head * hs, (head + 1) * hs)
    w = model.weights
    prefix = f"encoder.layer.{layer}.attention.self"
    q = x @ w[f"{prefix}.query.weight"][rows].double().T + w[f"{prefix}.query.bias"][rows]
    k = x @ w[f"{prefix}.key.weight"][rows].double().T + w[f"{prefix}.key.bias"][rows]
    return q, k  # (T, hs), (T, hs)


def _logits(q: torch.Tensor, k: torch.Tensor, c: float, qk_norm: bool) -> torch.Tensor:
    """(T, T) attention logits with q and k scaled by ``c``, each head's q and k normalized
    first (a LayerNorm over hs, γ = 1, β = 0) when ``qk_norm``."""
    q, k = c * q, c * k
    if qk_norm:
        q = layer_norm(q, q.shape[-1:], eps=QK_EPS).output
        k = layer_norm(k, k.shape[-1:], eps=QK_EPS).output
    return q @ k.T / math.sqrt(q.shape[-1])  # (T, T)


def _entropy(attention: torch.Tensor) -> float:
    """The mean over rows of each row's entropy −Σ p ln p (nats); 0·ln 0 counts as 0."""
    p = attention.clamp_min(0)
    terms = torch.where(p > 0, -p * p.clamp_min(1e-300).log(), torch.zeros_like(p))
    return float(terms.sum(-1).mean())


def attention_scaling(model: MiniLM, run: ModelRun, layer: int, head: int, scale: float,
                      scales: tuple[float, ...] = QK_SCALES) -> AttentionScaling:
    """Head ``head`` of layer ``layer`` on ``run``'s sentence, with its queries and keys scaled
    by each of ``scales`` and by ``scale``, without and with QK-norm (float64)."""
    if not scale > 0:
        raise ValueError(f"the scale must be > 0, got {scale}")
    q, k = _qk(model, run, layer, head)
    kinds = {"without": False, "with": True}
    entropy = {kind: np.asarray([_entropy(_logits(q, k, c, norm).softmax(-1)) for c in scales])
               for kind, norm in kinds.items()}
    logits = {kind: _logits(q, k, scale, norm) for kind, norm in kinds.items()}
    return AttentionScaling(
        list(run.tokens), layer, head, np.asarray(scales), entropy, math.log(q.shape[0]),
        float(scale), {kind: to_numpy(v.softmax(-1), torch.float64) for kind, v in logits.items()},
        {kind: float(v.abs().max()) for kind, v in logits.items()}, math.sqrt(q.shape[-1]))


# --- Before a norm: scale invariance and the effective learning rate ---------------------------

LAARHOVEN = Paper("van Laarhoven", "van Laarhoven", "L2 Regularization versus Batch and Weight "
                  "Normalization", "1706.05350")
#: The initial scales of W and the weight decays the page offers.
INIT_SCALES = (0.3, 1.0, 3.0, 10.0)
WEIGHT_DECAYS = (0.0, 1e-3, 1e-2, 3e-2)
#: Steps of the running mean that smooths the mini-batch loss.
LOSS_WINDOW = 20


@dataclass(frozen=True)
class ScaleConfig:
    """A small classifier of scikit-learn's 8×8 digits, trained with plain SGD:
    logits = W₂·ReLU(LN(W x)) + b₂, LN without γ and β, W of shape (hidden, 64).

    ``init_scale`` multiplies W's initial draw (N(0, 1/64)); ``weight_decay`` is applied to W
    alone (λ·W added to its gradient); ``eps`` is the LayerNorm's ε. Every run with the same
    seed sees the same batches.
    """

    init_scale: float = 1.0
    weight_decay: float = 0.0
    lr: float = 0.1
    steps: int = 400
    batch: int = 64
    hidden: int = 64
    seed: int = 0
    eps: float = 1e-5

    def __post_init__(self) -> None:
        if not 0 < self.init_scale <= 100:
            raise ValueError(f"init_scale must be in (0, 100], got {self.init_scale}")
        if not 0 <= self.weight_decay <= 1:
            raise ValueError(f"weight_decay must be in [0, 1], got {self.weight_decay}")
        if not 0 < self.lr <= 10:
            raise ValueError(f"lr must be in (0, 10], got {self.lr}")
        for name, high in (("steps", 5000), ("batch", 1024), ("hidden", 512)):
            if not 1 <= getattr(self, name) <= high:
                raise ValueError(f"{name} must be between 1 and {high}, "
                                 f"got {getattr(self, name)}")


@dataclass(frozen=True, eq=False)
class ScaleRun:
    """One :class:`ScaleConfig` trained, float64.

    Attributes:
        config: its settings.
        weight_norm: ‖W‖ at the start (index 0) and after each step.
        gradient_norm: ‖∂L/∂W‖ at each step (without the decay).
        gradient_cosine: ⟨W, ∂L/∂W⟩/(‖W‖·‖∂L/∂W‖) at each step: 0 when the gradient is
            orthogonal to W.
        angular_step: ‖ΔW‖/‖W‖ at each step: how far the step turns W, the effective step.
        loss: the mini-batch loss at each step.
        test_accuracy: on the held-out quarter of the digits, after the last step.
    """

    config: ScaleConfig
    weight_norm: np.ndarray
    gradient_norm: np.ndarray
    gradient_cosine: np.ndarray
    angular_step: np.ndarray
    loss: np.ndarray
    test_accuracy: float

    @property
    def effective_lr(self) -> np.ndarray:
        """η/‖W‖² at the start and after each step: the learning rate W's direction sees."""
        return self.config.lr / self.weight_norm ** 2

    def smoothed_loss(self, window: int = LOSS_WINDOW) -> np.ndarray:
        """The loss's running mean over ``window`` steps (shorter at the start)."""
        total = np.cumsum(np.r_[0.0, self.loss])
        ends = np.arange(1, self.loss.size + 1)
        starts = np.maximum(ends - window, 0)
        return (total[ends] - total[starts]) / (ends - starts)


@functools.cache  # read once: every run trains on the same images (never written to)
def _digits() -> tuple[torch.Tensor, ...]:
    from lnviz.data.sequences import load_digits_data

    data = load_digits_data()
    flat = [torch.as_tensor(a.reshape(len(a), -1), dtype=torch.float64)
            for a in (data.x_train, data.x_test)]
    return flat[0], torch.as_tensor(data.y_train), flat[1], torch.as_tensor(data.y_test)


def _classify(x: torch.Tensor, w: torch.Tensor, head: torch.Tensor, bias: torch.Tensor,
              eps: float) -> torch.Tensor:
    h = layer_norm(x @ w.T, w.shape[0], eps=eps, impl="fast").output  # (N, hidden): no scale
    return h.relu() @ head.T + bias  # (N, 10)


def scale_run(config: ScaleConfig) -> ScaleRun:
    """Train ``config``'s classifier and record W's norm, its gradient and its steps."""
    x_train, y_train, x_test, y_test = _digits()
    generator = torch.Generator().manual_seed(config.seed)
    w = torch.randn(config.hidden, 64, generator=generator, dtype=torch.float64)
    w = (w / 8 * config.init_scale).requires_grad_()
    head = (torch.randn(10, config.hidden, generator=generator, dtype=torch.float64)
            / math.sqrt(config.hidden)).requires_grad_()
    bias = torch.zeros(10, dtype=torch.float64, requires_grad=True)
    batches = torch.Generator().manual_seed(config.seed + 1)  # the same for every run
    norms, grads, cosines, steps, losses = [float(w.detach().norm())], [], [], [], []
    for _ in range(config.steps):
        rows = torch.randint(len(y_train), (config.batch,), generator=batches)
        loss = F.cross_entropy(_classify(x_train[rows], w, head, bias, config.eps),
                               y_train[rows])
        for p in (w, head, bias):
            p.grad = None
        loss.backward()
        with torch.no_grad():
            g = w.grad
            grads.append(float(g.norm()))
            cosines.append(float((w * g).sum() / (w.norm() * g.norm())))
            before = w.norm()
            step = config.lr * (g + config.weight_decay * w)
            steps.append(float(step.norm() / before))
            w -= step
            head -= config.lr * head.grad
            bias -= config.lr * bias.grad
            norms.append(float(w.norm()))
            losses.append(float(loss))
    with torch.no_grad():
        logits = _classify(x_test, w, head, bias, config.eps)
        accuracy = float((logits.argmax(-1) == y_test).double().mean())
    return ScaleRun(config, *(np.asarray(v) for v in (norms, grads, cosines, steps, losses)),
                    accuracy)


def scale_runs(init_scale: float, weight_decay: float, seed: int = 0) -> dict[str, ScaleRun]:
    """The runs the page compares, by label: W at its usual scale without weight decay, W at
    ``init_scale`` without it, and W at ``init_scale`` with ``weight_decay`` (fewer when they
    coincide)."""
    configs = {"scale 1, no decay": ScaleConfig(seed=seed),
               f"scale {init_scale:g}, no decay": ScaleConfig(init_scale, seed=seed),
               f"scale {init_scale:g}, decay {weight_decay:g}": ScaleConfig(
                   init_scale, weight_decay, seed=seed)}
    unique: dict[ScaleConfig, str] = {}
    for label, config in configs.items():
        unique.setdefault(config, label)
    return {label: scale_run(config) for config, label in unique.items()}


def learns(run: ScaleRun, reference: ScaleRun, within: float = 1.2) -> str:
    """"faster", "slower" or "as fast": ``run``'s smoothed final loss against
    ``reference``'s (within ``within``× counts as as fast)."""
    mine, theirs = run.smoothed_loss()[-1], reference.smoothed_loss()[-1]
    if mine > within * theirs:
        return "slower"
    return "faster" if mine * within < theirs else "as fast"


def norm_change(weight_norm: np.ndarray) -> str:
    """‖W‖ from the first step to the last as a sentence gives it, "10.04 → 10.05 (+0.12 %)":
    enough digits for the two to read differently, and the change in percent to two
    significant digits (a change of 0.004 % is not "+0.00 %")."""
    first, last = float(weight_norm[0]), float(weight_norm[-1])
    change = 100 * (last / first - 1)
    return "{} → {} ".format(*apart(first, last, 4)) + f"({'+' * (change > 0)}{short(change, 2)} %)"
