"""Plotly figure builders: pure functions, data in and ``go.Figure`` out.

Nothing here computes a statistic of its own or touches Streamlit; every figure can be built and
checked in a unit test. Colour scales are colour-blind safe (a blue–orange diverging scale for
values, the Okabe–Ito palette for categories), and each figure is sized by what it is given:
callers pass windows of the tensor (see :func:`lnviz.explore.grid_view`) and histogram counts, so
no figure grows with the tensor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

__all__ = [
    "DIVERGING",
    "OKABE_ITO",
    "distributions_figure",
    "group_boundaries",
    "group_stats_figure",
    "norm_heatmaps",
]

#: Okabe & Ito's palette, distinguishable with the common kinds of colour blindness.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
             "#000000"]
#: Blue–white–orange: diverging and colour-blind safe (no red against green).
DIVERGING = [[0.0, "#2166AC"], [0.25, "#67A9CF"], [0.5, "#F7F7F7"], [0.75, "#FDB863"],
             [1.0, "#B35806"]]
BEFORE, AFTER = OKABE_ITO[0], OKABE_ITO[1]


def group_boundaries(groups: np.ndarray) -> tuple[list[float | None], list[float | None]]:
    """Line segments (x, y with None breaks) between neighbouring cells of different groups.

    Runs along a row or column are merged, so a LayerNorm grid (one group per row) gives one line
    per row boundary rather than one per cell.
    """
    xs: list[float | None] = []
    ys: list[float | None] = []
    rows, cols = groups.shape
    horizontal = groups[1:, :] != groups[:-1, :]  # boundary under row r
    for r in range(rows - 1):
        for start, stop in _runs(horizontal[r]):
            xs += [start - 0.5, stop - 0.5, None]
            ys += [r + 0.5, r + 0.5, None]
    vertical = groups[:, 1:] != groups[:, :-1]  # boundary right of column c
    for c in range(cols - 1):
        for start, stop in _runs(vertical[:, c]):
            xs += [c + 0.5, c + 0.5, None]
            ys += [start - 0.5, stop - 0.5, None]
    return xs, ys


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of True in a 1-D boolean array."""
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _symmetric_range(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    return -(bound or 1.0), bound or 1.0


def norm_heatmaps(
    grid_in: np.ndarray,
    grid_out: np.ndarray,
    groups: np.ndarray,
    *,
    padding: np.ndarray | None = None,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title_in: str = "input x",
    title_out: str = "output y",
) -> go.Figure:
    """Input, the groups that share one μ/σ, and output, side by side.

    Args:
        grid_in, grid_out: 2-D windows of the input and the output (rows × columns).
        groups: the same window of group ids (:func:`lnviz.explore.group_ids`).
        padding: bool, the same window, True at padding positions (marked × on every panel).
        row_labels, col_labels: names of the window's rows and columns (tick labels).

    Cells sit at integer coordinates so that group boundaries can be drawn between them.
    """
    rows, cols = grid_in.shape
    fig = make_subplots(
        rows=1, cols=3, horizontal_spacing=0.06,
        subplot_titles=(title_in, "cells sharing one μ, σ", title_out),
    )
    hover = "row %{y}, column %{x}<br>"
    for col, grid, bar_x in ((1, grid_in, 0.285), (3, grid_out, 1.0)):
        low, high = _symmetric_range(np.asarray(grid, dtype=np.float64))
        fig.add_trace(go.Heatmap(
            z=np.asarray(grid, dtype=np.float32), zmin=low, zmax=high, colorscale=DIVERGING,
            colorbar=dict(x=bar_x, len=0.9, thickness=12),
            hovertemplate=hover + "value %{z:.4g}<extra></extra>",
        ), row=1, col=col)
    # Colour groups in order of first appearance, so neighbouring groups differ in colour.
    _, first_seen = np.unique(groups, return_inverse=True)
    steps = len(OKABE_ITO)
    categories = (first_seen.reshape(groups.shape) % steps).astype(np.int8)
    palette = [[min(edge / steps, 1.0), color] for i, color in enumerate(OKABE_ITO)
               for edge in (i, i + 1)]
    fig.add_trace(go.Heatmap(
        z=categories, zmin=-0.5, zmax=steps - 0.5, colorscale=palette, showscale=False,
        customdata=np.asarray(groups, dtype=np.int32),
        hovertemplate=hover + "group %{customdata}<extra></extra>",
    ), row=1, col=2)

    bx, by = group_boundaries(np.asarray(groups))
    pad_rows, pad_cols = np.nonzero(padding) if padding is not None else ((), ())
    for col in (1, 2, 3):
        if bx:
            fig.add_trace(go.Scatter(
                x=bx, y=by, mode="lines", line=dict(color="black", width=1.5),
                name="group boundary", hoverinfo="skip", showlegend=False,
            ), row=1, col=col)
        if len(pad_rows):
            fig.add_trace(go.Scatter(
                x=np.asarray(pad_cols, dtype=np.float32), y=np.asarray(pad_rows, np.float32),
                mode="markers", name="padding", showlegend=col == 1, hoverinfo="skip",
                marker=dict(symbol="x-thin", size=9, line=dict(width=2, color="#444444")),
            ), row=1, col=col)
    _label_axes(fig, rows, cols, row_labels, col_labels)
    fig.update_layout(height=max(320, min(900, 16 * rows + 140)), margin=dict(t=40, b=10),
                      legend=dict(orientation="h", y=-0.08))
    return fig


def _label_axes(fig: go.Figure, rows: int, cols: int, row_labels: Sequence[str] | None,
                col_labels: Sequence[str] | None) -> None:
    """At most ~24 row and ~12 column tick labels, rows reading top to bottom."""
    step_x, step_y = max(1, cols // 12), max(1, rows // 24)
    xt = list(range(0, cols, step_x))
    yt = list(range(0, rows, step_y))
    for col in (1, 2, 3):
        fig.update_xaxes(range=[-0.5, cols - 0.5], tickmode="array", tickvals=xt,
                         ticktext=[str(col_labels[i]) for i in xt] if col_labels else None,
                         row=1, col=col)
        fig.update_yaxes(range=[rows - 0.5, -0.5], tickmode="array", tickvals=yt,
                         ticktext=[str(row_labels[i]) for i in yt] if row_labels else None,
                         showticklabels=col == 1, row=1, col=col)


def group_stats_figure(
    mean_in: np.ndarray,
    std_in: np.ndarray,
    mean_out: np.ndarray,
    std_out: np.ndarray,
    labels: Sequence[str] | None = None,
) -> go.Figure:
    """μ and σ of every group, before and after normalization (two panels, one marker per
    group): after LayerNorm with γ = 1, β = 0 every group sits at μ = 0, σ ≈ 1."""
    n = len(mean_in)
    x = list(labels) if labels is not None else list(range(n))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("mean μ per group", "std σ per group"))
    for col, before, after in ((1, mean_in, mean_out), (2, std_in, std_out)):
        for values, name, color in ((before, "before", BEFORE), (after, "after", AFTER)):
            fig.add_trace(go.Scatter(
                x=x, y=np.asarray(values, dtype=np.float32), mode="markers+lines",
                name=name, legendgroup=name, showlegend=col == 1,
                marker=dict(color=color, size=7), line=dict(color=color, width=1),
            ), row=1, col=col)
    fig.update_xaxes(title_text="group", type="category")
    fig.update_layout(height=320, margin=dict(t=40, b=10))
    return fig


def distributions_figure(
    histogram_in: tuple[np.ndarray, np.ndarray], histogram_out: tuple[np.ndarray, np.ndarray]
) -> go.Figure:
    """Histograms of all values before and after, from (bin centres, counts) pairs (see
    :func:`lnviz.explore.histogram`), so the figure's size does not grow with the tensor."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("values before", "values after"))
    for col, (centres, counts), name, color in ((1, histogram_in, "before", BEFORE),
                                                (2, histogram_out, "after", AFTER)):
        fig.add_trace(go.Bar(x=np.asarray(centres, dtype=np.float32),
                             y=np.asarray(counts, dtype=np.int64), name=name,
                             marker_color=color, showlegend=False), row=1, col=col)
    fig.update_layout(height=280, bargap=0.02, margin=dict(t=40, b=10))
    fig.update_yaxes(title_text="count", row=1, col=1)
    return fig
