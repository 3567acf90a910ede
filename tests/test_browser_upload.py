"""In the browser: a download clicked while the Explorer reruns still arrives.

Uses the server, browser and page fixtures of tests/conftest.py (a real ``streamlit run``).
"""

from __future__ import annotations

from urllib.parse import urlparse

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from browserutil import (
    SERVER_LOGS,
    assert_no_exception,
    norm_option,
    open_explorer,
    wait_idle,
)
from playwright.sync_api import expect

from lnviz.data import get_preset

pytestmark = pytest.mark.browser


def _outputs() -> list[np.ndarray]:
    """The default batch (the transformer article: 2 sentences × 4 tokens × 3 features) through
    torch's
    LayerNorm, BatchNorm with the statistics of the real tokens (the page masks the pad by
    default, and normalizes it with those statistics too) and RMSNorm, ε = 1e-5."""
    preset = get_preset("padded_tokens")
    x, real = torch.tensor(preset.values, dtype=torch.float32), torch.tensor(preset.mask)
    mean, var = x[real].mean(0), x[real].var(0, unbiased=False)
    batch_norm = F.batch_norm(x.reshape(-1, 3), mean, var, training=False, eps=1e-5)
    return [F.layer_norm(x, (3,), eps=1e-5).numpy(), batch_norm.reshape(x.shape).numpy(),
            F.rms_norm(x, (3,), eps=1e-5).numpy()]


#: Rounds of the race: with a stored file behind the button, the first fix still lost one round
#: in a few hundred on a busy machine; the code before it, about half of them.
ROUNDS = 5


def test_a_download_clicked_during_a_rerun_arrives(page, server) -> None:
    """Two quick choices: the second cuts the first one's rerun short, and the download is
    clicked before the page has drawn the last run's buttons. The button used to be a link to a
    file the server keeps for the run that drew it, freed two clean-ups later; on a busy machine
    the browser was two runs behind and got nothing ("Download.path: canceled"; before that,
    "MediaFileStorageError: Deferred file … not found" in the server's log). Now the bytes come
    with the button, and the click asks the server for nothing. (A race, so it is run several
    times; tests/test_source.py checks the bytes without a browser.) The same quick clicks once
    left the page behind Streamlit's "Cached ForwardMsg MISS" dialog, inert, 1 round in 3 on a
    busy machine: .streamlit/config.toml turns Streamlit's message cache off."""
    asked = []  # the stored files the page asks the server for (Streamlit's /media/…): none
    def ask(request) -> None:
        if urlparse(request.url).path.startswith("/media/"):
            asked.append(request.url)

    page.on("request", ask)
    open_explorer(page, server)
    button = page.get_by_role("button", name="output.npy", exact=True)
    for _ in range(ROUNDS):
        button.scroll_into_view_if_needed()
        # mid-rerun the page can briefly hold the old control beside the new: take the first
        current = norm_option(page, "LayerNorm").first.is_checked()
        for norm in ("BatchNorm", "RMSNorm") if current else ("BatchNorm", "LayerNorm"):
            # the second cuts the first one's run short. A click event on the option itself,
            # not a mouse click where it was: mid-rerun the page moves under the mouse, and a
            # click that lands on a figure's toolbar opens its menu, which makes the rest of
            # the page inert (react-aria) until it closes
            norm_option(page, norm).first.dispatch_event("click")
        with page.expect_download() as download:
            button.click()  # an earlier run's button, or the last run's
        assert download.value.suggested_filename == "output.npy"
        content = np.load(download.value.path())
        assert any(np.allclose(content, out, atol=1e-5) for out in _outputs()), content
        wait_idle(page)
    assert_no_exception(page)
    page.remove_listener("request", ask)  # the tab serves the next test
    assert asked == []
    button.hover()  # the help shows as Streamlit's does
    expect(page.get_by_role("tooltip").filter(has_text="normalized output y")).to_be_visible()
    assert "Deferred file" not in SERVER_LOGS[server].read_text(errors="replace")
