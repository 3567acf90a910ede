"""Figures of "Inside Gemma 3": sandwich norms, QK-norm and the final norm's γ of Gemma 3 270M
on one prompt."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import LEGEND_BELOW, OKABE_ITO, compact, figure, log_ticks

#: A colour per sublayer, and per design (the three designs' figure).
_SUBLAYER = {"attention": OKABE_ITO[0], "feed-forward": OKABE_ITO[5]}
_DESIGN = (OKABE_ITO[1], OKABE_ITO[2], OKABE_ITO[3])


def sandwich_figure(raw: dict[str, np.ndarray], added: dict[str, np.ndarray],
                    gamma: dict[str, np.ndarray]) -> go.Figure:
    """Per block and sublayer (log axis): the RMS of the raw output (dotted), of what the
    post-norm adds to the stream (solid, markers), and of the post-norm's multiplier 1 + γ
    (dashed)."""
    data = []
    for sublayer, color in _SUBLAYER.items():
        blocks = np.arange(len(raw[sublayer]))
        for values, what, dash, marker in ((raw[sublayer], "raw output", "dot", 4),
                                           (added[sublayer], "added to the stream", "solid", 8),
                                           (gamma[sublayer], "post-norm's 1 + γ", "dash", 0)):
            name = f"{sublayer}: {what}"
            data.append(dict(type="scatter", mode="lines+markers" if marker else "lines",
                             x=blocks, y=compact(values), name=name,
                             line=dict(color=color, width=2, dash=dash),
                             marker=dict(size=marker),
                             hovertemplate=f"block %{{x}}: RMS %{{y:.4g}}<extra>{name}"
                                           "</extra>"))
    values = [v for part in (raw, added, gamma) for v in part.values()]
    layout = dict(height=420, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="block"), dtick=1),
                  yaxis=dict(log_ticks(*values),
                             title=dict(text="RMS (median token; γ: over its 640 values)")))
    return figure(data, layout)


def designs_figure(streams: dict[str, np.ndarray]) -> go.Figure:
    """Each design's residual stream through depth (the median ordinary token's RMS, log
    axis), against the share of the model's depth, so that 6 layers, 30 and 18 blocks line
    up."""
    data = [dict(type="scatter", mode="lines+markers", x=np.linspace(0, 1, len(values)),
                 y=compact(values), name=design, line=dict(color=color, width=2),
                 marker=dict(size=6), customdata=np.arange(len(values)),
                 hovertemplate=f"point %{{customdata}}: RMS %{{y:.4g}}<extra>{design}</extra>")
            for (design, values), color in zip(streams.items(), _DESIGN, strict=True)]
    layout = dict(height=380, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="depth (share of the model's blocks)"),
                             tickformat=".0%"),
                  yaxis=dict(log_ticks(*streams.values()),
                             title=dict(text="RMS of the median ordinary token")))
    return figure(data, layout)


def qk_figure(trained: np.ndarray, without: np.ndarray) -> go.Figure:
    """Per block, the largest |attention logit| with q_norm and k_norm as trained and replaced
    by the identity (log axis): both measured, both drawn solid with markers."""
    blocks = np.arange(len(trained))
    data = [dict(type="scatter", mode="lines+markers", x=blocks, y=compact(values), name=name,
                 line=dict(color=color, width=2), marker=dict(size=8, symbol=symbol),
                 hovertemplate=f"block %{{x}}: %{{y:.4g}}<extra>{name}</extra>")
            for values, name, color, symbol in (
                (trained, "q_norm and k_norm as trained", OKABE_ITO[0], "circle"),
                (without, "q_norm and k_norm removed", OKABE_ITO[5], "diamond"))]
    layout = dict(height=380, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="block"), dtick=1),
                  yaxis=dict(log_ticks(trained, without),
                             title=dict(text="largest |attention logit|")))
    return figure(data, layout)


def final_gamma_figure(gamma: np.ndarray, peak: np.ndarray, marked: Sequence[int]) -> go.Figure:
    """Each feature of the final norm: its multiplier 1 + γ against the largest |x| the
    stream brings it (both log axes), the ``marked`` features labelled."""
    features = np.arange(len(gamma))
    marked = list(marked)
    data = [dict(type="scatter", mode="markers", x=compact(peak), y=compact(gamma),
                 name="a feature", customdata=features,
                 marker=dict(size=5, color=OKABE_ITO[0], opacity=0.6),
                 hovertemplate="feature %{customdata}: largest |x| %{x:.4g}, 1 + γ %{y:.3g}"
                               "<extra></extra>"),
            dict(type="scatter", mode="markers+text", x=compact(peak[marked]),
                 y=compact(gamma[marked]), name="named in the text",
                 text=[f"feature {f}" for f in marked], textposition="top left",
                 marker=dict(size=11, color=OKABE_ITO[5], symbol="diamond"),
                 hovertemplate="%{text}: largest |x| %{x:.4g}, 1 + γ %{y:.3g}<extra></extra>")]
    layout = dict(height=400, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(log_ticks(peak), title=dict(
                      text="largest |x| entering the final norm (over the tokens)")),
                  yaxis=dict(log_ticks(gamma), title=dict(text="the final norm's 1 + γ")))
    return figure(data, layout)
