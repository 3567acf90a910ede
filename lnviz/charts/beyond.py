"""Figures of "Beyond LayerNorm": Dynamic Tanh fitted to all-MiniLM-L6-v2's LayerNorms."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    AFTER,
    BEFORE,
    DIVERGING,
    LEGEND_BELOW,
    OKABE_ITO,
    compact,
    figure,
    panel_grid,
)

#: Token position, first to last: the blue and orange ends of the diverging palette (its pale
#: middle would vanish on a white page).
TOKEN_SCALE = [[0.0, DIVERGING[0][1]], [0.35, DIVERGING[1][1]], [0.65, DIVERGING[3][1]],
               [1.0, DIVERGING[4][1]]]


def tanh_fit_figure(x: np.ndarray, x_hat: np.ndarray, tokens: np.ndarray,
                    token_names: Sequence[str], extreme: np.ndarray, curve_x: np.ndarray,
                    curve_tanh: np.ndarray, curve_line: np.ndarray, title: str,
                    tanh_name: str, line_name: str) -> go.Figure:
    """One LayerNorm, value by value: its input x against its normalized output x̂ (as many
    points as given), coloured by token (``tokens``: each point's position in the sentence,
    ``token_names`` the sentence's tokens), so that each token's own straight line shows; the
    points ``extreme`` marks (a boolean mask) drawn apart as those a trimmed fit leaves out;
    and the fitted tanh and straight line."""
    tokens = np.asarray(tokens)
    names = np.asarray([f"{t}: {token_names[t]}" for t in tokens], dtype=object)
    extreme = np.asarray(extreme, bool)
    hover = "token %{customdata}<br>x = %{x:.4g}<br>x̂ = %{y:.4g}<extra></extra>"
    top = max(len(token_names) - 1, 1)
    data = [
        dict(type="scattergl", mode="markers", x=compact(x[~extreme]),
             y=compact(x_hat[~extreme]), customdata=names[~extreme],
             name="values (colour: token, first blue → last orange)",
             marker=dict(color=tokens[~extreme].tolist(), colorscale=TOKEN_SCALE, cmin=0,
                         cmax=top, size=4, opacity=0.55, showscale=False),
             hovertemplate=hover),
        dict(type="scatter", mode="markers", x=compact(x[extreme]), y=compact(x_hat[extreme]),
             customdata=names[extreme], name="left out of the trimmed fits (largest |x|)",
             marker=dict(color="black", size=9, symbol="x-thin", line=dict(width=2,
                                                                              color="black")),
             hovertemplate=hover),
        dict(type="scatter", mode="lines", x=compact(curve_x), y=compact(curve_tanh),
             name=tanh_name, line=dict(color=OKABE_ITO[2], width=3),
             hovertemplate="x = %{x:.4g}<br>tanh fit %{y:.4g}<extra></extra>"),
        dict(type="scatter", mode="lines", x=compact(curve_x), y=compact(curve_line),
             name=line_name, line=dict(color="#777777", width=2, dash="dash"),
             hovertemplate="x = %{x:.4g}<br>line fit %{y:.4g}<extra></extra>"),
    ]
    layout = dict(height=460, margin=dict(t=40, b=10), legend=LEGEND_BELOW,
                  title=dict(text=title),
                  xaxis=dict(title=dict(text="input x (one value of one token)")),
                  yaxis=dict(title=dict(text="normalized x̂ = (x − μ)/√(σ² + ε)")))
    return figure(data, layout)


def fit_quality_figure(labels: Sequence[str], r2_tanh: Sequence[float],
                       r2_line: Sequence[float], r2_tanh_trimmed: Sequence[float],
                       r2_line_trimmed: Sequence[float], trimmed_title: str) -> go.Figure:
    """How much of each LayerNorm's x̂ the best tanh and the best line explain (R²), layer by
    layer in forward order: over all points (top) and without those of largest |x| (bottom,
    ``trimmed_title``)."""
    layout, refs = panel_grid(["all the values", trimmed_title], rows=2, vgap=0.16)
    data = []
    for (xref, yref), tanh, line, legend in ((refs[0], r2_tanh, r2_line, True),
                                             (refs[1], r2_tanh_trimmed, r2_line_trimmed, False)):
        data += [dict(type="bar", x=list(labels), y=compact(values), name=name,
                      marker=dict(color=color), xaxis=xref, yaxis=yref, legendgroup=name,
                      showlegend=legend,
                      hovertemplate=f"%{{x}}<br>{name}: R² %{{y:.3f}}<extra></extra>")
                 for values, name, color in ((tanh, "best s·tanh(αx)", AFTER),
                                             (line, "best straight line", BEFORE))]
    for axis in ("yaxis", "yaxis2"):
        layout[axis].update(title=dict(text="R²"), range=[0, 1.02])
    for axis in ("xaxis", "xaxis2"):
        layout[axis].update(type="category", tickangle=-40, showticklabels=axis == "xaxis2")
    layout.update(height=520, margin=dict(t=40, b=10), barmode="group", legend=LEGEND_BELOW)
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
