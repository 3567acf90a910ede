"""URL-bound controls inside ``st.fragment`` sections, in a real browser (tests/fragmentutil.py):
each control writes its value into the URL and reruns its own fragment alone (what the server
sends after a move says so), and the link opens the page with those values. Here, the pages
whose controls no other test's page load can move without changing what that test checks; the
others' controls are moved on the loads of the tests ``fragmentutil.RIDDEN`` names. Uses the
fixtures of tests/conftest.py."""

from __future__ import annotations

import importlib
import inspect

import pytest
from fragmentutil import (
    FRAGMENT_CONTROLS,
    FRAGMENT_PAGES,
    RIDDEN,
    check_fragment_controls,
    open_fragment_control,
)

try:
    from playwright.sync_api import Page
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("path", [path for path in FRAGMENT_PAGES if path not in RIDDEN])
def test_controls_inside_fragments_write_the_url_and_rerun_their_fragment_alone(
        page: Page, server: str, path: str) -> None:
    """A fragment reruns only its section; its URL-bound controls still write the link, and a
    link with their values opens the page with them (``check_fragment_controls``). One page
    load for all the controls of a page."""
    first = FRAGMENT_CONTROLS[FRAGMENT_PAGES[path][0]]
    open_fragment_control(page, server + first.path, first)
    check_fragment_controls(page, path)


@pytest.mark.parametrize("path", list(RIDDEN))
def test_the_pages_whose_fragments_another_test_checks_are_checked_there(path: str) -> None:
    """RIDDEN's pages are left out above: the test named there must run the check (which
    itself asserts that the page is open at its first control's link). Needs no browser."""
    module, name = RIDDEN[path]
    source = inspect.getsource(getattr(importlib.import_module(module), name))
    # the call with the page, or (the navigation test, on each page it opens) with its path
    assert (f'check_fragment_controls(page, "{path}")' in source
            or 'check_fragment_controls(page, f"/{path}")' in source), (path, name)
    first = FRAGMENT_CONTROLS[FRAGMENT_PAGES[path][0]]
    assert first.path.split("?")[0] == path and first.setup is None  # no button to press
