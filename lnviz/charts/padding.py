"""Figures of the padding lesson.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    ALERT_BACKGROUND,
    ALERT_FONT,
    DIVERGING,
    LEGEND_ABOVE,
    LEGEND_BELOW,
    OKABE_ITO,
    axis_ids,
    colorbar_below,
    each_axis,
    figure,
    panel_grid,
    symmetric_range,
    true_runs,
)
from lnviz.terms import NormKind

#: BatchNorm with the pads counted, masked BatchNorm and LayerNorm on the padding page.
COLORS = {"counted": OKABE_ITO[5], "masked": OKABE_ITO[2], NormKind.LAYER: OKABE_ITO[1]}


def feature_stats_figure(
    mean_with_pad: np.ndarray,
    mean_masked: np.ndarray,
    std_with_pad: np.ndarray,
    std_masked: np.ndarray,
) -> go.Figure:
    """BatchNorm's μ and σ per feature, with the pads counted and with them masked out, as
    labelled bars side by side; a series that is all NaN (too few values to pool) is left out,
    legend entry and all."""
    layout, refs = panel_grid(["BatchNorm μ per feature", "BatchNorm σ per feature"])
    features = [f"feature {i}" for i in range(len(mean_masked))]
    data = []
    for (xref, yref), counted, masked in ((refs[0], mean_with_pad, mean_masked),
                                          (refs[1], std_with_pad, std_masked)):
        for values, name, key in ((counted, "pads counted", "counted"),
                                  (masked, "real tokens only (masked)", "masked")):
            values = np.asarray(values, dtype=np.float64)
            if not np.isfinite(values).any():
                continue
            data.append(dict(type="bar", x=features, y=values, name=name, legendgroup=name,
                             showlegend=xref == "x", marker=dict(color=COLORS[key]),
                             xaxis=xref, yaxis=yref, text=[f"{v:.3g}" for v in values],
                             textposition="outside", cliponaxis=False))
    layout.update(barmode="group", height=340, margin=dict(t=40, b=10),
                  legend=LEGEND_BELOW)
    return figure(data, layout)


def tokens_figure(
    panels: Sequence[tuple[str, np.ndarray]],
    padding: np.ndarray,
    row_labels: Sequence[str] | None = None,
) -> go.Figure:
    """Token-by-feature grids side by side with each run of pad tokens veiled in grey and
    outlined: the first panel (the input) has its own colour scale, the others (outputs) share
    one; both centred on zero.

    A veil per run rather than a mark per cell: with hundreds of rows a cell is a pixel or two
    high, and marks sized for a cell would cover the heatmap; the veil leaves every colour
    visible at any size, and the figure grows with the number of runs, not of cells.

    Args:
        panels: (title, grid) pairs, each grid tokens × features.
        padding: bool (tokens,), True at pad tokens.
        row_labels: one name per token (must be distinct).
    """
    layout, refs = panel_grid([title for title, _ in panels], gap=0.03)
    grids = [np.asarray(grid, dtype=np.float32) for _, grid in panels]
    rows, cols = grids[0].shape
    labels = list(row_labels) if row_labels is not None else [f"token {i}" for i in range(rows)]
    features = [f"f{j}" for j in range(cols)]
    pad_runs = true_runs(np.asarray(padding, dtype=bool))
    outputs = np.concatenate([g.ravel() for g in grids[1:]]) if len(grids) > 1 else grids[0]
    data, shapes = [], []
    for i, ((title, _), grid, (xref, yref)) in enumerate(zip(panels, grids, refs, strict=True)):
        data.append(dict(type="heatmap", z=grid, x=features, y=labels, xaxis=xref, yaxis=yref,
                         coloraxis="coloraxis" if i == 0 else "coloraxis2", name=title,
                         hovertemplate="%{y}, %{x}: %{z:.4g}<extra>" + title + "</extra>"))
        # Category axes place cell k at k, so a run of rows [a, b) spans a − ½ to b − ½.
        shapes += [dict(type="rect", xref=xref, yref=yref, x0=-0.5, x1=cols - 0.5,
                        y0=a - 0.5, y1=b - 0.5, fillcolor="rgba(51, 51, 51, 0.35)",
                        line=dict(color="#333333", width=1.5), layer="above",
                        name="pad tokens", legendgroup="pad tokens", showlegend=False)
                   for a, b in pad_runs]
    if shapes:
        shapes[0]["showlegend"] = True
    for i, (xaxis, yaxis) in enumerate(axis_ids(refs)):
        layout[xaxis]["type"] = "category"
        layout[yaxis].update(type="category", autorange="reversed", showticklabels=i == 0)
    input_range, output_range = symmetric_range(grids[0]), symmetric_range(outputs)
    # colorbars on the bottom edge (x under the input, y under the outputs), the legend on top
    first = layout["xaxis"]["domain"]
    rest = (layout[axis_ids(refs)[1][0]]["domain"][0],
            layout[axis_ids(refs)[-1][0]]["domain"][1]) if len(refs) > 1 else first
    layout.update(
        height=max(340, min(900, 22 * rows + 160)), margin=dict(t=40, b=10),
        legend=dict(LEGEND_ABOVE, x=1, xanchor="right"), shapes=shapes,
        coloraxis=dict(colorscale=DIVERGING, cmin=input_range[0], cmax=input_range[1],
                       colorbar=colorbar_below(*first, *input_range, title="x")),
        coloraxis2=dict(colorscale=DIVERGING, cmin=output_range[0], cmax=output_range[1],
                        colorbar=colorbar_below(*rest, *output_range, title="y")),
    )
    return figure(data, layout)


def share_figure(
    fraction: np.ndarray,
    mean_with_pad: np.ndarray,
    mean_masked: np.ndarray,
    std_with_pad: np.ndarray,
    std_masked: np.ndarray,
    drift_with_pad: np.ndarray,
    drift_masked: np.ndarray,
    drift_layer_norm: np.ndarray,
    current: float | None = None,
    feature: int = 0,
) -> go.Figure:
    """Against the padded share of the batch: one feature's BatchNorm μ and σ with and without
    the pads, and how far the real tokens' outputs move (max |change| against no padding) under
    BatchNorm, masked BatchNorm and LayerNorm. ``current`` marks this batch's own share. A
    series that is all NaN (one real token: no BatchNorm without pads to compare with, no masked
    BatchNorm) is left out, legend entry and all."""
    layout, refs = panel_grid([f"μ of feature {feature}", f"σ of feature {feature}",
                                  "real tokens' output moved by"])
    x = np.asarray(fraction, dtype=np.float64)
    counted = ("BatchNorm, pads counted", COLORS["counted"], "solid", "circle")
    masked = ("BatchNorm, masked", COLORS["masked"], "dash", "square")
    layer = (NormKind.LAYER, COLORS[NormKind.LAYER], "dot", "diamond-open")
    series = ((0, mean_with_pad, counted), (0, mean_masked, masked),
              (1, std_with_pad, counted), (1, std_masked, masked),
              (2, drift_with_pad, counted), (2, drift_masked, masked),
              (2, drift_layer_norm, layer))
    data, shown = [], set()
    for panel, y, (name, color, dash, symbol) in series:
        y = np.asarray(y, dtype=np.float64)
        if not np.isfinite(y).any():
            continue
        data.append(dict(
            type="scatter", x=x, y=y, mode="lines+markers",
            xaxis=refs[panel][0], yaxis=refs[panel][1], name=name, legendgroup=name,
            showlegend=name not in shown, line=dict(color=color, dash=dash, width=2),
            marker=dict(symbol=symbol, size=7),
            hovertemplate="padded %{x:.0%}: %{y:.4g}<extra>" + name + "</extra>"))
        shown.add(name)
    if current is not None:
        layout["shapes"] = [dict(type="line", x0=current, x1=current, y0=0, y1=1, xref=xref,
                                 yref=f"{yref} domain", line=dict(color="#555555", dash="dot",
                                                                  width=1))
                            for xref, yref in refs]
    each_axis(layout, refs, x=dict(title=dict(text="padded share of the batch"),
                                    tickformat=".0%"))
    layout.update(height=360, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def pad_row_figure(output: np.ndarray, beta: float) -> go.Figure:
    """LayerNorm's output for a pad token, feature by feature, against the line y = β; NaN
    outputs (ε = 0: 0/0) are labelled instead of drawn."""
    y = np.asarray(output, dtype=np.float64)
    features = [f"feature {i}" for i in range(y.size)]
    nan = np.isnan(y)
    annotations = [dict(x=1.0, y=beta, xref="paper", xanchor="right", yanchor="bottom",
                        text=f"β = {beta:g}", showarrow=False)]
    if nan.any():
        annotations.append(dict(x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                                text="NaN: x − μ = 0 divided by √(0 + 0) = 0", font=ALERT_FONT,
                                bgcolor=ALERT_BACKGROUND))
    data = [dict(type="bar", x=features, y=np.where(nan, 0.0, y), name="pad token's output",
                 marker=dict(color=COLORS[NormKind.LAYER]), textposition="outside",
                 text=["NaN" if v else f"{w:.4g}" for v, w in zip(nan, y, strict=True)],
                 cliponaxis=False)]
    layout = dict(height=300, margin=dict(t=30, b=10), showlegend=False,
                  yaxis=dict(title=dict(text="y")), annotations=annotations,
                  shapes=[dict(type="line", x0=0, x1=1, xref="paper", y0=beta, y1=beta,
                               line=dict(color="#333333", dash="dash"))])
    return figure(data, layout)
