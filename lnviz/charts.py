"""Plotly figure builders: pure functions, data in and ``go.Figure`` out.

Nothing here computes a statistic of its own or touches Streamlit; every figure can be built and
checked in a unit test. Colour scales are colour-blind safe (a blue–orange diverging scale for
values, the Okabe–Ito palette for categories), and each figure is sized by what it is given:
callers pass windows of the tensor (see :func:`lnviz.explore.grid_view`) and histogram counts, so
no figure grows with the tensor.

Every figure is built from plain dicts in a single ``go.Figure(data=..., layout=...)`` call
(:func:`_figure`), with panels laid out by :func:`_panel_grid`: plotly's ``make_subplots``,
``add_trace`` and ``update_*`` validate the figure again on every call, which cost multi-panel
figures 20–120 ms each per rerun (a 3 × 3 grid of histograms: 121 ms that way, 65 ms in one
call, 9 ms in one call without validation; see :data:`VALIDATE`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

#: Okabe & Ito's palette, distinguishable with the common kinds of colour blindness.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
             "#000000"]
#: Blue–white–orange: diverging and colour-blind safe (no red against green).
DIVERGING = [[0.0, "#2166AC"], [0.25, "#67A9CF"], [0.5, "#F7F7F7"], [0.75, "#FDB863"],
             [1.0, "#B35806"]]
BEFORE, AFTER = OKABE_ITO[0], OKABE_ITO[1]
#: Okabe–Ito's blue, darker: the shaded side of a cube drawn in that blue.
DARK_BLUE = "#005A8C"

#: Whether plotly checks every property of a figure as it builds it. The check catches a
#: misspelt property or a value of the wrong kind, and costs most of a figure's build time; the
#: test suite turns it on (tests/conftest.py), so every builder is checked there, and the app
#: builds without it. A valid figure's JSON is the same either way (tested).
VALIDATE = False

#: The width in pixels of a figure's plot area on a 390-px phone (iPhone 12–15, upright): the
#: screen less the page's and the figure's margins. Figures cannot know the screen they are
#: drawn on, so text that shares a row between panels (panel titles, axis titles) is wrapped to
#: fit this width, and multi-panel figures are laid out so that they read at it; a desktop shows
#: the same lines with room to spare.
NARROW_PLOT_PX = 290
#: The figures' font (Streamlit's theme): mean width of a character, and plotly's line
#: height, both in ems.
_CHAR_EM, _LINE_EM = 0.55, 1.3
#: Panel titles are annotations with this name, so that :func:`_figure` can find them.
_PANEL_TITLE = "panel title"
#: A horizontal legend on the figure's bottom edge. Placed relative to the whole figure
#: ("container"), plotly reserves the margin it takes and pushes tick labels and axis titles
#: above it; one placed below the plot area in plot fractions lands on them on a short or
#: narrow figure (the rotated tick "feature 0" showed as "ure 0").
LEGEND_BELOW = dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0,
                    xanchor="left")
#: The same on the top edge: a legend placed above the plot area in plot fractions grows down
#: onto it when a narrow screen wraps its entries onto more rows.
LEGEND_ABOVE = dict(LEGEND_BELOW, y=1, yanchor="top")
#: The height of one row of a legend, which panel titles make room for when it is on top.
_LEGEND_ROW_PX = 24


def _wrap(text: str, width_px: float, size: float) -> list[str]:
    """``text`` in lines of at most ``width_px`` pixels at font ``size`` (words kept whole; a
    ``<br>`` in it always breaks the line)."""
    chars = max(4, int(width_px / (_CHAR_EM * size)))
    return [line for part in text.split("<br>")
            for line in textwrap.wrap(part, chars, break_long_words=False) or [part]]


def _lines(text: str) -> int:
    return text.count("<br>") + 1


def _colorbar_below(left: float, right: float, low: float, high: float) -> dict:
    """A horizontal colorbar on the figure's bottom edge, under the panels spanning ``left``
    to ``right`` (fractions of the plot area's width): never on a panel, on any screen. Its
    scale runs from ``low`` to ``high`` through 0, and only those three are labelled, which fit
    under the narrowest panel."""
    # 80 % of the span: the end labels stick out past the bar, into the gap to the next one
    return dict(orientation="h", x=(left + right) / 2, xanchor="center", len=0.8 * (right - left),
                yref="container", y=0, yanchor="bottom", thickness=10, xpad=2, tickmode="array",
                tickvals=[low, 0.0, high], ticktext=[f"{low:.2g}", "0", f"{high:.2g}"])


def _compact(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Numbers for a figure as float32 (half the bytes sent), or float64 where a finite value
    would not fit float32 (an input in float64 near 1e300 must not be drawn as inf)."""
    values = np.asarray(values)
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if finite.size and np.abs(finite).max() > np.finfo(np.float32).max:
        return values.astype(np.float64)
    return values.astype(np.float32)


def _figure(data: list[dict], layout: dict) -> go.Figure:
    """``go.Figure(data=data, layout=layout)``, validated only when :data:`VALIDATE` is on.

    Builders write nested dicts (``title=dict(text=...)``, not plotly's ``title_text``
    shorthand, which only validation expands); entries set to None mean "not set" and are
    dropped, as validation drops them. The top margin is raised where the panel titles of
    :func:`_panel_grid` need more lines than it holds (and a row more for a legend on top:
    plotly reserves the legend's room in the margin, not the titles').
    """
    titles = [a for a in layout.get("annotations", ()) if a.get("name") == _PANEL_TITLE
              and a.get("y", 0) >= 1]
    if titles:
        need = max(_lines(a["text"]) * _LINE_EM * a["font"]["size"] for a in titles) + 12
        if layout.get("legend", {}).get("yanchor") == "top":
            need += _LEGEND_ROW_PX
        margin = layout.setdefault("margin", {})
        margin["t"] = max(margin.get("t", 0), int(np.ceil(need)))
    if VALIDATE:
        return go.Figure(data=data, layout=layout)
    return go.Figure(data=_unset(data), layout=_unset(layout), _validate=False)


def _unset(value: object) -> object:
    """``value`` with every dict entry whose value is None removed, at any depth (None inside
    a list of numbers is a gap in the data and stays)."""
    if isinstance(value, dict):
        return {k: _unset(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_unset(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def group_boundaries(groups: np.ndarray) -> tuple[list[float | None], list[float | None]]:
    """Line segments (x, y with None breaks) between neighbouring cells of different groups.

    Runs along a row or column are merged, so a LayerNorm grid (one group per row) gives one line
    per row boundary rather than one per cell.
    """
    xs: list[float | None] = []
    ys: list[float | None] = []
    rows, cols = groups.shape
    horizontal = groups[1:, :] != groups[:-1, :]  # boundary under row r
    for r in range(rows - 1):
        for start, stop in _runs(horizontal[r]):
            xs += [start - 0.5, stop - 0.5, None]
            ys += [r + 0.5, r + 0.5, None]
    vertical = groups[:, 1:] != groups[:, :-1]  # boundary right of column c
    for c in range(cols - 1):
        for start, stop in _runs(vertical[:, c]):
            xs += [c + 0.5, c + 0.5, None]
            ys += [start - 0.5, stop - 0.5, None]
    return xs, ys


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of True in a 1-D boolean array."""
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _symmetric_range(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    return -(bound or 1.0), bound or 1.0


def _fit_titles(titles: Sequence[str], width_px: float, size: int, max_lines: int = 2,
                smallest: int = 11) -> tuple[int, list[str]]:
    """The largest font size from ``size`` down to ``smallest`` at which every title wraps
    into at most ``max_lines`` lines of ``width_px`` pixels (``smallest`` with more lines
    where none does), and the titles wrapped at it, lines joined by ``<br>``."""
    for font in range(size, smallest - 1, -1):
        wrapped = [_wrap(title, width_px, font) for title in titles]
        if font == smallest or all(len(lines) <= max_lines for lines in wrapped):
            return font, ["<br>".join(lines) for lines in wrapped]
    raise ValueError(f"no font size from {size} down to {smallest}")


def _panel_grid(titles: Sequence[str], rows: int = 1, gap: float = 0.07, vgap: float = 0.08,
                title_size: int = 15) -> tuple[dict, list[tuple[str, str]]]:
    """Layout entries for panels on a grid, filled row by row from the top left, and each
    panel's (xaxis, yaxis) trace references — what ``make_subplots`` lays out, without its cost.

    The layout dict holds ``xaxis``, ``yaxis``, ``xaxis2``… and the panel titles as
    ``annotations``; callers add their own keys and annotations to it. Axes are numbered as
    ``make_subplots`` numbers them, so "xaxis2" is the second panel of the first row.

    Titles are wrapped to their panel's width on a phone (:data:`NARROW_PLOT_PX`), in a smaller
    font where that saves lines, so that neighbouring titles never overlap; every axis makes
    room for its tick labels (``automargin``), so none is cut off by the figure's edge.
    """
    cols = -(-len(titles) // rows)
    width = (1.0 - gap * (cols - 1)) / cols
    height = (1.0 - vgap * (rows - 1)) / rows
    # a title may reach into the gap on either side of its panel, leaving 40 % of it clear
    size, wrapped = _fit_titles(titles, (width + 0.6 * gap) * NARROW_PLOT_PX, title_size)
    layout: dict = {"annotations": []}
    refs = []
    for k, title in enumerate(wrapped):
        row, col = divmod(k, cols)
        suffix = "" if k == 0 else str(k + 1)
        left, top = col * (width + gap), 1.0 - row * (height + vgap)
        layout[f"xaxis{suffix}"] = dict(domain=[left, left + width], anchor=f"y{suffix}",
                                        automargin=True)
        layout[f"yaxis{suffix}"] = dict(domain=[max(top - height, 0.0), top],
                                        anchor=f"x{suffix}", automargin=True)
        layout["annotations"].append(dict(
            text=title, x=left + width / 2, y=top, xref="paper", yref="paper",
            xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=size),
            name=_PANEL_TITLE))
        refs.append((f"x{suffix}", f"y{suffix}"))
    return layout, refs


def _axis_ids(refs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Layout keys of the panels' axes: ("xaxis", "yaxis"), ("xaxis2", "yaxis2")…"""
    return [(x.replace("x", "xaxis"), y.replace("y", "yaxis")) for x, y in refs]


def _each_axis(layout: dict, refs: list[tuple[str, str]], x: dict | None = None,
               y: dict | None = None) -> None:
    """Set the same properties on every panel's x (and y) axis. An x axis title is wrapped to
    its panel's width on a phone, as panel titles are, so that neighbours' do not overlap."""
    for xaxis, yaxis in _axis_ids(refs):
        layout[xaxis].update(x or {})
        layout[yaxis].update(y or {})
        title = (x or {}).get("title")
        if title and len(refs) > 1:
            left, right = layout[xaxis]["domain"]
            layout[xaxis]["title"] = dict(title, text="<br>".join(
                _wrap(title["text"], (right - left) * NARROW_PLOT_PX, 14)))


def norm_heatmaps(
    grid_in: np.ndarray,
    grid_out: np.ndarray,
    groups: np.ndarray,
    *,
    padding: np.ndarray | None = None,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title_in: str = "input x",
    title_out: str = "output y",
) -> go.Figure:
    """Input, the groups that share one μ/σ, and output, side by side.

    Args:
        grid_in, grid_out: 2-D windows of the input and the output (rows × columns).
        groups: the same window of group ids (:func:`lnviz.explore.group_ids`).
        padding: bool, the same window, True at padding positions (marked × on every panel).
        row_labels, col_labels: names of the window's rows and columns (tick labels).

    Cells sit at integer coordinates so that group boundaries can be drawn between them.
    Traces: the input heatmap, the output heatmap, the group heatmap, then per panel the group
    boundaries (when there are any) and the padding marks (when there is padding).
    """
    rows, cols = grid_in.shape
    layout, refs = _panel_grid((title_in, "cells sharing one μ, σ", title_out), gap=0.06,
                               title_size=16)
    hover = "row %{y}, column %{x}<br>"
    data: list[dict] = []
    for (xref, yref), grid, name in ((refs[0], grid_in, title_in),
                                     (refs[2], grid_out, title_out)):
        low, high = _symmetric_range(np.asarray(grid, dtype=np.float64))
        data.append(dict(
            type="heatmap", z=_compact(grid), zmin=low, zmax=high,
            colorscale=DIVERGING, name=name,
            colorbar=_colorbar_below(*layout[xref.replace("x", "xaxis")]["domain"], low, high),
            hovertemplate=hover + "value %{z:.4g}<extra></extra>", xaxis=xref, yaxis=yref))
    # Colour groups in order of first appearance, so neighbouring groups differ in colour.
    _, first_seen = np.unique(groups, return_inverse=True)
    steps = len(OKABE_ITO)
    categories = (first_seen.reshape(groups.shape) % steps).astype(np.int8)
    palette = [[min(edge / steps, 1.0), color] for i, color in enumerate(OKABE_ITO)
               for edge in (i, i + 1)]
    data.append(dict(
        type="heatmap", z=categories, zmin=-0.5, zmax=steps - 0.5, colorscale=palette,
        showscale=False, name="group (colour index)",
        customdata=np.asarray(groups, dtype=np.int32),
        hovertemplate=hover + "group %{customdata}<extra></extra>",
        xaxis=refs[1][0], yaxis=refs[1][1]))

    bx, by = group_boundaries(np.asarray(groups))
    pad_rows, pad_cols = np.nonzero(padding) if padding is not None else ((), ())
    # A mark no larger than a cell (about 700 px of height over the rows, and at least 120 px of
    # a phone-width panel over the columns), so that many pads cannot black out the colours.
    mark = float(np.clip(0.7 * min(700 / rows, 120 / cols), 2, 9))
    for k, (xref, yref) in enumerate(refs):
        if bx:
            data.append(dict(type="scatter", x=bx, y=by, mode="lines",
                             line=dict(color="black", width=1.5), name="group boundary",
                             hoverinfo="skip", showlegend=False, xaxis=xref, yaxis=yref))
        if len(pad_rows):
            data.append(dict(
                type="scatter", x=np.asarray(pad_cols, dtype=np.float32),
                y=np.asarray(pad_rows, np.float32), mode="markers", name="padding",
                showlegend=k == 0, hoverinfo="skip", xaxis=xref, yaxis=yref,
                marker=dict(symbol="x-thin", size=mark,
                            line=dict(width=2 if mark >= 6 else 1, color="#444444"))))
    # At most ~24 row and ~12 column tick labels, rows reading top to bottom.
    xt = list(range(0, cols, max(1, cols // 12)))
    yt = list(range(0, rows, max(1, rows // 24)))
    for k, (xaxis, yaxis) in enumerate(_axis_ids(refs)):
        layout[xaxis].update(range=[-0.5, cols - 0.5], tickmode="array", tickvals=xt,
                             ticktext=[str(col_labels[i]) for i in xt] if col_labels else None)
        layout[yaxis].update(range=[rows - 0.5, -0.5], tickmode="array", tickvals=yt,
                             ticktext=[str(row_labels[i]) for i in yt] if row_labels else None,
                             showticklabels=k == 0)
    # the padding legend under the middle panel, between the two colorbars
    layout.update(height=max(320, min(900, 16 * rows + 180)), margin=dict(t=40, b=10),
                  legend=dict(LEGEND_BELOW, x=sum(layout["xaxis2"]["domain"]) / 2,
                              xanchor="center"))
    return _figure(data, layout)


def group_stats_figure(
    mean_in: np.ndarray,
    std_in: np.ndarray,
    mean_out: np.ndarray,
    std_out: np.ndarray,
    labels: Sequence[str] | None = None,
) -> go.Figure:
    """μ and σ of every group, before and after normalization (two panels, one marker per
    group): after LayerNorm with γ = 1, β = 0 every group sits at μ = 0, σ ≈ 1.

    Traces: μ before, μ after, σ before, σ after."""
    n = len(mean_in)
    x = list(labels) if labels is not None else list(range(n))
    layout, refs = _panel_grid(("mean μ per group", "std σ per group"), gap=0.1,
                               title_size=16)
    data = []
    for k, ((xref, yref), before, after) in enumerate(((refs[0], mean_in, mean_out),
                                                       (refs[1], std_in, std_out))):
        for values, name, color in ((before, "before", BEFORE), (after, "after", AFTER)):
            data.append(dict(
                type="scatter", x=x, y=_compact(values),
                mode="markers+lines", name=name, legendgroup=name, showlegend=k == 0,
                marker=dict(color=color, size=7), line=dict(color=color, width=1),
                xaxis=xref, yaxis=yref))
    _each_axis(layout, refs, x=dict(title=dict(text="group"), type="category"))
    layout.update(height=340, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return _figure(data, layout)


def distributions_figure(
    histogram_in: tuple[np.ndarray, np.ndarray], histogram_out: tuple[np.ndarray, np.ndarray]
) -> go.Figure:
    """Histograms of all values before and after, from (bin centres, counts) pairs (see
    :func:`lnviz.explore.histogram`), so the figure's size does not grow with the tensor."""
    layout, refs = _panel_grid(("values before", "values after"), gap=0.1, title_size=16)
    data = [dict(type="bar", x=_compact(centres),
                 y=np.asarray(counts, dtype=np.int64), name=name, marker=dict(color=color),
                 showlegend=False, xaxis=xref, yaxis=yref)
            for (xref, yref), (centres, counts), name, color in (
                (refs[0], histogram_in, "before", BEFORE), (refs[1], histogram_out, "after",
                                                             AFTER))]
    layout["yaxis"]["title"] = dict(text="count")
    layout.update(height=280, bargap=0.02, margin=dict(t=40, b=10))
    return _figure(data, layout)


# --- ε and numerical stability (app_pages/epsilon.py) ---------------------------------------------


def _eps_loggable(values: np.ndarray) -> list[float | None]:
    """Values for a log axis: zeros, negatives, inf and NaN become gaps (None)."""
    return [float(v) if np.isfinite(v) and v > 0 else None for v in np.asarray(values, float)]


def _eps_vertical(x: float, low: float, high: float, name: str, color: str, dash: str,
                  refs: tuple[str, str], showlegend: bool) -> dict:
    """A vertical marker line at ``x`` drawn as a trace, so it works on log axes."""
    return dict(type="scatter", x=[x, x], y=[low, high], mode="lines", name=name,
                legendgroup=name, showlegend=showlegend,
                line=dict(color=color, width=2, dash=dash),
                hovertemplate=f"{name}<extra></extra>", xaxis=refs[0], yaxis=refs[1])


def eps_sweep_figure(
    eps: np.ndarray,
    max_output: np.ndarray,
    grad_norm: np.ndarray,
    variance: float,
    chosen_eps: float | None = None,
) -> go.Figure:
    """max|y| and ‖∂L/∂x‖ against ε (log–log), with ε = σ² and the chosen ε marked.

    Traces: 0 max|y|, 1 ‖∂L/∂x‖, then the ε = σ² lines (when σ² > 0) and the chosen-ε lines
    (when it is > 0). Points that cannot sit on a log axis (0, inf, NaN) are left as gaps.
    """
    layout, refs = _panel_grid(("output size max |y|", "gradient size ‖∂L/∂x‖"), gap=0.1,
                               title_size=16)
    panels = ((refs[0], max_output, "max |y|", BEFORE), (refs[1], grad_norm, "‖∂L/∂x‖", AFTER))
    data = [dict(type="scatter", x=np.asarray(eps, dtype=np.float64), y=_eps_loggable(values),
                 mode="lines+markers", name=name, marker=dict(color=color, size=5),
                 line=dict(color=color), xaxis=ref[0], yaxis=ref[1],
                 hovertemplate="ε = %{x:.2g}<br>" + name + " = %{y:.4g}<extra></extra>")
            for ref, values, name, color in panels]
    for k, (ref, values, _, _) in enumerate(panels):
        shown = [v for v in _eps_loggable(values) if v is not None]
        low, high = (min(shown), max(shown)) if shown else (0.1, 10.0)
        if variance > 0:
            data.append(_eps_vertical(variance, low, high, f"ε = σ² = {variance:.3g}",
                                      OKABE_ITO[2], "dash", ref, k == 0))
        if chosen_eps:
            data.append(_eps_vertical(chosen_eps, low, high, f"chosen ε = {chosen_eps:.0e}",
                                      OKABE_ITO[3], "dot", ref, k == 0))
        if not shown:
            layout["annotations"].append(dict(
                text="0 at every ε > 0", showarrow=False, x=0.5, y=0.5,
                xref=f"{ref[0]} domain", yref=f"{ref[1]} domain"))
    _each_axis(layout, refs, x=dict(type="log", title=dict(text="ε"), exponentformat="power"),
               y=dict(type="log", exponentformat="power"))
    layout.update(height=360, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return _figure(data, layout)


def eps_precision_figure(values: np.ndarray, errors: dict[str, np.ndarray],
                         axis_title: str) -> go.Figure:
    """max |LN(x in dtype) − LN(x in float64)| per dtype against ``values`` (log–log).

    One trace per dtype, in the order of ``errors``; NaN (the dtype overflowed) is a gap.
    """
    symbols = ("circle", "square", "diamond", "triangle-up")
    data = []
    for i, (dtype, err) in enumerate(errors.items()):
        color = OKABE_ITO[(i + 1) % len(OKABE_ITO)]
        data.append(dict(
            type="scatter", x=np.asarray(values, dtype=np.float64), y=_eps_loggable(err),
            mode="lines+markers", name=dtype, line=dict(color=color),
            marker=dict(color=color, size=6, symbol=symbols[i % len(symbols)]),
            hovertemplate=axis_title + " %{x:.3g}<br>max error %{y:.3g}<extra>" + dtype +
                          "</extra>",
        ))
    layout = dict(
        xaxis=dict(type="log", title=dict(text=axis_title), exponentformat="power"),
        yaxis=dict(type="log", title=dict(text="max |y_dtype − y_float64|"),
                   exponentformat="power"),
        height=380, margin=dict(t=30, b=10), legend=LEGEND_ABOVE)
    return _figure(data, layout)


def eps_cancellation_figure(
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
            type="scatter", x=x, y=_eps_loggable(err), mode="lines+markers", name=name,
            customdata=computed, line=dict(color=color), marker=dict(color=color, size=6),
            hovertemplate="offset %{x:.3g}<br>relative error %{y:.3g}<br>"
                          "computed σ² %{customdata:.4g}<extra>" + name + "</extra>",
        ))
        below = computed < 0
        negative_x += x[below].tolist()
        negative_y += _eps_loggable(np.asarray(err)[below])
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
        xaxis=dict(type="log", title=dict(text="offset from zero (values are offset + N(0, 1))"),
                   exponentformat="power"),
        yaxis=dict(type="log", title=dict(text="|σ² − σ²_true| / σ²_true"), exponentformat="power"),
        height=400, margin=dict(t=30, b=10), legend=LEGEND_ABOVE)
    return _figure(data, layout)


# --- Scale and shift, γ and β (app_pages/scale_shift.py) ------------------------------------------


def _affine_histogram_panel(centres: np.ndarray, counts: np.ndarray, mean: float, std: float,
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


def affine_grid_figure(
    centres: np.ndarray,
    counts: np.ndarray,
    gammas: Sequence[float],
    betas: Sequence[float],
    mean: np.ndarray,
    std: np.ndarray,
) -> go.Figure:
    """One histogram of γ·x̂ + β per (γ, β): rows are γ, columns β, on a shared x axis.

    ``counts`` has shape (len(gammas), len(betas), bins). The panel with γ = 1, β = 0 (x̂
    itself) is drawn in the "after" colour. Each panel is a bar trace followed by its three
    mean/std lines, row by row.
    """
    # "+ 0.0" turns a mean of -0.0 (rounded from a tiny negative) into a plain 0.00.
    titles = [f"γ = {g:g}, β = {b:g}:<br>mean {round(mean[i, j], 2) + 0.0:.2f},<br>"
              f"std {std[i, j]:.2f}"
              for i, g in enumerate(gammas) for j, b in enumerate(betas)]
    rows, cols = len(gammas), len(betas)
    layout, refs = _panel_grid(titles, rows=rows, gap=0.05, vgap=0.1, title_size=12)
    data: list[dict] = []
    for i, g in enumerate(gammas):
        for j, b in enumerate(betas):
            color = AFTER if (g, b) == (1.0, 0.0) else BEFORE
            data += _affine_histogram_panel(centres, counts[i, j], float(mean[i, j]),
                                            float(std[i, j]), color, refs[i * cols + j],
                                            i == j == 0)
    # Each column shares the bottom panel's x axis; only the bottom row shows its ticks.
    axes = _axis_ids(refs)
    for k, (xaxis, yaxis) in enumerate(axes):
        row, col = divmod(k, cols)
        if row < rows - 1:
            layout[xaxis].update(matches=refs[(rows - 1) * cols + col][0], showticklabels=False)
        else:
            layout[xaxis]["title"] = dict(text="value")
        if col == 0:
            layout[yaxis]["title"] = dict(text="count")
    layout.update(height=220 * rows + 80, bargap=0.05, margin=dict(t=40, b=10),
                  legend=LEGEND_BELOW)
    return _figure(data, layout)


def affine_histogram_figure(centres: np.ndarray, counts: np.ndarray, mean: float, std: float,
                            gamma: float, beta: float) -> go.Figure:
    """One histogram of γ·x̂ + β with its mean and mean ± std marked (trace 0: the bars)."""
    centres = np.asarray(centres, dtype=np.float64)
    data = _affine_histogram_panel(centres, counts, mean, std, AFTER, ("x", "y"), True)
    layout = dict(
        title=dict(text=f"γ = {gamma:g}, β = {beta:g} → mean {mean:.3f}, std {std:.3f}"),
        height=340, bargap=0.05, margin=dict(t=50, b=10), legend=LEGEND_BELOW,
        xaxis=dict(title=dict(text="value γ·x̂ + β")), yaxis=dict(title=dict(text="count")),
    )
    if centres.size:
        layout["xaxis"]["range"] = [float(centres[0]), float(centres[-1])]
    return _figure(data, layout)


def affine_feature_figure(output: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
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
    return _figure(data, layout)


def affine_recovery_figure(x: np.ndarray, outputs: dict[str, np.ndarray],
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
    return _figure(data, layout)


def affine_two_betas_figure(beta1: np.ndarray, beta2: np.ndarray, separate: np.ndarray,
                            merged: np.ndarray) -> go.Figure:
    """Left: β₁, β₂ and their sum per unit (traces 0–2). Right: the gate pre-activations of
    one sample with two betas (trace 3) and with one merged bias (trace 4)."""
    units = [str(u) for u in range(len(beta1))]
    layout, refs = _panel_grid(("the two betas, and their sum",
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
    _each_axis(layout, refs, x=dict(title=dict(text="gate unit")))
    layout.update(height=360, barmode="group", margin=dict(t=40, b=10),
                  legend=LEGEND_BELOW)
    return _figure(data, layout)


# --- Gradients and invariances (app_pages/gradients.py) -------------------------------------------

#: One colour per norm on the gradients page, and one per placement of LayerNorm in a block.
GRADS_COLORS = {"LayerNorm": OKABE_ITO[0], "BatchNorm": OKABE_ITO[1]}
BLOCKS_COLORS = {"post-LN": OKABE_ITO[0], "pre-LN": OKABE_ITO[1], "none": OKABE_ITO[5]}


def grads_heatmaps(panels: dict[str, np.ndarray]) -> go.Figure:
    """Small (batch × features) tables — e.g. x, ∂L/∂y and ∂L/∂x under each norm — one row per
    sample, each on its own symmetric colour scale, with the values written in.

    Two tables a row (more would leave a phone a few pixels per cell), the x axes labelled on
    the bottom row only; the values are written into the cells only where they fit on a phone
    (:data:`NARROW_PLOT_PX`), and are always in the hover text and the data tables."""
    titles = list(panels)
    grid_rows = -(-len(titles) // 2)
    samples = max(np.shape(g)[0] for g in panels.values())
    row_px = min(400, 34 * samples + 30)
    layout, refs = _panel_grid(titles, rows=grid_rows, gap=0.06,
                               vgap=70 / (grid_rows * row_px), title_size=16)
    data = []
    for k, (title, (xref, yref)) in enumerate(zip(titles, refs, strict=True)):
        grid = np.asarray(panels[title], dtype=np.float64)
        low, high = _symmetric_range(grid)
        rows, cols = grid.shape
        xaxis, yaxis = _axis_ids([(xref, yref)])[0]
        left, right = layout[xaxis]["domain"]
        cell_px = (right - left) * NARROW_PLOT_PX / cols
        written = cell_px >= _CHAR_EM * 10 * len("-0.00") + 4
        data.append(dict(
            type="heatmap", z=grid.astype(np.float32), zmin=low, zmax=high,
            colorscale=DIVERGING, showscale=False,
            texttemplate="%{z:.2f}" if written else None, textfont=dict(size=10),
            x=list(range(cols)), y=list(range(rows)),
            hovertemplate="sample %{y}, feature %{x}<br>%{z:.4g}<extra>" + title + "</extra>",
            xaxis=xref, yaxis=yref))
        bottom = k + 2 >= len(titles)
        layout[xaxis].update(title=dict(text="feature") if bottom else None, dtick=1,
                             showticklabels=bottom)
        layout[yaxis].update(autorange="reversed", dtick=1, showticklabels=k % 2 == 0,
                             title=dict(text="sample") if k % 2 == 0 else None)
    layout.update(height=grid_rows * row_px + 110, margin=dict(t=40, b=10))
    return _figure(data, layout)


def grads_param_figure(grad_weight: dict[str, np.ndarray], grad_bias: dict[str, np.ndarray]
                       ) -> go.Figure:
    """∂L/∂γ and ∂L/∂β per feature, one bar per norm (keys of the dicts)."""
    layout, refs = _panel_grid(("∂L/∂γ", "∂L/∂β"), gap=0.1, title_size=16)
    data = []
    for k, ((xref, yref), grads) in enumerate(zip(refs, (grad_weight, grad_bias), strict=True)):
        for norm, values in grads.items():
            values = np.asarray(values, dtype=np.float64)
            data.append(dict(
                type="bar", x=list(range(len(values))), y=values, name=norm, legendgroup=norm,
                showlegend=k == 0, marker=dict(color=GRADS_COLORS.get(norm, OKABE_ITO[2])),
                xaxis=xref, yaxis=yref))
    _each_axis(layout, refs, x=dict(title=dict(text="feature"), dtick=1))
    layout.update(height=300, barmode="group", margin=dict(t=40, b=10),
                  legend=LEGEND_BELOW)
    return _figure(data, layout)


def grads_jacobian_figure(jacobians: dict[str, np.ndarray], batch: int) -> go.Figure:
    """∂y/∂x heatmaps one above the other (square: side by side, a phone drew them 130 px
    wide), on one symmetric scale, with lines around each sample's diagonal block: entries
    outside the blocks are one sample's output moved by another's input."""
    titles = list(jacobians)
    layout, refs = _panel_grid(titles, rows=len(titles), vgap=0.2, title_size=16)
    low, high = _symmetric_range(np.concatenate(
        [np.asarray(j, dtype=np.float64).ravel() for j in jacobians.values()]))
    size = np.shape(jacobians[titles[0]])[0]
    per_sample = size // batch
    centres = [k * per_sample + (per_sample - 1) / 2 for k in range(batch)]
    names = [f"sample {k}" for k in range(batch)]
    xs: list[float | None] = []
    ys: list[float | None] = []
    for k in range(batch):
        a, b = k * per_sample - 0.5, (k + 1) * per_sample - 0.5
        xs += [a, b, b, a, a, None]
        ys += [a, a, b, b, a, None]
    data = []
    for i, (title, (xref, yref)) in enumerate(zip(titles, refs, strict=True)):
        data.append(dict(
            type="heatmap", z=np.asarray(jacobians[title], dtype=np.float32), zmin=low,
            zmax=high, colorscale=DIVERGING, showscale=i == len(titles) - 1,
            colorbar=_colorbar_below(0.25, 0.75, low, high), xaxis=xref, yaxis=yref,
            hovertemplate="∂y[%{y}]/∂x[%{x}] = %{z:.4g}<extra>" + title + "</extra>"))
        data.append(dict(type="scatter", x=xs, y=ys, mode="lines", hoverinfo="skip",
                         showlegend=False, line=dict(color="black", width=1.5),
                         xaxis=xref, yaxis=yref))
    ticks = dict(tickmode="array", tickvals=centres, ticktext=names)
    for (xaxis, yaxis), (xref, _) in zip(_axis_ids(refs), refs, strict=True):
        layout[xaxis].update(range=[-0.5, size - 0.5], title=dict(text="input x (flattened)"),
                             **ticks)
        layout[yaxis].update(range=[size - 0.5, -0.5], scaleanchor=xref, **ticks,
                             title=dict(text="output y (flattened)"))
    layout.update(height=360 * len(titles) + 60, margin=dict(t=40, b=10))
    return _figure(data, layout)


def grads_invariance_figure(probes: Sequence[str], deltas: dict[str, Sequence[float]],
                            floor: float = 1e-17) -> go.Figure:
    """max |Δoutput| per probe and norm as horizontal bars on a log axis; exact zeros are drawn
    at ``floor`` so that they stay visible, and every bar carries its value."""
    data = []
    for norm, values in deltas.items():
        values = np.asarray(values, dtype=np.float64)
        data.append(dict(
            type="bar", y=list(probes), x=np.maximum(values, floor), orientation="h", name=norm,
            marker=dict(color=GRADS_COLORS.get(norm, OKABE_ITO[2])),
            text=[f"{v:.1e}" for v in values], textposition="auto", cliponaxis=False,
            customdata=values, hovertemplate="%{y}: max |Δy| = %{customdata:.3g}<extra>"
                                              + norm + "</extra>",
        ))
    layout = dict(
        xaxis=dict(type="log", title=dict(text="max |Δ output|<br>(log scale; ≈1e-16 is "
                                                 "rounding)"),
                   exponentformat="power", automargin=True),
        yaxis=dict(autorange="reversed"),
        barmode="group", height=90 + 55 * len(probes), margin=dict(t=20, b=10),
        legend=LEGEND_ABOVE)
    return _figure(data, layout)


# --- Transformer blocks (app_pages/shapes.py) -----------------------------------------------------


def blocks_depth_figure(stream: dict[str, np.ndarray], attention: dict[str, np.ndarray],
                        ffn: dict[str, np.ndarray]) -> go.Figure:
    """RMS through a stack of blocks, one colour per variant, on log axes: the residual stream
    after each block (left, block 0 = the input) and what each block's sublayers add (right;
    solid = feed-forward, dotted = attention). NaN marks a value that overflowed."""
    layout, refs = _panel_grid(("residual stream RMS",
                                "sublayer output RMS (solid FFN, dotted attention)"),
                               gap=0.1, title_size=16)
    left = dict(xaxis=refs[0][0], yaxis=refs[0][1])
    right = dict(xaxis=refs[1][0], yaxis=refs[1][1])
    data = []
    for variant, values in stream.items():
        color = BLOCKS_COLORS.get(variant, OKABE_ITO[2])
        values = np.asarray(values, dtype=np.float64)
        data.append(dict(
            type="scatter", x=np.arange(len(values)), y=values, mode="lines+markers",
            name=variant, legendgroup=variant, line=dict(color=color, width=2),
            marker=dict(size=4), **left,
            hovertemplate="after block %{x}: RMS %{y:.3g}<extra>" + variant + "</extra>"))
        for part, dash in ((ffn, "solid"), (attention, "dot")):
            out = np.asarray(part[variant], dtype=np.float64)
            data.append(dict(
                type="scatter", x=np.arange(1, len(out) + 1), y=out, mode="lines",
                name=variant, legendgroup=variant, showlegend=False,
                line=dict(color=color, dash=dash), **right,
                hovertemplate="block %{x}: RMS %{y:.3g}<extra>" + variant + "</extra>"))
    _each_axis(layout, refs, x=dict(title=dict(text="block")),
               y=dict(type="log", exponentformat="power"))
    layout["yaxis"]["title"] = dict(text="RMS")
    layout.update(height=420, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return _figure(data, layout)


def bench_figure(rows: Sequence, roofline_gbps: dict[int, float] | None = None) -> go.Figure:
    """Benchmark results (lnviz.bench.Row): median time and achieved bandwidth against the
    number of values, one line per (norm, implementation), with the copy roofline drawn."""
    layout, refs = _panel_grid(("median time (ms)", "bandwidth (GB/s)"), gap=0.1,
                               title_size=16)
    series: dict[tuple[str, str], list] = {}
    for row in rows:
        series.setdefault((row.norm, row.impl), []).append(row)
    impls = sorted({impl for _, impl in series})
    dashes = {"layer": "solid", "batch": "dash", "rms": "dot"}
    left = dict(xaxis=refs[0][0], yaxis=refs[0][1])
    right = dict(xaxis=refs[1][0], yaxis=refs[1][1])
    data = []
    for (norm, impl), points in series.items():
        points = sorted(points, key=lambda r: r.size)
        color = OKABE_ITO[impls.index(impl) % len(OKABE_ITO)]
        common = dict(type="scatter", mode="lines+markers", name=f"{norm} · {impl}",
                      legendgroup=f"{norm}{impl}",
                      line=dict(color=color, dash=dashes.get(norm, "solid")))
        sizes = [p.size for p in points]
        data.append(dict(x=sizes, y=[p.seconds * 1e3 for p in points], **common, **left))
        data.append(dict(x=sizes, y=[p.gb_per_s for p in points], showlegend=False, **common,
                         **right))
    if roofline_gbps:
        sizes = sorted(roofline_gbps)
        # A level mark at each size: with a single size a bare line would be one invisible point.
        data.append(dict(type="scatter", x=sizes, y=[roofline_gbps[s] for s in sizes],
                         mode="lines+markers", name="copy (roofline)",
                         line=dict(color="black", width=3),
                         marker=dict(symbol="line-ew-open", size=26, color="black",
                                     line=dict(width=3, color="black")), **right))
    _each_axis(layout, refs, x=dict(type="log", title=dict(text="values in the tensor")),
               y=dict(type="log"))
    layout.update(height=420, margin=dict(t=40, b=10))
    return _figure(data, layout)


# --- BatchNorm vs LayerNorm and padding pages (app_pages/bn_vs_ln.py, app_pages/padding.py) -------

#: One colour per norm on the BatchNorm-vs-LayerNorm page.
BNLN_COLORS = {"BatchNorm": OKABE_ITO[0], "LayerNorm": OKABE_ITO[1]}
#: BatchNorm with the pads counted, masked BatchNorm and LayerNorm on the padding page.
PADDING_COLORS = {"counted": OKABE_ITO[5], "masked": OKABE_ITO[2], "LayerNorm": OKABE_ITO[1]}
_ALERT = dict(color="#B00020", size=13)


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


def bnln_sharing_figure(
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
            (see :func:`lnviz.batchdep.sharing_cubes`), or ``None`` for a norm that does not
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
    notes = ["<br>".join(_wrap(note, 0.95 * step * unit_px, 11)) for note in notes]
    note_height = max(_lines(note) for note in notes) * _LINE_EM * 11 / unit_px
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
                                    showarrow=False, font=_ALERT, bgcolor="white"))
    bottom = dys[-1] - 0.3 - note_height
    layout = dict(
        height=int(np.clip((top_edge + 0.22 - bottom) * unit_px + 50, 300, 900)),
        margin=dict(t=10, b=10, l=10, r=10), plot_bgcolor="white",
        annotations=annotations, legend=LEGEND_BELOW,
        xaxis=dict(range=[-0.2, span - 0.2], visible=False),
        yaxis=dict(range=[bottom, top_edge + 0.22], visible=False, scaleanchor="x"),
    )
    return _figure(data, layout)


def bnln_redraws_figure(
    batch_norm: np.ndarray | None, layer_norm: np.ndarray, refusal: str | None = None
) -> go.Figure:
    """One sample's output feature by feature, one line per re-drawn batch: BatchNorm's panel
    beside LayerNorm's, on one y scale. Args are (re-draws, C) arrays; where BatchNorm refused
    the batch (``batch_norm=None``) its panel shows ``refusal`` instead."""
    import textwrap

    layout, refs = _panel_grid(["BatchNorm (training mode)", "LayerNorm"], gap=0.06)
    features = np.arange(layer_norm.shape[1])
    data = []
    for (xref, yref), outputs, name in ((refs[0], batch_norm, "BatchNorm"),
                                        (refs[1], layer_norm, "LayerNorm")):
        if outputs is None:
            continue
        for r, row in enumerate(np.asarray(outputs, dtype=np.float32)):
            data.append(dict(
                type="scatter", x=features, y=row, xaxis=xref, yaxis=yref, name=name,
                mode="lines+markers", legendgroup=name, showlegend=r == 0, opacity=0.7,
                line=dict(color=BNLN_COLORS[name], width=1.5), marker=dict(size=6),
                hovertemplate=f"batch {r}<br>feature %{{x}}: %{{y:.4f}}<extra>{name}</extra>"))
    (x1, y1), (x2, y2) = _axis_ids(refs)
    for xaxis in (x1, x2):
        layout[xaxis].update(title=dict(text="feature"), dtick=1)
    layout[y1]["title"] = dict(text="output y of the fixed sample")
    if batch_norm is None:
        left, right = layout[x1]["domain"]
        text = "<br>".join(textwrap.wrap(refusal or "BatchNorm refused this batch", 42))
        layout["annotations"].append(dict(
            x=(left + right) / 2, y=0.5, xref="paper", yref="paper", xanchor="center",
            text=text, showarrow=False, font=_ALERT, bgcolor="#FDECEA", borderpad=8))
        layout[x1]["visible"] = layout[y1]["visible"] = False
    else:
        layout[y2]["matches"] = "y"  # one scale, so the two spreads compare at a glance
    layout.update(height=340, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return _figure(data, layout)


def bnln_batch_sizes_figure(
    batch_sizes: np.ndarray, batch_norm: np.ndarray, layer_norm: np.ndarray, feature: int
) -> go.Figure:
    """One output feature of the fixed sample against the batch size: each re-draw a dot and
    the band they span for BatchNorm (NaN where it refused), a line for LayerNorm.

    ``batch_norm`` and ``layer_norm`` are (sizes, re-draws) arrays."""
    sizes = np.asarray(batch_sizes, dtype=np.int64)
    bn = np.asarray(batch_norm, dtype=np.float64)
    # A refused size is NaN in every re-draw, so its band is NaN too: a gap.
    low, high = bn.min(axis=1), bn.max(axis=1)
    color = BNLN_COLORS["BatchNorm"]
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
             line=dict(color=BNLN_COLORS["LayerNorm"], width=3), marker=dict(size=7),
             hovertemplate="batch size %{x}: %{y:.4f}<extra>LayerNorm</extra>"),
    ]
    layout = dict(
        height=340, margin=dict(t=30, b=10), legend=LEGEND_BELOW,
        xaxis=dict(type="log", title=dict(text="batch size"), tickvals=sizes.tolist()),
        yaxis=dict(title=dict(text=f"output y, feature {feature}")),
    )
    return _figure(data, layout)


def bnln_running_stats_figure(
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
    layout, refs = _panel_grid(["mean μ", "variance σ²"], gap=0.08)
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
    for xaxis, _ in _axis_ids(refs):
        layout[xaxis]["title"] = dict(text="training step")
    layout.update(height=360, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return _figure(data, layout)


def bnln_modes_figure(
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
        dict(type="scatter", x=train, y=evaluated, mode="markers", name="BatchNorm",
             marker=dict(color=BNLN_COLORS["BatchNorm"], size=7, opacity=0.75),
             hovertemplate="train %{x:.4f}<br>eval %{y:.4f}<extra>BatchNorm</extra>"),
        dict(type="scatter", x=ln, y=ln, mode="markers", name="LayerNorm",
             marker=dict(color=BNLN_COLORS["LayerNorm"], size=6, symbol="diamond",
                         opacity=0.75),
             hovertemplate="train = eval = %{x:.4f}<extra>LayerNorm</extra>"),
    ]
    layout = dict(height=420, margin=dict(t=30, b=10),
                  xaxis=dict(title=dict(text="output in training mode"), range=[-bound, bound]),
                  yaxis=dict(title=dict(text="output in evaluation mode"), range=[-bound, bound]))
    return _figure(data, layout)


def padding_feature_stats_figure(
    mean_with_pad: np.ndarray,
    mean_masked: np.ndarray,
    std_with_pad: np.ndarray,
    std_masked: np.ndarray,
) -> go.Figure:
    """BatchNorm's μ and σ per feature, with the pads counted and with them masked out, as
    labelled bars side by side; a series that is all NaN (too few values to pool) is left out,
    legend entry and all."""
    layout, refs = _panel_grid(["BatchNorm μ per feature", "BatchNorm σ per feature"])
    features = [f"feature {i}" for i in range(len(mean_masked))]
    data = []
    for (xref, yref), counted, masked in ((refs[0], mean_with_pad, mean_masked),
                                          (refs[1], std_with_pad, std_masked)):
        for values, name, key in ((counted, "pads counted", "counted"),
                                  (masked, "real tokens only (masked)", "masked")):
            values = np.asarray(values, dtype=np.float64)
            if not np.isfinite(values).any():
                continue
            data.append(dict(type="bar", x=features, y=values, name=name, legendgroup=name,
                             showlegend=xref == "x", marker=dict(color=PADDING_COLORS[key]),
                             xaxis=xref, yaxis=yref, text=[f"{v:.3g}" for v in values],
                             textposition="outside", cliponaxis=False))
    layout.update(barmode="group", height=340, margin=dict(t=40, b=10),
                  legend=LEGEND_BELOW)
    return _figure(data, layout)


def padding_tokens_figure(
    panels: Sequence[tuple[str, np.ndarray]],
    padding: np.ndarray,
    row_labels: Sequence[str] | None = None,
) -> go.Figure:
    """Token-by-feature grids side by side with each run of pad tokens veiled in grey and
    outlined: the first panel (the input) has its own colour scale, the others (outputs) share
    one; both centred on zero.

    A veil per run rather than a mark per cell: with hundreds of rows a cell is a pixel or two
    high, and marks sized for a cell would cover the heatmap; the veil leaves every colour
    visible at any size, and the figure grows with the number of runs, not of cells.

    Args:
        panels: (title, grid) pairs, each grid tokens × features.
        padding: bool (tokens,), True at pad tokens.
        row_labels: one name per token (must be distinct).
    """
    layout, refs = _panel_grid([title for title, _ in panels], gap=0.03)
    grids = [np.asarray(grid, dtype=np.float32) for _, grid in panels]
    rows, cols = grids[0].shape
    labels = list(row_labels) if row_labels is not None else [f"token {i}" for i in range(rows)]
    features = [f"f{j}" for j in range(cols)]
    runs = _runs(np.asarray(padding, dtype=bool))
    outputs = np.concatenate([g.ravel() for g in grids[1:]]) if len(grids) > 1 else grids[0]
    data, shapes = [], []
    for i, ((title, _), grid, (xref, yref)) in enumerate(zip(panels, grids, refs, strict=True)):
        data.append(dict(type="heatmap", z=grid, x=features, y=labels, xaxis=xref, yaxis=yref,
                         coloraxis="coloraxis" if i == 0 else "coloraxis2", name=title,
                         hovertemplate="%{y}, %{x}: %{z:.4g}<extra>" + title + "</extra>"))
        # Category axes place cell k at k, so a run of rows [a, b) spans a − ½ to b − ½.
        shapes += [dict(type="rect", xref=xref, yref=yref, x0=-0.5, x1=cols - 0.5,
                        y0=a - 0.5, y1=b - 0.5, fillcolor="rgba(51, 51, 51, 0.35)",
                        line=dict(color="#333333", width=1.5), layer="above",
                        name="pad tokens", legendgroup="pad tokens", showlegend=False)
                   for a, b in runs]
    if shapes:
        shapes[0]["showlegend"] = True
    for i, (xaxis, yaxis) in enumerate(_axis_ids(refs)):
        layout[xaxis]["type"] = "category"
        layout[yaxis].update(type="category", autorange="reversed", showticklabels=i == 0)
    input_range, output_range = _symmetric_range(grids[0]), _symmetric_range(outputs)
    # colorbars on the bottom edge (x under the input, y under the outputs), the legend on top
    first = layout["xaxis"]["domain"]
    rest = (layout[_axis_ids(refs)[1][0]]["domain"][0],
            layout[_axis_ids(refs)[-1][0]]["domain"][1]) if len(refs) > 1 else first
    layout.update(
        height=max(340, min(900, 22 * rows + 160)), margin=dict(t=40, b=10),
        legend=dict(LEGEND_ABOVE, x=1, xanchor="right"), shapes=shapes,
        coloraxis=dict(colorscale=DIVERGING, cmin=input_range[0], cmax=input_range[1],
                       colorbar=dict(_colorbar_below(*first, *input_range),
                                     title=dict(text="x", side="top"))),
        coloraxis2=dict(colorscale=DIVERGING, cmin=output_range[0], cmax=output_range[1],
                        colorbar=dict(_colorbar_below(*rest, *output_range),
                                      title=dict(text="y", side="top"))),
    )
    return _figure(data, layout)


def padding_share_figure(
    fraction: np.ndarray,
    mean_with_pad: np.ndarray,
    mean_masked: np.ndarray,
    std_with_pad: np.ndarray,
    std_masked: np.ndarray,
    drift_with_pad: np.ndarray,
    drift_masked: np.ndarray,
    drift_layer_norm: np.ndarray,
    current: float | None = None,
    feature: int = 0,
) -> go.Figure:
    """Against the padded share of the batch: one feature's BatchNorm μ and σ with and without
    the pads, and how far the real tokens' outputs move (max |change| against no padding) under
    BatchNorm, masked BatchNorm and LayerNorm. ``current`` marks this batch's own share. A
    series that is all NaN (one real token: no BatchNorm without pads to compare with, no masked
    BatchNorm) is left out, legend entry and all."""
    layout, refs = _panel_grid([f"μ of feature {feature}", f"σ of feature {feature}",
                                  "real tokens' output moved by"])
    x = np.asarray(fraction, dtype=np.float64)
    counted = ("BatchNorm, pads counted", PADDING_COLORS["counted"], "solid", "circle")
    masked = ("BatchNorm, masked", PADDING_COLORS["masked"], "dash", "square")
    layer = ("LayerNorm", PADDING_COLORS["LayerNorm"], "dot", "diamond-open")
    series = ((0, mean_with_pad, counted), (0, mean_masked, masked),
              (1, std_with_pad, counted), (1, std_masked, masked),
              (2, drift_with_pad, counted), (2, drift_masked, masked),
              (2, drift_layer_norm, layer))
    data, shown = [], set()
    for panel, y, (name, color, dash, symbol) in series:
        y = np.asarray(y, dtype=np.float64)
        if not np.isfinite(y).any():
            continue
        data.append(dict(
            type="scatter", x=x, y=y, mode="lines+markers",
            xaxis=refs[panel][0], yaxis=refs[panel][1], name=name, legendgroup=name,
            showlegend=name not in shown, line=dict(color=color, dash=dash, width=2),
            marker=dict(symbol=symbol, size=7),
            hovertemplate="padded %{x:.0%}: %{y:.4g}<extra>" + name + "</extra>"))
        shown.add(name)
    if current is not None:
        layout["shapes"] = [dict(type="line", x0=current, x1=current, y0=0, y1=1, xref=xref,
                                 yref=f"{yref} domain", line=dict(color="#555555", dash="dot",
                                                                  width=1))
                            for xref, yref in refs]
    _each_axis(layout, refs, x=dict(title=dict(text="padded share of the batch"),
                                    tickformat=".0%"))
    layout.update(height=360, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return _figure(data, layout)


def padding_pad_row_figure(output: np.ndarray, beta: float) -> go.Figure:
    """LayerNorm's output for a pad token, feature by feature, against the line y = β; NaN
    outputs (ε = 0: 0/0) are labelled instead of drawn."""
    y = np.asarray(output, dtype=np.float64)
    features = [f"feature {i}" for i in range(y.size)]
    nan = np.isnan(y)
    annotations = [dict(x=1.0, y=beta, xref="paper", xanchor="right", yanchor="bottom",
                        text=f"β = {beta:g}", showarrow=False)]
    if nan.any():
        annotations.append(dict(x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                                text="NaN: x − μ = 0 divided by √(0 + 0) = 0", font=_ALERT,
                                bgcolor="#FDECEA"))
    data = [dict(type="bar", x=features, y=np.where(nan, 0.0, y), name="pad token's output",
                 marker=dict(color=PADDING_COLORS["LayerNorm"]), textposition="outside",
                 text=["NaN" if v else f"{w:.4g}" for v, w in zip(nan, y, strict=True)],
                 cliponaxis=False)]
    layout = dict(height=300, margin=dict(t=30, b=10), showlegend=False,
                  yaxis=dict(title=dict(text="y")), annotations=annotations,
                  shapes=[dict(type="line", x0=0, x1=1, xref="paper", y0=beta, y1=beta,
                               line=dict(color="#333333", dash="dash"))])
    return _figure(data, layout)


# --- Training: LN-LSTM vs LSTM (app_pages/training.py) --------------------------------------------

#: One colour per model of the training page: the plain LSTM in the "before" blue, the LN-LSTM in
#: the "after" orange, the BN-LSTM in green.
TRAINING_COLORS = {"LSTM": BEFORE, "LN-LSTM": AFTER, "BN-LSTM": OKABE_ITO[2]}


def _training_color(label: str, index: int) -> str:
    return TRAINING_COLORS.get(label, OKABE_ITO[(index + 3) % len(OKABE_ITO)])


def _hline(y: float, refs: tuple[str, str]) -> dict:
    """A dotted grey horizontal line across one panel, at height ``y``."""
    return dict(type="line", xref=f"{refs[0]} domain", x0=0, x1=1, yref=refs[1], y0=y, y1=y,
                line=dict(color="#777777", dash="dot", width=1))


def training_curves_figure(
    curves: dict[str, dict[str, Sequence[float]]],
    total_steps: int | None = None,
    chance: float | None = None,
) -> go.Figure:
    """Training loss and held-out accuracy against the step, one line per model.

    ``curves`` maps a model label to its ``step``, ``loss`` and ``accuracy`` lists (as
    :attr:`lnviz.train.ModelRun.curve` holds them). ``total_steps`` fixes the x range, so that a
    chart redrawn while training grows into it instead of rescaling; ``chance`` draws the
    accuracy of guessing (1 / classes) as a dotted line.
    """
    layout, refs = _panel_grid(("training loss (mean since the previous point)",
                                "held-out accuracy"), gap=0.1, title_size=16)
    data = []
    for index, (label, curve) in enumerate(curves.items()):
        color = _training_color(label, index)
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
    _each_axis(layout, refs, x=dict(title=dict(text="step")))
    if total_steps:
        _each_axis(layout, refs, x=dict(range=[0, total_steps * 1.02]))
    layout["yaxis"]["rangemode"] = "tozero"
    layout["yaxis2"].update(range=[0, 1.02], tickformat=".0%")
    layout.update(height=340, margin=dict(t=40, b=10), legend=LEGEND_BELOW)
    return _figure(data, layout)


def training_grad_norm_figure(step_grad_norm: dict[str, Sequence[float]]) -> go.Figure:
    """‖∇θ‖₂, the norm of all parameter gradients, at every step, one line per model, on a log
    axis so that a spike and a slow drift both stay visible."""
    data = []
    for index, (label, norms) in enumerate(step_grad_norm.items()):
        values = np.asarray(norms, dtype=np.float64)
        data.append(dict(type="scatter", x=np.arange(1, values.size + 1), y=values,
                         mode="lines", name=label,
                         line=dict(color=_training_color(label, index), width=1)))
    layout = dict(height=300, margin=dict(t=30, b=10), xaxis=dict(title=dict(text="step")),
                  yaxis=dict(title=dict(text="gradient norm ‖∇θ‖₂"), type="log", dtick=1,
                             exponentformat="power"),
                  legend=LEGEND_BELOW)
    return _figure(data, layout)


def training_gates_figure(
    quantiles: dict[str, np.ndarray], saturation: float | None = 4.0
) -> go.Figure:
    """The spread of the gate pre-activations at each time step, one panel per model.

    ``quantiles`` maps a model label to a (T, 5) array of the 5 %, 25 %, 50 %, 75 % and 95 %
    quantiles at every step (a row of :func:`lnviz.rnn.gate_quantiles`). Each panel draws the
    5–95 % band light, the 25–75 % band darker and the median as a line; the y axis is shared, so
    a model whose sums wander off shows it at once. ``saturation`` marks ±that value, beyond
    which σ is flat (σ′(4) ≈ 0.018): a pre-activation out there passes almost no gradient.
    """
    labels = list(quantiles)
    layout, refs = _panel_grid(labels or [""], gap=0.03, title_size=16)
    data = []
    shapes = []
    for index, (label, (xref, yref)) in enumerate(zip(labels, refs, strict=False)):
        q = np.asarray(quantiles[label], dtype=np.float64)
        steps = np.arange(1, q.shape[0] + 1)
        color = _training_color(label, index)
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
        xaxis, yaxis = _axis_ids([(xref, yref)])[0]
        layout[xaxis].update(title=dict(text="time step t"), dtick=max(1, len(steps) // 8))
        if index:  # one y axis for all panels
            layout[yaxis].update(matches="y", showticklabels=False)
    layout["yaxis"]["title"] = dict(text="pre-activation z")
    layout.update(shapes=shapes, height=340, margin=dict(t=40, b=10))
    return _figure(data, layout)


def _tabulated(trace: go.basedatatypes.BaseTraceType) -> bool:
    """Whether :func:`figure_tables` gives this trace's numbers: a heatmap's grid, or the points
    of a trace with hover text (one without is decoration: boundaries, guide lines, marks)."""
    if trace.type == "heatmap":
        return trace.z is not None
    return getattr(trace, "y", None) is not None and trace.hoverinfo != "skip"


def has_tables(fig: go.Figure) -> bool:
    """Whether :func:`figure_tables` would find any numbers in ``fig`` (a diagram has none)."""
    return any(_tabulated(trace) for trace in fig.data)


def figure_tables(fig: go.Figure, max_rows: int = 2000) -> list[tuple[str, pd.DataFrame]]:
    """The numbers behind a figure, for readers who cannot see the chart (or want the values):
    each heatmap as its grid, and every other trace in one long table of (trace, x, y).

    Traces without hover text (group boundaries, guide lines, markers) are decoration and are
    left out.
    """
    tables: list[tuple[str, pd.DataFrame]] = []
    points: list[pd.DataFrame] = []
    for i, trace in enumerate(fig.data):
        if not _tabulated(trace):
            continue
        name = trace.name or f"{trace.type} {i + 1}"
        if trace.type == "heatmap":
            tables.append((name, pd.DataFrame(np.asarray(trace.z, dtype=float)[:max_rows])))
        else:
            y = np.asarray(trace.y, dtype=object)
            x = np.asarray(trace.x if trace.x is not None else range(len(y)), dtype=object)
            points.append(pd.DataFrame({"trace": name, "x": x[: len(y)], "y": y}))
    if points:
        tables.append(("points", pd.concat(points, ignore_index=True).head(max_rows)))
    return tables
