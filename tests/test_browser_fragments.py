"""URL-bound controls inside ``st.fragment`` sections, in a real browser (tests/fragmentutil.py):
each writes its value into the URL and reruns its own fragment alone (what the server sends
after a move says so); a sidebar control reruns the whole page (on the ε page's load in
tests/test_browser_live.py); a code block two fragments draw
follows both. Split from tests/test_browser_live.py so that the two files run on two workers.
Uses the fixtures of tests/conftest.py."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest
from browserutil import BN_VS_LN, TIMEOUT_MS, assert_no_exception, wait_idle
from fragmentutil import (
    FRAGMENT_CONTROLS,
    FRAGMENT_PAGES,
    RIDDEN,
    check_fragment_controls,
    fragment_control,
    open_fragment_control,
)

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("path", [path for path in FRAGMENT_PAGES if path not in RIDDEN])
def test_controls_inside_fragments_write_the_url_and_rerun_their_fragment_alone(
        page: Page, server: str, path: str) -> None:
    """A fragment reruns only its section; its URL-bound controls still write the link, and a
    link with their values opens the page with them (``check_fragment_controls``). One page
    load for all the controls of a page (and for the checks of AFTERWARDS)."""
    first = FRAGMENT_CONTROLS[FRAGMENT_PAGES[path][0]]
    open_fragment_control(page, server + first.path, first)
    check_fragment_controls(page, path)
    if path in AFTERWARDS:  # on the same page, what else its sections must do
        AFTERWARDS[path](page)


def _code_follows_both_fragments(page: Page) -> None:
    """BatchNorm vs LayerNorm's code shows the batch size and the training steps, two
    fragments' controls (moved above to 9 and 11): a run of one fragment must not bring back
    the other's old value, either way."""
    steps = fragment_control(page, FRAGMENT_CONTROLS["bn-vs-ln-steps"])
    batch = fragment_control(page, FRAGMENT_CONTROLS["bn-vs-ln-batch-size"])
    # one code block, which both fragments redraw: never two
    code = page.locator('[data-testid="stCode"]', has_text="torch.nn.BatchNorm1d")
    expect(code).to_contain_text("for _ in range(11):")
    expect(code).to_contain_text("x = torch.randn(9, 6)")

    def step_right(control, written: str, *shown: str) -> None:
        control.focus()
        page.keyboard.press("ArrowRight")
        expect(page).to_have_url(re.compile(rf"[?&]{written}(&|$)"), timeout=TIMEOUT_MS)
        wait_idle(page)
        expect(code).to_have_count(1)
        for text in shown:
            expect(code).to_contain_text(text)

    step_right(steps, "bl_steps=12", "for _ in range(12):", "x = torch.randn(9, 6)")
    step_right(batch, "bl_b=10", "x = torch.randn(10, 6)", "for _ in range(12):")
    assert_no_exception(page)


#: Checks made after a page's fragment controls, on the same page load.
AFTERWARDS = {BN_VS_LN.split("?")[0]: _code_follows_both_fragments}


@pytest.mark.parametrize("path", list(RIDDEN))
def test_the_pages_whose_fragments_another_test_checks_are_checked_there(path: str) -> None:
    """RIDDEN's pages are left out above: the test named there must run the check."""
    module, name = RIDDEN[path]
    test = getattr(importlib.import_module(module), name)
    assert f'check_fragment_controls(page, "{path}")' in inspect.getsource(test)
    first = FRAGMENT_CONTROLS[FRAGMENT_PAGES[path][0]]
    assert first.path == path and first.setup is None  # opened plainly, as that test does
