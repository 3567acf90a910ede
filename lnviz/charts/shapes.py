"""Figures of the shapes and transformer blocks lesson.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import LEGEND_BELOW, OKABE_ITO, each_axis, figure, panel_grid

COLORS = {"post-LN": OKABE_ITO[0], "pre-LN": OKABE_ITO[1], "none": OKABE_ITO[5]}


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
        color = COLORS.get(variant, OKABE_ITO[2])
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
               y=dict(type="log", exponentformat="power"))
    layout["yaxis"]["title"] = dict(text="RMS")
    layout.update(height=420, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)
