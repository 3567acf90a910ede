"""In the browser: the Model inspector opens an uploaded capture, and "Open in Explorer" shows
a layer's input in the Explorer with the layer's settings.

Uses the server, browser and page fixtures of tests/conftest.py (a real ``streamlit run``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from browserutil import (
    ALERT,
    CHARTS,
    CHECK_BADGE,
    TIMEOUT_MS,
    assert_no_exception,
    chart_title,
    norm_option,
    shot,
    wait_idle,
)
from fragmentutil import check_fragment_controls

import lnviz
from lnviz.data.examples import example_model

pytestmark = pytest.mark.browser

#: The layer the test opens: the CNN's GroupNorm (4 groups), whose settings differ from the
#: Explorer's defaults in norm, groups and per-feature γ and β.
LAYER = "cnn.4[0]"
#: Its caption (plain() puts an invisible word joiner after the colon).
GROUPNORM_CAPTION = re.compile("GroupNorm:\u2060? one group is one channel group")


def _capture_file(folder: Path) -> Path:
    """A capture of the example models on inputs of their own (not the shipped file)."""
    generator = torch.Generator().manual_seed(11)
    tokens = torch.randint(0, 40, (3, 6), generator=generator)
    images = torch.randn(2, 3, 8, 8, generator=generator)
    path = folder / "my_norms.safetensors"
    lnviz.capture(example_model(), tokens, images).save(path)
    return path


def test_upload_a_capture_and_open_a_layer_in_the_explorer(page, server,
                                                           tmp_path: Path) -> None:
    """The example capture, then an uploaded one and its layer cnn.4[0]; a second capture in
    the same uploader takes its own layer into the link; the first again, and its layer opened
    in the Explorer (one page load, which also checks the page's fragment control:
    tests/fragmentutil.py)."""
    from playwright.sync_api import expect  # here: the fixtures skip where it is missing

    page.goto(f"{server}/inspector")
    expect(page.locator(CHARTS).nth(2)).to_be_visible(timeout=TIMEOUT_MS)  # the example
    wait_idle(page)
    assert_no_exception(page)
    shot(page, "inspector-example-capture")
    check_fragment_controls(page, "/inspector")  # the example's layer, in its fragment

    files = page.get_by_role("radiogroup", name="File")
    files.get_by_role("radio", name="Upload a file", exact=True).click()
    dropzone = page.locator('[data-testid="stFileUploaderDropzoneInput"], '
                            '[data-testid="stFileUploader"] input[type=file]').first
    expect(dropzone).to_be_attached()
    wait_idle(page)
    capture = _capture_file(tmp_path)
    dropzone.set_input_files(str(capture))
    # plain() puts an invisible word joiner after the colon
    expect(page.get_by_text(re.compile("my_norms.safetensors:\u2060? a capture of 8 calls "
                                       "of normalization layers"))).to_be_visible(
        timeout=TIMEOUT_MS)
    wait_idle(page)
    # the uploaded capture has the example's layers: the one chosen above stays, in the link too
    expect(page.get_by_text(GROUPNORM_CAPTION)).to_be_visible()
    assert_no_exception(page)
    shot(page, "inspector-uploaded-capture")

    # a second capture in the same uploader: the page shows its first layer, and the link no
    # longer names the first capture's (it kept ``in_layer=cnn.4[0] · GroupNorm`` while the
    # page showed another layer)
    assert "in_layer=cnn.4" in page.url
    other = tmp_path / "other.safetensors"
    lnviz.capture(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)),
                  torch.randn(3, 4)).save(other)
    _upload(page, other)
    expect(page.get_by_text(re.compile("LayerNorm:\u2060? one group is one token"))).to_be_visible(
        timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    expect(page).not_to_have_url(re.compile("in_layer=cnn"), timeout=TIMEOUT_MS)

    # the first capture again, its layer opened in the Explorer
    _upload(page, capture)
    expect(page.get_by_text(re.compile("my_norms.safetensors:\u2060? a capture of 8 calls"))
           ).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    _choose_layer(page)

    page.get_by_role("button", name=re.compile("Open in Explorer")).click()
    expect(page).to_have_url(re.compile(r"/explorer\?src=Captured\+layer&layer=cnn\.4%5B0%5D"))
    expect(page.locator(CHARTS).nth(2)).to_be_visible(timeout=TIMEOUT_MS)
    expect(chart_title(page, "output y (GroupNorm)")).to_be_visible()
    expect(norm_option(page, "GroupNorm")).to_be_checked()
    expect(page.get_by_text("Tensor (2, 8, 8, 8) in layout NCHW")).to_be_visible()
    expect(page.get_by_text(re.compile("From my_norms.safetensors:\u2060? 8 calls"))
           ).to_be_visible()
    expect(page.locator(ALERT).filter(has_text=CHECK_BADGE).first).to_be_visible()
    wait_idle(page)
    assert_no_exception(page)
    shot(page, "inspector-open-in-explorer")


def _upload(page, path: Path) -> None:
    page.locator('[data-testid="stFileUploaderDropzoneInput"], '
                 '[data-testid="stFileUploader"] input[type=file]').first.set_input_files(
        str(path))


def _choose_layer(page) -> None:
    """Pick LAYER in the Layer selectbox, by typing (it filters its options) and a click."""
    from playwright.sync_api import expect

    page.get_by_label("Layer", exact=True).click()
    page.keyboard.type(LAYER)
    option = page.get_by_role("option", name=re.compile(re.escape(LAYER)))
    expect(option).to_be_visible()
    option.click()
    expect(page.get_by_text(GROUPNORM_CAPTION)).to_be_visible()
    wait_idle(page)
    assert_no_exception(page)
