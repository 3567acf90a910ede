"""Figures of the Start-here path: the two sentences' tokens before and after LayerNorm, and x̂
against
ε. (Step 8 draws the Shapes lesson's depth figure.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import LEGEND_BELOW, OKABE_ITO, each_axis, figure, log_ticks, panel_grid


def tokens_figure(labels: Sequence[str], inputs: np.ndarray, outputs: np.ndarray) -> go.Figure:
    """Each token's features as a line (x: feature 0, 1, …, counted as the Explorer does),
    before LayerNorm (left) and after it (right): tokens that differ only in scale and offset
    land on one line on the right.

    ``inputs`` and ``outputs`` are (tokens, features); one colour per token, in order."""
    inputs, outputs = np.asarray(inputs, dtype=np.float64), np.asarray(outputs, np.float64)
    layout, refs = panel_grid(("tokens x", "LayerNorm(x)"), gap=0.1, title_size=16)
    features = np.arange(inputs.shape[1])
    data = []
    for (xref, yref), values, part in ((refs[0], inputs, "x"), (refs[1], outputs, "LN(x)")):
        for k, label in enumerate(labels):
            color = OKABE_ITO[k % len(OKABE_ITO)]
            data.append(dict(
                type="scatter", x=features, y=values[k], mode="lines+markers", name=label,
                legendgroup=label, showlegend=part == "x", xaxis=xref, yaxis=yref,
                line=dict(color=color, width=2), marker=dict(color=color, size=7),
                hovertemplate=f"{label}: {part} of feature %{{x}} = %{{y:.4g}}<extra></extra>"))
    each_axis(layout, refs, x=dict(title=dict(text="feature"), tickvals=features.tolist()))
    layout.update(height=360, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def epsilon_figure(eps: np.ndarray, x_hat: np.ndarray, variance: float,
                   at_variance: float) -> go.Figure:
    """x̂ of one value against ε (log x axis), with ε = σ² marked and x̂ there labelled.

    Left of σ² the data set the scale and x̂ hardly moves; right of it ε does, and x̂ falls
    like 1/√ε."""
    eps = np.asarray(eps, dtype=np.float64)
    values = np.asarray(x_hat, dtype=np.float64)
    low, high = 0.0, float(np.nanmax(values)) * 1.1
    data = [
        dict(type="scatter", x=eps, y=values, mode="lines", name="x̂ of the last feature",
             line=dict(color=OKABE_ITO[0], width=3),
             hovertemplate="ε = %{x:.2g}: x̂ = %{y:.4f}<extra></extra>"),
        dict(type="scatter", x=[variance, variance], y=[low, high], mode="lines",
             name=f"ε = σ² = {variance:.3g}", line=dict(color=OKABE_ITO[2], dash="dash"),
             hoverinfo="skip"),
        dict(type="scatter", x=[variance], y=[at_variance], mode="markers+text",
             name=f"x̂ at ε = σ²: {at_variance:.4f}", marker=dict(color=OKABE_ITO[5], size=11),
             text=[f"{at_variance:.3f}"], textposition="middle right", hoverinfo="skip"),
    ]
    layout = dict(height=340, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(log_ticks(eps), title=dict(text="ε")),
                  yaxis=dict(title=dict(text="x̂"), range=[low, high]))
    return figure(data, layout)
