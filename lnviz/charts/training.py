"""Figures of the training lesson: LN-LSTM vs LSTM.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    AFTER,
    BEFORE,
    LEGEND_BELOW,
    OKABE_ITO,
    axis_ids,
    each_axis,
    figure,
    panel_grid,
)

#: One colour per model of the training page: the plain LSTM in the "before" blue, the LN-LSTM in
#: the "after" orange, the BN-LSTM in green.
COLORS = {"LSTM": BEFORE, "LN-LSTM": AFTER, "BN-LSTM": OKABE_ITO[2]}


def _color(label: str, index: int) -> str:
    return COLORS.get(label, OKABE_ITO[(index + 3) % len(OKABE_ITO)])


def _hline(y: float, refs: tuple[str, str]) -> dict:
    """A dotted grey horizontal line across one panel, at height ``y``."""
    return dict(type="line", xref=f"{refs[0]} domain", x0=0, x1=1, yref=refs[1], y0=y, y1=y,
                line=dict(color="#777777", dash="dot", width=1))


def curves_figure(
    curves: dict[str, dict[str, Sequence[float]]],
    total_steps: int | None = None,
    chance: float | None = None,
) -> go.Figure:
    """Training loss and held-out accuracy against the step, one line per model.

    ``curves`` maps a model label to its ``step``, ``loss`` and ``accuracy`` lists (as
    :attr:`lnviz.lessons.training.ModelRun.curve` holds them). ``total_steps`` fixes the x range,
    so that a
    chart redrawn while training grows into it instead of rescaling; ``chance`` draws the
    accuracy of guessing (1 / classes) as a dotted line.
    """
    layout, refs = panel_grid(("training loss (mean since the previous point)",
                                "held-out accuracy"), gap=0.1, title_size=16)
    data = []
    for index, (label, curve) in enumerate(curves.items()):
        color = _color(label, index)
        steps = np.asarray(curve["step"], dtype=np.int64)
        for k, ((xref, yref), field) in enumerate(zip(refs, ("loss", "accuracy"), strict=True)):
            data.append(dict(
                type="scatter", x=steps, y=np.asarray(curve[field], dtype=np.float64),
                mode="lines+markers", name=label, legendgroup=label, showlegend=k == 0,
                line=dict(color=color, width=2), marker=dict(size=4), xaxis=xref, yaxis=yref))
    if chance is not None:
        layout["shapes"] = [_hline(chance, refs[1])]
        layout["annotations"].append(dict(
            text="chance", xref=f"{refs[1][0]} domain", x=1, xanchor="right", yref=refs[1][1],
            y=chance, yanchor="top", showarrow=False))
    each_axis(layout, refs, x=dict(title=dict(text="step")))
    if total_steps:
        each_axis(layout, refs, x=dict(range=[0, total_steps * 1.02]))
    layout["yaxis"]["rangemode"] = "tozero"
    layout["yaxis2"].update(range=[0, 1.02], tickformat=".0%")
    layout.update(height=340, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def grad_norm_figure(step_grad_norm: dict[str, Sequence[float]]) -> go.Figure:
    """‖∇θ‖₂, the norm of all parameter gradients, at every step, one line per model, on a log
    axis so that a spike and a slow drift both stay visible."""
    data = []
    for index, (label, norms) in enumerate(step_grad_norm.items()):
        values = np.asarray(norms, dtype=np.float64)
        data.append(dict(type="scatter", x=np.arange(1, values.size + 1), y=values,
                         mode="lines", name=label,
                         line=dict(color=_color(label, index), width=1)))
    layout = dict(height=300, margin=dict(t=30, b=10), xaxis=dict(title=dict(text="step")),
                  yaxis=dict(title=dict(text="gradient norm ‖∇θ‖₂"), type="log", dtick=1,
                             exponentformat="power"),
                  legend=LEGEND_BELOW)
    return figure(data, layout)


def gates_figure(
    quantiles: dict[str, np.ndarray], saturation: float | None = 4.0
) -> go.Figure:
    """The spread of the gate pre-activations at each time step, one panel per model.

    ``quantiles`` maps a model label to a (T, 5) array of the 5 %, 25 %, 50 %, 75 % and 95 %
    quantiles at every step (a row of :func:`lnviz.lessons.training.gate_quantiles`). Each panel
    draws the
    5–95 % band light, the 25–75 % band darker and the median as a line; the y axis is shared, so
    a model whose sums wander off shows it at once. ``saturation`` marks ±that value, beyond
    which σ is flat (σ′(4) ≈ 0.018): a pre-activation out there passes almost no gradient.
    """
    labels = list(quantiles)
    layout, refs = panel_grid(labels or [""], gap=0.03, title_size=16)
    data = []
    shapes = []
    for index, (label, (xref, yref)) in enumerate(zip(labels, refs, strict=False)):
        q = np.asarray(quantiles[label], dtype=np.float64)
        steps = np.arange(1, q.shape[0] + 1)
        color = _color(label, index)
        axes = dict(xaxis=xref, yaxis=yref)
        for low, high, opacity, band in ((0, 4, 0.18, "5–95 %"), (1, 3, 0.4, "25–75 %")):
            data.append(dict(
                type="scatter", x=np.concatenate([steps, steps[::-1]]),
                y=np.concatenate([q[:, high], q[::-1, low]]), fill="toself", mode="lines",
                line=dict(width=0), fillcolor=color, opacity=opacity, hoverinfo="skip",
                name=f"{label} {band}", showlegend=False, **axes))
        data.append(dict(type="scatter", x=steps, y=q[:, 2], mode="lines+markers",
                         name=f"{label} median", line=dict(color=color, width=2),
                         showlegend=False, **axes))
        if saturation:
            shapes += [_hline(level, (xref, yref)) for level in (saturation, -saturation)]
        xaxis, yaxis = axis_ids([(xref, yref)])[0]
        layout[xaxis].update(title=dict(text="time step t"), dtick=max(1, len(steps) // 8))
        if index:  # one y axis for all panels
            layout[yaxis].update(matches="y", showticklabels=False)
    layout["yaxis"]["title"] = dict(text="pre-activation z")
    layout.update(shapes=shapes, height=340, margin=dict(t=40, b=10))
    return figure(data, layout)
