"""lnviz.charts: figures built from data, checked without a browser."""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import json
import sys
from collections.abc import Callable
from unittest import mock

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lnviz import charts
from lnviz.analysis import COMPARED, VARIANTS
from lnviz.batch import Batch, NormSpec, grid_view, group_ids, to_grid
from lnviz.data import get_preset, random_batch
from lnviz.lessons import bn_vs_ln, geometry, padding, performance, scale_shift
from lnviz.lessons.bn_vs_ln import sharing_cubes
from lnviz.lessons.explorer import explore, histogram
from lnviz.limits import FULL_LIMITS
from lnviz.nn import PLACEMENTS
from lnviz.train import NORM_RACE

MB = 1_000_000


def heatmaps_for(values: np.ndarray, layout: str, spec: NormSpec) -> go.Figure:
    ids = group_ids(values.shape, layout, spec)
    grid = to_grid(values, layout)
    view = grid_view(grid.shape)
    return charts.explorer.norm_heatmaps(view.take(grid), view.take(grid),
                                         view.take(to_grid(ids, layout)))


def test_group_boundaries_merge_runs():
    rows = np.repeat(np.arange(3), 4).reshape(3, 4)  # one group per row (LayerNorm)
    xs, ys = charts.base.group_boundaries(rows)
    assert xs == [-0.5, 3.5, None, -0.5, 3.5, None]
    assert ys == [0.5, 0.5, None, 1.5, 1.5, None]
    cols = np.tile(np.arange(2), (3, 1))  # one group per column (BatchNorm)
    assert charts.base.group_boundaries(cols) == ([0.5, 0.5, None], [-0.5, 2.5, None])
    assert charts.base.group_boundaries(np.zeros((3, 3), int)) == ([], [])


def test_heatmaps_carry_the_values_and_groups():
    values = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    fig = charts.explorer.norm_heatmaps(values, -values, np.array([[0, 0], [1, 1]]),
                               padding=np.array([[False, False], [False, True]]),
                               row_labels=["a", "b"], col_labels=["f0", "f1"])
    heatmaps = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert np.array_equal(np.asarray(heatmaps[0].z), values)
    assert np.array_equal(np.asarray(heatmaps[1].z), -values)
    assert np.asarray(heatmaps[2].customdata).tolist() == [[0, 0], [1, 1]]
    pads = [t for t in fig.data if t.name == "padding"]
    assert len(pads) == 3 and list(pads[0].x) == [1.0] and list(pads[0].y) == [1.0]
    assert list(fig.layout.yaxis.ticktext) == ["a", "b"]


def test_stats_and_distributions():
    fig = charts.explorer.group_stats_figure(np.array([2.0, 5.0]), np.array([1.0, 3.0]),
                                    np.zeros(2), np.ones(2))
    assert [list(t.y) for t in fig.data] == [[2.0, 5.0], [0.0, 0.0], [1.0, 3.0], [1.0, 1.0]]
    values = np.arange(100, dtype=np.float64)
    fig = charts.explorer.distributions_figure(histogram(values, bins=10),
                                      histogram(np.full(100, np.nan)))
    assert np.asarray(fig.data[0].y).tolist() == [10] * 10
    assert np.asarray(fig.data[0].x)[0] == pytest.approx(4.95)
    assert len(fig.data[1].y) == 0  # all NaN: nothing to count, and no error


#: The Explorer's largest tensor (FULL_LIMITS.tensor_values: 13,421,772 values) in each layout.
_LARGEST = FULL_LIMITS.tensor_values


@pytest.mark.slow
@pytest.mark.parametrize(("shape", "layout", "spec"), [
    ((_LARGEST // 1_000, 1_000), "NC", NormSpec(norm="LayerNorm")),
    ((_LARGEST // 1_000, 1_000), "NC", NormSpec(norm="BatchNorm")),
    ((_LARGEST // 500_000, 500, 1_000), "NLC", NormSpec(norm="BatchNorm")),
    ((_LARGEST // (10 * 316 * 316), 10, 316, 316), "NCHW", NormSpec(norm="GroupNorm", groups=5)),
])
def test_no_figure_carries_more_than_a_megabyte(shape, layout, spec):
    """The Explorer's largest tensor in, at most ~1 MB of figure JSON out, whatever the norm and
    layout."""
    assert 0.95 * _LARGEST < np.prod(shape) <= _LARGEST
    values = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    figures = [heatmaps_for(values, layout, spec)]
    if layout == "NC":
        ex = explore(Batch(values, layout), spec)
        shown = grid_view((1, len(ex.mean_in)), max_rows=1, max_cols=512).cols
        figures += [
            charts.explorer.group_stats_figure(ex.mean_in[shown], ex.std_in[shown],
                                               ex.mean_out[shown], ex.std_out[shown]),
            charts.explorer.distributions_figure(ex.histogram_in, ex.histogram_out),
        ]
    for fig in figures:
        assert len(fig.to_json()) < MB


def test_the_qk_norm_curves_are_measurements_and_only_the_reference_is_dashed():
    fig = charts.placement.entropy_figure(np.logspace(-1, 2, 7), np.linspace(2.2, 0.0, 7),
                                          np.full(7, 1.63), 2.197, 16.0)
    assert [t.name for t in fig.data] == ["without QK-norm", "with QK-norm"]
    for trace in fig.data:  # measured at each c: solid, with a marker at each
        assert trace.mode == "lines+markers" and trace.line.dash in (None, "solid")
        assert len(trace.x) == 7
    assert fig.data[0].marker.symbol != fig.data[1].marker.symbol
    dashed = [shape for shape in fig.layout.shapes if shape.line.dash == "dash"]
    assert len(dashed) == 1 and dashed[0].y0 == dashed[0].y1 == 2.197  # ln T, the reference


def test_figure_tables_expose_the_numbers_behind_a_figure():
    fig = charts.explorer.norm_heatmaps(np.array([[1.0, 2.0]]), np.array([[-1.0, 1.0]]),
                               np.array([[0, 0]]), padding=np.array([[False, True]]))
    tables = dict(charts.base.figure_tables(fig))
    assert tables["input x"].to_numpy().tolist() == [[1.0, 2.0]]
    assert tables["output y"].to_numpy().tolist() == [[-1.0, 1.0]]
    assert tables["group (colour index)"].to_numpy().tolist() == [[0.0, 0.0]]
    assert "padding" not in tables  # markers without hover text are decoration, not data
    stats = charts.explorer.group_stats_figure(np.array([2.0]), np.array([1.0]), np.zeros(1),
                                               np.ones(1))
    (name, points), = charts.base.figure_tables(stats)
    assert name == "points"
    assert points["trace"].tolist() == ["before", "after", "before", "after"]
    assert points["y"].tolist() == [2.0, 0.0, 1.0, 1.0]


@functools.cache  # built once per test run; the tests only read the figures
def _builder_samples() -> list[tuple[Callable[..., go.Figure], go.Figure]]:
    """At least one figure of every public builder of every charts module, with data shaped as
    the pages pass it (from the lessons' own functions where they are quick), and the branches
    that change a figure's layout: padding marks, a 3 × 3 grid of shared axes, log axes with an
    annotation, heatmaps with text, shapes across panels, cubes, a refusal, NaN gaps."""
    rng = np.random.default_rng(0)
    grid = rng.normal(size=(4, 5))
    groups = np.repeat(np.arange(4), 5).reshape(4, 5)
    sample = bn_vs_ln.fixed_sample(4)
    dependence = bn_vs_ln.batch_dependence(sample, 4, redraws=3)
    refused = bn_vs_ln.batch_dependence(sample, 1, redraws=3)
    sizes = bn_vs_ln.batch_size_sweep(sample, batch_sizes=(2, 4), redraws=3)
    run = bn_vs_ln.running_statistics(3, 4, 4)
    cubes = bn_vs_ln.sharing_cubes((2, 3, 2, 2), "NCHW", groups=3)
    preset = get_preset("padded_tokens")
    batch = Batch(preset.values, "NLC", preset.mask, preset.labels)
    stats = padding.feature_stats(batch)
    outputs = padding.padding_outputs(batch)
    sweep = padding.padding_sweep(batch, fractions=(0.0, 0.5))
    one = scale_shift.scale_shift_grid((1.5,), (0.5,), n=100, bins=78, span=(-13.0, 13.0))
    x = torch.from_numpy(random_batch((16, 4), seed=0))
    features = scale_shift.per_feature_affine(x, [0.5, 1.0, 2.0, 1.0], [-1.0, 0.0, 1.0, 2.0],
                                              "LayerNorm")
    recoveries = {"BatchNorm": scale_shift.recover_input(x, "BatchNorm"),
                  "LayerNorm": scale_shift.recover_input(x, "LayerNorm")}
    wx, uh, bias = scale_shift.lstm_gate_inputs()
    betas = scale_shift.two_betas(wx, uh, *scale_shift.split_bias(bias, 0.5))
    profile = {variant: np.linspace(1.0, 2.0, 4) for variant in VARIANTS}
    bench_rows = [performance.Row("layer", "torch", 64, 64, "cpu", 1e-5, 3.2, 0.5),
                  performance.Row("layer", "fast", 64, 64, "cpu", 2e-5, 1.6, 0.5)]
    c = charts
    return [
        (c.explorer.norm_heatmaps, c.explorer.norm_heatmaps(
            grid, -grid, groups, padding=grid > 1.0, row_labels=list("abcd"))),
        (c.explorer.group_stats_figure, c.explorer.group_stats_figure(
            grid[0], grid[1], grid[2], grid[3], labels=list("abcde"))),
        (c.explorer.distributions_figure, c.explorer.distributions_figure(
            histogram(grid.ravel()), histogram(grid.ravel() * 2))),
        (c.scale_shift.grid_figure, c.scale_shift.grid_figure(
            np.linspace(-3, 3, 7), rng.integers(0, 9, (3, 3, 7)), [0.5, 1.0, 2.0],
            [-1.0, 0.0, 1.0], np.zeros((3, 3)), np.ones((3, 3)))),
        (c.scale_shift.histogram_figure, c.scale_shift.histogram_figure(
            one.centres, one.counts[0, 0], float(one.mean[0, 0]), float(one.std[0, 0]), 1.5,
            0.5)),
        (c.scale_shift.feature_figure, c.scale_shift.feature_figure(
            features.output, features.gamma, features.beta, features.mean, features.std)),
        (c.scale_shift.recovery_figure, c.scale_shift.recovery_figure(
            x.double().numpy(), {name: r.output for name, r in recoveries.items()},
            {name: r.max_error for name, r in recoveries.items()})),
        (c.scale_shift.two_betas_figure, c.scale_shift.two_betas_figure(
            betas.beta1, betas.beta2, betas.separate[0], betas.merged[0])),
        (c.epsilon.sweep_figure, c.epsilon.sweep_figure(
            np.logspace(-8, 0, 5), np.zeros(5), np.zeros(5), 0.0, 1e-5)),
        (c.epsilon.precision_figure, c.epsilon.precision_figure(
            np.array([1.0, 1e3, 1e5]), {"float16": np.array([1e-3, 0.1, np.nan]),
                                        "float32": np.array([1e-7, 1e-5, 1e-3])}, "offset")),
        (c.epsilon.cancellation_figure, c.epsilon.cancellation_figure(
            np.array([1.0, 1e4]), {"naive": np.array([0.1, 2.0])},
            {"naive": np.array([1.0, -1.0])})),
        (c.gradients.heatmaps, c.gradients.heatmaps({"x": grid, "y": grid * 2})),
        (c.gradients.param_figure, c.gradients.param_figure(
            {"LayerNorm": grid[0], "BatchNorm": grid[1]},
            {"LayerNorm": grid[2], "BatchNorm": grid[2]})),
        (c.gradients.jacobian_figure, c.gradients.jacobian_figure(
            {"LayerNorm": np.eye(4), "BatchNorm": np.ones((4, 4))}, 2)),
        (c.gradients.invariance_figure, c.gradients.invariance_figure(
            ["shift one sample", "scale all of W"],
            {"LayerNorm": [1e-16, 0.5], "BatchNorm": [0.3, 0.0]})),
        (c.ln_lstm.curves_figure, c.ln_lstm.curves_figure(
            {"LSTM": {"step": [1, 2], "loss": [2.0, 1.0], "accuracy": [0.1, 0.5]}}, 10,
            chance=0.1)),
        (c.ln_lstm.grad_norm_figure, c.ln_lstm.grad_norm_figure({"LSTM": [1.0, 2.0]})),
        (c.ln_lstm.gates_figure, c.ln_lstm.gates_figure(
            {"LSTM": rng.normal(size=(6, 5)), "LN-LSTM": rng.normal(size=(6, 5))})),
        (c.bn_vs_ln.sharing_figure, c.bn_vs_ln.sharing_figure(
            (2, 3, 4), ["BatchNorm", "LayerNorm"], [np.ones((2, 1, 4), bool), None],
            ["one", "two"])),
        (c.bn_vs_ln.sharing_figure, c.bn_vs_ln.sharing_figure(
            (2, 3, 4), [cube.norm for cube in cubes], [cube.cells for cube in cubes],
            [cube.note for cube in cubes])),
        (c.bn_vs_ln.redraws_figure, c.bn_vs_ln.redraws_figure(
            dependence.batch_norm, dependence.layer_norm, dependence.refusal)),
        (c.bn_vs_ln.redraws_figure, c.bn_vs_ln.redraws_figure(
            refused.batch_norm, refused.layer_norm, refused.refusal)),
        (c.bn_vs_ln.batch_sizes_figure, c.bn_vs_ln.batch_sizes_figure(
            sizes.batch_sizes, sizes.batch_norm[:, :, 0], sizes.layer_norm[:, :, 0], 0)),
        (c.bn_vs_ln.running_stats_figure, c.bn_vs_ln.running_stats_figure(
            run.batch_mean[:, 0], run.batch_var[:, 0], run.batch_var_unbiased[:, 0],
            run.running_mean[:, 0], run.running_var[:, 0], bn_vs_ln.POPULATION_MEAN,
            bn_vs_ln.POPULATION_VAR)),
        (c.bn_vs_ln.modes_figure, c.bn_vs_ln.modes_figure(
            run.train_output, run.eval_output, run.layer_norm_output)),
        (c.padding.feature_stats_figure, c.padding.feature_stats_figure(
            stats.mean_with_pad, stats.mean_masked, stats.std_with_pad, stats.std_masked)),
        (c.padding.tokens_figure, c.padding.tokens_figure(
            [(title, out.reshape(-1, out.shape[-1])) for title, out in outputs.items()],
            ~batch.mask.reshape(-1), batch.row_labels)),
        (c.padding.share_figure, c.padding.share_figure(
            sweep.fraction, sweep.mean_with_pad[:, 0], sweep.mean_masked[:, 0],
            sweep.std_with_pad[:, 0], sweep.std_masked[:, 0], sweep.drift_with_pad,
            sweep.drift_masked, sweep.drift_layer_norm, current=stats.pad_fraction)),
        (c.padding.pad_row_figure, c.padding.pad_row_figure(np.array([0.5, -0.5]), 0.5)),
        (c.padding.pad_row_figure, c.padding.pad_row_figure(np.array([np.nan, np.nan]), 0.0)),
        (c.performance.bench_figure, c.performance.bench_figure(bench_rows, {64 * 64: 6.4})),
        (c.shapes.depth_figure, c.shapes.depth_figure(profile, profile, profile)),
        (c.explorer.group_stats_figure, c.explorer.group_stats_figure(
            grid[0], grid[1], grid[2], grid[3], spread_title="std σ per group",
            used=(grid[0] * 0.5, grid[1] + 1.0))),
        (c.explorer.norm_heatmaps, c.explorer.norm_heatmaps(
            grid, -grid, groups, title_groups="cells sharing one RMS")),
        (c.gradients.invariance_figure, c.gradients.invariance_figure(
            ["scale one sample", "shift one feature"],
            {"LayerNorm": [4e-4, 3.1], "BatchNorm": [0.35, 3e-16]},
            {"LayerNorm": ["ε's doing", "not invariant"],
             "BatchNorm": ["not invariant", "unchanged"]},
            {"LayerNorm": [0.0, 3.1], "BatchNorm": [0.35, 3e-16]})),
        (c.scale_shift.grid_figure, c.scale_shift.grid_figure(
            np.linspace(-3, 3, 7), rng.integers(0, 9, (3, 3, 7)), [0.5, 1.0, 2.0],
            [-1.0, 0.0, 1.0], np.zeros((3, 3)), np.ones((3, 3)),
            (rng.integers(0, 9, 7), 0.1, 0.9))),
        *_bug_zoo_samples(),
        *_geometry_samples(),
        *_inspector_samples(),
        *_transformer_samples(),
        (c.start_here.tokens_figure, c.start_here.tokens_figure(
            ["I", "learning"], np.array([[1.0, 2, 3], [4, 8, 12]]),
            np.array([[-1.22, 0, 1.22], [-1.22, 0, 1.22]]))),
        (c.start_here.epsilon_figure, c.start_here.epsilon_figure(
            np.logspace(-4, 2, 7), np.linspace(1.2, 0.1, 7), 2 / 3, 0.866)),
        (c.ln_lstm.curves_figure, c.ln_lstm.curves_figure(
            {"LN-LSTM · lr 0.1": {"step": [1, 2], "loss": [2.0, 1.0], "accuracy": [0.1, 0.5],
                                  "loss_low": [1.5, 0.5], "loss_high": [2.5, 1.5],
                                  "accuracy_low": [0.0, 0.4], "accuracy_high": [0.2, 0.6]}},
            10, chance=0.1)),
        (c.ln_lstm.grad_norm_figure, c.ln_lstm.grad_norm_figure(
            {"LSTM": [1.0, 2.0]}, {"LSTM": [0.5, 1.0]}, {"LSTM": [2.0, 4.0]})),
        (c.ln_lstm.sweep_figure, c.ln_lstm.sweep_figure(
            [1e-3, 1e-2, 1e-1], {"LSTM": ([0.8, 0.9, 0.7], [0.7, 0.85, 0.5], [0.85, 0.95, 0.8]),
                                 "LN-LSTM": ([0.9, 0.95, 0.9], [0.9, 0.95, 0.9],
                                             [0.9, 0.95, 0.9])}, "learning rate", True, 0.1)),
        (c.ln_lstm.length_figure, c.ln_lstm.length_figure(
            [8, 10, 12, 16, 24], 8,
            {"LSTM": ([0.9] * 5, [0.8] * 5, [0.95] * 5),
             "BN-LSTM": ([0.9, 0.8, 0.7, 0.6, 0.5],) * 3},
            {"BN-LSTM": [0.9] * 5}, {"BN-LSTM": np.linspace(0.1, 0.5, 8)}, 0.1)),
        (c.ln_lstm.length_figure, c.ln_lstm.length_figure(
            [8, 16], 8, {"LN-LSTM": ([0.9, 0.8],) * 3}, {}, {})),
        (c.shapes.gradient_figure, c.shapes.gradient_figure(
            {v: profile[v] for v in COMPARED}, np.array([1, 2, 4]),
            {v: profile[v][:3] for v in COMPARED},
            {v: profile[v][1:] for v in COMPARED})),
        (c.shapes.race_figure, c.shapes.race_figure(
            {v: {"loss": [2.3, 1.0, 0.1], "accuracy": [0.1, 0.5, 0.95]}
             for v in COMPARED}, 10, warmup=2)),
        (c.shapes.race_figure, c.shapes.race_figure(
            {v: {"loss": [2.3, 1.0, 0.1], "accuracy": [0.1, 0.5, 0.95]} for v in NORM_RACE},
            10, bands={v: {"loss": ([2.0, 0.8, 0.05], [2.5, 1.2, 0.2]),
                           "accuracy": ([0.05, 0.4, 0.9], [0.15, 0.6, 1.0])}
                       for v in NORM_RACE})),
        (c.shapes.race_figure, c.shapes.race_figure({v: {"loss": [], "accuracy": []}
                                                     for v in COMPARED}, 10)),
        (c.beyond.tanh_fit_figure, c.beyond.tanh_fit_figure(
            np.linspace(-400, 30, 50), np.tanh(0.06 * np.linspace(-400, 30, 50)) * 19,
            np.arange(50) % 5, ["[CLS]", "the", "cat", "sat", "[SEP]"], np.arange(50) < 2,
            np.linspace(-400, 30, 5), np.tanh(0.06 * np.linspace(-400, 30, 5)) * 19,
            np.linspace(-4, 0.3, 5), "layer 0 · after the feed-forward",
            "tanh fit (R² 0.96)", "line fit (R² 0.27)")),
        (c.beyond.fit_quality_figure, c.beyond.fit_quality_figure(
            ["embeddings", "0 · after attention"], [0.96, 0.97], [0.87, 0.97], [0.97, 0.97],
            [0.97, 0.97], "without each LayerNorm's top 0.1% of |x|")),
        (c.beyond.swaps_figure, c.beyond.swaps_figure(
            ["0: embeddings", "1: layer 0 · after attention", "2: layer 0 · after feed-forward"],
            [0.96, 0.999, -0.07], [2.1, 1.2, 5.7], "largest token's √(σ² + ε) ÷ σ̄")),
        (c.placement.placement_figure, c.placement.placement_figure(
            {v: np.linspace(1, 30, 7) for v in PLACEMENTS[:4]}
            | {"none": np.r_[1.0, 1e5, 1e20, np.nan, np.nan, np.nan, np.nan]},
            {v: np.linspace(3, 0.5, 6) for v in PLACEMENTS[:4]}
            | {"none": np.full(6, np.nan)})),
        (c.placement.entropy_figure, c.placement.entropy_figure(
            np.logspace(-1, 2, 7), np.linspace(2.2, 0.0, 7), np.full(7, 1.63), 2.197, 16.0)),
        (c.placement.growth_figure, c.placement.growth_figure(
            {"pre-LN": {"weight norm": [83.15, 85.4, 85.7], "stream": [13.8, 185.0, 205.0]},
             "Peri-LN": {"weight norm": [83.15, 85.3, 85.5], "stream": [28.7, 108.0, 105.0]}})),
        (c.placement.scale_figure, c.placement.scale_figure(
            ["scale 1, no decay", "scale 10, decay 0.01"],
            [np.linspace(8, 8.1, 5), np.linspace(80, 53, 5)],
            [0.1 / np.linspace(8, 8.1, 5) ** 2, 0.1 / np.linspace(80, 53, 5) ** 2],
            [np.linspace(2.3, 0.07, 4), np.linspace(2.3, 0.3, 4)])),
        (c.placement.attention_pair_figure, c.placement.attention_pair_figure(
            ["[CLS]", "the", "cat", "[SEP]"], np.eye(4), np.full((4, 4), 0.25), 16.0)),
        (c.gemma.sandwich_figure, c.gemma.sandwich_figure(
            {"attention": np.linspace(6, 0.5, 18), "feed-forward": np.linspace(0.7, 0.07, 18)},
            {"attention": np.linspace(5, 42, 18), "feed-forward": np.linspace(3, 208, 18)},
            {"attention": np.linspace(6, 50, 18), "feed-forward": np.linspace(4, 200, 18)})),
        (c.gemma.designs_figure, c.gemma.designs_figure(
            {"post-LN": np.full(7, 0.36), "pre-norm": np.geomspace(0.1, 26, 31),
             "sandwich": np.geomspace(1.0, 1240, 19)})),
        (c.gemma.qk_figure, c.gemma.qk_figure(np.full(18, 14.0), np.geomspace(4480, 10, 18))),
        (c.gemma.final_gamma_figure, c.gemma.final_gamma_figure(
            np.r_[0.188, np.linspace(1, 301, 639)], np.r_[66_095.0, np.linspace(10, 700, 639)],
            [0])),
        (c.efficientnet.alone_figure, c.efficientnet.alone_figure(
            [("palace", 0.41), ("bell tower", 0.2), ("lakeshore", 0.07), ("castle", 0.05),
             ("monastery", 0.03)],
            [("lampshade", 0.0018), ("umbrella", 0.0017), ("miniskirt", 0.0016),
             ("palace", 0.0012), ("tench", 0.001)])),
        (c.efficientnet.mates_figure, c.efficientnet.mates_figure(
            (1, 2, 4, 8, 16, 31), np.geomspace(0.001, 0.12, 18).reshape(3, 6), 0.41)),
        (c.efficientnet.gaps_figure, c.efficientnet.gaps_figure(
            [f"bn{i}" for i in range(49)], np.linspace(0.001, 0.6, 49),
            np.linspace(0.05, 0.5, 49))),
        (c.efficientnet.spread_figure, c.efficientnet.spread_figure(
            [f"bn{i}" for i in range(49)], np.geomspace(2, 195, 49))),
        (c.smollm2.prediction_figure, c.smollm2.prediction_figure(
            ["ĠParis", "Ġthe", "Ċ"], [0.77, 0.06, 0.01])),
        (c.smollm2.prediction_figure, c.smollm2.prediction_figure(
            ["ĠParis", "Ġthe"], [0.77, 0.06], [0.2, 0.1], ["Ġat", "Ċ"])),
        (c.smollm2.stream_figure, c.smollm2.stream_figure(
            np.linspace(0.1, 25, 31), np.r_[np.linspace(0.1, 28, 12), np.full(19, 940.0)],
            np.full(7, 0.5))),
        (c.smollm2.massive_figure, c.smollm2.massive_figure(
            np.r_[np.linspace(0.6, 600, 12), np.full(18, 22_500.0)], np.linspace(0.06, 11, 30),
            ["The", "Ġcapital"], np.zeros(30, int), np.full(30, 507))),
        (c.smollm2.sink_figure, c.smollm2.sink_figure(np.linspace(0.3, 0.9, 30), 0.32)),
        (c.smollm2.sink_link_figure, c.smollm2.sink_link_figure(
            np.r_[np.zeros(507), 22_552.0, np.zeros(68)], np.tile(np.r_[np.zeros(507), 2.43,
                                                                         np.zeros(68)], (2, 1)),
            np.tile(np.linspace(-2.0, 2.0, 192), (2, 1)), np.array([0.87, 0.66, 0.65, 0.46]),
            ["The", "One"], 507, 12, 0.32)),
        (c.smollm2.removals_figure, c.smollm2.removals_figure(
            ["0: block 0", "1: block 0", "2: final"],
            np.array([[4.2, 3.9, 4.6], [11.8, 10.1, 12.5], [433.0, 401.0, 460.0]]),
            np.array([4.11, 3.8, 4.4]), np.array([True, False, False]), "removed")),
    ]


def _bug_zoo_samples() -> list[tuple[Callable[..., go.Figure], go.Figure]]:
    """The bug zoo's heatmaps on one token, and on a batch far from zero (NaN cells)."""
    from lnviz.lessons import bug_zoo

    samples = []
    for name, offset in (("I", 0.0), ("two words", 1e4)):
        zoo = bug_zoo.zoo_input(name, offset=offset)
        result = bug_zoo.compare(zoo.values)
        samples.append((charts.bug_zoo.diff_heatmaps, charts.bug_zoo.diff_heatmaps(
            result.diffs, result.max_diffs, result.matches, result.nonfinite, result.allowed,
            zoo.labels)))
    return samples


def _geometry_samples() -> list[tuple[Callable[..., go.Figure], go.Figure]]:
    """The geometry page's two figures: H = 3 (a 3-D scene with meshes) and H = 2 (a plane),
    each norm's shapes, γ and β on and off, and a NaN point (a constant vector at ε = 0)."""
    samples = []
    for h, norm, affine in [(3, "LayerNorm", True), (2, "LayerNorm", True), (3, "RMSNorm", True),
                            (2, "RMSNorm", False), (3, "BatchNorm", False),
                            (2, "BatchNorm", True)]:
        inputs = geometry.input_vectors("sentences", h)
        values = np.vstack([inputs.values, np.full((1, h), 2.0)])  # constant: NaN at ε = 0
        gamma, beta = ((1.5, 0.5, 2.0)[:h], (1.0, 0.0, -0.5)[:h]) if affine else (None, None)
        view = geometry.geometry_view(values, (*inputs.labels, "flat"), norm, 0.0, gamma, beta)
        far = geometry.target_shapes(h, view.reach)
        near = geometry.target_shapes(h, view.closeup_reach, view.gamma, view.beta)
        samples += [
            (charts.geometry.path_figure, charts.geometry.path_figure(
                norm, view.inputs, view.centred, view.x_hat, view.labels, far.plane, far.sphere,
                far.faces, far.circle)),
            (charts.geometry.closeup_figure, charts.geometry.closeup_figure(
                norm, view.x_hat, view.labels, near.plane, near.sphere, near.faces, near.circle,
                view.output if affine else None, near.sphere_out if affine else None,
                near.circle_out if affine else None)),
        ]
    return samples


def _inspector_samples() -> list[tuple[Callable[..., go.Figure], go.Figure]]:
    """The Model inspector's figures from the example capture and checkpoint, a layer without β,
    and a layer with no outliers (an empty orange trace)."""
    from lnviz.data.examples import EXAMPLE_CAPTURE, EXAMPLE_CHECKPOINT
    from lnviz.lessons import inspector

    capture = inspector.open_model_file(EXAMPLE_CAPTURE.read_bytes())
    overview = inspector.capture_overview(capture)
    layers = inspector.find_norm_layers(inspector.open_model_file(
        EXAMPLE_CHECKPOINT.read_bytes()).arrays)
    c = charts.inspector
    samples = [(c.layers_figure, c.layers_figure(
        overview["layer"].tolist(), overview["max |x|"], overview["max |y|"],
        overview["σ min"], overview["σ max"]))]
    for layer in (capture.layers[0], capture.layers[-1]):
        view = inspector.layer_view(layer, capture.arrays)
        samples += [
            (c.group_stats_figure, c.group_stats_figure(view.mean, view.std, view.group_labels,
                                                        view.group_word)),
            (c.outlier_figure, c.outlier_figure(view.scatter_x, view.scatter_y,
                                                view.scatter_outlier, view.sigmas))]
    bn = next(layer for layer in layers if layer.running_mean is not None)
    samples += [
        (c.parameters_figure, c.parameters_figure(
            [layer.name for layer in layers] + ["rms"], [layer.weight for layer in layers]
            + [np.ones(3)], [layer.bias for layer in layers] + [None])),
        (c.running_stats_figure, c.running_stats_figure(*inspector.running_stats(bn)))]
    return samples
def _transformer_samples() -> list[tuple[Callable[..., go.Figure], go.Figure]]:
    """Inside a real transformer's figures on made-up numbers shaped as a run's (the model's
    own are checked in tests/test_minilm.py): 5 tokens, 8 features, 13 LayerNorms."""
    c = charts.minilm
    rng = np.random.default_rng(1)
    tokens = ["[CLS]", "the", "cat", "the", "[SEP]"]
    x = rng.normal(size=(5, 8))
    x[0, 3] = 200.0
    labels = [f"LN {i}" for i in range(13)]
    share = np.array([0.3, 0.6, 0.62, 0.6, 0.7, 0.4])
    int8 = (["per tensor", "per token", "per tensor, 2 outlier features kept in float"],
            [0.85, 0.14, 0.03], [0.54, 0.02, 0.014])
    return [
        (c.ln_heatmaps, c.ln_heatmaps(tokens, x, x / 3, 2.5, "layer 0 · after feed-forward")),
        (c.token_stats, c.token_stats(tokens, x.mean(1), x.std(1), np.abs(x).max(1),
                                      np.abs(x / 3).max(1))),
        (c.layers_overview, c.layers_overview(labels, np.linspace(1, 200, 13),
                                              np.full(13, 0.4), np.linspace(0.1, 0.9, 13))),
        (c.massive_figure, c.massive_figure(np.array([222.0, 121, 191, 77, 23, -12]),
                                            np.full(6, 0.4), 99, "[CLS]")),
        (c.outlier_figure, c.outlier_figure(labels, np.linspace(0.05, 8, 13), np.full(13, 0.5),
                                            rng.normal(size=8), 5, 3, "layer 1 · after attention")),
        (c.attention_figure, c.attention_figure(share, 0.2, rng.dirichlet(np.ones(5), size=5),
                                                tokens, 2)),
        (c.ablation_figure, c.ablation_figure(99, 5, 0.53, 0.996)),
        (c.int8_figure, c.int8_figure(*int8)),
    ]


def _sample_figures() -> list[go.Figure]:
    return [fig for _, fig in _builder_samples()]


def _public_builders() -> set[Callable[..., go.Figure]]:
    """Every public function of every lesson's charts module (all of them build figures)."""
    modules = [getattr(charts, name) for name in charts.__all__ if name != "base"]
    return {function for module in modules
            for name, function in inspect.getmembers(module, inspect.isfunction)
            if function.__module__ == module.__name__ and not name.startswith("_")}


def test_every_public_builder_has_a_sample_figure():
    builders = _public_builders()
    assert len(builders) >= 29  # what the charts modules held when this test was written
    assert all(inspect.signature(b, eval_str=True).return_annotation is go.Figure
               for b in builders)
    sampled = {builder for builder, _ in _builder_samples()}
    assert builders - sampled == set(), "add a sample figure of every new builder above"


@pytest.mark.parametrize("index", range(len(_builder_samples())))
def test_every_builder_makes_a_valid_figure_that_sends_the_same_json(index):
    """The app builds figures without plotly's validation (charts.base.figure), and so do the
    tests: validating each builder's figure here checks exactly what production sends."""
    builder, fig = _builder_samples()[index]
    sent = json.loads(fig.to_json())
    validated = go.Figure(fig.to_dict())  # raises ValueError on any invalid property or value
    assert json.loads(validated.to_json()) == sent, builder.__qualname__


@functools.cache
def _builder_calls() -> list[tuple[Callable[..., go.Figure], tuple, dict]]:
    """The arguments of every builder call that :func:`_builder_samples` makes."""
    calls = []
    with contextlib.ExitStack() as stack:
        for builder in _public_builders():
            def record(*args, _builder=builder, **kwargs):
                calls.append((_builder, args, kwargs))
                return _builder(*args, **kwargs)
            stack.enter_context(mock.patch.object(sys.modules[builder.__module__],
                                                  builder.__name__, record))
        _builder_samples.__wrapped__()
    return calls


def test_figure_dict_sends_what_the_figure_sends_for_every_builder():
    """The app draws every figure from charts.base.figure_dict (no plotly objects built): the
    JSON must be the figure's own, template included, for a sample of every builder."""
    calls = _builder_calls()
    assert {builder for builder, _, _ in calls} == _public_builders()
    for builder, args, kwargs in calls:
        fast = charts.base.figure_dict(builder, *args, **kwargs)
        expected = json.loads(builder(*args, **kwargs).to_json())
        assert json.loads(pio.to_json(fast, validate=False)) == expected, builder.__qualname__
        assert "template" in fast["layout"]
        assert charts.base.has_tables(fast) == charts.base.has_tables(builder(*args, **kwargs))
    # and the builders still return figures outside figure_dict
    assert isinstance(calls[0][0](*calls[0][1], **calls[0][2]), go.Figure)


def test_validation_catches_a_misspelt_property():
    fig = charts.base.figure([dict(type="bar", y=[1], marker=dict(colour="red"))], {})
    with pytest.raises(ValueError, match="colour"):
        go.Figure(fig.to_dict())


def test_figures_drop_unset_entries_as_validation_would():
    fig = charts.base.figure([dict(type="scatter", x=[1, None, 2], y=[1, 2, 3],
                                   marker=dict(color=None, size=3), name=None)],
                             dict(title=dict(text="t"), xaxis=dict(range=None)))
    sent = json.loads(fig.to_json())
    assert sent["data"] == [{"type": "scatter", "x": [1, None, 2], "y": [1, 2, 3],
                             "marker": {"size": 3}}]
    assert sent["layout"]["xaxis"] == {} and sent["layout"]["title"] == {"text": "t"}


def test_a_diagram_has_no_data_tables_and_a_chart_does():
    cubes = charts.bn_vs_ln.sharing_figure((2, 3, 4), ["BatchNorm"], [np.ones((2, 1, 4), bool)],
                                       ["per feature"])
    assert not charts.base.has_tables(cubes) and charts.base.figure_tables(cubes) == []
    stats = charts.explorer.group_stats_figure(np.ones(2), np.ones(2), np.zeros(2), np.ones(2))
    assert charts.base.has_tables(stats) and charts.base.figure_tables(stats)


def test_padding_marks_stay_inside_their_cells_on_large_windows():
    # With 128 × 128 cells, 9-px × marks on every pad blacked out the heatmaps.
    from lnviz.charts.explorer import norm_heatmaps

    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 128)).astype(np.float32)
    groups = np.repeat(np.arange(128), 128).reshape(128, 128)
    padding = np.zeros((128, 128), bool)
    padding[64:] = True
    fig = norm_heatmaps(x, x, groups, padding=padding)
    marks = [t for t in fig.data if t.name == "padding"]
    assert marks and all(t.marker.size <= 0.7 * 120 / 128 + 2 for t in marks)
    small = norm_heatmaps(x[:8, :3], x[:8, :3], groups[:8, :3], padding=padding[60:68, :3])
    assert next(t.marker.size for t in small.data if t.name == "padding") == 9


# --- Laid out for a 390-px phone: titles, colorbars, legends and ticks that fit ------------------
#: Pixels per character and per line of text, at font size 1: the figures' font (Source Sans)
#: averages about 0.5 em a character; tests/test_browser_narrow.py measures the real glyphs.
CHAR_PX, LINE_PX = 0.55, 1.2


def _text_px(text: str, size: float) -> float:
    """Width of the longest line of ``text`` at font ``size``, estimated."""
    return max(len(line) for line in text.split("<br>")) * CHAR_PX * size


def _page_figures() -> list[go.Figure]:
    """The multi-panel figures as the pages build them, with their longest titles."""
    rng = np.random.default_rng(1)
    grid = rng.normal(size=(8, 3))
    tokens = [("input x", grid), ("BatchNorm, pads counted", grid), ("BatchNorm, masked", grid),
              ("LayerNorm", grid)]
    cubes = sharing_cubes((4, 6, 3, 3), "NCHW", groups=2)
    share = np.linspace(0, 0.9, 5)
    return [
        charts.explorer.norm_heatmaps(grid, -grid, np.repeat(np.arange(8), 3).reshape(8, 3),
                             padding=grid > 1, title_out="output y (InstanceNorm)"),
        charts.padding.tokens_figure(tokens, np.arange(8) > 5),
        charts.padding.share_figure(share, share, share, share, share, share, share, share, 0.3),
        charts.gradients.heatmaps({"input x": grid, "upstream ∂L/∂y": grid,
                               "∂L/∂x, LayerNorm": grid, "∂L/∂x, BatchNorm": grid}),
        charts.scale_shift.two_betas_figure(grid[:, 0], grid[:, 1], grid[:, 2], grid[:, 2]),
        charts.shapes.depth_figure({"pre-LN": np.ones(4)}, {"pre-LN": np.ones(3)},
                                   {"pre-LN": np.ones(3)}),
        charts.bn_vs_ln.sharing_figure((4, 6, 9), [c.norm for c in cubes],
                                   [c.cells for c in cubes], [c.note for c in cubes]),
    ]


def _all_figures() -> list[go.Figure]:
    return _sample_figures() + _page_figures()


def _panel_titles(fig: go.Figure) -> list:
    return [a for a in fig.layout.annotations if a.name == "panel title"]


def _assert_titles_fit(fig: go.Figure) -> None:
    """Neighbouring panel titles do not overlap on a phone, and the top margin holds them."""
    px = charts.base.NARROW_PLOT_PX
    titles = _panel_titles(fig)
    rows: dict[float, list] = {}
    for title in titles:
        rows.setdefault(round(title.y, 6), []).append(title)
    for row in rows.values():
        row.sort(key=lambda a: a.x)
        for left, right in itertools.pairwise(row):
            gap = (right.x - left.x) * px
            need = (_text_px(left.text, left.font.size) + _text_px(right.text, right.font.size)) / 2
            assert need <= gap, (f"{left.text!r} and {right.text!r} overlap on a phone: "
                                 f"{need:.0f} px of text, {gap:.0f} px between their centres")
    top = [a for a in titles if a.y >= 1]
    if top:
        lines = max(a.text.count("<br>") + 1 for a in top)
        assert fig.layout.margin.t >= lines * LINE_PX * top[0].font.size


@pytest.mark.parametrize("index", range(len(_sample_figures()) + len(_page_figures())))
def test_panel_titles_fit_side_by_side_on_a_phone(index):
    _assert_titles_fit(_all_figures()[index])


@settings(max_examples=40, deadline=None)
# found by this test: nine letters with no space, too wide for a quarter of a phone at 16 px
@example(titles=["a", "a", "aaaaaaaaa", "aaaaaaaaa"], rows=1, size=16)
@given(st.lists(st.lists(st.text("abcdefghij", min_size=1, max_size=9), min_size=1, max_size=8)
                .map(" ".join), min_size=2, max_size=4),
       st.integers(1, 2), st.integers(12, 16))
def test_any_titles_are_wrapped_to_their_panels(titles, rows, size):
    layout, refs = charts.base.panel_grid(titles, rows=rows, gap=0.06, title_size=size)
    fig = charts.base.figure([], layout)
    assert len(refs) == len(titles)
    assert [a.text.replace("<br>", " ") for a in _panel_titles(fig)] == titles  # words kept
    _assert_titles_fit(fig)
    assert all(fig.layout[f"xaxis{k or ''}"].automargin for k in range(len(titles)) if k != 1)


def _colorbars(fig: go.Figure) -> list[dict]:
    """The colorbar of every heatmap that shows one, and of every shared colour axis."""
    bars = [t.colorbar.to_plotly_json() for t in fig.data
            if t.type == "heatmap" and t.showscale is not False and t.coloraxis is None]
    layout = fig.layout.to_plotly_json()
    return bars + [axis["colorbar"] for key, axis in layout.items()
                   if key.startswith("coloraxis")]


@pytest.mark.parametrize("fig", [
    pytest.param(lambda: _page_figures()[0], id="explorer heatmaps"),
    pytest.param(lambda: _page_figures()[1], id="padding tokens"),
    pytest.param(lambda: charts.gradients.jacobian_figure({"LayerNorm": np.eye(4),
                                                        "BatchNorm": -np.eye(4)}, 2),
                 id="Jacobian"),
])
def test_colorbars_lie_flat_on_the_bottom_edge_off_every_panel(fig):
    """A vertical colorbar beside a panel lay on the next panel on a phone."""
    fig = fig()
    bars = _colorbars(fig)
    assert bars
    spans = []
    for bar in bars:
        assert ({k: bar.get(k) for k in ("orientation", "yref", "y", "yanchor")}
                == {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"})
        spans.append((bar["x"] - bar["len"] / 2, bar["x"] + bar["len"] / 2))
        assert spans[-1][0] >= 0 and spans[-1][1] <= 1
    spans.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # side by side


@pytest.mark.parametrize("index", range(len(_sample_figures()) + len(_page_figures())))
def test_no_legend_is_placed_in_plot_fractions_off_the_plot_area(index):
    """A legend below or above the plot area in plot fractions covered tick labels ("ure 0")
    or the plot once a narrow screen wrapped it onto more rows: legends sit on the figure's
    top or bottom edge, where plotly reserves their room."""
    legend = _all_figures()[index].layout.legend
    if legend.y is not None and not 0 <= legend.y <= 1:
        pytest.fail(f"legend at y = {legend.y} in plot fractions")
    if legend.orientation == "h" and legend.y is not None:
        assert legend.yref == "container" and legend.y in (0, 1)


def test_gradient_tables_two_a_row_with_values_only_where_they_fit():
    grid4 = np.arange(16.0).reshape(4, 4)
    fig = charts.gradients.heatmaps({"a": grid4, "b": grid4, "c": grid4, "d": grid4})
    tops = sorted({round(fig.layout[f"yaxis{k or ''}"].domain[1], 6) for k in (0, 2, 3, 4)})
    assert len(tops) == 2  # two rows of two
    assert all(t.texttemplate == "%{z:.2f}" for t in fig.data)
    # 8 features: 2 × 8 cells across a phone is 18 px a cell, too few for "-0.17"
    grid8 = np.arange(32.0).reshape(4, 8)
    fig = charts.gradients.heatmaps({"a": grid8, "b": grid8, "c": grid8, "d": grid8})
    assert all(t.texttemplate is None for t in fig.data)
    assert all(t.hovertemplate and "%{z:.4g}" in t.hovertemplate for t in fig.data)


def test_cubes_two_a_row_with_notes_that_fit_between_them():
    fig = _page_figures()[-1]
    titles = [a for a in fig.layout.annotations if a.text in {"BatchNorm", "LayerNorm",
                                                               "InstanceNorm", "GroupNorm"}]
    assert len({round(a.y, 6) for a in titles}) == 2 and len({round(a.x, 6) for a in titles}) == 2
    notes = [a for a in fig.layout.annotations if a.yanchor == "top"]
    x0, x1 = fig.layout.xaxis.range
    unit_px = charts.base.NARROW_PLOT_PX / (x1 - x0)  # the drawing keeps its proportions
    step = max(a.x for a in notes) - min(a.x for a in notes)
    for note in notes:
        assert _text_px(note.text, note.font.size) <= step * unit_px, note.text
        assert note.text.replace("<br>", " ") in {c.note for c in sharing_cubes(
            (4, 6, 3, 3), "NCHW", groups=2)}


@pytest.mark.parametrize("index", range(len(_sample_figures()) + len(_page_figures())))
def test_colorbar_titles_fit_their_bar_on_a_phone(index):
    """A colorbar's title is one line under the bar: longer than the bar on a phone, it ran into
    the next bar's ("x (ends at the 99.5th pct)" on the transformer page)."""
    for bar in _colorbars(_all_figures()[index]):
        title = (bar.get("title") or {}).get("text")
        if title:
            assert "<br>" not in title
            size = bar["title"].get("font", {}).get("size", charts.base.COLORBAR_TITLE_SIZE)
            assert _text_px(title, size) <= bar["len"] * charts.base.NARROW_PLOT_PX, title


@pytest.mark.parametrize("labels", [[f"feature {j}" for j in range(48)],
                                    [f"({j // 8}, {j % 8})" for j in range(64)],
                                    [str(j) for j in range(128)], ["a", "b"]],
                         ids=["48 features", "64 positions", "128 numbers", "two"])
@pytest.mark.parametrize("width", [60.0, 90.0, 290.0])
def test_fitted_tick_labels_do_not_run_together_on_a_phone(labels, width):
    """The Explorer's heatmaps wrote 12 of 48 "feature j" labels into a 90-px panel on a phone,
    one block of text: the labels kept are far enough apart for their text, level or upright."""
    ticks, angle = charts.base.fitted_ticks(labels, width)
    assert ticks[0] == 0 and len(ticks) >= 1
    column_px = width / len(labels)
    extent = (max(len(labels[i]) for i in ticks) * CHAR_PX * 12 if angle == 0
              else LINE_PX * 12)
    assert all((b - a) * column_px >= extent for a, b in itertools.pairwise(ticks))


def test_every_log_axis_labels_its_ticks_in_full():
    """Plotly labels the ticks between powers of ten of a log axis with a bare digit ("5" for
    0.5, "2" for 200): Shapes' gradient chart read "5" where the text said 0.51. Every log axis
    of every builder sets its ticks (charts.base.log_ticks, or powers of ten only)."""
    bare = []
    for builder, fig in _builder_samples():
        layout = fig.to_plotly_json()["layout"]
        for name, axis in layout.items():
            if name.startswith(("xaxis", "yaxis")) and axis.get("type") == "log" \
                    and "tickvals" not in axis and axis.get("dtick") not in (1, "1"):
                bare.append(f"{builder.__module__}.{builder.__name__}: {name}")
    assert bare == []


@pytest.mark.parametrize(("values", "labels"), [
    ([0.3, 3.0], ["0.2", "0.5", "1", "2"]),
    ([0.9, 300.0], ["1", "2", "5", "10", "20", "50", "100", "200"]),
    ([2e-5, 3e-5], ["2×10⁻⁵", "3×10⁻⁵", "4×10⁻⁵"]),
    ([1e-6, 1e3], ["10⁻⁶", "10⁻⁵", "10⁻⁴", "10⁻³", "10⁻²", "10⁻¹", "10⁰", "10¹", "10²",
                   "10³"]),
])
def test_log_ticks_are_labelled_with_their_values(values, labels):
    axis = charts.base.log_ticks(values)
    assert axis["ticktext"] == labels
    superscript = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
    for value, label in zip(axis["tickvals"], labels, strict=True):
        if label[-1] in "⁰¹²³⁴⁵⁶⁷⁸⁹":  # "2×10⁻⁵", "10³"
            mantissa, _, power = label.rpartition("10")
            written = float(mantissa.rstrip("×") or 1) * 10.0 ** int(power.translate(superscript))
        else:
            written = float(label)
        assert written == pytest.approx(value)


@pytest.mark.parametrize(("values", "top"), [([0.06, 22_500.0], "2×10⁴"), ([0.08, 949.0], "500"),
                                             ([1e-12, 1.0], "10⁰")])
def test_a_wide_log_axis_labels_a_tick_near_its_top(values, top):
    """Powers of ten alone left 22,500 above an unlabelled stretch past 10⁴ (SmolLM2's massive
    activation): the largest 1-2-5 value under the top is labelled too."""
    axis = charts.base.log_ticks(values)
    assert top in axis["ticktext"]
    shown = [v for v in axis["tickvals"] if v <= max(values)]
    assert max(values) / max(shown) < 2.5
    gaps = np.diff(np.log10(axis["tickvals"]))
    assert gaps.min() >= 0.5 * np.median(gaps) - 1e-9  # no two labels crowd the others' spacing


@pytest.mark.parametrize(("piece", "shown"), [
    ("ĠParis", "␣Paris"), ("Ċ", "↵"), ("ĠæĿ±", "␣東"), ("ĠÃ", "␣⟨C3⟩"), ("ÃŃ", "í"),
    ("Ŀ", "⟨9D⟩"), ("ĠðŁĻĤ", "␣🙂"), ("<|im_start|>", "<|im_start|>"), ("", ""),
])
def test_a_byte_level_piece_is_shown_as_its_text(piece, shown):
    """SmolLM2's byte-level BPE stores a byte per character (a space as Ġ, byte 0xC3 as Ã):
    shown as the UTF-8 text the bytes spell, a byte of a split character in hexadecimal."""
    from lnviz.charts.base import bpe_piece

    assert bpe_piece(piece) == shown


def test_every_byte_of_the_byte_level_alphabet_comes_back():
    """The inverted alphabet is GPT-2's: 256 characters, one per byte, printable Latin-1 as
    themselves (tests/test_smollm2.py checks it against SmolLM2's own tokenizer)."""
    from lnviz.charts.base import _BYTES

    assert sorted(_BYTES.values()) == list(range(256)) and len(_BYTES) == 256
    assert _BYTES["Ġ"] == 0x20 and _BYTES["Ċ"] == 0x0A and _BYTES["A"] == 0x41


def test_a_sentencepiece_piece_reads_as_the_reader_sees_it():
    """Gemma's pieces: ▁ a space (␣), a byte the vocabulary lacks as ⟨E6⟩, a character that
    shows nothing by its code point (the zero-width non-joiner and the soft hyphen Gemma 3
    predicts once its norms are read wrongly)."""
    from lnviz.charts.base import sentencepiece_piece

    assert sentencepiece_piece("▁Paris") == "␣Paris"
    assert sentencepiece_piece("<0xE6>") == "⟨E6⟩"
    assert sentencepiece_piece("\u200c") == "⟨U+200C⟩"
    assert sentencepiece_piece("\xad") == "⟨U+00AD⟩"
    assert sentencepiece_piece("a\n\tb") == "a↵⇥b"
    assert sentencepiece_piece("<bos>") == "<bos>"
