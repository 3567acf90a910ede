"""Inside a real LLM in a real browser: two tabs, each with a prompt of its own (two sessions of
one server, which loads the model once for both); the prediction follows each tab's prompt, and
a lazy part opened by its fold asks before it runs anything.

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
    to_front,
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

    # the first learner's part 4, opened by its fold: a lazy part, which reruns the page and
    # writes the link; its question comes, and nothing of its answer (breaking a norm runs the
    # model through the server's heavy-job line: tests/test_smollm2.py answers it in AppTest).
    # A typed prompt is the MiniLM page's browser test (the same text area and its link).
    to_front(page).locator('[data-testid="stExpander"] summary',
                           has_text="4 · Break a norm").click()
    expect(question(page, "does the most likely next token")).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    expect(page).to_have_url(re.compile(r"[?&]sl_part4=true(&|$)"))
    expect(main.get_by_text(re.compile(r"KL divergence|nats"))).to_have_count(0)
    expect(page.locator(CHARTS)).to_have_count(1)  # part 1's still, none of part 4's
    assert_no_exception(page)
    shot(page, "smollm2-part4-asks")
