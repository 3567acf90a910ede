"""BatchNorm vs LayerNorm: lnviz.lessons.bn_vs_ln against torch and worked numbers, its figures,
and the page run headless with AppTest."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from pageutil import alerts, asks_first, decode, figures, open_page, set_live

from lnviz import charts
from lnviz.batch import NormSpec, normalize
from lnviz.data import random_batch
from lnviz.lessons.bn_vs_ln import (
    MATES_OPTIONS,
    POPULATION_MEAN,
    POPULATION_VAR,
    SWEEP_SIZES,
    _to_cube,
    band_caption,
    batch_dependence,
    batch_mates,
    batch_noise_text,
    batch_size_sweep,
    bn_vs_ln_snippet,
    fixed_sample,
    modes_caption,
    running_statistics,
    sharing_cubes,
    variance_table,
)
from lnviz.lessons.common import short
from lnviz.limits import BN_VS_LN_MAX_BATCH
from lnviz.norms import batch_norm

PAGE = "app_pages/bn_vs_ln.py"


# --- Which cells share a μ and σ --------------------------------------------------------------


def test_cube_counts_for_an_image_batch():
    cubes = {c.norm: c for c in sharing_cubes((4, 6, 3, 3), "NCHW", groups=2)}
    # (values per μ/σ, number of μ/σ) for N=4, C=6, H·W=9, G=2
    expected = {"BatchNorm": (36, 6), "LayerNorm": (54, 4), "InstanceNorm": (9, 24),
                "GroupNorm": (27, 8)}
    for norm, (m, count) in expected.items():
        assert (cubes[norm].values_per_statistic, cubes[norm].statistics) == (m, count)
        assert cubes[norm].cells.shape == (4, 6, 9)
        assert int(cubes[norm].cells.sum()) == m
    assert cubes["BatchNorm"].cells[:, 0, :].all()  # all of N and H·W, channel 0 only
    assert not cubes["BatchNorm"].cells[:, 1:, :].any()
    assert cubes["GroupNorm"].cells[0, :3, :].all() and not cubes["GroupNorm"].cells[0, 3:].any()
    assert "(N, H·W)" in cubes["BatchNorm"].note


def test_tokens_are_normalized_per_token_and_a_table_has_no_instance_norm():
    ln = {c.norm: c for c in sharing_cubes((2, 5, 3), "NLC")}["LayerNorm"]
    assert ln.values_per_statistic == 3 and ln.statistics == 10  # one token, its 3 features
    assert ln.cells[0, :, 0].all() and ln.cells.sum() == 3
    table = {c.norm: c for c in sharing_cubes((4, 6), "NC", groups=3)}
    assert table["InstanceNorm"].cells is None and "not defined" in table["InstanceNorm"].note
    assert table["BatchNorm"].cells.shape == (4, 6, 1)


@pytest.mark.parametrize(("shape", "layout", "groups", "message"), [
    ((4, 6), "NC", 4, "divides the 6 channels"),
    ((4, 6, 2), "NC", 1, "layouts NC, NLC, NCHW"),
    ((0, 6), "NC", 1, "at least one element"),
])
def test_cube_refusals(shape, layout, groups, message):
    with pytest.raises(ValueError, match=message):
        sharing_cubes(shape, layout, groups)


@settings(max_examples=25, deadline=None)
@given(layout=st.sampled_from(["NC", "NLC", "NCHW"]), n=st.integers(2, 4),
       c=st.sampled_from([2, 4, 6]), s=st.integers(2, 4), seed=st.integers(0, 100))
def test_shaded_cells_are_exactly_the_values_each_norm_pools(layout, n, c, s, seed):
    shape = {"NC": (n, c), "NLC": (n, s, c), "NCHW": (n, c, s, 2)}[layout]
    x = torch.from_numpy(random_batch(shape, seed=seed)).double()
    for cube in sharing_cubes(shape, layout, groups=2):
        if cube.cells is None:
            continue
        dims = 3 if (cube.norm == "LayerNorm" and layout == "NCHW") else 1
        result = normalize(x, layout, NormSpec(norm=cube.norm, dims=dims, groups=2))
        mean = _to_cube(result.mean.expand(shape).numpy(), layout)
        var = _to_cube(result.var.expand(shape).numpy(), layout)
        pooled = _to_cube(x.numpy(), layout)[cube.cells]
        # The μ and σ² that normalize the first cell are those of the shaded values.
        assert pooled.mean() == pytest.approx(mean[0, 0, 0], rel=1e-9, abs=1e-12)
        assert pooled.var() == pytest.approx(var[0, 0, 0], rel=1e-9, abs=1e-12)
        assert cube.values_per_statistic == pooled.size


# --- One sample, many batches -----------------------------------------------------------------


def test_layer_norm_ignores_the_batch_and_batch_norm_does_not():
    sample = fixed_sample(5, seed=3)
    dep = batch_dependence(sample, 6, redraws=5, seed=3)
    expected = F.layer_norm(torch.from_numpy(sample)[None], (5,))[0].numpy()
    for row in dep.layer_norm:
        np.testing.assert_array_equal(row, dep.layer_norm[0])
        np.testing.assert_allclose(row, expected, atol=1e-6)
    assert dep.layer_norm_spread == 0.0
    assert dep.batch_norm_spread > 0.1
    mates = batch_mates(5, 5, 3)[:, :5]
    for r in range(5):
        batch = torch.from_numpy(np.concatenate([sample[None], mates[r]]))
        np.testing.assert_allclose(dep.batch_norm[r], F.batch_norm(batch, None, None,
                                                                   training=True)[0], atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(features=st.integers(1, 8), batch_size=st.integers(1, BN_VS_LN_MAX_BATCH),
       redraws=st.integers(1, 5), seed=st.integers(0, 10**6))
def test_a_batch_is_the_sample_and_the_first_mates_of_one_draw(features, batch_size, redraws,
                                                               seed):
    """Nested batches: a batch of B holds the fixed sample and the first B − 1 of the 63 mates
    drawn once per re-draw, so the browser can build any size from one array; its outputs are
    torch's training-mode batch_norm (biased σ², ε = 1e-5) and layer_norm of that batch, in
    float64: two near-equal values leave float32's σ² to cancellation, where torch's float32
    batch_norm was 1.7e-5 off the exact 0.4844005 and lnviz's 1e-8 (seed 3045, B = 2)."""
    sample = fixed_sample(features, seed)
    mates = batch_mates(features, redraws, seed)
    assert mates.shape == (redraws, BN_VS_LN_MAX_BATCH - 1, features) and mates.dtype == np.float32
    dep = batch_dependence(sample, batch_size, redraws, seed)
    for r in range(redraws):
        batch = torch.from_numpy(np.concatenate([sample[None], mates[r, : batch_size - 1]]))
        exact = batch.double()
        np.testing.assert_allclose(dep.layer_norm[r], F.layer_norm(exact, (features,))[0],
                                   atol=1e-5)
        if batch_size == 1:
            assert dep.batch_norm is None
            with pytest.raises(ValueError, match="more than 1 value per channel"):
                F.batch_norm(batch, None, None, training=True)
        else:
            np.testing.assert_allclose(dep.batch_norm[r], F.batch_norm(
                exact, None, None, training=True, eps=1e-5)[0], rtol=1e-5, atol=1e-5)


def test_a_bigger_batch_keeps_the_smaller_ones_mates():
    small, large = batch_mates(4, 3, 7), batch_mates(4, 3, 7)
    np.testing.assert_array_equal(small, large)  # one draw, whatever the size asked for
    assert not np.array_equal(batch_mates(4, 3, 8), small)  # another seed, other mates
    # the mates are drawn apart from the fixed sample: it is not one of its own batch-mates
    assert not np.isin(fixed_sample(4, 7), small).any()
    with pytest.raises(ValueError, match=f"between 1 and {BN_VS_LN_MAX_BATCH}"):
        batch_dependence(fixed_sample(4), BN_VS_LN_MAX_BATCH + 1)


def test_batch_of_two_normalizes_to_plus_or_minus_one():
    # With two samples μ_c is their midpoint and σ_c half their distance: y = ±1 (ε aside).
    dep = batch_dependence(fixed_sample(4), 2, redraws=6, eps=0.0)
    np.testing.assert_allclose(np.abs(dep.batch_norm), 1.0, atol=1e-5)


def test_batch_of_one_is_refused_by_batch_norm_like_torch():
    dep = batch_dependence(fixed_sample(3), 1, redraws=4)
    assert dep.batch_norm is None and math.isnan(dep.batch_norm_spread)
    assert "more than one value per channel" in dep.refusal
    assert "Expected more than 1 value per channel when training" in dep.torch_refusal
    assert dep.layer_norm.shape == (4, 3) and dep.layer_norm_spread == 0.0
    with pytest.raises(ValueError, match="between 1 and"):
        batch_dependence(fixed_sample(3), 0)


@settings(max_examples=20, deadline=None)
@given(features=st.integers(2, 8), batch_size=st.integers(2, 12), seed=st.integers(0, 10**6))
def test_layer_norm_output_is_the_same_whatever_the_batch(features, batch_size, seed):
    sample = fixed_sample(features, seed)
    dep = batch_dependence(sample, batch_size, redraws=3, seed=seed)
    np.testing.assert_array_equal(dep.layer_norm, np.broadcast_to(dep.layer_norm[0],
                                                                  dep.layer_norm.shape))
    np.testing.assert_allclose(dep.layer_norm[0], F.layer_norm(
        torch.from_numpy(sample)[None], (features,))[0].numpy(), atol=1e-5)


def test_sweep_repeats_the_experiment_and_narrows_with_batch_size():
    sample = fixed_sample(4, seed=1)
    sweep = batch_size_sweep(sample, redraws=6, seed=1)
    assert sweep.batch_sizes.tolist() == list(SWEEP_SIZES)
    assert np.isnan(sweep.batch_norm[0]).all()  # batch size 1: refused
    for k, size in enumerate(SWEEP_SIZES):  # the sweep's batch of B is batch_dependence's
        dep = batch_dependence(sample, size, 6, seed=1)
        np.testing.assert_array_equal(sweep.layer_norm[k], dep.layer_norm)
        if size > 1:
            np.testing.assert_array_equal(sweep.batch_norm[k], dep.batch_norm)
    spread = sweep.batch_norm.max(axis=1) - sweep.batch_norm.min(axis=1)  # (sizes, C)
    assert spread[-1].mean() < spread[1].mean() / 3  # 64 samples against 2
    assert (sweep.layer_norm.max(axis=1) == sweep.layer_norm.min(axis=1)).all()


def test_the_mates_question_reads_torchs_outputs():
    """The answer from the fixed sample's outputs as torch's own F.batch_norm and F.layer_norm
    give them in batches of 1, 2 and 8 with re-drawn mates: BatchNorm's only moves (at 2 by
    exactly 2, ±1 either way), and the reply prints its widths; with the mates made copies of
    the sample, neither does."""
    from lnviz.lessons.bn_vs_ln import BatchSizeSweep, mates_answer

    generator = torch.Generator().manual_seed(0)
    sample = torch.tensor([0.5, -1.0, 2.0, 0.0])

    def outputs(mates: list[torch.Tensor]) -> BatchSizeSweep:
        sizes = [1, 2, 8]
        bn, ln = np.full((3, len(mates), 4), np.nan), np.zeros((3, len(mates), 4))
        for k, size in enumerate(sizes):
            for r, m in enumerate(mates):
                batch = torch.cat([sample[None], m[: size - 1]])
                if size > 1:
                    bn[k, r] = F.batch_norm(batch, None, None, training=True)[0].numpy()
                ln[k, r] = F.layer_norm(batch, (4,))[0].numpy()
        return BatchSizeSweep(np.array(sizes), bn, ln)

    drawn = outputs([torch.randn(7, 4, generator=generator) for _ in range(5)])
    answer = mates_answer(drawn)
    assert answer.option == MATES_OPTIONS[0] == "BatchNorm's only"
    width = drawn.batch_norm.max(axis=1) - drawn.batch_norm.min(axis=1)  # (sizes, C)
    assert np.nanmax(width[1]) == pytest.approx(2.0, abs=1e-3)  # ±1 at a batch of two (up to ε)
    assert f"and still by {np.nanmax(width[2]):.3g} at 8:" in answer.reason
    assert f"changed by up to {np.nanmax(width):.3g} (at batch size " in answer.reason
    assert "Its LayerNorm output did not change at all:" in answer.reason
    alike = mates_answer(outputs([sample.repeat(7, 1) + 0 * r for r in range(3)]))
    assert alike.option == "neither"


def test_sweep_spread_and_the_band_caption_follow_the_numbers():
    sweep = batch_size_sweep(fixed_sample(6, seed=0), redraws=8, seed=0)
    direct = sweep.batch_norm.max(axis=1) - sweep.batch_norm.min(axis=1)  # (sizes, C)
    assert np.isnan(sweep.spread()[0])  # batch size 1: refused
    np.testing.assert_allclose(sweep.spread()[1:], direct[1:].max(axis=1))
    np.testing.assert_allclose(sweep.spread(feature=2)[1:], direct[1:, 2])
    assert (sweep.spread("LayerNorm") == 0).all()
    caption = band_caption(sweep, 0)
    width = sweep.spread(feature=0)
    assert f"Here feature 0's band is {width[sweep.at(4)]:.2g} wide at batch size 4 (every " \
        "output there lies within ±√3 ≈ ±1.73, so no band is wider than 3.46) and narrower at " \
        f"64 ({width[sweep.at(64)]:.2g})" in caption
    assert f"its band there is {width[sweep.at(2)]:.2g} wide, of at most 2" in caption
    # the widths the caption sets beside those bounds keep within them, at every batch size
    sizes = sweep.batch_sizes[1:]
    assert (sweep.spread()[1:] <= 2 * np.sqrt(sizes - 1) + 1e-4).all()
    assert "can only answer ±1" not in caption and "in this draw" not in caption
    # a band that is not narrower at 64 is said as such, and the cap says why it can be
    flat = type(sweep)(sweep.batch_sizes, np.zeros_like(sweep.batch_norm), sweep.layer_norm)
    assert "and as wide at 64" in band_caption(flat, 0)


@pytest.mark.parametrize("m", [2, 3, 4, 12])
def test_one_value_of_a_batch_of_m_is_at_most_root_m_minus_one_after_batch_norm(m):
    """The cap the band caption names: one value far from m − 1 equal batch-mates comes out at
    √(m − 1) (up to ε), torch's batch_norm in training mode, and no batch does more."""
    x = torch.zeros(m, 1, dtype=torch.float64)
    x[0] = 1e3
    out = F.batch_norm(x, None, None, training=True, eps=1e-12)
    assert float(out[0]) == pytest.approx(math.sqrt(m - 1), rel=1e-9)
    draws = torch.randn(200, m, 1, generator=torch.Generator().manual_seed(m),
                        dtype=torch.float64)
    assert max(float(F.batch_norm(d, None, None, training=True, eps=1e-12).abs().max())
               for d in draws) <= math.sqrt(m - 1) + 1e-9


def test_batch_noise_text_quotes_the_sweep():
    sweep = batch_size_sweep(fixed_sample(6, seed=0), redraws=8, seed=0)
    text = batch_noise_text(sweep)
    spread = sweep.spread()
    assert f"up to {spread[sweep.at(4)]:.2g} across the re-drawn batches of 4 and " \
        f"{spread[-1]:.2g} across those of 64" in text
    # the two measures are named apart: the chart's one feature, the widest over all
    assert "most affected feature (the widest band over all features" in text
    assert spread[sweep.at(4)] >= sweep.spread(feature=0)[sweep.at(4)]
    assert "its output moved by 0 here" in text and "The formula tutorial" in text


@pytest.mark.parametrize(("momentum", "steps"), [(1.0, 5), (None, 1)])
def test_modes_caption_when_the_running_mean_is_the_batchs_own(momentum, steps):
    """With momentum 1 (or None after one step) the running μ is the last batch's μ: the old
    caption's 'never exactly the running ones' was false there; the gap is Bessel's factor."""
    stats = running_statistics(steps, 4, 6, momentum, seed=0)
    np.testing.assert_array_equal(stats.running_mean[-1], stats.batch_mean[-1])
    caption = modes_caption(stats)
    assert "Here the running μ is this batch's own μ" in caption and "×1.33" in caption
    assert "never" not in caption
    x_hat = stats.train_output
    np.testing.assert_allclose(stats.eval_output, x_hat * np.sqrt(
        (stats.batch_var[-1] + 1e-5) / (stats.batch_var_unbiased[-1] + 1e-5)), atol=1e-5)
    assert "sampling noise" in modes_caption(running_statistics(10, 4, 6, 0.1, seed=0))


# --- Training and evaluation ------------------------------------------------------------------


def _torch_replay(steps, m, c, momentum, seed, eps=1e-5):
    """nn.BatchNorm1d on the same mini-batches: running statistics after each step and the eval
    output of the last batch."""
    bn = torch.nn.BatchNorm1d(c, momentum=momentum, eps=eps, affine=False)
    batches = torch.from_numpy(random_batch((steps, m, c), loc=POPULATION_MEAN,
                                            scale=math.sqrt(POPULATION_VAR), seed=seed))
    means, variances = [bn.running_mean.clone()], [bn.running_var.clone()]
    for batch in batches:
        train = bn(batch)
        means.append(bn.running_mean.clone())
        variances.append(bn.running_var.clone())
    bn.eval()
    return torch.stack(means), torch.stack(variances), train.detach(), bn(batches[-1]).detach(), \
        batches


@settings(max_examples=15, deadline=None)
@given(steps=st.integers(1, 12), m=st.integers(2, 9), c=st.integers(1, 5),
       momentum=st.sampled_from([0.01, 0.1, 0.5, 1.0, None]), seed=st.integers(0, 1000))
def test_running_statistics_match_torch(steps, m, c, momentum, seed):
    stats = running_statistics(steps, m, c, momentum, seed)
    means, variances, train, evaluated, batches = _torch_replay(steps, m, c, momentum, seed)
    np.testing.assert_allclose(stats.running_mean, means.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.running_var, variances.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.train_output, train.numpy(), atol=1e-4)
    np.testing.assert_allclose(stats.eval_output, evaluated.numpy(), atol=1e-4)
    np.testing.assert_allclose(stats.batch_var_unbiased[-1],
                               batches[-1].var(dim=0, unbiased=True).numpy(), rtol=1e-5)
    np.testing.assert_allclose(stats.batch_var[-1],
                               batches[-1].var(dim=0, unbiased=False).numpy(), rtol=1e-5)


def test_cumulative_average_and_full_momentum_by_hand():
    cumulative = running_statistics(5, 4, 3, momentum=None, seed=2)
    # momentum=None: the running mean is the plain average of the batch means (the starting 0
    # gets weight 1 − 1/1 = 0 at the first step).
    np.testing.assert_allclose(cumulative.running_mean[-1], cumulative.batch_mean.mean(axis=0),
                               rtol=1e-5)
    np.testing.assert_allclose(cumulative.running_var[-1],
                               cumulative.batch_var_unbiased.mean(axis=0), rtol=1e-5)
    last_only = running_statistics(5, 4, 3, momentum=1.0, seed=2)
    np.testing.assert_allclose(last_only.running_mean[-1], last_only.batch_mean[-1], rtol=1e-6)
    # Even then eval differs from train: the running σ² is the unbiased one, 4/3 of the biased.
    np.testing.assert_allclose(last_only.running_var[-1],
                               last_only.batch_var[-1] * 4 / 3, rtol=1e-5)
    assert last_only.train_eval_gap > 0.01
    np.testing.assert_array_equal(last_only.layer_norm_output.shape, (4, 3))


def test_variance_table_puts_biased_and_unbiased_side_by_side():
    stats = running_statistics(3, 5, 2, seed=4)
    table = variance_table(stats)
    assert list(table.columns) == ["feature", "batch μ", "σ² biased (÷5)", "σ² unbiased (÷4)",
                                   "running μ", "running σ²"]
    np.testing.assert_allclose(table["σ² unbiased (÷4)"], table["σ² biased (÷5)"] * 5 / 4)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(steps=0, batch_size=4, features=3), "at least one training step"),
    (dict(steps=3, batch_size=1, features=3), "at least 2 samples"),
    (dict(steps=3, batch_size=4, features=3, momentum=0.0), "momentum must be"),
    (dict(steps=3, batch_size=4, features=3, momentum=1.5), "momentum must be"),
])
def test_running_statistics_refusals(kwargs, message):
    with pytest.raises(ValueError, match=message):
        running_statistics(**kwargs)


# --- Figures ----------------------------------------------------------------------------------


def _span(xs) -> float:
    values = [v for v in xs if v is not None]
    return max(values) - min(values)


def test_sharing_figure_shades_each_norm():
    cubes = sharing_cubes((4, 6), "NC", groups=3)
    fig = charts.bn_vs_ln.sharing_figure((4, 6, 1), [c.norm for c in cubes],
                                     [c.cells for c in cubes], [c.note for c in cubes])
    shaded = {t.meta for t in fig.data if t.meta}
    assert {"BatchNorm: front", "LayerNorm: front", "GroupNorm: top"} <= shaded
    assert not any(str(m).startswith("InstanceNorm") for m in shaded)
    texts = [a.text for a in fig.layout.annotations]
    assert "not defined" in texts and "BatchNorm" in texts
    bn_front = next(t for t in fig.data if t.meta == "BatchNorm: front")
    ln_front = next(t for t in fig.data if t.meta == "LayerNorm: front")
    assert _span(bn_front.x) == pytest.approx(4 * _span(ln_front.x))  # 4 samples against one


def test_redraws_figure_shows_a_refusal_instead_of_batch_norm():
    dep = batch_dependence(fixed_sample(3), 1, redraws=2)
    fig = charts.bn_vs_ln.redraws_figure(dep.batch_norm, dep.layer_norm, dep.refusal)
    shown = [t for t in fig.data if t.visible is not False]
    assert {t.name for t in shown} == {"LayerNorm"}
    # BatchNorm's lines are there, empty and hidden (the live figure shows them as the batch
    # size is dragged past 1), with the refusal shown instead
    hidden = [t for t in fig.data if t.visible is False]
    assert {t.name for t in hidden} == {"BatchNorm"} and len(hidden) == len(shown) == 2
    assert all(np.isnan(np.asarray(t.y, dtype=float)).all() for t in hidden)
    refusal = next(a for a in fig.layout.annotations if a.name == "refusal")
    assert "more than one value" in refusal.text.replace("<br>", " ") and refusal.visible
    dep = batch_dependence(fixed_sample(3), 4, redraws=2)
    fig = charts.bn_vs_ln.redraws_figure(dep.batch_norm, dep.layer_norm, "why it refuses")
    assert all(t.visible for t in fig.data) and len(fig.data) == 4
    refusal = next(a for a in fig.layout.annotations if a.name == "refusal")
    assert refusal.visible is False and refusal.text == "why it refuses"


# --- The page ---------------------------------------------------------------------------------


def _named(fig: dict, name: str) -> list[dict]:
    return [t for t in fig["data"] if t.get("name") == name]


def _y(trace: dict) -> np.ndarray:
    return decode(trace["y"]).astype(float)


@pytest.fixture(scope="module")
def page():
    return open_page(PAGE)


def test_default_page_draws_every_section(page):
    figs = figures(page)
    assert len(figs) == 5 and not alerts(page)["error"]
    shaded = {t.get("meta") for t in figs[0]["data"] if t.get("meta")}
    assert {"BatchNorm: front", "LayerNorm: front", "InstanceNorm: front",
            "GroupNorm: front"} <= shaded
    ln = _named(figs[1], "LayerNorm")
    bn = _named(figs[1], "BatchNorm")
    assert len(ln) == len(bn) == 8
    for trace in ln[1:]:
        np.testing.assert_array_equal(_y(trace), _y(ln[0]))  # LayerNorm: same every re-draw
    assert np.ptp(np.stack([_y(t) for t in bn]), axis=0).max() > 0.1
    assert any(r"\sqrt{\sigma^2 + \epsilon}" in latex.value for latex in page.latex)
    assert "Try this" in alerts(page)["info"][0]
    assert "features = 6\nbatch_size = 8\nmomentum = 0.1\n" in page.code[0].value
    tables = [d.value for d in page.dataframe if "batch μ" in d.value.columns]
    assert len(tables) == 1  # the variance table (the rest are the figures' data)


def test_shape_controls_move_the_cubes():
    at = open_page(PAGE)
    first = figures(at)[0]
    for key, value in (("bl_h", 5), ("bl_w", 1), ("bl_n", 8)):
        before = figures(at)[0]
        at.slider(key=key).set_value(value).run()
        assert figures(at)[0]["data"] != before["data"], key
    wider = figures(at)[0]
    assert wider["data"][0]["x"] != first["data"][0]["x"]
    at.segmented_control(key="bl_layout").set_value("NLC").run()
    tall = figures(at)[0]
    at.slider(key="bl_l").set_value(12).run()
    tokens = figures(at)[0]
    assert tokens["data"] != tall["data"]
    ln_top = next(t for t in tokens["data"] if t.get("meta") == "LayerNorm: top")
    assert ln_top != next(t for t in wider["data"] if t.get("meta") == "LayerNorm: top")
    before = next(t for t in tokens["data"] if t.get("meta") == "GroupNorm: top")
    at.select_slider(key="bl_groups").set_value(1).run()
    after = next(t for t in figures(at)[0]["data"] if t.get("meta") == "GroupNorm: top")
    assert after["x"] != before["x"]
    at.slider(key="bl_c").set_value(4).run()
    assert not at.exception
    assert decode(_named(figures(at)[1], "LayerNorm")[0]["x"]).size == 4  # 4 features now


def test_batch_size_one_shows_the_refusal_not_a_traceback():
    at = open_page(PAGE)
    before = _y(_named(figures(at)[1], "BatchNorm")[0])
    set_live(at, bl_b=32)
    assert not np.array_equal(before, _y(_named(figures(at)[1], "BatchNorm")[0]))
    set_live(at, bl_b=1)
    assert not at.exception
    warning = alerts(at)["warning"][0]
    assert "more than one value per channel" in warning
    assert "Expected more than 1 value per channel when training" in warning
    # BatchNorm's lines hidden (there for the live figure), LayerNorm's 8 shown
    assert all(t["visible"] is False for t in _named(figures(at)[1], "BatchNorm"))
    assert [t["visible"] for t in _named(figures(at)[1], "LayerNorm")] == [True] * 8


def test_redraws_feature_and_seed_controls_change_the_figures():
    at = open_page(PAGE)
    sweep = _y(figures(at)[2]["data"][2])
    at.slider(key="bl_r").set_value(12).run()
    assert len(_named(figures(at)[1], "LayerNorm")) == 12
    assert _y(figures(at)[2]["data"][2]).size == 12 * len(SWEEP_SIZES) != sweep.size
    running = _y(figures(at)[3]["data"][1])
    at.slider(key="bl_feat").set_value(3).run()
    assert figures(at)[2]["layout"]["yaxis"]["title"]["text"] == "output y, feature 3"
    assert not np.array_equal(running, _y(figures(at)[3]["data"][1]))
    batch_norm = _y(_named(figures(at)[1], "BatchNorm")[0])
    at.number_input(key="seed").set_value(5).run()
    assert not np.array_equal(batch_norm, _y(_named(figures(at)[1], "BatchNorm")[0]))


def test_training_controls_change_the_running_statistics():
    at = open_page(PAGE)
    running = _y(figures(at)[3]["data"][1])
    assert running.size == 11 and running[0] == 0.0  # steps 0…10, starting at μ = 0
    at.slider(key="bl_steps").set_value(30).run()
    assert _y(figures(at)[3]["data"][1]).size == 31
    modes = _y(figures(at)[4]["data"][1])
    at.slider(key="bl_mb").set_value(16).run()
    assert not np.array_equal(modes, _y(figures(at)[4]["data"][1]))
    assert any("σ² unbiased (÷15)" in d.value.columns for d in at.dataframe)
    at.select_slider(key="bl_mom").set_value(0.5).run()
    assert not np.array_equal(_y(figures(at)[3]["data"][1])[1:], running[1:])


def test_page_adds_covariate_shift_and_the_generalization_claim(page):
    assert any(e.label.startswith("4 · Why does BatchNorm help?") for e in page.expander)
    text = " ".join(m.value for m in page.markdown)
    assert "internal covariate shift" in text and "Santurkar et al. (2018" in text
    assert "smoother optimization landscape" in text
    sweep = batch_size_sweep(fixed_sample(6, 0), redraws=8, seed=0)
    assert batch_noise_text(sweep) in [m.value for m in page.markdown]
    captions = [c.value for c in page.caption]
    assert band_caption(sweep, 0) in captions
    assert not any("can only answer ±1" in c or "never exactly" in c for c in captions)


def test_momentum_one_caption_on_the_page():
    at = open_page(PAGE)
    at.select_slider(key="bl_mom").set_value(1.0).run()
    caption = next(c.value for c in at.caption if c.value.startswith("The last mini-batch"))
    assert "Here the running μ is this batch's own μ" in caption


def test_url_restores_the_settings():
    at = open_page(PAGE, {"bl_layout": "NC", "bl_n": "5", "bl_c": "8", "bl_groups": "4",
                          "bl_b": "3", "bl_feat": "2", "bl_steps": "4", "bl_mom": "None",
                          "bl_mb": "6"})
    assert at.segmented_control(key="bl_layout").value == "NC"
    assert at.slider(key="bl_n").value == 5 and at.slider(key="bl_c").value == 8
    assert at.select_slider(key="bl_groups").value == 4
    assert at.select_slider(key="bl_mom").value is None
    assert at.session_state["bl_b"] == 3 and at.slider(key="bl_steps").value == 4
    figs = figures(at)
    assert "not defined" in [a["text"] for a in figs[0]["layout"]["annotations"]]
    assert decode(_named(figs[1], "LayerNorm")[0]["x"]).size == 8
    assert _y(figs[3]["data"][1]).size == 5
    stats = running_statistics(4, 6, 8, None, seed=0)
    np.testing.assert_allclose(_y(figs[3]["data"][1]), stats.running_mean[:, 2], rtol=1e-6)
    assert "momentum = None\n" in at.code[0].value


# --- The PyTorch snippet: run, it says what the page shows ------------------------------------


def _run_snippet(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "snippet", "exec"), namespace)  # our own generated code
    return namespace


@pytest.mark.parametrize("query", [
    {},
    {"bl_c": "4", "bl_b": "1", "bl_steps": "1", "bl_mom": "0.5", "bl_mb": "5"},
    {"bl_c": "3", "bl_b": "2", "bl_steps": "1", "bl_mom": "None", "bl_mb": "2"},
])
def test_the_pages_snippet_runs_and_agrees_with_the_page(query):
    at = open_page(PAGE, query)
    c, b = at.slider(key="bl_c").value, at.session_state["bl_b"]
    steps, momentum = at.slider(key="bl_steps").value, at.select_slider(key="bl_mom").value
    code = at.code[0].value
    assert code == bn_vs_ln_snippet(c, b, steps, at.slider(key="bl_mb").value, momentum).strip()
    ns = _run_snippet(code)
    # LayerNorm's row 0 stays put whatever its batch-mates, BatchNorm's moves: as on the page.
    assert ns["ln_same"] is True and ns["bn_same"] is False
    dependence = batch_dependence(fixed_sample(c), 1, 2, seed=0)
    assert ns["refused"] == dependence.torch_refusal  # torch's words, which the page quotes
    if b == 1:
        assert any(ns["refused"] in w for w in alerts(at)["warning"])
    else:
        shown = {m.label: float(m.value) for m in at.metric}
        assert shown["LayerNorm: largest change across re-draws"] == 0.0
        assert shown["BatchNorm: largest change across re-draws"] > 0.0
    # Evaluation mode normalizes with the running statistics, and differs from training mode.
    bn, batch = ns["bn"], ns["batch"]
    expected = (batch - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps)
    torch.testing.assert_close(bn(batch), expected)
    torch.testing.assert_close(ns["gap"], (expected - ns["out_train"]).abs().max())
    assert ns["gap"] > 0
    if steps == 1:  # one update from μ = 0, σ² = 1: lnviz's batch_norm updates them the same way
        mean, var = torch.zeros(c), torch.ones(c)
        batch_norm(batch, mean, var, training=True, momentum=momentum,
                   num_batches_tracked=torch.tensor(0))
        torch.testing.assert_close(bn.running_mean, mean)
        torch.testing.assert_close(bn.running_var, var)  # fed the unbiased variance
        weight = 1.0 if momentum is None else momentum
        torch.testing.assert_close(bn.running_var,
                                   (1 - weight) + weight * batch.var(0, unbiased=True))


def test_the_articles_batch_size_one_at_inference_is_named_as_no_problem():
    """In eval mode BatchNorm gives a sample the same output alone as in any batch; the batch of
    one fails in training mode. The page says so where it quotes the article."""
    x = torch.randn(8, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    mean, var = torch.randn(5, dtype=torch.float64), torch.rand(5, dtype=torch.float64) + 0.5
    together = F.batch_norm(x, mean, var, training=False)
    alone = torch.cat([F.batch_norm(x[i:i + 1], mean, var, training=False) for i in range(8)])
    torch.testing.assert_close(alone, together, rtol=0, atol=1e-12)  # elementwise: rounding
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm(x[:1], None, None, training=True)
    text = " ".join(m.value for m in open_page(PAGE).markdown)
    assert "“batch size is 1 (during inference)”" in text
    assert "In evaluation mode a batch of one is no problem" in text


def test_part_2_asks_whose_output_moves_before_it_shows_the_batches():
    """A shared link with part 2 open asks its question with the re-drawn batches (the sweep,
    the live batch size and its figure) held back, and the "Try this" (which answers it) too;
    every option gets its reply, "Right" for BatchNorm's only."""
    link = {"bl_part2": "true"}
    asked = open_page(PAGE, link, asked=True)
    assert not [i for i in asked.info if "**Try this.**" in i.value]
    # the PyTorch code prints the answer: it waits too, and says so
    assert not asked.code
    assert any("once part 2's question is answered" in c.value for c in asked.caption)
    # part 3 (training against evaluation mode) says what training mode does with the batch
    link = {**link, "bl_part3": "true"}
    at = asks_first(PAGE, "bl_guess", "BatchNorm's only", link,
                    hidden=("BatchNorm's moves", "True False", "pools each feature",
                            "While training, BatchNorm normalizes with the current"))
    assert any("While training, BatchNorm normalizes" in m.value for m in at.markdown)
    assert [i for i in at.info if "**Try this.**" in i.value]
    assert "BatchNorm's moves" in at.code[0].value


def test_the_page_opens_on_part_one_and_folds_the_rest():
    """One thing to do on the first screen (part 1); the other parts fold, and open from the URL
    so that a shared link opens the same ones."""
    at = open_page(PAGE)
    assert [h.value for h in at.subheader][:1] == ["1 · Which values share one μ and σ"]
    parts = [e for e in at.expander if e.label[0].isdigit() or e.label == "The same in PyTorch"]
    assert [e.label for e in parts] == [
        "2 · One sample, many batches", "3 · Training mode vs evaluation mode",
        "4 · Why does BatchNorm help? The story and the evidence",
        "5 · BatchNorm in practice: a cheat-sheet", "The same in PyTorch"]
    assert not any(e.proto.expanded for e in parts)
    opened = open_page(PAGE, {"bl_part2": "true"})
    assert opened.session_state["bl_part2"] is True
    assert [e.proto.expanded for e in opened.expander if e.label.startswith("2 ·")] == [True]


# --- 5. The cheat-sheet -------------------------------------------------------------------------


def test_eval_mode_batch_norm_folds_into_an_affine_map_and_the_sheet_quotes_the_sweep():
    from lnviz.lessons.bn_vs_ln import (
        batch_size_sweep,
        cheat_sheet,
        fixed_sample,
        frozen_fold_error,
    )

    assert frozen_fold_error() < 1e-12
    assert frozen_fold_error(channels=3, seed=5) < 1e-12
    sweep = batch_size_sweep(fixed_sample(8))
    rows = cheat_sheet(sweep)
    assert [r.topic for r in rows] == ["small batches", "evaluation mode", "frozen statistics",
                                       "padding", "CNN or transformer"]
    bn = sweep.spread("BatchNorm")
    assert f"up to {short(bn[sweep.at(4)])} across batches of 4" in rows[0].why
    assert bn[sweep.at(2)] <= 2 + 1e-6  # ±1 at batch size 2, as the row says
    assert f"up to {short(bn[sweep.at(8)])} across batches of 8" in rows[1].why  # as part 2
    assert "100,352" in rows[4].why  # 32 × 56 × 56


def test_the_cheat_sheets_link_opens_a_batch_size_race_on_the_lstm_page():
    at = open_page("app_pages/bn_vs_ln.py")
    assert any(m.value.startswith("**Batches of a few samples") for m in at.markdown)
    link = next(e for e in at.get("page_link") if e.proto.page == "ln_lstm")
    from urllib.parse import parse_qs

    query = parse_qs(link.proto.query_string)
    race = open_page("app_pages/ln_lstm.py", query)
    assert race.selectbox(key="tr_sweep").value == "batch_size"
    assert race.multiselect(key="tr_models").value == ["bn-lstm", "ln-lstm"]
    assert race.select_slider(key="tr_batch").disabled


@pytest.mark.parametrize(("batch_size", "features", "seed"),
                         [(1, 2, 11), (2, 2, 27), (2, 2, 0), (8, 6, 0), (2, 3, 37)])
def test_the_snippets_comment_is_what_it_prints(batch_size, features, seed):
    """Run, the snippet prints what its comment says at every setting, including a batch of two
    whose new batch-mate keeps BatchNorm's ±1 (row 0 then stays under BatchNorm too)."""
    from lnviz.lessons.bn_vs_ln import bn_vs_ln_snippet

    code = bn_vs_ln_snippet(features, batch_size, 3, 4, 0.1, seed)
    namespace: dict = {}
    exec(compile(code, "snippet", "exec"), namespace)  # our own generated code
    assert namespace["ln_same"] is True
    assert f"print(ln_same, bn_same)  # True {namespace['bn_same']}" in code
    assert ("so does BatchNorm's here" in code) == namespace["bn_same"]
