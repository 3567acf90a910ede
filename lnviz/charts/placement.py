"""Figures of "Where the norm sits": every placement of the norms on the Shapes lesson's stack at
initialization, and one real attention head with and without QK-norm as its logits grow."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    AFTER,
    BEFORE,
    BLUES,
    LEGEND_BELOW,
    OKABE_ITO,
    axis_ids,
    compact,
    figure,
    log_ticks,
    panel_grid,
    token_labels,
    variant_color,
)


def placement_figure(variance: dict[str, np.ndarray], gradient: dict[str, np.ndarray],
                     own_scale: Sequence[str] = ("none",)) -> go.Figure:
    """One column per placement, on log axes: the residual stream's variance after each block
    (top; block 0 = the input) and each block's gradient norm at initialization (bottom). Each
    row shares one range, except the placements in ``own_scale`` (whose values would squash
    the rest), which get their own. Overflowed values (NaN) leave a gap."""
    names = list(variance)
    titles = [v + (" (own scale)" if v in own_scale else "") for v in names] + [""] * len(names)
    layout, refs = panel_grid(titles, rows=2, gap=0.035, vgap=0.1, title_size=13)
    data = []
    for k, v in enumerate(names):
        color = variant_color(v)
        top, bottom = refs[k], refs[k + len(names)]
        var, grad = (np.asarray(a, dtype=np.float64) for a in (variance[v], gradient[v]))
        data.append(dict(type="scatter", mode="lines+markers", x=np.arange(len(var)),
                         y=compact(var), name=v, line=dict(color=color, width=2),
                         marker=dict(size=3), xaxis=top[0], yaxis=top[1],
                         hovertemplate="after block %{x}: variance %{y:.3g}<extra>" + v
                                       + "</extra>"))
        data.append(dict(type="scatter", mode="lines+markers", x=np.arange(1, len(grad) + 1),
                         y=compact(grad), name=v, showlegend=False,
                         line=dict(color=color, width=2, dash="dot"), marker=dict(size=3),
                         xaxis=bottom[0], yaxis=bottom[1],
                         hovertemplate="block %{x}: ‖∂L/∂θ‖ %{y:.3g}<extra>" + v
                                       + "</extra>"))
    shared = [v for v in names if v not in own_scale]
    rows = ({v: variance[v] for v in names}, {v: gradient[v] for v in names})
    for i, (xaxis, yaxis) in enumerate(axis_ids(refs)):
        row, name = divmod(i, len(names))
        name = names[name]
        arrays = [rows[row][name]] if name in own_scale else [rows[row][v] for v in shared]
        layout[xaxis].update(title=dict(text="block") if row == 1 else None)
        # a panel on its own scale labels its ticks on its right, clear of its neighbour
        layout[yaxis].update(log_ticks(*arrays),
                             showticklabels=name in own_scale or name == shared[0],
                             side="right" if name in own_scale else "left")
        values = np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in arrays])
        values = values[np.isfinite(values) & (values > 0)]
        if values.size:
            layout[yaxis]["range"] = [np.log10(values.min() / 1.5), np.log10(values.max() * 1.5)]
    layout["yaxis"]["title"] = dict(text="stream variance (RMS²)")
    layout[f"yaxis{len(names) + 1}"]["title"] = dict(text="gradient ‖∂L/∂θ‖")
    layout.update(height=540, margin=dict(t=40, b=10), showlegend=False)
    return figure(data, layout)


def entropy_figure(scales: np.ndarray, without: np.ndarray, with_norm: np.ndarray,
                   uniform: float, chosen: float) -> go.Figure:
    """Mean attention entropy of one head against the scale c of W_q and W_k (log x), without
    and with QK-norm, with the uniform attention's entropy (ln T) and the chosen c marked. Both
    measured curves are solid, with a marker at each measured c; only the reference ln T is
    dashed."""
    data = [dict(type="scatter", mode="lines+markers", x=compact(scales), y=compact(values),
                 name=name, line=dict(color=color, width=3), marker=dict(size=7, symbol=symbol),
                 hovertemplate="c = %{x:.3g}: entropy %{y:.3f} nats<extra>" + name
                               + "</extra>")
            for values, name, color, symbol in ((without, "without QK-norm", BEFORE, "circle"),
                                                (with_norm, "with QK-norm", AFTER, "square"))]
    layout = dict(
        height=380, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
        xaxis=dict(log_ticks(scales), title=dict(text="scale c of W_q and W_k")),
        yaxis=dict(title=dict(text="attention entropy (nats)"), range=[0, uniform * 1.3]),
        shapes=[dict(type="line", xref="x domain", yref="y", x0=0, x1=1, y0=uniform,
                     y1=uniform, line=dict(color="#333333", dash="dash")),
                dict(type="line", xref="x", yref="y domain", x0=chosen, x1=chosen, y0=0, y1=1,
                     line=dict(color="#333333", width=1))],
        annotations=[dict(xref="x domain", yref="y", x=0, y=uniform, xanchor="left",
                          yanchor="bottom", showarrow=False,
                          text=f"uniform over the tokens: ln T = {uniform:.2f}"),
                     # at the top, a line above ln T's label (the headroom is for both):
                     # the curves' markers run along the bottom
                     dict(xref="x", yref="y domain", x=float(np.log10(chosen)), y=1,
                          xanchor="left", yanchor="top", showarrow=False,
                          text=f" c = {chosen:g}")])
    return figure(data, layout)


def attention_pair_figure(tokens: Sequence[str], without: np.ndarray, with_norm: np.ndarray,
                          scale: float) -> go.Figure:
    """The head's attention at one scale c (query rows × key columns, 0 to 1), without and
    with QK-norm, side by side."""
    layout, refs = panel_grid([f"without QK-norm, c = {scale:g}",
                               f"with QK-norm, c = {scale:g}"], gap=0.06)
    labels = token_labels(tokens[: without.shape[0]])
    data = [dict(type="heatmap", z=compact(grid), x=labels, y=labels, name=name,
                 xaxis=ref[0], yaxis=ref[1], colorscale=BLUES, zmin=0, zmax=1,
                 showscale=False, hovertemplate="%{y} → %{x}: %{z:.3f}<extra>" + name
                                                + "</extra>")
            for grid, ref, name in ((without, refs[0], "without"), (with_norm, refs[1], "with"))]
    show = len(labels) <= 24
    for i, (xaxis, yaxis) in enumerate(axis_ids(refs)):
        layout[xaxis].update(type="category", showticklabels=show, tickangle=-60)
        layout[yaxis].update(type="category", autorange="reversed",
                             showticklabels=show and i == 0)
    layout.update(height=420, margin=dict(t=40, b=10), showlegend=False)
    return figure(data, layout)


def scale_figure(labels: Sequence[str], weight_norm: Sequence[np.ndarray],
                 effective_lr: Sequence[np.ndarray], loss: Sequence[np.ndarray]) -> go.Figure:
    """Training runs side by side, one colour each: ‖W‖ (left), the effective learning rate
    η/‖W‖² on a log axis (middle) and the smoothed mini-batch loss (right), against the step."""
    layout, refs = panel_grid(["‖W‖", "effective learning rate η/‖W‖²", "loss (running mean)"],
                              gap=0.08)
    data = []
    for k, label in enumerate(labels):
        color = OKABE_ITO[k % len(OKABE_ITO)]
        for (xref, yref), values, start, name in (
                (refs[0], weight_norm[k], 0, "‖W‖"), (refs[1], effective_lr[k], 0, "η/‖W‖²"),
                (refs[2], loss[k], 1, "loss")):
            values = np.asarray(values, dtype=np.float64)
            data.append(dict(type="scatter", mode="lines", x=np.arange(start, start + len(values)),
                             y=compact(values), name=label, legendgroup=label,
                             showlegend=name == "‖W‖", line=dict(color=color, width=2),
                             xaxis=xref, yaxis=yref,
                             hovertemplate="step %{x}: " + name + " %{y:.3g}<extra>" + label
                                           + "</extra>"))
    for xaxis, _ in axis_ids(refs):
        layout[xaxis].update(title=dict(text="step"))
    layout["yaxis2"].update(log_ticks(*effective_lr))
    layout["yaxis"].update(rangemode="tozero")
    layout["yaxis3"].update(rangemode="tozero")
    layout.update(height=400, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def growth_figure(curves: dict[str, dict[str, list[float]]]) -> go.Figure:
    """A training race's ‖W‖ (left) and the mean square of the stream leaving the last block
    (right, log axis) before each step, one line per placement."""
    layout, refs = panel_grid(["‖W‖, every block's matrices", "stream's mean square, last block"],
                              gap=0.1)
    data = []
    for entrant, curve in curves.items():
        color = variant_color(entrant)
        for (xref, yref), key, name in ((refs[0], "weight norm", "‖W‖"),
                                        (refs[1], "stream", "mean square")):
            values = np.asarray(curve[key], dtype=np.float64)
            data.append(dict(type="scatter", mode="lines", x=np.arange(len(values)),
                             y=compact(values), name=entrant, legendgroup=entrant,
                             showlegend=key == "stream", line=dict(color=color, width=2),
                             xaxis=xref, yaxis=yref,
                             hovertemplate=f"step %{{x}}: {name} %{{y:.4g}}<extra>{entrant}"
                                           "</extra>"))
    for xaxis, _ in axis_ids(refs):
        layout[xaxis]["title"] = dict(text="step")
    streams = [curve["stream"] for curve in curves.values()]
    layout["yaxis2"].update(log_ticks(*streams))
    layout.update(height=360, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)
