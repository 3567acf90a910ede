"""Figures of the Model inspector: a capture's layers side by side, one layer's per-group
statistics and outliers, and a checkpoint's γ, β and running statistics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    AFTER,
    BEFORE,
    LEGEND_BELOW,
    NARROW_PLOT_PX,
    OKABE_ITO,
    category_axis,
    compact,
    each_axis,
    figure,
    panel_grid,
)


def _panel_px(layout: dict) -> float:
    """The width of the first panel on a phone, in pixels."""
    low, high = layout["xaxis"]["domain"]
    return NARROW_PLOT_PX * (high - low)


def layers_figure(
    layers: Sequence[str],
    max_abs_in: Sequence[float],
    max_abs_out: Sequence[float],
    std_min: Sequence[float],
    std_max: Sequence[float],
) -> go.Figure:
    """Every captured layer, in call order: the largest |x| going in and |y| coming out (log
    scale), and the range of σ across the layer's groups (from the smallest to the largest).

    Traces: max |x|, max |y|, then σ's range as a bar from min to max."""
    layout, refs = panel_grid(("largest |value| per layer", "σ per group: min to max"),
                              gap=0.12, title_size=16)
    x, axis = category_axis(layers, _panel_px(layout))
    low, high = np.asarray(std_min, np.float64), np.asarray(std_max, np.float64)
    data = [dict(type="bar", x=x, y=compact(values), name=name, marker=dict(color=color),
                 hovertemplate="%{x}<br>" + name
                 + " = %{y:.4g}<extra></extra>", xaxis=refs[0][0], yaxis=refs[0][1])
            for values, name, color in ((max_abs_in, "max |x| (input)", BEFORE),
                                        (max_abs_out, "max |y| (output)", AFTER))]
    data.append(dict(
        type="bar", x=x, y=compact(high - low), base=compact(low), name="σ range (input)",
        marker=dict(color=OKABE_ITO[2]), customdata=np.stack([low, high], axis=1).tolist(),
        hovertemplate="%{x}<br>σ from %{customdata[0]:.4g} to %{customdata[1]:.4g}"
                      "<extra></extra>",
        xaxis=refs[1][0], yaxis=refs[1][1]))
    each_axis(layout, refs, x=axis)
    # σ's panel is named by its title: an axis title in the gap between the panels would lie on
    # the first panel's tick labels on a phone
    layout["yaxis"].update(type="log", title=dict(text="|value|"))
    layout["yaxis2"].update(type="log")
    layout.update(height=420, barmode="group", margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def group_stats_figure(mean: np.ndarray, std: np.ndarray, labels: Sequence[str],
                       word: str = "token") -> go.Figure:
    """μ and σ of a layer's input, one marker per group (a token, a channel, ...), in two
    panels. Traces: μ, σ."""
    layout, refs = panel_grid((f"mean μ per {word}", f"std σ per {word}"), gap=0.1,
                              title_size=16)
    data = [dict(type="scatter", x=list(labels), y=compact(values), mode="markers+lines",
                 name=name, marker=dict(color=color, size=6), line=dict(color=color, width=1),
                 showlegend=False, xaxis=xref, yaxis=yref)
            for (xref, yref), values, name, color in ((refs[0], mean, "μ", BEFORE),
                                                      (refs[1], std, "σ", OKABE_ITO[2]))]
    each_axis(layout, refs, x=dict(title=dict(text=word), type="category"))
    layout.update(height=320, margin=dict(t=40, b=10))
    return figure(data, layout)


def outlier_figure(x: np.ndarray, y: np.ndarray, outlier: np.ndarray, sigmas: float
                   ) -> go.Figure:
    """What the layer does to each value: input x across, output y up; values more than
    ``sigmas`` σ from their group's mean in orange. Traces: the other values, the outliers."""
    x, y, outlier = np.asarray(x), np.asarray(y), np.asarray(outlier, bool)
    data = [dict(type="scattergl", x=compact(x[keep]), y=compact(y[keep]), mode="markers",
                 name=name, marker=dict(color=color, size=size, opacity=opacity),
                 hovertemplate="x = %{x:.4g}<br>y = %{y:.4g}<extra>" + name + "</extra>")
            for keep, name, color, size, opacity in (
                (~outlier, "other values", BEFORE, 4, 0.5),
                (outlier, f"outliers (> {sigmas:g} σ)", AFTER, 8, 0.9))]
    layout = dict(xaxis=dict(title=dict(text="input x"), zeroline=True),
                  yaxis=dict(title=dict(text="output y"), zeroline=True),
                  height=380, margin=dict(t=20, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def parameters_figure(layers: Sequence[str], gammas: Sequence[np.ndarray | None],
                      betas: Sequence[np.ndarray | None]) -> go.Figure:
    """The distribution of γ and of β in every layer: one box per layer (median, quartiles,
    whiskers to 1.5 × the interquartile range, the channels beyond as points). A layer without
    γ or β has no box in that panel. Traces: γ, β."""
    layout, refs = panel_grid(("γ (scale) per layer", "β (shift) per layer"), gap=0.12,
                              title_size=16)
    categories, axis = category_axis(layers, _panel_px(layout))
    data = []
    for (xref, yref), values, name, color in ((refs[0], gammas, "γ", BEFORE),
                                              (refs[1], betas, "β", AFTER)):
        names = [c for c, v in zip(categories, values, strict=True) if v is not None
                 for _ in range(np.size(v))]
        flat = [np.asarray(v, np.float64).ravel() for v in values if v is not None]
        data.append(dict(type="box", x=names, y=compact(np.concatenate(flat) if flat else []),
                         name=name, marker=dict(color=color, size=4), line=dict(width=1.5),
                         boxpoints="outliers", showlegend=False, xaxis=xref, yaxis=yref))
    each_axis(layout, refs, x=axis)
    layout.update(height=420, margin=dict(t=40, b=10))
    return figure(data, layout)


def running_stats_figure(running_mean: np.ndarray, running_var: np.ndarray) -> go.Figure:
    """A BatchNorm's running mean and running variance, one bar per channel. Traces: mean,
    variance."""
    channels = np.arange(len(running_mean))
    layout, refs = panel_grid(("running mean per channel", "running variance per channel"),
                              gap=0.1, title_size=16)
    data = [dict(type="bar", x=channels, y=compact(values), name=name,
                 marker=dict(color=color), showlegend=False, xaxis=xref, yaxis=yref)
            for (xref, yref), values, name, color in (
                (refs[0], running_mean, "running mean", BEFORE),
                (refs[1], running_var, "running variance", OKABE_ITO[2]))]
    each_axis(layout, refs, x=dict(title=dict(text="channel")))
    layout.update(height=300, margin=dict(t=40, b=10))
    return figure(data, layout)
