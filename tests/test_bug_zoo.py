"""lnviz.lessons.bug_zoo (seven hand-written LayerNorms against torch.nn.LayerNorm) and the Bug
zoo page."""

from __future__ import annotations

import contextlib
import io
import itertools
import math

import numpy as np
import pytest
import torch
from pageutil import alerts, figures, open_page, page_text, trace_data

from lnviz.lessons.bug_zoo import (
    ATOL,
    INPUTS,
    OFFSETS,
    RANDOM_SHAPES,
    RTOL,
    VARIANTS,
    ZOO_EPSILONS,
    allowed_difference,
    compare,
    feedback,
    torch_reference,
    where_it_breaks,
    zoo_input,
    zoo_snippet,
)

PAGE = "app_pages/bug_zoo.py"
TOKEN_I = torch.tensor([[[1.0, 2.0, 3.0]]])
SIGMA2 = 2.0 / 3.0  # the biased variance of [1, 2, 3]


def every_input(seeds=(0, 1)):
    """(name, shape, seed) for every fixed input and every random shape at a few seeds."""
    yield from ((name, (4, 2, 8), 0) for name in INPUTS if name != "random")
    yield from (("random", shape, seed) for shape in RANDOM_SHAPES.values() for seed in seeds)


def run_code(letter: str, x: torch.Tensor, eps: float) -> torch.Tensor:
    """Letter's code as the page shows it, run on its own with nothing but torch."""
    namespace = {"torch": torch}
    exec(compile(VARIANTS[letter].code, f"variant {letter}", "exec"), namespace)  # our code
    (function,) = [v for k, v in namespace.items() if k.startswith("layer_norm_")]
    return function(x, eps)


# --- The code shown is the code that runs, and runs alone -------------------------------------


@pytest.mark.parametrize("letter", list(VARIANTS))
@pytest.mark.parametrize(("name", "offset", "eps"), [("I", 0.0, 1e-5),
                                                     ("two sentences", 1e4, 0.1),
                                                     ("random", 100.0, 1e-8)])
def test_the_shown_code_runs_alone_and_gives_the_compared_output(letter, name, offset, eps):
    x = zoo_input(name, offset=offset, seed=3).values
    shown = run_code(letter, x, eps)
    result = compare(x, eps)
    np.testing.assert_array_equal(shown.numpy(), result.comparisons[letter].output)
    assert VARIANTS[letter].code.startswith(f"def layer_norm_{letter.lower()}(x, eps=1e-5):")


def test_seven_implementations_one_without_a_slip():
    assert list(VARIANTS) == list("ABCDEFG")
    assert [k for k, v in VARIANTS.items() if not v.slip] == ["D"]


# --- Each slip, with its exact size where it can be worked out by hand ------------------------


@pytest.mark.parametrize("eps", [1e-5, 0.1, 1.0])
def test_unbiased_variance_turns_1_2_3_into_minus_1_0_1(eps):
    out = run_code("A", TOKEN_I, eps)
    # x.var() of [1, 2, 3] is 1: x̂ = (x − 2)/√(1 + ε), so [−1, 0, 1] up to ε
    np.testing.assert_allclose(out.reshape(-1), np.array([-1.0, 0.0, 1.0]) / math.sqrt(1 + eps),
                               rtol=1e-6)
    result = compare(TOKEN_I, eps).comparisons["A"]
    exact = 1 / math.sqrt(SIGMA2 + eps) - 1 / math.sqrt(1 + eps)
    assert result.max_diff == pytest.approx(exact, rel=1e-5) and not result.matches
    if eps == 1e-5:
        assert compare(TOKEN_I, eps).table().loc[0, "first token's output"] == "[−1, 0, 1]"


@pytest.mark.parametrize("eps", [1e-8, 1e-5, 1e-3, 1.0])
def test_eps_on_the_standard_deviation_divides_by_sigma_plus_eps(eps):
    x = zoo_input("random", (8, 4, 16), seed=5).values
    x64 = x.double()
    sigma = x64.var(-1, keepdim=True, correction=0).sqrt()
    by_hand = (x64 - x64.mean(-1, keepdim=True)) / (sigma + eps)
    np.testing.assert_allclose(run_code("B", x, eps).double(), by_hand, rtol=1e-5, atol=1e-6)
    # on [1, 2, 3] it differs from torch by |1/(σ + ε) − 1/√(σ² + ε)| at x − μ = ±1
    result = compare(TOKEN_I, eps).comparisons["B"]
    sigma_i = math.sqrt(SIGMA2)
    exact = abs(1 / (sigma_i + eps) - 1 / math.sqrt(SIGMA2 + eps))
    assert result.max_diff == pytest.approx(exact, rel=2e-2, abs=3e-7)
    assert result.matches == (eps <= 1e-5)  # hidden by float32 rounding at torch's default


def test_statistics_over_dim_0_normalize_each_feature_across_positions():
    x = zoo_input("random", (8, 4, 16), seed=2).values
    x64 = x.double()
    by_hand = (x64 - x64.mean(0)) / torch.sqrt(x64.var(0, correction=0) + 1e-5)
    np.testing.assert_allclose(run_code("C", x, 1e-5).double(), by_hand, atol=1e-5)
    # one position: every value is its own mean, so the output is 0 where torch gives ±1.22
    result = compare(TOKEN_I, 1e-5).comparisons["C"]
    np.testing.assert_array_equal(result.output, 0.0)
    assert result.max_diff == pytest.approx(1 / math.sqrt(SIGMA2 + 1e-5), rel=1e-6)


def test_dims_minus_2_minus_1_is_layer_norm_over_batch_and_features():
    for name in ("two words", "two sentences"):
        x = zoo_input(name).values
        over_two = torch.nn.functional.layer_norm(x, x.shape[-2:])
        np.testing.assert_allclose(run_code("E", x, 1e-5), over_two, atol=1e-5)
    # a batch of 1, as in the two-word notes
    assert compare(zoo_input("two words").values).comparisons["E"].matches
    batch = compare(zoo_input("two sentences").values).comparisons["E"]
    assert not batch.matches and batch.max_diff > 1.0


def test_reshape_mixes_tokens_and_permute_was_meant():
    x = zoo_input("random", (3, 3, 5), seed=4).values
    seq, batch, emb = x.shape
    columns = x.permute(2, 0, 1).reshape(emb, -1)  # what F meant
    mean = columns.mean(0, keepdim=True)
    fixed = (columns - mean) / torch.sqrt(((columns - mean) ** 2).mean(0, keepdim=True) + 1e-5)
    fixed = fixed.reshape(emb, seq, batch).permute(1, 2, 0)
    torch.testing.assert_close(fixed, torch_reference(x, 1e-5))
    assert compare(x).comparisons["F"].max_diff > 0.5
    single = compare(TOKEN_I).comparisons["F"]
    assert single.matches and single.max_diff == 0.0


@pytest.mark.parametrize(("batch", "same"), [(1, True), (2, False)])
def test_the_notes_reshape_is_a_permute_only_at_batch_1(batch, same):
    x = torch.arange(batch * 2 * 3, dtype=torch.float32).reshape(batch, 2, 3)  # (batch, seq, emb)
    assert torch.equal(x.reshape(2, batch, 3), x.permute(1, 0, 2)) is same


def test_e_x2_minus_e_x_squared_cancels_to_exactly_zero_on_1_2_3_near_10000():
    x = TOKEN_I + 1e4
    # in float32, E[x²] and E[x]² round to the same number: the variance is 0, so x̂ = (x − μ)/√ε
    np.testing.assert_allclose(run_code("G", x, 1e-5).reshape(-1),
                               np.array([-1.0, 0.0, 1.0]) / math.sqrt(1e-5), rtol=1e-6)
    result = compare(x, 1e-5).comparisons["G"]
    assert result.max_diff == pytest.approx(1 / math.sqrt(1e-5) - 1 / math.sqrt(SIGMA2 + 1e-5),
                                            rel=1e-4)
    near_zero = compare(TOKEN_I, 1e-5).comparisons["G"]
    assert near_zero.matches and near_zero.max_diff < 1e-6


def test_e_x2_minus_e_x_squared_goes_negative_and_gives_nan():
    result = compare(zoo_input("two words", offset=1e4).values).comparisons["G"]
    assert result.nonfinite > 0 and math.isnan(result.max_diff) and not result.matches
    assert np.isnan(result.diff).sum() == result.nonfinite


# --- What "matches" means ---------------------------------------------------------------------


def test_the_correct_one_matches_on_every_input_offset_and_eps():
    for (name, shape, seed), offset, eps in itertools.product(every_input(seeds=range(6)),
                                                              OFFSETS, ZOO_EPSILONS):
        result = compare(zoo_input(name, shape, offset, seed).values, eps)
        assert result.comparisons["D"].matches, (name, shape, seed, offset, eps)
        if offset == 0:
            assert result.comparisons["D"].max_diff < 1e-6


def test_the_allowed_difference_is_assert_closes_near_zero_and_grows_with_the_offset():
    x = zoo_input("random", (4, 2, 8), seed=0).values
    reference = torch_reference(x, 1e-5)
    near = allowed_difference(x, reference, 1e-5)
    plain = ATOL + RTOL * reference.double().abs()
    assert ((near - plain) < 1e-5).all() and (near >= plain).all()
    far = allowed_difference(x + 1e4, torch_reference(x + 1e4, 1e-5), 1e-5)
    assert 1e-3 < float(far.min()) < float(far.max()) < 0.1


@pytest.mark.parametrize(("name", "matching"), [
    ("I", ("B", "D", "E", "F", "G")),
    ("two words", ("D", "E", "G")),
    ("two sentences", ("B", "D", "G")),
    ("random", ("B", "D", "G")),
])
def test_which_match_at_torchs_default_eps(name, matching):
    assert compare(zoo_input(name).values, 1e-5).matching == matching


def test_every_slip_that_matches_somewhere_breaks_on_the_input_it_names():
    """The "it does not on …" sentence: computed for every setting the page allows, and true."""
    seen = set()
    for (name, shape, seed), offset, eps in itertools.product(every_input(), OFFSETS, ZOO_EPSILONS):
        zoo = zoo_input(name, shape, offset, seed)
        result = compare(zoo.values, eps)
        for letter in result.matching:
            if not VARIANTS[letter].slip:
                continue
            seen.add(letter)
            broken = where_it_breaks(letter, zoo, eps)
            assert broken is not None, (letter, name, shape, seed, offset, eps)
            assert math.isnan(broken[1]) or broken[1] > 1e-5
    assert seen == {"A", "B", "E", "F", "G"}  # C never matches on these inputs


def test_unbiased_variance_matches_only_where_eps_dwarfs_the_variance():
    zoo = zoo_input("two words", offset=1e4)
    result = compare(zoo.values, 1.0)
    assert result.comparisons["A"].matches
    (a,) = [f for f in feedback(result, zoo, []) if f.letter == "A"]
    assert "Here ε = 1 outweighs every σ² (the largest is 0.036)" in a.text
    on_i = 1 / math.sqrt(SIGMA2 + 1.0) - 1 / math.sqrt(1.0 + 1.0)  # (x − 2)/√(σ² + ε), σ² = 1
    assert a.text.endswith(f"On [1, 2, 3] it does not: max |diff| {on_i:.2g}.")


@pytest.mark.parametrize(("name", "shape", "seed"), list(every_input(seeds=range(4))))
def test_try_this_holds_b_fails_at_a_large_eps_and_g_at_10000(name, shape, seed):
    for offset in OFFSETS:
        x = zoo_input(name, shape, offset, seed).values
        assert not compare(x, max(ZOO_EPSILONS)).comparisons["B"].matches, offset
    for eps in ZOO_EPSILONS:
        x = zoo_input(name, shape, max(OFFSETS), seed).values
        assert not compare(x, eps).comparisons["G"].matches, eps


# --- Inputs -----------------------------------------------------------------------------------


def test_inputs_are_the_seeds_examples_laid_out_seq_first():
    assert zoo_input("I").values.tolist() == [[[1.0, 2.0, 3.0]]]
    words = zoo_input("two words")
    np.testing.assert_allclose(words.values, [[[0.2, 0.1, 0.3]], [[0.5, 0.1, 0.1]]])
    batch = zoo_input("two sentences")
    assert batch.shape == (4, 2, 3)
    assert batch.labels[:4] == ("I", "Transformers", "love", "are")
    assert batch.values[3, 1].tolist() == [0.0, 0.0, 0.0] and batch.labels[7] == "<pad>"
    assert batch.values[0, 1].tolist() == [5.0, 10.0, 15.0]
    assert batch.table().loc["learning"].tolist() == [4.0, 8.0, 12.0]


def test_random_input_follows_the_seed_shape_and_offset():
    a = zoo_input("random", (8, 4, 16), seed=1).values
    assert a.shape == (8, 4, 16) and a.dtype == torch.float32
    assert torch.equal(a, zoo_input("random", (8, 4, 16), seed=1).values)
    assert not torch.equal(a, zoo_input("random", (8, 4, 16), seed=2).values)
    assert torch.equal(zoo_input("random", (8, 4, 16), 100.0, seed=1).values, a + 100.0)
    assert all(shape[1] >= 2 for shape in RANDOM_SHAPES.values())


@pytest.mark.parametrize(("call", "message"), [
    (lambda: zoo_input("II"), "unknown input"),
    (lambda: zoo_input("random", (2, 2, 2)), "random shape must be one of"),
    (lambda: zoo_input("I", offset=1e9), "offset must be"),
    (lambda: zoo_input("I", offset=math.nan), "offset must be"),
    (lambda: compare(torch.ones(2, 3)), r"take \(seq, batch, emb\)"),
    (lambda: compare(TOKEN_I, 0.0), "ε must be a positive number"),
    (lambda: feedback(compare(TOKEN_I), zoo_input("I"), ["Z"]), "unknown implementations"),
])
def test_refusals(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- Feedback, choice by choice ---------------------------------------------------------------


def test_feedback_for_every_choice_on_i():
    zoo = zoo_input("I")
    answers = {a.letter: a for a in feedback(compare(zoo.values), zoo, ["A", "C", "D"])}
    # chosen, does not match: wrong
    # allowed at x = 3: ATOL + RTOL·1.22 + 8 ulps of 3 over σ
    allowed = ATOL + RTOL / math.sqrt(SIGMA2) + 8 * 2**-23 * 3 / math.sqrt(SIGMA2 + 1e-5)
    assert not answers["A"].right and answers["A"].text.startswith(
        f"A does not match torch here (|diff| reaches 0.22 where the float32 tolerance allows "
        f"{allowed:.2g}). The slip: unbiased variance.")
    assert "At ε = 1e-05, [1, 2, 3] gives [−1, 0, 1] where torch gives [−1.22, 0, 1.22]." in (
        answers["A"].text)
    # not chosen, matches: wrong, with why here and where it breaks
    assert not answers["B"].right and answers["B"].text.startswith(
        "B does match torch here (max |diff| 5.8e-06, inside the float32 tolerance of "
        "torch.testing.assert_close).")
    assert "the slip is there, too small for the check to see" in answers["B"].text
    assert ("[1, 2, 3] gives [−1.22473, 0, 1.22473] where torch gives [−1.22474, 0, 1.22474]"
            in answers["B"].text)
    assert "the smallest is 0.816" in answers["B"].text
    assert answers["B"].text.endswith("On this input at ε = 0.0001 it does not: max |diff| "
                                      "5.8e-05.")
    # chosen, does not match: wrong
    assert not answers["C"].right and answers["C"].text.startswith("C does not match torch")
    # chosen, matches: right
    assert answers["D"].right and answers["D"].text.startswith("Right: D matches torch here")
    assert "LayerNorm as torch defines it" in answers["D"].text
    assert not answers["E"].right and "Here the batch is 1" in answers["E"].text
    assert answers["E"].text.endswith("On the two-sentence batch (seq 4, batch 2) it does not: max "
                                      "|diff| 1.8.")
    assert "Here there is a single token" in answers["F"].text
    assert answers["F"].text.endswith("it does not: max |diff| 2.4.")
    assert "(max |x| / σ = 3.67)" in answers["G"].text
    assert answers["G"].text.endswith("On this input moved 10000 further from zero it does "
                                      "not: max |diff| 3.2e+02.")


def test_feedback_not_chosen_and_not_matching_is_right_and_nan_is_named():
    zoo = zoo_input("two words", offset=1e4)
    answers = {a.letter: a for a in feedback(compare(zoo.values), zoo, [])}
    assert answers["A"].right and answers["A"].text.startswith("Right: A does not match torch")
    assert answers["G"].right and "outputs are NaN or inf" in answers["G"].text
    assert not answers["D"].right and answers["D"].text.startswith("D does match torch here")
    assert [a.right for a in answers.values()] == [not c.matches for c in
                                                   compare(zoo.values).comparisons.values()]


def test_every_answer_right_when_choosing_exactly_the_matching_ones():
    for name in INPUTS:
        zoo = zoo_input(name)
        result = compare(zoo.values)
        assert all(a.right for a in feedback(result, zoo, result.matching))
        assert not any(a.right for a in feedback(
            result, zoo, [k for k in VARIANTS if k not in result.matching]))


# --- The PyTorch snippet ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "shape", "offset", "seed", "eps"), [
    ("I", (4, 2, 8), 0.0, 0, 1e-5),
    ("two sentences", (4, 2, 8), 1e4, 0, 0.1),
    ("random", (8, 4, 16), 1e4, 7, 1e-8),
    ("two words", (4, 2, 8), 100.0, 0, 1e-3),
])
def test_snippet_runs_and_prints_the_pages_differences(name, shape, offset, seed, eps):
    code = "\n\n".join(v.code for v in VARIANTS.values()) + "\n" + zoo_snippet(
        name, shape, offset, seed, eps)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "snippet", "exec"), {})  # our own generated code
    printed = {function: (diff, verdict) for function, diff, verdict
               in (line.split() for line in out.getvalue().splitlines())}
    result = compare(zoo_input(name, shape, offset, seed).values, eps)
    for letter, comparison in result.comparisons.items():
        diff, verdict = printed[f"layer_norm_{letter.lower()}"]
        if comparison.nonfinite:
            assert math.isnan(float(diff))
        else:
            assert float(diff) == pytest.approx(comparison.max_diff, rel=1e-3, abs=2e-7)
        # assert_close's verdict is the page's
        assert verdict == ("matches" if comparison.matches else "differs"), letter


# --- The page ---------------------------------------------------------------------------------


def check(at, picks):
    at.multiselect(key="bz_pick").set_value(picks).run()
    at.toggle(key="bz_check").set_value(True).run()
    assert not at.exception, at.exception
    return at


def test_default_view_asks_before_it_shows():
    at = open_page(PAGE)
    assert at.segmented_control(key="bz_input").value == "I"
    assert at.selectbox(key="bz_shape").disabled
    assert [c.value for c in at.code[:7]] == [v.code.strip() for v in VARIANTS.values()]
    assert figures(at) == [] and not alerts(at)["success"] and not alerts(at)["error"]
    assert any("Predict first" in c.value for c in at.caption)
    assert at.code[-1].value == zoo_snippet("I").strip()
    # nothing on the page says which letters match before the check: not the "Try this", not
    # the code (it prints each verdict when run, and names no letter)
    text = page_text(at)
    assert "until B fails" not in text and "for G" not in text
    assert "layer_norm_d(x" not in at.code[-1].value
    at = check(at, [])
    assert "Raise ε until B fails" in " ".join(i.value for i in at.info)


def test_checking_gives_feedback_per_letter_and_the_heatmaps():
    at = check(open_page(PAGE), ["A", "D"])
    assert any("2 of 7 right" in m.value for m in at.markdown)
    found = alerts(at)
    assert [t[:1] for t in found["error"]] == ["A", "B", "E", "F", "G"]
    assert [t.split(":")[1][1] for t in found["success"]] == ["C", "D"]
    zoo = zoo_input("I")
    result = compare(zoo.values)
    answers = feedback(result, zoo, ["A", "D"])
    assert sorted(found["error"] + found["success"]) == sorted(a.text for a in answers)
    assert len(figures(at)) == 1
    for k, letter in enumerate(VARIANTS):
        z = trace_data(at, 0, k)
        expected = np.log10(np.maximum(result.diffs[letter].reshape(-1, 3), 1e-8))
        np.testing.assert_allclose(z, expected, rtol=1e-5)
    table = at.dataframe[-1].value
    assert table["matches torch"].tolist() == ["no", "yes", "no", "yes", "yes", "yes", "yes"]


def test_every_input_control_changes_the_input_and_unchecks():
    at = check(open_page(PAGE), ["D"])
    at.segmented_control(key="bz_input").set_value("two sentences").run()
    assert at.toggle(key="bz_check").value is False and figures(at) == []
    assert at.dataframe[0].value.shape == (8, 3)
    at.segmented_control(key="bz_input").set_value("random").run()
    assert not at.selectbox(key="bz_shape").disabled
    assert at.dataframe[0].value.shape == (8, 8)
    at.selectbox(key="bz_shape").set_value("seq 8, batch 4, emb 16").run()
    table = at.dataframe[0].value
    assert table.shape == (32, 16)
    np.testing.assert_allclose(table.to_numpy(), zoo_input("random", (8, 4, 16)).table())
    at.number_input(key="seed").set_value(5).run()
    np.testing.assert_allclose(at.dataframe[0].value.to_numpy(),
                               zoo_input("random", (8, 4, 16), seed=5).table())
    at.select_slider(key="bz_offset").set_value(1000.0).run()
    np.testing.assert_allclose(at.dataframe[0].value.to_numpy(),
                               zoo_input("random", (8, 4, 16), 1000.0, seed=5).table())
    assert "plus 1000" in at.caption[0].value
    at = check(at, ["D"])
    at.select_slider(key="bz_eps").set_value(0.1).run()
    assert at.toggle(key="bz_check").value is False
    assert "eps = 0.1" in at.code[-1].value


def test_eps_and_offset_change_the_verdicts():
    at = open_page(PAGE, {"bz_eps": "0.1"})
    check(at, ["B"])
    assert any(t.startswith("B does not match torch here") for t in alerts(at)["error"])
    at = open_page(PAGE, {"bz_offset": "10000"})
    check(at, ["G"])
    assert any(t.startswith("G does not match torch here") for t in alerts(at)["error"])
    assert len(figures(at)[0]["data"]) == 7  # on I the variance cancels to exactly 0: finite
    at = open_page(PAGE, {"bz_offset": "10000", "bz_input": "two words"})
    check(at, [])
    assert len(figures(at)[0]["data"]) == 8
    marks = trace_data(at, 0, 7)  # G's NaN cells, painted over its panel
    g = compare(zoo_input("two words", offset=1e4).values).comparisons["G"]
    np.testing.assert_array_equal(marks == 1, np.isnan(g.diff.reshape(-1, 3)))
    assert g.nonfinite == int((marks == 1).sum()) > 0


def test_the_url_restores_the_question_and_the_answer():
    at = open_page(PAGE, {"bz_input": "random", "bz_shape": "seq 3, batch 3, emb 5",
                          "bz_eps": "0.001", "bz_pick": ["D", "G"], "bz_check": "true"})
    assert at.multiselect(key="bz_pick").value == ["D", "G"]
    assert at.toggle(key="bz_check").value is True
    assert any("of 7 right" in m.value for m in at.markdown)
    assert at.dataframe[0].value.shape == (9, 5)
    assert len(figures(at)) == 1
