"""The shared parts of every figure: the palette, one-call figure building, panel grids,
legends and colorbars that fit a phone, and the tables of numbers behind a figure.

Every figure is built from plain dicts in a single ``go.Figure(data=..., layout=...)`` call
without plotly's property-by-property validation (:func:`figure`), with panels laid out by
:func:`panel_grid`: plotly's ``make_subplots``, ``add_trace`` and ``update_*`` validate the
figure again on every call. Scale and shift's 3 × 3 grid of histograms takes 4 ms this way,
13 ms validated, and 117 ms through ``make_subplots`` (measured 2026-11-23, a rerun's figure
calls replayed).
tests/test_charts.py validates a figure of every builder instead.
"""

from __future__ import annotations

import contextvars
import functools
import html
import math
import textwrap
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

# Plotly's own base64 encoding of numpy arrays, the step Figure.to_dict() ends with: used so that
# figure_dict() sends exactly the JSON a figure does (tests/test_charts.py compares the two).
from _plotly_utils.utils import convert_to_base64

from lnviz.batch import GridView
from lnviz.terms import Layout

#: Okabe & Ito's palette, distinguishable with the common kinds of colour blindness.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
             "#000000"]


#: Blue–white–orange: diverging and colour-blind safe (no red against green).
DIVERGING = [[0.0, "#2166AC"], [0.25, "#67A9CF"], [0.5, "#F7F7F7"], [0.75, "#FDB863"],
             [1.0, "#B35806"]]


BEFORE, AFTER = OKABE_ITO[0], OKABE_ITO[1]


#: Okabe–Ito's blue, darker: the shaded side of a cube drawn in that blue.
DARK_BLUE = "#005A8C"
#: Text that warns of a mistake on a figure.
ALERT_FONT = dict(color="#B00020", size=13)
#: The pale red behind a refusal written in a figure, as behind Streamlit's error alerts.
ALERT_BACKGROUND = "#FDECEA"
#: The width in pixels of a figure's plot area on a 390-px phone (iPhone 12–15, upright): the
#: screen less the page's and the figure's margins. Figures cannot know the screen they are
#: drawn on, so text that shares a row between panels (panel titles, axis titles) is wrapped to
#: fit this width, and multi-panel figures are laid out so that they read at it; a desktop shows
#: the same lines with room to spare.
NARROW_PLOT_PX = 290
#: The figures' font (Streamlit's theme): mean width of a character, and plotly's line
#: height, both in ems.
CHAR_EM, LINE_EM = 0.55, 1.3


#: One colour per placement of the norms and per model of a training race, on every figure.
VARIANT_COLORS = {"post-LN": OKABE_ITO[0], "pre-LN": OKABE_ITO[1], "none": OKABE_ITO[5],
                  "no norm": OKABE_ITO[5], "pre-RMSNorm": OKABE_ITO[2],
                  "pre-DyT": OKABE_ITO[3], "Peri-LN": OKABE_ITO[2], "OLMo-2": OKABE_ITO[3]}


def variant_color(variant: str) -> str:
    """The colour of a placement or a race's model (:data:`VARIANT_COLORS`)."""
    return VARIANT_COLORS.get(variant, OKABE_ITO[6])


#: 0 to 1 in the blue half of the diverging scale (white, light blue, blue): attention weights.
BLUES = [[0.0, DIVERGING[2][1]], [0.5, DIVERGING[1][1]], [1.0, DIVERGING[0][1]]]


def _byte_level() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: each of the 256 characters a byte-level BPE
    vocabulary writes for a byte (printable Latin-1 bytes as themselves, the rest shifted to
    256 + n, so that a space is "Ġ" and a newline "Ċ"), mapped back to its byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


_BYTES = _byte_level()


def bpe_piece(token: str) -> str:
    """A byte-level BPE piece as a reader sees it: its bytes read as UTF-8, a space as "␣" and
    a newline as "↵"; bytes that are part of a character split across pieces (東 is three
    bytes, often three pieces) as ⟨E6⟩, not as the Latin-1 letters the vocabulary stores them
    as ("æ"). A piece with characters outside the byte alphabet (a special token such as
    <|im_start|> is ASCII, so it is in it) is shown as it is."""
    if not token or any(c not in _BYTES for c in token):
        return token
    text = bytes(_BYTES[c] for c in token).decode("utf-8", errors="surrogateescape")
    return "".join(f"⟨{ord(c) - 0xDC00:02X}⟩" if 0xDC80 <= ord(c) <= 0xDCFF else
                   "␣" if c == " " else "↵" if c == "\n" else c for c in text)


def sentencepiece_piece(token: str) -> str:
    """A SentencePiece piece (Gemma's) as a reader sees it: "▁" (a space) as "␣", a newline as
    "↵", a tab as "⇥", a byte the vocabulary lacks (<0xE6>, part of a character split across
    pieces) as ⟨E6⟩, as :func:`bpe_piece` writes one, and a character that shows nothing (a
    zero-width non-joiner, a soft hyphen, another kind of space) by its code point, ⟨U+200C⟩."""
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        return f"⟨{token[3:5]}⟩"
    shown = token.replace("▁", "␣").replace("\n", "↵").replace("\t", "⇥")
    # a character that shows nothing (a zero-width joiner, a soft hyphen) by its code point
    return "".join(f"⟨U+{ord(c):04X}⟩" if unicodedata.category(c) in ("Cf", "Cc", "Zs")
                   else c for c in shown)


def token_labels(tokens: Sequence[str]) -> list[str]:
    """Distinct axis labels for tokens, which repeat ("the" twice): "0 [CLS]", "1 the", …"""
    return [f"{i} {t}" for i, t in enumerate(tokens)]


def plain_label(text: object) -> str:
    """``text`` (a name from a file, say) as Plotly shows it: Plotly renders a subset of HTML
    in labels, hover and titles (``<a href>``, ``<b>``, ``<br>``), so its markup is escaped and
    shows as the characters typed."""
    return html.escape(str(text), quote=False)


def category_axis(names: Sequence[str], width_px: float, *, max_chars: int = 22
                  ) -> tuple[list[str], dict]:
    """An axis with one category per name, in the order given, whatever the names hold: the
    categories (the x values of the traces: the names, escaped) and the axis settings that label
    them with their names shortened from the left to ``max_chars`` characters, as many as fit
    a panel ``width_px`` wide on a phone (:func:`fitted_ticks`). Shortening and thinning touch
    the tick text alone, so two names that end alike stay two categories; hover shows the whole
    name."""
    categories = [plain_label(name) for name in names]
    short = [plain_label(name if len(name) <= max_chars else "…" + name[-(max_chars - 1):])
             for name in names]
    shown, angle = fitted_ticks(short, width_px, most=len(short))
    return categories, dict(type="category", categoryorder="array", categoryarray=categories,
                            tickmode="array", tickvals=[categories[i] for i in shown],
                            ticktext=[short[i] for i in shown], tickangle=angle)


#: Panel titles are annotations with this name, so that :func:`figure` can find them.
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


def wrap_text(text: str, width_px: float, size: float) -> list[str]:
    """``text`` in lines of at most ``width_px`` pixels at font ``size`` (words kept whole; a
    ``<br>`` in it always breaks the line)."""
    chars = max(4, int(width_px / (CHAR_EM * size)))
    return [line for part in text.split("<br>")
            for line in textwrap.wrap(part, chars, break_long_words=False) or [part]]


def text_lines(text: str) -> int:
    return text.count("<br>") + 1


def fitted_ticks(labels: Sequence[object], width_px: float, *, size: float = 12,
                 most: int = 12) -> tuple[list[int], int]:
    """Which of ``labels`` (one per column of a panel ``width_px`` wide on a phone) to write
    on the axis so that they do not run together, and their angle: side by side (0°) where at
    least four fit, else upright (−90°), one line of text wide each. At most ``most``."""
    n = len(labels)
    if n == 0:
        return [], 0
    widest = max(len(str(label)) for label in labels) * CHAR_EM * size + 6
    angle = 0 if width_px // widest >= min(4, n) else -90
    fits = width_px // (widest if angle == 0 else LINE_EM * size + 2)
    step = math.ceil(n / max(1, min(most, int(fits))))
    return list(range(0, n, step)), angle


#: The font size of a colorbar's title.
COLORBAR_TITLE_SIZE = 12


def colorbar_below(left: float, right: float, low: float, high: float,
                   title: str | None = None) -> dict:
    """A horizontal colorbar on the figure's bottom edge, under the panels spanning ``left``
    to ``right`` (fractions of the plot area's width): never on a panel, on any screen. Its
    scale runs from ``low`` to ``high`` through 0, and only those three are labelled, which fit
    under the narrowest panel. A ``title`` goes under the bar's labels, in one line: keep it
    short enough to fit the bar on a phone (tests/test_charts.py checks), since a longer
    one runs into the next bar's. (Placed on top, plotly draws it over a bar anchored to the
    figure's edge.)"""
    # 80 % of the span: the end labels stick out past the bar, into the gap to the next one
    span = 0.8 * (right - left)
    bar = dict(orientation="h", x=(left + right) / 2, xanchor="center", len=span,
               yref="container", y=0, yanchor="bottom", thickness=10, xpad=2, tickmode="array",
               tickvals=[low, 0.0, high], ticktext=[f"{low:.2g}", "0", f"{high:.2g}"])
    if title is not None:
        bar["title"] = dict(text=title, side="bottom", font=dict(size=COLORBAR_TITLE_SIZE))
    return bar


def compact(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Numbers for a figure as float32 (half the bytes sent), or float64 where a finite value
    would not fit float32 (an input in float64 near 1e300 must not be drawn as inf)."""
    values = np.asarray(values)
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if finite.size and np.abs(finite).max() > np.finfo(np.float32).max:
        return values.astype(np.float64)
    return values.astype(np.float32)


def figure(data: list[dict], layout: dict) -> go.Figure:
    """``go.Figure(data=data, layout=layout)``, built without plotly's validation.

    The check catches a misspelt property or a value of the wrong kind and costs two thirds of a
    figure's build time, so the app and the tests skip it here; tests/test_charts.py validates a
    figure of every builder and checks that it sends the same JSON. Builders write nested dicts
    (``title=dict(text=...)``, not plotly's ``title_text`` shorthand, which only validation
    expands); entries set to None mean "not set" and are dropped, as validation drops them.
    The top margin is raised where the panel titles of :func:`panel_grid` need more lines than
    it holds (and a row more for a legend on top: plotly reserves the legend's room in the
    margin, not the titles').
    """
    titles = [a for a in layout.get("annotations", ()) if a.get("name") == _PANEL_TITLE
              and a.get("y", 0) >= 1]
    if titles:
        need = max(text_lines(a["text"]) * LINE_EM * a["font"]["size"] for a in titles) + 12
        if layout.get("legend", {}).get("yanchor") == "top":
            need += _LEGEND_ROW_PX
        margin = layout.setdefault("margin", {})
        margin["t"] = max(margin.get("t", 0), int(np.ceil(need)))
    data, layout = _unset(data), _unset(layout)
    if _AS_DICT.get():  # inside figure_dict(): the dicts are all that is wanted
        return {"data": data, "layout": layout}  # type: ignore[return-value]
    return go.Figure(data=data, layout=layout, _validate=False)


#: Set by :func:`figure_dict` while a builder runs: :func:`figure` then hands back its dicts.
_AS_DICT: contextvars.ContextVar[bool] = contextvars.ContextVar("lnviz_figure_as_dict",
                                                                default=False)


@functools.lru_cache(maxsize=4)
def _template(name: str) -> dict:
    """The default plotly template (named ``name``) as the dict a figure's ``to_dict()``
    carries: the one an empty figure takes."""
    return go.Figure().to_dict()["layout"]["template"]


def figure_dict(builder: Callable[..., go.Figure], *args: Any, **kwargs: Any) -> dict:
    """``builder(*args, **kwargs).to_dict()``, the dict ``st.plotly_chart`` sends, without
    building plotly's objects.

    Every builder of :mod:`lnviz.charts` ends in :func:`figure`, which here returns its plain
    dicts; they get what ``to_dict()`` adds (numpy arrays as base64, the default template, as
    the figure would take it from ``plotly.io.templates.default`` now). Building the
    ``go.Figure`` and copying it back out cost about two thirds of a figure's time in a rerun
    (the Explorer's three figures: 1.7 ms as dicts, 5.1 ms through ``go.Figure``);
    tests/test_charts.py checks that both ways send the same JSON for a sample of every
    builder.
    """
    token = _AS_DICT.set(True)
    try:
        built = builder(*args, **kwargs)
    finally:
        _AS_DICT.reset(token)
    if isinstance(built, go.Figure):  # a builder that made its figure another way
        return built.to_dict()
    convert_to_base64(built)
    layout = built["layout"]
    if "template" not in layout and pio.templates.default is not None:
        layout["template"] = _template(pio.templates.default)
    return built


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
        for start, stop in true_runs(horizontal[r]):
            xs += [start - 0.5, stop - 0.5, None]
            ys += [r + 0.5, r + 0.5, None]
    vertical = groups[:, 1:] != groups[:, :-1]  # boundary right of column c
    for c in range(cols - 1):
        for start, stop in true_runs(vertical[:, c]):
            xs += [c + 0.5, c + 0.5, None]
            ys += [start - 0.5, stop - 0.5, None]
    return xs, ys


def true_runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of True in a 1-D boolean array."""
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def symmetric_range(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    return -(bound or 1.0), bound or 1.0


def fit_titles(titles: Sequence[str], width_px: float, size: int, max_lines: int = 2,
                smallest: int = 11) -> tuple[int, list[str]]:
    """The largest font size from ``size`` down to ``smallest`` at which every title wraps
    into at most ``max_lines`` lines of ``width_px`` pixels, none wider (a word too long for
    the line is not broken: a smaller font must make it fit), or ``smallest`` where none does;
    and the titles wrapped at it, lines joined by ``<br>``."""
    for font in range(size, smallest - 1, -1):
        wrapped = [wrap_text(title, width_px, font) for title in titles]
        if font == smallest or all(
                len(lines) <= max_lines and max(map(len, lines)) * CHAR_EM * font <= width_px
                for lines in wrapped):
            return font, ["<br>".join(lines) for lines in wrapped]
    raise ValueError(f"no font size from {size} down to {smallest}")


def panel_grid(titles: Sequence[str], rows: int = 1, gap: float = 0.07, vgap: float = 0.08,
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
    size, wrapped = fit_titles(titles, (width + 0.6 * gap) * NARROW_PLOT_PX, title_size)
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


def axis_ids(refs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Layout keys of the panels' axes: ("xaxis", "yaxis"), ("xaxis2", "yaxis2")…"""
    return [(x.replace("x", "xaxis"), y.replace("y", "yaxis")) for x, y in refs]


def each_axis(layout: dict, refs: list[tuple[str, str]], x: dict | None = None,
               y: dict | None = None) -> None:
    """Set the same properties on every panel's x (and y) axis. An x axis title is wrapped to
    its panel's width on a phone, as panel titles are, so that neighbours' do not overlap."""
    for xaxis, yaxis in axis_ids(refs):
        layout[xaxis].update(x or {})
        layout[yaxis].update(y or {})
        title = (x or {}).get("title")
        if title and len(refs) > 1:
            left, right = layout[xaxis]["domain"]
            layout[xaxis]["title"] = dict(title, text="<br>".join(
                wrap_text(title["text"], (right - left) * NARROW_PLOT_PX, 14)))


def _tabulated(trace: go.basedatatypes.BaseTraceType | dict) -> bool:
    """Whether :func:`figure_tables` gives this trace's numbers: a heatmap's grid, or the points
    of a trace with hover text (one without is decoration: boundaries, guide lines, marks).
    ``trace`` is a plotly trace or its dict (as in :func:`figure_dict`)."""
    get = trace.get if isinstance(trace, dict) else functools.partial(getattr, trace)
    if get("type", "scatter") == "heatmap":
        return get("z", None) is not None
    return get("y", None) is not None and get("hoverinfo", None) != "skip"


def has_tables(fig: go.Figure | dict) -> bool:
    """Whether :func:`figure_tables` would find any numbers in ``fig``, a figure or its dict
    (a diagram has none)."""
    return any(_tabulated(trace) for trace in (fig["data"] if isinstance(fig, dict)
                                               else fig.data))


def figure_tables(fig: go.Figure, max_rows: int = 2000) -> list[tuple[str, pd.DataFrame]]:
    """The numbers behind a figure, for readers who cannot see the chart (or want the values):
    each heatmap as its grid, and every other trace in one long table of (trace, x, y), with z
    for the points of a 3-D scene.

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
            columns = {"trace": name, "x": x[: len(y)], "y": y}
            if getattr(trace, "z", None) is not None:  # a 3-D scene's points
                columns["z"] = np.asarray(trace.z, dtype=object)[: len(y)]
            points.append(pd.DataFrame(columns))
    if points:
        tables.append(("points", pd.concat(points, ignore_index=True).head(max_rows)))
    return tables


def grid_labels(
    shape: tuple[int, ...], layout: str, row_labels: tuple[str, ...] | None = None,
    view: GridView | None = None,
) -> tuple[list[str], list[str]]:
    """Names for the rows and columns of :func:`lnviz.batch.to_grid`'s table; with ``view``, for
    its rows and columns only (a label takes about 60 bytes: naming every row or column of a
    large tensor would take more memory than the tensor)."""
    n_rows = math.prod(shape[:2]) if layout == Layout.NCHW else math.prod(shape[:-1])
    n_cols = math.prod(shape[2:]) if layout == Layout.NCHW else shape[-1]
    picked_rows = range(n_rows) if view is None else view.rows.tolist()
    picked_cols = range(n_cols) if view is None else view.cols.tolist()
    if row_labels is not None and len(row_labels) == n_rows:
        rows = [row_labels[i] for i in picked_rows]
    elif layout == Layout.NC:
        rows = [f"sample {i}" for i in picked_rows]
    else:
        word, inner = ("seq", "pos") if layout == Layout.NLC else ("image", "ch")
        rows = [f"{word} {i // shape[1]} · {inner} {i % shape[1]}" for i in picked_rows]
    if layout == Layout.NCHW:
        cols = [f"({j // shape[3]}, {j % shape[3]})" for j in picked_cols]
    else:
        cols = [f"feature {j}" for j in picked_cols]
    return rows, cols


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _tick_text(value: float, powers: bool) -> str:
    """A log axis's tick label, written out in full: 0.5, 20, 1000, or with ``powers`` 2×10⁻⁵
    (Plotly's own labels of the ticks between powers of ten are a bare "5" or "2")."""
    if not powers:
        return f"{value:g}"
    exponent = int(np.floor(np.log10(value) + 1e-9))
    mantissa = round(value / 10.0**exponent)
    power = f"10{str(exponent).translate(_SUPERSCRIPT)}"
    return power if mantissa == 1 else f"{mantissa}×{power}"


def log_ticks(*arrays: Any, most: int = 12) -> dict[str, Any]:
    """A log axis for these values with every tick labelled in full (:func:`_tick_text`): 1, 2
    and 5 times each power of ten the values span (1 to 9 times, on a narrow range), or only
    the powers (every k-th) when that would be more than ``most`` ticks. Labels are plain
    numbers from 0.001 to 9999, and powers of ten on an axis that reaches beyond; powers of ten
    alone when no value is > 0 or no such tick falls among the values."""
    values = np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in arrays]
                            ) if arrays else np.array([])
    values = values[np.isfinite(values) & (values > 0)]
    if values.size == 0:  # nothing to place: powers of ten, labelled as such
        return dict(type="log", dtick=1, exponentformat="power")
    low, high = values.min() / 1.5, values.max() * 1.5
    powers = 10.0 ** np.arange(np.floor(np.log10(low)), np.ceil(np.log10(high)) + 1)
    ticks: list[float] = []
    for mantissas in ((1, 2, 5), range(1, 10)):
        ticks = [float(f"{m * p:.12g}") for p in powers for m in mantissas
                 if low <= m * p <= high]
        if len(ticks) >= 2:
            break
    if len(ticks) > most:
        step = int(np.ceil(len(powers) / most))
        ticks = [float(f"{p:.12g}") for p in powers[::step] if low <= p <= high]
        # and the top value labelled: the largest 1, 2 or 5 times a power at or below the
        # largest value (22,500 gets a 2×10⁴, not an unlabelled stretch above 10⁴)
        top = max((float(f"{m * p:.12g}") for p in powers for m in (1, 2, 5)
                   if m * p <= values.max()), default=None)
        shown = [v for v in ticks if v <= values.max()]  # Plotly's range ends near the values
        if top is not None and shown and top > max(shown) * 1.5:
            # closer than half a step to the last tick, it takes that tick's place (two labels
            # that near run together on a phone)
            near = top <= max(shown) * 10 ** (step / 2) * 1.01
            ticks = sorted({*shown, top} - ({max(shown)} if near else set()))
    if len(ticks) < 2:
        return dict(type="log", dtick=1, exponentformat="power")
    as_powers = min(ticks) < 1e-3 or max(ticks) >= 1e4
    return dict(type="log", tickvals=ticks, ticktext=[_tick_text(v, as_powers) for v in ticks])
