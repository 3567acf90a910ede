"""End to end: a real ``streamlit run app.py`` server driven by headless Chromium (Playwright).

One server (tests/conftest.py) serves every browser test; every test gets a page (a session) of
its own. Screenshots of each tested state go to ``screenshots/`` at the repository root.

Needs the ``playwright`` package and a ``chromium`` executable on PATH (Playwright's own browser
download is not used). Where either is missing the tests are skipped — or fail, when
``LNVIZ_REQUIRE_BROWSER=1`` says this run must drive a browser (as CI does).
"""

from __future__ import annotations

import time

import pytest

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:  # checked (skip or fail) by the ``browser`` fixture
    sync_playwright = None

from browserutil import (
    ALERT,
    CHARTS,
    CHECK_BADGE,
    NAV_LINKS,
    RUN_REPORT,
    TIMEOUT_MS,
    TITLE,
    assert_no_exception,
    open_from_navigation,
    shot,
    slug,
    wait_idle,
)
from conftest import DESKTOP_VIEWPORT
from fragmentutil import RIDDEN, check_fragment_controls
from layoututil import (
    GUESSED,
    LAID_OUT,
    NOT_IN_NAVIGATION,
    PHONE,
    answered_right,
    chart_problems,
    guessed_problems,
    phone_problems,
)
from pageutil import ALL_PAGES

pytestmark = pytest.mark.browser
#: The pages whose fragment controls the navigation test moves where it has opened them (their
#: first control's link is the navigation's): tests/fragmentutil.py's RIDDEN.
RIDES = [path for path, (_, test) in RIDDEN.items()
         if test == "test_every_page_opens_from_the_navigation"]


def test_every_page_opens_from_the_navigation(page: Page, server: str) -> None:
    """Every link of the navigation opens its page without an error; on the way, the figures
    of the pages tests/layoututil.py lists are checked for their layout at the desktop's width,
    the Explorer shows its figures and its check against torch, the fragment controls of
    RIDES's pages are moved, and then the figures are checked again with the window narrowed
    to a phone's (where the navigation folds away behind its button)."""
    page.goto(server)
    links = page.locator(NAV_LINKS)
    expect(links.first).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator(TITLE).first).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    # the sidebar shows the first links and a "View more" button for the rest
    more = page.locator('[data-testid="stSidebarNavViewButton"]')
    if more.count() and "more" in more.inner_text().lower():
        more.click()
    expect(links).to_have_count(len(ALL_PAGES))
    targets = [(links.nth(i).get_attribute("href"), links.nth(i).inner_text().split("\n")[-1])
               for i in range(links.count())]

    problems, laid_out, ridden, phoned = [], [], [], []
    # the default page (first link) is open already: visit it last, so every click changes page
    for number in [*range(1, len(targets)), 0]:
        href, label = targets[number]
        name = f"nav-{number:02d}-{slug(label)}"
        path = (href or "").rstrip("/").rsplit("/", 1)[-1]
        started = time.monotonic()
        try:
            open_from_navigation(page, number, href)
            if number == 0 or label == "Home":  # the home page shows the formula
                expect(page.locator(".katex").first).to_be_visible()
            if path in LAID_OUT and path not in GUESSED:  # (GUESSED: once answered, below)
                charts = page.locator(CHARTS)
                expect(charts.first).to_be_visible()
                wait_idle(page)
                if path == "explorer":
                    _explorer_shows_its_figures_and_check(page)
                problems += chart_problems(charts, "1280px", path)
                laid_out.append(path)
            if path in GUESSED:  # its figures, once its guesses are answered
                problems += guessed_problems(page, "1280px", path, answered_right(path))
                laid_out.append(path)
            if f"/{path}" in RIDES:  # after its layout: its fragment controls
                check_fragment_controls(page, f"/{path}")
                ridden.append(f"/{path}")
            if laid_out and laid_out[-1] == path:  # its figures on a phone
                if len(laid_out) == 1:
                    _a_phone_folds_the_navigation_away(page)
                problems += phone_problems(page, path)
                phoned.append(path)
        except (AssertionError, PlaywrightError) as err:
            shot(page, f"{name}-FAILED")
            raise AssertionError(f"page {label!r} ({href}) from the navigation: {err}\n"
                                 f"script runs: {page.evaluate(RUN_REPORT)}") from err
        shot(page, name)
        print(f"{label}: {time.monotonic() - started:.1f} s")
    # every page of LAID_OUT that a link opens was checked, on both screens (the rest:
    # test_browser_narrow.py)
    assert set(LAID_OUT) - set(laid_out) == set(NOT_IN_NAVIGATION), laid_out
    assert phoned == laid_out, phoned
    assert set(GUESSED) <= set(laid_out), laid_out
    assert sorted(ridden) == sorted(RIDES), ridden
    assert problems == [], "\n".join(problems)


def _a_phone_folds_the_navigation_away(page: Page) -> None:
    """On a phone's screen the navigation is folded away, and its button unfolds it."""
    page.set_viewport_size(PHONE)
    try:
        sidebar = page.locator('[data-testid="stSidebar"]')
        expect(sidebar).to_have_attribute("data-collapsed", "true")
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        expect(sidebar).to_have_attribute("data-collapsed", "false")
        expect(page.locator(NAV_LINKS).first).to_be_in_viewport()
    finally:
        page.set_viewport_size(DESKTOP_VIEWPORT)


def _explorer_shows_its_figures_and_check(page: Page) -> None:
    charts = page.locator(CHARTS)
    # its three figures: the first page a tab draws with Plotly may show one before the others
    expect(charts.nth(2)).to_be_visible()
    expect(page.locator(f"{CHARTS} .js-plotly-plot").nth(2)).to_be_visible()
    expect(page.get_by_text(CHECK_BADGE)).to_be_visible()
    expect(page.locator(ALERT).filter(has_text=CHECK_BADGE).first).to_be_visible()
    assert_no_exception(page)
    shot(page, "explorer-default")


