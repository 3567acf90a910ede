"""Figures of "BatchNorm in a real network": EfficientNet-Lite0's BatchNorms on photographs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import LEGEND_BELOW, OKABE_ITO, compact, figure, log_ticks

_EVAL, _TRAIN = OKABE_ITO[0], OKABE_ITO[5]


def alone_figure(eval_top: Sequence[tuple[str, float]],
                 train_top: Sequence[tuple[str, float]]) -> go.Figure:
    """The five most likely classes in eval mode and in train mode alone in the batch, side by
    side where a class is in both (one probability axis, log scale, ticks at the powers of
    ten, so that 1 in 1,000 shows beside 40% on a phone too)."""
    data = [dict(type="bar", orientation="h", y=[name for name, _ in top][::-1],
                 x=compact([p for _, p in top][::-1]), name=mode, marker=dict(color=color),
                 hovertemplate=f"%{{y}}: %{{x:.3%}}<extra>{mode}</extra>")
            for top, mode, color in ((eval_top, "eval mode", _EVAL),
                                     (train_top, "train mode, a batch of one", _TRAIN))]
    values = [p for top in (eval_top, train_top) for _, p in top] + [1e-3]
    layout = dict(height=420, margin=dict(t=20, b=10), legend=LEGEND_BELOW, barmode="group",
                  xaxis=dict(log_ticks(values, most=5), title=dict(text="probability")),
                  yaxis=dict(automargin=True),
                  shapes=[dict(type="line", xref="x", x0=1e-3, x1=1e-3, yref="paper", y0=0,
                               y1=1, line=dict(color="#555555", dash="dot", width=1.5))],
                  annotations=[dict(xref="x", x=np.log10(1e-3), yref="paper", y=1,
                                    text="1 in 1,000", showarrow=False, yanchor="bottom",
                                    xanchor="left", font=dict(size=11, color="#555555"))])
    return figure(data, layout)


def mates_figure(sizes: Sequence[int], p: np.ndarray, eval_p: float) -> go.Figure:
    """The probability of the picture's eval-mode class in train mode against the batch size:
    one faint line per draw of batch-mates, the median drawn solid, eval mode dashed and a
    uniform guess dotted (log axis)."""
    data = [dict(type="scatter", mode="lines", x=list(sizes), y=compact(row),
                 name="one draw of batch-mates", legendgroup="draws", showlegend=d == 0,
                 line=dict(color=_TRAIN, width=1), opacity=0.45,
                 hovertemplate="batch of %{x}: %{y:.3%}<extra>one draw</extra>")
            for d, row in enumerate(p)]
    data.append(dict(type="scatter", mode="lines+markers", x=list(sizes),
                     y=compact(np.median(p, axis=0)), name="median of the draws",
                     line=dict(color=_TRAIN, width=3), marker=dict(size=8),
                     hovertemplate="batch of %{x}: %{y:.3%}<extra>median</extra>"))
    for value, name, dash, color in ((eval_p, "eval mode", "dash", _EVAL),
                                     (1e-3, "1 in 1,000 (uniform)", "dot", "#555555")):
        data.append(dict(type="scatter", mode="lines", x=[sizes[0], sizes[-1]],
                         y=[value, value], name=name, line=dict(color=color, dash=dash,
                                                                  width=1.5),
                         hoverinfo="skip"))
    layout = dict(height=380, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="pictures in the batch (log scale)"), type="log",
                             tickvals=list(sizes)),
                  yaxis=dict(log_ticks(p, [eval_p, 1e-3]),
                             title=dict(text="probability of its eval-mode class")))
    return figure(data, layout)


def gaps_figure(names: Sequence[str], cost: np.ndarray, gap: np.ndarray) -> go.Figure:
    """Per BatchNorm, in forward order: what putting it alone in train mode costs the
    predictions (bars, KL in nats), and how far the batch's variance is from the running one
    (the median factor over its channels, a line on the right axis)."""
    index = list(range(len(names)))
    data = [dict(type="bar", x=index, y=compact(cost), name="cost: mean KL (nats)",
                 marker=dict(color=_TRAIN), customdata=list(names),
                 hovertemplate="%{customdata}: %{y:.3g} nats<extra></extra>"),
            dict(type="scatter", mode="lines+markers", x=index, y=compact(np.exp(gap)),
                 yaxis="y2", name="batch variance ÷ running (median factor)",
                 line=dict(color=_EVAL, width=2), marker=dict(size=5),
                 customdata=list(names),
                 hovertemplate="%{customdata}: ×%{y:.3g}<extra></extra>")]
    layout = dict(height=400, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="BatchNorm, in forward order (0: after the stem, "
                                             "48: after the head)")),
                  yaxis=dict(title=dict(text="mean KL from eval mode (nats)"),
                             rangemode="tozero"),
                  yaxis2=dict(title=dict(text="variance factor"), overlaying="y",
                              side="right", showgrid=False, rangemode="tozero",
                              tickmode="linear", tick0=0, dtick=0.5))
    return figure(data, layout)


def spread_figure(names: Sequence[str], spread: np.ndarray) -> go.Figure:
    """Per BatchNorm: its channels' running standard deviations, largest over smallest (log
    axis): how unlike each other the scales are that one per-sample σ would have to match."""
    data = [dict(type="bar", x=list(range(len(names))), y=compact(spread),
                 marker=dict(color=_EVAL), customdata=list(names), name="spread",
                 hovertemplate="%{customdata}: ×%{y:.3g}<extra></extra>")]
    layout = dict(height=340, margin=dict(t=20, b=10), showlegend=False,
                  xaxis=dict(title=dict(text="BatchNorm, in forward order")),
                  yaxis=dict(log_ticks(spread),
                             title=dict(text="largest ÷ smallest running std")))
    return figure(data, layout)
