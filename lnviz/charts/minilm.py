"""Figures of "Inside a real transformer": all-MiniLM-L6-v2's LayerNorms on one sentence."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    AFTER,
    BEFORE,
    BLUES,
    DIVERGING,
    LEGEND_BELOW,
    OKABE_ITO,
    axis_ids,
    colorbar_below,
    compact,
    each_axis,
    figure,
    panel_grid,
    symmetric_range,
    token_labels,
)


def ln_heatmaps(tokens: Sequence[str], x: np.ndarray, y: np.ndarray, color_limit: float,
                label: str) -> go.Figure:
    """A LayerNorm's input and output, tokens × features, side by side.

    The input's colours end at ±``color_limit`` (values beyond it show the end colour; hovering
    shows the true value), so that one huge value does not wash the rest out; the output has its
    own symmetric scale. ``tokens`` names the rows drawn (``x``'s first dim)."""
    x, y = compact(x), compact(y)
    layout, refs = panel_grid([f"input x ({label})", "output y = γ·x̂ + β"], gap=0.04)
    rows = token_labels(tokens[: x.shape[0]])
    features = list(range(x.shape[1]))
    limit = max(float(color_limit), 1e-12)
    out_range = symmetric_range(y)
    data = [dict(type="heatmap", z=grid, x=features, y=rows, xaxis=xref, yaxis=yref,
                 coloraxis=axis, name=name,
                 hovertemplate="%{y}, feature %{x}: %{z:.4g}<extra>" + name + "</extra>")
            for grid, (xref, yref), axis, name in ((x, refs[0], "coloraxis", "input"),
                                                   (y, refs[1], "coloraxis2", "output"))]
    for i, (xaxis, yaxis) in enumerate(axis_ids(refs)):
        layout[xaxis].update(title=dict(text="feature"))
        layout[yaxis].update(type="category", autorange="reversed", showticklabels=i == 0)
    left, right = layout["xaxis"]["domain"], layout["xaxis2"]["domain"]
    layout.update(
        height=max(320, min(900, 14 * len(rows) + 200)), margin=dict(t=40, b=10),
        coloraxis=dict(colorscale=DIVERGING, cmin=-limit, cmax=limit,
                       colorbar=colorbar_below(*left, -limit, limit, title="x (clipped)")),
        coloraxis2=dict(colorscale=DIVERGING, cmin=out_range[0], cmax=out_range[1],
                        colorbar=colorbar_below(*right, *out_range, title="y")))
    return figure(data, layout)


def token_stats(tokens: Sequence[str], mean: np.ndarray, std: np.ndarray, peak_in: np.ndarray,
                peak_out: np.ndarray) -> go.Figure:
    """Per token: the LayerNorm's μ, its σ (what the row is divided by), and the largest |value|
    before and after it (log scale)."""
    layout, refs = panel_grid(["μ per token", "σ per token (log)",
                               "largest |value| before and after (log)"], rows=3, vgap=0.12)
    labels = token_labels(tokens)
    data = [
        dict(type="bar", x=labels, y=compact(mean), name="μ", marker=dict(color=OKABE_ITO[2]),
             xaxis=refs[0][0], yaxis=refs[0][1], hovertemplate="%{x}: μ = %{y:.4g}<extra></extra>"),
        dict(type="bar", x=labels, y=compact(std), name="σ", marker=dict(color=OKABE_ITO[3]),
             xaxis=refs[1][0], yaxis=refs[1][1], hovertemplate="%{x}: σ = %{y:.4g}<extra></extra>"),
        dict(type="bar", x=labels, y=compact(peak_in), name="before (input)",
             marker=dict(color=BEFORE), xaxis=refs[2][0], yaxis=refs[2][1],
             hovertemplate="%{x}: max |x| = %{y:.4g}<extra></extra>"),
        dict(type="bar", x=labels, y=compact(peak_out), name="after (output)",
             marker=dict(color=AFTER), xaxis=refs[2][0], yaxis=refs[2][1],
             hovertemplate="%{x}: max |y| = %{y:.4g}<extra></extra>"),
    ]
    for k, (xaxis, yaxis) in enumerate(axis_ids(refs)):
        layout[xaxis].update(type="category", showticklabels=k == 2 and len(labels) <= 64,
                             tickangle=-60)
        if k:
            layout[yaxis].update(type="log", dtick=1)
    layout.update(height=620, barmode="group", margin=dict(t=40, b=10), legend=LEGEND_BELOW,
                  showlegend=True)
    return figure(data, layout)


def layers_overview(labels: Sequence[str], peak: np.ndarray, median: np.ndarray,
                    first_share: np.ndarray) -> go.Figure:
    """All 13 LayerNorm inputs: the largest |x| and the median |x| (log scale), and the share of
    Σx² the first token holds."""
    layout, refs = panel_grid(["largest and median |x| of each LN input (log)",
                               "share of Σx² in the first token"], rows=2, vgap=0.16)
    names = list(labels)
    data = [
        dict(type="scatter", x=names, y=compact(peak), name="largest |x|", mode="lines+markers",
             line=dict(color=OKABE_ITO[5]), xaxis=refs[0][0], yaxis=refs[0][1],
             hovertemplate="%{x}: %{y:.4g}<extra>largest |x|</extra>"),
        dict(type="scatter", x=names, y=compact(median), name="median |x|", mode="lines+markers",
             line=dict(color=OKABE_ITO[0], dash="dash"), xaxis=refs[0][0], yaxis=refs[0][1],
             hovertemplate="%{x}: %{y:.4g}<extra>median |x|</extra>"),
        dict(type="bar", x=names, y=compact(first_share), name="first token's share",
             marker=dict(color=OKABE_ITO[1]), xaxis=refs[1][0], yaxis=refs[1][1],
             hovertemplate="%{x}: %{y:.1%}<extra>first token's share of Σx²</extra>"),
    ]
    for k, (xaxis, _) in enumerate(axis_ids(refs)):
        layout[xaxis].update(type="category", tickangle=-45, showticklabels=k == 1)
    layout["yaxis"].update(type="log", dtick=1)
    layout["yaxis2"].update(range=[0, 1], tickformat=".0%")
    layout.update(height=560, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def massive_figure(values: np.ndarray, medians: np.ndarray, feature: int,
                   token: str) -> go.Figure:
    """The massive activation through the layers: its value at each layer's feed-forward LN
    input, against that input's median |x| (log scale)."""
    layers = [f"layer {i}" for i in range(len(values))]
    data = [
        dict(type="bar", x=layers, y=compact(np.abs(values)), name=f"|{token}, feature {feature}|",
             marker=dict(color=OKABE_ITO[5]), text=[f"{v:.3g}" for v in values],
             textposition="outside", cliponaxis=False,
             hovertemplate="%{x}: %{y:.4g}<extra></extra>"),
        dict(type="bar", x=layers, y=compact(medians), name="median |x| of the input",
             marker=dict(color=OKABE_ITO[0]), text=[f"{v:.2g}" for v in medians],
             textposition="outside", cliponaxis=False,
             hovertemplate="%{x}: %{y:.4g}<extra></extra>"),
    ]
    layout = dict(height=340, barmode="group", margin=dict(t=30, b=10), legend=LEGEND_BELOW,
                  yaxis=dict(type="log", dtick=1, title=dict(text="|value| (log)")),
                  title=dict(text="At each layer's feed-forward LayerNorm input", x=0,
                             font=dict(size=14)))
    return figure(data, layout)


def outlier_figure(labels: Sequence[str], median: np.ndarray, typical: np.ndarray,
                   gamma: np.ndarray, feature: int, massive_feature: int,
                   gamma_label: str) -> go.Figure:
    """The outlier feature: its median |x| over the ordinary tokens (no special token) at each
    LN input against all features' median; and |γ| of every feature in one LayerNorm, with the
    outlier and the massive activation's features marked."""
    layout, refs = panel_grid([f"median |x| of feature {feature} (ordinary tokens)",
                               f"|γ| per feature, {gamma_label}"], rows=2, vgap=0.34)
    names = list(labels)
    g = np.abs(np.asarray(gamma, dtype=np.float64))
    colors = [OKABE_ITO[5] if f == feature else OKABE_ITO[3] if f == massive_feature
              else "#B0B0B0" for f in range(len(g))]
    data = [
        dict(type="scatter", x=names, y=compact(median), name=f"feature {feature}",
             mode="lines+markers", line=dict(color=OKABE_ITO[5]), xaxis=refs[0][0],
             yaxis=refs[0][1], hovertemplate="%{x}: %{y:.4g}<extra></extra>"),
        dict(type="scatter", x=names, y=compact(typical), name="all features",
             mode="lines+markers", line=dict(color="#777777", dash="dash"), xaxis=refs[0][0],
             yaxis=refs[0][1], hovertemplate="%{x}: %{y:.4g}<extra>all features</extra>"),
        dict(type="bar", x=list(range(len(g))), y=compact(g), name="|γ|",
             marker=dict(color=colors), xaxis=refs[1][0], yaxis=refs[1][1], showlegend=False,
             hovertemplate="feature %{x}: |γ| = %{y:.4g}<extra></extra>"),
    ]
    layout["xaxis"].update(type="category", tickangle=-45)
    layout["yaxis"].update(type="log", dtick=1)
    layout["xaxis2"]["title"] = dict(text=f"feature (orange: {feature}, pink: {massive_feature})")
    layout.update(height=720, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def attention_figure(share: np.ndarray, uniform: float, mean_map: np.ndarray,
                     tokens: Sequence[str], layer: int) -> go.Figure:
    """Attention to the first token per layer (averaged over heads and query tokens), against
    the share every token would get if attention were uniform; and one layer's attention
    averaged over heads (query rows × key columns)."""
    layout, refs = panel_grid(["share of attention to the first token",
                               f"layer {layer}: attention, mean of the heads"], gap=0.12)
    labels = token_labels(tokens[: mean_map.shape[0]])
    data = [
        dict(type="bar", x=[f"layer {i}" for i in range(len(share))], y=compact(share),
             name="to the first token", marker=dict(color=OKABE_ITO[5]),
             text=[f"{s:.0%}" for s in share], textposition="outside", cliponaxis=False,
             xaxis=refs[0][0], yaxis=refs[0][1], hovertemplate="%{x}: %{y:.1%}<extra></extra>"),
        dict(type="heatmap", z=compact(mean_map), x=labels, y=labels, name="attention",
             xaxis=refs[1][0], yaxis=refs[1][1], colorscale=BLUES, zmin=0, zmax=1,
             showscale=False, hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>"),
    ]
    layout["shapes"] = [dict(type="line", xref="x domain", yref="y", x0=0, x1=1, y0=uniform,
                             y1=uniform, line=dict(color="#333333", dash="dash"))]
    layout["annotations"].append(dict(xref="x domain", yref="y", x=1, y=uniform,
                                      xanchor="right", yanchor="bottom", showarrow=False,
                                      text=f"uniform: {uniform:.0%}"))
    layout["yaxis"].update(range=[0, 1.1], tickformat=".0%")
    layout["xaxis2"].update(type="category", showticklabels=len(labels) <= 24, tickangle=-60)
    layout["yaxis2"].update(type="category", autorange="reversed",
                            showticklabels=len(labels) <= 24)
    layout.update(height=420, margin=dict(t=40, b=10), showlegend=False)
    return figure(data, layout)


def ablation_figure(feature: int, control: int, cosine: float,
                    control_cosine: float) -> go.Figure:
    """Cosine similarity of the sentence embedding to the original after zeroing γ and β of one
    feature in every LayerNorm: the chosen feature and a control."""
    names = [f"without feature {feature}", f"without feature {control} (control)"]
    values = [cosine, control_cosine]
    data = [dict(type="bar", x=compact(values), y=names, orientation="h", name="cosine",
                 marker=dict(color=[OKABE_ITO[5], OKABE_ITO[2]]),
                 text=[f"{v:.3f}" for v in values], textposition="outside", cliponaxis=False,
                 hovertemplate="%{y}: %{x:.4f}<extra></extra>")]
    layout = dict(height=220, margin=dict(t=30, b=10, l=10), showlegend=False,
                  xaxis=dict(range=[min(0.0, *values), 1.1],
                             title=dict(text="cosine to the original embedding")),
                  yaxis=dict(automargin=True, autorange="reversed"))
    return figure(data, layout)


def int8_figure(schemes: Sequence[str], zeroed: Sequence[float],
                relative: Sequence[float]) -> go.Figure:
    """absmax int8 of one LayerNorm input, by scheme: the share of values turned to 0 and the
    relative error over the tokens after the first."""
    layout, refs = panel_grid(["values turned to 0", "relative error (tokens after the first)"],
                              gap=0.12)
    names = list(schemes)
    colors = [OKABE_ITO[5], OKABE_ITO[0], OKABE_ITO[2]][: len(names)]
    data = [dict(type="bar", x=names, y=compact(v), marker=dict(color=colors), name=title,
                 text=[f"{x:.1%}" for x in v], textposition="outside", cliponaxis=False,
                 xaxis=xref, yaxis=yref, showlegend=False,
                 hovertemplate="%{x}: %{y:.2%}<extra></extra>")
            for v, title, (xref, yref) in ((zeroed, "turned to 0", refs[0]),
                                            (relative, "relative error", refs[1]))]
    each_axis(layout, refs, x=dict(type="category", tickangle=-20), y=dict(tickformat=".0%"))
    top = max(1.0, float(np.max(relative)) * 1.15)
    layout["yaxis"]["range"] = [0, 1.1]
    layout["yaxis2"]["range"] = [0, top]
    layout.update(height=380, margin=dict(t=40, b=10))
    return figure(data, layout)
