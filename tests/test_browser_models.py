"""The two newest model pages in a real browser: Inside Gemma 3 (a prompt typed, part 1
answered both ways, a folded part opened on its question) and BatchNorm in a real network (a
photograph chosen, a picture of the learner's own uploaded, a damaged one refused with a
message).

Uses the server, browser and page fixtures of tests/conftest.py (one server for the whole run).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from browserutil import (
    ALERT,
    CHARTS,
    TIMEOUT_MS,
    TITLE,
    answer_both_ways,
    assert_no_exception,
    shot,
    wait_idle,
)

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None

pytestmark = pytest.mark.browser


def test_gemma_follows_a_typed_prompt_and_opens_a_part(page: Page, server: str) -> None:
    page.goto(f"{server}/gemma")
    expect(page.locator(TITLE).first).to_have_text("Inside Gemma 3", timeout=TIMEOUT_MS)
    wait_idle(page)
    expect(page.locator(CHARTS)).to_have_count(0)  # the question first
    box = page.get_by_role("textbox", name="Prompt")
    box.fill("One, two, three, four,")
    box.press("Control+Enter")
    wait_idle(page)
    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text("The most likely next token: `␣five`", exact=False)).to_have_count(
        0)  # a code span: its text is ␣five without the backticks
    expect(main.get_by_text("␣five").first).to_be_visible(timeout=TIMEOUT_MS)
    answer_both_ways(page, "feed-forward adds to the stream", "under 0.5")
    expect(page.locator(CHARTS)).to_have_count(1, timeout=TIMEOUT_MS)
    assert "g3_text=One" in page.url
    # part 4, opened by its fold: its question, then the three readers of γ
    # part 4, opened by its fold: its question, unanswered, and nothing of its answer (its
    # runs take a turn in the server's line, which other tests' pages may hold for minutes:
    # tests/test_gemma.py answers it through AppTest)
    page.locator('[data-testid="stExpander"] summary', has_text="4 · 1 + γ").click()
    wait_idle(page)  # opening a lazy part reruns the page; its question comes with that run
    expect(page.locator('[data-testid="stRadio"]', has_text="with the 1 added again")
           ).to_be_visible(timeout=TIMEOUT_MS)
    assert "g3_part4=true" in page.url
    expect(main.get_by_text("with it forgotten", exact=False)).to_have_count(0)
    assert_no_exception(page)
    shot(page, "gemma-typed")


def _png(array: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "PNG")
    return buffer.getvalue()


def test_efficientnet_runs_a_photo_an_upload_and_refuses_a_damaged_file(
        page: Page, server: str, tmp_path: Path) -> None:
    page.goto(f"{server}/efficientnet?en_photo=a+cup+of+coffee")
    expect(page.locator(TITLE).first).to_have_text("BatchNorm in a real network",
                                                   timeout=TIMEOUT_MS)
    wait_idle(page)
    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text("In eval mode it says: espresso", exact=False)).to_be_visible(
        timeout=TIMEOUT_MS)
    expect(page.locator(CHARTS)).to_have_count(0)
    answer_both_ways(page, "alone in its batch", "about as sure as in eval mode")
    expect(page.locator(CHARTS)).to_have_count(1, timeout=TIMEOUT_MS)
    assert_no_exception(page)

    # a picture of the learner's own: a green square with a white disc
    yy, xx = np.mgrid[:300, :400]
    picture = np.zeros((300, 400, 3), dtype=np.uint8)
    picture[...] = (30, 140, 60)
    picture[(yy - 150) ** 2 + (xx - 200) ** 2 < 80 ** 2] = 255
    good, bad = tmp_path / "mine.png", tmp_path / "broken.png"
    good.write_bytes(_png(picture))
    bad.write_bytes(_png(picture)[:200])  # cut short inside its pixels
    page.get_by_label("Picture", exact=True).click()  # typing filters the options
    page.keyboard.type("of your own")
    option = page.get_by_role("option", name="a picture of your own (PNG or JPEG)")
    expect(option).to_be_visible()
    option.click()
    wait_idle(page)
    expect(main.get_by_text("Upload a picture to run it")).to_be_visible(timeout=TIMEOUT_MS)
    dropzone = page.locator('[data-testid="stFileUploaderDropzoneInput"], '
                            '[data-testid="stFileUploader"] input[type=file]').first
    dropzone.set_input_files(str(good))
    expect(main.get_by_text("In eval mode it says:", exact=False)).to_be_visible(
        timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    shot(page, "efficientnet-upload")

    dropzone.set_input_files(str(bad))
    error = page.locator(ALERT).filter(has_text="cannot be decoded")
    expect(error.first).to_be_visible(timeout=TIMEOUT_MS)
    expect(main.get_by_text("In eval mode it says:", exact=False)).to_have_count(0)
    wait_idle(page)
    assert_no_exception(page)
