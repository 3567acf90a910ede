"""Beyond LayerNorm: what recent models do instead, measured on the models the app ships.

Dynamic Tanh (Zhu, Chen, He, LeCun and Liu, "Transformers without Normalization", CVPR 2025)
replaces a LayerNorm by ``DyT(x) = γ·tanh(αx) + β``: one learned scalar α per layer and no
statistics at all. Its premise is an observation about trained transformers: plotted value by
value, a LayerNorm's input against its normalized output (x̂, before γ and β) follows an S-shaped
curve. :func:`tanh_fits` measures that on all-MiniLM-L6-v2's thirteen LayerNorms for one
sentence (the best ``s·tanh(αx)`` through the scatter, against the best straight line), and
:func:`substitute` puts the fitted curves in place of chosen LayerNorms and says how far the
sentence embedding moves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from lnviz.devices import to_numpy
from lnviz.models.bert import MiniLM, ModelRun, Replacement
from lnviz.norms import layer_norm

__all__ = ["CAUTION", "CAUTION_LOSS", "CAUTION_SIZES", "DERF", "DYISRU", "DYT", "VIT_TOP1",
           "Paper", "Substitution", "TanhFit", "dyt", "fit_line", "fit_tanh", "reference_cosines",
           "run_sentence", "shape_of", "standard_substitutions", "substitute", "tanh_fits"]


@dataclass(frozen=True)
class Paper:
    """A paper the page cites: who, what, where (arXiv id, and the venue where one is known)."""

    name: str
    authors: str
    title: str
    arxiv: str
    venue: str = ""

    @property
    def cited(self) -> str:
        """"authors, *title* (venue, arXiv id)", as the page writes a citation."""
        where = ", ".join(v for v in (self.venue, f"arXiv {self.arxiv}") if v)
        who = f"{self.authors}, " if self.authors else ""
        return f"{who}*{self.title}* ({where})"


DYT = Paper("DyT", "Zhu, Chen, He, LeCun and Liu", "Transformers without Normalization",
            "2503.10622", "CVPR 2025")
DERF = Paper("Derf", "Chen, Lu, Zhu, Sun and Liu", "Stronger Normalization-Free Transformers",
             "2512.10938")
DYISRU = Paper("DyISRU", "Stollenwerk", "On the Mathematical Relationship Between Layer "
               "Normalization and Dynamic Activation Functions", "2503.21708", "EACL 2026")
CAUTION = Paper("A caution", "", "When Does Removing LayerNorm Help? Activation Bounding as a "
                "Regime-Dependent Implicit Regularizer", "2604.23434", "2026")
#: ImageNet-1K top-1 accuracy (%) of the ViT the DyT and Derf papers compare, as they report it.
VIT_TOP1 = {"LayerNorm": 82.3, "DyT": 82.5, "Derf": 82.8}
#: arXiv 2604.23434 on GPT-2 at 64M parameters: DyT's change of validation loss (%) against
#: LayerNorm, by the tokens trained on (negative: better), and the model sizes it spans.
CAUTION_LOSS = {"1M": -27.3, "118M": 18.8}
CAUTION_SIZES = ("64M", "3.78B")

#: How many points the search for α looks at (a long sentence gives 13 × 196,608).
SEARCH_POINTS = 20_000
#: The α searched: a log grid wide enough for any LayerNorm input the shipped models give
#: (their values span about 1e-3 to 1e3), refined around the best point.
ALPHA_GRID = np.logspace(-5, 3, 161)


def dyt(x: torch.Tensor, alpha: float, weight: torch.Tensor | None = None,
        bias: torch.Tensor | None = None) -> torch.Tensor:
    """Dynamic Tanh: ``weight·tanh(alpha·x) + bias`` over the last dim (γ and β of shape (C,))."""
    y = torch.tanh(alpha * x)  # (…, C): no mean, no variance, no reduction at all
    if weight is not None:
        y = y * weight  # (…, C)
    if bias is not None:
        y = y + bias  # (…, C)
    return y


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
    sigmas: tuple[float, float, float] = (math.nan, math.nan, math.nan)

    def sample(self, n: int = 3000) -> tuple[np.ndarray, np.ndarray]:
        """At most ``n`` of the points, evenly spaced in the order of x (so the extremes, where
        the curve bends, are always among them): what a scatter can draw."""
        order = np.argsort(self.x, kind="stable")
        keep = order[np.unique(np.linspace(0, order.size - 1, min(n, order.size)).round()
                               .astype(int))]
        return self.x[keep], self.x_hat[keep]

    def curve(self, points: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The fitted tanh and line over the points' range: (x, tanh's x̂, line's x̂)."""
        x = np.linspace(float(self.x.min()), float(self.x.max()), points)
        return (x, self.scale * np.tanh(self.alpha * x), self.slope * x + self.intercept)

    @property
    def straight(self) -> bool:
        """Whether the best tanh is a straight line over these points: α·max|x| under 0.1,
        where tanh bends by less than 0.4 %."""
        return self.alpha * float(np.abs(self.x).max()) < 0.1

    def replacement(self, weight: torch.Tensor, bias: torch.Tensor) -> Replacement:
        """The LayerNorm as DyT with this fit: γ·(scale·tanh(αx)) + β, for
        :meth:`lnviz.models.MiniLM.run`'s ``replace``."""
        alpha = self.alpha
        scaled = weight * self.scale  # (C,): the fitted s folded into γ, as DyT's γ learns it
        return lambda x: dyt(x, alpha, scaled, bias)


def tanh_fits(run: ModelRun, eps: float = 1e-12) -> list[TanhFit]:
    """Fit :func:`fit_tanh` and :func:`fit_line` to each LayerNorm of ``run``: its input
    values against x̂ = (x − μ)/√(σ² + ε), per token as the LayerNorm computes it."""
    fits = []
    for record in run.records:
        x = record.input.detach()  # (1, T, C)
        result = layer_norm(x, x.shape[-1], None, None, eps)
        x_hat = result.output  # (1, T, C), before γ and β
        sigma = to_numpy(1 / result.rstd, torch.float64).ravel()  # (T,): each token's √(σ²+ε)
        xs, ys = to_numpy(x, torch.float64).ravel(), to_numpy(x_hat, torch.float64).ravel()
        alpha, scale, r2_tanh = fit_tanh(xs, ys)
        slope, intercept, r2_line = fit_line(xs, ys)
        fits.append(TanhFit(record.name, alpha, scale, r2_tanh, slope, intercept, r2_line,
                            xs, ys, (float(sigma.min()), float(np.median(sigma)),
                                     float(sigma.max()))))
    return fits


@dataclass(frozen=True)
class Substitution:
    """MiniLM with some LayerNorms replaced by their fitted DyT, against the model as it is.

    Attributes:
        replaced: the LayerNorms replaced, in forward order.
        cosine: cosine similarity of the sentence embeddings (1: unchanged).
        original, substituted: the two runs.
    """

    replaced: tuple[str, ...]
    cosine: float
    original: ModelRun
    substituted: ModelRun


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
    return Substitution(tuple(sorted(replace, key=order.index)), cosine, original, run)


def run_sentence(model: MiniLM, text: str) -> ModelRun:
    """``model.run(text)``: the run every fit and substitution on the page starts from."""
    return model.run(text)


def shape_of(fit: TanhFit) -> str:
    """What the scatter looks like, from the two fits: "S-shaped" where the tanh explains at
    least 0.05 more of x̂'s variance than a line, "straight" where the best tanh is a line
    (:attr:`TanhFit.straight`) or explains less than 0.01 more, else "slightly bent"."""
    gain = fit.r2_tanh - fit.r2_line
    if fit.straight or gain < 0.01:
        return "straight"
    return "S-shaped" if gain >= 0.05 else "slightly bent"


def standard_substitutions(model: MiniLM, text: str, fits: Sequence[TanhFit],
                           original: ModelRun) -> list[tuple[str, Substitution]]:
    """The replacements the page compares, each with its label: the first feed-forward
    LayerNorm alone, all six after the feed-forward, all six after attention, all thirteen."""
    by_name = {f.name: f for f in fits}
    ffn = [by_name[n] for n in by_name if n.endswith(".output.LayerNorm")
           and ".attention." not in n]
    attention = [by_name[n] for n in by_name if ".attention." in n]
    cases = [("layer 0's after-feed-forward LayerNorm", ffn[:1]),
             ("the 6 after the feed-forward", ffn),
             ("the 6 after attention", attention),
             ("all 13", list(by_name.values()))]
    return [(label, substitute(model, text, chosen, original)) for label, chosen in cases]


def reference_cosines(model: MiniLM, original: ModelRun, others: Iterable[str]
                      ) -> list[tuple[str, float]]:
    """For scale: the cosine of ``original``'s embedding with other sentences' embeddings."""
    return [(text, float(F.cosine_similarity(original.embedding, model.run(text).embedding,
                                             dim=0)))
            for text in others if text != original.text]
