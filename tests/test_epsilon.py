"""lnviz.lessons.epsilon and the "ε and numerical stability" page: values against torch, autograd
and the formula tutorial's numbers; the page run headless with AppTest."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from pageutil import alerts, asks_first, decode, figures, open_page, set_live, table_with

from lnviz import charts
from lnviz.lessons.common import short
from lnviz.lessons.epsilon import (
    CANCELLATION_OPTIONS,
    EPSILON_GRID,
    cancellation_answer,
    cancellation_sweep,
    epsilon_steps,
    epsilon_sweep,
    fixed_upstream_gradient,
    formula_module_without_epsilon,
    naive_mean_and_var,
    precision_sweep,
    stability_vector,
    welford_mean_and_var,
)

PAGE = "app_pages/epsilon.py"
FORMULA_MODULE_VECTOR = [0.001, 0.001, 0.0011, 0.0009, 0.001]


def torch_output_and_grad(x: np.ndarray, eps: float, g: torch.Tensor) -> tuple[float, float]:
    """max|y| and ‖∂L/∂x‖ for L = Σ y·g, through torch's own layer_norm (float64)."""
    leaf = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = F.layer_norm(leaf, leaf.shape, eps=eps)
    (y * g).sum().backward()
    return float(y.abs().max()), float(leaf.grad.norm())


# --- the vectors and the ε sweep -----------------------------------------------------------------


def test_vectors_are_the_seed_examples():
    np.testing.assert_allclose(stability_vector("tiny"), FORMULA_MODULE_VECTOR, rtol=1e-6)
    assert stability_vector("constant").tolist() == [3.0, 3.0, 3.0, 3.0]
    assert stability_vector("ordinary").tolist() == [1.0, 2.0, 4.0, 7.0]
    with pytest.raises(ValueError, match="unknown vector"):
        stability_vector("huge")


def test_sweep_on_the_formula_module_bends_at_eps_equal_variance():
    sweep = epsilon_sweep(np.array(FORMULA_MODULE_VECTOR), dtype="float64")
    assert sweep.variance == pytest.approx(4e-9, rel=1e-9)
    # ε ≪ σ²: x − μ = ±1e-4 over σ = 6.32e-5 gives ±√2.5 = ±1.5811
    assert sweep.max_output[0] == pytest.approx(math.sqrt(2.5), rel=1e-3)
    # the formula tutorial's ε = 1e-8: 1e-4/√(4e-9 + 1e-8) = 0.8452
    at_1e8 = epsilon_sweep(np.array(FORMULA_MODULE_VECTOR), [1e-8, 4e-9], dtype="float64")
    assert at_1e8.max_output[0] == pytest.approx(0.8452, abs=1e-4)
    # ε = σ²: 1/√2 of the ε → 0 value
    assert at_1e8.max_output[1] == pytest.approx(math.sqrt(2.5) / math.sqrt(2), rel=1e-9)
    # ε ≫ σ²: both fall like 1/√ε, so a factor 100 in ε is a factor 10
    assert sweep.max_output[-1] == pytest.approx(1e-4 / math.sqrt(1.0 + 4e-9), rel=1e-6)
    np.testing.assert_allclose(sweep.grad_norm[-9] / sweep.grad_norm[-1], 10.0, rtol=1e-6)
    assert np.all(np.diff(sweep.max_output) < 0) and np.all(np.diff(sweep.grad_norm) < 0)


@settings(max_examples=25, deadline=None)
@given(
    values=st.lists(st.floats(-100, 100, allow_nan=False), min_size=2, max_size=12),
    exponent=st.integers(-10, 0),
    seed=st.integers(0, 1000),
)
def test_sweep_matches_torch_autograd(values, exponent, seed):
    x = np.array(values)
    eps = 10.0**exponent
    sweep = epsilon_sweep(x, [eps], seed=seed, dtype="float64")
    max_y, grad = torch_output_and_grad(x, eps, fixed_upstream_gradient(len(x), seed))
    assert sweep.max_output[0] == pytest.approx(max_y, rel=1e-9, abs=1e-12)
    assert sweep.grad_norm[0] == pytest.approx(grad, rel=1e-7, abs=1e-9)


def test_gradient_matches_the_closed_form():
    x, eps = np.array([1.0, 2.0, 4.0, 7.0]), 1e-3
    g = fixed_upstream_gradient(4, seed=3)
    steps = epsilon_steps(x, eps, seed=3, dtype="float64")
    xt = torch.tensor(x)
    rstd = 1 / math.sqrt(float(xt.var(unbiased=False)) + eps)
    x_hat = (xt - xt.mean()) * rstd
    expected = rstd * (g - g.mean() - x_hat * (g * x_hat).mean())
    np.testing.assert_allclose(steps.table["∂L/∂x"], expected.numpy(), rtol=1e-10)
    np.testing.assert_allclose(steps.table["x̂"], x_hat.numpy(), rtol=1e-12)


def test_eps_zero_on_a_constant_vector_is_nan_not_an_error():
    steps = epsilon_steps(stability_vector("constant"), 0.0)
    assert steps.variance == 0.0 and steps.mean == 3.0
    assert steps.nonfinite_outputs == 4 and steps.nonfinite_grads == 4
    assert steps.table["x − μ"].eq(0).all()
    assert np.isinf(steps.table["1/√(σ²+ε)"]).all()
    assert steps.table["x̂"].isna().all() and steps.table["∂L/∂x"].isna().all()
    assert math.isnan(steps.max_output)
    text = steps.text_table()
    assert text["x̂"].tolist() == ["NaN"] * 4 and text["1/√(σ²+ε)"].tolist() == ["inf"] * 4
    assert text["x"].tolist() == ["3"] * 4
    with pytest.raises(ValueError, match="ε must be"):
        epsilon_steps(stability_vector("constant"), -1e-5)


def test_constant_vector_with_eps_has_zero_output_and_centred_gradient():
    eps = 1e-4
    steps = epsilon_steps(stability_vector("constant"), eps, seed=5, dtype="float64")
    assert steps.nonfinite_outputs == 0 and steps.max_output == 0.0
    g = fixed_upstream_gradient(4, seed=5)
    np.testing.assert_allclose(steps.table["∂L/∂x"], ((g - g.mean()) / math.sqrt(eps)).numpy(),
                               rtol=1e-10)
    sweep = epsilon_sweep(stability_vector("constant"), dtype="float64")
    assert sweep.variance == 0.0 and not sweep.max_output.any()


def test_float16_gradients_overflow_honestly():
    sweep = epsilon_sweep(stability_vector("constant"), [1e-12, 1e-2], dtype="float16")
    assert math.isinf(sweep.grad_norm[0]) and math.isfinite(sweep.grad_norm[1])
    assert sweep.nonfinite == 1
    assert epsilon_sweep(stability_vector("constant"), [1e-12]).nonfinite == 0  # float32


def test_sweep_rejects_a_matrix():
    with pytest.raises(ValueError, match="one vector"):
        epsilon_sweep(np.ones((2, 3)))


# --- precision -----------------------------------------------------------------------------------


def test_precision_errors_follow_the_dtypes_digits():
    sweep = precision_sweep("offset", [0.0, 1e3, 1e5], size=64, seed=0,
                            dtypes=("float16", "bfloat16", "float32", "float64"))
    e = sweep.errors
    assert e["float64"].tolist() == [0.0, 0.0, 0.0]  # the reference itself
    assert e["float32"][0] < 1e-6 and e["float16"][0] < 5e-3 and e["bfloat16"][0] < 5e-2
    assert e["float32"][0] < e["float16"][0] < e["bfloat16"][0]
    assert e["float16"][1] > 0.1  # at 1000 float16's step is 0.5: σ = 1 is mostly lost
    assert math.isnan(e["float16"][2])  # 1e5 > 65504 overflows float16
    assert e["float32"][2] < 0.1


def test_precision_matches_a_direct_torch_computation():
    sweep = precision_sweep("offset", [100.0], size=32, seed=4, dtypes=("bfloat16",))
    x64 = torch.randn(32, generator=torch.Generator().manual_seed(4), dtype=torch.float64) + 100
    torch_y = F.layer_norm(x64.to(torch.bfloat16).float(), (32,)).to(torch.bfloat16)
    expected = float((torch_y.double() - F.layer_norm(x64, (32,))).abs().max())
    assert sweep.errors["bfloat16"][0] == pytest.approx(expected, rel=0.05)


def test_precision_along_size_and_bad_axes():
    sweep = precision_sweep("size", [4, 1024], offset=0.0, dtypes=("float32",))
    assert sweep.values.tolist() == [4, 1024] and (sweep.errors["float32"] < 1e-6).all()
    with pytest.raises(ValueError, match="axis"):
        precision_sweep("time")
    with pytest.raises(ValueError, match="at least 2"):
        precision_sweep("size", [1])


# --- three variances -----------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 4), cols=st.integers(2, 40), offset=st.floats(-1e3, 1e3),
    scale=st.floats(1e-2, 1e2), seed=st.integers(0, 2**16),
)
def test_welford_and_naive_match_float64_near_zero(rows, cols, offset, scale, seed):
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64) * scale + offset
    expected_mean, expected_var = x.mean(-1), x.var(-1, unbiased=False)
    mean, var = welford_mean_and_var(x)
    torch.testing.assert_close(mean, expected_mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(var, expected_var, rtol=1e-9, atol=1e-12)
    mean, var = welford_mean_and_var(x, dim=0)  # along the other dim too
    torch.testing.assert_close(var, x.var(0, unbiased=False), rtol=1e-9, atol=1e-12)
    # in float64 with |offset|/σ ≤ 1e5 the naive one still keeps ~5 digits
    _, naive = naive_mean_and_var(x)
    torch.testing.assert_close(naive, expected_var, rtol=1e-4, atol=1e-6 * offset**2)


def test_naive_variance_cancels_in_float32_far_from_zero():
    base = torch.randn(256, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x = (base + 1e4).float()
    truth = float(x.double().var(unbiased=False))
    naive = float(naive_mean_and_var(x)[1])
    welford = float(welford_mean_and_var(x)[1])
    assert abs(naive - truth) / truth > 0.5  # most of σ² is rounding error
    assert welford == pytest.approx(truth, rel=1e-3)
    assert float(x.var(unbiased=False)) == pytest.approx(truth, rel=1e-4)


def test_cancellation_sweep_naive_fails_the_others_hold():
    sweep = cancellation_sweep(size=256, seed=0)
    assert sweep.offsets[0] == 1.0 and sweep.offsets[-1] == pytest.approx(1e6)
    np.testing.assert_allclose(sweep.true_variance[:12], sweep.true_variance[0], rtol=1e-2)
    err = sweep.relative_error
    naive = err["naive E[x²] − E[x]²"]
    assert naive[0] < 1e-5 and naive.max() > 1.0
    assert (sweep.variances["naive E[x²] − E[x]²"] < 0).any()  # an impossible variance
    assert err["two-pass"].max() < 1e-2 and err["Welford"].max() < 1e-2
    with pytest.raises(ValueError, match="at least 2"):
        cancellation_sweep(size=1)


@settings(max_examples=12, deadline=None)
@given(size=st.sampled_from([16, 64, 256, 1024]), seed=st.integers(0, 10_000))
def test_the_cancellation_question_is_answered_from_the_sweeps_own_numbers(size: int,
                                                                           seed: int) -> None:
    """Part 3's answer is the band the naive variance at 10,000 falls in, recomputed here from
    the sweep's variances; the reason prints that variance and float32's spacing at 10⁸
    (2²⁶ ≤ 10⁸ < 2²⁷: a step of 2²⁶⁻²³ = 8, by hand)."""
    sweep = cancellation_sweep(size=size, seed=seed)
    k = int(np.flatnonzero(np.isclose(sweep.offsets, 1e4))[0])
    naive = float(sweep.variances["naive E[x²] − E[x]²"][k])
    truth = float(sweep.true_variance[k])
    off = abs(naive - truth) / truth
    band = 0 if naive >= 0 and off < 0.01 else 1
    answer = cancellation_answer(sweep)
    assert answer.option == CANCELLATION_OPTIONS[band]
    assert "the nearest multiple of 8, " in answer.reason
    # float32's precision is the reply's to give (the question is how much of σ² it keeps)
    assert "float32 keeps about 7 significant digits" in answer.reason
    assert f"The naive formula gives {short(naive)}, {off:.0%} off" in answer.reason
    assert ("negative" in answer.reason.split("naive formula")[1]) == (naive < 0)
    # the reason's two rounding errors are what makes the naive variance: float32's subtraction
    # of two numbers within a factor of 2 is exact (Sterbenz), so naive = σ² + e(E[x²]) − e(E[x]²)
    squares, mean_squared = (float(sweep.term_errors[t][k]) for t in ("E[x²]", "E[x]²"))
    assert abs(naive - (truth + squares - mean_squared)) < 1e-4 * max(1.0, abs(naive))
    assert (f"E[x²] came out {abs(squares):.3g} {'above' if squares > 0 else 'below'} its "
            "exact value") in answer.reason


# --- figures -------------------------------------------------------------------------------------


def test_sweep_figure_marks_variance_and_chosen_eps():
    sweep = epsilon_sweep(np.array(FORMULA_MODULE_VECTOR), dtype="float64")
    fig = charts.epsilon.sweep_figure(sweep.eps, sweep.max_output, sweep.grad_norm, sweep.variance,
                                  1e-5)
    assert fig.data[0].y == tuple(sweep.max_output)
    lines = {t.name: t.x for t in fig.data[2:]}
    assert lines["ε = σ² = 4e-09"] == pytest.approx((4e-9, 4e-9), rel=1e-9)
    assert lines["chosen ε = 1e-05"] == (1e-5, 1e-5)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis2.type == "log"
    constant = epsilon_sweep(stability_vector("constant"))
    fig = charts.epsilon.sweep_figure(constant.eps, constant.max_output, constant.grad_norm,
                                  constant.variance, 0.0)
    assert len(fig.data) == 4 and all(v is None for v in fig.data[0].y)
    assert [t.name for t in fig.data[2:]] == ["chosen ε = 0"] * 2  # there, for the live figure
    assert [t.visible for t in fig.data[2:]] == [False, False]  # but not on a log axis
    assert fig.layout.annotations[-1].text == "0 at every ε > 0"


def test_cancellation_figure_marks_negative_variances():
    sweep = cancellation_sweep(size=256, seed=0)
    fig = charts.epsilon.cancellation_figure(sweep.offsets, sweep.relative_error, sweep.variances)
    negatives = sum(int((v < 0).sum()) for v in sweep.variances.values())
    assert len(fig.data[3].x) == negatives > 0
    assert fig.data[4].y == (1.0, 1.0)


# --- the page ------------------------------------------------------------------------------------


def y_values(at, figure: int, trace: int, field: str = "y") -> np.ndarray:
    """A trace's data as floats, gaps (None) as NaN."""
    value = figures(at)[figure]["data"][trace][field]
    return np.array(decode(value) if isinstance(value, dict) else value, dtype=float)


def test_page_opens_on_the_formula_module_with_pytorch_default_eps():
    at = open_page(PAGE)
    assert len(figures(at)) == 3 and not alerts(at)["error"]
    assert at.title[0].value == "ε and numerical stability"
    assert at.latex and at.code and "Try this" in alerts(at)["info"][0]
    table = table_with(at, "x̂").value
    # the formula tutorial with ε = 1e-5 ≫ σ²: x̂ = ±1e-4/√(1e-5) ≈ ±0.0316
    assert table["x̂"].astype(float).abs().max() == pytest.approx(0.03162, abs=1e-4)
    np.testing.assert_allclose(y_values(at, 0, 0)[0], math.sqrt(2.5), rtol=1e-3)
    np.testing.assert_allclose(y_values(at, 0, 0, "x"), EPSILON_GRID)


def test_eps_and_vector_controls_move_the_figures_and_eps_zero_warns():
    at = open_page(PAGE)
    chosen = y_values(at, 0, 3, "x")  # traces: curves 0, 1; then (ε = σ², chosen ε) per panel
    set_live(at, ep_eps=1e-8)
    assert y_values(at, 0, 3, "x").tolist() == [1e-8, 1e-8] != chosen.tolist()
    assert table_with(at, "x̂").value["x̂"].astype(float).abs().max() == pytest.approx(0.8452,
                                                                                  abs=1e-3)
    curve = y_values(at, 0, 1)
    at.segmented_control(key="ep_vec").set_value("ordinary").run()
    assert not np.allclose(curve, y_values(at, 0, 1))
    at.segmented_control(key="ep_vec").set_value("constant").run()
    set_live(at, ep_eps=0.0)
    assert not at.exception and not alerts(at)["error"]
    assert any("0/0" in w for w in alerts(at)["warning"])
    assert (table_with(at, "x̂").value["x̂"] == "NaN").all()
    assert (table_with(at, "x̂").value["1/√(σ²+ε)"] == "inf").all()


def test_part_3_asks_before_it_shows_the_three_methods() -> None:
    """A shared link opens part 3's question with its figure held back; every option gets its
    reply, "Right" only for the band the page's own sweep falls in."""
    right = cancellation_answer(cancellation_sweep(size=256, seed=0)).option
    at = asks_first(PAGE, "ep_cancel_guess", right,
                    hidden=("cancels", "trap", "first fails", "far off", "negative",
                            "significant digits"))
    assert "first fails move?" in " ".join(i.value for i in at.info)


def test_precision_and_cancellation_controls_move_their_figures():
    at = open_page(PAGE)
    float16 = y_values(at, 1, 0)
    at.select_slider(key="ep_psize").set_value(16).run()
    assert not np.array_equal(float16, y_values(at, 1, 0), equal_nan=True)
    at.radio(key="ep_axis").set_value("size").run()
    sizes = y_values(at, 1, 0, "x")
    assert sizes[0] == 4 and sizes[-1] == 2**16
    errors = y_values(at, 1, 2)
    at.select_slider(key="ep_poff").set_value(1000.0).run()
    assert np.nanmin(y_values(at, 1, 2)) > np.nanmax(errors)  # offset costs float32 digits
    naive = y_values(at, 2, 0)
    at.select_slider(key="ep_csize").set_value(16).run()
    assert not np.array_equal(naive, y_values(at, 2, 0), equal_nan=True)


def test_sidebar_precision_changes_the_sweep():
    at = open_page(PAGE)
    grad32 = y_values(at, 0, 1)
    at.selectbox(key="precision").set_value("float16").run()
    assert not at.exception and not alerts(at)["error"]
    assert not np.allclose(grad32, y_values(at, 0, 1), equal_nan=True)
    at.segmented_control(key="ep_vec").set_value("constant").run()
    assert any("overflowed float16" in w for w in alerts(at)["warning"])
    assert np.isnan(y_values(at, 0, 1)[0])  # the overflowed point is a gap


def test_url_parameters_restore_the_settings():
    at = open_page(PAGE, {"ep_vec": "constant", "ep_eps": "0", "ep_axis": "size",
                          "ep_poff": "100.0", "ep_csize": "64"})
    assert at.segmented_control(key="ep_vec").value == "constant"
    assert at.session_state["ep_eps"] == 0.0
    assert at.radio(key="ep_axis").value == "size"
    assert at.select_slider(key="ep_poff").value == 100.0
    assert at.select_slider(key="ep_csize").value == 64
    assert any("0/0" in w for w in alerts(at)["warning"])


def test_float16_gradient_overflow_is_not_called_zero_over_zero():
    # float16, ε = 1e-12, constant vector: no output is NaN, the gradient
    # overflows float16 — the page said "√0 … 0/0 … NaN".
    at = open_page(PAGE, {"ep_vec": "constant", "ep_eps": "1e-12", "precision": "float16"})
    warnings = [w for w in alerts(at)["warning"] if "gradient entries" in w]
    assert len(warnings) == 1
    assert "0 outputs" in warnings[0] and "outgrow float16" in warnings[0]
    assert "0/0" not in warnings[0] and "1e+06" in warnings[0]
    at = open_page(PAGE, {"ep_vec": "constant", "ep_eps": "0"})
    assert any("0/0, which has no value" in w for w in alerts(at)["warning"])


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("vector", ["tiny", "constant", "ordinary"])
def test_snippet_follows_the_chosen_vector_and_precision(vector, dtype):
    # The snippet always built the tiny vector in float32.
    from lnviz.lessons.epsilon import epsilon_snippet

    code = epsilon_snippet(vector, 1e-5, dtype)
    scope: dict = {}
    exec(compile(code, "snippet", "exec"), scope)  # our own generated code
    x = scope["x"]
    assert x.dtype == getattr(torch, dtype)
    rounded = torch.tensor(stability_vector(vector)).to(getattr(torch, dtype)).double()
    np.testing.assert_array_equal(x.detach().double().numpy(), rounded.numpy())
    expected = epsilon_steps(stability_vector(vector), 1e-5, dtype=dtype).table["x̂"].to_numpy()
    np.testing.assert_allclose(scope["y"].detach().double().numpy(), expected,
                               atol={"bfloat16": 2e-2}.get(dtype, 1e-5))
    at = open_page(PAGE, {"ep_vec": vector, "precision": dtype})
    assert any(f"dtype = torch.{dtype}\n" in c.value for c in at.code)


# --- Every number the page prints follows the precision ------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("vector", ["tiny", "constant", "ordinary"])
@pytest.mark.parametrize("eps", [0.0, 1e-12, 1e-5, 1.0])
def test_x_minus_mu_is_the_centring_the_norm_used(vector, dtype, eps):
    """(x − μ)·1/√(σ² + ε) in the table is the x̂ beside it, to the last bit: the column shows
    the norm's own centred values."""
    steps = epsilon_steps(stability_vector(vector), eps, dtype=dtype)
    t = steps.table
    acc = np.float64 if dtype == "float64" else np.float32
    with np.errstate(invalid="ignore"):  # 0·inf at ε = 0 on the constant vector: NaN, as x̂
        by_hand = (t["x − μ"].to_numpy(acc) * t["1/√(σ²+ε)"].to_numpy(acc)).astype(acc)
    np.testing.assert_array_equal(by_hand, t["x̂"].to_numpy(acc))


def test_tiny_vector_shows_the_residue_it_divides_and_explains_it():
    """At ε = 1e-5 "x − μ" showed 0 on the 0.001 rows while x̂ there was 7.361e-09.
    The residue is real: the stored values' mean is 0.0010000000242, 2.328e-11 from the stored
    0.001."""
    steps = epsilon_steps(stability_vector("tiny"), 1e-5)
    shown = steps.text_table()
    assert shown["x − μ"].tolist()[:2] == ["2.328e-11", "2.328e-11"]
    assert shown["x̂"].tolist()[0] == "7.361e-09"
    stored = np.float32(FORMULA_MODULE_VECTOR).astype(np.float64)
    assert float(steps.table["x − μ"].iloc[0]) == pytest.approx(stored[0] - stored.mean(),
                                                                rel=1e-6)
    note = steps.residue()
    assert note.startswith("Why x − μ is 2.328e-11 and not 0 at elements 0, 1 and 4 of the "
                           "vector")
    assert "their mean is 0.0010000000242" in note and "(which would give 0 here)" in note
    assert "x̂ = 7.361e-09" in note
    assert "float32 numbers" not in note  # computed in float32: nothing to add
    # in float64 the residue is the stored float32 numbers', and the note says so (numpy's
    # float64 of the typed decimals, as the formula tutorial prints, centres them to 0)
    wide = epsilon_steps(stability_vector("tiny"), 1e-5, dtype="float64").residue()
    assert "float32 numbers, as the example is stored" in wide
    typed = np.array(FORMULA_MODULE_VECTOR, dtype=np.float64)
    assert (typed - typed.mean())[0] != float(steps.table["x − μ"].iloc[0])
    assert epsilon_steps(stability_vector("ordinary"), 1e-5).residue() is None
    assert epsilon_steps(stability_vector("constant"), 1e-5).residue() is None
    at = open_page(PAGE)
    table = table_with(at, "x − μ").value
    assert table["x − μ"].tolist()[0] == "2.328e-11"
    assert any(c.value.startswith("Why x − μ is 2.328") for c in at.caption)


def test_the_residue_note_claims_a_contrast_only_where_there_is_one():
    """In float16 rounding μ once more gives the same x − μ as lnviz's centring: the note says
    so instead of contrasting two routes that agree (where there is any residue to explain)."""
    seen = set()
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        steps = epsilon_steps(stability_vector("tiny"), 1e-5, dtype=dtype)
        note = steps.residue()
        if note is None:
            continue
        i = int(np.flatnonzero(steps.table["x − μ"].to_numpy() != 0)[0])
        naive = steps.table["x"].to_numpy()[i] - steps.mean
        same = f"{naive:.4g}" == f"{steps.table['x − μ'].to_numpy()[i]:.4g}"  # as printed
        assert ("happens to give the same number" in note) == same, dtype
        assert ("which would give" in note) == (not same), dtype
        seen.add(same)
    assert seen == {True, False}  # float32 contrasts the two routes; float16 and float64 do not


def test_the_formula_modules_except_branch_never_runs():
    """The formula tutorial wraps (x − mean)/np.sqrt(var) in try/except to print "Error without
    epsilon"; numpy never raises there: σ² = 4e-9 is not 0, and 0/0 is a warning and NaN."""
    tiny = formula_module_without_epsilon(stability_vector("tiny"))
    assert tiny.raised is None and not tiny.warnings and tiny.strict is None
    assert tiny.printed.startswith("Normalized (no epsilon): [ 0.          0.          1.58")
    assert "σ² = 4e-09 is not 0" in tiny.explain()
    constant = formula_module_without_epsilon(stability_vector("constant"))
    assert constant.raised is None
    assert constant.printed == "Normalized (no epsilon): [nan nan nan nan]"
    assert constant.warnings == ("invalid value encountered in divide",)
    assert constant.strict == "FloatingPointError: invalid value encountered in divide"
    assert "a warning is not an exception" in constant.explain()
    at = open_page(PAGE, {"ep_vec": "constant"})
    assert "Normalized (no epsilon): [nan nan nan nan]" in [c.value for c in at.code]
    assert any("`except Exception` has nothing to catch" in c.value for c in at.caption)


def test_captions_hold_for_the_vector_and_the_axis():
    """The sweep caption spoke of a bend at ε = σ² for the constant vector, which has none;
    the precision caption called the row-length curves flat (float16 rises ninefold); the
    try-this asked for the offset where the naive variance goes negative, which some seeds and
    row lengths never reach."""
    constant = epsilon_sweep(stability_vector("constant"))
    assert "no bend and no green line" in constant.caption()
    assert "Left of the green line" in epsilon_sweep(stability_vector("tiny")).caption()
    sizes = precision_sweep("size", offset=0.0)
    caption = sizes.caption()
    assert "stay nearly flat" not in caption and "rises only slowly" in caption
    assert f"float16 from {sizes.errors['float16'][0]:.2g} to " in caption
    # far from 0 the rows' errors can fall with their length: the caption says what they do
    for offset in (100.0, 1000.0):
        sweep = precision_sweep("size", offset=offset, seed=1)
        finite = [e for e in sweep.errors.values() if np.isfinite(e).all()]
        text = sweep.caption()
        assert ("rises only slowly" in text) is all(e[-1] >= e[0] for e in finite)
        assert ("does not rise" in text) is all(e[-1] <= e[0] for e in finite)
    assert "Gaps in the float16 curve" in precision_sweep("offset").caption()
    never = cancellation_sweep(size=64, seed=1)
    assert (never.variances["naive E[x²] − E[x]²"] >= 0).all()
    assert never.summary().endswith("it never comes out negative.")
    assert "first at 3,162" in cancellation_sweep(size=256, seed=0).summary()
    at = open_page(PAGE, {"ep_vec": "constant", "ep_axis": "size", "ep_csize": "64", "seed": "1"})
    captions = " ".join(c.value for c in at.caption)
    assert "no bend and no green line" in captions and "stay nearly flat" not in captions
    assert "never comes out negative" in captions
    assert "first goes negative" not in alerts(at)["info"][0]


def test_a_link_with_minus_zero_is_epsilon_zero():
    """ε = −0 from a link is 0 everywhere: the sentence and the PyTorch code say 0."""
    at = open_page(PAGE, {"ep_eps": "-0", "ep_vec": "ordinary"})
    eps = at.session_state["ep_eps"]
    assert eps == 0.0 and math.copysign(1.0, eps) == 1.0
    code = next(c.value for c in at.code if "F.layer_norm" in c.value)
    assert "eps=-0.0" not in code and "eps=0.0" in code
    assert not any("ε = -0" in m.value for m in at.markdown)
    assert at.query_params["ep_eps"] == "0"


@pytest.mark.parametrize("eps", ["1e-5", "0.01", "0"])
def test_the_constant_vector_names_the_seeds_meaningful_outputs_claim(eps: str) -> None:
    """The formula tutorial says ε gives a constant input "meaningful outputs and gradients":
    the page says what ε gives instead, the gradient's factor against torch's autograd (the
    upstream gradient's deviation from its mean, times 1/√ε)."""
    at = open_page(PAGE, {"ep_vec": "constant", "ep_eps": eps})
    text = next(m.value for m in at.markdown if "“meaningful outputs and gradients”" in m.value)
    if float(eps) == 0:
        assert "at ε = 0, 0/0 makes both NaN" in text
        return
    x = torch.tensor(stability_vector("constant"), dtype=torch.float64, requires_grad=True)
    g = torch.randn(x.numel(), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    (F.layer_norm(x, x.shape, eps=float(eps)) * g).sum().backward()
    factor = (x.grad / (g - g.mean())).numpy()
    np.testing.assert_allclose(factor, factor[0], rtol=1e-9)
    assert f"{factor[0]:.3g}× it at ε = {float(eps):g}" in text


def test_the_formula_tutorials_own_epsilon_is_named_larger_than_its_example():
    """The tutorial's fix, ε = 1e-8, is 2.5 times its example's σ² = 4e-9: the largest |x̂|
    falls from 1.58 to 0.845 (float64), which the page says under the tutorial's cell."""
    tiny = stability_vector("tiny")
    var = float(np.var(tiny.astype(np.float64)))
    assert 1e-8 / var == pytest.approx(2.5, rel=1e-3)
    at = open_page(PAGE)
    shown = " ".join(m.value for m in at.markdown)
    full = epsilon_steps(tiny, 0.0, dtype="float64").max_output
    fixed = epsilon_steps(tiny, 1e-8, dtype="float64").max_output
    assert (f"Its fix, ε = 1e-8, is 2.5 times its own example's σ² = {short(var)}: the largest "
            f"|x̂| falls from {short(full)} to {short(fixed)}") in shown
