"""lnviz.lessons.gradients (backward passes, Jacobians, invariance probes) and its page."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from pageutil import alerts, asks_first, decode, figures, open_page, page_text, trace_data

from lnviz.lessons.common import short
from lnviz.lessons.gradients import (
    GRAD_NORMS,
    GRADIENTS_MAX_JACOBIAN,
    PROBES,
    REACH_OPTIONS,
    ROUNDING,
    VERDICTS,
    cross_sample_share,
    gradient_input,
    gradient_report,
    gradients_snippet,
    invariance_caption,
    invariance_probes,
    jacobian_caption,
    norm_forward,
    norm_gradients,
    norm_jacobian,
    pair_note,
    probe_inputs,
    probed_variances,
    upstream_gradient,
    verdict,
    weight_scale_gradient,
)

PAGE = "app_pages/gradients.py"


def torch_forward(x, norm, weight=None, bias=None, eps=1e-5):
    """The reference, written out here rather than through lnviz.lessons.gradients."""
    if norm == "LayerNorm":
        return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
    return F.batch_norm(x, None, None, weight, bias, training=True, eps=eps)


def torch_gradients(x, norm, g, weight, bias, eps):
    x, weight, bias = (t.detach().clone().requires_grad_(True) for t in (x, weight, bias))
    torch_forward(x, norm, weight, bias, eps).backward(g)
    return x.grad, weight.grad, bias.grad


def table(n: int, c: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, c, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# --- forward and upstream gradients ------------------------------------------------------------


@pytest.mark.parametrize("norm", GRAD_NORMS)
def test_forward_matches_torch_in_both_implementations(norm):
    x = table(5, 4)
    expected = torch_forward(x, norm)
    torch.testing.assert_close(norm_forward(x, norm), expected)
    torch.testing.assert_close(norm_forward(x, norm, implementation="torch"), expected)


@pytest.mark.parametrize(("args", "message"), [
    ((table(2, 3, 0)[0], "LayerNorm"), "(batch, features)"),
    ((table(2, 3), "RMSNorm"), "norm must be one of"),
])
def test_forward_refuses_what_it_cannot_do(args, message):
    with pytest.raises(ValueError, match=message):
        norm_forward(*args)
    with pytest.raises(ValueError, match="implementation"):
        norm_forward(table(2, 3), "LayerNorm", implementation="numpy")


def test_upstream_gradients():
    one_hot = upstream_gradient((3, 4), "one-hot", cell=(2, 1))
    assert one_hot.sum() == 1 and one_hot[2, 1] == 1
    assert torch.equal(upstream_gradient((3, 4), "ones"), torch.ones(3, 4, dtype=torch.float64))
    first = upstream_gradient((3, 4), "random", seed=1)
    assert torch.equal(first, upstream_gradient((3, 4), "random", seed=1))
    assert not torch.equal(first, upstream_gradient((3, 4), "random", seed=2))
    with pytest.raises(ValueError, match="outside the 3 × 4 output"):
        upstream_gradient((3, 4), "one-hot", cell=(3, 0))
    with pytest.raises(ValueError, match="upstream gradient must be one of"):
        upstream_gradient((3, 4), "zeros")


# --- backward passes ---------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 6), c=st.integers(2, 6), seed=st.integers(0, 2**16),
       eps=st.sampled_from([1e-8, 1e-5, 0.1]), norm=st.sampled_from(GRAD_NORMS))
def test_gradients_match_torch_autograd(n, c, seed, eps, norm):
    x = table(n, c, seed) * 3 + 1
    g, weight, bias = table(n, c, seed + 1), table(1, c, seed + 2)[0], table(1, c, seed + 3)[0]
    ours = norm_gradients(x, norm, g, weight, bias, eps)
    dx, dw, db = torch_gradients(x, norm, g, weight, bias, eps)
    np.testing.assert_allclose(ours.grad_input, dx.numpy(), atol=1e-9)
    np.testing.assert_allclose(ours.grad_weight, dw.numpy(), atol=1e-9)
    np.testing.assert_allclose(ours.grad_bias, db.numpy(), atol=1e-9)
    np.testing.assert_allclose(ours.output, torch_forward(x, norm, weight, bias, eps)
                               .detach().numpy(), atol=1e-9)


def test_layer_norm_gradient_of_one_two_three_by_hand():
    # x = [1, 2, 3]: μ = 2, σ² = 2/3, x̂ = [−√1.5, 0, √1.5]. With L = y[0] and ε = 0,
    # ∂L/∂x = rstd/3·(3ĝ − Σĝ − x̂·Σĝx̂) = √1.5/3·[0.5, −1, 0.5].
    x = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    grads = norm_gradients(x, "LayerNorm", upstream_gradient((1, 3), "one-hot"), eps=0.0)
    np.testing.assert_allclose(grads.grad_input, [[0.204124, -0.408248, 0.204124]], atol=1e-6)
    np.testing.assert_allclose(grads.grad_weight, [-math.sqrt(1.5), 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(grads.grad_bias, [1.0, 0.0, 0.0])


@pytest.mark.parametrize("norm", GRAD_NORMS)
def test_gradient_follows_the_closed_form(norm):
    x, g = table(4, 5, 3), table(4, 5, 4)
    gamma = table(1, 5, 5)[0]
    eps = 1e-3
    axis = 1 if norm == "LayerNorm" else 0  # the values that share one μ, σ
    h = x.shape[axis]
    mean = x.mean(axis, keepdim=True)
    rstd = 1 / torch.sqrt(((x - mean) ** 2).mean(axis, keepdim=True) + eps)
    x_hat, g_hat = (x - mean) * rstd, g * gamma
    expected = rstd / h * (h * g_hat - g_hat.sum(axis, keepdim=True)
                           - x_hat * (g_hat * x_hat).sum(axis, keepdim=True))
    ours = norm_gradients(x, norm, g, gamma, None, eps)
    np.testing.assert_allclose(ours.grad_input, expected.numpy(), atol=1e-10)
    np.testing.assert_allclose(ours.grad_weight, (g * x_hat).sum(0).numpy(), atol=1e-10)
    np.testing.assert_allclose(ours.grad_bias, g.sum(0).numpy(), atol=1e-12)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(2, 6), c=st.integers(2, 6), seed=st.integers(0, 2**16))
def test_invariances_show_up_in_the_gradient(n, c, seed):
    """Shifting (and, with ε = 0, scaling) a group leaves y alone, so ∂L/∂x is orthogonal to
    the ones vector and to x within each group: rows for LayerNorm, columns for BatchNorm."""
    x, g = table(n, c, seed), table(n, c, seed + 1)
    ln = norm_gradients(x, "LayerNorm", g, eps=0.0).grad_input
    bn = norm_gradients(x, "BatchNorm", g, eps=0.0).grad_input
    np.testing.assert_allclose(ln.sum(1), 0, atol=1e-9)
    np.testing.assert_allclose((ln * x.numpy()).sum(1), 0, atol=1e-9)
    np.testing.assert_allclose(bn.sum(0), 0, atol=1e-9)
    np.testing.assert_allclose((bn * x.numpy()).sum(0), 0, atol=1e-9)


def test_one_hot_reaches_one_sample_under_layer_norm_and_the_whole_batch_under_batch_norm():
    x = table(4, 3)
    g = upstream_gradient((4, 3), "one-hot", cell=(1, 2))
    ln = norm_gradients(x, "LayerNorm", g).grad_input
    bn = norm_gradients(x, "BatchNorm", g).grad_input
    assert np.all(ln[[0, 2, 3]] == 0) and np.all(ln[1] != 0)
    assert np.all(bn[:, [0, 1]] == 0) and np.all(bn[:, 2] != 0)


def test_a_sum_loss_sends_no_gradient_to_the_input():
    x = table(4, 3)
    report = gradient_report(x, upstream_gradient((4, 3), "ones"))
    for norm in GRAD_NORMS:
        np.testing.assert_allclose(report.by_norm[norm].grad_input, 0, atol=1e-12)
        np.testing.assert_allclose(report.by_norm[norm].grad_bias, [4.0, 4.0, 4.0])
    np.testing.assert_allclose(report.by_norm["BatchNorm"].grad_weight, 0, atol=1e-12)
    assert np.abs(report.by_norm["LayerNorm"].grad_weight).max() > 0.1
    assert report.max_difference < 1e-12 and report.compared == GRAD_NORMS


def test_report_compares_layer_norm_only_where_torch_refuses_batch_norm():
    report = gradient_report(table(3, 2), upstream_gradient((3, 2), "random"), eps=0.0)
    assert report.compared == ("LayerNorm",)
    assert np.isfinite(report.by_norm["BatchNorm"].grad_input).all()


# --- Jacobians ---------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", GRAD_NORMS)
def test_jacobian_matches_torch(norm):
    x = table(3, 4)
    expected = torch.autograd.functional.jacobian(lambda t: torch_forward(t, norm, eps=1e-5), x)
    np.testing.assert_allclose(norm_jacobian(x, norm), expected.reshape(12, 12).numpy(),
                               atol=1e-10)


def test_jacobian_structure():
    x = table(4, 3)
    ln, bn = norm_jacobian(x, "LayerNorm"), norm_jacobian(x, "BatchNorm")
    assert cross_sample_share(ln, 4) == 0.0
    assert cross_sample_share(bn, 4) > 0.3
    # BatchNorm ties sample n to sample m only through the same feature
    feature = np.arange(12) % 3
    assert np.all(bn[feature[:, None] != feature[None, :]] == 0)
    with pytest.raises(ValueError, match=f"≤ {GRADIENTS_MAX_JACOBIAN}"):
        norm_jacobian(table(9, 8), "LayerNorm")


def test_cross_sample_share_by_hand():
    assert cross_sample_share(np.eye(6), 3) == 0.0
    assert cross_sample_share(np.ones((4, 4)), 2) == pytest.approx(0.5)
    assert cross_sample_share(np.zeros((4, 4)), 2) == 0.0


# --- invariance probes -------------------------------------------------------------------------


def test_probes_with_eps_zero_separate_the_two_norms():
    x, weight = probe_inputs(5, 4, seed=3)
    probes = invariance_probes(x, weight, factor=3.0, shift=2.0, sample=1, feature=2, eps=0.0)
    assert list(probes["probe"]) == list(PROBES)
    delta = probes.set_index("probe")
    ln_invariant = ["scale one sample", "shift one sample", "scale all of W"]
    bn_invariant = ["scale one feature", "shift one feature", "scale all of W",
                    "scale one row of W"]
    assert delta.loc[ln_invariant, "LayerNorm"].max() < 1e-12
    assert delta.loc[bn_invariant, "BatchNorm"].max() < 1e-12
    assert delta.drop(ln_invariant)["LayerNorm"].min() > 0.1
    assert delta.drop(bn_invariant)["BatchNorm"].min() > 0.1
    # one row of W is one feature of h: the same change seen from the weights
    assert delta.loc["scale one row of W", "LayerNorm"] == pytest.approx(
        delta.loc["scale one feature", "LayerNorm"])


@settings(max_examples=12, deadline=None)
@given(factor=st.sampled_from([0.1, 0.5, 2.0, 10.0]), shift=st.floats(-5, 5),
       sample=st.integers(0, 3), feature=st.integers(0, 2), seed=st.integers(0, 1000))
def test_probe_values_match_a_direct_computation(factor, shift, sample, feature, seed):
    x, weight = probe_inputs(4, 3, seed=seed)
    eps = 1e-5
    probes = invariance_probes(x, weight, factor=factor, shift=shift, sample=sample,
                               feature=feature, eps=eps).set_index("probe")
    h = x @ weight.T
    shifted = h.clone()
    shifted[sample] += shift
    for norm in GRAD_NORMS:
        expected = (torch_forward(shifted, norm, eps=eps) - torch_forward(h, norm, eps=eps))
        assert probes.loc["shift one sample", norm] == pytest.approx(
            float(expected.abs().max()), abs=1e-9)
        scaled = torch_forward(factor * h, norm, eps=eps) - torch_forward(h, norm, eps=eps)
        assert probes.loc["scale all of W", norm] == pytest.approx(
            float(scaled.abs().max()), abs=1e-9)


def test_scaling_one_sample_is_an_epsilon_effect_and_the_caption_says_so():
    """LayerNorm's 'scale one sample' moves y by 4.15e-4 on the page's default inputs: the
    probed sample's σ² in h is 0.0155, so ε = 1e-5 is not negligible beside it; at ε = 0 the
    change is exactly 0."""
    x, weight = probe_inputs(4, 4, seed=0)
    probes = invariance_probes(x, weight).set_index("probe")
    row = probes.loc["scale one sample"]
    assert row["LayerNorm"] == pytest.approx(4.15e-4, rel=2e-3)
    assert row["LayerNorm, ε = 0"] == 0.0
    assert row["LayerNorm: verdict"] == "ε's doing"
    assert row["BatchNorm"] == pytest.approx(0.348, abs=1e-3)
    assert row["BatchNorm: verdict"] == "not invariant"
    assert probes.loc["shift one sample", "LayerNorm: verdict"] == "unchanged"
    variances = probed_variances(x, weight)
    assert variances["LayerNorm"] == pytest.approx(0.0155, abs=1e-4)
    caption = invariance_caption(probes.reset_index(), 1e-5, variances)
    assert "ε's doing — these changes vanish at ε = 0: LayerNorm, scale one sample (0.00041)" \
        in caption
    assert "ε/σ² is 0.00065 before and 0.00016 after the rescaling for the probed sample " \
        "(LayerNorm's group)" in caption
    # a factor of 0.01 shrinks the sample's σ² 10⁴-fold: ε outweighs it, and the caption says so
    small = invariance_caption(invariance_probes(x, weight, factor=0.01), 1e-5, variances, 0.01)
    assert "0.00065 before and 6.5 after the rescaling for the probed sample" in small
    # the shift's change is rounding residue: its digits depend on how the CPU sums, so the
    # caption is checked against the number the probe computed, and that number against a bound
    residue = probes.loc["shift one sample", "LayerNorm"]
    assert 0 <= residue < 1e-12
    assert "Unchanged up to float64 rounding" in caption
    assert f"shift one sample ({residue:.2g})" in caption


def test_verdict_compares_with_eps_zero():
    assert verdict(0.3, 0.3) == verdict(1e-20, float("nan")) == VERDICTS[2]
    assert verdict(4e-4, 0.0) == "ε's doing"
    assert verdict(1e-15, 2e-16) == verdict(0.0, 0.0) == "unchanged"
    assert verdict(2 * ROUNDING, ROUNDING) == "ε's doing"


@settings(max_examples=20, deadline=None)
@given(factor=st.sampled_from([0.01, 0.1, 0.5, 2.0, 10.0, 100.0]), shift=st.floats(-5, 5),
       eps=st.sampled_from([0.0, 1e-8, 1e-5, 1e-3, 0.1, 1.0]), n=st.integers(2, 8),
       c=st.integers(2, 8), seed=st.integers(0, 1000))
def test_verdicts_follow_the_numbers_at_every_setting(factor, shift, eps, n, c, seed):
    """Every verdict the chart and caption print is what its two numbers say; the shifts a norm
    cancels are unchanged at any ε; 'scale one feature' and 'scale one row of W' agree to
    rounding (the page's 'try this'); a group's own rescaling is never 'not invariant'."""
    x, weight = probe_inputs(n, c, seed=seed)
    probes = invariance_probes(x, weight, factor=factor, shift=shift, sample=n - 1,
                               feature=c - 1, eps=eps).set_index("probe")
    for norm in GRAD_NORMS:
        for name, row in probes.iterrows():
            assert row[f"{norm}: verdict"] == verdict(row[norm], row[f"{norm}, ε = 0"]), name
        assert probes.loc["scale one feature", norm] == pytest.approx(
            probes.loc["scale one row of W", norm], abs=1e-12)
        assert probes.loc["scale all of W", f"{norm}: verdict"] != "not invariant"
    assert probes.loc["shift one sample", "LayerNorm: verdict"] == "unchanged"
    assert probes.loc["shift one feature", "BatchNorm: verdict"] == "unchanged"
    assert probes.loc["scale one sample", "LayerNorm: verdict"] != "not invariant"
    assert probes.loc["scale one feature", "BatchNorm: verdict"] != "not invariant"
    if eps == 0:
        assert "ε's doing" not in set(probes["LayerNorm: verdict"]) | set(
            probes["BatchNorm: verdict"])


def test_groups_of_two_are_named_and_their_jacobians_read_as_zero():
    assert pair_note(4, 4) is None
    assert "BatchNorm (N = 2) passes on almost nothing" in pair_note(2, 5)
    assert "LayerNorm (C = 2) and BatchNorm (N = 2) pass on" in pair_note(2, 2)
    x = gradient_input(2, 2)
    zero = {"LayerNorm": norm_jacobian(x, "LayerNorm", 0.0),
            "BatchNorm, training": norm_jacobian(x, "BatchNorm", 0.0)}
    assert np.abs(zero["BatchNorm, training"]).max() <= ROUNDING
    caption = jacobian_caption(zero, 2)
    assert caption.count("every entry is 0 up to rounding") == 2 and "%" not in caption
    x = gradient_input(4, 4)
    shown = jacobian_caption({"LayerNorm": norm_jacobian(x, "LayerNorm"),
                              "BatchNorm, training": norm_jacobian(x, "BatchNorm")}, 4)
    assert "LayerNorm: 0% of Σ|J| outside the sample blocks — block-diagonal" in shown
    assert "BatchNorm, training: 58% of Σ|J|" in shown


def test_probes_refuse_bad_arguments():
    x, weight = probe_inputs(3, 2)
    with pytest.raises(ValueError, match="same number of inputs"):
        invariance_probes(x, weight[:, :3])
    with pytest.raises(ValueError, match="sample must be in 0…2"):
        invariance_probes(x, weight, sample=3)


def test_probe_inputs_are_seeded():
    x, weight = probe_inputs(3, 2, inputs=5, seed=4)
    assert x.shape == (3, 5) and weight.shape == (2, 5) and x.dtype == torch.float64
    assert torch.equal(x, probe_inputs(3, 2, inputs=5, seed=4)[0])
    assert not torch.equal(x, probe_inputs(3, 2, inputs=5, seed=5)[0])


def test_snippet_runs_and_gives_a_block_diagonal_jacobian():
    scope: dict = {}
    exec(gradients_snippet((3, 2), "one-hot", (1, 0), 1e-5), scope)
    assert scope["x"].grad.shape == (3, 2)
    assert torch.all(scope["x"].grad[[0, 2]] == 0)
    jac = scope["J"].numpy()
    assert cross_sample_share(jac, 3) == 0.0


@pytest.mark.parametrize("kind, cell, eps", [("one-hot", (2, 3), 1e-5), ("ones", (0, 0), 0.1),
                                             ("random", (0, 0), 1e-3)])
def test_snippet_computes_what_the_page_computes_for_its_input(kind, cell, eps):
    """The snippet draws its own x: put that x through the page's computations and every
    gradient and the Jacobian come out the same."""
    scope: dict = {}
    exec(compile(gradients_snippet((3, 4), kind, cell, eps), "snippet", "exec"), scope)
    x, g = scope["x"].detach(), scope["g"]
    ln = gradient_report(x, g, eps).by_norm["LayerNorm"]
    np.testing.assert_allclose(scope["x"].grad.numpy(), ln.grad_input, atol=1e-10)
    np.testing.assert_allclose(scope["gamma"].grad.numpy(), ln.grad_weight, atol=1e-10)
    np.testing.assert_allclose(scope["beta"].grad.numpy(), ln.grad_bias, atol=1e-10)
    np.testing.assert_allclose(scope["y"].detach().numpy(), ln.output, atol=1e-10)
    np.testing.assert_allclose(scope["J"].numpy(), norm_jacobian(x, "LayerNorm", eps),
                               atol=1e-10)


# --- the page ----------------------------------------------------------------------------------


def grad_panels(at) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x, ∂L/∂y, LayerNorm's and BatchNorm's ∂L/∂x from the first figure."""
    return tuple(trace_data(at, 0, i) for i in range(4))


def probe_values(at) -> np.ndarray:
    """max |Δy| per norm (rows) and probe (columns), from the probe chart's hover data."""
    return np.stack([trace_data(at, 3, i, "customdata")[:, 0] for i in range(2)])


def test_default_view_shows_where_a_one_hot_gradient_goes():
    at = open_page(PAGE)
    assert len(figures(at)) == 4
    x, g, ln, bn = grad_panels(at)
    assert x.shape == g.shape == (4, 4) and g[0, 0] == 1 and g.sum() == 1
    assert np.all(ln[1:] == 0) and np.all(ln[0] != 0)
    assert np.all(bn[:, 1:] == 0) and np.all(bn[:, 0] != 0)
    assert "match torch.nn.functional" in alerts(at)["success"][0]
    jac_ln, jac_bn = trace_data(at, 2, 0), trace_data(at, 2, 2)
    assert jac_ln.shape == (16, 16) and cross_sample_share(jac_ln, 4) == 0.0
    assert cross_sample_share(jac_bn, 4) > 0.2
    assert any("0% of Σ|J|" in c.value for c in at.caption)
    assert "F.layer_norm" in at.code[0].value


@pytest.mark.parametrize(("kind", "cell", "option"), [
    ("one-hot", (0, 0), "one feature's column"),  # feature 0's μ and σ pool every sample
    ("one-hot", (2, 3), "one feature's column"),
    ("ones", (0, 0), "nowhere"),  # each feature's x̂ sums to 0 whatever x is
    ("random", (0, 0), "every cell"),
])
def test_the_reach_question_reads_torchs_gradient(kind, cell, option):
    """The answer is where torch's own autograd through F.batch_norm puts ∂L/∂x (not lnviz's
    numbers): the hand-derived pattern beside each case."""
    from lnviz.lessons.gradients import reach_answer

    x = gradient_input(4, 4, seed=0).double().requires_grad_(True)
    upstream = upstream_gradient((4, 4), kind, cell=cell, seed=0).double()
    F.batch_norm(x, None, None, training=True, eps=1e-5).backward(upstream)
    grad = x.grad.numpy()
    answer = reach_answer(grad, kind, cell)
    assert answer.option == option and option in REACH_OPTIONS
    if kind == "one-hot":
        assert np.count_nonzero(np.abs(grad) > 1e-9) == 4  # the column's four samples
        assert f"all 4 cells of column {cell[1]}" in answer.reason
        assert f"LayerNorm's stays in row {cell[0]}" in answer.reason


@pytest.mark.parametrize("kind", ["one-hot", "random"])
@pytest.mark.parametrize("eps", [1e-5, 0.0, 1.0])
def test_at_a_batch_of_two_the_reach_reply_says_when_batchnorm_answers_plus_or_minus_one(
        eps, kind):
    """Two samples: BatchNorm's x̂ is ±d/√(d² + 4ε), ±1 while ε ≪ d², so the tiny gradient
    left is ε's doing, whatever the upstream gradient ("nowhere" is right up to ε beside the
    exact answer); at ε = 1 (the slider's largest) x̂ is far from ±1, and the reply says so
    with torch's own x̂ (F.batch_norm) and gradient's size."""
    from lnviz.lessons.gradients import reach_answer

    x = gradient_input(2, 4, seed=0)
    upstream = upstream_gradient((2, 4), kind, cell=(0, 1), seed=0)
    grad = gradient_report(x, upstream, eps).by_norm["BatchNorm"].grad_input
    answer = reach_answer(grad, kind, (0, 1), x=x.numpy(), eps=eps)
    assert answer.reason.startswith("With two samples, BatchNorm's x̂ of each feature is")
    # torch refuses ε = 0 in training: there, x̂ = ±1 exactly (d ≠ 0 in every feature)
    x_hat = (np.abs(F.batch_norm(x.double(), None, None, training=True, eps=eps).numpy())
             if eps > 0 else np.ones((2, 4)))
    low, high = f"{x_hat.min():.3g}", f"{x_hat.max():.3g}"
    same = "rounds to" if eps > 0 and low == "1" else "is"
    assert (f"|x̂| {same} {low} in every feature" if low == high else
            f"|x̂| runs from {low} to {high}") in answer.reason
    if eps == 0:  # no gradient but rounding's: "nowhere", and nothing is ε's doing
        assert answer.option == "nowhere" and np.abs(grad).max() < 1e-12
        assert "At ε = 0 x̂ is exactly ±1, so ∂L/∂x is 0 everywhere." in answer.reason
        assert "ε's doing" not in answer.reason
        return
    assert f"The largest |∂L/∂x| is {np.abs(grad).max():.2g}" in answer.reason
    exact = "one feature's column" if kind == "one-hot" else "every cell"
    assert answer.option == exact
    if eps < 1e-3:
        assert x_hat.min() > 0.99 and np.abs(grad).max() < 0.05  # ε's doing alone
        assert "the loss hardly depends on x" in answer.reason
        # the cells the numbers show, and "nowhere", right up to ε, both right
        assert answer.reply("nowhere").startswith("**Right:**")
        assert answer.reply(exact).startswith("**Right:**")
        assert answer.reply("one sample's row").startswith("**Not quite:**")
    else:
        assert x_hat.min() < 0.9 and np.abs(grad).max() > 0.1
        assert "x̂ depends on x again" in answer.reason
        assert "hardly" not in answer.reason
        assert answer.reply("nowhere").startswith("**Not quite:**")


def test_the_page_asks_where_the_gradient_goes_before_it_draws_it():
    """A shared link opens the question with both norms' gradients held back; every option
    gets its reply, "Right" for feature 0's column; another upstream gradient asks again."""
    at = asks_first(PAGE, "gr_guess_one-hot", "one feature's column",
                    hidden=("a feature's N samples", "across the whole batch", "helped compute",
                            "normalizes each feature"))
    assert any("normalizes each feature" in m.value for m in at.markdown)  # once answered
    assert any("a feature's N samples for BatchNorm" in c.value for c in at.caption)
    assert "Now pick **ones** and answer again" in alerts(at)["info"][0]
    at.segmented_control(key="gr_up").set_value("ones").run()
    assert at.radio(key="gr_guess_ones").value is None
    assert not [f for f in figures(at) if "∂L/∂x, BatchNorm" in json.dumps(f, ensure_ascii=False)]


def test_the_page_draws_the_lessons_seeded_input():
    at = open_page(PAGE)
    x = grad_panels(at)[0]
    np.testing.assert_allclose(x, gradient_input(4, 4, seed=0).numpy(), rtol=1e-6)
    assert gradient_input(4, 4, seed=0).dtype == torch.float64
    assert not np.allclose(gradient_input(4, 4, seed=1).numpy(), x)


def test_gradient_controls_move_the_figures():
    at = open_page(PAGE)
    at.number_input(key="gr_row").set_value(2).run()
    _, g, moved, _ = grad_panels(at)
    assert g[2, 0] == 1 and np.all(moved[[0, 1, 3]] == 0) and np.all(moved[2] != 0)
    at.segmented_control(key="gr_up").set_value("ones").run()
    _, g, ln_ones, bn_ones = grad_panels(at)
    assert np.all(g == 1)
    np.testing.assert_allclose(ln_ones, 0, atol=1e-6)
    np.testing.assert_allclose(bn_ones, 0, atol=1e-6)
    at.segmented_control(key="gr_up").set_value("random").run()
    before = grad_panels(at)[2]
    at.select_slider(key="gr_eps").set_value(1.0).run()
    assert not np.allclose(before, grad_panels(at)[2])
    at.slider(key="gr_n").set_value(3).run()
    at.slider(key="gr_c").set_value(5).run()
    assert grad_panels(at)[0].shape == (3, 5)
    assert trace_data(at, 2, 0).shape == (15, 15)
    first = grad_panels(at)[0]
    at.number_input(key="seed").set_value(9).run()
    assert not np.allclose(first, grad_panels(at)[0])


def test_probe_controls_move_the_probe_figure():
    at = open_page(PAGE)
    values = probe_values(at)
    for widget, key, value in (("select_slider", "gr_factor", 10.0),
                               ("slider", "gr_shift", -2.0),
                               ("number_input", "gr_sample", 3),
                               ("number_input", "gr_feature", 2),
                               ("select_slider", "gr_eps", 0.0)):
        getattr(at, widget)(key=key).set_value(value).run()
        moved = probe_values(at)
        assert not np.allclose(values, moved, rtol=1e-3, atol=0), key
        values = moved
    # with ε = 0 the invariant probes are exact: LayerNorm row 0 (scale one sample), BN row 2
    assert values[0, 0] < 1e-12 and values[1, 2] < 1e-12
    assert not at.exception and any("probe" in d.value.columns for d in at.dataframe)


def test_probe_chart_reads_true_on_a_linear_axis():
    """A log axis from 1e-16 drew LayerNorm's 4e-4 ε effect nearly as long as
    BatchNorm's 0.35 change. On a linear axis the bar lengths are the changes, and the ε effect
    is labelled and hatched."""
    at = open_page(PAGE)
    chart = figures(at)[3]
    assert chart["layout"]["xaxis"].get("type", "linear") == "linear"
    ln, bn = chart["data"][0], chart["data"][1]
    ln_x, bn_x = decode(ln["x"]), decode(bn["x"])
    assert bn_x[0] / ln_x[0] > 800  # the lengths compare as the numbers do
    assert ln["text"][0] == "0.00041 · ε's doing" and bn["text"][0] == "0.35 · not invariant"
    assert ln["marker"]["pattern"]["shape"][0] == "/" and bn["marker"]["pattern"]["shape"][0] == ""
    caption = next(c.value for c in at.caption if c.value.startswith("Unchanged"))
    assert "LayerNorm, scale one sample (0.00041)" in caption.split("ε's doing")[1]
    at.select_slider(key="gr_eps").set_value(0.0).run()
    chart = figures(at)[3]
    assert decode(chart["data"][0]["x"])[0] <= ROUNDING
    assert chart["data"][0]["text"][0].endswith("unchanged")
    assert any("At ε = 0 no change is ε's doing" in c.value for c in at.caption)


def test_groups_of_two_get_the_note_and_no_share_of_rounding_noise():
    at = open_page(PAGE, {"gr_n": "2", "gr_c": "2", "gr_eps": "0"})
    assert "LayerNorm (C = 2) and BatchNorm (N = 2) pass on almost nothing" in \
        alerts(at)["warning"][0]
    jac = next(c.value for c in at.caption if "Σ|J|" in c.value or "up to rounding" in c.value)
    assert jac.count("every entry is 0 up to rounding") == 2 and "%" not in jac
    assert not alerts(open_page(PAGE))["warning"]
    # with N = 2 the note says where BatchNorm's gradient goes: it waits for the question
    asked = open_page(PAGE, {"gr_n": "2", "gr_eps": "0"}, asked=True)
    assert not alerts(asked)["warning"]
    assert not any("Try this" in i.value for i in asked.info)


@pytest.mark.parametrize("n", [2, 3])
def test_the_try_this_holds_for_the_batch_size(n):
    """BatchNorm's gradient reaches the column in every sample only from N = 3: with two
    samples it is ε's alone, and the Try-this says so."""
    from lnviz.lessons.gradients import gradients_try_this

    text = gradients_try_this(n, "one-hot")
    # at N = 2 the column is N ≥ 3's answer, a question of its own (asked again there)
    assert ("reaches the chosen feature's column in *every* sample" in text) == (n > 2)
    assert ("with N = 2, is ε's doing alone" in text) == (n == 2)
    assert "Now pick **ones**" in text


def test_the_answer_is_asked_again_across_two_samples_and_three():
    """With two samples the answer is ε's (nowhere, at ε = 0); from three on, the column: an
    answer given at N = 2 is not graded at N = 4, the question is asked again."""
    at = open_page(PAGE, {"gr_n": "2", "gr_eps": "0"}, asked=True)
    at.radio(key="gr_guess_one-hot").set_value("nowhere").run()
    assert any(m.value.startswith("**Right:**") for m in at.markdown)
    at.slider(key="gr_n").set_value(4).run()
    assert at.radio(key="gr_guess_one-hot").value is None
    assert not any(m.value.startswith(("**Right:**", "**Not quite")) for m in at.markdown)


def test_the_one_hot_question_comes_before_the_other_losses():
    """Another loss's reply, its gradients and the caption under them show which values each
    norm pools: the one-hot loss's answer. So a link that opens "ones" asks nothing there, says
    to answer the one-hot question first, and draws no gradient; once it is answered, "ones"
    is asked, and its reply, figures and the account of the one-hot loss show."""
    at = open_page(PAGE, {"gr_up": "ones"}, asked=True)
    assert not [r for r in at.radio if r.key == "gr_guess_ones"]
    assert any("question comes first" in c.value and "one-hot" in c.value for c in at.caption)
    text = " ".join([page_text(at), *(c.value for c in at.caption)])
    assert "a feature's N samples" not in text and "normalizes each feature" not in text
    assert not [f for f in figures(at) if "∂L/∂x, BatchNorm" in json.dumps(f, ensure_ascii=False)]
    at.segmented_control(key="gr_up").set_value("one-hot").run()
    at.radio(key="gr_guess_one-hot").set_value("one feature's column").run()
    at.segmented_control(key="gr_up").set_value("ones").run()
    assert at.radio(key="gr_guess_ones").value is None
    at.radio(key="gr_guess_ones").set_value("nowhere").run()
    assert any(m.value.startswith("**Right:**") for m in at.markdown)
    assert [f for f in figures(at) if "∂L/∂x, BatchNorm" in json.dumps(f, ensure_ascii=False)]
    assert "Now pick **random**" in " ".join(i.value for i in at.info)
    assert [h for h in at.subheader if "Jacobian" in h.value]


def test_url_restores_the_settings():
    at = open_page(PAGE, {"gr_n": "3", "gr_c": "5", "gr_up": "random", "gr_eps": "0",
                          "gr_factor": "10.0", "gr_shift": "-1.5"})
    assert at.slider(key="gr_n").value == 3 and at.slider(key="gr_c").value == 5
    assert at.segmented_control(key="gr_up").value == "random"
    assert at.select_slider(key="gr_eps").value == 0.0
    assert at.select_slider(key="gr_factor").value == 10.0
    assert at.slider(key="gr_shift").value == -1.5
    assert grad_panels(at)[1].shape == (3, 5)


@pytest.mark.parametrize("factor", [0.1, 2.0, 10.0])
def test_the_weights_gradient_scales_as_one_over_their_size_before_layer_norm(factor):
    """The page's answer to the two-word notes' "with small values, we take big steps": with
    y = LayerNorm(x Wᵀ) at ε = 0, ∂L/∂(cW) = ∂L/∂W / c, checked against autograd through
    torch's own layer_norm."""
    x, weight = probe_inputs(6, 4, seed=0)
    scale = weight_scale_gradient(x, weight, factor)
    assert scale.ratio == pytest.approx(1 / factor, rel=1e-9)
    g = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=x.dtype)
    w = weight.clone().requires_grad_(True)
    (F.layer_norm(x @ w.T, (4,), eps=0.0) * g).sum().backward()
    assert scale.grad == pytest.approx(float(w.grad.norm()), rel=1e-9)
    text = " ".join(m.value for m in open_page(PAGE, {"gr_factor": f"{factor}"}).markdown)
    assert "with small values, we take big steps" in text
    assert f"multiplying W by {factor:g} multiplies ‖∂L/∂W‖ by {short(1 / factor)}" in text


@pytest.mark.parametrize("n", [2, 4])
def test_with_two_features_the_weights_gradient_is_zero_and_no_ratio_is_quoted(n):
    """C = 2: LayerNorm's output is ±(1, −1) whatever W is, so ∂L/∂W is 0 at ε = 0 (torch's
    own autograd leaves float64 rounding) and the 1/factor law has nothing to show: the page
    says so instead of quoting a ratio of rounding."""
    from lnviz.lessons.gradients import weight_scale_text

    x, weight = probe_inputs(n, 2, seed=0)
    scale = weight_scale_gradient(x, weight, 0.01)
    w = weight.clone().requires_grad_(True)
    g = torch.randn(n, 2, generator=torch.Generator().manual_seed(0), dtype=x.dtype)
    (F.layer_norm(x @ w.T, (2,), eps=0.0) * g).sum().backward()
    assert float(w.grad.abs().max()) < 1e-12 and scale.grad < 1e-12  # rounding alone
    text = weight_scale_text(scale, 2)
    assert "so ‖∂L/∂W‖ is 0 at ε = 0" in text and "multiplies ‖∂L/∂W‖ by" not in text
    at = open_page(PAGE, {"gr_n": str(n), "gr_c": "2", "gr_factor": "0.01"})
    assert text in " ".join(m.value for m in at.markdown)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("features", [2, 4, 8])
@pytest.mark.parametrize("eps", [1e-12, 1e-9, 1e-5, 1.0])
@pytest.mark.parametrize(("kind", "option"), [("one-hot", "one feature's column"),
                                              ("ones", "nowhere"), ("random", "every cell")])
def test_at_a_batch_of_two_the_reach_is_the_exact_pattern_however_small_eps(seed, features, eps,
                                                                            kind, option):
    """With two samples and ε > 0, ∂L/∂x = ±(1 − x̂²)(g₁ − g₂)/(2√(σ² + ε)) per feature:
    nonzero wherever g differs between the samples, even where ε = 1e-12 makes it 1e-14 (below
    any fixed cut-off). The answer is that pattern; the formula is checked against torch's
    autograd in float64 cell by cell (to its rounding); "nowhere" is accepted beside it only
    while the whole gradient is tiny or every |x̂| is within 1% of 1 (ε's leftover)."""
    from lnviz.lessons.gradients import reach_answer

    x = gradient_input(2, features, seed=seed).double().requires_grad_(True)
    upstream = upstream_gradient((2, features), kind, cell=(0, 1), seed=seed).double()
    F.batch_norm(x, None, None, training=True, eps=eps).backward(upstream)
    d = x.detach()[0] - x.detach()[1]  # (C,): with two samples σ² = d²/4 and x̂ = ±d/√(d² + 4ε)
    short = 4 * eps / (d**2 + 4 * eps)  # 1 − x̂², exactly, without 1 − (1 − tiny)'s cancellation
    spread = torch.sqrt(d**2 / 4 + eps)
    half = short * (upstream[0] - upstream[1]) / (2 * spread)
    formula = torch.stack([half, -half])
    # autograd rounds in units of |g|/√(σ² + ε); the formula holds to that, and to 1e-6 relative
    torch.testing.assert_close(x.grad, formula, rtol=1e-6,
                               atol=float(1e-14 * (upstream.abs().max() / spread.min())))
    answer = reach_answer(x.grad.numpy(), kind, (0, 1), x=x.detach().numpy(), eps=eps)
    assert answer.option == option
    reached = formula.abs() > 0
    assert bool(reached.all()) is (option == "every cell")
    assert bool(reached.any()) is (option != "nowhere")
    flat = float((d**2 / (d**2 + 4 * eps)).sqrt().min()) > 0.99  # every |x̂| within 1% of 1
    tiny = float(x.grad.abs().max()) < 0.01 or flat
    assert answer.reply("nowhere").startswith("**Right:**") is (tiny or option == "nowhere")
    assert answer.reply("scattered cells").startswith("**Not quite:**")
