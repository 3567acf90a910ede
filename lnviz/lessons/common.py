"""What several lessons share: the ε a learner can choose, the one-group worked example (its
table and its formula with the numbers substituted), the words for a norm's groups and
spread, and how a paper is cited. The Explorer shows most of them; Padding, the inspector and
the live panels reuse them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lnviz.batch import (
    LAYOUTS,
    NORM_TABLE,
    NormSpec,
    affine_params,
    channel_dim,
    param_broadcast_shape,
)
from lnviz.devices import to_numpy
from lnviz.norms import NormResult
from lnviz.terms import Layout, NormKind

__all__ = ["BREAKS", "BROKEN_AS", "EPSILONS", "FROZEN_TEXT", "GEMMA3", "GLOSSARY", "OLMO2",
           "PERI_LN", "REFERENCE_TEXT", "REFERENCE_TEXTS", "SOURCES", "TOKEN_PLACES", "VIT22B",
           "Answer", "Paper", "defined", "group_description", "short", "spread_name",
           "step_by_step", "token_place", "worked_example_latex"]


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


#: Papers more than one page cites, each checked before it is quoted.
PERI_LN = Paper("Peri-LN", "Kim et al.",
                "Peri-LN: Revisiting Normalization Layer in the Transformer Architecture",
                "2502.02732", "ICML 2025")
OLMO2 = Paper("OLMo 2", "OLMo Team", "2 OLMo 2 Furious", "2501.00656")
VIT22B = Paper("ViT-22B", "Dehghani et al.", "Scaling Vision Transformers to 22 Billion "
               "Parameters", "2302.05442", "ICML 2023")
GEMMA3 = Paper("Gemma 3", "Gemma Team", "Gemma 3 Technical Report", "2503.19786")


@dataclass(frozen=True)
class Answer:
    """The answer to a page's "Before you look" question, read off the page's own numbers: the
    option they make right, and the reason, worked from those numbers, that every learner reads
    whichever option they picked."""

    option: str
    reason: str
    #: Other options the numbers also bear out (the reason says why), e.g. one right up to ε.
    accepted: tuple[str, ...] = ()

    def reply(self, guess: str) -> str:
        """What the page says to ``guess``: "Right" and the reason; or "Not quite", the option
        the numbers make right and the same reason."""
        if guess == self.option or guess in self.accepted:
            return f"**Right:** {self.reason}"
        return f"**Not quite:** the answer is “{self.option}”. {self.reason}"


#: Where in a text a token sits, as the model pages ask which token holds the largest value.
TOKEN_PLACES = ("the first token", "a token in between", "the last token")


def token_place(index: int, count: int) -> str:
    """Which of :data:`TOKEN_PLACES` token ``index`` of ``count`` is (the first, with one)."""
    return TOKEN_PLACES[0 if index == 0 else 2 if index == count - 1 else 1]


#: The text whose loss measures what breaking a norm of a language model costs (a plain English
#: sentence), on each model page that breaks one.
REFERENCE_TEXT = "The quick brown fox jumps over the lazy dog, and then it runs back home."
#: The texts a norm sweep measures the loss on: the reference text and two more of other
#: kinds, so that one sentence does not decide (a sweep reports the mean and the range).
REFERENCE_TEXTS = (REFERENCE_TEXT,
                   "In 1905 Albert Einstein published four papers that changed how physicists "
                   "think about light, time and matter.",
                   "To make the soup, chop two onions, fry them in butter until soft, then add "
                   "the stock and simmer for twenty minutes.")
#: The text a frozen RMS is taken from: neither a default prompt nor a reference text.
FROZEN_TEXT = "Rain fell on the old town all night, and by morning the river had risen."


#: How a norm can be broken (lnviz.analysis.norm_replacement): the pages' option, and what it
#: does.
BREAKS = {
    "removed": "its input passes unchanged",
    "frozen RMS": "its input (times γ) divided by one number: the median token's RMS the same "
                  "norm saw on another text",
    NormKind.LAYER: "LayerNorm with the same γ: the mean subtracted as well",
    "fitted DyT": "Dynamic Tanh, γ·s·tanh(αx), with α and s fitted to the values the same norm "
                  "saw on another text: no statistic at all",
}
#: How a sentence says a norm was broken, for each of :data:`BREAKS`: "with the norm …".
BROKEN_AS = {"removed": "removed", "frozen RMS": "given a frozen RMS",
             NormKind.LAYER: "turned into LayerNorm with the same γ",
             "fitted DyT": "replaced by its fitted Dynamic Tanh"}


#: The ε the Explorer offers: powers of ten, plus 0 to see what ε protects against.
EPSILONS = [0.0] + [10.0**k for k in range(-12, 1)]


def step_by_step(
    x: torch.Tensor, result: NormResult, spec: NormSpec, ids: np.ndarray, group: int,
    layout: str, max_rows: int = 64, mask: np.ndarray | None = None,
) -> pd.DataFrame:
    """The worked example for one group: x, μ, σ², √(σ²+ε), x̂, γ, β and y for its elements
    (the first ``max_rows``), with a padding column when the batch has a ``mask``. The table's
    ``attrs`` hold a ``note`` on μ (or "") and each row's element as a flat index into ``x``
    (``elements``).

    The columns follow the norm: RMSNorm has x, mean(x²), √(mean(x²)+ε), x̂, γ and y (no μ, no
    β); BatchNorm in eval mode names its statistics "running μ" and "running σ²"."""
    positions = np.flatnonzero(ids.ravel() == group)[:max_rows]
    if positions.size == 0:
        raise ValueError(f"there is no group {group}")
    shape = tuple(x.shape)
    idx = np.unravel_index(positions, shape)

    def at(t: torch.Tensor | None) -> np.ndarray:
        if t is None:
            return np.zeros(positions.size)
        return to_numpy(t.expand(shape) if t.shape != shape else t)[idx]

    gamma, beta = (p.reshape(param_broadcast_shape(shape, layout, spec)) for p in
                   affine_params(spec, x, layout))
    var = at(result.var)
    mean = at(result.mean)
    note = ""
    if result.mean is not None and not (spec.norm == NormKind.BATCH and not spec.training):
        exact = _exact_group_mean(x, ids, group, layout, mask if spec.use_mask else None)
        # Only where the rounding of the stored μ shows in x̂: far from zero, or where x equals
        # the stored μ while x̂ is not 0 (the two-word notes' 0.2 − μ = −3e-08 × 1/√(σ²+ε)).
        rstd = float(at(result.rstd)[0])
        finite = math.isfinite(exact) and math.isfinite(rstd)
        shift = abs(exact - mean[0]) * rstd if finite else 0.0
        x_hat = at(result.x_hat)
        hidden = finite and bool(((at(x) == mean) & (x_hat != 0) & np.isfinite(x_hat)).any())
        if shift > 1e-6 or hidden:
            stored = str(result.mean.dtype).removeprefix("torch.")
            note = (f"μ is shown exactly, as the float64 mean of the group's values: "
                    f"{exact:.10g}. lnviz stores μ in {stored} as "
                    f"{mean[0]:.10g}, the nearest number it can hold, and centres x with the "
                    "more exact two-pass value, so (x − μ)/√(σ²+ε) with the μ shown gives x̂.")
            mean = np.full(positions.size, exact)
    table = {
        "position": [str(tuple(int(i) for i in p)) for p in zip(*idx, strict=True)],
        "x": at(x),
    }
    if NORM_TABLE[spec.norm].centred:
        prefix = "running " if spec.norm == NormKind.BATCH and not spec.training else ""
        table[f"{prefix}μ"] = mean
        table[f"{prefix}σ²"] = var
        table[f"√({prefix}σ²+ε)"] = np.sqrt(var + spec.eps)
    else:  # RMSNorm: no μ, and its "σ²" is the mean square
        table["mean(x²)"] = var
        table["√(mean(x²)+ε)"] = np.sqrt(var + spec.eps)
    table["x̂"] = at(result.x_hat)
    table["γ"] = at(gamma)
    if NORM_TABLE[spec.norm].centred:
        table["β"] = at(beta)
    table["y"] = at(result.output)
    if mask is not None:
        c = channel_dim(layout)
        table["padding"] = ~mask[tuple(i for d, i in enumerate(idx) if d != c)]
    frame = pd.DataFrame(table)
    frame.attrs["note"] = note
    frame.attrs["elements"] = positions  # each row's element, as a flat index into x
    return frame


def _exact_group_mean(x: torch.Tensor, ids: np.ndarray, group: int, layout: str,
                      mask: np.ndarray | None) -> float:
    """The mean of one group's values in float64 (real tokens only when ``mask`` is given)."""
    positions = np.flatnonzero(ids.ravel() == group)
    if mask is not None:
        idx = np.unravel_index(positions, tuple(x.shape))
        c = channel_dim(layout)
        positions = positions[mask[tuple(i for d, i in enumerate(idx) if d != c)]]
    if positions.size == 0:
        return math.nan
    values = x.detach().reshape(-1)[torch.from_numpy(positions).to(x.device)]
    return float(values.double().mean())


def worked_example_latex(row: pd.Series, eps: float, rms: bool = False) -> str:
    """The formula with one element's numbers substituted, as a textbook would print it.

    ``row`` is a row of :func:`step_by_step`; its columns say which formula: RMSNorm's (a
    "mean(x²)" column, or ``rms``), BatchNorm's in eval mode (a "running μ" column, written
    μ_run and σ²_run), or the centred one. Numbers get four significant digits, and x and μ one
    more plus as many as they share leading digits (10000.00098 − 9999.886108, not 10⁴ − 10⁴),
    so that the substituted numbers reproduce x̂ to the digits shown.
    """
    rms = rms or "mean(x²)" in row.index
    running = "running μ" in row.index

    def f(v: float, digits: int = 4) -> str:
        text = f"{v:.{digits}g}".replace("inf", r"\infty").replace("nan", r"\mathrm{NaN}")
        if "e" in text:  # 1e-05 -> 1 \times 10^{-5}, as a textbook would print it
            mantissa, exponent = text.split("e")
            power = rf"10^{{{int(exponent)}}}"
            text = power if mantissa in ("1", "-1") else rf"{mantissa} \times {power}"
            text = f"-{text}" if mantissa == "-1" else text
        return f"({text})" if v < 0 else text

    prefix = "running " if running else ""
    var_name = "mean(x²)" if rms else f"{prefix}σ²"
    var = row[var_name]
    x = float(row["x"])
    mu = 0.0 if rms else float(row[f"{prefix}μ"])
    shared = 0
    if not rms and math.isfinite(x - mu) and x != mu:
        shared = max(0, math.ceil(math.log10(max(abs(x), abs(mu)) / abs(x - mu))))
    digits = min(17, 5 + shared)
    centred = rf"{f(x, digits)}" if rms else rf"({f(x, digits)} - {f(mu, digits)})"
    mu_symbol, var_symbol = ((r"\mu_{\mathrm{run}}", r"\sigma^2_{\mathrm{run}}") if running
                             else (r"\mu", r"\sigma^2"))
    symbol = r"x" if rms else rf"(x - {mu_symbol})"
    denominator = (r"\sqrt{\overline{x^2} + \epsilon}" if rms
                   else rf"\sqrt{{{var_symbol} + \epsilon}}")
    shift = "" if rms else r" + \beta"
    shift_value = "" if rms else rf" + {f(row['β'])}"
    return (
        rf"y = \gamma \cdot \frac{{{symbol}}}{{{denominator}}}{shift}"
        rf" = {f(row['γ'])} \cdot \frac{{{centred}}}{{\sqrt{{{f(var)} + {f(eps)}}}}}{shift_value}"
        rf" = {f(row['γ'])} \cdot {f(row['x̂'])}{shift_value} = {f(row['y'])}"
    )


def spread_name(spec: NormSpec) -> str:
    """What the statistics chart's second panel shows: the spread this norm divides by."""
    return "RMS per group" if not NORM_TABLE[spec.norm].centred else "std σ per group"


def _dims(names: list[str]) -> str:
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"


def group_description(shape: tuple[int, ...], layout: str, spec: NormSpec) -> str:
    """What one group is for this norm, layout and setting, in the layout's own words:
    "one (batch, sequence) position — a token — over its features" and the like."""
    names = LAYOUTS[layout].strip("()").split(", ")
    c = channel_dim(layout)
    others = [n for d, n in enumerate(names) if d != c]
    spatial = [n for d, n in enumerate(names) if d not in (0, c)]
    if NORM_TABLE[spec.norm].trailing:
        lead, trail = names[: len(shape) - spec.dims], names[len(shape) - spec.dims:]
        what = "its RMS" if not NORM_TABLE[spec.norm].centred else "its μ and σ"
        if not lead:
            return f"the whole tensor, {what} over {_dims(trail)}"
        if layout == Layout.NLC and spec.dims == 1:
            return f"one token, {what} over its features"
        if lead == ["batch"]:
            return f"one sample, {what} over its {_dims(trail)}"
        return f"one {_dims(lead)} position, {what} over its {_dims(trail)}"
    channel = names[c].removesuffix("s")
    if spec.norm == NormKind.BATCH:
        if spec.training:
            return f"one {channel}, its μ and σ over {_dims(others)}"
        return (f"one {channel}, with the running μ and σ² that {spec.warmup_steps} training "
                f"pass(es) over {_dims(others)} left")
    if spec.norm == NormKind.GROUP:
        per = shape[c] // spec.groups
        return (f"one sample's block of {per} {names[c]}, its μ and σ over those and "
                f"{_dims(spatial)}")
    return f"one sample's {channel}, its μ and σ over {_dims(spatial)}"


def short(value: float, digits: int = 3) -> str:
    """A computed number as a sentence prints it: ``digits`` significant digits, a plain
    exponent (4e-9, not 4e-09, as ε is typed), a true minus sign in front."""
    text = f"{value:.{digits}g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return "−" + text[1:] if text.startswith("-") else text


def apart(before: float, after: float, digits: int = 3) -> tuple[str, str]:
    """Two computed numbers a sentence sets side by side ("10.04 → 10.05"), each as :func:`short`
    prints it, with as many significant digits (``digits`` at least, 17 at most, which tell
    any two floats apart) as it takes for the two to read differently when they differ: a
    change of 0.01 % must not print as "10 → 10"."""
    for n in range(digits, 18):
        pair = short(before, n), short(after, n)
        if pair[0] != pair[1] or before == after:
            return pair
    return pair


#: The terms a page uses that a learner may not know, each defined once: pages print the
#: definition where the term is first used (:func:`defined`) and Home lists them all.
GLOSSARY: dict[str, str] = {
    "roofline": "the fastest a computation can run when moving memory, not arithmetic, limits "
                "it: reading its input and writing its output once — here, a plain copy of the "
                "same bytes",
    "absmax": "absmax scaling: dividing by the largest |x| so that every value lands in "
              "−127…127 before it is rounded to an 8-bit integer",
    "Welford": "Welford's algorithm: a one-pass update of the mean and of the sum of squared "
               "deviations, one value at a time, that adds up squared deviations from the "
               "running mean instead of squares of the values",
    "residual stream": "the running sum that flows through a transformer's blocks: each "
                       "sublayer f reads it and adds its output back, x ← x + f(…)",
    "massive activation": "a handful of values hundreds or thousands of times larger than all "
                          "others, at fixed features of particular tokens (Sun et al., 2024)",
    "attention sink": "a token that receives a large share of every token's attention whatever "
                      "the text, often the first (Xiao et al., 2024)",
    "ms": "milliseconds, thousandths of a second",
    "R²": "the share of a quantity's variance that a fit explains: one minus the fit's squared "
          "errors over the squared deviations from the mean; 1 is a perfect fit, 0 no better "
          "than the mean itself",
    "cosine similarity": "the cosine of the angle between two vectors, a·b/(‖a‖‖b‖): 1 when "
                         "they point the same way, 0 when perpendicular, −1 when opposite",
    "rank correlation": "Spearman's ρ: how closely one ordering of the same items follows "
                        "another, from 1 (the same order) through 0 (unrelated) to −1 "
                        "(reversed)",
    "effective learning rate": "how fast a step turns a weight's direction: for a weight whose "
                               "scale a norm removes, η/‖W‖², not η",
    "KL divergence": "the Kullback–Leibler divergence Σ p·log(p/q): how far a distribution q "
                     "is from a distribution p, 0 when they are the same",
    "nats": "information measured with natural logarithms (bits use base 2)",
}


#: The four course notes the pages quote, by the name the pages give each: what it is. (The
#: pages reproduce their examples and name where they slip.)
SOURCES: dict[str, str] = {
    "the formula tutorial": "a course module that derives LayerNorm's formula term by term, "
                            "with a NumPy example on a vector of tiny variance and a grid of "
                            "γ and β histograms",
    "the LN-LSTM notes": "notes on Ba et al.'s Layer Normalization paper (2016): its abstract, "
                         "a walkthrough of a LayerNorm LSTM cell and a sequential-MNIST "
                         "training comparison",
    "the transformer article": "an article on why transformers use LayerNorm instead of "
                               "BatchNorm, worked on the words of “I love deep learning” with "
                               "three features each, and a padded two-sentence batch",
    "the two-word notes": "a notebook that builds LayerNorm by hand on two words of three "
                          "numbers each, [0.2, 0.1, 0.3] and [0.5, 0.1, 0.1], and checks it "
                          "against torch.nn.LayerNorm",
}


def defined(term: str) -> str:
    """``term`` with its :data:`GLOSSARY` definition beside it, for its first use on a page:
    "*roofline* (the fastest a computation …)"."""
    return f"*{term}* ({GLOSSARY[term]})"
