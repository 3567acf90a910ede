"""Figures on a phone (390 × 844, an iPhone 12–15 held upright) and on a 1280-px desktop: read
from the DOM of every rendered Plotly SVG (tests/layoututil.py), panel titles and other
annotations do not overlap, no colorbar lies on a plot area, no tick label or annotation is cut
off by the figure's edge, and the values written into heatmap cells do not run together.

The pages the navigation lists are checked at the desktop's width where the navigation test of
tests/test_browser.py opens them (one page load instead of two); here they are checked on the
phone (with the figures behind a guess, once answered), and the pages no link opens as they are
(a captured layer) on both screens. With LNVIZ_SCREENSHOTS=1, screenshots of every figure go to
``screenshots/narrow-*.png``. Uses the server and the two reused tabs of tests/conftest.py, the
second narrowed to a phone's window before its pages load (a context of the phone's own cost
Chromium about 9 CPU-s for its first page).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from browserutil import CHARTS, TIMEOUT_MS, assert_no_exception, open_by_link, wait_idle
from conftest import Tabs
from layoututil import GUESSED, LAID_OUT, NOT_IN_NAVIGATION, chart_problems, guessed_problems

with contextlib.suppress(ImportError):  # the ``browser`` fixture skips or fails without it
    from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


@contextlib.contextmanager
def _narrowed(tabs: Tabs) -> Iterator[Page]:
    """The reused tab of ``tabs`` with its window a phone's, before any page loads in it (the
    tab's window is widened back after, by Tabs.give_back)."""
    try:
        tab = tabs.take()
        tab.set_viewport_size(PHONE)
        yield tab
    finally:
        tabs.give_back()


@pytest.fixture
def phone(second_tabs: Tabs, server: str) -> Iterator[dict[str, Page]]:
    """A page on a phone-sized screen: the worker's second reused tab, narrowed."""
    with _narrowed(second_tabs) as tab:
        yield {"390px": tab}


@pytest.fixture
def screens(second_tabs: Tabs, desktop_tabs: Tabs, server: str) -> Iterator[dict[str, Page]]:
    """A page on a phone-sized and one on a desktop-sized screen: the worker's two reused tabs,
    the second narrowed."""
    with _narrowed(second_tabs) as tab:
        try:
            yield {"390px": tab, "1280px": desktop_tabs.take()}
        finally:
            desktop_tabs.give_back()


def _figure_problems(page: Page, width: str, name: str) -> list[str]:
    """What is wrong with the layout of the figures of the page ``page`` shows, once drawn."""
    charts = page.locator(CHARTS)
    expect(charts.first).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    return chart_problems(charts, width, name)


def _check_figures(screens: dict[str, Page], server: str, name: str) -> None:
    # the screens load at once (the server runs the sessions side by side)
    for page in screens.values():
        page.goto(f"{server}/{name}", wait_until="commit")
    problems = []
    for width, page in screens.items():
        problems += _figure_problems(page, width, name)
    assert problems == [], f"{name}:\n" + "\n".join(problems)


def test_figures_are_laid_out_for_a_phone(phone: dict[str, Page], server: str) -> None:
    """Every page of LAID_OUT that a link opens, on the phone, one after the other as a learner
    reaches them: through the navigation behind the sidebar's button; then the pages of GUESSED,
    their guesses answered. A page switch redraws the page without loading the app's scripts
    again (measured: 19 CPU-s of Chromium for eight pages, against 43 for eight page loads)."""
    page = phone["390px"]
    names = [name for name in LAID_OUT if name not in NOT_IN_NAVIGATION]
    names += [name for name in GUESSED if name not in names]
    page.goto(f"{server}/{names[0]}")
    problems = _figure_problems(page, "390px", names[0])
    for name in names[1:]:
        open_by_link(page, name)
        if name in GUESSED:  # its figures once its guesses are answered (wrong, on the phone)
            problems += guessed_problems(page, "390px", name, right=False)
        else:
            problems += _figure_problems(page, "390px", name)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("name", NOT_IN_NAVIGATION)
def test_figures_no_link_opens_are_laid_out_for_the_screen(screens: dict[str, Page],
                                                            server: str, name: str) -> None:
    _check_figures(screens, server, name)
