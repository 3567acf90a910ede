"""What the browser tests share: a real ``streamlit run app.py`` server (:func:`serve`), the
page's landmarks, and the waits and checks every test of a page uses. The fixtures (one
Chromium and one server for the whole run, a fresh page per test) are in conftest.py, and so is
the one timeout every wait uses (:data:`TIMEOUT_MS`).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TIMEOUT_MS

from tools.localserver import HOST, free_port, healthy, server_command

with contextlib.suppress(ImportError):  # the ``browser`` fixture skips or fails without it
    from playwright.sync_api import Page, expect

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "screenshots"
#: Whether the tests save screenshots: LNVIZ_SCREENSHOTS=1.
SAVE_SCREENSHOTS = os.environ.get("LNVIZ_SCREENSHOTS") == "1"
SERVER_START_S = 60

#: Record the script-run states and the page's text from now on (for ``RAN_SINCE_WATCH``).
WATCH_RUNS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (window.__e2eObserver) window.__e2eObserver.disconnect();
  window.__e2eApp = app;
  window.__e2eText = document.querySelector('[data-testid="stMain"]').innerText;
  window.__e2eStates = [];
  window.__e2eObserver = new MutationObserver((records) => {
    for (const r of records) {
      window.__e2eStates.push(r.oldValue, r.target.getAttribute(r.attributeName));
    }
  });
  window.__e2eObserver.observe(app, {attributes: true, attributeOldValue: true,
                                     attributeFilter: ['data-test-script-state']});
}"""
#: True once a script run happened after ``WATCH_RUNS`` and the app is idle again. A short
#: run (one that fails at once, say) can start and end within one render, so that the DOM
#: never shows "running": then the changed page text is the sign of the run.
RAN_SINCE_WATCH = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const main = document.querySelector('[data-testid="stMain"]');
  return app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-stale="true"]')
    && (window.__e2eStates.includes('running') || main.innerText !== window.__e2eText);
}"""
#: What the page's run looked like, for a failure message.
RUN_REPORT = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return {seen: window.__e2eStates, now: app && app.getAttribute('data-test-script-state'),
          connection: app && app.getAttribute('data-test-connection-state'),
          watchedAppAttached: !!window.__e2eApp && window.__e2eApp.isConnected,
          status: Array.from(document.querySelectorAll('[data-testid="stStatusWidget"]'))
                       .map(e => e.innerText)};
}"""

#: The folded pages with the parts that hold their controls open (lnviz.ui.pages.folded).
BN_VS_LN = "/bn_vs_ln?bl_part2=true&bl_part3=true"
SCALE_SHIFT = "/scale_shift?ss_part2=true&ss_part3=true"

CHARTS = '[data-testid="stPlotlyChart"], .lv-figure'  # st.plotly_chart, or drawn live
EXCEPTION = '[data-testid="stException"]'
ALERT = '[data-testid="stAlert"]'
NAV_LINKS = '[data-testid="stSidebarNav"] a, [data-testid="stSidebarNavLink"]'
TITLE = '[data-testid="stMain"] h1'
CHECK_BADGE = "matches torch.nn.functional"
REDACTED_ERROR = "This app has encountered an error"
#: Each running server's log, by base URL, for failure messages.
SERVER_LOGS: dict[str, Path] = {}
#: Each running server's process, by base URL (a test may check what the server is doing).
SERVER_PROCS: dict[str, subprocess.Popen] = {}


def missing(what: str) -> None:
    """Skip for a missing browser prerequisite, or fail where the run must drive a browser."""
    message = f"browser tests need {what}"
    if os.environ.get("LNVIZ_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{message}, and LNVIZ_REQUIRE_BROWSER=1 requires them", pytrace=False)
    pytest.skip(f"{message} (set LNVIZ_REQUIRE_BROWSER=1 to make this a failure)")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)



@contextlib.contextmanager
def serve(log_dir: Path, *options: str) -> Iterator[str]:
    """``streamlit run app.py`` on a free local port, with any further ``options`` of
    ``streamlit run``; yields its base URL, stops it after."""
    port = free_port()
    log_path = log_dir / "server.log"
    command = [*server_command(port), *options]
    base = f"http://{HOST}:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + SERVER_START_S
            while not healthy(base):
                if proc.poll() is not None or time.monotonic() > deadline:
                    state = (f"exited with code {proc.returncode}" if proc.poll() is not None
                             else f"not healthy after {SERVER_START_S} s")
                    pytest.fail(f"streamlit server {state}; its log:\n"
                                f"{log_path.read_text(errors='replace')[-4000:]}",
                                pytrace=False)
                time.sleep(0.25)
            SERVER_LOGS[base] = log_path
            SERVER_PROCS[base] = proc
            yield base
        finally:
            SERVER_LOGS.pop(base, None)
            SERVER_PROCS.pop(base, None)
            stop_server(proc)


def shot(page: Page, name: str) -> None:
    """A full-page screenshot in ``screenshots/``, when LNVIZ_SCREENSHOTS=1 (to look at the
    pages: a plain test run does not write them)."""
    if not SAVE_SCREENSHOTS:
        return
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "page"


def wait_idle(page: Page) -> None:
    """Wait until the script has finished its run (the status widget shows no running state)."""
    expect(page.locator('[data-testid="stApp"]')).to_have_attribute(
        "data-test-script-state", "notRunning", timeout=TIMEOUT_MS)
    expect(page.locator('[data-testid="stStatusWidget"]')
           .filter(has_text=re.compile("running", re.IGNORECASE))).to_have_count(0)


def question(page: Page, text: str | None = None):  # -> Locator
    """The page's "Before you look" question (lnviz.ui.state.prediction), the one whose text
    holds ``text`` where a page asks several."""
    asked = page.locator('[data-testid="stRadio"]', has_text="Before you look")
    return asked if text is None else asked.filter(has_text=text)


def answer_both_ways(page: Page, asked: str, first: str) -> str:
    """Answer the "Before you look" question whose text holds ``asked`` with ``first``,
    then with the other kind of answer: after a wrong one, the right one its reply names; after
    a right one, any other. Each reply is checked where it stands, under the question ("Right:"
    or "Not quite: the answer is “…”."). Returns the right option."""
    radio = question(page, asked)
    # the first element after the question that is a reply (a spinner's place may come first)
    reply = page.locator('[data-testid="stElementContainer"]', has=radio).locator(
        "xpath=following-sibling::div[starts-with(normalize-space(.), 'Right:') or "
        "starts-with(normalize-space(.), 'Not quite:')][1]")

    def pick(option: str, expected: str | None = None) -> str:
        """Click ``option``; its reply once shown (``expected``: the reply's start, waited
        for, where an earlier reply stands in the same place until the run ends)."""
        radio.get_by_text(option, exact=True).click()
        if expected is None:
            expect(reply).to_have_count(1, timeout=TIMEOUT_MS)
        else:
            expect(reply).to_contain_text(expected, timeout=TIMEOUT_MS)
        wait_idle(page)
        return reply.inner_text()

    said = pick(first)
    if said.startswith("Right:"):
        right = first
        other = next(o for o in radio.locator("label").all_inner_texts() if o.strip() != first)
        pick(other.strip(), f"Not quite: the answer is “{right}”.")
    else:
        right = re.match(r"Not quite: the answer is “(.+?)”\.", said).group(1)
        pick(right, "Right:")
    assert_no_exception(page)
    return right


def to_front(page: Page) -> Page:
    """Put ``page`` in front of the worker's other tab before driving it. Chromium draws
    animation frames for the tab last navigated or brought to front; in the other, each wait
    for a frame (Playwright's check that an element is still before it scrolls or clicks, a
    live figure's redraw) takes about a second: scrolling a figure into view took 2.0 s there
    against 0.03 s in front (the narrow test's two tabs, 2026-12-01)."""
    page.bring_to_front()
    return page


def assert_no_exception(page: Page) -> None:
    """No exception box; on failure, say what the server logged (the page shows no details)."""
    # with client.showErrorDetails = "none" an uncaught error shows only a redacted notice
    shown = page.locator(EXCEPTION).count() + page.get_by_text(REDACTED_ERROR).count()
    if shown:
        origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(page.url))
        log = SERVER_LOGS.get(origin)
        tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else "(no log)"
        raise AssertionError(f"{page.url} shows an exception; the server's log ends with:\n"
                             f"{tail}")


def open_explorer(page: Page, base: str, query: str = "") -> None:
    page.goto(f"{base}/explorer{query}")
    expect(page.locator(CHARTS).nth(2)).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)


def norm_option(page: Page, name: str):
    """One option of the Normalization segmented control (its buttons have role radio)."""
    return (page.get_by_role("radiogroup", name="Normalization")
            .get_by_role("radio", name=name, exact=True))


def chart_title(page: Page, title: str):
    """A Plotly chart's (sub)title: SVG text inside the chart, not the same words that label
    the figure's data table behind its expander. A title wrapped onto two lines (narrow
    panels) reads as its lines run together, so the words may meet without a space."""
    words = r"\s*".join(re.escape(word) for word in title.split())
    return page.locator(".js-plotly-plot text", has_text=re.compile(words))


def open_from_navigation(page: Page, number: int, href: str | None) -> None:
    """Click the navigation's link ``number``; wait for its page's run; check it for errors."""
    link = page.locator(NAV_LINKS).nth(number)
    page.evaluate(WATCH_RUNS)
    link.click()
    _switched(page, link, href.rstrip("/") if href else None)


def _switched(page: Page, link, path: str | None) -> None:
    """After a click on the navigation's ``link``: the URL ends in ``path`` (when given), the
    link is the current page's, the run the click started has finished, and the page shows its
    title and no error."""
    if path:
        expect(page).to_have_url(re.compile(re.escape(path) + r"/?(\?.*)?$"))
    expect(link).to_have_attribute("aria-current", "page")
    page.wait_for_function(RAN_SINCE_WATCH, polling=100, timeout=TIMEOUT_MS)
    title = page.locator(TITLE).first
    expect(title).to_be_visible()
    expect(title).not_to_have_text(re.compile(r"^\s*$"))
    assert_no_exception(page)


#: What has the keyboard's focus, described for a test.
FOCUSED = """() => {
  let e = document.activeElement;
  while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement;
  if (!e) return {};
  const group = e.closest('[role=radiogroup]');
  return {tag: e.tagName, role: e.getAttribute('role') || '', label: e.getAttribute('aria-label')
          || '', text: (e.innerText || '').trim(), group: group ? group.getAttribute('aria-label')
          : '', testid: e.getAttribute('data-testid') || ''};
}"""


def tab_to(page: Page, wanted, what: str, limit: int = 150) -> dict:
    """Press Tab (only) until ``wanted(focused)`` holds; the focused element's description."""
    seen = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if wanted(focused):
            return focused
        seen.append(f"{focused.get('tag')}:{focused.get('label') or focused.get('text')[:20]}")
    raise AssertionError(f"{what} not reached with {limit} Tabs; focus went {seen[-40:]}")


def type_first_gamma(page: Page, text: str) -> None:
    """Type ``text`` into feature 0's γ cell of the Explorer's per-feature table, key by key as
    a learner does, press Enter, and wait for the run it starts to finish."""
    grid = page.locator('[data-testid="stDataFrame"]').first
    editor = page.locator("#portal textarea, #portal input").first
    for _ in range(3):  # the grid is a canvas: aim at the cell, and aim again if the page moved
        grid.scroll_into_view_if_needed()
        page.wait_for_timeout(500)  # let the scroll settle before measuring the grid
        box = grid.bounding_box()
        assert box is not None
        # row 0 ("feature 0") of the γ column: the index column is about 64 px wide
        page.mouse.dblclick(box["x"] + 64 + (box["width"] - 64) * 0.3, box["y"] + 35 + 17)
        try:
            expect(editor).to_be_visible(timeout=5_000)  # short: a miss is aimed again
            break
        except AssertionError:
            page.keyboard.press("Escape")
    expect(editor).to_be_visible()
    expect(editor).to_be_focused()
    page.evaluate(WATCH_RUNS)
    editor.press("Control+a")
    editor.press_sequentially(text, delay=50)
    expect(editor).to_have_value(text)
    editor.press("Enter")
    page.wait_for_function(RAN_SINCE_WATCH, polling=100, timeout=TIMEOUT_MS)


