"""Figures of "Beyond LayerNorm": Dynamic Tanh fitted to all-MiniLM-L6-v2's LayerNorms."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import AFTER, BEFORE, LEGEND_BELOW, OKABE_ITO, compact, figure, panel_grid


def tanh_fit_figure(x: np.ndarray, x_hat: np.ndarray, curve_x: np.ndarray,
                    curve_tanh: np.ndarray, curve_line: np.ndarray, title: str,
                    tanh_name: str, line_name: str) -> go.Figure:
    """One LayerNorm, value by value: its input x against its normalized output x̂ (every
    token's every feature, as many points as given), with the fitted tanh and straight line."""
    data = [
        dict(type="scattergl", mode="markers", x=compact(x), y=compact(x_hat),
             name="the LayerNorm's values", marker=dict(color=BEFORE, size=4, opacity=0.45),
             hovertemplate="x = %{x:.4g}<br>x̂ = %{y:.4g}<extra></extra>"),
        dict(type="scatter", mode="lines", x=compact(curve_x), y=compact(curve_tanh),
             name=tanh_name, line=dict(color=AFTER, width=3),
             hovertemplate="x = %{x:.4g}<br>tanh fit %{y:.4g}<extra></extra>"),
        dict(type="scatter", mode="lines", x=compact(curve_x), y=compact(curve_line),
             name=line_name, line=dict(color=OKABE_ITO[7], width=2, dash="dash"),
             hovertemplate="x = %{x:.4g}<br>line fit %{y:.4g}<extra></extra>"),
    ]
    layout = dict(height=420, margin=dict(t=40, b=10), legend=LEGEND_BELOW,
                  title=dict(text=title),
                  xaxis=dict(title=dict(text="input x (one value of one token)")),
                  yaxis=dict(title=dict(text="normalized x̂ = (x − μ)/√(σ² + ε)")))
    return figure(data, layout)


def fit_quality_figure(labels: Sequence[str], r2_tanh: Sequence[float],
                       r2_line: Sequence[float]) -> go.Figure:
    """How much of each LayerNorm's x̂ the best tanh and the best line explain (R²), layer by
    layer in forward order."""
    data = [dict(type="bar", x=list(labels), y=compact(values), name=name,
                 marker=dict(color=color),
                 hovertemplate=f"%{{x}}<br>{name}: R² %{{y:.3f}}<extra></extra>")
            for values, name, color in ((r2_tanh, "best s·tanh(αx)", AFTER),
                                        (r2_line, "best straight line", BEFORE))]
    layout = dict(height=380, margin=dict(t=20, b=10), barmode="group", legend=LEGEND_BELOW,
                  xaxis=dict(type="category", tickangle=-40),
                  yaxis=dict(title=dict(text="R² (share of x̂'s variance explained)"),
                             range=[0, 1.02]))
    return figure(data, layout)


def swaps_figure(labels: Sequence[str], cosine: Sequence[float], measure: Sequence[float],
                 measure_name: str) -> go.Figure:
    """Each LayerNorm changed alone: the sentence embedding's cosine with the model's own
    (top) and what predicts the damage (bottom), layer by layer in forward order."""
    layout, refs = panel_grid(["cosine with the model's embedding, this LayerNorm changed alone",
                               measure_name], rows=2, vgap=0.16)
    data = [dict(type="bar", x=list(labels), y=compact(cosine), name="cosine",
                 marker=dict(color=AFTER), xaxis=refs[0][0], yaxis=refs[0][1],
                 hovertemplate="%{x}<br>cosine %{y:.4f}<extra></extra>"),
            dict(type="bar", x=list(labels), y=compact(measure), name=measure_name,
                 marker=dict(color=BEFORE), xaxis=refs[1][0], yaxis=refs[1][1],
                 hovertemplate="%{x}<br>" + measure_name + " %{y:.3g}<extra></extra>")]
    low = min(0.0, float(np.nanmin(cosine)))
    layout["yaxis"].update(range=[low - 0.02, 1.02])
    for xaxis in ("xaxis", "xaxis2"):
        layout[xaxis].update(type="category", tickangle=-40, showticklabels=xaxis == "xaxis2")
    layout.update(height=520, margin=dict(t=40, b=10), showlegend=False)
    return figure(data, layout)
