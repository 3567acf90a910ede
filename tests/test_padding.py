"""Padding and sequences: lnviz.lessons.padding checked against the transformer article's numbers
and torch, its
figures, and the page run headless with AppTest."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pageutil import alerts, asks_first, decode, figures, open_page

from lnviz import charts
from lnviz.batch import Batch
from lnviz.data import get_preset, padded_batch
from lnviz.lessons.padding import (
    PAD_MEAN_OPTIONS,
    SWEEP_FRACTIONS,
    PaddedRecipe,
    check_lengths,
    feature_stats,
    pad_mean_answer,
    pad_token_steps,
    padding_outputs,
    padding_snippet,
    padding_sweep,
)
from lnviz.limits import PADDING_MAX_LENGTH, PADDING_MAX_SEQUENCES

PAGE = "app_pages/padding.py"


def two_sentences() -> Batch:
    preset = get_preset("padded_tokens")
    return Batch(preset.values, "NLC", preset.mask, preset.labels)


# --- BatchNorm's statistics -------------------------------------------------------------------


def test_the_two_sentences_numbers():
    stats = feature_stats(two_sentences())
    # Feature 1 of the seed: 1…7 and one pad 0 → μ = 3.5, σ = √5.25 ≈ 2.29; without it 4 and 2.
    assert stats.mean_with_pad[0] == pytest.approx(3.5)
    assert stats.std_with_pad[0] == pytest.approx(2.2913, abs=1e-4)
    assert stats.mean_masked[0] == pytest.approx(4.0)
    assert stats.std_masked[0] == pytest.approx(2.0)
    assert stats.pad_fraction == pytest.approx(1 / 8)
    table = stats.table()
    assert table["μ with pads"].tolist() == pytest.approx([3.5, 6.875, 10.25])
    assert table.shape == (3, 5)


def test_outputs_match_torch_and_the_seed():
    batch = two_sentences()
    out = padding_outputs(batch)
    x = torch.from_numpy(batch.values)
    mask = torch.from_numpy(batch.mask)
    counted = F.batch_norm(x.reshape(-1, 3), None, None, training=True).reshape(2, 4, 3)
    np.testing.assert_allclose(out["BatchNorm, pads counted"], counted, atol=1e-5)
    np.testing.assert_allclose(out["BatchNorm, masked"][batch.mask],
                               F.batch_norm(x[mask], None, None, training=True), atol=1e-5)
    np.testing.assert_allclose(out["LayerNorm"], F.layer_norm(x, (3,)), atol=1e-5)
    # "I" = [1, 2, 3]: (1 − 3.5)/2.29 = −1.09 with the pad, (1 − 4)/2 = −1.5 without; the seed's
    # "powerful" is (7 − 3.5)/2.29 = 1.53, and LayerNorm gives "I" [−1.22, 0, 1.22].
    assert out["BatchNorm, pads counted"][0, 0, 0] == pytest.approx(-1.0911, abs=1e-4)
    assert out["BatchNorm, pads counted"][1, 2, 0] == pytest.approx(1.5275, abs=1e-4)
    assert out["BatchNorm, masked"][0, 0, 0] == pytest.approx(-1.5, abs=1e-5)
    np.testing.assert_allclose(out["LayerNorm"][0, 0], [-1.2247, 0.0, 1.2247], atol=1e-4)
    np.testing.assert_array_equal(out["LayerNorm"][1, 3], [0.0, 0.0, 0.0])  # the pad token


def test_the_pad_question_is_answered_with_the_articles_arithmetic():
    """Feature 0 of the article's batch: seven real values of mean 4 and one zero pad, so
    μ = 7·4/8 = 3.5 with the pad counted (by hand): closer to the pads' value."""
    answer = pad_mean_answer(two_sentences(), feature_stats(two_sentences()))
    assert answer.option == "closer to the pads' value"
    assert "(7·4 + 1·0)/8 = 3.5, moved 12.5% of the way" in answer.reason


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4), d_model=st.integers(1, 4),
       pad=st.sampled_from([0.0, -3.0, 2.5]), seed=st.integers(0, 1000))
def test_the_pad_question_follows_where_the_weighted_mean_lands(lengths, d_model, pad, seed):
    """Counted with P pads of value p, R real tokens of mean m average to (R·m + P·p)/(R + P):
    closer to p whenever there is a pad and m ≠ p, where it was without pads."""
    values, mask = padded_batch(len(lengths), d_model, lengths=lengths, pad_value=pad, seed=seed)
    batch = Batch(values, "NLC", mask)
    stats = feature_stats(batch)
    if not stats.masked_ok:
        return  # the page asks only where the real tokens have a μ and σ of their own
    real = values[..., 0][mask].astype(np.float64)
    pads = int((~mask).sum())
    expected = (real.sum() + pads * pad) / mask.size
    assert stats.mean_with_pad[0] == pytest.approx(expected, rel=1e-5, abs=1e-5)
    option = pad_mean_answer(batch, stats).option
    if pads == 0:
        assert option == PAD_MEAN_OPTIONS[1]
    elif abs(real.mean() - pad) > 1e-3:
        assert option == PAD_MEAN_OPTIONS[0]


def test_refuses_what_is_not_a_padded_batch():
    with pytest.raises(ValueError, match="padded batch"):
        feature_stats(Batch(np.ones((2, 3), np.float32), "NC"))
    all_pad = Batch(np.zeros((1, 2, 3), np.float32), "NLC", np.zeros((1, 2), bool))
    with pytest.raises(ValueError, match="nothing to normalize"):
        padding_outputs(all_pad)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        padding_sweep(two_sentences(), fractions=[0.5, 1.0])


# --- The sweep --------------------------------------------------------------------------------


def test_sweep_on_the_two_sentences_batch():
    sweep = padding_sweep(two_sentences())
    # R = 7 real tokens; P pads give a share P/(7 + P) and, with zero pads, μ = 28/(7 + P).
    assert sweep.pads[0] == 0 and len(np.unique(sweep.pads)) == len(sweep.pads)
    np.testing.assert_allclose(sweep.fraction, sweep.pads / (7 + sweep.pads))
    np.testing.assert_allclose(sweep.mean_with_pad[:, 0], 28 / (7 + sweep.pads), rtol=1e-6)
    np.testing.assert_allclose(sweep.mean_masked[:, 0], 4.0, rtol=1e-6)
    np.testing.assert_allclose(sweep.std_masked[:, 0], 2.0, rtol=1e-6)
    assert sweep.pads.max() == 63  # 90% padding
    assert sweep.drift_with_pad[0] == 0.0
    assert np.all(np.diff(sweep.drift_with_pad) > 0)  # every extra pad moves the real tokens more
    assert sweep.drift_masked.max() < 1e-6
    assert sweep.drift_layer_norm.max() == 0.0
    assert len(SWEEP_FRACTIONS) == 19


@settings(max_examples=20, deadline=None)
@given(batch_size=st.integers(1, 5), d_model=st.integers(2, 6), max_len=st.integers(2, 7),
       pad=st.floats(-5, 5, allow_nan=False), seed=st.integers(0, 10**6))
def test_padding_never_reaches_layer_norm_or_masked_batch_norm(batch_size, d_model, max_len,
                                                               pad, seed):
    values, mask = padded_batch(batch_size, d_model, max_len=max_len, pad_value=pad, seed=seed)
    batch = Batch(values, "NLC", mask)
    real = values[mask].astype(np.float64)
    sweep = padding_sweep(batch, pad, fractions=(0.0, 0.3, 0.6))  # max_len ≥ 2: ≥ 2 real tokens
    assert sweep.drift_layer_norm.max() == 0.0
    r, p = real.shape[0], sweep.pads
    np.testing.assert_allclose(sweep.mean_masked, np.broadcast_to(real.mean(0), (p.size, d_model)),
                               rtol=1e-5, atol=1e-5)
    stats = feature_stats(batch)
    np.testing.assert_allclose(stats.std_masked, real.std(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats.mean_with_pad, values.reshape(-1, d_model).mean(0),
                               rtol=1e-5, atol=1e-5)
    expected = (r * real.mean(0)[None] + p[:, None] * pad) / (r + p[:, None])
    np.testing.assert_allclose(sweep.mean_with_pad, expected, rtol=1e-5, atol=1e-5)


# --- LayerNorm on the pad token ---------------------------------------------------------------


def test_pad_token_gives_beta_and_nan_without_epsilon():
    steps = pad_token_steps(two_sentences(), eps=1e-5, gamma=2.0, beta=0.5)
    assert steps["position"].tolist() == ["(1, 3, 0)", "(1, 3, 1)", "(1, 3, 2)"]
    assert steps["σ²"].tolist() == [0.0] * 3 and steps["x̂"].tolist() == [0.0] * 3
    assert steps["y"].tolist() == [0.5] * 3
    assert steps["√(σ²+ε)"].iloc[0] == pytest.approx(1e-5 ** 0.5)
    assert steps["padding"].all()
    unguarded = pad_token_steps(two_sentences(), eps=0.0)
    assert unguarded["y"].isna().all()
    full = Batch(np.ones((1, 2, 3), np.float32), "NLC", np.ones((1, 2), bool))
    assert pad_token_steps(full) is None


@settings(max_examples=25, deadline=None)
@given(d_model=st.integers(1, 8), eps=st.sampled_from([1e-12, 1e-8, 1e-5, 1e-2, 1.0]),
       gamma=st.floats(-3, 3), beta=st.floats(-3, 3))
def test_a_zero_pad_row_comes_out_as_exactly_beta(d_model, eps, gamma, beta):
    values, mask = padded_batch(2, d_model, lengths=[3, 1])
    steps = pad_token_steps(Batch(values, "NLC", mask), eps, gamma, beta)
    np.testing.assert_array_equal(steps["x̂"], 0.0)
    np.testing.assert_array_equal(steps["y"], np.float32(beta))


@settings(max_examples=25, deadline=None)
@given(pad=st.floats(-100, 100, allow_nan=False), d_model=st.integers(1, 8),
       eps=st.sampled_from([1e-12, 1e-8, 1e-5, 1e-2, 1.0]), gamma=st.floats(-3, 3),
       beta=st.floats(-3, 3))
def test_any_constant_pad_row_comes_out_as_beta(pad, d_model, eps, gamma, beta):
    values, mask = padded_batch(2, d_model, lengths=[3, 1], pad_value=pad)
    # In float64, μ of a constant row is the pad value up to ~1e-14, so x̂ stays ~0 even for
    # ε = 1e-12 (in float32 the rounding of μ, ~1e-7, would be amplified by 1/√ε).
    steps = pad_token_steps(Batch(values, "NLC", mask), eps, gamma, beta, dtype="float64")
    np.testing.assert_allclose(steps["y"], beta, atol=1e-6)


# --- Figures ----------------------------------------------------------------------------------


def test_figures_carry_the_numbers():
    stats = feature_stats(two_sentences())
    fig = charts.padding.feature_stats_figure(stats.mean_with_pad, stats.mean_masked,
                                              stats.std_with_pad, stats.std_masked)
    assert [t.name for t in fig.data] == ["pads counted", "real tokens only (masked)"] * 2
    assert list(fig.data[0].text) == ["3.5", "6.88", "10.2"]
    pad_row = charts.padding.pad_row_figure(np.array([np.nan, np.nan]), 0.0)
    assert list(pad_row.data[0].text) == ["NaN", "NaN"]
    assert any("NaN" in a.text for a in pad_row.layout.annotations)


# --- The page ---------------------------------------------------------------------------------


def _trace(fig: dict, name: str, field: str = "y", index: int = 0) -> np.ndarray:
    traces = [t for t in fig["data"] if t.get("name") == name]
    return decode(traces[index][field])


@pytest.fixture(scope="module")
def page():
    return open_page(PAGE)


def test_the_page_asks_where_the_pads_put_mu_before_it_shows_it():
    """A shared link opens part 1's question with μ and σ (and part 2) held back; each option
    gets its reply, "Right" for the answer the article's arithmetic gives."""
    at = asks_first(PAGE, "pd_guess", "closer to the pads' value",
                    hidden=("counting the pads shifts",))
    assert any("counting the pads shifts every one" in c.value for c in at.caption)
    assert "(7·4 + 1·0)/8 = 3.5" in " ".join(m.value for m in at.markdown)
    assert "**Try this.**" in " ".join(i.value for i in at.info)
    asked = open_page(PAGE, asked=True)
    assert "**Try this.**" not in " ".join(i.value for i in asked.info)  # its numbers answer it
    # the tokens figure shows BatchNorm's two panels (counted against masked: where μ went)
    # only once the question is answered; the input and LayerNorm before
    titles = [a["text"] for a in figures(asked)[0]["layout"]["annotations"]]
    assert not [t for t in titles if "BatchNorm" in t] and "LayerNorm" in " ".join(titles)
    assert any("join once section 1's question is answered" in c.value for c in asked.caption)
    answered = [a["text"] for a in figures(at)[0]["layout"]["annotations"]]
    assert len([t for t in answered if t.startswith("BatchNorm")]) == 2


def test_default_page_shows_the_two_sentences(page):
    figs = figures(page)
    assert len(figs) == 4 and not alerts(page)["error"]
    np.testing.assert_allclose(_trace(figs[1], "pads counted"), [3.5, 6.875, 10.25], rtol=1e-6)
    np.testing.assert_allclose(_trace(figs[1], "real tokens only (masked)", index=1)[0], 2.0)
    layer = _trace(figs[0], "LayerNorm", "z")
    np.testing.assert_allclose(layer[0], [-1.2247, 0.0, 1.2247], atol=1e-4)
    np.testing.assert_array_equal(layer[7], [0.0, 0.0, 0.0])
    assert "did not move at all" in alerts(page)["success"][0]
    # The pad row comes out as β, which the page opens at 0.5 so that the bars show it.
    np.testing.assert_array_equal(_trace(figs[3], "pad token's output"), [0.5, 0.5, 0.5])
    assert any(r"\sqrt{0 + 10^{-5}}" in latex.value for latex in page.latex)  # the pad row
    assert any("(1 − 3.5)/2.29 ≈ −1.09" in m.value for m in page.markdown)
    assert "Try this" in alerts(page)["info"][0]
    code = page.code[0].value
    assert "eps = 1e-05\n" in code and "F.layer_norm(x, (d,), gamma, beta, eps=eps)" in code


def test_generated_batch_and_its_controls():
    at = open_page(PAGE)
    at.segmented_control(key="pd_src").set_value("Generated").run()
    assert not at.exception and not alerts(at)["error"]
    first = _trace(figures(at)[0], "input x", "z")
    assert first.shape == (3 * 6, 4)
    for key, value in (("pd_bs", 5), ("pd_len", 9), ("pd_d", 6), ("pd_pad", -2.0)):
        widget = at.number_input(key=key) if key == "pd_pad" else at.slider(key=key)
        before = _trace(figures(at)[0], "input x", "z")
        widget.set_value(value).run()
        after = _trace(figures(at)[0], "input x", "z")
        assert before.shape != after.shape or not np.array_equal(before, after), key
    assert after.shape == (5 * 9, 6)
    at.text_input(key="pd_lengths").set_value("9, 1").run()
    tokens = _trace(figures(at)[0], "input x", "z")
    assert tokens.shape == (2 * 9, 6)
    np.testing.assert_array_equal(tokens[10:], -2.0)  # sequence 1: one real token, 8 pads
    np.testing.assert_array_equal(_trace(figures(at)[3], "pad token's output"), [0.5] * 6)


def test_bad_lengths_are_a_message_not_a_traceback():
    at = open_page(PAGE, {"pd_src": "Generated"})
    at.text_input(key="pd_lengths").set_value("4, two").run()
    assert not at.exception
    assert "whole numbers" in alerts(at)["error"][0]
    at.text_input(key="pd_lengths").set_value("40, 1").run()
    assert "Length 1 is 40 tokens, more than the padded length of 6" in alerts(at)["error"][0]
    at.text_input(key="pd_lengths").set_value("6, 6").run()
    assert "no padding" in " ".join(alerts(at)["info"])


def test_feature_epsilon_gamma_beta_controls():
    at = open_page(PAGE)
    mean = _trace(figures(at)[2], "BatchNorm, pads counted")
    np.testing.assert_allclose(mean[:2], [4.0, 3.5], rtol=1e-6)
    at.selectbox(key="pd_feat").set_value(2).run()
    np.testing.assert_allclose(_trace(figures(at)[2], "BatchNorm, pads counted")[0], 82 / 7,
                               rtol=1e-6)
    pad = _trace(figures(at)[3], "pad token's output")
    at.slider(key="pd_gamma").set_value(2.5).run()
    np.testing.assert_array_equal(_trace(figures(at)[3], "pad token's output"), pad)
    at.slider(key="pd_beta").set_value(-1.5).run()
    np.testing.assert_allclose(_trace(figures(at)[3], "pad token's output"), [-1.5] * 3)
    at.select_slider(key="pd_eps").set_value(0.0).run()
    assert not at.exception
    assert any("NaN" in w for w in alerts(at)["warning"])
    assert list(figures(at)[3]["data"][0]["text"]) == ["NaN"] * 3


def test_url_restores_the_settings():
    at = open_page(PAGE, {"pd_src": "Generated", "pd_bs": "4", "pd_len": "5", "pd_d": "2",
                          "pd_pad": "1.5", "pd_lengths": "5, 2, 1, 3", "pd_feat": "1",
                          "pd_eps": "1e-02", "pd_beta": "0.7"})
    assert at.segmented_control(key="pd_src").value == "Generated"
    assert at.select_slider(key="pd_eps").value == pytest.approx(1e-2)
    tokens = _trace(figures(at)[0], "input x", "z")
    assert tokens.shape == (4 * 5, 2)
    np.testing.assert_array_equal(tokens[5 + 2:10], 1.5)  # sequence 1 padded after 2 tokens
    np.testing.assert_allclose(_trace(figures(at)[3], "pad token's output"), [0.7, 0.7])
    assert figures(at)[2]["layout"]["annotations"][0]["text"] == "μ of feature 1"


# --- The PyTorch snippet: run, it computes what the page shows --------------------------------


def _run_snippet(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "snippet", "exec"), namespace)  # our own generated code
    return namespace


@pytest.mark.parametrize("query", [
    {},
    {"pd_src": "Generated", "pd_bs": "4", "pd_len": "5", "pd_d": "2", "pd_pad": "1.5",
     "pd_lengths": "5, 2, 1, 3", "pd_eps": "1e-02", "pd_gamma": "2.0", "pd_beta": "0.7"},
    {"pd_src": "Generated", "pd_pad": "-2.0", "pd_gamma": "-1.5"},
])
def test_the_pages_snippet_computes_the_numbers_the_page_shows(query):
    at = open_page(PAGE, query)
    figs = figures(at)
    ns = _run_snippet(at.code[0].value)
    x, mask = ns["x"].numpy(), ns["mask"].numpy()
    n, length, d = x.shape
    np.testing.assert_array_equal(x.reshape(n * length, d), _trace(figs[0], "input x", "z"))
    np.testing.assert_allclose(ns["bn_with_pads"].reshape(n * length, d),
                               _trace(figs[0], "BatchNorm, pads counted", "z"), atol=1e-5)
    masked = _trace(figs[0], "BatchNorm, masked", "z").reshape(n, length, d)
    np.testing.assert_allclose(ns["bn_masked"][mask], masked[mask], atol=1e-5)
    np.testing.assert_allclose(ns["mean_all"], _trace(figs[1], "pads counted"), rtol=1e-5)
    np.testing.assert_allclose(ns["mean_real"], _trace(figs[1], "real tokens only (masked)"),
                               rtol=1e-5)
    pad_rows = ns["ln"][~ns["mask"]].detach().numpy()
    assert len(pad_rows) == (~mask).sum() > 0
    np.testing.assert_allclose(pad_rows, np.broadcast_to(_trace(figs[3], "pad token's output"),
                                                         pad_rows.shape), atol=1e-6)


def test_snippet_for_the_two_sentences_gives_its_numbers_and_beta_on_the_pad():
    ns = _run_snippet(padding_snippet(two_sentences(), 1e-5, 3.0, -0.5))
    torch.testing.assert_close(ns["mean_real"], torch.tensor([4.0, 55 / 7, 82 / 7]))
    torch.testing.assert_close(ns["mean_all"], torch.tensor([3.5, 6.875, 10.25]))
    torch.testing.assert_close(ns["ln"][1, 3], torch.full((3,), -0.5))  # the pad token: β
    stats = feature_stats(two_sentences())
    np.testing.assert_allclose(ns["mean_real"], stats.mean_masked, rtol=1e-6)
    x = ns["x"]
    torch.testing.assert_close(ns["bn_with_pads"].double(), torch.from_numpy(
        (x.numpy() - stats.mean_with_pad) / np.sqrt(stats.std_with_pad**2 + 1e-5)))


@pytest.mark.parametrize("eps", [0.0, 1e-5])
def test_the_snippets_comment_on_the_pad_row_is_what_it_prints(eps):
    """A pad row is one value repeated (σ² = 0): x̂ = 0/√ε = 0 and the output is β; at ε = 0,
    0/0 is NaN, and the comment says so."""
    code = padding_snippet(two_sentences(), eps, 3.0, -0.5)
    pad = _run_snippet(code)["ln"][1, 3]
    if eps > 0:
        assert "# every pad token: β" in code
        torch.testing.assert_close(pad, torch.full((3,), -0.5))
    else:
        assert "# every pad token: nan" in code and "a pad row itself gives β" not in code
        assert torch.isnan(pad).all()


def test_snippet_rebuilds_a_generated_batch_with_the_pages_generator():
    recipe = PaddedRecipe(batch_size=3, d_model=5, lengths=(4, 1, 2), max_len=4, pad_value=-2.0,
                          seed=7)
    values, mask = padded_batch(3, 5, lengths=(4, 1, 2), max_len=4, pad_value=-2.0, seed=7)
    batch = Batch(values, "NLC", mask)
    ns = _run_snippet(padding_snippet(batch, 1e-3, 1.0, 0.25, recipe))
    np.testing.assert_array_equal(ns["x"].numpy(), values)
    outputs = padding_outputs(batch)
    np.testing.assert_allclose(ns["bn_with_pads"], outputs["BatchNorm, pads counted"], atol=1e-5)
    np.testing.assert_allclose(ns["bn_masked"][mask], outputs["BatchNorm, masked"][mask],
                               atol=1e-5)
    steps = pad_token_steps(batch, 1e-3, 1.0, 0.25)
    np.testing.assert_allclose(ns["ln"][~ns["mask"]][0], steps["y"], atol=1e-6)


@pytest.mark.parametrize("lengths, max_len, comment", [
    ((1,), 3, "With one real token torch raises here: one value per channel."),
    ((1,), 1, "With a single position torch raises here: one value."),
])
def test_snippet_says_where_torch_refuses_and_torch_does(lengths, max_len, comment):
    values, mask = padded_batch(1, 4, lengths=lengths, max_len=max_len, seed=0)
    code = padding_snippet(Batch(values, "NLC", mask),
                           recipe=PaddedRecipe(1, 4, lengths, max_len, 0.0, 0))
    assert comment in code
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        _run_snippet(code)


# --- Typed lengths are capped; one real token or one position still explained --------------------
PAGE = "app_pages/padding.py"


def _names(fig: dict) -> list[str]:
    return [t.get("name") for t in fig["data"]]


def _z(fig: dict, name: str) -> np.ndarray:
    return decode(next(t for t in fig["data"] if t.get("name") == name)["z"])


# --- Typed lengths are capped; the figure stays small and readable --------------------


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(-3, 40), max_size=40), padded=st.integers(1, 32))
def test_check_lengths_accepts_exactly_what_the_page_can_draw(lengths, padded):
    fits = (1 <= len(lengths) <= PADDING_MAX_SEQUENCES
            and all(1 <= n <= padded for n in lengths))
    if fits:
        assert check_lengths(lengths, padded) == tuple(lengths)
    else:
        with pytest.raises(ValueError):
            check_lengths(lengths, padded)


def test_check_lengths_messages():
    with pytest.raises(ValueError, match="At most 16 sequences: you typed 200 lengths"):
        check_lengths([3] * 200, 6)
    with pytest.raises(ValueError, match="at least one real token, but length 2 is 0"):
        check_lengths([3, 0], 6)
    with pytest.raises(ValueError, match=r"Length 1 is 40 tokens, more than the padded length "
                                         r"of 6: raise “Padded length” \(up to 32\)"):
        check_lengths([40, 1], 6)
    with pytest.raises(ValueError, match="Type at least one length"):
        check_lengths((), 6)


def test_two_hundred_typed_lengths_are_refused_with_a_message():
    """The report: 200 typed lengths took 87 s and sent a 14 MB figure (1000: over 5 minutes).
    Old code: no message, and every figure drawn for 200 sequences."""
    at = open_page(PAGE, {"pd_src": "Generated", "pd_len": "32", "pd_d": "16"})
    at.text_input(key="pd_lengths").set_value(", ".join(["1"] * 200)).run()
    assert not at.exception
    assert alerts(at)["error"] == [
        "At most 16 sequences: you typed 200 lengths. Every position of every sequence is "
        "drawn, so the batch keeps to the “Sequences” control's range."]
    assert figures(at) == []


def test_the_largest_batch_draws_a_small_figure_with_pads_veiled_not_blackened():
    """16 sequences of one real token in 32 positions with 16 features: 496 of 512 rows are
    pads. Old code drew an opaque × on each of their 7,936 cells in each of 4 panels (a black
    heatmap, ~1 MB); now one translucent veil per run of pads."""
    at = open_page(PAGE, {"pd_src": "Generated", "pd_len": str(PADDING_MAX_LENGTH), "pd_d": "16",
                          "pd_lengths": ", ".join(["1"] * PADDING_MAX_SEQUENCES)})
    assert not at.exception and not alerts(at)["error"]
    spec = at.get("plotly_chart")[0].proto.spec
    assert len(spec) < 300_000  # bytes sent for the tokens figure
    fig = figures(at)[0]
    assert [t["type"] for t in fig["data"]] == ["heatmap"] * 4  # no per-cell markers
    assert _z(fig, "input x").shape == (16 * 32, 16)
    shapes = fig["layout"]["shapes"]
    assert len(shapes) == 16 * 4  # one run of 31 pads per sequence, in each panel
    first = [(s["y0"], s["y1"]) for s in shapes[:16]]
    assert first == [(32 * k + 0.5, 32 * (k + 1) - 0.5) for k in range(16)]
    for shape in shapes:
        alpha = float(shape["fillcolor"].rsplit(",", 1)[1].rstrip(")"))
        assert alpha <= 0.4  # the colours under the veil stay visible
    assert [s.get("showlegend", False) for s in shapes].count(True) == 1


def test_tokens_figure_veils_each_run_of_pads():
    grid = np.arange(12, dtype=np.float32).reshape(6, 2)
    padding = np.array([False, True, True, False, False, True])
    fig = charts.padding.tokens_figure([("input x", grid), ("out", -grid)], padding)
    runs = [(s.y0, s.y1, s.xref) for s in fig.layout.shapes]
    assert runs == [(0.5, 2.5, "x"), (4.5, 5.5, "x"), (0.5, 2.5, "x2"), (4.5, 5.5, "x2")]
    assert {(s.x0, s.x1) for s in fig.layout.shapes} == {(-0.5, 1.5)}
    assert [t.type for t in fig.data] == ["heatmap", "heatmap"]


# --- One real token, one position --------------------------------------------------------------


def test_one_real_token_statistics():
    values, mask = padded_batch(1, 4, lengths=[1], max_len=6, pad_value=0.0)
    batch = Batch(values, "NLC", mask)
    stats = feature_stats(batch)
    assert (stats.real_tokens, stats.positions) == (1, 6)
    assert stats.counted_ok and not stats.masked_ok
    assert np.isnan(stats.mean_masked).all() and np.isnan(stats.std_masked).all()
    x = values.reshape(6, 4).astype(np.float64)
    np.testing.assert_allclose(stats.mean_with_pad, x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats.std_with_pad, x.std(0), rtol=1e-4)
    assert list(stats.table().columns) == ["feature", "μ with pads", "σ with pads"]
    out = padding_outputs(batch)
    assert list(out) == ["input x", "BatchNorm, pads counted", "LayerNorm"]
    torch_x = torch.from_numpy(values)
    np.testing.assert_allclose(out["LayerNorm"], F.layer_norm(torch_x, (4,)), atol=1e-5)
    np.testing.assert_allclose(out["BatchNorm, pads counted"][0],
                               F.batch_norm(torch_x[0], None, None, training=True), atol=1e-4)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(torch_x[torch.from_numpy(mask)], None, None, training=True)  # as the page says


def test_one_real_token_sweep():
    values, mask = padded_batch(1, 3, lengths=[1], max_len=2, pad_value=2.0)
    sweep = padding_sweep(Batch(values, "NLC", mask), 2.0)
    token = values[0, 0].astype(np.float64)
    assert sweep.pads[0] == 0 and np.isnan(sweep.mean_with_pad[0]).all()
    p = sweep.pads[1:, None]
    np.testing.assert_allclose(sweep.mean_with_pad[1:], (token + 2.0 * p) / (1 + p), rtol=1e-5)
    assert np.isnan(sweep.mean_masked).all() and np.isnan(sweep.drift_masked).all()
    assert np.isnan(sweep.drift_with_pad).all()
    np.testing.assert_array_equal(sweep.drift_layer_norm, 0.0)
    fig = charts.padding.share_figure(
        sweep.fraction, sweep.mean_with_pad[:, 0], sweep.mean_masked[:, 0],
        sweep.std_with_pad[:, 0], sweep.std_masked[:, 0], sweep.drift_with_pad,
        sweep.drift_masked, sweep.drift_layer_norm)
    # No legend entry for a line that cannot be drawn.
    assert [(t.name, t.xaxis) for t in fig.data] == [
        ("BatchNorm, pads counted", "x"), ("BatchNorm, pads counted", "x2"), ("LayerNorm", "x3")]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), batch_size=st.integers(1, 3), max_len=st.integers(1, 4),
       d_model=st.integers(1, 3), pad=st.sampled_from([0.0, -2.0, 5.0]))
def test_every_batch_the_page_allows_is_computed(data, batch_size, max_len, d_model, pad):
    """Whatever the lengths, every function the page calls answers, with NaN exactly where a
    BatchNorm has fewer than two values to pool."""
    lengths = data.draw(st.lists(st.integers(1, max_len), min_size=batch_size,
                                 max_size=batch_size))
    values, mask = padded_batch(batch_size, d_model, lengths=lengths, max_len=max_len,
                                pad_value=pad)
    batch = Batch(values, "NLC", mask)
    real, positions = sum(lengths), batch_size * max_len
    stats = feature_stats(batch)
    assert np.isnan(stats.mean_masked).all() == (real < 2)
    assert np.isnan(stats.mean_with_pad).all() == (positions < 2)
    out = padding_outputs(batch)
    assert ("BatchNorm, masked" in out) == (real >= 2)
    assert ("BatchNorm, pads counted" in out) == (positions >= 2)
    np.testing.assert_allclose(out["LayerNorm"], F.layer_norm(torch.from_numpy(values),
                                                              (d_model,)), atol=1e-5)
    sweep = padding_sweep(batch, pad, fractions=(0.0, 0.5))
    np.testing.assert_array_equal(sweep.drift_layer_norm, 0.0)
    steps = pad_token_steps(batch, beta=0.25)
    assert (steps is None) == bool(mask.all())


@pytest.mark.parametrize("query, real, panels", [
    ({"pd_lengths": "1"}, 1, ["input x", "BatchNorm, pads counted", "LayerNorm"]),
    ({"pd_lengths": "1", "pd_len": "1"}, 1, ["input x", "LayerNorm"]),
    ({"pd_bs": "1", "pd_len": "1"}, 1, ["input x", "LayerNorm"]),
    ({"pd_lengths": "1, 1", "pd_len": "1"}, 2,
     ["input x", "BatchNorm, pads counted", "BatchNorm, masked", "LayerNorm"]),
])
def test_degenerate_batches_keep_the_page(query, real, panels):
    """The report: `/padding?pd_src=Generated&pd_lengths=1` stopped the whole page with "needs
    more than one value per channel; this input has one (shape [1, 6, 4])"."""
    at = open_page(PAGE, {"pd_src": "Generated", **query})
    assert not at.exception and alerts(at)["error"] == []
    figs = figures(at)
    assert _names(figs[0]) == panels
    x = _z(figs[0], "input x")
    np.testing.assert_allclose(_z(figs[0], "LayerNorm"),
                               F.layer_norm(torch.tensor(x), x.shape[-1:]), atol=1e-5)
    assert "did not move at all" in alerts(at)["success"][0]  # the LayerNorm sweep
    warnings = alerts(at)["warning"]
    if real == 1:
        assert warnings[0].startswith("**Masked BatchNorm needs at least 2 real tokens**: it "
                                      "takes each feature's μ and σ over the real tokens alone, "
                                      "and this batch has 1 real token.")
        assert "one value per channel" in at.code[0].value
    else:
        assert warnings == []


def test_one_real_token_page_shows_the_pads_counted_numbers():
    at = open_page(PAGE, {"pd_src": "Generated", "pd_lengths": "1"})
    figs = figures(at)
    x = _z(figs[0], "input x")  # (6, 4): one real token, five zero pads
    stats = figs[1]
    assert _names(stats) == ["pads counted", "pads counted"]
    np.testing.assert_allclose(decode(stats["data"][0]["y"]), x.mean(0), rtol=1e-5)
    text = next(m.value for m in at.markdown if m.value.startswith("Feature 0"))
    assert text.endswith("real tokens only: none — masked BatchNorm needs at least 2 real "
                         "tokens.")
    assert "**1 sequence × 6 positions × 4 features**, 5 of 6 positions padding" in " ".join(
        m.value for m in at.markdown)
    np.testing.assert_array_equal(decode(figs[3]["data"][0]["y"]), [0.5] * 4)  # pad row: β


@pytest.mark.parametrize(("norm", "dims", "notices"), [("LayerNorm", 1, False),
                                                       ("LayerNorm", 2, True),
                                                       ("InstanceNorm", 1, True)])
def test_which_norms_let_a_real_token_notice_the_pad(norm, dims, notices):
    """The page's claim, as it now holds: LayerNorm over the last dim never sees the pad; over
    (sequence, features), or InstanceNorm over the sequence, a real token moves with it."""
    from lnviz.batch import NormSpec, normalize

    preset = get_preset("padded_tokens")
    moved = preset.values.copy()
    moved[~preset.mask] = 5.0  # another pad value
    spec = NormSpec(norm=norm, dims=dims)
    outputs = [normalize(torch.tensor(v, dtype=torch.float64), "NLC", spec).output
               for v in (preset.values, moved)]
    real = torch.tensor(preset.mask)
    change = float((outputs[0] - outputs[1])[real].abs().max())
    assert (change > 0.01) if notices else (change == 0.0), change
    text = " ".join(m.value for m in open_page("app_pages/padding.py").markdown)
    assert "over the last dim, each token's features" in text and "neither takes a mask" in text


def test_sigma_with_the_pads_widens_first_only_when_the_pad_is_over_a_sigma_away():
    """σ²(f) = (1 − f)σ² + f(1 − f)(μ − p)²: it rises at first iff (μ − p)² > σ². The page said
    "σ first widens" for every feature; a feature whose real values sit within one σ of the pad
    only shrinks, and the page now says which, from the sweep."""
    from lnviz.lessons.padding import sigma_path

    seen = set()
    for seed in range(4):
        values, mask = padded_batch(4, 4, max_len=8, pad_value=0.0, seed=seed)
        batch = Batch(values, "NLC", mask)
        sweep = padding_sweep(batch, 0.0)
        for feature in range(4):
            real = values[mask][:, feature].astype(np.float64)
            widens = bool(real.mean() ** 2 > real.var())
            assert abs(real.mean() ** 2 - real.var()) > 0.05 * real.var()  # no borderline case
            std = sweep.std_with_pad[:, feature]
            std = std[np.isfinite(std)]
            assert (std.max() > std[0] * (1 + 1e-4)) == widens  # the sweep follows the formula
            text = sigma_path(sweep, feature, 0.0)
            assert ("first widens" in text) == widens and ("only shrinks" in text) != widens
            seen.add(widens)
    assert seen == {True, False}  # both cases occur


def test_a_pad_value_just_over_a_sigma_away_says_what_the_whole_pads_do():
    """(μ − p)² just above σ²: σ²(f) = (1 − f)σ² + f(1 − f)(μ − p)² is above σ² only while
    f < 1 − σ²/(μ − p)², here under 4% of the values, less than one pad's share: every pad
    narrows σ, and the sentence says so instead of "first widens (from 2.73 to 2.73)". Checked
    against a sweep of every pad count from 0 to 20."""
    import re

    from lnviz.lessons.padding import sigma_path

    values, mask = padded_batch(4, 4, max_len=8, pad_value=-0.5, seed=2)
    batch = Batch(values, "NLC", mask)
    text = sigma_path(padding_sweep(batch, -0.5), 3, -0.5)
    assert "only a little more than their σ" in text and "first widens" not in text
    wide = float(re.search(r"only while they are under ([\d.]+)% of the values", text).group(1))
    reals = int(mask.sum())
    assert f"less than one pad beside these {reals} real tokens" in text
    assert 100 / (reals + 1) >= wide
    every = [p / (reals + p) for p in range(21)]
    dense = padding_sweep(batch, -0.5, fractions=every, dtype="float64")
    std = dense.std_with_pad[:, 3]
    assert np.all(np.diff(std) < 0)  # every pad narrows it
    real = values[mask][:, 3].astype(np.float64)
    assert 100 * (1 - real.var() / (real.mean() + 0.5) ** 2) == pytest.approx(wide, abs=0.05)


def test_a_batch_without_pads_says_its_two_batchnorm_panels_agree():
    """Every sequence as long as the padded length: no pad, so counting the pads shifts
    nothing, and the caption says the two BatchNorm panels are the same instead."""
    at = open_page("app_pages/padding.py", {"pd_src": "Generated", "pd_bs": "3", "pd_len": "6",
                                            "pd_lengths": "6, 6, 6"})
    captions = " ".join(c.value for c in at.caption)
    assert "This batch has no pad" in captions and "shifts every one of them" not in captions


@functools.cache
def open_page_once():
    return open_page("app_pages/padding.py")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=2, max_size=20), st.floats(-20, 20))
def test_the_first_pad_widens_sigma_exactly_when_the_page_says(real, pad):
    """Section 2: with R real values, one pad at p widens σ exactly when (μ − p)² exceeds
    σ²·(R + 1)/R, a little more than one σ away."""
    values = np.asarray(real, dtype=np.float64)
    r, gap, var = values.size, (values.mean() - pad) ** 2, values.var()
    margin = 1e-9 * (1 + gap + var)
    assume(abs(gap - var * (r + 1) / r) > margin)  # not on the boundary, where rounding decides
    assert (np.append(values, pad).var() > var) == (gap > var * (r + 1) / r)
    text = " ".join(m.value for m in open_page_once().markdown)
    assert "√((R + 1)/R)·σ for R real tokens, for the first pad to widen it" in text


def test_a_batch_without_pads_is_not_asked_where_the_pads_move_mu():
    """Full-length sequences have no pads: the question's premise is gone and its answer would
    be on screen ("0 of 18 positions padding"), so the page says both BatchNorms are one and
    shows them, and asks again once pads are typed."""
    at = open_page(PAGE, {"pd_src": "Generated", "pd_lengths": "6,6,6"}, asked=True)
    assert not [r for r in at.radio if r.key == "pd_guess"]
    assert any("This batch has no pads" in i for i in alerts(at)["info"])
    assert any("μ = " in m.value and "real tokens only" in m.value for m in at.markdown)
    at.text_input(key="pd_lengths").set_value("6, 2, 3").run()
    assert at.radio(key="pd_guess").value is None


def test_the_try_this_quotes_the_articles_numbers_only_beside_its_batch():
    """The article's μ and σ are the two sentences' bars: on a generated batch, or one without
    masked statistics (one real token), the "Try this" starts from what can be done there."""
    at = open_page(PAGE)
    assert any("with the transformer article's numbers" in i for i in alerts(at)["info"])
    at = open_page(PAGE, {"pd_src": "Generated", "pd_lengths": "1", "pd_len": "4"})
    tried = next(i for i in alerts(at)["info"] if i.startswith("**Try this.**"))
    assert "article's numbers" not in tried
    assert tried.startswith("**Try this.** On *Generated*, type lengths like 6, 1, 1")
