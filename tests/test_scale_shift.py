"""lnviz.lessons.scale_shift and the "Scale and shift" page: values against torch.nn.functional,
numpy and
the formula tutorial/001's examples; the page run headless with AppTest."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from pageutil import alerts, asks_first, decode, figures, open_page, set_live, trace_data

from lnviz import charts
from lnviz.data import random_batch
from lnviz.lessons.common import short
from lnviz.lessons.scale_shift import (
    GRID_OPTIONS,
    NEAR_STANDARD,
    best_feature_affine,
    drawn_samples,
    feature_batches,
    feature_caption,
    grid_answer,
    grid_caption,
    lstm_gate_inputs,
    per_feature_affine,
    recover_input,
    recover_next_batch,
    scale_shift_grid,
    scale_shift_snippet,
    split_bias,
    two_betas,
)

PAGE = "app_pages/scale_shift.py"
EPS = 1e-5


def feature_batch(seed: int = 0, n: int = 16, c: int = 4) -> torch.Tensor:
    """The page's batch: features on very different scales, in float64."""
    return torch.as_tensor(random_batch((n, c), feature_spread=1.0, seed=seed)).double()


# --- the γ × β grid ---------------------------------------------------------------------------


def test_grid_is_the_formula_modules_figure_computed_by_hand():
    grid = scale_shift_grid(n=1000, seed=0, bins=30, dtype="float64")
    assert grid.gammas == (0.5, 1.0, 2.0) and grid.betas == (-1.0, 0.0, 1.0)
    assert grid.counts.shape == (3, 3, 30) and (grid.counts.sum(-1) == 1000).all()
    x = random_batch((1, 1000), seed=0).astype(np.float64).ravel()
    x_hat = (x - x.mean()) / np.sqrt(x.var() + EPS)
    outputs = [g * x_hat + b for g in grid.gammas for b in grid.betas]
    low, high = min(o.min() for o in outputs), max(o.max() for o in outputs)
    edges = np.linspace(low, high, 31)
    for k, output in enumerate(outputs):
        np.testing.assert_array_equal(grid.counts.reshape(9, 30)[k],
                                      np.histogram(output, bins=edges)[0])
    np.testing.assert_allclose(grid.mean, [[-1, 0, 1]] * 3, atol=1e-12)
    shrink = np.sqrt(x.var() / (x.var() + EPS))
    np.testing.assert_allclose(grid.std, np.array([[0.5], [1.0], [2.0]]) * shrink * np.ones(3))


@settings(max_examples=25, deadline=None)
@given(gamma=st.floats(-5, 5), beta=st.floats(-5, 5), n=st.integers(2, 300),
       seed=st.integers(0, 1000))
def test_output_mean_is_beta_and_std_is_gamma(gamma, beta, n, seed):
    grid = scale_shift_grid([gamma], [beta], n=n, seed=seed, dtype="float64")
    x = random_batch((1, n), seed=seed).astype(np.float64)
    shrink = np.sqrt(x.var() / (x.var() + EPS))
    assert grid.mean[0, 0] == pytest.approx(beta, abs=1e-9)
    assert grid.std[0, 0] == pytest.approx(abs(gamma) * shrink, rel=1e-9, abs=1e-12)
    assert grid.counts.sum() == n


@pytest.mark.parametrize("n", [100, 1000, 10000])
def test_the_grid_question_is_answered_by_torchs_layer_norm(n):
    """torch's own F.layer_norm with weight γ and bias β of the drawn values gives each panel's
    mean β and std |γ|·√(σ²/(σ² + ε)); the page's answer says so, and prints the γ = 2, β = −1
    panel's numbers."""
    grid = scale_shift_grid(n=n, seed=0, bins=40)
    x = drawn_samples(n, 0, "cpu", "float32").double().ravel()  # the values the grid draws
    y = F.layer_norm(x, (n,), torch.full((n,), 2.0, dtype=torch.float64),
                     torch.full((n,), -1.0, dtype=torch.float64), eps=1e-5)
    assert float(y.mean()) == pytest.approx(-1.0, abs=1e-9)
    assert float(y.std(unbiased=False)) == pytest.approx(
        2.0 * float(x.std(unbiased=False)) / math.sqrt(float(x.var(unbiased=False)) + 1e-5),
        rel=1e-9)
    answer = grid_answer(grid)
    assert answer.option == GRID_OPTIONS[0]
    assert answer.reason.startswith(f"The panel γ = 2, β = −1 has mean {short(float(y.mean()), 4)} "
                                    f"and standard deviation {short(float(y.std(False)), 4)};")


def test_the_page_asks_where_gamma_and_beta_put_mean_and_spread_before_the_grid():
    """A shared link opens the question with the nine panels (and the formula's consequence)
    held back; every option gets its reply."""
    asked = open_page(PAGE, asked=True)
    assert not any(r"\operatorname{mean}(y)" in latex.value for latex in asked.latex)
    assert not asked.code
    at = asks_first(PAGE, "ss_guess", GRID_OPTIONS[0],
                    hidden=("stretches", "moves them", "deviation stays 1", "bn.weight.copy_"))
    assert "bn.weight.copy_" in at.code[-1].value
    assert "deviation stays 1" in " ".join(i.value for i in at.info)
    assert any(r"\operatorname{mean}(y) = \beta" in latex.value for latex in at.latex)


def test_grid_with_a_fixed_span_and_bad_arguments():
    grid = scale_shift_grid([3.0], [3.0], n=1000, bins=10, span=(-1.0, 1.0))
    np.testing.assert_allclose(grid.centres, np.linspace(-0.9, 0.9, 10))
    assert grid.counts.sum() < 1000  # values outside the span are not counted
    with pytest.raises(ValueError, match="at least 2"):
        scale_shift_grid(n=1)
    with pytest.raises(ValueError, match="at least one"):
        scale_shift_grid([], [0.0])


def test_grid_carries_the_input_the_formula_module_draws_before_normalizing():
    grid = scale_shift_grid(n=1000, seed=0, bins=30, dtype="float64")
    x = random_batch((1, 1000), seed=0).astype(np.float64).ravel()
    edges = np.linspace(grid.centres[0] * 1.5 - grid.centres[1] * 0.5,
                        grid.centres[-1] * 1.5 - grid.centres[-2] * 0.5, 31)
    np.testing.assert_array_equal(grid.input_counts, np.histogram(x, bins=edges)[0])
    assert grid.input_counts.sum() == 1000
    assert grid.input_mean == pytest.approx(x.mean()) and grid.input_std == pytest.approx(x.std())
    caption = grid_caption(grid, 1000)
    assert f"mean {x.mean():.2f} and standard deviation {x.std():.2f}" in caption
    assert "little change, because draws from N(0, 1) are already close" in caption
    wide = scale_shift_grid(n=100, seed=7, dtype="float64")
    assert abs(wide.input_std - 1) > NEAR_STANDARD
    assert "little change" not in grid_caption(wide, 100)
    assert f"1/{wide.input_std:.2f} = {1 / wide.input_std:.2f}" in grid_caption(wide, 100)


def test_the_formula_modules_grid_needs_ten_slots_of_nine():
    """The caption's account of the formula tutorial's figure code, replayed: x in slot 1, x̂ in
    slot 5,
    then a counter from 3 over the eight other (γ, β) pairs."""
    slots = {1: "x", 5: "x̂"}
    index, overdrawn, refused = 3, [], None
    for gamma in (0.5, 1.0, 2.0):
        for beta in (-1.0, 0.0, 1.0):
            if (gamma, beta) == (1.0, 0.0):
                continue
            if not 1 <= index <= 9:  # plt.subplot(3, 3, index) raises ValueError here
                refused = (gamma, beta, index)
                break
            if index in slots:
                overdrawn.append((slots[index], gamma, beta))
            slots[index] = (gamma, beta)
            index += 1
    assert 2 not in slots and overdrawn == [("x̂", 0.5, 1.0)] and refused == (2.0, 1.0, 10)
    caption = grid_caption(scale_shift_grid(n=100), 100)
    assert ("leaves slot 2 empty, draws γ = 0.5, β = 1 over the x̂ panel in slot 5, and stops at "
            "γ = 2, β = 1 with matplotlib's ValueError for slot 10") in caption


# --- per-feature γ and β ----------------------------------------------------------------------


def test_mean_beta_and_std_gamma_hold_per_group_not_per_sample_with_vectors():
    """mean(y) = β holds over a group with a scalar β. With per-feature vectors under
    LayerNorm, a sample's mean is mean_c(γ_c·x̂_c) + mean_c(β_c), none of the β_c."""
    x = feature_batch()
    gamma, beta = np.array([0.5, 1.0, 2.0, 1.0]), np.array([-1.0, 0.0, 1.0, 2.0])
    y = per_feature_affine(x, gamma, beta, "LayerNorm").output
    x_hat = F.layer_norm(x, (4,)).numpy()
    np.testing.assert_allclose(y.mean(1), (gamma * x_hat).mean(1) + beta.mean(), atol=1e-12)
    assert np.abs(y.mean(1)[:, None] - beta[None, :]).min() > 1e-3
    scalar = F.layer_norm(x, (4,), torch.full((4,), 2.0).double(),
                          torch.full((4,), 0.5).double()).numpy()
    np.testing.assert_allclose(scalar.mean(1), 0.5, atol=1e-12)


def test_feature_caption_follows_the_numbers():
    x = feature_batch()
    gamma, beta = [0.5, 1.0, 2.0, 1.0], [-1.0, 0.0, 1.0, 2.0]
    ln = per_feature_affine(x, gamma, beta, "LayerNorm")
    assert ln.mean_miss.max() == pytest.approx(0.70, abs=0.01)
    assert int(np.argmax(ln.mean_miss)) == 2 and int(np.argmax(ln.std_miss)) == 3
    assert "miss their targets by up to 0.7 in mean (feature 2) and 0.5 in standard deviation " \
        "(feature 3)" in feature_caption(ln)
    bn = per_feature_affine(x, gamma, beta, "BatchNorm")
    assert bn.mean_miss.max() < 1e-12 and bn.std_miss.max() < 1e-3
    assert "lands on its target up to rounding and ε" in feature_caption(bn)


def test_with_every_gamma_at_zero_no_column_is_said_to_miss():
    """γ_c = 0 for every feature: LayerNorm's output is β_c in every row, so each column is
    exactly on its target; the caption says so instead of naming a feature that misses most."""
    ln = per_feature_affine(feature_batch(), [0.0] * 4, [-1.0, 0.0, 1.0, 2.0], "LayerNorm")
    assert ln.mean_miss.max() == 0 and ln.std_miss.max() == 0
    caption = feature_caption(ln)
    assert "lands on its target exactly (largest miss 0)" in caption
    assert "miss their targets" not in caption


def test_per_feature_batch_norm_hits_its_targets():
    x = feature_batch()
    gamma, beta = [0.5, 1.0, 2.0, -1.0], [-1.0, 0.0, 1.0, 2.0]
    result = per_feature_affine(x, gamma, beta, "BatchNorm")
    expected = F.batch_norm(x, None, None, torch.tensor(gamma).double(),
                            torch.tensor(beta).double(), training=True, eps=EPS)
    np.testing.assert_allclose(result.output, expected.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(result.mean, beta, atol=1e-12)
    var = x.var(0, unbiased=False).numpy()
    np.testing.assert_allclose(result.std, np.abs(gamma) * np.sqrt(var / (var + EPS)))


def test_per_feature_layer_norm_only_roughly_hits_them():
    x = feature_batch()
    gamma, beta = [0.5, 1.0, 2.0, 1.0], [-1.0, 0.0, 1.0, 2.0]
    result = per_feature_affine(x, gamma, beta, "LayerNorm")
    expected = F.layer_norm(x, (4,), torch.tensor(gamma).double(), torch.tensor(beta).double())
    np.testing.assert_allclose(result.output, expected.numpy(), rtol=1e-10, atol=1e-12)
    x_hat = F.layer_norm(x, (4,)).numpy()
    np.testing.assert_allclose(result.mean, np.array(gamma) * x_hat.mean(0) + beta, atol=1e-12)
    assert np.abs(result.mean - beta).max() > 0.3  # rows were standardized, not columns


def test_per_feature_refuses_bad_input():
    x = feature_batch()
    with pytest.raises(ValueError, match="one γ and one β per feature"):
        per_feature_affine(x, [1.0], [0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="norm must be"):
        per_feature_affine(x, [1.0] * 4, [0.0] * 4, "GroupNorm")
    with pytest.raises(ValueError, match=r"\(N, C\)"):
        per_feature_affine(x[None], [1.0] * 4, [0.0] * 4)
    with pytest.raises(ValueError, match="more than one value"):
        per_feature_affine(x[:1], [1.0] * 4, [0.0] * 4, "BatchNorm")


# --- undoing the normalization ----------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), rows=st.integers(2, 6), cols=st.integers(2, 6))
def test_least_squares_fit_matches_numpy_polyfit(seed, rows, cols):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=gen, dtype=torch.float64)
    x_hat = torch.randn(rows, cols, generator=gen, dtype=torch.float64)
    gamma, beta = best_feature_affine(x, x_hat)
    for c in range(cols):
        slope, intercept = np.polyfit(x_hat[:, c].numpy(), x[:, c].numpy(), 1)
        assert gamma[c].item() == pytest.approx(slope, rel=1e-6, abs=1e-9)
        assert beta[c].item() == pytest.approx(intercept, rel=1e-6, abs=1e-9)


def test_batch_norm_is_undone_by_its_own_gamma_and_beta():
    x = feature_batch()
    recovery = recover_input(x, "BatchNorm")
    np.testing.assert_allclose(recovery.gamma, np.sqrt(x.var(0, unbiased=False).numpy() + EPS))
    np.testing.assert_allclose(recovery.beta, x.mean(0).numpy())
    assert recovery.max_error < 1e-12
    # the least-squares fit finds the same pair, because x is an exact line in x̂
    x_hat = F.batch_norm(x, None, None, training=True, eps=EPS)
    gamma, beta = best_feature_affine(x, x_hat)
    np.testing.assert_allclose(gamma.numpy(), recovery.gamma, rtol=1e-10)
    np.testing.assert_allclose(beta.numpy(), recovery.beta, rtol=1e-10, atol=1e-12)


def test_layer_norm_needs_per_sample_gamma_and_beta():
    x = feature_batch()
    per_sample = recover_input(x, "LayerNorm", per="sample")
    assert per_sample.gamma.shape == (16, 1) and per_sample.max_error < 1e-12
    np.testing.assert_allclose(per_sample.gamma.ravel(),
                               np.sqrt(x.var(1, unbiased=False).numpy() + EPS))
    per_feature = recover_input(x, "LayerNorm")
    assert per_feature.gamma.shape == (4,) and per_feature.max_error > 1.0
    with pytest.raises(ValueError, match="per-sample"):
        recover_input(x, "BatchNorm", per="sample")
    with pytest.raises(ValueError, match="per must be"):
        recover_input(x, per="group")


def test_every_recovery_is_computed_in_the_inputs_precision():
    """The page's three recoveries side by side in float16: the per-sample one meets float16's
    rounding (a few of its spacings at the largest |x|), as the layers of the other two do, not
    float64's (about 1e-15)."""
    x = feature_batch().to(torch.float16)
    recoveries = {(norm, per): recover_input(x, norm, per=per)
                  for norm, per in (("BatchNorm", "feature"), ("LayerNorm", "feature"),
                                    ("LayerNorm", "sample"))}
    spacing = float(np.spacing(np.float16(np.abs(x.numpy()).max())))
    assert spacing / 64 < recoveries["LayerNorm", "sample"].max_error <= 8 * spacing


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_batch_norms_recovering_gamma_and_beta_fit_one_batch_only(seed):
    """'Adding a norm never removes something the network could express' is false
    for BatchNorm in training mode. γ_c = √(σ_c² + ε), β_c = μ_c from one batch give the next
    batch back in evaluation mode (frozen statistics), not in training mode."""
    first, following = feature_batches(seed, dtype="float64")
    assert not torch.equal(first, following)
    result = recover_next_batch(first, following)
    layer = torch.nn.BatchNorm1d(4, eps=EPS).double()
    with torch.no_grad():
        layer.weight.copy_(torch.sqrt(first.var(0, unbiased=False) + EPS))
        layer.bias.copy_(first.mean(0))
        np.testing.assert_allclose(result.training_output, layer(following).numpy(), atol=1e-12)
        layer.eval()
        layer.running_mean.copy_(first.mean(0))
        layer.running_var.copy_(first.var(0, unbiased=False))
        np.testing.assert_allclose(result.eval_output, layer(following).numpy(), atol=1e-12)
    assert result.eval_error < 1e-12
    assert result.training_error > 0.5
    # training mode forces each output column to the first batch's mean, whatever came in
    np.testing.assert_allclose(result.training_output.mean(0), first.mean(0).numpy(), atol=1e-9)


def test_per_feature_undoes_layer_norm_when_every_row_has_the_same_statistics():
    # rows are permutations of one vector: one μ and σ for every sample, so a per-feature
    # pair is enough — the statistics do not really vary per sample
    x = torch.tensor([[1.0, 2.0, 4.0, 7.0], [7.0, 4.0, 2.0, 1.0], [2.0, 7.0, 1.0, 4.0]],
                     dtype=torch.float64)
    assert recover_input(x, "LayerNorm").max_error < 1e-12


# --- two betas in an LN-LSTM (the LN-LSTM walkthrough)
# -------------------------------------------------------


def test_lstm_gate_inputs_are_reproducible():
    wx, uh, bias = lstm_gate_inputs(seed=3, dtype="float64")
    again = lstm_gate_inputs(seed=3, dtype="float64")
    assert wx.shape == uh.shape == (2, 12) and bias.shape == (12,)
    assert all(torch.equal(a, b) for a, b in zip((wx, uh, bias), again, strict=True))
    assert not torch.equal(wx, lstm_gate_inputs(seed=4, dtype="float64")[0])


@settings(max_examples=25, deadline=None)
@given(share=st.floats(-2, 3), seed=st.integers(0, 10_000))
def test_two_betas_are_one_bias(share, seed):
    wx, uh, bias = lstm_gate_inputs(seed=seed, dtype="float64")
    beta1, beta2 = split_bias(bias, share)
    torch.testing.assert_close(beta1 + beta2, bias)
    result = two_betas(wx, uh, beta1, beta2)
    expected = F.layer_norm(wx, (12,), None, beta1) + F.layer_norm(uh, (12,), None, beta2)
    np.testing.assert_allclose(result.separate, expected.numpy(), atol=1e-12)
    assert result.max_difference < 1e-12
    whole = two_betas(wx, uh, bias, torch.zeros_like(bias))  # every bit of it in β₁
    np.testing.assert_allclose(result.separate, whole.separate, atol=1e-12)


# --- figures ----------------------------------------------------------------------------------


def test_grid_figure_draws_every_panel_with_its_counts():
    grid = scale_shift_grid(n=200, bins=12)
    fig = charts.scale_shift.grid_figure(grid.centres, grid.counts, grid.gammas, grid.betas,
                                    grid.mean, grid.std)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 9
    np.testing.assert_array_equal(np.asarray(bars[4].y), grid.counts[1, 1])
    assert bars[4].marker.color == charts.base.AFTER and bars[0].marker.color == charts.base.BEFORE
    titles = [a.text.replace("<br>", " ") for a in fig.layout.annotations]  # lines joined
    assert titles[0] == "γ = 0.5, β = -1: mean -1.00, std 0.50"
    assert "mean 0.00" in titles[4]  # never "-0.00"


def test_feature_and_two_betas_figures_carry_the_numbers():
    result = per_feature_affine(feature_batch(), [0.5, 1.0, 2.0, -1.0], [-1.0, 0, 1, 2])
    fig = charts.scale_shift.feature_figure(result.output, result.gamma, result.beta, result.mean,
                                       result.std)
    np.testing.assert_allclose(fig.data[1].error_y.array, [0.5, 1.0, 2.0, 1.0])
    np.testing.assert_allclose(fig.data[2].y, result.mean)
    assert len(fig.data[0].y) == 64
    wx, uh, bias = lstm_gate_inputs(dtype="float64")
    betas = two_betas(wx, uh, *split_bias(bias, 0.25))
    fig = charts.scale_shift.two_betas_figure(betas.beta1, betas.beta2, betas.separate[0],
                                         betas.merged[0])
    np.testing.assert_allclose(fig.data[2].y, bias.numpy())
    np.testing.assert_allclose(fig.data[3].y, fig.data[4].y, atol=1e-12)


# --- the page ---------------------------------------------------------------------------------


def test_page_opens_with_the_grid_and_every_section():
    at = open_page(PAGE)
    assert at.title[0].value == "Scale and shift: γ and β"
    assert len(figures(at)) == 6 and not alerts(at)["error"]
    assert at.latex and at.code and "Try this" in alerts(at)["info"][0]
    assert trace_data(at, 0, 0, "y").sum() == 1000  # the first of nine histograms
    metrics = [m.value for m in at.metric]
    assert float(metrics[0].split("=")[1]) < 1e-5 and float(metrics[1].split("=")[1]) > 1.0
    assert "zero up to float32 rounding" in alerts(at)["success"][0]
    # the free histogram's title: default γ = 1.5, β = 0.5
    assert figures(at)[1]["layout"]["title"]["text"].startswith("γ = 1.5, β = 0.5 → mean 0.500")


def test_the_grid_slider_and_the_free_controls_move_their_figures():
    at = open_page(PAGE)
    grid = trace_data(at, 0, 0, "y")
    at.select_slider(key="ss_n").set_value(100).run()
    assert trace_data(at, 0, 0, "y").sum() == 100 != grid.sum()
    free = trace_data(at, 1, 0, "y")
    set_live(at, ss_gamma=-1.0)
    assert not np.array_equal(free, trace_data(at, 1, 0, "y"))
    assert at.query_params["ss_gamma"] == "-1"
    shifted = trace_data(at, 1, 0, "y")
    set_live(at, ss_beta=-2.0)
    assert not np.array_equal(shifted, trace_data(at, 1, 0, "y"))
    assert "mean -2.000, std 1.000" in figures(at)[1]["layout"]["title"]["text"]


def test_per_feature_controls_move_the_feature_figure():
    at = open_page(PAGE)
    np.testing.assert_allclose(trace_data(at, 2, 2, "y"), [-1.0, 0.0, 1.0, 2.0], atol=1e-5)
    values = trace_data(at, 2, 0, "y")
    at.slider(key="ss_g2").set_value(-3.0).run()
    assert not np.allclose(values, trace_data(at, 2, 0, "y"))
    at.slider(key="ss_b0").set_value(2.5).run()
    assert trace_data(at, 2, 2, "y")[0] == pytest.approx(2.5, abs=1e-5)
    at.segmented_control(key="ss_norm").set_value("LayerNorm").run()
    assert not np.allclose(trace_data(at, 2, 2, "y"), [2.5, 0.0, 1.0, 2.0], atol=1e-2)


def test_share_moves_the_betas_but_not_the_gates():
    at = open_page(PAGE)
    beta1, gates = trace_data(at, 5, 0, "y"), trace_data(at, 5, 4, "y")
    at.slider(key="ss_share").set_value(0.9).run()
    assert not np.allclose(beta1, trace_data(at, 5, 0, "y"))
    np.testing.assert_allclose(gates, trace_data(at, 5, 4, "y"), atol=1e-5)
    np.testing.assert_allclose(trace_data(at, 5, 3, "y"), trace_data(at, 5, 4, "y"), atol=1e-5)


def test_seed_changes_the_batch_and_url_restores_settings():
    at = open_page(PAGE, {"ss_n": "100", "ss_gamma": "-1.0", "ss_norm": "LayerNorm",
                          "ss_g1": "2.0", "ss_share": "0.8", "seed": "5"})
    assert at.select_slider(key="ss_n").value == 100
    assert at.session_state["ss_gamma"] == -1.0
    assert "γ = -1, β = 0.5" in figures(at)[1]["layout"]["title"]["text"]
    assert at.segmented_control(key="ss_norm").value == "LayerNorm"
    assert at.slider(key="ss_g1").value == 2.0
    assert at.slider(key="ss_share").value == 0.8
    recovered = trace_data(at, 3, 0, "x")
    at.number_input(key="seed").set_value(6).run()
    assert not np.allclose(recovered, trace_data(at, 3, 0, "x"))


def test_page_shows_the_recovery_failing_on_the_next_batch_in_training_mode():
    at = open_page(PAGE)
    text = " ".join(m.value for m in at.markdown)
    assert "never *removes*" not in text
    assert "only where μ and σ are the same for every input" in text
    metrics = {m.label: m.value for m in at.metric}
    train = metrics["Next batch, training mode"]
    frozen = metrics["Next batch, evaluation mode"]
    first, following = feature_batches(0)
    expected = recover_next_batch(first, following)
    assert train == f"max |y − x| = {expected.training_error:.2g}" == "max |y − x| = 7.6"
    assert float(frozen.split("=")[1]) < 1e-5
    np.testing.assert_allclose(trace_data(at, 4, 0, "x"), following.numpy().ravel())
    assert "removes each sample's own mean and spread" in " ".join(c.value for c in at.caption)


def test_page_grid_has_the_input_panel_and_its_caption():
    at = open_page(PAGE)
    grid = figures(at)[0]
    titles = [a["text"].replace("<br>", " ") for a in grid["layout"]["annotations"]]
    assert titles[1].startswith("input x (not normalized)") and titles[0] == titles[2] == ""
    expected = scale_shift_grid(n=1000, seed=0, bins=40)
    np.testing.assert_array_equal(decode(grid["data"][0]["y"]), expected.input_counts)
    assert sum(1 for t in grid["data"] if t["type"] == "bar") == 10
    caption = next(c.value for c in at.caption if c.value.startswith("Top: the input x"))
    assert caption == grid_caption(expected, 1000)
    at.select_slider(key="ss_n").set_value(100).run()
    assert decode(figures(at)[0]["data"][0]["y"]).sum() == 100


def test_the_scalar_condition_is_said_and_part_3_names_the_worst_feature():
    at = open_page(PAGE, {"ss_norm": "LayerNorm"})
    captions = " ".join(c.value for c in at.caption)
    assert "hold when γ and β are single numbers for that group" in captions
    assert "Under LayerNorm the columns miss their targets by up to" in captions
    assert "most for the widest feature" not in alerts(at)["info"][0]


# --- The PyTorch snippet: run, it gives what the page shows -----------------------------------


@pytest.mark.parametrize("query", [
    {},
    {"ss_n": "100", "ss_gamma": "-2.5", "ss_beta": "1.2"},
    {"ss_n": "10000", "ss_gamma": "0.3", "ss_beta": "-3.0"},
])
def test_the_pages_snippet_runs_and_gives_the_pages_numbers(query):
    at = open_page(PAGE, query)
    gamma, beta = at.session_state["ss_gamma"], at.session_state["ss_beta"]
    samples = at.select_slider(key="ss_n").value
    code = at.code[0].value
    assert code == scale_shift_snippet(gamma, beta, samples, 16, 4).strip()
    namespace: dict = {}
    exec(compile(code, "snippet", "exec"), namespace)  # our own generated code
    y = namespace["y"].detach()
    assert y.shape == (1, samples)
    # The free histogram's title: "γ = …, β = … → mean m, std s", from lnviz on its own draw.
    title = figures(at)[1]["layout"]["title"]["text"]
    mean, std = (float(part.split()[-1]) for part in title.split("→")[1].split(","))
    assert float(y.mean()) == pytest.approx(mean, abs=1e-3) == pytest.approx(beta, abs=1e-3)
    assert float(y.std(unbiased=False)) == pytest.approx(std, abs=1e-3)
    assert std == pytest.approx(abs(gamma), abs=1e-3)
    # BatchNorm undone by its own γ and β: ≈ 0, as the page's first metric shows for its batch.
    shown = float(at.metric[0].value.split("=")[1])
    assert float(namespace["recovered"].detach()) < 1e-5 and shown < 1e-5
    # ... for that batch only in training mode; in evaluation mode for the next one too.
    assert float(namespace["missed"].detach()) > 0.5 and float(namespace["kept"].detach()) < 1e-5
    # One bias after the sum does what two betas (any split of it) do.
    wx, uh, b, gates = (namespace[k].detach() for k in ("wx", "uh", "b", "gates"))
    for share in (0.0, 0.3, 1.0):
        split = two_betas(wx, uh, *split_bias(b, share))
        np.testing.assert_allclose(split.separate, gates, atol=1e-5)


def test_the_page_opens_on_part_one_and_folds_the_rest():
    at = open_page(PAGE)
    assert [h.value for h in at.subheader][:1] == ["1 · Nine choices of γ and β"]
    parts = [e for e in at.expander if e.label[0].isdigit() or e.label == "The same in PyTorch"]
    assert [e.label for e in parts] == [
        "2 · Your own γ and β", "3 · One γ and β per feature",
        "4 · When γ and β can undo the normalization",
        "5 · Two betas that are really one (LN-LSTM)", "The same in PyTorch"]
    assert not any(e.proto.expanded for e in parts)
    opened = open_page(PAGE, {"ss_part2": "true"})
    assert [e.proto.expanded for e in opened.expander if e.label.startswith("2 ·")] == [True]


def test_a_hostile_link_to_the_free_controls_is_read_once_and_written_back_once():
    """A repeated parameter is read as its last value and written back as one; a value too
    small for the control's steps is kept as the link has it (the control shows it so too, in
    the browser); a mean that rounds to zero is written 0.000, not -0.000."""
    at = open_page(PAGE, {"ss_gamma": ["1", "2"], "ss_beta": "1e-20"})
    assert at.session_state["ss_gamma"] == 2.0 and at.session_state["ss_beta"] == 1e-20
    assert at.query_params["ss_gamma"] == "2"  # one value now, not ["1", "2"]
    title = figures(at)[1]["layout"]["title"]["text"]
    assert title.startswith("γ = 2, β = 1e-20 → mean ")
    fig = charts.scale_shift.histogram_figure(np.array([0.0]), np.array([3]), -1e-5, 1.0, 1.0,
                                              0.0)
    assert fig.layout.title.text == "γ = 1, β = 0 → mean 0.000, std 1.000"
