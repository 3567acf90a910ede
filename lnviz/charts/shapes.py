"""Figures of the shapes and transformer blocks lesson: the stream through a stack of blocks, the
blocks' gradients at initialization, and the post-LN against pre-LN training race.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    LEGEND_BELOW,
    each_axis,
    figure,
    log_ticks,
    panel_grid,
    variant_color,
)


def depth_figure(stream: dict[str, np.ndarray], attention: dict[str, np.ndarray],
                 ffn: dict[str, np.ndarray]) -> go.Figure:
    """RMS through a stack of blocks, one colour per variant, on log axes: the residual stream
    after each block (left, block 0 = the input) and what each block's sublayers add (right;
    solid = feed-forward, dotted = attention). NaN marks a value that overflowed."""
    layout, refs = panel_grid(("residual stream RMS",
                                "sublayer output RMS (solid FFN, dotted attention)"),
                               gap=0.1, title_size=16)
    left = dict(xaxis=refs[0][0], yaxis=refs[0][1])
    right = dict(xaxis=refs[1][0], yaxis=refs[1][1])
    data = []
    for variant, values in stream.items():
        color = variant_color(variant)
        values = np.asarray(values, dtype=np.float64)
        data.append(dict(
            type="scatter", x=np.arange(len(values)), y=values, mode="lines+markers",
            name=variant, legendgroup=variant, line=dict(color=color, width=2),
            marker=dict(size=4), **left,
            hovertemplate="after block %{x}: RMS %{y:.3g}<extra>" + variant + "</extra>"))
        for part, dash in ((ffn, "solid"), (attention, "dot")):
            out = np.asarray(part[variant], dtype=np.float64)
            data.append(dict(
                type="scatter", x=np.arange(1, len(out) + 1), y=out, mode="lines",
                name=variant, legendgroup=variant, showlegend=False,
                line=dict(color=color, dash=dash), **right,
                hovertemplate="block %{x}: RMS %{y:.3g}<extra>" + variant + "</extra>"))
    each_axis(layout, refs, x=dict(title=dict(text="block")),
              y=log_ticks(*(trace["y"] for trace in data)))
    layout["yaxis"]["title"] = dict(text="RMS")
    layout.update(height=420, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def gradient_figure(norms: dict[str, np.ndarray], depths: np.ndarray,
                    first: dict[str, np.ndarray], last: dict[str, np.ndarray]) -> go.Figure:
    """Gradient norms at initialization, one colour per variant, on log axes: every block of
    this stack (left), and the first (dotted) and last (solid) block's as the stack deepens
    (right, log depth)."""
    layout, refs = panel_grid(("each block of this stack",
                               "last block (solid) and block 1 (dotted)"),
                              gap=0.1, title_size=16)
    left = dict(xaxis=refs[0][0], yaxis=refs[0][1])
    right = dict(xaxis=refs[1][0], yaxis=refs[1][1])
    data = []
    for variant, values in norms.items():
        color = variant_color(variant)
        values = np.asarray(values, dtype=np.float64)
        data.append(dict(
            type="scatter", x=np.arange(1, len(values) + 1), y=values, mode="lines+markers",
            name=variant, legendgroup=variant, line=dict(color=color, width=2),
            marker=dict(size=5), **left,
            hovertemplate="block %{x}: %{y:.3g}<extra>" + variant + "</extra>"))
        for part, dash, which in ((last, "solid", "last block"), (first, "dot", "block 1")):
            data.append(dict(
                type="scatter", x=np.asarray(depths), y=np.asarray(part[variant], np.float64),
                mode="lines+markers", name=variant, legendgroup=variant, showlegend=False,
                line=dict(color=color, dash=dash), marker=dict(size=5), **right,
                hovertemplate="%{x} blocks: " + which + " %{y:.3g}<extra>" + variant
                              + "</extra>"))
    each_axis(layout, refs, y=log_ticks(*(trace["y"] for trace in data)))
    layout["xaxis"]["title"] = dict(text="block")
    layout["xaxis2"].update(type="log", title=dict(text="blocks in the stack"),
                            tickvals=[int(d) for d in depths])
    layout["yaxis"]["title"] = dict(text="‖∂L/∂θ‖")
    layout.update(height=400, margin=dict(t=50, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def race_figure(curves: dict[str, dict[str, list[float]]], steps: int, warmup: int = 0,
                bands: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] | None = None
                ) -> go.Figure:
    """A training race: each model's loss (left, log scale) and token accuracy (right) at every
    step, one colour per model; with ``bands`` ({model: {"loss"/"accuracy": (lowest,
    highest)}}), the seeds' range shaded around each line; a dotted line where the
    learning-rate warm-up ends."""
    layout, refs = panel_grid(("loss", "token accuracy"), gap=0.1, title_size=16)
    data = []
    for variant, curve in curves.items():
        color = variant_color(variant)
        for (key, fmt), (xaxis, yaxis), legend in (
                (("loss", ".3g"), refs[0], True), (("accuracy", ".0%"), refs[1], False)):
            values = np.asarray(curve[key], dtype=np.float64)
            x = np.arange(1, len(values) + 1)
            if bands and variant in bands:
                low, high = (np.asarray(v, dtype=np.float64) for v in bands[variant][key])
                data.append(dict(
                    type="scatter", x=np.r_[x, x[::-1]], y=np.r_[high, low[::-1]],
                    fill="toself", fillcolor=color, opacity=0.18, line=dict(width=0),
                    name=variant, legendgroup=variant, showlegend=False, hoverinfo="skip",
                    xaxis=xaxis, yaxis=yaxis))
            data.append(dict(
                type="scatter", x=x, y=values, mode="lines",
                name=variant, legendgroup=variant, showlegend=legend,
                line=dict(color=color, width=1.5), xaxis=xaxis, yaxis=yaxis,
                hovertemplate="step %{x}: %{y:" + fmt + "}<extra>" + variant + "</extra>"))
    each_axis(layout, refs, x=dict(title=dict(text="step"), range=[0, max(steps, 1) + 1]))
    layout["yaxis"].update(log_ticks(*(trace["y"] for trace in data if trace["yaxis"] == "y")))
    layout["yaxis2"].update(range=[0, 1.02], tickformat=".0%")
    if warmup:
        layout["shapes"] = [dict(type="line", xref=x, yref=f"{y} domain", x0=warmup, x1=warmup,
                                 y0=0, y1=1, line=dict(color="#666", dash="dot", width=1))
                            for x, y in refs]
    layout.update(height=380, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)
