"""Inside a real transformer in a real browser: type a sentence, see the model's figures follow;
open a LayerNorm's input in the Explorer. Screenshots go to screenshots/.

Uses the server, browser and page fixtures of tests/conftest.py (one server for the whole run).
"""

from __future__ import annotations

import re

import pytest
from browserutil import (
    CHARTS,
    SAVE_SCREENSHOTS,
    TIMEOUT_MS,
    TITLE,
    assert_no_exception,
    question,
    shot,
    wait_idle,
)
from fragmentutil import check_fragment_controls

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None

pytestmark = pytest.mark.browser

#: The page's figures: heatmaps, per-token statistics, overview, massive activation, outlier
#: feature, attention, ablation, int8.
FIGURES = 8


def test_typed_text_redraws_the_figures_and_a_norms_input_opens_in_the_explorer(
        page: Page, server: str) -> None:
    """One learner's visit: a typed sentence redraws the figures; a paste longer than the page
    reads is read and cut (with max_chars on the text area, the browser dropped a longer paste
    whole and kept the old text without a word; now the page takes it, reads its first 5,000
    characters and says so); and a LayerNorm's input opens in the Explorer. On the way, the
    page's fragment controls (tests/fragmentutil.py)."""
    page.set_viewport_size({"width": 1400, "height": 1200})
    page.goto(f"{server}/minilm")
    expect(page.locator(TITLE).first).to_have_text("Inside a real transformer",
                                                   timeout=TIMEOUT_MS)
    # the question first, with the figures that answer it held back (the replies, right and
    # wrong, are tests/layoututil.py's GUESSED, where the navigation opens the page)
    expect(question(page)).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    expect(page.locator(CHARTS)).to_have_count(0)
    question(page).get_by_text("the first token", exact=True).click()
    expect(page.locator(CHARTS)).to_have_count(FIGURES, timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text("9 tokens:")).to_be_visible()
    check_fragment_controls(page, "/minilm")  # the attention's layer writes the link

    box = page.get_by_role("textbox", name="Sentence")
    box.fill("Paris is the capital of France, and Berlin is the capital of Germany.")
    box.press("Control+Enter")  # a text area submits with Ctrl+Enter
    expect(main.get_by_text("17 tokens:")).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    # another sentence asks the question again (lnviz.ui.state.prediction's context): the
    # figures wait for the new answer
    expect(page.locator(CHARTS)).to_have_count(0)
    question(page).get_by_text("the first token", exact=True).click()
    wait_idle(page)
    expect(page.locator(CHARTS)).to_have_count(FIGURES)
    # the heatmap has a row per token now, and the massive activation is still [CLS]'s
    expect(page.locator(".js-plotly-plot").first.locator("text", has_text="16 [SEP]")
           ).to_have_count(1)
    expect(main.get_by_text(re.compile(r"“\[CLS\]” \(token 0\) has 2\d\d\.?\d* in feature 99"))
           ).to_be_visible()
    assert "tf_text=Paris" in page.url
    if SAVE_SCREENSHOTS:  # the whole page, scrolled inside stMain
        page.set_viewport_size({"width": 1400, "height": 7000})
        wait_idle(page)
        shot(page, "transformer-typed")
        page.set_viewport_size({"width": 1400, "height": 1200})

    box.fill("x" * 6_000)  # 6,000 characters, as a paste arrives: all at once (one [UNK])
    box.press("Control+Enter")
    expect(main.get_by_text("This text has 6,000 characters")).to_be_visible(timeout=TIMEOUT_MS)
    expect(main.get_by_text("3 tokens:")).to_be_visible()
    wait_idle(page)
    question(page).get_by_text("the first token", exact=True).click()
    wait_idle(page)
    assert_no_exception(page)

    page.get_by_role("button", name="Open this input in the Explorer").click()
    expect(page.locator(TITLE).first).to_have_text("Explorer", timeout=TIMEOUT_MS)
    expect(main.get_by_text("(1, 3, 384)").first).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    assert "/explorer" in page.url
