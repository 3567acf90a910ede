"""Figures of the ε and numerical stability lesson.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    AFTER,
    BEFORE,
    LEGEND_ABOVE,
    LEGEND_BELOW,
    OKABE_ITO,
    each_axis,
    figure,
    log_ticks,
    panel_grid,
)


def _loggable(values: np.ndarray) -> list[float | None]:
    """Values for a log axis: zeros, negatives, inf and NaN become gaps (None)."""
    return [float(v) if np.isfinite(v) and v > 0 else None for v in np.asarray(values, float)]


def _vertical(x: float, low: float, high: float, name: str, color: str, dash: str,
                  refs: tuple[str, str], showlegend: bool) -> dict:
    """A vertical marker line at ``x`` drawn as a trace, so it works on log axes."""
    return dict(type="scatter", x=[x, x], y=[low, high], mode="lines", name=name,
                legendgroup=name, showlegend=showlegend,
                line=dict(color=color, width=2, dash=dash),
                hovertemplate=f"{name}<extra></extra>", xaxis=refs[0], yaxis=refs[1])


def sweep_figure(
    eps: np.ndarray,
    max_output: np.ndarray,
    grad_norm: np.ndarray,
    variance: float,
    chosen_eps: float | None = None,
) -> go.Figure:
    """max|y| and ‖∂L/∂x‖ against ε (log–log), with ε = σ² and the chosen ε marked.

    Traces: 0 max|y|, 1 ‖∂L/∂x‖, then per panel the ε = σ² line (when σ² > 0) and the chosen-ε
    line (when one is given; hidden for ε = 0, which a log axis cannot show). Points that cannot
    sit on a log axis (0, inf, NaN) are left as gaps.
    """
    layout, refs = panel_grid(("output size max |y|", "gradient size ‖∂L/∂x‖"), gap=0.1,
                               title_size=16)
    panels = ((refs[0], max_output, "max |y|", BEFORE), (refs[1], grad_norm, "‖∂L/∂x‖", AFTER))
    data = [dict(type="scatter", x=np.asarray(eps, dtype=np.float64), y=_loggable(values),
                 mode="lines+markers", name=name, marker=dict(color=color, size=5),
                 line=dict(color=color), xaxis=ref[0], yaxis=ref[1],
                 hovertemplate="ε = %{x:.2g}<br>" + name + " = %{y:.4g}<extra></extra>")
            for ref, values, name, color in panels]
    for k, (ref, values, _, _) in enumerate(panels):
        shown = [v for v in _loggable(values) if v is not None]
        low, high = (min(shown), max(shown)) if shown else (0.1, 10.0)
        if variance > 0:
            data.append(_vertical(variance, low, high, f"ε = σ² = {variance:.3g}",
                                      OKABE_ITO[2], "dash", ref, k == 0))
        if chosen_eps is not None:
            # ε = 0 has no place on a log axis: its lines are there but hidden, so that the
            # figure has the same traces at every ε (the page's live figure moves them)
            name = f"chosen ε = {chosen_eps:.0e}" if chosen_eps else "chosen ε = 0"
            line = _vertical(chosen_eps or float(eps[0]), low, high, name, OKABE_ITO[3], "dot",
                             ref, k == 0)
            data.append({**line, "visible": chosen_eps > 0})
        if not shown:
            layout["annotations"].append(dict(
                text="0 at every ε > 0", showarrow=False, x=0.5, y=0.5,
                xref=f"{ref[0]} domain", yref=f"{ref[1]} domain"))
    each_axis(layout, refs, x=dict(log_ticks(eps), title=dict(text="ε")))
    for k, (_, values, _, _) in enumerate(panels):
        layout["yaxis" + ("" if k == 0 else str(k + 1))].update(_decade_at_least(values))
    layout.update(height=360, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def _decade_at_least(values: np.ndarray) -> dict:
    """A log y axis over ``values`` that spans at least one decade below their largest: a
    change of a few percent (the ordinary vector's max |y|, 8% lower at ε = 1) then looks as
    small as it is instead of filling the panel."""
    shown = [v for v in _loggable(values) if v is not None]
    if not shown:
        return log_ticks()
    top = math.log10(max(shown))
    bottom = min(math.log10(min(shown)), top - 1)
    return dict(log_ticks(10**bottom, 10**top), range=[bottom - 0.05, top + 0.05])


def precision_figure(values: np.ndarray, errors: dict[str, np.ndarray],
                         axis_title: str) -> go.Figure:
    """max |LN(x in dtype) − LN(x in float64)| per dtype against ``values`` (log–log).

    One trace per dtype, in the order of ``errors``; NaN (the dtype overflowed) is a gap.
    """
    symbols = ("circle", "square", "diamond", "triangle-up")
    data = []
    for i, (dtype, err) in enumerate(errors.items()):
        color = OKABE_ITO[(i + 1) % len(OKABE_ITO)]
        data.append(dict(
            type="scatter", x=np.asarray(values, dtype=np.float64), y=_loggable(err),
            mode="lines+markers", name=dtype, line=dict(color=color),
            marker=dict(color=color, size=6, symbol=symbols[i % len(symbols)]),
            hovertemplate=axis_title + " %{x:.3g}<br>max error %{y:.3g}<extra>" + dtype +
                          "</extra>",
        ))
    layout = dict(
        xaxis=dict(log_ticks(values), title=dict(text=axis_title)),
        yaxis=dict(log_ticks(*errors.values()), title=dict(text="max |y_dtype − y_float64|")),
        height=380, margin=dict(t=30, b=10), legend=LEGEND_ABOVE)
    return figure(data, layout)


def cancellation_figure(
    offsets: np.ndarray,
    relative_error: dict[str, np.ndarray],
    variances: dict[str, np.ndarray],
) -> go.Figure:
    """Relative error of each variance method against the offset from zero (log–log).

    One trace per method (in the order of ``relative_error``), then one trace marking the
    points where a method returned a negative variance, then the 100 % line. Hover shows the
    variance each method computed; an error of exactly 0 is a gap.
    """
    x = np.asarray(offsets, dtype=np.float64)
    negative_x: list[float] = []
    negative_y: list[float | None] = []
    data = []
    for i, (name, err) in enumerate(relative_error.items()):
        color = OKABE_ITO[[5, 0, 2, 3][i % 4]]
        computed = np.asarray(variances[name], dtype=np.float64)
        data.append(dict(
            type="scatter", x=x, y=_loggable(err), mode="lines+markers", name=name,
            customdata=computed, line=dict(color=color), marker=dict(color=color, size=6),
            hovertemplate="offset %{x:.3g}<br>relative error %{y:.3g}<br>"
                          "computed σ² %{customdata:.4g}<extra>" + name + "</extra>",
        ))
        below = computed < 0
        negative_x += x[below].tolist()
        negative_y += _loggable(np.asarray(err)[below])
    data.append(dict(
        type="scatter", x=negative_x, y=negative_y, mode="markers", name="σ² < 0 (impossible)",
        marker=dict(symbol="x-thin", size=14, line=dict(width=3, color=OKABE_ITO[7])),
        hoverinfo="skip",
    ))
    data.append(dict(
        type="scatter", x=[x.min(), x.max()], y=[1.0, 1.0], mode="lines", name="100 % error",
        line=dict(color="#777777", dash="dash", width=1), hoverinfo="skip",
    ))
    layout = dict(
        xaxis=dict(log_ticks(x), title=dict(text="offset from zero (values are offset + N(0, 1))")),
        yaxis=dict(log_ticks(*relative_error.values(), 1.0),
                   title=dict(text="|σ² − σ²_true| / σ²_true")),
        height=400, margin=dict(t=30, b=10), legend=LEGEND_ABOVE)
    return figure(data, layout)
