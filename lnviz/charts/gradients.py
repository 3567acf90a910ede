"""Figures of the gradients and invariances lesson.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    CHAR_EM,
    DIVERGING,
    LEGEND_ABOVE,
    LEGEND_BELOW,
    NARROW_PLOT_PX,
    OKABE_ITO,
    axis_ids,
    colorbar_below,
    each_axis,
    figure,
    panel_grid,
    symmetric_range,
)
from lnviz.terms import NormKind

#: One colour per norm on the gradients page, and one per placement of LayerNorm in a block.
COLORS = {NormKind.LAYER: OKABE_ITO[0], NormKind.BATCH: OKABE_ITO[1]}


def heatmaps(panels: dict[str, np.ndarray]) -> go.Figure:
    """Small (batch × features) tables — e.g. x, ∂L/∂y and ∂L/∂x under each norm — one row per
    sample, each on its own symmetric colour scale, with the values written in.

    Two tables a row (more would leave a phone a few pixels per cell), the x axes labelled on
    the bottom row only; the values are written into the cells only where they fit on a phone
    (:data:`NARROW_PLOT_PX`), and are always in the hover text and the data tables."""
    titles = list(panels)
    grid_rows = -(-len(titles) // 2)
    samples = max(np.shape(g)[0] for g in panels.values())
    row_px = min(400, 34 * samples + 30)
    layout, refs = panel_grid(titles, rows=grid_rows, gap=0.06,
                               vgap=70 / (grid_rows * row_px), title_size=16)
    data = []
    for k, (title, (xref, yref)) in enumerate(zip(titles, refs, strict=True)):
        grid = np.asarray(panels[title], dtype=np.float64)
        low, high = symmetric_range(grid)
        rows, cols = grid.shape
        xaxis, yaxis = axis_ids([(xref, yref)])[0]
        left, right = layout[xaxis]["domain"]
        cell_px = (right - left) * NARROW_PLOT_PX / cols
        written = cell_px >= CHAR_EM * 10 * len("-0.00") + 4
        data.append(dict(
            type="heatmap", z=grid.astype(np.float32), zmin=low, zmax=high,
            colorscale=DIVERGING, showscale=False,
            texttemplate="%{z:.2f}" if written else None, textfont=dict(size=10),
            x=list(range(cols)), y=list(range(rows)),
            hovertemplate="sample %{y}, feature %{x}<br>%{z:.4g}<extra>" + title + "</extra>",
            xaxis=xref, yaxis=yref))
        bottom = k + 2 >= len(titles)
        layout[xaxis].update(title=dict(text="feature") if bottom else None, dtick=1,
                             showticklabels=bottom)
        layout[yaxis].update(autorange="reversed", dtick=1, showticklabels=k % 2 == 0,
                             title=dict(text="sample") if k % 2 == 0 else None)
    layout.update(height=grid_rows * row_px + 110, margin=dict(t=40, b=10))
    return figure(data, layout)


def param_figure(grad_weight: dict[str, np.ndarray], grad_bias: dict[str, np.ndarray]
                       ) -> go.Figure:
    """∂L/∂γ and ∂L/∂β per feature, one bar per norm (keys of the dicts)."""
    layout, refs = panel_grid(("∂L/∂γ", "∂L/∂β"), gap=0.1, title_size=16)
    data = []
    for k, ((xref, yref), grads) in enumerate(zip(refs, (grad_weight, grad_bias), strict=True)):
        for norm, values in grads.items():
            values = np.asarray(values, dtype=np.float64)
            data.append(dict(
                type="bar", x=list(range(len(values))), y=values, name=norm, legendgroup=norm,
                showlegend=k == 0, marker=dict(color=COLORS.get(norm, OKABE_ITO[2])),
                xaxis=xref, yaxis=yref))
    each_axis(layout, refs, x=dict(title=dict(text="feature"), dtick=1))
    layout.update(height=300, barmode="group", margin=dict(t=40, b=10),
                  legend=LEGEND_BELOW)
    return figure(data, layout)


def jacobian_figure(jacobians: dict[str, np.ndarray], batch: int) -> go.Figure:
    """∂y/∂x heatmaps one above the other (square: side by side, a phone drew them 130 px
    wide), on one symmetric scale, with lines around each sample's diagonal block: entries
    outside the blocks are one sample's output moved by another's input."""
    titles = list(jacobians)
    layout, refs = panel_grid(titles, rows=len(titles), vgap=0.2, title_size=16)
    low, high = symmetric_range(np.concatenate(
        [np.asarray(j, dtype=np.float64).ravel() for j in jacobians.values()]))
    size = np.shape(jacobians[titles[0]])[0]
    per_sample = size // batch
    centres = [k * per_sample + (per_sample - 1) / 2 for k in range(batch)]
    names = [f"sample {k}" for k in range(batch)]
    xs: list[float | None] = []
    ys: list[float | None] = []
    for k in range(batch):
        a, b = k * per_sample - 0.5, (k + 1) * per_sample - 0.5
        xs += [a, b, b, a, a, None]
        ys += [a, a, b, b, a, None]
    data = []
    for i, (title, (xref, yref)) in enumerate(zip(titles, refs, strict=True)):
        data.append(dict(
            type="heatmap", z=np.asarray(jacobians[title], dtype=np.float32), zmin=low,
            zmax=high, colorscale=DIVERGING, showscale=i == len(titles) - 1,
            colorbar=colorbar_below(0.25, 0.75, low, high), xaxis=xref, yaxis=yref,
            hovertemplate="∂y[%{y}]/∂x[%{x}] = %{z:.4g}<extra>" + title + "</extra>"))
        data.append(dict(type="scatter", x=xs, y=ys, mode="lines", hoverinfo="skip",
                         showlegend=False, line=dict(color="black", width=1.5),
                         xaxis=xref, yaxis=yref))
    ticks = dict(tickmode="array", tickvals=centres, ticktext=names)
    for (xaxis, yaxis), (xref, _) in zip(axis_ids(refs), refs, strict=True):
        layout[xaxis].update(range=[-0.5, size - 0.5], title=dict(text="input x (flattened)"),
                             **ticks)
        layout[yaxis].update(range=[size - 0.5, -0.5], scaleanchor=xref, **ticks,
                             title=dict(text="output y (flattened)"))
    layout.update(height=360 * len(titles) + 60, margin=dict(t=40, b=10))
    return figure(data, layout)


def invariance_figure(probes: Sequence[str], deltas: dict[str, Sequence[float]],
                      verdicts: dict[str, Sequence[str]] | None = None,
                      at_zero: dict[str, Sequence[float]] | None = None) -> go.Figure:
    """max |Δoutput| per probe and norm as horizontal bars on a *linear* axis, so that a bar's
    length is the size of the change (a log axis made a 4e-4 ε effect look like a 0.35 change).

    ``verdicts`` (per norm, one of :data:`lnviz.lessons.gradients.VERDICTS` per probe) name
    each bar in its label; bars that are ε's doing are hatched. ``at_zero`` (the same probes
    at ε = 0) goes into the hover text. Every bar carries its value, so a change too small to
    see still reads as a number."""
    data = []
    longest = 0.0
    for norm, values in deltas.items():
        values = np.asarray(values, dtype=np.float64)
        longest = max(longest, float(np.nanmax(values, initial=0.0)))
        kinds = list(verdicts[norm]) if verdicts else [""] * len(values)
        zero = (np.asarray(at_zero[norm], dtype=np.float64) if at_zero
                else np.full(len(values), np.nan))
        data.append(dict(
            type="bar", y=list(probes), x=values, orientation="h", name=norm,
            legendgroup=norm, offsetgroup=norm, showlegend=not verdicts,
            marker=dict(color=COLORS.get(norm, OKABE_ITO[2]),
                        pattern=dict(shape=["/" if kind == "ε's doing" else ""
                                            for kind in kinds], fillmode="overlay",
                                     fgcolor="black", size=6, solidity=0.3)),
            text=[f"{v:.2g}" + (f" · {kind}" if kind else "")
                  for v, kind in zip(values, kinds, strict=True)],
            textposition="outside", cliponaxis=False, textfont=dict(size=11),
            customdata=np.stack([values, zero], axis=-1),
            hovertemplate="%{y}: max |Δy| = %{customdata[0]:.3g}"
                          + ("<br>at ε = 0: %{customdata[1]:.3g}" if at_zero else "")
                          + "<extra>" + norm + "</extra>",
        ))
    if verdicts:
        # A bar's legend swatch copies its first bar's pattern, so the legend gets plain
        # swatches of its own, and one for the hatching.
        for norm in deltas:
            data.append(dict(type="bar", x=[None], y=[None], orientation="h", name=norm,
                             legendgroup=norm, offsetgroup=norm, hoverinfo="skip",
                             marker=dict(color=COLORS.get(norm, OKABE_ITO[2]))))
        data.append(dict(type="bar", x=[None], y=[None], orientation="h",
                         name="hatched: ε's doing (0 at ε = 0)", hoverinfo="skip",
                         offsetgroup=next(iter(deltas)),
                         marker=dict(color="white", line=dict(color="black", width=1),
                                     pattern=dict(shape="/", fgcolor="black", size=6))))
    layout = dict(
        xaxis=dict(title=dict(text="max |Δ output|, linear scale"),
                   range=[0.0, 1.45 * longest if longest > 0 else 1.0], rangemode="tozero",
                   automargin=True),
        yaxis=dict(autorange="reversed", automargin=True),
        barmode="group", height=90 + 70 * len(probes), margin=dict(t=20, b=10),
        legend=LEGEND_ABOVE)
    return figure(data, layout)
