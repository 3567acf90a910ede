"""Figures of the bug zoo: how far each hand-written LayerNorm lands from torch's, per element.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import DIVERGING, axis_ids, figure, panel_grid

#: |diff| is drawn on a log scale from here up; smaller differences (exact zeros among them)
#: take its lightest colour.
FLOOR_EXPONENT = -8
#: Light grey for "no difference" through DIVERGING's orange half: a one-sided scale.
SEQUENTIAL = [[0.0, DIVERGING[2][1]], [0.5, DIVERGING[3][1]], [1.0, DIVERGING[4][1]]]
#: Cells where the implementation gave NaN or inf: black, off the scale.
NAN_COLOUR = "#000000"
_PANELS_PER_ROW = 4


def _verdict(max_diff: float, matches: bool, nonfinite: int) -> str:
    if nonfinite:
        return f"{nonfinite} NaN/inf"
    return ("matches" if matches else "differs") + f", max {max_diff:.2g}"


def diff_heatmaps(
    diffs: Mapping[str, np.ndarray],
    max_diffs: Mapping[str, float],
    matches: Mapping[str, bool],
    nonfinite: Mapping[str, int],
    allowed: np.ndarray,
    row_labels: Sequence[str],
) -> go.Figure:
    """|variant − torch| for every implementation, one panel each (title: its letter and
    verdict), tokens down and features across, on one shared log colour scale.

    Args:
        diffs: letter → |diff| of shape (seq, batch, emb), NaN where the variant gave NaN/inf.
        max_diffs: letter → the largest |diff|.
        matches: letter → whether every element is within ``allowed``.
        nonfinite: letter → how many outputs were NaN or infinite (their cells drawn black).
        allowed: the allowed |diff| per element, same shape (in the hover text).
        row_labels: one label per token, in (seq, batch) order.

    Traces: one heatmap per panel (z = log₁₀ |diff|, floored at 10^FLOOR_EXPONENT, NaN left
    blank), then, for each panel with NaN or inf outputs, a heatmap that paints those cells
    black.
    """
    letters = list(diffs)
    emb = np.shape(allowed)[-1]
    grids = {k: np.asarray(diffs[k], dtype=np.float64).reshape(-1, emb) for k in letters}
    limit = np.asarray(allowed, dtype=np.float64).reshape(-1, emb)
    tokens = limit.shape[0]
    finite = [g[np.isfinite(g)] for g in grids.values()]
    largest = max((float(f.max()) for f in finite if f.size), default=0.0)
    top = max(0, math.ceil(math.log10(largest))) if largest > 0 else 0
    titles = [f"{k}: {_verdict(max_diffs[k], matches[k], nonfinite[k])}" for k in letters]
    rows = -(-len(letters) // _PANELS_PER_ROW)
    row_px = min(360, 16 * tokens + 60)
    layout, refs = panel_grid(titles, rows=rows, gap=0.04, vgap=80 / (rows * row_px + 80),
                              title_size=14)
    labels = list(row_labels)
    data: list[dict] = []
    nan_marks: list[dict] = []
    exponents = list(range(FLOOR_EXPONENT, top + 1, 2 if top - FLOOR_EXPONENT > 6 else 1))
    for k, (letter, (xref, yref)) in enumerate(zip(letters, refs, strict=True)):
        grid = grids[letter]
        z = np.where(np.isnan(grid), np.nan,
                     np.log10(np.maximum(grid, 10.0 ** FLOOR_EXPONENT)))
        data.append(dict(
            type="heatmap", z=z.astype(np.float32), x=list(range(emb)), y=labels,
            zmin=FLOOR_EXPONENT, zmax=top, colorscale=SEQUENTIAL, showscale=k == 0,
            colorbar=dict(orientation="h", x=0.5, xanchor="center", len=0.9, yref="container",
                          y=0, yanchor="bottom", thickness=10, tickmode="array",
                          tickvals=exponents, ticktext=[f"1e{e}" for e in exponents]),
            customdata=np.stack([grid, limit], axis=-1).astype(np.float32),
            name=f"{letter}: log10 |variant − torch|",
            hovertemplate=(f"{letter}, " + "token %{y}, feature %{x}<br>|diff| = "
                           "%{customdata[0]:.3g} (allowed %{customdata[1]:.2g})<extra></extra>"),
            xaxis=xref, yaxis=yref))
        if np.isnan(grid).any():
            nan_marks.append(dict(
                type="heatmap", z=np.where(np.isnan(grid), 1.0, np.nan).astype(np.float32),
                x=list(range(emb)), y=labels, zmin=0, zmax=1, showscale=False,
                colorscale=[[0.0, NAN_COLOUR], [1.0, NAN_COLOUR]],
                name=f"{letter}: NaN or inf (1)",
                hovertemplate=f"{letter}, " + "token %{y}, feature %{x}<br>NaN or inf"
                              "<extra></extra>", xaxis=xref, yaxis=yref))
        xaxis, yaxis = axis_ids([(xref, yref)])[0]
        bottom = k + _PANELS_PER_ROW >= len(letters)
        layout[xaxis].update(title=dict(text="feature") if bottom else None,
                             dtick=max(1, emb // 4), showticklabels=bottom)
        layout[yaxis].update(autorange="reversed", type="category",
                             showticklabels=k % _PANELS_PER_ROW == 0)
    layout.update(height=rows * row_px + 130, margin=dict(t=40, b=70, l=10, r=10))
    return figure(data + nan_marks, layout)
