"""Figures of the Model inspector: a capture's layers side by side, one layer's per-group
statistics and outliers, and a checkpoint's γ, β and running statistics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
    log_ticks,
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
    layout["yaxis"].update(log_ticks(max_abs_in, max_abs_out), title=dict(text="|value|"))
    layout["yaxis2"].update(log_ticks(low, high))
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


#: The most channels beyond the whiskers drawn as points per layer and panel: the farthest out,
#: half from each side. A checkpoint of millions of channels sends its boxes, not its values.
MAX_OUTLIERS_SHOWN = 100


def _box_statistics(values: np.ndarray) -> dict[str, Any] | None:
    """What one box shows, computed here (numpy's linear quartiles): median, quartiles,
    whiskers to the farthest values within 1.5 × the interquartile range of the quartiles, and
    the values beyond them (at most `MAX_OUTLIERS_SHOWN`, the farthest out), with how many there
    are in all. None for no finite value."""
    v = np.sort(np.asarray(values, np.float64).ravel())
    v = v[np.isfinite(v)]
    if not v.size:
        return None
    q1, median, q3 = np.percentile(v, [25, 50, 75])
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    inside = v[(v >= low) & (v <= high)]
    below, above = v[v < low], v[v > high]
    half = MAX_OUTLIERS_SHOWN // 2
    shown = np.concatenate([below[:half], above[max(0, above.size - half):]]) \
        if below.size + above.size > MAX_OUTLIERS_SHOWN else np.concatenate([below, above])
    return dict(q1=q1, median=median, q3=q3, lowerfence=inside.min(), upperfence=inside.max(),
                outliers=shown, beyond=below.size + above.size)


def parameters_figure(layers: Sequence[str], gammas: Sequence[np.ndarray | None],
                      betas: Sequence[np.ndarray | None]) -> go.Figure:
    """The distribution of γ and of β in every layer: one box per layer (computed here: the
    median, quartiles, whiskers to 1.5 × the interquartile range) and the channels beyond the
    whiskers as points, at most `MAX_OUTLIERS_SHOWN` per layer. The boxes are computed here, so
    the figure's size grows with the layers, not the channels. A layer without γ or β has no box
    in that panel. Traces: γ, β (the boxes), then γ and β beyond the whiskers."""
    layout, refs = panel_grid(("γ (scale) per layer", "β (shift) per layer"), gap=0.12,
                              title_size=16)
    categories, axis = category_axis(layers, _panel_px(layout))
    boxes, points = [], []
    for (xref, yref), values, name, color in ((refs[0], gammas, "γ", BEFORE),
                                              (refs[1], betas, "β", AFTER)):
        stats = [(c, _box_statistics(v)) for c, v in zip(categories, values, strict=True)
                 if v is not None]
        stats = [(c, b) for c, b in stats if b is not None]
        boxes.append(dict(
            type="box", x=[c for c, _ in stats], name=name, showlegend=False,
            **{key: compact([b[key] for _, b in stats])
               for key in ("q1", "median", "q3", "lowerfence", "upperfence")},
            marker=dict(color=color), line=dict(width=1.5), boxpoints=False,
            xaxis=xref, yaxis=yref))
        points.append(dict(
            type="scatter", mode="markers", name=f"{name} beyond the whiskers", showlegend=False,
            x=[c for c, b in stats for _ in range(b["outliers"].size)],
            y=compact(np.concatenate([b["outliers"] for _, b in stats]) if stats else []),
            marker=dict(color=color, size=4), hovertemplate=f"%{{x}}<br>{name} = %{{y:.4g}}"
            "<extra></extra>", xaxis=xref, yaxis=yref))
    each_axis(layout, refs, x=axis)
    layout.update(height=420, margin=dict(t=40, b=10))
    return figure(boxes + points, layout)


#: Up to this many channels a BatchNorm's running statistics are bars; beyond, a line.
MAX_BARS = 1024


def running_stats_figure(running_mean: np.ndarray, running_var: np.ndarray) -> go.Figure:
    """A BatchNorm's running mean and running variance, one bar per channel (a line through
    them beyond `MAX_BARS` channels, which no screen shows as bars). Traces: mean, variance."""
    channels = np.arange(len(running_mean))
    layout, refs = panel_grid(("running mean per channel", "running variance per channel"),
                              gap=0.1, title_size=16)
    kind = dict(type="bar") if channels.size <= MAX_BARS else dict(type="scatter", mode="lines")
    data = [dict(**kind, x=channels, y=compact(values), name=name,
                 marker=dict(color=color), showlegend=False, xaxis=xref, yaxis=yref)
            for (xref, yref), values, name, color in (
                (refs[0], running_mean, "running mean", BEFORE),
                (refs[1], running_var, "running variance", OKABE_ITO[2]))]
    each_axis(layout, refs, x=dict(title=dict(text="channel")))
    layout.update(height=300, margin=dict(t=40, b=10))
    return figure(data, layout)
