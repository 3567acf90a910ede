"""Figures of the scale and shift (γ and β) lesson.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    AFTER,
    BEFORE,
    LEGEND_ABOVE,
    LEGEND_BELOW,
    OKABE_ITO,
    axis_ids,
    each_axis,
    figure,
    panel_grid,
)


def _histogram_panel(centres: np.ndarray, counts: np.ndarray, mean: float, std: float,
                            color: str, refs: tuple[str, str], showlegend: bool) -> list[dict]:
    """Bars of one histogram, a solid line at its mean and dotted lines at mean ± std."""
    counts = np.asarray(counts, dtype=np.int64)
    axes = dict(xaxis=refs[0], yaxis=refs[1])
    traces = [dict(type="bar", x=np.asarray(centres, dtype=np.float64), y=counts,
                   marker=dict(color=color), name="values", showlegend=False,
                   hovertemplate="value ≈ %{x:.3g}<br>count %{y}<extra></extra>", **axes)]
    top = float(counts.max()) if counts.size else 1.0
    for x, name, dash, first in ((mean, "mean", "solid", True),
                                 (mean - std, "mean ± std", "dot", True),
                                 (mean + std, "mean ± std", "dot", False)):
        traces.append(dict(
            type="scatter", x=[x, x], y=[0.0, top * 1.05], mode="lines", name=name,
            legendgroup=name, showlegend=showlegend and first, hoverinfo="skip",
            line=dict(color=OKABE_ITO[7], width=1.5, dash=dash), **axes))
    return traces


def grid_figure(
    centres: np.ndarray,
    counts: np.ndarray,
    gammas: Sequence[float],
    betas: Sequence[float],
    mean: np.ndarray,
    std: np.ndarray,
    input_hist: tuple[np.ndarray, float, float] | None = None,
) -> go.Figure:
    """One histogram of γ·x̂ + β per (γ, β): rows are γ, columns β, on a shared x axis.

    ``counts`` has shape (len(gammas), len(betas), bins). The panel with γ = 1, β = 0 (x̂
    itself) is drawn in the "after" colour. ``input_hist`` — (counts, mean, std) of the input x
    on the same bins — adds a top row with x alone, in the middle column (the formula tutorial's
    "original
    data" panel). Each panel is a bar trace followed by its three mean/std lines: the input
    first, then the grid row by row.
    """
    # "+ 0.0" turns a mean of -0.0 (rounded from a tiny negative) into a plain 0.00.
    titles = [f"γ = {g:g}, β = {b:g}:<br>mean {round(mean[i, j], 2) + 0.0:.2f},<br>"
              f"std {std[i, j]:.2f}"
              for i, g in enumerate(gammas) for j, b in enumerate(betas)]
    rows, cols = len(gammas), len(betas)
    top = 0
    if input_hist is not None:
        top = cols  # one row more; only its middle panel is drawn
        in_mean, in_std = float(input_hist[1]), float(input_hist[2])
        heading = [""] * cols
        heading[cols // 2] = (f"input x (not normalized):<br>mean {round(in_mean, 2) + 0.0:.2f},"
                              f"<br>std {in_std:.2f}")
        titles = heading + titles
    layout, refs = panel_grid(titles, rows=rows + (1 if top else 0), gap=0.05, vgap=0.1,
                              title_size=12)
    data: list[dict] = []
    if input_hist is not None:
        data += _histogram_panel(centres, input_hist[0], in_mean, in_std, OKABE_ITO[7],
                                 refs[cols // 2], False)
    for i, g in enumerate(gammas):
        for j, b in enumerate(betas):
            color = AFTER if (g, b) == (1.0, 0.0) else BEFORE
            data += _histogram_panel(centres, counts[i, j], float(mean[i, j]),
                                     float(std[i, j]), color, refs[top + i * cols + j],
                                     i == j == 0)
    # Each column shares the bottom panel's x axis; only the bottom row shows its ticks.
    axes = axis_ids(refs)
    total_rows = rows + (1 if top else 0)
    for k, (xaxis, yaxis) in enumerate(axes):
        row, col = divmod(k, cols)
        if top and row == 0 and col != cols // 2:
            layout[xaxis]["visible"] = layout[yaxis]["visible"] = False
            continue
        if row < total_rows - 1:
            layout[xaxis].update(matches=refs[(total_rows - 1) * cols + col][0],
                                 showticklabels=False)
        else:
            layout[xaxis]["title"] = dict(text="value")
        if col == 0 or (top and row == 0):
            layout[yaxis]["title"] = dict(text="count")
    layout.update(height=220 * total_rows + 80, bargap=0.05, margin=dict(t=40, b=10),
                  legend=LEGEND_BELOW)
    return figure(data, layout)


def _fixed3(value: float) -> str:
    """``value`` to three decimals, a tiny negative one as 0.000 rather than -0.000."""
    text = f"{value:.3f}"
    return "0.000" if text == "-0.000" else text


def histogram_figure(centres: np.ndarray, counts: np.ndarray, mean: float, std: float,
                            gamma: float, beta: float) -> go.Figure:
    """One histogram of γ·x̂ + β with its mean and mean ± std marked (trace 0: the bars)."""
    centres = np.asarray(centres, dtype=np.float64)
    data = _histogram_panel(centres, counts, mean, std, AFTER, ("x", "y"), True)
    layout = dict(
        title=dict(text=f"γ = {gamma:g}, β = {beta:g} → mean {_fixed3(mean)}, std "
                        f"{_fixed3(std)}"),
        height=340, bargap=0.05, margin=dict(t=50, b=10), legend=LEGEND_BELOW,
        xaxis=dict(title=dict(text="value γ·x̂ + β")), yaxis=dict(title=dict(text="count")),
    )
    if centres.size:
        layout["xaxis"]["range"] = [float(centres[0]), float(centres[-1])]
    return figure(data, layout)


def feature_figure(output: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                          mean: np.ndarray, std: np.ndarray) -> go.Figure:
    """Each feature's output values, its target β_c ± |γ_c| and its actual mean ± std.

    Traces: 0 the values (a strip per feature, spread sideways so that they do not overlap),
    1 the targets, 2 the measured mean ± std.
    """
    output = np.asarray(output, dtype=np.float64)
    n, c = output.shape
    spread = np.linspace(-0.18, 0.18, n) if n > 1 else np.zeros(1)
    x = (np.arange(c)[None, :] - 0.1 + spread[:, None]).ravel()
    data = [dict(type="scatter", x=x, y=output.ravel(), mode="markers", name="output y",
                 marker=dict(color=BEFORE, size=6, opacity=0.6),
                 hovertemplate="y = %{y:.4g}<extra></extra>")]
    for offset, centre, half, name, color, symbol in (
        (0.25, beta, np.abs(gamma), "target β_c ± |γ_c|", OKABE_ITO[2], "diamond"),
        (0.4, mean, std, "actual mean ± std", AFTER, "circle"),
    ):
        data.append(dict(
            type="scatter", x=np.arange(c) + offset, y=np.asarray(centre, dtype=np.float64),
            mode="markers", name=name, marker=dict(color=color, size=11, symbol=symbol),
            error_y=dict(type="data", array=np.asarray(half, dtype=np.float64), width=6,
                         thickness=2, color=color),
            hovertemplate="%{y:.4g} ± %{error_y.array:.4g}<extra>" + name + "</extra>",
        ))
    layout = dict(
        xaxis=dict(tickmode="array", tickvals=list(range(c)),
                   ticktext=[f"feature {i}" for i in range(c)]),
        yaxis=dict(title=dict(text="value")),
        height=380, margin=dict(t=30, b=10), legend=LEGEND_ABOVE)
    return figure(data, layout)


def recovery_figure(x: np.ndarray, outputs: dict[str, np.ndarray],
                           errors: dict[str, float]) -> go.Figure:
    """y against x for each way of undoing a normalization; the diagonal y = x is recovery.

    One marker trace per entry of ``outputs`` (named with its max |y − x|), then the diagonal.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    # Open circles around small diamonds, so two exact recoveries on the diagonal both show.
    styles = (("circle-open", 14), ("x-thin", 11), ("diamond", 6))
    data = []
    for i, (name, y) in enumerate(outputs.items()):
        color = OKABE_ITO[[2, 5, 0][i % 3]]
        symbol, size = styles[i % 3]
        data.append(dict(
            type="scatter", x=x, y=np.asarray(y, dtype=np.float64).ravel(), mode="markers",
            name=f"{name}: max |y − x| = {errors[name]:.2g}",
            marker=dict(color=color, size=size, symbol=symbol,
                        line=dict(width=2, color=color)),
            hovertemplate="x = %{x:.4g}<br>y = %{y:.4g}<extra>" + name + "</extra>",
        ))
    low, high = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
    data.append(dict(type="scatter", x=[low, high], y=[low, high], mode="lines", name="y = x",
                     line=dict(color="#777777", dash="dash", width=1), hoverinfo="skip"))
    layout = dict(xaxis=dict(title=dict(text="input x")),
                  yaxis=dict(title=dict(text="output y with the recovering γ, β")),
                  height=420, margin=dict(t=30, b=10), legend=LEGEND_ABOVE)
    return figure(data, layout)


def two_betas_figure(beta1: np.ndarray, beta2: np.ndarray, separate: np.ndarray,
                            merged: np.ndarray) -> go.Figure:
    """Left: β₁, β₂ and their sum per unit (traces 0–2). Right: the gate pre-activations of
    one sample with two betas (trace 3) and with one merged bias (trace 4)."""
    units = [str(u) for u in range(len(beta1))]
    layout, refs = panel_grid(("the two betas, and their sum",
                                "LN(Wx; β₁) + LN(Uh; β₂) vs LN(Wx) + LN(Uh) + (β₁ + β₂)"),
                               gap=0.08, title_size=12)
    left = dict(xaxis=refs[0][0], yaxis=refs[0][1])
    right = dict(xaxis=refs[1][0], yaxis=refs[1][1])
    data = [dict(type="bar", x=units, y=np.asarray(values, dtype=np.float64), name=name,
                 marker=dict(color=color), **left)
            for values, name, color in ((beta1, "β₁", BEFORE), (beta2, "β₂", AFTER),
                                        (np.asarray(beta1) + np.asarray(beta2), "β₁ + β₂",
                                         OKABE_ITO[2]))]
    data.append(dict(type="scatter", x=units, y=np.asarray(separate, dtype=np.float64),
                     mode="markers", name="two betas",
                     marker=dict(color=OKABE_ITO[5], size=12, symbol="circle-open",
                                 line=dict(width=2)), **right))
    data.append(dict(type="scatter", x=units, y=np.asarray(merged, dtype=np.float64),
                     mode="lines+markers", name="one bias",
                     marker=dict(color=OKABE_ITO[0], size=5),
                     line=dict(color=OKABE_ITO[0], width=1), **right))
    each_axis(layout, refs, x=dict(title=dict(text="gate unit")))
    layout.update(height=360, barmode="group", margin=dict(t=40, b=10),
                  legend=LEGEND_BELOW)
    return figure(data, layout)
