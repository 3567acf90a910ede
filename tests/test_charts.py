"""lnviz.charts: figures built from data, checked without a browser."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from lnviz import charts
from lnviz.batch import Batch, NormSpec, grid_view, group_ids, to_grid
from lnviz.lessons.explorer import explore, histogram

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


@pytest.mark.slow
@pytest.mark.parametrize(("shape", "layout", "spec"), [
    ((50_000, 1_000), "NC", NormSpec(norm="LayerNorm")),
    ((50_000, 1_000), "NC", NormSpec(norm="BatchNorm")),
    ((100, 500, 1_000), "NLC", NormSpec(norm="BatchNorm")),
    ((10, 50, 316, 316), "NCHW", NormSpec(norm="GroupNorm", groups=5)),
])
def test_no_figure_carries_more_than_a_megabyte(shape, layout, spec):
    """50 million values in, at most ~1 MB of figure JSON out, whatever the norm and layout."""
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


def _sample_figures() -> list[go.Figure]:
    """One figure of each layout kind: panels with padding marks, a 3 × 3 grid of shared axes,
    log axes with an annotation, heatmaps with text, shapes across panels, cubes."""
    rng = np.random.default_rng(0)
    grid = rng.normal(size=(4, 5))
    groups = np.repeat(np.arange(4), 5).reshape(4, 5)
    return [
        charts.explorer.norm_heatmaps(grid, -grid, groups, padding=grid > 1.0,
                                      row_labels=list("abcd")),
        charts.scale_shift.grid_figure(np.linspace(-3, 3, 7), rng.integers(0, 9, (3, 3, 7)),
                                  [0.5, 1.0, 2.0], [-1.0, 0.0, 1.0], np.zeros((3, 3)),
                                  np.ones((3, 3))),
        charts.epsilon.sweep_figure(np.logspace(-8, 0, 5), np.zeros(5), np.zeros(5), 0.0, 1e-5),
        charts.gradients.heatmaps({"x": grid, "y": grid * 2}),
        charts.training.gates_figure({"LSTM": rng.normal(size=(6, 5)),
                                      "LN-LSTM": rng.normal(size=(6, 5))}),
        charts.bn_vs_ln.sharing_figure((2, 3, 4), ["BatchNorm", "LayerNorm"],
                                   [np.ones((2, 1, 4), bool), None], ["one", "two"]),
        charts.explorer.group_stats_figure(grid[0], grid[1], grid[2], grid[3]),
        charts.explorer.distributions_figure(histogram(grid.ravel()), histogram(grid.ravel() * 2)),
        charts.gradients.jacobian_figure({"LayerNorm": np.eye(4), "BatchNorm": np.ones((4, 4))}, 2),
        charts.training.curves_figure({"LSTM": {"step": [1, 2], "loss": [2.0, 1.0],
                                                "accuracy": [0.1, 0.5]}}, 10, chance=0.1),
        charts.training.grad_norm_figure({"LSTM": [1.0, 2.0]}),
        charts.epsilon.cancellation_figure(np.array([1.0, 1e4]), {"naive": np.array([0.1, 2.0])},
                                       {"naive": np.array([1.0, -1.0])}),
    ]


def test_figures_built_without_validation_send_the_same_json(monkeypatch):
    validated = [json.loads(fig.to_json()) for fig in _sample_figures()]
    monkeypatch.setattr(charts.base, "VALIDATE", False)
    assert [json.loads(fig.to_json()) for fig in _sample_figures()] == validated


def test_validation_is_on_in_the_tests_and_catches_a_misspelt_property():
    assert charts.base.VALIDATE
    with pytest.raises(ValueError, match="colour"):
        charts.base.figure([dict(type="bar", y=[1], marker=dict(colour="red"))], {})


def test_a_diagram_has_no_data_tables_and_a_chart_does():
    cubes = charts.bn_vs_ln.sharing_figure((2, 3, 4), ["BatchNorm"], [np.ones((2, 1, 4), bool)],
                                       ["per feature"])
    assert not charts.base.has_tables(cubes) and charts.base.figure_tables(cubes) == []
    stats = charts.explorer.group_stats_figure(np.ones(2), np.ones(2), np.zeros(2), np.ones(2))
    assert charts.base.has_tables(stats) and charts.base.figure_tables(stats)


def test_padding_marks_stay_inside_their_cells_on_large_windows():
    # Issue 11: with 128 × 128 cells, 9-px × marks on every pad blacked out the heatmaps.
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
