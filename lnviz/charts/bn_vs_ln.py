"""Figures of the BatchNorm-vs-LayerNorm lesson, with the cube drawing that shows which
cells share a μ and σ.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import (
    ALERT_BACKGROUND,
    ALERT_FONT,
    DARK_BLUE,
    LEGEND_BELOW,
    LINE_EM,
    NARROW_PLOT_PX,
    OKABE_ITO,
    axis_ids,
    figure,
    panel_grid,
    text_lines,
    wrap_text,
)
from lnviz.terms import NormKind

#: One colour per norm on the BatchNorm-vs-LayerNorm page.
COLORS = {NormKind.BATCH: OKABE_ITO[0], NormKind.LAYER: OKABE_ITO[1]}




# Cube drawing: the C axis recedes up and to the right at 30°, shortened to 55%.
_RECEDE = 0.55 * np.array([np.cos(np.pi / 6), np.sin(np.pi / 6)])


def _project(a: float, b: float, v: float) -> tuple[float, float]:
    """(along N, along C, height) onto the page."""
    return a + _RECEDE[0] * b, v + _RECEDE[1] * b


def _face(face: str, lo: tuple[float, float], hi: tuple[float, float],
          size: tuple[float, float, float]) -> list[tuple[float, float]]:
    """The closed outline of a rectangle lying on the cube's front, top or right face."""
    (p0, q0), (p1, q1) = lo, hi
    length_n, _, height = size
    corners = {
        "front": [(p0, 0.0, q0), (p1, 0.0, q0), (p1, 0.0, q1), (p0, 0.0, q1)],
        "top": [(p0, q0, height), (p1, q0, height), (p1, q1, height), (p0, q1, height)],
        "right": [(length_n, p0, q0), (length_n, p1, q0), (length_n, p1, q1),
                  (length_n, p0, q1)],
    }[face]
    return [_project(*corner) for corner in corners + corners[:1]]


def _cube_cells(counts: tuple[int, int, int], size: tuple[float, float, float],
                max_lines: int = 40) -> list[tuple[float, float, float]]:
    """Segments between cells on the three visible faces (none along an axis with more than
    ``max_lines`` cells, where they would only grey the face)."""
    n, c, s = counts
    length_n, length_c, height = size
    segments = []
    if n <= max_lines:
        for a in np.arange(1, n) * length_n / n:
            segments += [((a, 0, 0), (a, 0, height)), ((a, 0, height), (a, length_c, height))]
    if c <= max_lines:
        for b in np.arange(1, c) * length_c / c:
            segments += [((0, b, height), (length_n, b, height)),
                         ((length_n, b, 0), (length_n, b, height))]
    if s <= max_lines:
        for v in np.arange(1, s) * height / s:
            segments += [((0, 0, v), (length_n, 0, v)),
                         ((length_n, 0, v), (length_n, length_c, v))]
    return segments


def _pooled_faces(box: np.ndarray, size: tuple[float, float, float]
                  ) -> dict[str, list[tuple[float, float]]]:
    """Where the box of True cells shows on the cube's front, top and right faces."""
    if not box.any():
        return {}
    (n, c, s), (length_n, length_c, height) = box.shape, size
    where = np.nonzero(box)
    (n0, c0, s0), (n1, c1, s1) = [int(i.min()) for i in where], [int(i.max()) + 1 for i in where]
    a0, a1 = length_n * n0 / n, length_n * n1 / n
    b0, b1 = length_c * c0 / c, length_c * c1 / c
    v0, v1 = height * (1 - s1 / s), height * (1 - s0 / s)  # position 0 on top
    faces = {}
    if c0 == 0:
        faces["front"] = _face("front", (a0, v0), (a1, v1), size)
    if s0 == 0:
        faces["top"] = _face("top", (a0, b0), (a1, b1), size)
    if n1 == n:
        faces["right"] = _face("right", (b0, v0), (b1, v1), size)
    return faces


def _polylines(shapes: Sequence[Sequence[tuple[float, float]]], dx: float = 0.0
               ) -> tuple[list[float | None], list[float | None]]:
    """Outlines as one x/y pair with None breaks, shifted right by ``dx``."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for points in shapes:
        xs += [p[0] + dx for p in points] + [None]
        ys += [p[1] for p in points] + [None]
    return xs, ys


def _shift(xs: list[float | None], offsets: Sequence[float], per_cube: int
           ) -> list[float | None]:
    """Move each cube's block of ``per_cube`` coordinates (x or y) by its offset."""
    return [None if x is None else x + offsets[i // per_cube] for i, x in enumerate(xs)]


def sharing_figure(
    counts: tuple[int, int, int],
    titles: Sequence[str],
    cells: Sequence[np.ndarray | None],
    notes: Sequence[str],
    axis_names: tuple[str, str, str] = ("N", "C", "H·W"),
) -> go.Figure:
    """Wu & He's four cubes: one per norm, the cells that share one μ and σ shaded.

    Args:
        counts: (N, C, S), the cube's cells along the batch, channel and position axes.
        titles: one title per cube.
        cells: per cube a bool (N, C, S) array, True where a value enters the shaded μ/σ
            (see :func:`lnviz.lessons.bn_vs_ln.sharing_cubes`), or ``None`` for a norm that does not
            apply (the cube is drawn empty, with its note).
        notes: one line under each cube.
        axis_names: labels of the N, C and position axes.

    The shaded cells must form a box (true of all four norms, for the cell at sample 0,
    channel 0, position 0); the parts of it that lie on the cube's visible front, top and right
    faces are filled, as in the paper's figure. Axis lengths follow the counts (a short axis is
    still drawn at 12% of the longest), so the cube has the tensor's proportions. Trace names
    say which cube a shaded face belongs to ("BatchNorm: front"…).
    """
    n, c, s = (int(k) for k in counts)
    longest = max(n, c, s)
    size = tuple(max(k / longest, 0.12) for k in (n, c, s))
    length_n, length_c, height = size
    right_edge, top_edge = _project(length_n, length_c, height)
    # Two cubes a row (four in one left a phone 80 px per cube, and their notes ran into each
    # other). One cube and the gap to the next: at least about half the height of one, so that
    # tall, narrow cubes do not make the figure tall.
    cols = min(2, len(titles))
    step = max(right_edge + 0.45, 0.6 * (top_edge + 0.8))
    span = (cols - 1) * step + right_edge + 0.4
    # Notes wrap to the width of one step on a phone; each row makes room for its note's lines
    # there (the drawing keeps its proportions: a wider screen only adds room at the sides).
    unit_px = NARROW_PLOT_PX / span
    notes = ["<br>".join(wrap_text(note, 0.95 * step * unit_px, 11)) for note in notes]
    note_height = max(text_lines(note) for note in notes) * LINE_EM * 11 / unit_px
    row_step = top_edge + 0.5 + note_height
    positions = [((k % cols) * step, -(k // cols) * row_step) for k in range(len(titles))]
    dxs, dys = [dx for dx, _ in positions], [dy for _, dy in positions]
    grey = {"front": "#E8E8E8", "top": "#F5F5F5", "right": "#D6D6D6"}
    blue = {"front": OKABE_ITO[0], "top": OKABE_ITO[4], "right": DARK_BLUE}
    whole = {"front": ((0, 0), (length_n, height)), "top": ((0, 0), (length_n, length_c)),
             "right": ((0, 0), (length_c, height))}
    data: list[dict] = []
    for face, (lo, hi) in whole.items():
        x, y = _polylines([_face(face, lo, hi, size)] * len(positions), 0.0)
        data.append(dict(type="scatter", x=_shift(x, dxs, 6), y=_shift(y, dys, 6),
                         fill="toself", fillcolor=grey[face], mode="lines", name="cube",
                         hoverinfo="skip", line=dict(color="#444444", width=1.5),
                         showlegend=False))
    for (dx, dy), title, box in zip(positions, titles, cells, strict=True):
        if box is None:
            continue
        for face, outline in _pooled_faces(np.asarray(box, dtype=bool), size).items():
            x, y = _polylines([outline], dx)
            data.append(dict(type="scatter", x=x, y=_shift(y, [dy], len(y)), fill="toself",
                             fillcolor=blue[face], mode="lines",
                             line=dict(color=blue[face], width=1),
                             name="values pooled into one μ, σ", meta=f"{title}: {face}",
                             legendgroup="pooled", showlegend=len(data) == 3,
                             hoverinfo="skip"))
    segments = [[_project(*a), _project(*b)] for a, b in _cube_cells((n, c, s), size)]
    x, y = _polylines(segments * len(positions), 0.0)
    data.append(dict(type="scatter", x=_shift(x, dxs, 3 * len(segments)),
                     y=_shift(y, dys, 3 * len(segments)), mode="lines", name="cells",
                     hoverinfo="skip", showlegend=False, line=dict(color="#777777", width=0.6)))
    annotations = []
    depth_mid = _project(length_n, length_c / 2, 0)
    centre = _project(length_n / 2, length_c / 2, height / 2)
    for (dx, dy), title, box, note in zip(positions, titles, cells, notes, strict=True):
        labels = [(length_n / 2, -0.07, axis_names[0], 0),
                  (depth_mid[0] + 0.07, depth_mid[1] - 0.05, axis_names[1], 0),
                  (-0.08, height / 2, axis_names[2], -90)]
        annotations += [dict(x=x + dx, y=y + dy, text=f"<b>{text}</b>", showarrow=False,
                             textangle=angle, font=dict(size=13)) for x, y, text, angle in labels]
        annotations.append(dict(x=centre[0] + dx, y=top_edge + 0.12 + dy, text=title,
                                showarrow=False, font=dict(size=15)))
        annotations.append(dict(x=centre[0] + dx, y=-0.2 + dy, text=note,
                                showarrow=False, font=dict(size=11), yanchor="top"))
        if box is None:
            annotations.append(dict(x=centre[0] + dx, y=centre[1] + dy, text="not defined",
                                    showarrow=False, font=ALERT_FONT, bgcolor="white"))
    bottom = dys[-1] - 0.3 - note_height
    layout = dict(
        height=int(np.clip((top_edge + 0.22 - bottom) * unit_px + 50, 300, 900)),
        margin=dict(t=10, b=10, l=10, r=10), plot_bgcolor="white",
        annotations=annotations, legend=LEGEND_BELOW,
        xaxis=dict(range=[-0.2, span - 0.2], visible=False, constrain="domain"),
        yaxis=dict(range=[bottom, top_edge + 0.22], visible=False, scaleanchor="x",
                   constrain="domain"),
    )
    return figure(data, layout)


def redraws_figure(
    batch_norm: np.ndarray | None, layer_norm: np.ndarray, refusal: str | None = None
) -> go.Figure:
    """One sample's output feature by feature, one line per re-drawn batch: BatchNorm's panel
    beside LayerNorm's, on one y scale. Args are (re-draws, C) arrays; where BatchNorm refused
    the batch (``batch_norm=None``) its panel shows ``refusal`` instead.

    The figure has the same traces whether or not BatchNorm refused (the page's live figure
    moves them as the batch size is dragged): the re-draws' BatchNorm lines first (hidden, and
    empty, where it refused), then LayerNorm's; the refusal is an annotation named "refusal",
    shown only then, with BatchNorm's axes hidden."""

    layout, refs = panel_grid(["BatchNorm (training mode)", NormKind.LAYER], gap=0.06)
    layer_norm = np.asarray(layer_norm, dtype=np.float32)
    features = np.arange(layer_norm.shape[1])
    refused = batch_norm is None
    shown_bn = np.full(layer_norm.shape, np.nan, np.float32) if refused else batch_norm
    data = []
    for (xref, yref), outputs, name in ((refs[0], shown_bn, NormKind.BATCH),
                                        (refs[1], layer_norm, NormKind.LAYER)):
        for r, row in enumerate(np.asarray(outputs, dtype=np.float32)):
            data.append(dict(
                type="scatter", x=features, y=row, xaxis=xref, yaxis=yref, name=name,
                mode="lines+markers", legendgroup=name, showlegend=r == 0, opacity=0.7,
                visible=not (refused and name == NormKind.BATCH),
                line=dict(color=COLORS[name], width=1.5), marker=dict(size=6),
                hovertemplate=f"batch {r}<br>feature %{{x}}: %{{y:.4f}}<extra>{name}</extra>"))
    (x1, y1), (x2, y2) = axis_ids(refs)
    for xaxis in (x1, x2):
        layout[xaxis].update(title=dict(text="feature"), dtick=1)
    layout[y1]["title"] = dict(text="output y of the fixed sample")
    left, right = layout[x1]["domain"]
    text = "<br>".join(textwrap.wrap(refusal or "BatchNorm refused this batch", 42))
    layout["annotations"].append(dict(
        x=(left + right) / 2, y=0.5, xref="paper", yref="paper", xanchor="center", name="refusal",
        text=text, showarrow=False, font=ALERT_FONT, bgcolor=ALERT_BACKGROUND, borderpad=8,
        visible=refused))
    layout[x1]["visible"] = layout[y1]["visible"] = not refused
    layout[y2]["matches"] = "y"  # one scale, so the two spreads compare at a glance
    layout.update(height=340, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def batch_sizes_figure(
    batch_sizes: np.ndarray, batch_norm: np.ndarray, layer_norm: np.ndarray, feature: int
) -> go.Figure:
    """One output feature of the fixed sample against the batch size: each re-draw a dot and
    the band they span for BatchNorm (NaN where it refused), a line for LayerNorm.

    ``batch_norm`` and ``layer_norm`` are (sizes, re-draws) arrays."""
    sizes = np.asarray(batch_sizes, dtype=np.int64)
    bn = np.asarray(batch_norm, dtype=np.float64)
    # A refused size is NaN in every re-draw, so its band is NaN too: a gap.
    low, high = bn.min(axis=1), bn.max(axis=1)
    color = COLORS[NormKind.BATCH]
    data = [
        dict(type="scatter", x=sizes, y=high, mode="lines", line=dict(width=0),
             name="BatchNorm range", legendgroup="bn", showlegend=False, hoverinfo="skip"),
        dict(type="scatter", x=sizes, y=low, mode="lines", line=dict(width=0), fill="tonexty",
             fillcolor="rgba(0, 114, 178, 0.2)", name="BatchNorm range", legendgroup="bn",
             hoverinfo="skip"),
        dict(type="scatter", x=np.repeat(sizes, bn.shape[1]), y=bn.ravel(), mode="markers",
             name="BatchNorm, one dot per re-draw", legendgroup="bn",
             marker=dict(color=color, size=6, opacity=0.7),
             hovertemplate="batch size %{x}: %{y:.4f}<extra>BatchNorm</extra>"),
        dict(type="scatter", x=sizes, y=np.asarray(layer_norm, dtype=np.float64).mean(axis=1),
             mode="lines+markers", name="LayerNorm (every re-draw)",
             line=dict(color=COLORS[NormKind.LAYER], width=3), marker=dict(size=7),
             hovertemplate="batch size %{x}: %{y:.4f}<extra>LayerNorm</extra>"),
    ]
    layout = dict(
        height=340, margin=dict(t=30, b=10), legend=LEGEND_BELOW,
        xaxis=dict(type="log", title=dict(text="batch size"), tickvals=sizes.tolist()),
        yaxis=dict(title=dict(text=f"output y, feature {feature}")),
    )
    return figure(data, layout)


def running_stats_figure(
    batch_mean: np.ndarray,
    batch_var: np.ndarray,
    batch_var_unbiased: np.ndarray,
    running_mean: np.ndarray,
    running_var: np.ndarray,
    population_mean: float,
    population_var: float,
) -> go.Figure:
    """The running μ and σ² of one feature step by step, beside each mini-batch's own μ and its
    biased and unbiased σ², with the population's values dashed. Batch arrays have one entry per
    step (1…k), running arrays one more (step 0: the starting 0 and 1)."""
    layout, refs = panel_grid(["mean μ", "variance σ²"], gap=0.08)
    k = len(batch_mean)
    steps, running_steps = np.arange(1, k + 1), np.arange(k + 1)
    series = (
        (0, steps, batch_mean, "batch μ", "markers", OKABE_ITO[0], "circle"),
        (0, running_steps, running_mean, "running μ", "lines+markers", OKABE_ITO[1], "circle"),
        (1, steps, batch_var, "batch σ², biased (÷m): normalizes the batch", "markers",
         OKABE_ITO[0], "circle"),
        (1, steps, batch_var_unbiased, "batch σ², unbiased (÷(m−1)): feeds the running σ²",
         "markers", OKABE_ITO[2], "diamond"),
        (1, running_steps, running_var, "running σ²", "lines+markers", OKABE_ITO[1], "circle"),
    )
    data = [dict(type="scatter", x=x, y=np.asarray(y, dtype=np.float64), mode=mode, name=name,
                 xaxis=refs[panel][0], yaxis=refs[panel][1],
                 marker=dict(color=color, size=7, symbol=symbol),
                 line=dict(color=color, width=2))
            for panel, x, y, name, mode, color, symbol in series]
    for (xref, yref), value in zip(refs, (population_mean, population_var), strict=True):
        data.append(dict(type="scatter", x=[0, k], y=[value, value], mode="lines",
                         xaxis=xref, yaxis=yref, name="population", legendgroup="population",
                         showlegend=xref == "x", hoverinfo="skip",
                         line=dict(color="#555555", dash="dash", width=1)))
    for xaxis, _ in axis_ids(refs):
        layout[xaxis]["title"] = dict(text="training step")
    layout.update(height=360, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return figure(data, layout)


def modes_figure(
    train: np.ndarray, evaluated: np.ndarray, layer_norm: np.ndarray
) -> go.Figure:
    """Every output of one batch in training mode (x) against evaluation mode (y): BatchNorm's
    points leave the diagonal while its running statistics differ from the batch's; LayerNorm
    has one mode, so its points lie on it."""
    train = np.asarray(train, dtype=np.float64).ravel()
    evaluated = np.asarray(evaluated, dtype=np.float64).ravel()
    ln = np.asarray(layer_norm, dtype=np.float64).ravel()
    values = np.concatenate([train, evaluated, ln])
    values = values[np.isfinite(values)]
    bound = float(np.abs(values).max()) * 1.05 if values.size else 1.0
    data = [
        dict(type="scatter", x=[-bound, bound], y=[-bound, bound], mode="lines",
             line=dict(color="#999999", dash="dot"), name="train = eval", hoverinfo="skip"),
        dict(type="scatter", x=train, y=evaluated, mode="markers", name=NormKind.BATCH,
             marker=dict(color=COLORS[NormKind.BATCH], size=7, opacity=0.75),
             hovertemplate="train %{x:.4f}<br>eval %{y:.4f}<extra>BatchNorm</extra>"),
        dict(type="scatter", x=ln, y=ln, mode="markers", name=NormKind.LAYER,
             marker=dict(color=COLORS[NormKind.LAYER], size=6, symbol="diamond",
                         opacity=0.75),
             hovertemplate="train = eval = %{x:.4f}<extra>LayerNorm</extra>"),
    ]
    layout = dict(height=420, margin=dict(t=30, b=10),
                  xaxis=dict(title=dict(text="output in training mode"), range=[-bound, bound]),
                  yaxis=dict(title=dict(text="output in evaluation mode"), range=[-bound, bound]))
    return figure(data, layout)
