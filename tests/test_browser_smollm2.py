"""Inside a real LLM in a real browser: a prompt typed in one tab and another in a second tab (two
sessions of one server, which loads the model once for both); the prediction follows the prompt.

Uses the server and the two reused tabs of tests/conftest.py (one server for the whole run).
"""

from __future__ import annotations

import re

import pytest
from browserutil import (
    CHARTS,
    TIMEOUT_MS,
    TITLE,
    answer_both_ways,
    assert_no_exception,
    question,
    shot,
    wait_idle,
)

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None

pytestmark = pytest.mark.browser


def _open(page: Page, url: str) -> None:
    """Open ``url`` and answer part 1's question (right, then wrong, or the other way round):
    then the prediction's chart is there."""
    page.goto(url)
    expect(page.locator(TITLE).first).to_have_text("Inside a real LLM", timeout=TIMEOUT_MS)
    wait_idle(page)
    expect(page.locator(CHARTS)).to_have_count(0)  # the question first
    answer_both_ways(page, "most likely next token after this prompt", "under 25%")
    expect(page.locator(CHARTS)).to_have_count(1, timeout=TIMEOUT_MS)
    assert_no_exception(page)


def test_two_sessions_share_the_model_and_each_follows_its_prompt(
        page: Page, second_page: Page, server: str) -> None:
    _open(page, f"{server}/smollm2")
    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text("The most likely next token is ␣Paris")).to_be_visible()

    other = second_page  # a second learner: a session of its own
    # part 2 opened by the link: its question too, the figures after the answer
    _open(other, f"{server}/smollm2?sl_text=One%2C+two%2C+three%2C+four%2C&sl_part2=true")
    expect(other.locator('[data-testid="stMain"]')
           .get_by_text("The most likely next token is ␣five")).to_be_visible()
    answer_both_ways(other, "largest value", "a token in between")
    expect(other.locator(CHARTS)).to_have_count(3, timeout=TIMEOUT_MS)  # and the sink's
    assert_no_exception(other)
    other.goto("about:blank")  # the second learner leaves

    box = page.get_by_role("textbox", name="Prompt")
    box.fill("One, two, three, four,")
    box.press("Control+Enter")  # a text area submits with Ctrl+Enter
    wait_idle(page)
    # another prompt asks part 1 again (lnviz.ui.state.prediction's context)
    expect(page.locator(CHARTS)).to_have_count(0, timeout=TIMEOUT_MS)
    question(page, "most likely next token after this prompt").get_by_text(
        "over 75%", exact=True).click()
    expect(main.get_by_text("The most likely next token is ␣five")).to_be_visible(
        timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    assert "sl_text=One" in page.url
    shot(page, "smollm2-typed")
    # part 4 on this prompt: break block 3's input norm (the default), then the four ways
    page.locator('[data-testid="stExpander"] summary', has_text="4 · Break a norm").click()
    answer_both_ways(page, "does the most likely next token", "it stays")
    expect(page.locator(CHARTS)).to_have_count(2, timeout=TIMEOUT_MS)
    answer_both_ways(page, "which moves the prompt's next-token distribution least", "removed")
    # every way's KL; whether the top token stays only for the way asked about ("removed")
    reply = main.get_by_text(re.compile(r"fitted DyT: [\d.e−-]+ nats, loss"))
    expect(reply).to_have_count(1)
    expect(reply).to_contain_text(re.compile(r"removed: [\d.e−-]+ nats, top token"))
    assert_no_exception(page)
