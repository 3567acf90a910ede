"""Start here: a twenty-minute path through normalization, one prediction at a time.

Eight steps in an order that builds: why normalize, LayerNorm on the transformer article's token
"I" = [1, 2, 3]
by hand, BatchNorm on the same batch, the pad token, batch sizes 2 and 1, ε, γ and β, and where
LayerNorm sits in a transformer. Every step asks a :class:`Question` before it shows the answer:
numbers to type, or a choice.

Every expected answer is computed here with lnviz's norms (tested against torch), and so is
every likely wrong one: :class:`Mistake` recomputes the answer with a wrong formula (an unbiased
variance, ε added to σ instead of σ², the mean left in…), so that :func:`check` can name the slip
behind a wrong answer instead of only saying it is wrong. The numbers are computed in float64 on
the CPU, whatever the sidebar says: the path is about the formula, not about precision.

:data:`OUTLINE` is the path's fixed part (titles, tab labels, links into the concept pages);
:func:`path_steps` adds the computed questions. Answers travel in the URL (:mod:`lnviz.ui.path`
names their keys).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lnviz.analysis import DepthProfile, StackConfig, depth_profiles
from lnviz.data import get_preset
from lnviz.lessons.common import defined
from lnviz.norms import NormResult, batch_norm, layer_norm, rms_norm

__all__ = [
    "EPS",
    "OUTLINE",
    "TOLERANCE",
    "Feedback",
    "Mistake",
    "Outline",
    "PathNumbers",
    "Question",
    "Step",
    "answer_quotes",
    "check",
    "epsilon_curve",
    "format_numbers",
    "parse_numbers",
    "path_numbers",
    "path_steps",
    "progress",
    "real_tokens",
    "stack_series",
    "step_status",
]

#: How far a typed number may be from the answer and still count: two decimals are enough.
TOLERANCE = 0.01
#: Within this, an answer that no slip explains is "nearly": a rounding matter.
NEARLY = 0.05
#: PyTorch's default ε, used everywhere on the path unless a step says otherwise.
EPS = 1e-5
#: How far apart two values must be for BatchNorm's batch of two to give ±1 within TOLERANCE:
#: |x̂| = d/√(d² + 4ε) ≥ 1 − t once d ≥ 2√ε·(1 − t)/√(1 − (1 − t)²), about 14·√ε.
_NEAR_PAIR = 2 * math.sqrt(EPS) * (1 - TOLERANCE) / math.sqrt(1 - (1 - TOLERANCE) ** 2)
#: What the transformer article prints for “I”: σ cut to 0.81, and the ends 1/0.81 cut to 1.23.
ARTICLE_SIGMA, ARTICLE_ENDS = 0.81, 1.23
#: What the transformer article prints for BatchNorm's feature 0 of its largest value (7): its
#: (7 − 3.5)/2.29, whose quotient rounds to 1.53.
ARTICLE_TOP = 1.52
#: The transformer stack of step 8: as deep as BERT-base or GPT-2 small, narrow enough to be
#: computed in a blink; the Shapes page shows the same stack with these settings.
STACK = StackConfig(depth=12, d_model=32, seed=0)

_MINUS = str.maketrans({"−": "-", "–": "-", "—": "-"})


# --- The path's fixed part ---------------------------------------------------------------------


@dataclass(frozen=True)
class Outline:
    """A step's fixed part: its number, tab label (the value of the step's URL key,
    :data:`lnviz.ui.path.STEP_KEY`), title and minutes. The links into the pages that go deeper
    live with the other page paths and URL keys, in :mod:`lnviz.ui.path`."""

    number: int
    tab: str
    title: str
    minutes: int


OUTLINE: tuple[Outline, ...] = (
    Outline(1, "1 Why", "Why normalize", 2),
    Outline(2, "2 LayerNorm", "LayerNorm on one token, by hand", 3),
    Outline(3, "3 BatchNorm", "BatchNorm on the same batch", 3),
    Outline(4, "4 Padding", "Padding", 2),
    Outline(5, "5 Batch size", "Batches of two, and of one", 3),
    Outline(6, "6 ε", "The ε under the square root", 3),
    Outline(7, "7 γ and β", "γ and β", 2),
    Outline(8, "8 Transformer", "Where LayerNorm sits in a transformer", 2),
)


# --- Questions, answers and feedback ----------------------------------------------------------


@dataclass(frozen=True)
class Mistake:
    """A likely wrong answer: the numbers a wrong formula gives, and what went wrong."""

    values: tuple[float, ...]
    why: str
    #: a number a source prints that lies within the answer's tolerance: typed exactly so, the
    #: answer counts as right and ``why`` is added as a note (the source's own slip behind it)
    exact: bool = False
    #: the question whose answer these numbers are, where they are another question's: while
    #: that one is open, ``why`` would answer it, and :func:`check` says the hint instead
    answers: str | None = None


@dataclass(frozen=True)
class Question:
    """One prediction, named ``name`` (the app makes its URL key from it,
    :func:`lnviz.ui.path.answer_key`).

    Numbers: ``expected`` holds the answer (one number per field the learner types) and
    ``mistakes`` the wrong formulas it is told apart from. Choice: ``options``, the right
    ``answer`` among them, and ``feedback`` for every other option. ``right`` is said to a right
    answer, ``hint`` to a wrong one nothing explains; ``reveal`` (markdown) and ``table`` show
    why, once the learner has answered (folded after a wrong answer); ``aside`` is said after
    any answer, open: what a learner must not leave the step without, right or wrong.
    """

    name: str
    prompt: str
    right: str
    reveal: str = ""
    aside: str = ""
    expected: tuple[float, ...] = ()
    mistakes: tuple[Mistake, ...] = ()
    hint: str = ""
    options: tuple[str, ...] = ()
    answer: str = ""
    feedback: dict[str, str] = field(default_factory=dict)
    placeholder: str = ""
    table: pd.DataFrame | None = None
    #: the answer is normalized values x̂ (or a norm's output at γ = 1, β = 0): a reversed sign
    #: is named as such
    normalized: bool = True

    @property
    def is_choice(self) -> bool:
        return bool(self.options)


@dataclass(frozen=True)
class Feedback:
    """What :func:`check` says: ``verdict`` is "right", "wrong", "invalid" (not an answer: the
    message says how to type one) or "unanswered"."""

    verdict: str
    message: str = ""

    @property
    def answered(self) -> bool:
        return self.verdict in ("right", "wrong")


def parse_numbers(text: str) -> tuple[float, ...]:
    """The numbers in a typed answer: "−1.22, 0, 1.22", "[-1.22 0 1.22]", "0.82; 2".

    Commas, semicolons and spaces separate; brackets and a typographic minus are fine; nan and
    inf are numbers. Raises ValueError naming the part that is not a number.
    """
    cleaned = re.sub(r"[\[\]()≈]", " ", text.translate(_MINUS))
    parts = [p for p in re.split(r"[,;\s]+", cleaned) if p]
    if not parts:
        raise ValueError("Type a number.")
    numbers = []
    for part in parts:
        try:
            numbers.append(float(part))
        except ValueError:
            raise ValueError(f"“{part}” is not a number: type numbers like 0.5, −1.25 or 2, "
                             "separated by commas.") from None
    return tuple(numbers)


def _close(values: Sequence[float], target: Sequence[float], tolerance: float) -> bool:
    return len(values) == len(target) and all(
        (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tolerance
        for a, b in zip(values, target, strict=True))


def answer_quotes(question: Question) -> frozenset[str]:
    """How ``question``'s answer reads where another question's feedback quotes it: each of its
    numbers that does not print as a whole number, without its sign, to two and four decimals
    (as the path prints numbers), or the right option of a choice. (A whole number such as 1 or
    2 reads the same as any other 1 or 2 in a sentence: it cannot be told apart as a quote.)"""
    if question.is_choice:
        return frozenset({question.answer})
    return frozenset(text for v in question.expected if "." in format_numbers([abs(v)])
                     for text in (format_numbers([abs(v)]), format_numbers([abs(v)], 4)))


def check(question: Question, answer: str | None, open_questions: Collection[str] = ()
          ) -> Feedback:
    """Check an answer: the typed text of a numbers question, the option of a choice. A wrong
    answer that is another question's answer is named so only once that question is no longer
    among ``open_questions`` (names of questions not yet answered)."""
    if answer is None or not str(answer).strip():
        return Feedback("unanswered")
    if question.is_choice:
        if answer == question.answer:
            return Feedback("right", question.right)
        if answer in question.feedback:
            return Feedback("wrong", question.feedback[answer])
        return Feedback("invalid", "Pick one of the options.")
    try:
        values = parse_numbers(answer)
    except ValueError as err:
        return Feedback("invalid", str(err))
    n = len(question.expected)
    if len(values) != n:
        wanted = "one number" if n == 1 else f"{n} numbers"
        return Feedback("invalid", f"Type {wanted}, separated by commas: you typed "
                                   f"{len(values)}.")
    if _close(values, question.expected, TOLERANCE):
        quoted = [m.why for m in question.mistakes if m.exact and _close(values, m.values, 0.0)]
        return Feedback("right", " ".join([question.right, *quoted]))
    slips = [m.why for m in question.mistakes if _close(values, m.values, TOLERANCE)
             and m.answers not in open_questions]
    if slips:  # two slips can give the same numbers: name both
        return Feedback("wrong", " Or: ".join(
            [slips[0], *(why[0].lower() + why[1:] for why in slips[1:])]))
    flipped = tuple(-v for v in question.expected)
    if question.normalized and any(question.expected) and _close(values, flipped, TOLERANCE):
        return Feedback("wrong", "Every number has the right size and the opposite sign: a "
                                 "sign slipped (in x̂ = (x − μ)/σ, a value below its mean comes "
                                 "out negative).")
    if _close(values, question.expected, NEARLY):
        return Feedback("wrong", f"Nearly: within {NEARLY} of the answer, but the check wants "
                                 f"±{TOLERANCE}. Keep two decimals all the way through.")
    return Feedback("wrong", question.hint)


def format_numbers(values: Sequence[float], digits: int = 2) -> str:
    """Numbers as the path shows them: "[−1.22, 0, 1.22]" (one number: "−1.22")."""
    def one(v: float) -> str:
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "−inf"
        text = f"{v:.{digits}f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "0") else text.replace("-", "−")
    shown = [one(float(v)) for v in values]
    return shown[0] if len(shown) == 1 else "[" + ", ".join(shown) + "]"


# --- The numbers behind the path ---------------------------------------------------------------


def _sentences_batch() -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]:
    """The two-sentence padded batch (2 sentences × 4 positions × 3 features) in float64, its mask
    (True = real token) and the tokens' names."""
    preset = get_preset("padded_tokens")
    return (torch.from_numpy(preset.values.astype(np.float64)), torch.from_numpy(preset.mask),
            tuple(preset.labels))


def _vector(t: torch.Tensor) -> tuple[float, ...]:
    return tuple(float(v) for v in t.reshape(-1))


def _outcome(compute: Callable[[], torch.Tensor]) -> str:
    """What a computation gives, as the options of a choice name it: its numbers, or "An
    error"."""
    try:
        return format_numbers(_vector(compute()))
    except ValueError:
        return "An error"


@dataclass(frozen=True)
class PathNumbers:
    """Every number the path's questions and answers use, from lnviz (and torch's refusal)."""

    tokens: torch.Tensor  # the transformer article (2, 4, 3)
    mask: torch.Tensor  # (2, 4)
    labels: tuple[str, ...]
    ln: NormResult  # NormResult of LayerNorm on every token
    bn: NormResult  # BatchNorm, pad counted, (2, 4, 3) with channel_dim = -1
    bn_masked: NormResult  # BatchNorm, pad left out
    bn_two: NormResult  # BatchNorm on ("I", "Transformers") as a batch of two, (2, 3)
    one_lnviz: str  # what lnviz says to a batch of one
    one_torch: str  # what torch says to it
    ln_eps_var: NormResult  # LayerNorm of "I" with ε = σ²
    pad_eps0: str  # LayerNorm of the pad token with ε = 0, as the choice names it
    stack: dict[str, DepthProfile]  # the transformer stack's depth profiles


def path_numbers() -> PathNumbers:
    """Compute them (about 0.1 s, most of it the transformer stack of step 8)."""
    x, mask, labels = _sentences_batch()
    ln = layer_norm(x, 3)
    var_i = float(ln.var[0, 0, 0])
    pair = x[:, 0, :]  # the first token of each sentence: "I" and "Transformers"
    try:
        batch_norm(x[:1, 0, :], None, None, training=True)
        one_lnviz = ""
    except ValueError as err:
        one_lnviz = str(err)
    try:
        F.batch_norm(x[:1, 0, :], None, None, training=True)
        one_torch = ""
    except ValueError as err:
        one_torch = str(err)
    return PathNumbers(
        tokens=x, mask=mask, labels=labels, ln=ln,
        bn=batch_norm(x, None, None, training=True, channel_dim=-1),
        bn_masked=batch_norm(x, None, None, training=True, channel_dim=-1, mask=mask),
        bn_two=batch_norm(pair, None, None, training=True),
        one_lnviz=one_lnviz, one_torch=one_torch,
        ln_eps_var=layer_norm(x[0, 0], 3, eps=var_i),
        pad_eps0=_outcome(lambda: layer_norm(x[1, 3], 3, eps=0.0).output),
        stack=depth_profiles(STACK),
    )


def real_tokens(numbers: PathNumbers) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The transformer article's real tokens (the pad left out): names, values and LayerNorm
    outputs, each
    (tokens, features)."""
    mask = numbers.mask
    names = [label for label, real in zip(numbers.labels, mask.reshape(-1).tolist(),
                                          strict=True) if real]
    return names, numbers.tokens[mask].numpy(), numbers.ln.output[mask].numpy()


def stack_series(numbers: PathNumbers) -> tuple[dict[str, np.ndarray], ...]:
    """Step 8's stack as the Shapes figure takes it: RMS of the stream, of attention's output
    and of the feed-forward network's output, by arrangement."""
    stack = numbers.stack
    return ({v: p.stream for v, p in stack.items()}, {v: p.attention for v, p in stack.items()},
            {v: p.ffn for v, p in stack.items()})


def epsilon_curve(eps: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """x̂ of the last feature of "I" = [1, 2, 3] at every ε (log-spaced from 10⁻⁴ to 10² unless
    given), and its σ²: (ε, x̂, σ²)."""
    grid = np.logspace(-4, 2, 61) if eps is None else np.asarray(eps, dtype=np.float64)
    token = _sentences_batch()[0][0, 0]
    x_hat = [float(layer_norm(token, 3, eps=float(e)).x_hat[-1]) for e in grid]
    return grid, np.array(x_hat), float(layer_norm(token, 3).var)


# --- The steps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """A step of the path: its outline, the paragraph that sets it up, and its questions."""

    outline: Outline
    intro: str
    questions: tuple[Question, ...]

    @property
    def number(self) -> int:
        return self.outline.number


def _why_step() -> Step:
    right = "About as well as with plain BatchNorm"
    return Step(OUTLINE[0], (
        "As the early layers of a network learn, the numbers they hand to later layers drift in "
        "size; a normalization layer brings each group of them back to a fixed scale — mean 0 "
        "and variance 1 for BatchNorm and LayerNorm, a root mean square of 1 for RMSNorm (up "
        "to ε, which step 6 is about) — then lets the network choose its own scale with γ and "
        "β. Ioffe & Szegedy (2015) "
        "introduced BatchNorm to reduce that drift, which they called *internal covariate "
        "shift*, and Santurkar et al. (2018) put that explanation to a test."), (
        Question(
            "why",
            "Santurkar et al. trained networks with BatchNorm and added random noise after "
            "every BatchNorm layer, changing the mean and variance of its output at every "
            "step: internal covariate shift, re-created on purpose. Predict: how did these "
            "networks train?",
            options=(right, "About as badly as without BatchNorm",
                     "Worse than without BatchNorm"),
            answer=right,
            right="Right. The “noisy BatchNorm” networks trained almost exactly as well as "
                  "those with plain BatchNorm, and much better than those without it. Had "
                  "reducing internal covariate shift been what makes BatchNorm work, the noise "
                  "should have taken the gain away: it did not, and this is why the original "
                  "explanation is disputed. Santurkar et al. credit a smoother loss landscape "
                  "instead. BatchNorm brings noise of its own, too: it takes its statistics "
                  "from a random mini-batch, so each output jitters with its batch-mates, "
                  "which acts as a mild regularizer.",
            feedback={
                "About as badly as without BatchNorm":
                    "That is what to expect if reducing internal covariate shift were what "
                    "makes BatchNorm work. It is not what happened: the noisy networks trained "
                    "almost as well as with plain BatchNorm, and much better than without it, "
                    "which is why the original explanation is disputed.",
                "Worse than without BatchNorm":
                    "The noise did not cost them BatchNorm's advantage: they trained almost as "
                    "well as with plain BatchNorm, and much better than without it. Santurkar "
                    "et al. credit a smoother loss landscape instead.",
            }),
    ))


def _ln_mistakes(token: torch.Tensor, name: str) -> list[Mistake]:
    """LayerNorm of ``token`` recomputed with the usual slips."""
    mu, var = token.mean(), token.var(unbiased=False)
    centered = token - mu
    return [
        Mistake(_vector(centered / torch.sqrt(token.var(unbiased=True) + EPS)),
                f"That is the unbiased variance: dividing by n − 1 = 2 gives σ² = "
                f"{float(token.var(unbiased=True)):.3g} (torch.var's default). LayerNorm "
                f"divides by n = 3: σ² = {float(var):.3g}."),
        Mistake(_vector(centered),
                f"That is x − μ: {name} centred but not yet divided by √(σ² + ε)."),
        Mistake(_vector(token / torch.sqrt(var + EPS)),
                "That is x/σ: the mean has to come off first, x − μ."),
        Mistake(_vector(centered / (var + EPS)),
                f"That divides by σ² = {float(var):.3g} instead of its square root σ = "
                f"{math.sqrt(float(var)):.3g}."),
        Mistake(_vector(rms_norm(token, 3, eps=EPS).output),
                "That is RMSNorm: x/√(mean x²), with no mean subtracted. LayerNorm subtracts μ "
                "first."),
    ]


def _token_table(numbers: PathNumbers, rows: Sequence[tuple[int, int]]) -> pd.DataFrame:
    ln, x = numbers.ln, numbers.tokens
    return pd.DataFrame([{
        "token": numbers.labels[s * 4 + t], "x": format_numbers(_vector(x[s, t])),
        "μ": float(ln.mean[s, t, 0]), "σ² (÷ n)": float(ln.var[s, t, 0]),
        "√(σ² + ε)": float(1 / ln.rstd[s, t, 0]), "x̂ = (x − μ)/√(σ² + ε)":
            format_numbers(_vector(ln.x_hat[s, t]), 4)} for s, t in rows])


def _layer_norm_step(numbers: PathNumbers) -> Step:
    x, ln = numbers.tokens, numbers.ln
    i_token, learning = x[0, 0], x[0, 3]
    out_i, out_learning = _vector(ln.output[0, 0]), _vector(ln.output[0, 3])
    mu, var = float(ln.mean[0, 0, 0]), float(ln.var[0, 0, 0])
    sigma = math.sqrt(var)
    real = ln.output[numbers.mask]
    spread = float((real - ln.output[0, 0]).abs().max())
    together = (f" In fact all {int(numbers.mask.sum())} real tokens of the transformer article "
                "are a + b·[0, 1, 2] for some a and b > 0 (as the Explorer and the geometry "
                f"page write it), and LayerNorm sends every one of them to "
                f"{format_numbers(out_i)}." if spread < TOLERANCE else "")
    scaled = float(learning[0] / i_token[0])
    return Step(OUTLINE[1], (
        "LayerNorm normalizes one token at a time, across its own features: subtract their "
        "mean μ, divide by √(σ² + ε), where σ² is the mean of (x − μ)² — dividing by n, not "
        "n − 1. ε = 1e-5 is added to σ² under the root; it barely moves x̂ while σ² is much "
        "larger than ε (step 6 asks when it matters). The transformer article gives "
        "each word of “I love "
        "deep learning” three features; “I” = [1, 2, 3]."), (
        Question(
            "ln_i",
            "Predict: LayerNorm(“I”) = ? Work it out on paper and type the three numbers.",
            expected=out_i, mistakes=(
                Mistake((-ARTICLE_ENDS, 0.0, ARTICLE_ENDS),
                        f"(±{ARTICLE_ENDS} is also what the transformer article prints, from σ "
                        f"cut to {ARTICLE_SIGMA}: 1/{ARTICLE_SIGMA} = {1 / ARTICLE_SIGMA:.4f}. "
                        f"With σ = {sigma:.4f} the ends are ±{abs(out_i[0]):.4f}, "
                        f"±{abs(out_i[0]):.2f} to two decimals.)", exact=True),
                *_ln_mistakes(i_token, "“I”")),
            placeholder="three numbers, e.g. 0.5, −1.25, 2",
            hint="Not quite. Work it through: μ = mean of 1, 2, 3; σ² = mean of (x − μ)²; "
                 "then x̂ = (x − μ)/√(σ² + ε).",
            right=f"Right: μ = {mu:g}, σ² = {var:.3g}, σ = {sigma:.4f}, so x̂ = [−1, 0, 1]/"
                  f"{sigma:.4f} = {format_numbers(out_i, 4)}.",
            reveal=f"The transformer article cuts σ = {sigma:.4f} to {ARTICLE_SIGMA} (rounding "
                   f"would give {sigma:.2f}) and then writes ±{ARTICLE_ENDS}: that is "
                   f"1/{ARTICLE_SIGMA} = {1 / ARTICLE_SIGMA:.4f}, the cut carried forward. With "
                   f"σ = {sigma:.4f} the ends are ±{abs(out_i[0]):.4f}, which rounds to "
                   f"±{abs(out_i[0]):.2f}.",
            table=_token_table(numbers, [(0, 0)])),
        Question(
            "ln_learning",
            f"“learning” = {format_numbers(_vector(learning))} is {scaled:g} × “I”. "
            "Predict: LayerNorm(“learning”) = ?",
            expected=out_learning,
            mistakes=(Mistake(tuple(scaled * v for v in out_i),
                              f"That is {scaled:g} × LayerNorm(“I”). But σ grows {scaled:g}× "
                              f"as well as x − μ, and the {scaled:g}s cancel."),
                      *_ln_mistakes(learning, "“learning”")),
            placeholder="three numbers",
            hint=f"Not quite: compute μ and σ² of {format_numbers(_vector(learning))} as for "
                 "“I”, or think about what dividing by σ does to a token scaled by 4.",
            right=f"Right: the same as “I”. Scaling a token by {scaled:g} scales x − μ and σ "
                  f"by {scaled:g}, and their ratio stays: LayerNorm forgets a token's scale "
                  "(up to ε)." + together,
            table=_token_table(numbers, [(0, 0), (0, 3)])),
    ))


def _feature_table(numbers: PathNumbers) -> pd.DataFrame:
    """Feature 1 of every position, pad included, and BatchNorm's output for it. (Without the
    pad is step 4's question: not shown here.)"""
    x, out = numbers.tokens, numbers.bn.output
    return pd.DataFrame([{"token": numbers.labels[s * 4 + t], "feature 0": float(x[s, t, 0]),
                          "after BatchNorm": float(out[s, t, 0])}
                         for s in range(x.shape[0]) for t in range(x.shape[1])])


def _stats_table(numbers: PathNumbers) -> pd.DataFrame:
    bn, masked = numbers.bn, numbers.bn_masked
    return pd.DataFrame({
        "feature": [0, 1, 2],
        "μ, pad counted": _vector(bn.mean), "σ, pad counted": _vector(bn.var.sqrt()),
        "μ, pad left out": _vector(masked.mean), "σ, pad left out": _vector(masked.var.sqrt()),
        "“I”, pad counted": _vector(bn.output[0, 0]),
        "“I”, pad left out": _vector(masked.output[0, 0])})


def _batch_norm_step(numbers: PathNumbers) -> Step:
    x, mask = numbers.tokens, numbers.mask
    column = x[..., 0].reshape(-1)  # feature 0 of all 8 positions
    real = x[..., 0][mask]
    mu, var = float(numbers.bn.mean[0, 0, 0]), float(numbers.bn.var[0, 0, 0])
    expected = float(numbers.bn.output[0, 0, 0])
    top = float(column.max())  # the article's last line: its largest value
    top_out = (top - mu) / math.sqrt(var + EPS)
    sentence = x[0, :, 0]
    values = ", ".join(format_numbers([float(v)]) for v in column)
    return Step(OUTLINE[2], (
        "BatchNorm turns the table around: one μ and σ per *feature*, taken across every "
        "token of the batch. The two-sentence batch holds two sentences in four places each "
        "(the second is a word short, so a pad fills its last place), so "
        f"feature 0 — the first number of every token — pools {column.numel()} values: "
        f"{values}. The last one is the pad, and the transformer article counts it."), (
        Question(
            "bn_seed",
            "Predict: BatchNorm's output for feature 0 of “I” (training mode, pad "
            "counted)? One number.",
            expected=(expected,),
            mistakes=(
                Mistake(((1 - mu) / math.sqrt(float(column.var(unbiased=True)) + EPS),),
                        f"That is the unbiased variance, dividing by {column.numel() - 1}. "
                        f"BatchNorm normalizes with the biased one, dividing by "
                        f"{column.numel()}: σ² = {var:.4g}."),
                Mistake((float(numbers.ln.output[0, 0, 0]),),
                        "That normalizes “I” across its own features: LayerNorm's answer. "
                        "BatchNorm takes feature 0 across the batch.", answers="ln_i"),
                Mistake((float(numbers.bn_masked.output[0, 0, 0]),),
                        f"That leaves the pad out (μ = {float(real.mean()):g}): step 4's masked "
                        "BatchNorm. Here the pad counts, as in the transformer article.",
                        answers="bn_masked"),
                Mistake(((1 - float(sentence.mean()))
                         / math.sqrt(float(sentence.var(unbiased=False)) + EPS),),
                        "That takes the statistics over sentence 1 alone, which is what "
                        "InstanceNorm does. BatchNorm pools both sentences."),
                Mistake((float(numbers.bn_two.output[0, 0]),),
                        "That pools only the first token of each sentence. For tokens, "
                        "BatchNorm pools every position of every sentence.", answers="bn_two"),
            ),
            placeholder="one number",
            hint=f"Not quite: μ and σ² of the {column.numel()} values above, then "
                 "(1 − μ)/√(σ² + ε).",
            right=f"Right: μ = {mu:g}, σ² = {var:.4g}, σ = {math.sqrt(var):.2f}, so "
                  f"(1 − {mu:g})/{math.sqrt(var):.2f} = {format_numbers([expected])}, as "
                  "the transformer article has it.",
            reveal="Every token's feature 0 moved by the same μ and σ. “I” is now "
                   f"{format_numbers([expected])} because of the other seven values: in "
                   "another batch it would be something else. (The transformer article's "
                   f"last line, ({top:g} − {mu:g})/{math.sqrt(var):.2f} = {ARTICLE_TOP}, slips "
                   f"in the rounding: {top - mu:g}/{math.sqrt(var):.4f} = {top_out:.4f}, so "
                   f"{top_out:.2f}.)",
            table=_feature_table(numbers)),
    ))


def _padding_step(numbers: PathNumbers) -> Step:
    x, mask = numbers.tokens, numbers.mask
    real = x[..., 0][mask]
    mu_real = float(real.mean())
    var_real = float(real.var(unbiased=False))
    expected = float(numbers.bn_masked.output[0, 0, 0])
    counted = float(numbers.bn.output[0, 0, 0])
    ln_i = format_numbers(_vector(numbers.ln.output[0, 0]))
    return Step(OUTLINE[3], (
        "That eighth value is no word: it is the pad that fills sentence 2 up to four tokens. "
        "Counting it pulls feature 0's mean toward the pad's 0, and the next batch, with more "
        "or fewer pads, would pull it elsewhere. Masked BatchNorm leaves the pads out of the "
        "statistics."), (
        Question(
            "bn_masked",
            "Predict: with the pad left out, BatchNorm's output for feature 0 of “I”?",
            expected=(expected,),
            mistakes=(
                Mistake((counted,), "That still counts the pad: step 3's answer. Leave the 0 "
                                    "out and take μ and σ² of the seven real values.",
                        answers="bn_seed"),
                Mistake(((1 - mu_real) / math.sqrt(float(real.var(unbiased=True)) + EPS),),
                        f"That is the unbiased variance, dividing by {real.numel() - 1}. "
                        f"BatchNorm divides by {real.numel()}: σ² = {var_real:g}."),
                Mistake((float(numbers.ln.output[0, 0, 0]),),
                        "That is LayerNorm's answer, across the features of “I”. Masked "
                        "BatchNorm still takes feature 0 across the batch.", answers="ln_i"),
            ),
            placeholder="one number",
            hint="Not quite: the real values of feature 0 are 1 to 7. Their μ and σ², then "
                 "(1 − μ)/√(σ² + ε).",
            right=f"Right: the seven real values 1…7 have μ = {mu_real:g} and σ² = "
                  f"{var_real:g}, σ = {math.sqrt(var_real):g}, so (1 − {mu_real:g})/"
                  f"{math.sqrt(var_real):g} = {format_numbers([expected])}. One pad had moved “I” "
                  f"from {format_numbers([expected])} to {format_numbers([counted])}.",
            reveal="LayerNorm never looks at the pad: each token is normalized by itself, so "
                   f"“I” is {ln_i} in any batch, padded or not.",
            table=_stats_table(numbers)),
    ))


def _batch_size_step(numbers: PathNumbers) -> Step:
    pair = numbers.tokens[:, 0, :]
    bn = numbers.bn_two
    out_i, out_t = _vector(bn.output[0]), _vector(bn.output[1])
    mu, centered = pair.mean(0), pair - pair.mean(0)
    unbiased = centered / torch.sqrt(pair.var(0, unbiased=True) + EPS)
    ln_i = format_numbers(_vector(numbers.ln.output[0, 0]))
    one = "It raises an error"
    unchanged = f"It returns “I” unchanged, {format_numbers(_vector(pair[0]))}"
    zeros = "It returns [0, 0, 0]"
    layer = "It returns LayerNorm's answer (step 2's)"  # not its numbers: step 2 asks for them
    options = (layer, zeros, unchanged, one)
    return Step(OUTLINE[4], (
        "BatchNorm's statistics are only as good as its batch. Take the first token of each "
        f"sentence, “I” = {format_numbers(_vector(pair[0]))} and “Transformers” = "
        f"{format_numbers(_vector(pair[1]))}, as a batch of two tokens: shape (2, 3)."), (
        Question(
            "bn_two",
            "Predict: BatchNorm's output for “I” in this batch of two?",
            expected=out_i,
            mistakes=(
                Mistake(_vector(unbiased[0]),
                        "That is the unbiased variance (÷ (2 − 1)). BatchNorm normalizes with "
                        "the biased one, ÷ 2."),
                Mistake(_vector(numbers.ln.output[0, 0]),
                        "That is LayerNorm's answer, across the features of “I”. BatchNorm "
                        "takes each feature across the two tokens.", answers="ln_i"),
                Mistake(out_t, "That is “Transformers”' output: “I” has the smaller value "
                               "in every feature."),
                Mistake(_vector(centered[0]), "That is x − μ, not yet divided by σ."),
            ),
            placeholder="three numbers",
            hint=f"Not quite: feature by feature, μ is the midpoint of the two values; σ is "
                 f"half their distance (μ of feature 0 is {float(mu[0]):g}).",
            right=f"Right: {format_numbers(out_i)}. With two values per feature, μ is their "
                  "midpoint and σ half their distance, so each output is −1 or +1 whatever "
                  f"the values (unless they lie within {_NEAR_PAIR:.2g} of each other, "
                  f"{_NEAR_PAIR / math.sqrt(EPS):.0f}·√ε: closer, ε pulls the output more than "
                  f"{TOLERANCE:g} short of ±1): a batch of two keeps only which token is larger.",
            table=pd.DataFrame({
                "feature": [0, 1, 2], "“I”": _vector(pair[0]),
                "“Transformers”": _vector(pair[1]), "μ": _vector(bn.mean),
                "σ": _vector(bn.var.sqrt()), "“I” after BatchNorm": out_i,
                "“Transformers” after": out_t})),
        Question(
            "bn_one",
            "Now a batch of one: “I” alone, shape (1, 3). Predict: what happens when torch's "
            "BatchNorm layer (nn.BatchNorm1d) is run on it in training mode?",
            options=options,
            answer=one if numbers.one_lnviz else zeros,
            right=f"Right: torch refuses — “{numbers.one_torch}” — and so does lnviz. One value "
                  "per feature is its own mean, so x − μ would be 0 and x̂ = [0, 0, 0] "
                  "whatever the input (the layer's output β, its shift, at its start 0): "
                  "nothing to learn from. In evaluation mode BatchNorm "
                  "uses its running statistics instead and does answer.",
            feedback={
                layer: "That is LayerNorm's answer, and LayerNorm needs no batch. BatchNorm "
                       "needs more than one value per feature to estimate a σ.",
                zeros: "[0, 0, 0] is what the formula gives — each value is its own mean, so "
                       "x − μ = 0 for any input — and that is why torch does not return it: an "
                       "output that ignores the input is useless, so it raises an error "
                       "instead.",
                unchanged: "In training mode BatchNorm never passes x through: it subtracts "
                           "the batch's μ, and with one token that μ is x itself.",
            },
            reveal=f"lnviz says: {numbers.one_lnviz}. LayerNorm gives “I” = {ln_i} at any "
                   "batch size, one included."),
    ))


def _epsilon_step(numbers: PathNumbers) -> Step:
    token = numbers.tokens[0, 0]
    ln = numbers.ln
    var = float(ln.var[0, 0, 0])
    centered = token - token.mean()
    expected = _vector(numbers.ln_eps_var.x_hat)
    plain = _vector(ln.x_hat[0, 0])
    change = float((layer_norm(token, 3, eps=0.0).x_hat - ln.x_hat[0, 0]).abs().max())
    pad = "[NaN, NaN, NaN]"
    return Step(OUTLINE[5], (
        # σ² of "I" is step 2's working: not given here, where a learner may arrive first
        "ε is added to σ² under the square root: x̂ = (x − μ)/√(σ² + ε). For “I”, PyTorch's "
        f"default ε = 1e-5 changes x̂ by about {change:.1g}. ε matters when σ² is not much "
        "bigger than it."), (
        Question(
            "eps",
            "Predict: x̂ of “I” when ε equals its σ²?",
            expected=expected,
            mistakes=(
                Mistake(_vector(centered / (math.sqrt(var) + var)),
                        "That adds ε to σ: (x − μ)/(σ + ε). ε goes under the square root, with "
                        "σ². (The two-word notes' text makes this slip; its code adds ε to σ².)"),
                Mistake(plain, "That ignores ε. At ε = σ² it doubles what is under the square "
                               "root."),
                Mistake(tuple(v / 2 for v in plain),
                        "That halves x̂. Doubling σ² + ε divides x̂ by √2, not by 2: the square "
                        "root."),
                Mistake(_vector(centered / (2 * var)),
                        "That divides by σ² + ε without taking the square root."),
            ),
            placeholder="three numbers",
            hint="Not quite: x − μ is [−1, 0, 1]; divide by √(σ² + ε) with ε = σ².",
            right=f"Right: √(σ² + σ²) = √2·σ, so every x̂ shrinks by 1/√2 ≈ 0.71: "
                  f"±{abs(plain[0]):.2f} becomes ±{abs(expected[0]):.2f}. Where ε is much "
                  "larger than σ², x̂ ≈ (x − μ)/√ε: ε, not the data, sets the scale."),
        Question(
            "eps_pad",
            "The pad token [0, 0, 0] has σ² = 0. Predict: LayerNorm of it with ε = 0?",
            options=("[0, 0, 0]", pad, "[inf, inf, inf]", "An error"),
            answer=numbers.pad_eps0,
            right="Right: x − μ = 0 and √(σ² + ε) = 0, and 0/0 is NaN — silently, in torch "
                  "and in lnviz. With ε = 1e-5 it is 0/√ε = 0: keeping this finite is what ε "
                  "is for.",
            feedback={
                "[0, 0, 0]": "That is the answer with ε = 1e-5: 0/√ε = 0. With ε = 0 the "
                             "divisor is 0 as well, and 0/0 is NaN.",
                "[inf, inf, inf]": "inf is a non-zero number divided by 0. Here x − μ is 0 "
                                   "too: 0/0 is NaN.",
                "An error": "Nothing checks: floating point computes 0/0 = NaN without a "
                            "word, in torch and in lnviz.",
            }),
    ))


def _undo_table(numbers: PathNumbers, gamma: float, beta: float) -> pd.DataFrame:
    token = numbers.tokens[0, 0]
    undone = layer_norm(token, 3, torch.full((3,), gamma, dtype=token.dtype),
                        torch.full((3,), beta, dtype=token.dtype))
    return pd.DataFrame({"feature": [0, 1, 2], "x̂": _vector(undone.x_hat),
                         "γ·x̂": _vector(undone.x_hat * gamma),
                         "y = γ·x̂ + β": _vector(undone.output), "x": _vector(token)})


def _scale_shift_step(numbers: PathNumbers) -> Step:
    ln = numbers.ln
    gamma, beta = float(1 / ln.rstd[0, 0, 0]), float(ln.mean[0, 0, 0])
    var = float(ln.var[0, 0, 0])
    gamma_l, beta_l = float(1 / ln.rstd[0, 3, 0]), float(ln.mean[0, 3, 0])
    return Step(OUTLINE[6], (
        "After x̂ comes a learned scale and shift, y = γ·x̂ + β: one γ and one β per feature, "
        "starting at 1 and 0. They let the network give each feature the spread and the "
        "centre it needs, instead of 1 and 0."), (
        Question(
            "undo",
            "Predict: which γ and β (the same for all three features) turn LayerNorm(“I”) "
            "(step 2's answer) back into [1, 2, 3]? Type γ, then β.",
            expected=(gamma, beta),
            mistakes=(
                Mistake((var, beta), f"γ = σ² = {var:.3g}: x̂ was divided by σ = √σ², so γ "
                                     "multiplies by σ."),
                Mistake((1 / gamma, beta), f"γ = 1/σ = {1 / gamma:.3g} divides once more; to "
                                           "undo the division, γ multiplies by σ."),
                Mistake((gamma, 0.0), "β = 0 leaves the mean at 0, giving [−1, 0, 1]: β "
                                      "adds μ back."),
                Mistake((beta, gamma), "Swapped: γ scales (undoing σ), β shifts (undoing μ)."),
                Mistake((1.0, 0.0), "γ = 1, β = 0 are the starting values: they leave x̂ as "
                                    "it is."),
            ),
            placeholder="γ, β", normalized=False,
            hint="Not quite: x̂ = (x − μ)/σ. Solve for x: x = σ·x̂ + μ.",
            right=f"Right: γ = √(σ² + ε) = {gamma:.4f} undoes the division and β = μ = "
                  f"{beta:g} the subtraction: γ·x̂ + β = x.",
            # whatever the answer: the formula tutorial's identity claim, and why it fails
            aside=f"These γ and β fit “I” only: “learning” would need γ = {gamma_l:.2f}, "
                   f"β = {beta_l:g}. The formula tutorial says this choice lets the layer "
                   "learn the identity, “turning off” the normalization; but LayerNorm's γ and "
                   "β are per feature and shared by every token, while σ and μ are each "
                   "token's own, so no one choice undoes it for all tokens at once. "
                   "(BatchNorm's γ and β are per feature, as its statistics are, so γ = "
                   "√(σ² + ε), β = μ of one batch recover that batch; in training mode the "
                   "next batch brings its own μ and σ and is missed. Only in evaluation mode, "
                   "with the running statistics frozen, does one γ and β undo BatchNorm for "
                   "every input.)",
            table=_undo_table(numbers, gamma, beta)),
    ))


def _rms_text(value: float) -> str:
    return "overflow" if math.isnan(value) else f"{value:.3g}"


def _transformer_step(numbers: PathNumbers) -> Step:
    stack = numbers.stack
    final = {v: float(p.stream[-1]) for v, p in stack.items()}
    steady = [v for v, p in stack.items()
              if np.all(np.abs(np.asarray(p.stream[1:]) - 1.0) < TOLERANCE)]
    labels = {"post-LN": "post-LN: LN(x + f(x))", "pre-LN": "pre-LN: x + f(LN(x))",
              "none": "no LayerNorm: x + f(x)"}
    depth = STACK.depth
    return Step(OUTLINE[7], (
        "A transformer block adds two sublayers f — attention, then a feed-forward network — "
        f"to a {defined('residual stream')}, x. The original transformer (**post-LN**) "
        "normalizes after each "
        "addition: x ← LN(x + f(x)). GPT-2 and most models since (**pre-LN**) put the LayerNorm "
        "at the start of each sublayer's branch: x ← x + f(LN(x))."), (
        Question(
            "where",
            f"A random batch with RMS ≈ 1 goes through {depth} randomly initialised blocks. "
            "Predict: in which arrangement does the residual stream keep RMS 1 after every "
            "block?",
            options=tuple(labels.values()),
            answer=labels[steady[0]] if len(steady) == 1 else "",
            right=f"Right: in post-LN each block ends with a LayerNorm, so the stream leaves "
                  f"every block with mean 0 and variance 1 per token (RMS "
                  f"{_rms_text(final['post-LN'])} after {depth} blocks). Pre-LN's stream is "
                  "never normalized: each block adds a piece of about the same size, and it "
                  f"grows to RMS {_rms_text(final['pre-LN'])}; with no LayerNorm at all it "
                  f"reaches {_rms_text(final['none'])}.",
            feedback={
                labels["pre-LN"]:
                    "Pre-LN normalizes only the copy each sublayer reads; the stream itself is "
                    f"never normalized. Every block adds to it: after {depth} blocks its RMS "
                    f"is {_rms_text(final['pre-LN'])}.",
                labels["none"]:
                    f"Nothing normalizes that stream: after {depth} blocks its RMS is "
                    f"{_rms_text(final['none'])}.",
            },
            reveal="Pre-LN's growing stream is by design: every sublayer still reads a "
                   "normalized input, and pre-LN models such as GPT-2 put one more LayerNorm "
                   "after the last block."),
    ))


def path_steps(numbers: PathNumbers | None = None) -> tuple[Step, ...]:
    """The eight steps, with every question's numbers computed (from ``numbers``, or afresh)."""
    numbers = numbers if numbers is not None else path_numbers()
    return (_why_step(), _layer_norm_step(numbers), _batch_norm_step(numbers),
            _padding_step(numbers), _batch_size_step(numbers), _epsilon_step(numbers),
            _scale_shift_step(numbers), _transformer_step(numbers))


# --- Progress ----------------------------------------------------------------------------------


def step_status(step: Step, answers: dict[str, str | None]) -> str:
    """"right" when every question of the step is answered right, "wrong" when one is answered
    wrong, otherwise "todo". ``answers`` maps questions' names to what the learner gave."""
    verdicts = [check(q, answers.get(q.name)).verdict for q in step.questions]
    if all(v == "right" for v in verdicts):
        return "right"
    return "wrong" if "wrong" in verdicts else "todo"


#: How the progress line marks a step.
MARKS = {"right": "✓", "wrong": "✗", "todo": "○"}


def progress(steps: Sequence[Step], answers: dict[str, str | None]) -> tuple[int, int, str]:
    """(checks answered right, checks in all, a line marking every step ✓, ✗ or ○)."""
    questions = [q for s in steps for q in s.questions]
    right = sum(check(q, answers.get(q.name)).verdict == "right" for q in questions)
    line = " · ".join(f"{MARKS[step_status(s, answers)]} {s.outline.tab}" for s in steps)
    return right, len(questions), line
