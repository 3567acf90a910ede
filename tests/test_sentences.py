"""Where a sentence's numbers come from.

The rule (README, "Where a sentence lives"): a number a sentence states as a *result* — a mean,
a σ, an x̂, a time — is formatted from what a lesson computed, never typed. What a page may type
is what is not a result: a value the learner can set, a default of torch's, a quote of a source's
own numbers, or a mathematical constant. This test reads every string the pages hold and
finds each number with a decimal point or an exponent; each must be one of :data:`TYPED`, whose
reasons are checked where they can be (a quote against the example it quotes, a constant against
its value), and every entry must still be in use.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pytest

from lnviz.data import get_preset
from lnviz.train import LEARNING_RATES

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"(?<![\w.])[-−]?\d+\.\d+(?![\w.])|(?<![\w.])\d+(?:\.\d+)?e[-−]?\d+")

_TWO_WORDS = {f"{v:g}" for v in get_preset("two_words").values.ravel()}
_SIGMOID = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731

#: Every number a page types, (page, number as written) -> why it is typed, and a check of that
#: reason where one can be made (True where the reason is a setting, a default or a quote of a
#: tolerance the page explains).
TYPED: dict[tuple[str, str], tuple[str, bool]] = {
    ("beyond.py", "2.0"): ("a model's name the DyT paper plots: wav2vec 2.0", True),
    ("bn_vs_ln.py", "0.01"): ("a momentum the learner can choose", True),
    ("efficientnet.py", "2.0"): ("a licence's name: Apache-2.0", True),
    ("bn_vs_ln.py", "0.1"): ("torch's default momentum", True),
    ("bug_zoo.py", "1e-5"): ("torch's default ε", True),
    ("bug_zoo.py", "1e-08"): ("the colour scale's floor, a setting of the figure", True),
    ("epsilon.py", "1e-12"): ("the ε slider's smallest value", True),
    ("epsilon.py", "1e-05"): ("torch's default ε", True),
    ("epsilon.py", "0.01"): ("the smallest offset the cancellation sweep offers", True),
    ("epsilon.py", "0.71"): ("1/√2", f"{1 / math.sqrt(2):.2f}" == "0.71"),
    ("gradients.py", "1e-15"): ("the size of float64 rounding on values of order one",
                                1e-16 < np.finfo(np.float64).eps < 1e-15),
    ("gradients.py", "0.01"): ("a factor the learner can choose", True),
    ("inspector.py", "1.5"): ("Tukey's whiskers: 1.5 times the quartile range", True),
    ("ln_lstm.py", "0.001"): ("a learning rate the page offers", 1e-3 in LEARNING_RATES),
    ("ln_lstm.py", "0.01"): ("a learning rate the page offers", 1e-2 in LEARNING_RATES),
    ("ln_lstm.py", "0.1"): ("a learning rate the page offers", 1e-1 in LEARNING_RATES),
    ("ln_lstm.py", "0.02"): ("a bound on σ′(4)", _SIGMOID(4) * (1 - _SIGMOID(4)) < 0.02),
    ("ln_lstm.py", "0.002"): ("a bound on tanh′(4)", 1 - math.tanh(4) ** 2 < 0.002),
    ("shapes.py", "0.1"): ("the two-word notes' values, quoted", "0.1" in _TWO_WORDS),
    ("shapes.py", "0.2"): ("the two-word notes' values, quoted", "0.2" in _TWO_WORDS),
    ("shapes.py", "0.3"): ("the two-word notes' values, quoted", "0.3" in _TWO_WORDS),
    ("shapes.py", "0.5"): ("a gain the learner can choose; the two-word notes' value",
                           "0.5" in _TWO_WORDS),
    ("shapes.py", "1.414"): ("√2", f"{math.sqrt(2):.3f}" == "1.414"),
}


def _typed_numbers() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted((ROOT / "app_pages").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for number in NUMBER.findall(node.value):
                    found.setdefault((path.name, number), []).append(node.lineno)
    return found


FOUND = _typed_numbers()


@pytest.mark.parametrize("key", sorted(FOUND))
def test_every_number_a_page_types_is_a_setting_a_default_a_quote_or_a_constant(key) -> None:
    assert key in TYPED, (f"{key[0]}, line {FOUND[key][0]}: {key[1]} is typed into a sentence; "
                          "format it from what the lesson computes, or say in TYPED why it is "
                          "typed")
    reason, holds = TYPED[key]
    assert holds, f"{key}: the reason given, {reason!r}, does not hold"


def test_every_typed_number_the_list_allows_is_still_on_its_page() -> None:
    assert set(TYPED) <= set(FOUND), sorted(set(TYPED) - set(FOUND))


def test_the_numbers_the_padding_and_epsilon_pages_state_come_from_their_lessons() -> None:
    """The two pages that typed results (μ 3.5, σ 2.29; σ² = 4e-9, |x̂| 1.58) now print them
    from the lesson: none of those appears typed, and the lesson's facts give them."""
    from lnviz.batch import Batch
    from lnviz.lessons.epsilon import epsilon_steps, stability_vector
    from lnviz.lessons.padding import feature_stats, pad_pull

    for typed in ("3.5", "2.29", "−1.09", "5.25", "4e-9", "1.58", "0.845"):
        assert not any(number == typed for _, number in FOUND), typed
    preset = get_preset("padded_tokens")
    batch = Batch(preset.values, "NLC", preset.mask)
    pull = pad_pull(batch, feature_stats(batch, dtype="float64"))
    real = preset.values[..., 0][preset.mask]  # the article's arithmetic, by hand
    assert pull.total == 28 and pull.positions == 8
    assert pull.mean_with_pad == pytest.approx(3.5) and pull.var_with_pad == pytest.approx(5.25)
    assert (pull.mean_real, pull.std_real) == pytest.approx((real.mean(), real.std()))
    assert pull.x_hat_with_pad == pytest.approx((1 - 3.5) / math.sqrt(5.25))
    assert pull.x_hat_real == pytest.approx(-1.5)
    tiny = stability_vector("tiny")
    assert float(np.var(tiny.astype(np.float64))) == pytest.approx(4e-9, rel=0.01)
    assert epsilon_steps(tiny, 1e-8, dtype="float64").max_output == pytest.approx(0.845,
                                                                                  abs=5e-4)


#: Each glossary term, the page where it is first used, and the shown text that defines it.
FIRST_USES = {
    "roofline": ("app_pages/performance.py", {}),
    "Welford": ("app_pages/epsilon.py", {}),
    "residual stream": ("app_pages/shapes.py", {}),
}


@pytest.mark.parametrize("term", sorted(FIRST_USES))
def test_a_term_is_defined_where_it_is_first_used(term) -> None:
    from pageutil import open_page

    from lnviz.lessons.common import GLOSSARY, defined

    page, query = FIRST_USES[term]
    at = open_page(page, query)
    shown = " ".join(m.value for m in at.markdown)
    assert defined(term) in shown and GLOSSARY[term] in shown


def test_home_lists_every_glossary_term() -> None:
    from pageutil import open_page

    from lnviz.lessons.common import GLOSSARY

    at = open_page("app_pages/home.py")
    listed = " ".join(m.value for m in at.expander[0].markdown)
    assert all(f"**{term}**: {meaning}." in listed for term, meaning in GLOSSARY.items())


def test_no_string_a_learner_may_read_names_the_project_s_source_notes_by_number() -> None:
    """"Seed 003" means nothing to a learner (and reads like the sidebar's random seed): every
    string outside a docstring — split over lines or not — names a source by what it is."""
    found = []
    for path in sorted([*(ROOT / "app_pages").glob("*.py"), *(ROOT / "lnviz").rglob("*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)}
        found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docstrings
                  and re.search(r"(?i)\bseed 00\d|\bthe seed's\b", node.value)]
    assert found == []


def test_home_says_what_each_course_note_the_pages_quote_is() -> None:
    """Every name the pages give a course note ("the formula tutorial", …) is one Home's
    sources list explains, and every page's text that quotes one uses such a name."""
    from pageutil import open_page

    from lnviz.lessons.common import SOURCES

    code = " ".join(p.read_text() for folder in ("app_pages", "lnviz")
                    for p in (ROOT / folder).rglob("*.py"))
    quoted = set(re.findall(r"the (?:formula tutorial|transformer article|two-word notes)", code))
    assert quoted == {"the formula tutorial", "the transformer article", "the two-word notes"}
    assert quoted <= set(SOURCES)
    at = open_page("app_pages/home.py")
    listed = " ".join(m.value for e in at.expander if e.label.startswith("Sources")
                      for m in e.markdown)
    for name, what in SOURCES.items():
        assert f"**{name[0].upper() + name[1:]}**: {what}." in listed


def test_lists_in_sentences_join_their_last_item_with_and_or_or() -> None:
    from lnviz.terms import listed

    assert listed([]) == ""
    assert listed(["LayerNorm"]) == "LayerNorm"
    assert listed(["a", "b"]) == "a and b"
    assert listed(("pre-LN", "post-LN", "Peri-LN"), "or") == "pre-LN, post-LN or Peri-LN"
