"""Figures on a phone (390 × 844, an iPhone 12–15 held upright) and on a 1280-px desktop: read
from the DOM of every rendered Plotly SVG (tests/layoututil.py), panel titles and other
annotations do not overlap, no colorbar lies on a plot area, no tick label or annotation is cut
off by the figure's edge, and the values written into heatmap cells do not run together.

The pages the navigation lists are checked on both screens where the navigation test of
tests/test_browser.py opens them (the window narrowed after the desktop's check: one page load
and one run of the page for both screens); here, the pages no link opens as they are (a captured
layer), the same way and also loaded on a phone's screen from the start. With LNVIZ_SCREENSHOTS=1,
screenshots of every figure go to ``screenshots/narrow-*.png``. Uses the server and the two
reused tabs of tests/conftest.py.
"""

from __future__ import annotations

import contextlib

import pytest
from browserutil import CHARTS, assert_no_exception, to_front, wait_idle
from layoututil import NOT_IN_NAVIGATION, PHONE, chart_problems, phone_problems

with contextlib.suppress(ImportError):  # the ``browser`` fixture skips or fails without it
    from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def _drawn_problems(page: Page, width: str, name: str) -> list[str]:
    charts = page.locator(CHARTS)
    expect(charts.first).to_be_visible()
    wait_idle(page)
    assert_no_exception(page)
    return chart_problems(charts, width, name)


@pytest.mark.parametrize("name", NOT_IN_NAVIGATION)
def test_figures_no_link_opens_are_laid_out_for_the_screen(page: Page, second_page: Page,
                                                            server: str, name: str) -> None:
    """On the desktop, then narrowed to a phone's width; and loaded on a phone's screen from the
    start (the second tab narrowed first), the one page of the suite that is: a figure drawn
    first at a phone's width and one drawn again for it can differ."""
    second_page.set_viewport_size(PHONE)
    for tab in (page, second_page):  # both load at once
        tab.goto(f"{server}/{name}", wait_until="commit")
    problems = _drawn_problems(to_front(page), "1280px", name) + phone_problems(page, name)
    problems += _drawn_problems(to_front(second_page), f"{PHONE['width']}px (loaded)", name)
    assert problems == [], f"{name}:\n" + "\n".join(problems)
