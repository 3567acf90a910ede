"""Figures of the training lesson: LN-LSTM vs LSTM.

A series is a model at one setting ("LN-LSTM", or "LN-LSTM · lr 0.1" in a sweep): its colour is
its model's, its dash its setting's, and where it was trained from several seeds, a shaded band
runs from the lowest seed to the highest around the line.
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


#: Line styles of a sweep's settings, in the order the settings come.
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot", "5px,2px")


def _color(label: str, index: int) -> str:
    """A series' colour: its model's (the label before " · " or " ("), else one of the
    palette's."""
    model = label.split(" · ")[0].split(" (")[0]
    return COLORS.get(model, OKABE_ITO[(index + 3) % len(OKABE_ITO)])


def _dashes(labels: Sequence[str]) -> dict[str, str]:
    """Each label's dash: one per setting (the part after " · "), solid without one."""
    settings = list(dict.fromkeys(label.split(" · ", 1)[1] for label in labels
                                  if " · " in label))
    return {label: DASHES[settings.index(label.split(" · ", 1)[1]) % len(DASHES)]
            if " · " in label else "solid" for label in labels}


def _translucent(color: str, alpha: float = 0.18) -> str:
    """"#0072B2" as "rgba(0, 114, 178, 0.18)"."""
    r, g, b = (int(color[k:k + 2], 16) for k in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


def _band(x: np.ndarray, low: Sequence[float], high: Sequence[float], label: str, color: str,
          axes: dict) -> list[dict]:
    """The shaded range between ``low`` and ``high``: two edge traces, the second filled down
    to the first, named for the lowest and the highest seed (their numbers go in the tables)."""
    edge = dict(type="scatter", x=x, mode="lines", line=dict(width=0, color=color),
                legendgroup=label, showlegend=False, **axes)
    return [dict(edge, y=np.asarray(low, dtype=np.float64), name=f"{label} (lowest seed)"),
            dict(edge, y=np.asarray(high, dtype=np.float64), name=f"{label} (highest seed)",
                 fill="tonexty", fillcolor=_translucent(color))]


def _hline(y: float, refs: tuple[str, str]) -> dict:
    """A dotted grey horizontal line across one panel, at height ``y``."""
    return dict(type="line", xref=f"{refs[0]} domain", x0=0, x1=1, yref=refs[1], y0=y, y1=y,
                line=dict(color="#777777", dash="dot", width=1))


def curves_figure(
    curves: dict[str, dict[str, Sequence[float]]],
    total_steps: int | None = None,
    chance: float | None = None,
) -> go.Figure:
    """Training loss and held-out accuracy against the step, one line per series.

    ``curves`` maps a series label to its ``step``, ``loss`` and ``accuracy`` lists (as
    :func:`lnviz.train.seed_band` makes them: means over the seeds), and, where it
    has them, ``loss_low``/``loss_high`` and ``accuracy_low``/``accuracy_high``, drawn as a band
    around the line. ``total_steps`` fixes the x range, so that a chart redrawn while training
    grows into it instead of rescaling; ``chance`` draws the accuracy of guessing
    (1 / classes) as a dotted line.
    """
    layout, refs = panel_grid(("training loss (mean since the previous point)",
                                "held-out accuracy"), gap=0.1, title_size=16)
    dashes = _dashes(list(curves))
    data = []
    for index, (label, curve) in enumerate(curves.items()):
        color = _color(label, index)
        steps = np.asarray(curve["step"], dtype=np.int64)
        for k, ((xref, yref), field) in enumerate(zip(refs, ("loss", "accuracy"), strict=True)):
            axes = dict(xaxis=xref, yaxis=yref)
            if f"{field}_low" in curve:
                data += _band(steps, curve[f"{field}_low"], curve[f"{field}_high"], label,
                              color, axes)
            data.append(dict(
                type="scatter", x=steps, y=np.asarray(curve[field], dtype=np.float64),
                mode="lines+markers", name=label, legendgroup=label, showlegend=k == 0,
                line=dict(color=color, width=2, dash=dashes[label]), marker=dict(size=4),
                **axes))
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
    layout.update(height=340 + 20 * (len(curves) // 4), margin=dict(t=40, b=10),
                  legend=LEGEND_BELOW)
    return figure(data, layout)


def grad_norm_figure(step_grad_norm: dict[str, Sequence[float]],
                     low: dict[str, Sequence[float]] | None = None,
                     high: dict[str, Sequence[float]] | None = None) -> go.Figure:
    """‖∇θ‖₂, the norm of all parameter gradients, at every step, one line per series, on a log
    axis so that a spike and a slow drift both stay visible. ``low`` and ``high`` (per series,
    the lowest and highest seed at every step) add a band around each line."""
    dashes = _dashes(list(step_grad_norm))
    data = []
    for index, (label, norms) in enumerate(step_grad_norm.items()):
        values = np.asarray(norms, dtype=np.float64)
        steps = np.arange(1, values.size + 1)
        color = _color(label, index)
        if low is not None and high is not None and label in low:
            data += _band(steps, low[label], high[label], label, color, {})
        data.append(dict(type="scatter", x=steps, y=values, mode="lines", name=label,
                         legendgroup=label,
                         line=dict(color=color, width=1, dash=dashes[label])))
    layout = dict(height=300, margin=dict(t=30, b=10), xaxis=dict(title=dict(text="step")),
                  yaxis=dict(title=dict(text="gradient norm ‖∇θ‖₂"), type="log", dtick=1,
                             exponentformat="power"),
                  legend=LEGEND_BELOW)
    return figure(data, layout)


def sweep_figure(
    values: Sequence[float],
    accuracy: dict[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    setting: str,
    log_x: bool = False,
    chance: float | None = None,
) -> go.Figure:
    """Final held-out accuracy against a swept setting, one line per model.

    ``accuracy`` maps a model's label to (mean, lowest seed, highest seed), one entry per value
    of ``values``; the seed range is drawn as error bars. ``setting`` titles the x axis
    ("learning rate"), on a log scale with ``log_x``.
    """
    x = np.asarray(values, dtype=np.float64)
    data = []
    for index, (label, (mean, lowest, highest)) in enumerate(accuracy.items()):
        mean, lowest, highest = (np.asarray(a, dtype=np.float64)
                                 for a in (mean, lowest, highest))
        color = _color(label, index)
        data.append(dict(
            type="scatter", x=x, y=mean, mode="lines+markers", name=label,
            line=dict(color=color, width=2), marker=dict(size=7),
            error_y=dict(type="data", symmetric=False, array=highest - mean,
                         arrayminus=mean - lowest, color=color, thickness=1.5, width=5)))
    layout = dict(height=320, margin=dict(t=30, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text=setting), type="log" if log_x else "linear",
                             tickvals=x, ticktext=[f"{v:g}" for v in x]),
                  yaxis=dict(title=dict(text="final held-out accuracy"), tickformat=".0%",
                             range=[0, 1.02]))
    if chance is not None:
        layout["shapes"] = [_hline(chance, ("x", "y"))]
    return figure(data, layout)


def length_figure(
    lengths: Sequence[int],
    train_length: int,
    accuracy: dict[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    batch_statistics: dict[str, Sequence[float]],
    running_var: dict[str, Sequence[float]],
    chance: float | None = None,
) -> go.Figure:
    """Held-out accuracy against the test sequence length, and (with a BN-LSTM) the running
    statistics it normalizes each time step with.

    ``accuracy`` maps a series to (mean, lowest seed, highest seed) at each of ``lengths``;
    ``batch_statistics`` the BN-LSTM series to their mean accuracy when each step is normalized
    with the test batch's own statistics (dashed). ``running_var`` maps the BN-LSTM series to
    the running variance of c at each of the ``train_length`` steps: the left panel, which
    shows that steps beyond ``train_length`` have none. A dotted line marks ``train_length``.
    """
    titles = ["held-out accuracy, read with blank rows above"]
    if running_var:
        titles.insert(0, "BN-LSTM: running variance of c, per step")
    layout, refs = panel_grid(titles, gap=0.12, title_size=15)
    dashes = _dashes(list(accuracy))
    data, shapes = [], []
    x_max = max(lengths) + 0.5
    if running_var:
        for index, (label, var) in enumerate(running_var.items()):
            var = np.asarray(var, dtype=np.float64)
            data.append(dict(type="bar", x=np.arange(1, var.size + 1), y=var,
                             name=f"{label} running var(c)", showlegend=False,
                             marker=dict(color=_color(label, index)), opacity=0.8,
                             xaxis=refs[0][0], yaxis=refs[0][1]))
        layout["xaxis"].update(title=dict(text="time step t"), range=[0.5, x_max])
        layout["yaxis"].update(title=dict(text="mean over units"), rangemode="tozero")
    xref, yref = refs[-1]
    axes = dict(xaxis=xref, yaxis=yref)
    steps = np.asarray(lengths, dtype=np.int64)
    for index, (label, (mean, lowest, highest)) in enumerate(accuracy.items()):
        color = _color(label, index)
        if not np.array_equal(np.asarray(lowest), np.asarray(highest)):
            data += _band(steps, lowest, highest, label, color, axes)
        data.append(dict(type="scatter", x=steps, y=np.asarray(mean, dtype=np.float64),
                         mode="lines+markers", name=label, legendgroup=label,
                         line=dict(color=color, width=2, dash=dashes[label]), **axes))
    for index, (label, mean) in enumerate(batch_statistics.items()):
        color = _color(label, index)
        data.append(dict(type="scatter", x=steps, y=np.asarray(mean, dtype=np.float64),
                         mode="lines+markers", name=f"{label}, test batch's statistics",
                         line=dict(color=color, width=2, dash="dot"),
                         marker=dict(symbol="circle-open", size=8), **axes))
    for ref in refs:
        shapes.append(dict(type="line", xref=ref[0], x0=train_length + 0.5,
                           x1=train_length + 0.5, yref=f"{ref[1]} domain", y0=0, y1=1,
                           line=dict(color="#777777", dash="dot", width=1)))
    layout["annotations"].append(dict(
        text=f"trained on {train_length} steps", xref=xref, x=train_length + 0.5,
        xanchor="left", yref=f"{yref} domain", y=0.02, yanchor="bottom", showarrow=False,
        font=dict(size=11)))
    if chance is not None:
        shapes.append(_hline(chance, refs[-1]))
    x_axis = "xaxis" if len(refs) == 1 else "xaxis2"
    y_axis = "yaxis" if len(refs) == 1 else "yaxis2"
    layout[x_axis].update(title=dict(text="test sequence length (steps)"), range=[0.5, x_max])
    layout[y_axis].update(range=[0, 1.02], tickformat=".0%")
    layout.update(shapes=shapes, height=340, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def gates_figure(
    quantiles: dict[str, np.ndarray], saturation: float | None = 4.0
) -> go.Figure:
    """The spread of the gate pre-activations at each time step, one panel per model.

    ``quantiles`` maps a model label to a (T, 5) array of the 5 %, 25 %, 50 %, 75 % and 95 %
    quantiles at every step (a row of :func:`lnviz.train.gate_quantiles`). Each panel
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
