"""Where Plotly drew what, read from the DOM of a rendered chart: panel titles and other
annotations that overlap, a colorbar on a plot area, tick labels or annotations cut off by the
figure's edge, values written into heatmap cells that run together. The checks ride on the
navigation test of tests/test_browser.py, which opens those pages anyway: each at the desktop's
width, then narrowed to a phone's (:func:`phone_problems`); tests/test_browser_narrow.py checks
the page no link opens."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import NamedTuple

from browserutil import (
    CHARTS,
    SAVE_SCREENSHOTS,
    SCREENSHOTS,
    TIMEOUT_MS,
    assert_no_exception,
    question,
    slug,
    wait_idle,
)

with contextlib.suppress(ImportError):  # the ``browser`` fixture skips or fails without it
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import Page, expect

#: Every page with a figure of more than one panel, a colorbar or values written into cells.
LAID_OUT = ["explorer", "bn_vs_ln", "gradients", "padding", "epsilon", "scale_shift", "shapes",
            "explorer?src=Captured+layer", "minilm"]
#: Those no navigation link opens as they are (tests/test_browser_narrow.py checks them on both
#: screens; the navigation test the others at the desktop's width).
NOT_IN_NAVIGATION = ["explorer?src=Captured+layer"]
class Guess(NamedTuple):
    """A "Before you look" question as a page opens from its link: the option its numbers make
    right there, one they make wrong, and the folded part that holds it (None: on the page)."""

    right: str
    wrong: str
    fold: str | None = None


#: Pages whose figures appear after a guess: the answers to click, in order, and how many
#: figures the page then shows (None: more than before), checked where the navigation opens
#: them, on both screens. A :class:`Guess` is answered right on every other page and wrong on
#: the rest (:func:`answered_right`), and its reply checked (lnviz.lessons.common.Answer); a
#: plain answer is only clicked.
GUESSED: dict[str, tuple[list[str | Guess], int | None]] = {
    "placement": (["Peri-LN's", "piles onto fewer tokens", "slower"], 4),
    "beyond": (["an S-shaped curve", "those after the feed-forward"], 3),
    "bn_vs_ln": ([Guess("BatchNorm's only", "both", "2 · One sample, many batches")], None),
    "geometry": ([Guess("all on one point", "each on a point of its own")], None),
    "padding": ([Guess("closer to the pads' value", "where it was")], None),
    "epsilon": ([Guess("1% or more off, perhaps even negative", "within 1% of it")], None),
    "scale_shift": ([Guess("mean β, standard deviation |γ|", "mean γ, standard deviation |β|")],
                    None),
    "gradients": ([Guess("one feature's column", "one sample's row")], None),
    "shapes": ([Guess("no", "yes")], None),
    "minilm": ([Guess("the first token", "the last token")], None),
    "gemma": ([Guess("over 2", "under 0.5")], None),
    "efficientnet": ([Guess("the class is lost: another one comes first",
                            "about as sure as in eval mode")], None),
}


def answered_right(name: str) -> bool:
    """Whether the navigation test answers the guesses of the page ``name`` right: every other
    page of GUESSED, so that the browser shows both kinds of reply."""
    return list(GUESSED).index(name) % 2 == 0


#: A phone held upright (an iPhone 12–15), in CSS pixels.
PHONE = {"width": 390, "height": 844}
#: Pixels two boxes may share before they count as overlapping (anti-aliased glyph edges).
SLACK = 1.0
#: ... and two tick labels of one axis: a text's box is a line taller than its glyphs, so rows
#: of labels 14 px apart share a few pixels of box without touching.
TICK_SLACK = 4.0

#: Boxes (left, top, right, bottom in page pixels) of what one Plotly chart drew.
_GEOMETRY = r"""(root) => {
  const box = (e) => { const b = e.getBoundingClientRect();
                       return {text: (e.textContent || '').trim(), l: b.left, t: b.top,
                               r: b.right, b: b.bottom}; };
  const all = (selector) => Array.from(root.querySelectorAll(selector)).map(box)
                                 .filter((b) => b.r - b.l > 0 && b.b - b.t > 0);
  const svg = root.querySelector('svg.main-svg');
  return {
    frame: {...box(svg), text: 'the figure'},
    plots: all('.draglayer .nsewdrag'),
    colorbars: Array.from(root.querySelectorAll('g.colorbar')).map((bar) => {
      // the bar and its ticks and title, not its (transparent) padded background
      const parts = Array.from(bar.querySelectorAll('.cbfills, .cbaxis text, .cbtitle text'))
                         .map(box).filter((b) => b.r - b.l > 0 && b.b - b.t > 0);
      return parts.length ? {text: 'colorbar', l: Math.min(...parts.map((p) => p.l)),
                             t: Math.min(...parts.map((p) => p.t)),
                             r: Math.max(...parts.map((p) => p.r)),
                             b: Math.max(...parts.map((p) => p.b))} : null;
    }).filter((b) => b),
    // each colorbar's title with its bar, which it must not cover
    cbtitles: Array.from(root.querySelectorAll('g.colorbar')).map((bar) => {
      const title = bar.querySelector('.cbtitle text'), fills = bar.querySelector('.cbfills');
      return title && fills && (title.textContent || '').trim()
        ? {title: box(title), bar: {...box(fills), text: 'its bar'}} : null;
    }).filter((pair) => pair),
    annotations: all('g.annotation'),
    ticks: all('.xtick text, .ytick text, .cbaxis text, .g-xtitle text, .g-ytitle text'),
    // one list per axis: its tick labels, level or upright (a slanted label's box is not its
    // outline, so slanted ones are left out)
    axes: Array.from(root.querySelectorAll('g.xaxislayer-above, g.yaxislayer-above'))
              .map((g) => Array.from(g.querySelectorAll('text')).filter((e) => {
                const turn = /rotate\((-?[\d.]+)/.exec(e.getAttribute('transform') || '');
                return !turn || Math.abs(parseFloat(turn[1])) % 90 === 0;
              }).map(box).filter((b) => b.r - b.l > 0 && b.b - b.t > 0)),
    legends: all('g.legend'),
    // one list per heatmap trace: the values written into its cells
    cells: Array.from(root.querySelectorAll('g.hm'))
                .map((g) => Array.from(g.querySelectorAll('.heatmap-label text')).map(box)),
  };
}"""


def _overlap(a: dict, b: dict, slack: float = SLACK) -> bool:
    return (min(a["r"], b["r"]) - max(a["l"], b["l"]) > slack
            and min(a["b"], b["b"]) - max(a["t"], b["t"]) > slack)


def _inside(inner: dict, outer: dict) -> bool:
    return (inner["l"] >= outer["l"] - SLACK and inner["r"] <= outer["r"] + SLACK
            and inner["t"] >= outer["t"] - SLACK and inner["b"] <= outer["b"] + SLACK)


def _xy(b: dict) -> str:
    return f"x {b['l']:.0f}–{b['r']:.0f}, y {b['t']:.0f}–{b['b']:.0f}"


def _pairs(boxes: list[dict]) -> Iterator[tuple[dict, dict]]:
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            yield a, b


def layout_problems(geometry: dict) -> list[str]:
    """What is wrong with one rendered chart's layout, in words (empty when nothing is)."""
    frame = geometry["frame"]
    problems = [f"annotations {a['text']!r} and {b['text']!r} overlap"
                for a, b in _pairs(geometry["annotations"]) if _overlap(a, b)]
    problems += [f"the colorbar covers a plot area ({_xy(bar)} on {_xy(plot)})"
                 for bar in geometry["colorbars"] for plot in geometry["plots"]
                 if _overlap(bar, plot)]
    # a legend has a background: it hides what it lies on ("ure 0" was left of "feature 0")
    problems += [f"the legend covers {kind} {b['text']!r}"
                 for legend in geometry["legends"]
                 for kind, boxes in (("a plot area", geometry["plots"]),
                                     ("tick label", geometry["ticks"]),
                                     ("annotation", geometry["annotations"]))
                 for b in boxes if _overlap(legend, b)]
    problems += [f"{kind} {b['text']!r} is cut off by the figure's edge "
                 f"({_xy(b)} outside {_xy(frame)})"
                 for kind, boxes in (("tick label", geometry["ticks"]),
                                     ("annotation", geometry["annotations"]),
                                     ("colorbar", geometry["colorbars"]))
                 for b in boxes if not _inside(b, frame)]
    problems += [f"tick labels {a['text']!r} and {b['text']!r} run together"
                 for labels in geometry["axes"] for a, b in _pairs(labels)
                 if _overlap(a, b, TICK_SLACK)]
    problems += [f"the colorbar title {pair['title']['text']!r} covers its bar"
                 for pair in geometry["cbtitles"] if _overlap(pair["title"], pair["bar"])]
    problems += [f"two colorbars overlap ({_xy(a)} and {_xy(b)})"
                 for a, b in _pairs(geometry["colorbars"]) if _overlap(a, b)]
    problems += [f"cell labels {a['text']!r} and {b['text']!r} run together"
                 for labels in geometry["cells"] for a, b in _pairs(labels) if _overlap(a, b)]
    return problems


#: Whether every figure of the page has been drawn again for the page's width after the window
#: narrowed: each drawn as wide as its place (a figure not yet redrawn keeps its old width in a
#: narrower place), none of them empty or wider than the main column.
_FIT = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const plots = Array.from(main.querySelectorAll('.js-plotly-plot'));
  return plots.length > 0 && plots.every((plot) => {
    const drawn = plot.querySelector('svg.main-svg').getBoundingClientRect().width;
    const place = plot.getBoundingClientRect().width;
    return drawn > 0 && Math.abs(drawn - place) <= 1 && drawn <= main.clientWidth;
  });
}"""
#: The page's closed parts that hold figures: a figure in a closed part keeps the width it was
#: drawn at until the part opens, when it is drawn again for the page's width. (The parts that
#: build their content only while open hold no figures then, and stay closed.)
_CLOSED_WITH_FIGURES = '[data-testid="stMain"] details:not([open]):has(.js-plotly-plot)'
_WIDTHS = """() => Array.from(document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot'))
  .map((plot) => Math.round(plot.querySelector('svg.main-svg').getBoundingClientRect().width))"""


def phone_problems(page: Page, name: str) -> list[str]:
    """What is wrong with the layout of the figures of the page ``page`` shows once its window
    is narrowed to a phone's (:data:`PHONE`) and the figures are drawn again for it, as on a
    tablet turned upright or a window made narrow: the page is not loaded again (measured:
    0.3-0.4 CPU-s of Chromium for a page's figures, against about 3 for the page opened on a
    phone's screen of its own). Its closed parts that hold figures are opened first. The window
    is widened back after (the navigation unfolds again)."""
    wide = page.viewport_size
    page.set_viewport_size(PHONE)
    try:
        closed = page.locator(_CLOSED_WITH_FIGURES)
        if closed.count():  # opened as a learner does, by their summaries
            closed.evaluate_all("(parts) => parts.forEach((d) => d.querySelector('summary')"
                                ".click())")
            expect(closed).to_have_count(0)
            wait_idle(page)
        try:
            page.wait_for_function(_FIT, polling=100, timeout=TIMEOUT_MS)
        except PlaywrightError as err:  # a figure wider than a phone's screen, or none drawn
            raise AssertionError(f"{name} on a {PHONE['width']}-px phone: figures "
                                 f"{page.evaluate(_WIDTHS)} px wide") from err
        assert_no_exception(page)
        problems = chart_problems(page.locator(CHARTS), f"{PHONE['width']}px", name)
    finally:
        page.set_viewport_size(wide)
    # the navigation, folded away on the phone, unfolds again by itself
    expect(page.locator('[data-testid="stSidebar"]')).to_have_attribute("data-collapsed", "false")
    return problems


def chart_problems(charts, width: str, name: str) -> list[str]:
    """:func:`layout_problems` of every chart in ``charts`` (a locator), once Plotly has drawn
    each, read in one call where they are (each saved as a screenshot with
    LNVIZ_SCREENSHOTS=1, scrolled into view for it). Boxes are measured on the laid-out page
    whether on screen or not: scrolling each chart into view and reading it in a call of its
    own cost Chromium about 5 CPU-s more in the navigation test (docs/benchmarks.md §7)."""
    count = charts.count()
    for k in range(count):
        chart = charts.nth(k)
        expect(chart.locator(".js-plotly-plot .draglayer").first).to_be_attached()
        if SAVE_SCREENSHOTS and chart.is_visible():  # (not one in a closed part)
            SCREENSHOTS.mkdir(exist_ok=True)
            chart.scroll_into_view_if_needed()
            chart.screenshot(path=str(SCREENSHOTS / f"narrow-{width}-{slug(name)}-{k}.png"))
    drawn = charts.locator(".js-plotly-plot").evaluate_all(
        f"(plots) => plots.map({_GEOMETRY})")
    assert len(drawn) == count, (name, width, len(drawn), count)
    return [f"{name} at {width}, figure {k}: {p}"
            for k, geometry in enumerate(drawn) for p in layout_problems(geometry)]


def guessed_problems(page: Page, width: str, name: str, right: bool = True) -> list[str]:
    """Answer the guesses of the page ``name`` (GUESSED) that ``page`` shows (each
    :class:`Guess` ``right`` or wrong, its reply checked), then what is wrong with the layout of
    the figures they reveal."""
    answers, expected = GUESSED[name]
    charts = page.locator(CHARTS)
    before = charts.count()
    for answer in answers:
        if isinstance(answer, Guess):
            if answer.fold is not None:
                page.locator('[data-testid="stExpander"] summary', has_text=answer.fold).click()
            option = question(page).get_by_text(answer.right if right else answer.wrong,
                                                exact=True)
        else:
            option = page.get_by_text(answer, exact=True)
        option.scroll_into_view_if_needed()
        option.click()
        wait_idle(page)
        if isinstance(answer, Guess):
            reply = ("Right:" if right else f"Not quite: the answer is “{answer.right}”.")
            expect(page.locator('[data-testid="stMarkdown"]', has_text=reply)).to_have_count(1)
    assert_no_exception(page)
    if expected is None:
        expect(charts).not_to_have_count(before, timeout=TIMEOUT_MS)
        assert charts.count() > before, (name, before, charts.count())
    else:
        expect(charts).to_have_count(expected, timeout=TIMEOUT_MS)
    return chart_problems(charts, width, name)
