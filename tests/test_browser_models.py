"""BatchNorm in a real network in a real browser: the own-picture choice opened by its link, a
picture of the learner's own uploaded through the dropzone, a damaged one refused with a message.
(Inside Gemma 3 opens in the navigation test of tests/test_browser.py, its question answered
there; a typed prompt is the MiniLM page's test, and a lazy part opened by its fold SmolLM2's.)

Uses the server, browser and page fixtures of tests/conftest.py (one server for the whole run).
"""

from __future__ import annotations

import io
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
from browserutil import (
    ALERT,
    CHARTS,
    TIMEOUT_MS,
    TITLE,
    assert_no_exception,
    shot,
    wait_idle,
)

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None

pytestmark = pytest.mark.browser

#: The picture choice's last option (app_pages/efficientnet.py's OWN).
OWN = "a picture of your own (PNG or JPEG)"


def _png(array: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "PNG")
    return buffer.getvalue()


def test_efficientnet_runs_a_picture_uploaded_and_refuses_a_damaged_file(
        page: Page, server: str, tmp_path: Path) -> None:
    """The own-picture choice, opened by its link: it waits for an upload, runs a picture the
    learner drops in, and refuses a damaged one with a message (a photograph of the package's,
    chosen, and part 1's question answered are tests/test_efficientnet.py's, without a browser,
    and the navigation test's)."""
    # a picture of the learner's own: a green square with a white disc
    yy, xx = np.mgrid[:300, :400]
    picture = np.zeros((300, 400, 3), dtype=np.uint8)
    picture[...] = (30, 140, 60)
    picture[(yy - 150) ** 2 + (xx - 200) ** 2 < 80 ** 2] = 255
    good, bad = tmp_path / "mine.png", tmp_path / "broken.png"
    good.write_bytes(_png(picture))
    bad.write_bytes(_png(picture)[:200])  # cut short inside its pixels
    page.goto(f"{server}/efficientnet?en_photo=" + urllib.parse.quote_plus(OWN))
    expect(page.locator(TITLE).first).to_have_text("BatchNorm in a real network",
                                                   timeout=TIMEOUT_MS)
    wait_idle(page)
    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text("Upload a picture to run it")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator(CHARTS)).to_have_count(0)
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
