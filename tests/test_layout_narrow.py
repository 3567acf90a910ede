"""Figures laid out to read on a 390-px phone as well as on a desktop, checked on the figure
dicts: panel titles that fit their panel, colorbars and legends off the plot area, panels
stacked where side by side left a phone too few pixels (tests/test_browser_narrow.py measures
the rendered result in Chromium)."""

from __future__ import annotations

import itertools

import numpy as np
import plotly.graph_objects as go
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_charts import _sample_figures

from lnviz import charts
from lnviz.lessons.bn_vs_ln import sharing_cubes

#: Pixels per character and per line of text, at font size 1: the figures' font (Source Sans)
#: averages about 0.5 em a character; tests/test_browser_narrow.py measures the real glyphs.
CHAR_PX, LINE_PX = 0.55, 1.2


def _text_px(text: str, size: float) -> float:
    """Width of the longest line of ``text`` at font ``size``, estimated."""
    return max(len(line) for line in text.split("<br>")) * CHAR_PX * size


def _page_figures() -> list[go.Figure]:
    """The multi-panel figures as the pages build them, with their longest titles."""
    rng = np.random.default_rng(1)
    grid = rng.normal(size=(8, 3))
    tokens = [("input x", grid), ("BatchNorm, pads counted", grid), ("BatchNorm, masked", grid),
              ("LayerNorm", grid)]
    cubes = sharing_cubes((4, 6, 3, 3), "NCHW", groups=2)
    share = np.linspace(0, 0.9, 5)
    return [
        charts.explorer.norm_heatmaps(grid, -grid, np.repeat(np.arange(8), 3).reshape(8, 3),
                             padding=grid > 1, title_out="output y (InstanceNorm)"),
        charts.padding.tokens_figure(tokens, np.arange(8) > 5),
        charts.padding.share_figure(share, share, share, share, share, share, share, share, 0.3),
        charts.gradients.heatmaps({"input x": grid, "upstream ∂L/∂y": grid,
                               "∂L/∂x, LayerNorm": grid, "∂L/∂x, BatchNorm": grid}),
        charts.scale_shift.two_betas_figure(grid[:, 0], grid[:, 1], grid[:, 2], grid[:, 2]),
        charts.shapes.depth_figure({"pre-LN": np.ones(4)}, {"pre-LN": np.ones(3)},
                                   {"pre-LN": np.ones(3)}),
        charts.bn_vs_ln.sharing_figure((4, 6, 9), [c.norm for c in cubes],
                                   [c.cells for c in cubes], [c.note for c in cubes]),
    ]


def _all_figures() -> list[go.Figure]:
    return _sample_figures() + _page_figures()


def _panel_titles(fig: go.Figure) -> list:
    return [a for a in fig.layout.annotations if a.name == "panel title"]


def _assert_titles_fit(fig: go.Figure) -> None:
    """Neighbouring panel titles do not overlap on a phone, and the top margin holds them."""
    px = charts.base.NARROW_PLOT_PX
    titles = _panel_titles(fig)
    rows: dict[float, list] = {}
    for title in titles:
        rows.setdefault(round(title.y, 6), []).append(title)
    for row in rows.values():
        row.sort(key=lambda a: a.x)
        for left, right in itertools.pairwise(row):
            gap = (right.x - left.x) * px
            need = (_text_px(left.text, left.font.size) + _text_px(right.text, right.font.size)) / 2
            assert need <= gap, (f"{left.text!r} and {right.text!r} overlap on a phone: "
                                 f"{need:.0f} px of text, {gap:.0f} px between their centres")
    top = [a for a in titles if a.y >= 1]
    if top:
        lines = max(a.text.count("<br>") + 1 for a in top)
        assert fig.layout.margin.t >= lines * LINE_PX * top[0].font.size


@pytest.mark.parametrize("index", range(len(_sample_figures()) + len(_page_figures())))
def test_panel_titles_fit_side_by_side_on_a_phone(index):
    _assert_titles_fit(_all_figures()[index])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.text("abcdefghij", min_size=1, max_size=9), min_size=1, max_size=8)
                .map(" ".join), min_size=2, max_size=4),
       st.integers(1, 2), st.integers(12, 16))
def test_any_titles_are_wrapped_to_their_panels(titles, rows, size):
    layout, refs = charts.base.panel_grid(titles, rows=rows, gap=0.06, title_size=size)
    fig = charts.base.figure([], layout)
    assert len(refs) == len(titles)
    assert [a.text.replace("<br>", " ") for a in _panel_titles(fig)] == titles  # words kept
    _assert_titles_fit(fig)
    assert all(fig.layout[f"xaxis{k or ''}"].automargin for k in range(len(titles)) if k != 1)


def _colorbars(fig: go.Figure) -> list[dict]:
    """The colorbar of every heatmap that shows one, and of every shared colour axis."""
    bars = [t.colorbar.to_plotly_json() for t in fig.data
            if t.type == "heatmap" and t.showscale is not False and t.coloraxis is None]
    layout = fig.layout.to_plotly_json()
    return bars + [axis["colorbar"] for key, axis in layout.items()
                   if key.startswith("coloraxis")]


@pytest.mark.parametrize("fig", [
    pytest.param(lambda: _page_figures()[0], id="explorer heatmaps"),
    pytest.param(lambda: _page_figures()[1], id="padding tokens"),
    pytest.param(lambda: charts.gradients.jacobian_figure({"LayerNorm": np.eye(4),
                                                        "BatchNorm": -np.eye(4)}, 2),
                 id="Jacobian"),
])
def test_colorbars_lie_flat_on_the_bottom_edge_off_every_panel(fig):
    """A vertical colorbar beside a panel lay on the next panel on a phone."""
    fig = fig()
    bars = _colorbars(fig)
    assert bars
    spans = []
    for bar in bars:
        assert ({k: bar.get(k) for k in ("orientation", "yref", "y", "yanchor")}
                == {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"})
        spans.append((bar["x"] - bar["len"] / 2, bar["x"] + bar["len"] / 2))
        assert spans[-1][0] >= 0 and spans[-1][1] <= 1
    spans.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # side by side


@pytest.mark.parametrize("index", range(len(_sample_figures()) + len(_page_figures())))
def test_no_legend_is_placed_in_plot_fractions_off_the_plot_area(index):
    """A legend below or above the plot area in plot fractions covered tick labels ("ure 0")
    or the plot once a narrow screen wrapped it onto more rows: legends sit on the figure's
    top or bottom edge, where plotly reserves their room."""
    legend = _all_figures()[index].layout.legend
    if legend.y is not None and not 0 <= legend.y <= 1:
        pytest.fail(f"legend at y = {legend.y} in plot fractions")
    if legend.orientation == "h" and legend.y is not None:
        assert legend.yref == "container" and legend.y in (0, 1)


def test_gradient_tables_two_a_row_with_values_only_where_they_fit():
    grid4 = np.arange(16.0).reshape(4, 4)
    fig = charts.gradients.heatmaps({"a": grid4, "b": grid4, "c": grid4, "d": grid4})
    tops = sorted({round(fig.layout[f"yaxis{k or ''}"].domain[1], 6) for k in (0, 2, 3, 4)})
    assert len(tops) == 2  # two rows of two
    assert all(t.texttemplate == "%{z:.2f}" for t in fig.data)
    # 8 features: 2 × 8 cells across a phone is 18 px a cell, too few for "-0.17"
    grid8 = np.arange(32.0).reshape(4, 8)
    fig = charts.gradients.heatmaps({"a": grid8, "b": grid8, "c": grid8, "d": grid8})
    assert all(t.texttemplate is None for t in fig.data)
    assert all(t.hovertemplate and "%{z:.4g}" in t.hovertemplate for t in fig.data)


def test_cubes_two_a_row_with_notes_that_fit_between_them():
    fig = _page_figures()[-1]
    titles = [a for a in fig.layout.annotations if a.text in {"BatchNorm", "LayerNorm",
                                                               "InstanceNorm", "GroupNorm"}]
    assert len({round(a.y, 6) for a in titles}) == 2 and len({round(a.x, 6) for a in titles}) == 2
    notes = [a for a in fig.layout.annotations if a.yanchor == "top"]
    x0, x1 = fig.layout.xaxis.range
    unit_px = charts.base.NARROW_PLOT_PX / (x1 - x0)  # the drawing keeps its proportions
    step = max(a.x for a in notes) - min(a.x for a in notes)
    for note in notes:
        assert _text_px(note.text, note.font.size) <= step * unit_px, note.text
        assert note.text.replace("<br>", " ") in {c.note for c in sharing_cubes(
            (4, 6, 3, 3), "NCHW", groups=2)}


@pytest.mark.parametrize("index", range(len(_sample_figures()) + len(_page_figures())))
def test_colorbar_titles_fit_their_bar_on_a_phone(index):
    """A colorbar's title is one line under the bar: longer than the bar on a phone, it ran into
    the next bar's ("x (ends at the 99.5th pct)" on the transformer page)."""
    for bar in _colorbars(_all_figures()[index]):
        title = (bar.get("title") or {}).get("text")
        if title:
            assert "<br>" not in title
            size = bar["title"].get("font", {}).get("size", charts.base.COLORBAR_TITLE_SIZE)
            assert _text_px(title, size) <= bar["len"] * charts.base.NARROW_PLOT_PX, title


@pytest.mark.parametrize("labels", [[f"feature {j}" for j in range(48)],
                                    [f"({j // 8}, {j % 8})" for j in range(64)],
                                    [str(j) for j in range(128)], ["a", "b"]],
                         ids=["48 features", "64 positions", "128 numbers", "two"])
@pytest.mark.parametrize("width", [60.0, 90.0, 290.0])
def test_fitted_tick_labels_do_not_run_together_on_a_phone(labels, width):
    """The Explorer's heatmaps wrote 12 of 48 "feature j" labels into a 90-px panel on a phone,
    one block of text: the labels kept are far enough apart for their text, level or upright."""
    ticks, angle = charts.base.fitted_ticks(labels, width)
    assert ticks[0] == 0 and len(ticks) >= 1
    column_px = width / len(labels)
    extent = (max(len(labels[i]) for i in ticks) * CHAR_PX * 12 if angle == 0
              else LINE_PX * 12)
    assert all((b - a) * column_px >= extent for a, b in itertools.pairwise(ticks))
