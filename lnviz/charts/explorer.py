"""Figures of the Explorer: which cells share μ and σ, per-group statistics, and the
distribution of values before and after normalizing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    AFTER,
    BEFORE,
    DIVERGING,
    LEGEND_BELOW,
    NARROW_PLOT_PX,
    OKABE_ITO,
    axis_ids,
    colorbar_below,
    compact,
    each_axis,
    figure,
    fitted_ticks,
    group_boundaries,
    panel_grid,
    symmetric_range,
)


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
    title_groups: str = "cells sharing one μ, σ",
) -> go.Figure:
    """Input, the groups that share one μ/σ, and output, side by side.

    Args:
        grid_in, grid_out: 2-D windows of the input and the output (rows × columns).
        groups: the same window of group ids (:func:`lnviz.batch.group_ids`).
        padding: bool, the same window, True at padding positions (marked × on every panel).
        row_labels, col_labels: names of the window's rows and columns (tick labels).
        title_groups: the middle panel's title: what the cells of one group share ("cells
            sharing one RMS" for RMSNorm).

    Cells sit at integer coordinates so that group boundaries can be drawn between them.
    Traces: the input heatmap, the output heatmap, the group heatmap, then per panel the group
    boundaries (when there are any) and the padding marks (when there is padding).
    """
    rows, cols = grid_in.shape
    layout, refs = panel_grid((title_in, title_groups, title_out), gap=0.06,
                               title_size=16)
    hover = "row %{y}, column %{x}<br>"
    data: list[dict] = []
    for (xref, yref), grid, name in ((refs[0], grid_in, title_in),
                                     (refs[2], grid_out, title_out)):
        low, high = symmetric_range(np.asarray(grid, dtype=np.float64))
        data.append(dict(
            type="heatmap", z=compact(grid), zmin=low, zmax=high,
            colorscale=DIVERGING, name=name,
            colorbar=colorbar_below(*layout[xref.replace("x", "xaxis")]["domain"], low, high),
            hovertemplate=hover + "value %{z:.4g}<extra></extra>", xaxis=xref, yaxis=yref))
    # Colour groups in order of first appearance, so neighbouring groups differ in colour.
    _, first_seen = np.unique(groups, return_inverse=True)
    steps = len(OKABE_ITO)
    categories = (first_seen.reshape(groups.shape) % steps).astype(np.int8)
    palette = [[min(edge / steps, 1.0), color] for i, color in enumerate(OKABE_ITO)
               for edge in (i, i + 1)]
    data.append(dict(
        type="heatmap", z=categories, zmin=-0.5, zmax=steps - 0.5, colorscale=palette,
        showscale=False, name="group (colour index)",
        customdata=np.asarray(groups, dtype=np.int32),
        hovertemplate=hover + "group %{customdata}<extra></extra>",
        xaxis=refs[1][0], yaxis=refs[1][1]))

    bx, by = group_boundaries(np.asarray(groups))
    pad_rows, pad_cols = np.nonzero(padding) if padding is not None else ((), ())
    # A mark no larger than a cell (about 700 px of height over the rows, and at least 120 px of
    # a phone-width panel over the columns), so that many pads cannot black out the colours.
    mark = float(np.clip(0.7 * min(700 / rows, 120 / cols), 2, 9))
    for k, (xref, yref) in enumerate(refs):
        if bx:
            data.append(dict(type="scatter", x=bx, y=by, mode="lines",
                             line=dict(color="black", width=1.5), name="group boundary",
                             hoverinfo="skip", showlegend=False, xaxis=xref, yaxis=yref))
        if len(pad_rows):
            data.append(dict(
                type="scatter", x=np.asarray(pad_cols, dtype=np.float32),
                y=np.asarray(pad_rows, np.float32), mode="markers", name="padding",
                showlegend=k == 0, hoverinfo="skip", xaxis=xref, yaxis=yref,
                marker=dict(symbol="x-thin", size=mark,
                            line=dict(width=2 if mark >= 6 else 1, color="#444444"))))
    # At most ~24 row tick labels, rows reading top to bottom, and the column labels that fit
    # a panel on a phone.
    domain = layout["xaxis"]["domain"]
    xt, angle = fitted_ticks(col_labels or range(cols), NARROW_PLOT_PX * (domain[1] - domain[0]))
    yt = list(range(0, rows, max(1, rows // 24)))
    for k, (xaxis, yaxis) in enumerate(axis_ids(refs)):
        layout[xaxis].update(range=[-0.5, cols - 0.5], tickmode="array", tickvals=xt,
                             ticktext=[str(col_labels[i]) for i in xt] if col_labels else None,
                             tickangle=angle)
        layout[yaxis].update(range=[rows - 0.5, -0.5], tickmode="array", tickvals=yt,
                             ticktext=[str(row_labels[i]) for i in yt] if row_labels else None,
                             showticklabels=k == 0)
    # the padding legend under the middle panel, between the two colorbars
    layout.update(height=max(320, min(900, 16 * rows + 180)), margin=dict(t=40, b=10),
                  legend=dict(LEGEND_BELOW, x=sum(layout["xaxis2"]["domain"]) / 2,
                              xanchor="center"))
    return figure(data, layout)


def group_stats_figure(
    mean_in: np.ndarray,
    std_in: np.ndarray,
    mean_out: np.ndarray,
    std_out: np.ndarray,
    labels: Sequence[str] | None = None,
    *,
    spread_title: str = "std σ per group",
    used: tuple[np.ndarray, np.ndarray] | None = None,
) -> go.Figure:
    """μ and a spread of every group, before and after normalization (two panels, one marker
    per group): after LayerNorm with γ = 1, β = 0 every group sits at μ = 0, σ ≈ 1.

    Args:
        std_in, std_out: the spread the norm divides by, named by ``spread_title``: σ, or the
            RMS for RMSNorm ("RMS per group").
        used: the μ and √σ² the norm used where they are not the batch's own (BatchNorm's
            running statistics in eval mode), drawn as ◆ markers beside "before".

    Traces: μ before, μ after, spread before, spread after, then (with ``used``) the running μ
    and the running σ."""
    n = len(mean_in)
    x = list(labels) if labels is not None else list(range(n))
    layout, refs = panel_grid(("mean μ per group", spread_title), gap=0.1, title_size=16)
    data = []
    for k, ((xref, yref), before, after) in enumerate(((refs[0], mean_in, mean_out),
                                                       (refs[1], std_in, std_out))):
        for values, name, color in ((before, "before", BEFORE), (after, "after", AFTER)):
            data.append(dict(
                type="scatter", x=x, y=compact(values),
                mode="markers+lines", name=name, legendgroup=name, showlegend=k == 0,
                marker=dict(color=color, size=7), line=dict(color=color, width=1),
                xaxis=xref, yaxis=yref))
    if used is not None:
        name = "running (used by the norm)"
        for k, ((xref, yref), values) in enumerate(zip(refs, used, strict=True)):
            data.append(dict(
                type="scatter", x=x, y=compact(values), mode="markers", name=name,
                legendgroup=name, showlegend=k == 0,
                marker=dict(color=OKABE_ITO[3], size=10, symbol="diamond"),
                xaxis=xref, yaxis=yref))
    each_axis(layout, refs, x=dict(title=dict(text="group"), type="category"))
    layout.update(height=340, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def distributions_figure(
    histogram_in: tuple[np.ndarray, np.ndarray], histogram_out: tuple[np.ndarray, np.ndarray]
) -> go.Figure:
    """Histograms of all values before and after, from (bin centres, counts) pairs (see
    :func:`lnviz.lessons.explorer.histogram`), so the figure's size does not grow with the
    tensor."""
    layout, refs = panel_grid(("values before", "values after"), gap=0.1, title_size=16)
    data = [dict(type="bar", x=compact(centres),
                 y=np.asarray(counts, dtype=np.int64), name=name, marker=dict(color=color),
                 showlegend=False, xaxis=xref, yaxis=yref)
            for (xref, yref), (centres, counts), name, color in (
                (refs[0], histogram_in, "before", BEFORE), (refs[1], histogram_out, "after",
                                                             AFTER))]
    layout["yaxis"]["title"] = dict(text="count")
    layout.update(height=280, bargap=0.02, margin=dict(t=40, b=10))
    return figure(data, layout)
