"""End to end: a real ``streamlit run app.py`` server driven by headless Chromium (Playwright).

One server is started for the module and stopped afterwards; every test gets a fresh browser
context. Screenshots of each tested state go to ``screenshots/`` at the repository root.

Needs the ``playwright`` package and a ``chromium`` executable on PATH (Playwright's own browser
download is not used). Where either is missing the tests are skipped — or fail, when
``LNVIZ_REQUIRE_BROWSER=1`` says this run must drive a browser (as CI does).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tools.localserver import CHROMIUM_ARGS, HOST, free_port, healthy, server_command

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
    from playwright.sync_api import Error as PlaywrightError
except ImportError:  # checked (skip or fail) by the ``browser`` fixture
    sync_playwright = None

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "screenshots"
SERVER_START_S = 60
#: The first run of a page imports torch and computes; later runs are much faster.
APP_TIMEOUT_MS = 60_000

#: Opening a page from the navigation: its script must have run to the end by then.
PAGE_RUN_TIMEOUT_MS = 90_000

#: Record the script-run states and the page's text from now on (for ``_RAN_SINCE_WATCH``).
_WATCH_RUNS = """() => {
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
#: True once a script run happened after ``_WATCH_RUNS`` and the app is idle again. A short
#: run (one that fails at once, say) can start and end within one render, so that the DOM
#: never shows "running": then the changed page text is the sign of the run.
_RAN_SINCE_WATCH = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const main = document.querySelector('[data-testid="stMain"]');
  return app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-stale="true"]')
    && (window.__e2eStates.includes('running') || main.innerText !== window.__e2eText);
}"""
#: What the page's run looked like, for a failure message.
_RUN_REPORT = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return {seen: window.__e2eStates, now: app && app.getAttribute('data-test-script-state'),
          connection: app && app.getAttribute('data-test-connection-state'),
          watchedAppAttached: !!window.__e2eApp && window.__e2eApp.isConnected,
          status: Array.from(document.querySelectorAll('[data-testid="stStatusWidget"]'))
                       .map(e => e.innerText)};
}"""

CHARTS = '[data-testid="stPlotlyChart"]'
EXCEPTION = '[data-testid="stException"]'
ALERT = '[data-testid="stAlert"]'
NAV_LINKS = '[data-testid="stSidebarNav"] a, [data-testid="stSidebarNavLink"]'
TITLE = '[data-testid="stMain"] h1'
CHECK_BADGE = "matches torch.nn.functional"
REDACTED_ERROR = "This app has encountered an error"
#: Each running server's log, by base URL, for failure messages.
_SERVER_LOGS: dict[str, Path] = {}
#: Each running server's process, by base URL (a test may check what the server is doing).
SERVER_PROCS: dict[str, subprocess.Popen] = {}


def _missing(what: str) -> None:
    """Skip for a missing browser prerequisite, or fail where the run must drive a browser."""
    message = f"browser tests need {what}"
    if os.environ.get("LNVIZ_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{message}, and LNVIZ_REQUIRE_BROWSER=1 requires them", pytrace=False)
    pytest.skip(f"{message} (set LNVIZ_REQUIRE_BROWSER=1 to make this a failure)")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Debian Chromium through Playwright, for the whole module."""
    if sync_playwright is None:
        _missing("the playwright Python package (pip install playwright)")
    executable = shutil.which("chromium")
    if executable is None:
        _missing("a `chromium` executable on PATH (apt-get install chromium)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=executable, headless=True,
                                      args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


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
            _SERVER_LOGS[base] = log_path
            SERVER_PROCS[base] = proc
            yield base
        finally:
            _SERVER_LOGS.pop(base, None)
            SERVER_PROCS.pop(base, None)
            _stop(proc)


@pytest.fixture(scope="module")
def server(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for the module's tests."""
    with serve(tmp_path_factory.mktemp("streamlit")) as base:
        yield base


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    """A fresh browser context and page per test, with generous but bounded timeouts."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(APP_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def _shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "page"


def _wait_idle(page: Page) -> None:
    """Wait until the script has finished its run (the status widget shows no running state)."""
    expect(page.locator('[data-testid="stApp"]')).to_have_attribute(
        "data-test-script-state", "notRunning", timeout=APP_TIMEOUT_MS)
    expect(page.locator('[data-testid="stStatusWidget"]')
           .filter(has_text=re.compile("running", re.IGNORECASE))).to_have_count(0)


def _assert_no_exception(page: Page) -> None:
    """No exception box; on failure, say what the server logged (the page shows no details)."""
    # with client.showErrorDetails = "none" an uncaught error shows only a redacted notice
    shown = page.locator(EXCEPTION).count() + page.get_by_text(REDACTED_ERROR).count()
    if shown:
        origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(page.url))
        log = _SERVER_LOGS.get(origin)
        tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else "(no log)"
        raise AssertionError(f"{page.url} shows an exception; the server's log ends with:\n"
                             f"{tail}")


def _open_explorer(page: Page, base: str, query: str = "") -> None:
    page.goto(f"{base}/explorer{query}")
    expect(page.locator(CHARTS).nth(2)).to_be_visible(timeout=APP_TIMEOUT_MS)
    _wait_idle(page)


def _norm_option(page: Page, name: str):
    """One option of the Normalization segmented control (its buttons have role radio)."""
    return (page.get_by_role("radiogroup", name="Normalization")
            .get_by_role("radio", name=name, exact=True))


def chart_title(page: Page, title: str):
    """A Plotly chart's (sub)title: SVG text inside the chart, not the same words that label
    the figure's data table behind its expander. A title wrapped onto two lines (narrow
    panels) reads as its lines run together, so the words may meet without a space."""
    words = r"\s*".join(re.escape(word) for word in title.split())
    return page.locator(".js-plotly-plot text", has_text=re.compile(words))


def _open_from_navigation(page: Page, number: int, href: str | None) -> None:
    """Click the navigation's link ``number``; wait for its page's run; check it for errors."""
    link = page.locator(NAV_LINKS).nth(number)
    page.evaluate(_WATCH_RUNS)
    link.click()
    if href:
        expect(page).to_have_url(re.compile(re.escape(href.rstrip("/")) + r"/?(\?.*)?$"))
    expect(link).to_have_attribute("aria-current", "page")
    # the click started a run of the page's script, and that run has finished
    page.wait_for_function(_RAN_SINCE_WATCH, polling=100, timeout=PAGE_RUN_TIMEOUT_MS)
    title = page.locator(TITLE).first
    expect(title).to_be_visible()
    expect(title).not_to_have_text(re.compile(r"^\s*$"))
    _assert_no_exception(page)


def test_every_page_opens_from_the_navigation(page: Page, server: str) -> None:
    page.goto(server)
    links = page.locator(NAV_LINKS)
    expect(links.first).to_be_visible(timeout=APP_TIMEOUT_MS)
    expect(page.locator(TITLE).first).to_be_visible(timeout=APP_TIMEOUT_MS)
    _wait_idle(page)
    targets = [(links.nth(i).get_attribute("href"), links.nth(i).inner_text().split("\n")[-1])
               for i in range(links.count())]
    assert len(targets) >= 2, f"expected the navigation to list every page, got {targets}"

    # the default page (first link) is open already: visit it last, so every click changes page
    for number in [*range(1, len(targets)), 0]:
        href, label = targets[number]
        name = f"nav-{number:02d}-{_slug(label)}"
        started = time.monotonic()
        try:
            _open_from_navigation(page, number, href)
            if number == 0 or label == "Home":  # the home page shows the formula
                expect(page.locator(".katex").first).to_be_visible()
        except (AssertionError, PlaywrightError) as err:
            _shot(page, f"{name}-FAILED")
            raise AssertionError(f"page {label!r} ({href}) from the navigation: {err}\n"
                                 f"script runs: {page.evaluate(_RUN_REPORT)}") from err
        _shot(page, name)
        print(f"{label}: {time.monotonic() - started:.1f} s")


def test_explorer_renders_charts(page: Page, server: str) -> None:
    _open_explorer(page, server)
    charts = page.locator(CHARTS)
    assert charts.count() >= 3
    expect(page.locator(f"{CHARTS} .js-plotly-plot").nth(2)).to_be_visible()
    expect(page.get_by_text(CHECK_BADGE)).to_be_visible()
    expect(page.locator(ALERT).filter(has_text=CHECK_BADGE).first).to_be_visible()
    _assert_no_exception(page)
    _shot(page, "explorer-default")


def test_switching_between_batchnorm_and_layernorm(page: Page, server: str) -> None:
    _open_explorer(page, server)
    captions = page.locator('[data-testid="stCaptionContainer"]')
    expect(_norm_option(page, "LayerNorm")).to_be_checked()

    _norm_option(page, "BatchNorm").click()
    expect(chart_title(page, "output y (BatchNorm)")).to_be_visible()
    expect(page).to_have_url(re.compile(r"[?&]norm=BatchNorm(&|$)"))
    expect(_norm_option(page, "BatchNorm")).to_be_checked()
    expect(captions.filter(has_text="BatchNorm: one μ, σ per feature")).to_be_visible()
    expect(chart_title(page, "output y (LayerNorm)")).to_have_count(0)
    _wait_idle(page)
    _assert_no_exception(page)
    expect(page.get_by_text(CHECK_BADGE)).to_be_visible()
    _shot(page, "explorer-batchnorm")

    _norm_option(page, "LayerNorm").click()
    expect(chart_title(page, "output y (LayerNorm)")).to_be_visible()
    expect(_norm_option(page, "LayerNorm")).to_be_checked()
    expect(captions.filter(has_text="LayerNorm: one μ, σ per position")).to_be_visible()
    expect(captions.filter(has_text="BatchNorm: one μ, σ per feature")).to_have_count(0)
    expect(chart_title(page, "output y (BatchNorm)")).to_have_count(0)
    _wait_idle(page)
    _assert_no_exception(page)
    _shot(page, "explorer-layernorm")


def test_upload_npy_through_the_dropzone(page: Page, server: str, tmp_path: Path) -> None:
    good = tmp_path / "acts.npy"
    np.save(good, (np.arange(30, dtype=np.float32).reshape(6, 5) - 14.5) / 4)
    bad = tmp_path / "bad.npy"
    # junk: random bytes behind a prefix that is neither .npy, zip (.npz) nor pickle magic
    bad.write_bytes(b"junk" + np.random.default_rng(0).bytes(252))

    page.goto(f"{server}/explorer")
    sources = page.get_by_role("radiogroup", name="Data source")
    expect(sources).to_be_visible(timeout=APP_TIMEOUT_MS)
    _wait_idle(page)
    sources.get_by_role("radio", name="Upload a file", exact=True).click()
    dropzone = page.locator('[data-testid="stFileUploaderDropzoneInput"], '
                            '[data-testid="stFileUploader"] input[type=file]').first
    expect(dropzone).to_be_attached()
    expect(page.locator(ALERT).filter(
        has_text="Upload a .npy, .npz, .safetensors, .pt or .pth file")).to_be_visible()
    expect(page.locator(CHARTS)).to_have_count(0)  # no data yet: the page waits for a file
    _wait_idle(page)
    _shot(page, "upload-empty")

    dropzone.set_input_files(str(good))
    expect(page.get_by_text("Tensor (6, 5) in layout NC")).to_be_visible()
    expect(page.locator(CHARTS).nth(2)).to_be_visible()
    expect(page.get_by_text(CHECK_BADGE)).to_be_visible()
    _wait_idle(page)
    _assert_no_exception(page)
    _shot(page, "upload-good")

    dropzone.set_input_files(str(bad))
    error = page.locator(ALERT).filter(has_text="not a .npy or .npz file")
    expect(error.first).to_be_visible()
    expect(page.locator(CHARTS)).to_have_count(0)
    _wait_idle(page)
    _assert_no_exception(page)
    _shot(page, "upload-bad")


def test_url_restores_the_settings(page: Page, server: str) -> None:
    # ε is bound by its slider's label: the URL the app writes for ε = 0.001 says eps=1e-3
    _open_explorer(page, server, "?norm=RMSNorm&eps=1e-3")
    expect(chart_title(page, "output y (RMSNorm)")).to_be_visible()
    expect(_norm_option(page, "RMSNorm")).to_be_checked()
    expect(_norm_option(page, "LayerNorm")).not_to_be_checked()
    expect(page.locator('[data-testid="stCaptionContainer"]')
           .filter(has_text="RMSNorm: LayerNorm without subtracting μ")).to_be_visible()
    expect(page.get_by_text("RMSNorm has no β.")).to_be_visible()
    thumbs = page.locator('[data-testid="stSliderThumbValue"]')
    expect(thumbs.filter(has_text=re.compile(r"^1e-3$"))).to_have_count(1)
    expect(page.locator('[data-testid="stCode"]')
           .filter(has_text="F.rms_norm(")).to_contain_text("eps=0.001")
    expect(page).to_have_url(re.compile(r"[?&]norm=RMSNorm(&|$)"))
    expect(page).to_have_url(re.compile(r"[?&]eps=1e-3(&|$)"))
    _assert_no_exception(page)
    _shot(page, "explorer-url-rmsnorm")


#: What has the keyboard focus: its role, accessible label, text, and the group it sits in.
_FOCUSED = """() => {
  const e = document.activeElement;
  if (!e) return {};
  const group = e.closest('[role=radiogroup]');
  return {tag: e.tagName, role: e.getAttribute('role') || '', label: e.getAttribute('aria-label')
          || '', text: (e.innerText || '').trim(), group: group ? group.getAttribute('aria-label')
          : '', testid: e.getAttribute('data-testid') || ''};
}"""


def _tab_to(page: Page, wanted, what: str, limit: int = 150) -> dict:
    """Press Tab (only) until ``wanted(focused)`` holds; the focused element's description."""
    seen = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.evaluate(_FOCUSED)
        if wanted(focused):
            return focused
        seen.append(f"{focused.get('tag')}:{focused.get('label') or focused.get('text')[:20]}")
    raise AssertionError(f"{what} not reached with {limit} Tabs; focus went {seen[-40:]}")


def test_the_explorer_works_with_the_keyboard_alone(page: Page, server: str) -> None:
    """Navigation, a choice, a slider and a figure's data table, without touching the mouse."""
    page.goto(server)
    expect(page.locator(TITLE)).to_be_visible(timeout=APP_TIMEOUT_MS)
    _wait_idle(page)

    _tab_to(page, lambda f: f["testid"] == "stSidebarNavLink" and f["text"].endswith("Explorer"),
            "the Explorer's navigation link")
    page.evaluate(_WATCH_RUNS)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/explorer/?(\?.*)?$"))
    expect(page.locator(CHARTS).nth(2)).to_be_visible(timeout=APP_TIMEOUT_MS)
    _wait_idle(page)

    # the Normalization choice is one tab stop; arrow keys move within it, Space picks
    focused = _tab_to(page, lambda f: f["role"] == "radio" and f["group"] == "Normalization",
                      "the Normalization choice")
    for _ in range(6):
        if focused["text"] == "BatchNorm":
            break
        page.keyboard.press("ArrowRight")
        focused = page.evaluate(_FOCUSED)
    assert focused["text"] == "BatchNorm", focused
    page.keyboard.press("Space")
    expect(chart_title(page, "output y (BatchNorm)")).to_be_visible()
    expect(_norm_option(page, "BatchNorm")).to_be_checked()
    _wait_idle(page)

    _tab_to(page, lambda f: f["label"] == "γ (scale)", "the γ slider")
    page.keyboard.press("ArrowRight")
    expect(page).to_have_url(re.compile(r"[?&]gamma=1\.1(&|$)"))
    expect(page.locator('[data-testid="stSliderThumbValue"]')
           .filter(has_text=re.compile(r"^1\.10$"))).to_have_count(1)
    _wait_idle(page)

    _tab_to(page, lambda f: f["tag"] == "SUMMARY" and "Data behind this figure" in f["text"],
            "a figure's data expander")
    page.keyboard.press("Enter")
    table = page.locator('[data-testid="stExpander"] [data-testid="stDataFrame"]').first
    expect(table).to_be_visible(timeout=APP_TIMEOUT_MS)
    _wait_idle(page)
    _assert_no_exception(page)
    _shot(page, "explorer-keyboard")


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
            expect(editor).to_be_visible(timeout=5_000)
            break
        except AssertionError:
            page.keyboard.press("Escape")
    expect(editor).to_be_visible()
    expect(editor).to_be_focused()
    page.evaluate(_WATCH_RUNS)
    editor.press("Control+a")
    editor.press_sequentially(text, delay=50)
    expect(editor).to_have_value(text)
    editor.press("Enter")
    page.wait_for_function(_RAN_SINCE_WATCH, polling=100, timeout=PAGE_RUN_TIMEOUT_MS)


def test_scientific_notation_in_the_per_feature_table(page: Page, server: str) -> None:
    """Issue 11 (12): typing 1e-3 into a γ cell stored −13 (the grid's number cell dropped the
    "e"). The cell is read as text by lnviz now: the worked example must show γ = 0.001."""
    _open_explorer(page, server, "?affine=per+feature")
    type_first_gamma(page, "1e-3")
    _assert_no_exception(page)
    tex = [a.text_content() or "" for a in
           page.locator('annotation[encoding="application/x-tex"]').all()]
    assert any(r"= 0.001 \cdot" in t for t in tex), tex
    _shot(page, "explorer-table-scientific")


#: What the sidebar and the main area show, sampled while a cold server answers a first visit.
_FIRST_VISIT = """() => {
  const nav = Array.from(document.querySelectorAll('[data-testid="stSidebarNavLink"]'))
    .map(a => a.innerText.replace(/^[a-z_]+\\n/, '').trim());
  const main = document.querySelector('[data-testid="stMain"]');
  const title = document.querySelector('[data-testid="stMain"] h1');
  return {nav, main: main ? main.innerText : '', title: title ? title.innerText : ''};
}"""


def test_first_visit_to_a_cold_server(browser: Browser, tmp_path: Path) -> None:
    """Issue 11 (20): a first visit after a server start showed the pages' raw file names in
    the sidebar (Streamlit's legacy pages/ folder) and a blank main area for seconds."""
    from lnviz.ui.pages import PAGES

    titles = {p.title for pages in PAGES.values() for p in pages}
    with serve(tmp_path) as base:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            page = context.new_page()
            page.goto(f"{base}/explorer", wait_until="commit")
            samples = []
            deadline = time.monotonic() + APP_TIMEOUT_MS / 1000
            while time.monotonic() < deadline:
                samples.append(page.evaluate(_FIRST_VISIT))
                if samples[-1]["title"] == "Explorer":
                    break
                page.wait_for_timeout(100)
            assert samples[-1]["title"] == "Explorer", samples[-1]
            navs = [s["nav"] for s in samples if s["nav"]]
            assert navs and all(set(nav) <= titles for nav in navs), navs[0]
            # before the page's own content, the cold start says what it is doing
            early = [s["main"] for s in samples if s["nav"] and not s["title"]]
            assert any("Starting lnviz" in text for text in early), early
            _wait_idle(page)
            assert "Starting lnviz" not in page.locator("[data-testid=stMain]").inner_text()
        finally:
            context.close()
