r"""The bug zoo: LayerNorm written by hand seven times, six of them with a slip that real code
and the tutorials this app follows make, each checked against ``torch.nn.LayerNorm`` on an
input the learner picks.

The formula tutorial's first exercise is "implement LayerNorm and verify it against a library";
this lesson hands the learner the implementations and lets them do the verifying. Every
implementation is a plain function of :mod:`lnviz.snippets.zoo_functions` (``layer_norm_a`` …
``layer_norm_g``) taking a (seq, batch, emb) tensor and an ε; the page shows
:attr:`Variant.code`, the function's own source, so the code on screen is the code that ran
(the tests also run that text on its own, with nothing but ``torch``).

* :func:`zoo_input` — the inputs: the transformer article's "I" = [1, 2, 3], the two-word notes'
two words, the transformer article's
  padded batch, or a seeded random tensor; each optionally moved far from zero.
* :func:`compare` — every implementation against ``torch.nn.LayerNorm`` on that input: the
  per-element |variant − torch|, its maximum, and whether it is within the float32 tolerance.
* :func:`feedback` — the answer to "which of these match torch?", choice by choice: right or
  wrong, the slip, and for a slip that happens to match on this input, why, and an input where
  it does not (computed, not asserted).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lnviz.data import get_preset
from lnviz.snippets import Code, snippet, zoo_functions

__all__ = [
    "ATOL",
    "INPUTS",
    "OFFSETS",
    "RANDOM_SHAPES",
    "ROUNDING_ULPS",
    "RTOL",
    "VARIANTS",
    "ZOO_EPSILONS",
    "Comparison",
    "Feedback",
    "Variant",
    "ZooInput",
    "ZooResult",
    "allowed_difference",
    "compare",
    "feedback",
    "rounding_allowance",
    "torch_reference",
    "where_it_breaks",
    "zoo_input",
    "zoo_snippet",
]


# --- The implementations: lnviz/snippets/zoo_functions.py, shown as written there ------------


@dataclass(frozen=True)
class Variant:
    """One hand-written LayerNorm of the zoo.

    ``letter`` names its function (``layer_norm_a`` … of :mod:`lnviz.snippets.zoo_functions`);
    ``slip`` names its mistake ("" for the correct one); ``explanation`` says what the code does
    instead of LayerNorm, true for every input (numbers that depend on ε are added by
    :func:`feedback`).
    """

    letter: str
    slip: str
    explanation: str

    @property
    def function(self) -> Callable[[torch.Tensor, float], torch.Tensor]:
        """The implementation: ``layer_norm_<letter>`` of the zoo's functions."""
        return getattr(zoo_functions, f"layer_norm_{self.letter.lower()}")

    @property
    def code(self) -> str:
        """The function's source: what the page shows, and what runs."""
        return inspect.getsource(self.function)

    def __call__(self, x: torch.Tensor, eps: float) -> torch.Tensor:
        return self.function(x, eps)


VARIANTS: dict[str, Variant] = {v.letter: v for v in (
    Variant("A", "unbiased variance",
            "x.var() divides by H − 1 (unbiased, torch's default for var and std); LayerNorm "
            "divides by H, as the formula tutorial's np.var does."),
    Variant("B", "ε added to the standard deviation",
            "It divides by σ + ε instead of √(σ² + ε), as the two-word notes suggest and the "
            "Annotated Transformer does."),
    Variant("C", "statistics over dim=0",
            "dim=0 of (seq, batch, emb) is the sequence: each feature is normalized across "
            "positions, not each token across its features. A draft in the two-word notes "
            "sums over dim=0 too."),
    Variant("D", "",
            "LayerNorm as torch defines it: the biased σ² over the last dim, ε under the root."),
    Variant("E", "statistics over dims (−2, −1)",
            "Dims (−2, −1) are the batch and the features: each position pools every sample of "
            "the batch. The two-word notes did this with a batch of 1, where it is harmless."),
    Variant("F", "reshape where a permute was meant",
            "reshape(emb, seq·batch) moves no axis, it refills rows in memory order: a 'token "
            "column' mixes features of different tokens. permute(2, 0, 1) was meant. The "
            "two-word notes' reshape of (batch, seq, emb) to (seq, batch, emb) is the same "
            "slip, harmless only at batch 1."),
    Variant("G", "E[x²] − E[x]² in float32",
            "Far from zero both terms are about μ², and float32 keeps 7 digits of each: their "
            "difference loses σ² to rounding, even below zero (then √ gives NaN). Subtract μ "
            "first, as D does."),
)}
#: The slips whose feedback shows what they make of [1, 2, 3], and to how many digits (B's
#: difference hides in the sixth).
EXAMPLE_DIGITS = {"A": 3, "B": 6}

# --- The inputs -------------------------------------------------------------------------------

#: The inputs a learner can pick, with what they are.
INPUTS: dict[str, str] = {
    "I": "the transformer article's token \"I\" = [1, 2, 3]",
    "two words": "the two-word notes' two words, [0.2, 0.1, 0.3] and [0.5, 0.1, 0.1]",
    "two sentences": "the transformer article's two sentences, the shorter one ending in a "
                     "padding token",
    "random": "standard normal values",
}
#: Shapes (seq, batch, emb) of the random input, by name: every one has a batch of 2 or more.
RANDOM_SHAPES: dict[str, tuple[int, int, int]] = {
    f"seq {s}, batch {b}, emb {e}": (s, b, e) for s, b, e in ((4, 2, 8), (3, 3, 5), (8, 4, 16))}
#: How far the input can be moved from zero (added to every value).
OFFSETS: tuple[float, ...] = (0.0, 10.0, 100.0, 1000.0, 10000.0)
#: The ε a learner can pick (torch's default 1e-5 among them).
ZOO_EPSILONS: tuple[float, ...] = (1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)

#: torch.testing.assert_close's tolerances for float32: what "matches" means near zero.
RTOL, ATOL = 1.3e-6, 1e-5
#: Far from zero, two correct float32 LayerNorms differ by a few units in the last place of the
#: input, divided by √(σ² + ε): in trials over shapes up to (3, 2, 64), 30 seeds, spreads from
#: 0.1 to 4 and offsets up to ±10⁵, D and torch differed by at most 2.6 such units. The check
#: allows this many.
ROUNDING_ULPS = 8.0
_FLOAT32_ULP = float(torch.finfo(torch.float32).eps)


@dataclass(frozen=True)
class ZooInput:
    """The tensor every implementation gets: (seq, batch, emb), float32, with one label per
    token in (seq, batch) order."""

    values: torch.Tensor
    labels: tuple[str, ...]
    description: str

    @property
    def shape(self) -> tuple[int, int, int]:
        seq, batch, emb = self.values.shape
        return seq, batch, emb

    def table(self) -> pd.DataFrame:
        """The values, one row per token (labelled), one column per feature."""
        emb = self.shape[2]
        return pd.DataFrame(self.values.reshape(-1, emb).numpy(), index=list(self.labels),
                            columns=[f"feature {i}" for i in range(emb)])


def _sentences_batch() -> tuple[np.ndarray, tuple[str, ...]]:
    """The two-sentence padded batch as (seq, batch, emb), with its words in that order."""
    preset = get_preset("padded_tokens")  # (batch 2, seq 4, emb 3)
    words = np.array(preset.labels).reshape(preset.values.shape[:2])
    return preset.values.transpose(1, 0, 2), tuple(words.T.reshape(-1))


def _random_values(shape: Sequence[int], seed: int) -> torch.Tensor:
    """The random input: exactly what :func:`zoo_snippet` writes."""
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed))


def zoo_input(name: str = "I", shape: Sequence[int] = (4, 2, 8), offset: float = 0.0,
              seed: int = 0) -> ZooInput:
    """One of the :data:`INPUTS` plus ``offset`` (float32). ``shape`` and ``seed`` are used by
    "random" only; its shape must be one of :data:`RANDOM_SHAPES`."""
    if name not in INPUTS:
        raise ValueError(f"unknown input {name!r}; choose one of {list(INPUTS)}")
    if not (math.isfinite(offset) and abs(offset) <= max(OFFSETS)):
        raise ValueError(f"the offset must be a number of size at most {max(OFFSETS):g}, got "
                         f"{offset}")
    if name == "random":
        if tuple(shape) not in RANDOM_SHAPES.values():
            raise ValueError(f"the random shape must be one of {list(RANDOM_SHAPES.values())}, "
                             f"got {tuple(shape)}")
        values = _random_values(shape, seed)
        seq, batch, _ = values.shape
        labels = tuple(f"s{s} b{b}" for s in range(seq) for b in range(batch))
    elif name == "two sentences":
        array, labels = _sentences_batch()
        values = torch.as_tensor(array.copy())
    elif name == "two words":
        values = torch.as_tensor(get_preset("two_words").values)
        labels = ("word 0", "word 1")
    else:
        values = torch.as_tensor(get_preset("one_two_three").values).reshape(1, 1, 3)
        labels = ("I",)
    description = (INPUTS[name] + (f" (seed {seed})" if name == "random" else "")
                   + (f", plus {offset:g}" if offset else ""))
    return ZooInput(values.float() + offset, labels, description)


# --- Comparing with torch ---------------------------------------------------------------------


def torch_reference(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``torch.nn.LayerNorm(emb, eps=eps)`` of ``x`` (γ = 1, β = 0, as a new layer has)."""
    with torch.no_grad():
        return torch.nn.LayerNorm(x.shape[-1], eps=eps)(x)


def rounding_allowance(x: torch.Tensor, eps: float) -> torch.Tensor:
    r"""Per token (keeping the last dim, size 1): what the input's own float32 rounding lets two
    correct LayerNorms disagree by, :data:`ROUNDING_ULPS` · 2⁻²³ · max |xᵢ| / √(σ² + ε) (the
    statistics in float64). Negligible near zero; about 10⁻² for a token near 10⁴ with σ ≈ 1.
    """
    x64 = x.double()
    var = x64.var(dim=-1, keepdim=True, correction=0)
    return ROUNDING_ULPS * _FLOAT32_ULP * x64.abs().amax(dim=-1, keepdim=True) / torch.sqrt(
        var + eps)


def allowed_difference(x: torch.Tensor, reference: torch.Tensor, eps: float) -> torch.Tensor:
    """How far from torch's output a correct float32 LayerNorm may land, per element:
    torch.testing.assert_close's float32 tolerances (ATOL + RTOL·|y_torch|) plus the token's
    :func:`rounding_allowance`."""
    return ATOL + RTOL * reference.double().abs() + rounding_allowance(x, eps)


@dataclass(frozen=True)
class Comparison:
    """One implementation against torch on one input.

    ``diff`` is |output − torch| per element (NaN where the output is NaN or infinite);
    ``max_diff`` its largest value (NaN when any element is); ``nonfinite`` counts the NaN and
    infinite outputs; ``matches``: every element within :func:`allowed_difference`.
    ``worst`` is (|diff|, allowed) at the finite element furthest beyond (or least inside) what
    is allowed, relative to it.
    """

    letter: str
    output: np.ndarray
    diff: np.ndarray
    max_diff: float
    nonfinite: int
    matches: bool
    worst: tuple[float, float]


@dataclass(frozen=True)
class ZooResult:
    """Every implementation against ``torch.nn.LayerNorm`` on one input and ε."""

    eps: float
    x: np.ndarray
    reference: np.ndarray
    allowed: np.ndarray
    comparisons: dict[str, Comparison]

    @property
    def matching(self) -> tuple[str, ...]:
        """The letters whose implementation matches torch on this input."""
        return tuple(k for k, c in self.comparisons.items() if c.matches)

    @property
    def diffs(self) -> dict[str, np.ndarray]:
        """Letter → |variant − torch| per element."""
        return {k: c.diff for k, c in self.comparisons.items()}

    @property
    def max_diffs(self) -> dict[str, float]:
        return {k: c.max_diff for k, c in self.comparisons.items()}

    @property
    def matches(self) -> dict[str, bool]:
        return {k: c.matches for k, c in self.comparisons.items()}

    @property
    def nonfinite(self) -> dict[str, int]:
        return {k: c.nonfinite for k, c in self.comparisons.items()}

    def table(self) -> pd.DataFrame:
        """One row per implementation: its slip, max |diff|, NaN/inf count, whether it matches,
        and its output for the first token next to torch's (as text, NaN spelled out)."""
        first = [_numbers(c.output.reshape(-1, c.output.shape[-1])[0], 4)
                 for c in self.comparisons.values()]
        return pd.DataFrame({
            "implementation": list(self.comparisons),
            "slip": [VARIANTS[k].slip or "none" for k in self.comparisons],
            "max |diff|": [_size(c.max_diff) for c in self.comparisons.values()],
            "NaN or inf": [c.nonfinite for c in self.comparisons.values()],
            "matches torch": ["yes" if c.matches else "no" for c in self.comparisons.values()],
            "first token's output": first,
            "torch's": _numbers(self.reference.reshape(-1, self.reference.shape[-1])[0], 4),
        })


def _compare_one(variant: Variant, x: torch.Tensor, reference: torch.Tensor,
                 allowed: torch.Tensor, eps: float) -> Comparison:
    with torch.no_grad():
        output = variant(x, eps)
    finite = torch.isfinite(output)
    diff = torch.where(finite, (output.double() - reference.double()).abs(),
                       torch.full_like(allowed, math.nan))
    ratio = torch.where(finite, diff / allowed, torch.full_like(allowed, -math.inf))
    at = int(ratio.argmax())
    worst = (float(diff.reshape(-1)[at]), float(allowed.reshape(-1)[at]))
    return Comparison(variant.letter, output.numpy(), diff.numpy(), float(diff.max()),
                      int((~finite).sum()), bool(finite.all() and (diff <= allowed).all()),
                      worst)


def compare(x: torch.Tensor, eps: float = 1e-5) -> ZooResult:
    """Every :data:`VARIANTS` implementation and ``torch.nn.LayerNorm`` on ``x`` (seq, batch,
    emb) at ``eps``."""
    if x.ndim != 3:
        raise ValueError(f"the zoo's implementations take (seq, batch, emb), got shape "
                         f"{list(x.shape)}")
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"ε must be a positive number, got {eps}")
    x = x.detach().float().cpu()
    reference = torch_reference(x, eps)
    allowed = allowed_difference(x, reference, eps)
    comparisons = {letter: _compare_one(v, x, reference, allowed, eps)
                   for letter, v in VARIANTS.items()}
    return ZooResult(eps, x.numpy(), reference.numpy(), allowed.numpy(), comparisons)


# --- Feedback ---------------------------------------------------------------------------------


def _numbers(values: np.ndarray, digits: int) -> str:
    """A short vector as text: "[−1.22, 0, 1.22]" (NaN spelled out)."""
    return "[" + ", ".join("NaN" if np.isnan(v) else f"{v:.{digits}g}".replace("-", "−")
                           for v in np.ravel(values)) + "]"


def _size(value: float) -> str:
    return "NaN" if math.isnan(value) else f"{value:.2g}"


def _i_example(letter: str, eps: float, digits: int) -> str:
    """What ``letter`` and torch make of [1, 2, 3] at ``eps``, to ``digits`` digits."""
    x = zoo_input("I").values
    with torch.no_grad():
        ours = VARIANTS[letter](x, eps)
    return (f"At ε = {eps:g}, [1, 2, 3] gives {_numbers(ours.numpy(), digits)} where torch "
            f"gives {_numbers(torch_reference(x, eps).numpy(), digits)}.")


def _why_here(letter: str, zoo: ZooInput, result: ZooResult) -> str:
    """Why slip ``letter`` leaves this input alone, where that can be said for sure (it
    matched); otherwise that it happens to."""
    seq, batch, _ = zoo.shape
    x = torch.as_tensor(result.x).double()
    if letter == "E" and batch == 1:
        return "Here the batch is 1, so dims (−2, −1) hold one token's features only."
    if letter == "F" and seq * batch == 1:
        return "Here there is a single token, so reshape and permute give the same layout."
    if letter == "B":
        std = x.var(dim=-1, correction=0).sqrt()
        smallest = float(std[std > 0].min()) if (std > 0).any() else 0.0
        return (f"Here ε = {result.eps:g} is small next to every nonzero σ (the smallest is "
                f"{smallest:.3g}), so σ + ε and √(σ² + ε) differ by less than the float32 "
                "tolerance: the slip is there, too small for the check to see.")
    if letter == "A":
        largest = float(x.var(dim=-1, correction=0).max())
        if result.eps > largest:
            return (f"Here ε = {result.eps:g} outweighs every σ² (the largest is "
                    f"{largest:.2g}), so dividing σ² by H or by H − 1 barely moves √(σ² + ε).")
    if letter == "G":
        ratio = float((x.abs().amax(dim=-1) / x.var(dim=-1, correction=0).sqrt()).nan_to_num(
            0.0, posinf=0.0).max())
        return (f"Here the values sit close enough to zero (max |x| / σ = {ratio:.3g}) for "
                "float32 to keep E[x²] − E[x]² accurate.")
    return "It happens to match on this input."


def _candidates(letter: str, zoo: ZooInput, eps: float) -> list[tuple[str, torch.Tensor, float]]:
    """Inputs on which slip ``letter`` would show, in the order worth trying."""
    batch_input = zoo_input("two sentences")
    if letter == "B":
        return [(f"this input at ε = {e:g}", zoo.values, e) for e in ZOO_EPSILONS if e > eps]
    if letter == "G":
        return [(f"this input moved {shift:g} further from zero", zoo.values + shift, eps)
                for shift in (1e4, 1e5)]
    if letter == "A":
        return [("[1, 2, 3]", zoo_input("I").values, eps)]
    return [("the two-sentence batch (seq 4, batch 2)", batch_input.values, eps)]


def where_it_breaks(letter: str, zoo: ZooInput, eps: float) -> tuple[str, float] | None:
    """The first input (a description) on which slip ``letter`` differs from torch, with its
    max |diff| (NaN when it gives NaN); None if every candidate matched."""
    for description, x, e in _candidates(letter, zoo, eps):
        reference = torch_reference(x, e)
        comparison = _compare_one(VARIANTS[letter], x, reference,
                                  allowed_difference(x, reference, e), e)
        if not comparison.matches:
            return description, comparison.max_diff
    return None


@dataclass(frozen=True)
class Feedback:
    """The answer about one implementation: whether the learner's choice was ``right``, and
    the explanation."""

    letter: str
    chosen: bool
    right: bool
    text: str


def _verdict(comparison: Comparison, chosen: bool) -> str:
    letter, (diff, allowed) = comparison.letter, comparison.worst
    if comparison.matches:
        numbers = (f"max |diff| {_size(comparison.max_diff)}, inside the float32 tolerance "
                   "of torch.testing.assert_close")
    elif comparison.nonfinite:
        numbers = f"{comparison.nonfinite} of {comparison.diff.size} outputs are NaN or inf"
    else:
        numbers = f"|diff| reaches {diff:.2g} where the float32 tolerance allows {allowed:.2g}"
    if comparison.matches:
        return (f"Right: {letter} matches torch here ({numbers})." if chosen else
                f"{letter} does match torch here ({numbers}).")
    return (f"{letter} does not match torch here ({numbers})." if chosen else
            f"Right: {letter} does not match torch here ({numbers}).")


def feedback(result: ZooResult, zoo: ZooInput, chosen: Sequence[str]) -> list[Feedback]:
    """For every implementation, in order: was the learner right to choose it (or not) as
    matching torch on this input, and why.

    Each text says whether it matches (with its max |diff|), what the code does, and, for a slip
    that matches on this input, why it does here and an input where it does not.
    """
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        raise ValueError(f"unknown implementations {unknown}; choose from {list(VARIANTS)}")
    answers = []
    for letter, variant in VARIANTS.items():
        comparison = result.comparisons[letter]
        picked = letter in chosen
        parts = [_verdict(comparison, picked)]
        if variant.slip:
            parts.append(f"The slip: {variant.slip}. {variant.explanation}")
        else:
            parts.append(variant.explanation)
        if letter in EXAMPLE_DIGITS:
            parts.append(_i_example(letter, result.eps, EXAMPLE_DIGITS[letter]))
        if variant.slip and comparison.matches:
            parts.append(_why_here(letter, zoo, result))
            broken = where_it_breaks(letter, zoo, result.eps)
            parts.append(f"On {broken[0]} it does not: max |diff| {_size(broken[1])}."
                         if broken else "It matched on every other input tried here too.")
        answers.append(Feedback(letter, picked, picked == comparison.matches, " ".join(parts)))
    return answers


# --- The same check in plain PyTorch ----------------------------------------------------------


def zoo_snippet(name: str = "I", shape: Sequence[int] = (4, 2, 8), offset: float = 0.0,
                seed: int = 0, eps: float = 1e-5) -> str:
    """PyTorch code that builds the page's input and prints each implementation's max |diff|
    from ``torch.nn.LayerNorm`` and whether ``torch.testing.assert_close`` lets it pass (run it
    after the seven functions). It names no letter: what it prints is the question's answer."""
    x = zoo_input(name, shape, offset, seed).values
    if name == "random":
        keep, values = ["random"], {"shape": tuple(shape), "seed": seed}
    else:
        keep, values = ["typed"], {"values": zoo_input(name).values.tolist()}
    if offset:  # far from zero, float32 rounding needs a wider atol
        atol = ATOL + float(rounding_allowance(x, eps).max())
        keep += ["offset", "wide"]
        values |= {"offset": offset, "rtol": RTOL, "atol": Code(f"{atol:.2g}")}
    else:
        keep.append("exact")
    return snippet("bug_zoo", keep=keep, eps=eps, **values)
