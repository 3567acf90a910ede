"""Shared links in a real browser: a link's text shows as text, with no live link or
outside image, and typed numbers too long for a link keep the address small and say so.

Uses the server, browser and page fixtures of tests/conftest.py (one server for the whole run).
"""

from __future__ import annotations

import re
import urllib.parse

import numpy as np
import pytest
from browserutil import (
    ALERT,
    CHARTS,
    TIMEOUT_MS,
    assert_no_exception,
    shot,
    wait_idle,
)

from lnviz.limits import MAX_SHARED_TEXT

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None

pytestmark = pytest.mark.browser
# conftest.py's fixtures: one server for the whole run, a fresh browser page per test

#: The address of a view may not grow beyond this (servers refuse from about 64 KB on).
MAX_URL = 8 * 1024
NOTE = "too large to share by link"

#: What the page's DOM holds that a link's text could have smuggled in: links and media that
#: point outside the app, and markup inside the alert boxes.
_SMUGGLED = """() => {
  const outside = (url) => url && !url.startsWith(location.origin) && !url.startsWith('data:')
                           && !url.startsWith('blob:');
  const alerts = [...document.querySelectorAll('[data-testid="stAlert"]')];
  return {
    links: [...document.querySelectorAll('a[href]')].map(a => a.href)
             .filter(h => !h.startsWith(location.origin)),
    media: [...document.querySelectorAll('img, video, audio, source, iframe')]
             .map(e => e.src || e.currentSrc).filter(outside),
    // inside the alerts' text (their icon sits outside it)
    markup: alerts.flatMap(a => [...a.querySelectorAll(
              '[data-testid="stMarkdownContainer"] :is(a, img, strong, em, del, code, h1, h2, '
              + 'h3, li, blockquote, table, .katex, [role="img"], span[style], b)')])
              .map(e => e.outerHTML.slice(0, 80)),
    text: alerts.map(a => a.innerText).join('\\n'),
  };
}"""

#: A link's text that markdown, Streamlit's directives or HTML would turn into a link, an image
#: (which the browser would fetch), markup, an icon, colour or a formula, given to the Padding
#: page as its lengths (no comma: one item, refused as a whole, and shown whole: at most 100
#: characters). Each page's own messages are checked as text without a browser
#: (tests/test_state.py's hostile strings, the Explorer's typed numbers among them); here the
#: browser shows that text is all that arrives.
HOSTILE_LINKS = {
    "link-and-image": "**IMPORTANT** [the fix](https://evil.example/x.ipynb) "
                      "x![img](http://evil.example/pixel.png)",
    "directives": "<b>b</b> :material/warning: :red[red] :smile: $x^2$ `c` ~~s~~ www.evil.example",
}


@pytest.mark.parametrize("case", list(HOSTILE_LINKS))
def test_a_links_text_is_shown_as_text(page: Page, server: str, case: str) -> None:
    text = HOSTILE_LINKS[case]
    requested: list[str] = []
    def note(request) -> None:
        requested.append(request.url)

    page.on("request", note)  # removed below: the tab serves the next test
    page.goto(f"{server}/padding?pd_src=Generated&pd_lengths="
              + urllib.parse.quote(text, safe=""))
    alert = page.locator(ALERT).filter(has_text="item")
    expect(alert.first).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    shot(page, f"url-hostile-{case}")
    found = page.evaluate(_SMUGGLED)
    assert found["links"] == [] and found["media"] == [] and found["markup"] == [], found
    # the literal characters are on the screen
    assert text in found["text"].replace("\u2060", ""), found["text"]
    page.remove_listener("request", note)
    assert not [url for url in requested if urllib.parse.urlsplit(url).hostname != "127.0.0.1"]


def _numbers(count: int) -> str:
    return "\n".join(", ".join(f"{(i * 37 + j * 11) % 1000 / 7:.4f}" for j in range(100))
                     for i in range(count // 100))


def test_twenty_thousand_typed_numbers_work_and_keep_the_link_small(page: Page,
                                                                    server: str) -> None:
    page.goto(f"{server}/explorer?src=Type+numbers&tmode=text")
    numbers = page.get_by_label("Numbers", exact=True)
    expect(numbers).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    text = _numbers(20_000)
    numbers.fill(text)
    numbers.press("Control+Enter")
    expect(page.get_by_text("Tensor (200, 100) in layout NC")).to_be_visible()
    expect(page.get_by_text(NOTE)).to_be_visible()
    wait_idle(page)
    assert_no_exception(page)
    expect(page.locator(CHARTS).nth(2)).to_be_visible()
    encoded = len(urllib.parse.quote_plus(text))
    print(f"20,000 numbers: {len(text):,} characters, {encoded:,} in a URL; "
          f"the page's address now: {len(page.url):,} characters")
    assert len(page.url) < MAX_URL and "ttext=" not in page.url
    shot(page, "url-long-typed-numbers")

    # short again: the text goes back into the link, the note goes away
    numbers.fill("1, 2\n3, 5")
    numbers.press("Control+Enter")
    expect(page.get_by_text(NOTE)).to_have_count(0)
    expect(page).to_have_url(re.compile(r"[?&]ttext=1%2C\+2%0A3%2C\+5(&|$)"))
    assert MAX_SHARED_TEXT < MAX_URL


def test_a_link_with_values_streamlit_fails_on_opens_and_keeps_its_other_settings(
        page: Page, server: str) -> None:
    """An integer input given a number beyond float's range, and a required choice given an
    empty value, leave the address; the link's valid settings stay in it and on the screen."""
    page.goto(f"{server}/explorer?src=Image+batch&norm=&seed=1e309&precision=float64")
    expect(page.get_by_label("Random seed", exact=True)).to_have_value("0", timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query, keep_blank_values=True)
    assert "seed" not in query and "norm" not in query, page.url
    assert query["src"] == ["Image batch"] and query["precision"] == ["float64"], page.url
    expect(page.get_by_text("Tensor (").first).to_be_visible()


def test_npz_member_names_are_plain_text_in_the_array_picker(page: Page, server: str,
                                                             tmp_path) -> None:
    """The picker (a selectbox) shows its options as text, not markdown: the names appear as
    they are, unescaped, and make no link."""
    hostile = "**bold** [fix](https://evil.example/f) ![i](http://evil.example/p.png)"
    path = tmp_path / "names.npz"
    np.savez(path, **{hostile: np.ones((2, 3)), "plain": np.zeros((2, 3))})
    page.goto(f"{server}/explorer?src=Upload+a+file")
    dropzone = page.locator('[data-testid="stFileUploader"] input[type=file]').first
    expect(dropzone).to_be_attached(timeout=TIMEOUT_MS)
    wait_idle(page)
    dropzone.set_input_files(str(path))
    expect(page.locator(CHARTS).nth(2)).to_be_visible()
    wait_idle(page)
    picker = page.get_by_label("Array", exact=True)
    picker.click()
    # each option is the name and the array's shape: "<name>  (2, 3)"
    expect(page.get_by_role("option", name=hostile)).to_be_visible()
    found = page.evaluate(_SMUGGLED)
    assert found["links"] == [] and found["media"] == [], found
    shot(page, "url-npz-names")
