"""Figures of "Inside a real LLM": SmolLM2-135M-Instruct's RMSNorms on one prompt."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    AFTER,
    BEFORE,
    LEGEND_BELOW,
    OKABE_ITO,
    bpe_piece,
    compact,
    figure,
    log_ticks,
    panel_grid,
)


def prediction_figure(tokens: Sequence[str], probabilities: Sequence[float],
                      after: Sequence[float] | None = None,
                      after_tokens: Sequence[str] | None = None) -> go.Figure:
    """The most likely next tokens as bars of probability, largest on top; with ``after``, a
    second set of bars: the most likely tokens once a norm is broken."""
    data = [dict(type="bar", orientation="h", y=[bpe_piece(t) for t in tokens],
                 x=compact(probabilities), name="the model", marker=dict(color=BEFORE),
                 hovertemplate="%{y}: %{x:.1%}<extra>the model</extra>")]
    if after is not None and after_tokens is not None:
        data.append(dict(type="bar", orientation="h", y=[bpe_piece(t) for t in after_tokens],
                         x=compact(after), name="with the norm broken",
                         marker=dict(color=AFTER),
                         hovertemplate="%{y}: %{x:.1%}<extra>norm broken</extra>"))
    layout = dict(height=300 if after is None else 420, margin=dict(t=20, b=10),
                  barmode="group", legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="probability of being the next token"),
                             tickformat=".0%", range=[0, 1]),
                  yaxis=dict(type="category", autorange="reversed",
                             title=dict(text="next token (␣ = space)")))
    return figure(data, layout)


def stream_figure(typical: np.ndarray, first: np.ndarray, encoder: np.ndarray) -> go.Figure:
    """The residual stream's per-token RMS through depth, on a log axis: SmolLM2's median token
    and its first token (pre-norm: where each block's first RMSNorm reads it, then the final
    norm) against all-MiniLM-L6-v2's median token (post-LN: after each LayerNorm that ends a
    layer). The x axis is the share of the model's depth, so that 30 blocks and 6 layers line
    up."""
    typical, first = np.asarray(typical, np.float64), np.asarray(first, np.float64)
    encoder = np.asarray(encoder, np.float64)
    data = [dict(type="scatter", mode="lines+markers", x=np.linspace(0, 1, len(values)),
                 y=values, name=name, line=dict(color=color, width=2, dash=dash),
                 marker=dict(size=6), customdata=np.arange(len(values)),
                 hovertemplate=f"{point} %{{customdata}}: RMS %{{y:.4g}}<extra>{name}</extra>")
            for values, name, color, dash, point in (
                (typical, "SmolLM2, median token (pre-norm)", OKABE_ITO[5], "solid", "block"),
                (first, "SmolLM2, first token", OKABE_ITO[5], "dot", "block"),
                (encoder, "all-MiniLM-L6-v2, median token (post-LN)", OKABE_ITO[1], "solid",
                 "layer"))]
    layout = dict(height=360, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="depth (share of the model's blocks)"),
                             tickformat=".0%"),
                  yaxis=dict(log_ticks(typical, first, encoder),
                             title=dict(text="RMS of a token in the residual stream")))
    return figure(data, layout)


def massive_figure(largest: np.ndarray, median: np.ndarray, tokens: Sequence[str],
                   token: np.ndarray, feature: np.ndarray) -> go.Figure:
    """Per block, the residual stream's largest |h| and its median |h| (log axis), with the
    token and feature of the largest in the hover."""
    largest, median = np.asarray(largest, np.float64), np.asarray(median, np.float64)
    blocks = np.arange(len(largest))
    where = [f"{bpe_piece(tokens[int(t)])} (token {int(t)}), feature {int(f)}"
             for t, f in zip(token, feature, strict=True)]
    data = [dict(type="scatter", mode="lines+markers", x=blocks, y=largest, name="largest |h|",
                 customdata=where, line=dict(color=AFTER, width=2),
                 hovertemplate="block %{x}: %{y:.4g} at %{customdata}<extra></extra>"),
            dict(type="scatter", mode="lines+markers", x=blocks, y=median, name="median |h|",
                 line=dict(color=BEFORE, width=2),
                 hovertemplate="block %{x}: median %{y:.3g}<extra></extra>")]
    layout = dict(height=360, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="block (where its first RMSNorm reads the stream)")),
                  yaxis=dict(log_ticks(largest, median), title=dict(text="|h|")))
    return figure(data, layout)


def sink_figure(shares: np.ndarray, uniform: float) -> go.Figure:
    """Per block, the share of attention the tokens send to the first token, with the share a
    uniform spread over the tokens would give."""
    shares = np.asarray(shares, np.float64)
    blocks = np.arange(len(shares))
    data = [dict(type="bar", x=blocks, y=compact(shares), name="attention to the first token",
                 marker=dict(color=OKABE_ITO[2]),
                 hovertemplate="block %{x}: %{y:.0%}<extra></extra>"),
            dict(type="scatter", mode="lines", x=[-0.5, len(shares) - 0.5],
                 y=[uniform, uniform], name=f"uniform ({uniform:.0%})",
                 line=dict(color="#666666", dash="dash"), hoverinfo="skip")]
    layout = dict(height=320, margin=dict(t=20, b=10), legend=LEGEND_BELOW,
                  xaxis=dict(title=dict(text="block")),
                  yaxis=dict(title=dict(text="share of attention"), tickformat=".0%",
                             range=[0, 1.02]))
    return figure(data, layout)


def removals_figure(labels: Sequence[str], loss: np.ndarray, loss_before: np.ndarray,
                    same_top: np.ndarray, broken: str) -> go.Figure:
    """The reference texts' loss with each norm ``broken`` in turn (log axis): one bar per norm
    in forward order, the mean over the texts with the range of them as whiskers, coloured by
    whether the prompt's most likely next token survived; the intact model's mean loss as a
    line. ``loss`` is (N, S), ``loss_before`` (S,)."""
    loss, same_top = np.asarray(loss, np.float64), np.asarray(same_top, bool)
    mean, before = loss.mean(axis=1), float(np.mean(loss_before))
    index = np.arange(len(loss))
    data = [dict(type="bar", x=index[keep], y=mean[keep], name=name,
                 error_y=dict(type="data", symmetric=False, array=loss.max(axis=1)[keep]
                              - mean[keep], arrayminus=mean[keep] - loss.min(axis=1)[keep],
                              color="#444444", thickness=1, width=0),
                 customdata=[labels[i] for i in index[keep]], marker=dict(color=color),
                 hovertemplate="%{customdata}: mean loss %{y:.3g}<extra>" + name + "</extra>")
            for keep, name, color in ((same_top, "next token kept", BEFORE),
                                      (~same_top, "next token changed", AFTER))]
    data.append(dict(type="scatter", mode="lines", x=[-0.5, len(loss) - 0.5],
                     y=[before, before], name=f"intact ({before:.3g})",
                     line=dict(color="#666666", dash="dash"), hoverinfo="skip"))
    layout = dict(height=360, margin=dict(t=20, b=10), legend=LEGEND_BELOW, barmode="overlay",
                  xaxis=dict(title=dict(text=f"the norm {broken} (two per block, then the final "
                                             "one)")),
                  yaxis=dict(log_ticks(loss, before),
                             title=dict(text="loss on the reference texts (nats per token)")))
    return figure(data, layout)


def sink_link_figure(before: np.ndarray, after: np.ndarray, keys: np.ndarray,
                     column: np.ndarray, firsts: Sequence[str], feature: int, block: int,
                     uniform: float) -> go.Figure:
    """The massive activation and the attention sink in one block: the first token's stream
    entering the RMSNorm (one spike); what leaves it, and its key, for the first token of each
    text, drawn over each other; and the share of attention each later token sends to it."""
    layout, refs = panel_grid([f"first token entering block {block}'s RMSNorm",
                               "what leaves it: first token of each text",
                               "its key (every key head), each text",
                               "attention each later token sends it"], rows=2, gap=0.1,
                              vgap=0.2)
    features = np.arange(len(before))
    colors = [OKABE_ITO[5] if f == feature else "#9A9A9A" for f in features]
    data = [dict(type="bar", x=features, y=compact(before), marker=dict(color=colors),
                 name="h", showlegend=False, xaxis=refs[0][0], yaxis=refs[0][1],
                 hovertemplate="feature %{x}: h = %{y:.4g}<extra></extra>")]
    for k, first in enumerate(firsts):
        label = bpe_piece(first)
        style = dict(color=OKABE_ITO[k % len(OKABE_ITO)], width=1.5 if k == 0 else 1)
        data.append(dict(type="scatter", mode="lines", x=features, y=compact(after[k]),
                         name=label, legendgroup=label, line=style, xaxis=refs[1][0],
                         yaxis=refs[1][1],
                         hovertemplate="feature %{x}: %{y:.4g}<extra>" + label + "</extra>"))
        data.append(dict(type="scatter", mode="lines", x=np.arange(keys.shape[1]),
                         y=compact(keys[k]), name=label, legendgroup=label, showlegend=False,
                         line=style, xaxis=refs[2][0], yaxis=refs[2][1],
                         hovertemplate="key value %{x}: %{y:.4g}<extra>" + label + "</extra>"))
    data.append(dict(type="bar", x=np.arange(1, len(column) + 1), y=compact(column),
                     name="attention to the first token", showlegend=False,
                     marker=dict(color=OKABE_ITO[2]), xaxis=refs[3][0], yaxis=refs[3][1],
                     hovertemplate="token %{x}: %{y:.0%}<extra></extra>"))
    data.append(dict(type="scatter", mode="lines", x=[0.5, len(column) + 0.5],
                     y=[uniform, uniform], name=f"even spread ({uniform:.0%})",
                     line=dict(color="#666666", dash="dash"), xaxis=refs[3][0],
                     yaxis=refs[3][1], hoverinfo="skip"))
    layout["xaxis"]["title"] = dict(text=f"feature (orange: {feature})")
    layout["xaxis2"]["title"] = dict(text="feature")
    layout["xaxis3"]["title"] = dict(text="key value")
    layout["xaxis4"]["title"] = dict(text="token (position)")
    layout["yaxis4"].update(tickformat=".0%", range=[0, 1.02])
    layout.update(height=640, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)
