"""Shared test setup: which devices to test on, skipping what this machine cannot run, and the
browser tests' Chromium, server and timeout (tests/browserutil.py has their helpers)."""

from __future__ import annotations

import functools
import inspect
import os
import re
import shutil
from collections.abc import Callable, Iterator

import pytest

# One OpenMP thread per test process unless the environment says otherwise. The suite runs two
# workers, each with its own app server, on a 2-core machine: torch's default of one thread per
# core in each of them oversubscribes the cores, and OpenMP's idle threads spin while they wait
# (measured: 520 s for the suite against 567–593 s, and 2 minutes less CPU; docs/benchmarks.md
# §9). Set before torch is imported, and inherited by the app servers the tests start. CI runs
# the numeric tests once more with two threads (.ci/run).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The app servers the tests start run one heavy job at a time, as the demo does
# (lnviz.ui.jobs): test_browser_ln_lstm checks that a second training waits its turn.
os.environ.setdefault("LNVIZ_HEAVY_JOBS", "1")
# The app's collector of closed sessions' reference cycles (lnviz.ui.memory) runs a full
# collection every 15 s. A test process holds far more objects than a server (transformers,
# hypothesis, a test module's fixtures): each collection took about 0.5 s there, 16 CPU-s per
# worker over a run, to free sessions that end with the process anyway. The app servers the tests
# start inherit it too; tests/test_browser_memory.py starts its own with a 2 s interval, and
# tests/test_memory.py checks the collector itself.
os.environ.setdefault("LNVIZ_GC_EVERY_S", "600")

import torch

from lnviz.devices import available_devices

# Without a CUDA GPU, lnviz's Triton kernels (impl="fused") are checked under Triton's
# interpreter, on CPU tensors; Triton reads this when lnviz.fused builds the kernels.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _scan_manifests_once() -> None:
    """Every new ``AppTest`` scans all installed packages' metadata for components-v2 manifests
    before its first run: 0.3 s here, for the thousand-odd AppTests of the suite (none finds
    one: lnviz's live panels are inline components). Nothing is installed while the tests run,
    so one scan per test process answers for all. The scanner is Streamlit's internal; if it
    moves, AppTest scans as before, only slower."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:
        return
    scan = getattr(manifest_scanner, "scan_component_manifests", None)
    if scan is not None and not hasattr(scan, "cache_info"):
        manifest_scanner.scan_component_manifests = functools.cache(scan)


_scan_manifests_once()


def _compile_scripts_once() -> None:
    """AppTest compiles app.py and the page it runs afresh on every run (a new script cache
    each time, magic's rewriting of the syntax tree included): 11.8 s of a run of the tests
    without a browser in one process. The app's scripts do not change while the tests run, and
    the cache is keyed by the script's path (a test's own script has a path of its own), so one
    cache per test process answers for all, as one does in a server. The cache is Streamlit's
    internal; if it moves, AppTest compiles as before, only slower."""
    try:
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache
        from streamlit.testing.v1 import app_test
    except ImportError:
        return
    if getattr(app_test, "ScriptCache", None) is ScriptCache:
        cache = ScriptCache()
        app_test.ScriptCache = lambda: cache


def _wait_for_runs_without_spinning() -> None:
    """AppTest waits for a run to end by waking every millisecond to look: that thread took
    the interpreter's lock from the script it waits for about a thousand times a second (17.6 s
    of a run of the tests without a browser in one process, and the script's own time with it).
    The run's thread ends when the run does, so waiting for the thread to end wakes once. The
    waiting function and the runner's thread are Streamlit's internals; without them AppTest
    waits as before, only slower."""
    try:
        from streamlit.testing.v1 import local_script_runner
    except ImportError:
        return
    spinning = getattr(local_script_runner, "require_widgets_deltas", None)
    if spinning is None or getattr(spinning, "joins", False):
        return

    def require_widgets_deltas(runner, timeout: float = 3) -> None:
        thread = getattr(runner, "_script_thread", None)
        if thread is None:
            return spinning(runner, timeout)
        thread.join(timeout)
        if thread.is_alive():  # as AppTest does: stop the script, then say so
            runner.request_stop()
            runner.join()
            raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")
        spinning(runner, 0.5)  # the run has ended and said so: this looks once

    require_widgets_deltas.joins = True
    local_script_runner.require_widgets_deltas = require_widgets_deltas


_compile_scripts_once()
_wait_for_runs_without_spinning()

try:
    from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright
except ImportError:  # the ``browser`` fixture skips (or fails) the browser tests
    sync_playwright = None

#: The one timeout of every browser wait (ms): a page's first run on a busy 2-core machine
#: (torch imported, a model loaded, a first training step taken) takes tens of seconds, and a
#: wait that runs out on a busy day is a failure nobody can act on. Playwright's own default
#: (5 s) is replaced by it for every ``expect`` and every action.
TIMEOUT_MS = 120_000
#: The browser tests' desktop window: a common laptop's. Chromium draws in software here, and
#: the pixels it paints are much of a page load's cost: 1280 × 800 took about 17 % less of
#: Chromium's CPU than 1400 × 1000 over the same five page loads (docs/benchmarks.md §7).
DESKTOP_VIEWPORT = {"width": 1280, "height": 800}
if sync_playwright is not None:
    expect.set_options(timeout=TIMEOUT_MS)

GPU_DEVICES = [d for d in available_devices() if d != "cpu"]

#: "cpu" always; each accelerator present as a ``gpu``-marked parameter, and a skipped
#: placeholder where there is none, so the report says why no GPU case ran.
DEVICE_PARAMS = ["cpu"] + (
    [pytest.param(d, marks=pytest.mark.gpu, id=d) for d in GPU_DEVICES]
    or [pytest.param("cuda", marks=pytest.mark.gpu, id="cuda")]
)


#: What a test that runs a page through Streamlit's AppTest says in its body: it opens a page
#: (``open_page``, a helper ending in ``_page(``) or reads one (``at.``).
_RUNS_A_PAGE = re.compile(r"\bopen_page\(|_page\(|\bAppTest\b|\bat\.")


@functools.cache
def _body_runs_a_page(function: Callable) -> bool:
    """Whether ``function``'s source runs a page (asked once per test function, not once per
    parameter set: 3,164 items, about 1,000 functions)."""
    try:
        return bool(_RUNS_A_PAGE.search(inspect.getsource(function)))
    except OSError:
        return False


def _runs_a_page(item: pytest.Item) -> bool:
    """A page test: its body runs a page, or it takes a fixture that did (``trained_page``)."""
    function = getattr(item, "function", None)
    if function is None:
        return False
    fixtures = getattr(item, "fixturenames", ())
    return _body_runs_a_page(function) or any(name.endswith("_page") for name in fixtures)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    no_gpu = pytest.mark.skip(reason="no CUDA or MPS device on this machine")
    for item in items:
        if "gpu" in item.keywords and not GPU_DEVICES:
            item.add_marker(no_gpu)
        # page tests take 0.2-10 s each, most of the suite's time without a browser: they are
        # the slow lane, beside the tests marked slow by hand
        if "browser" not in item.keywords and _runs_a_page(item):
            item.add_marker(pytest.mark.slow)
    # Longest first: with two workers taking whole files in collection order (--dist loadfile
    # --no-loadscope-reorder; xdist's own order is by the number of tests in a file, which puts
    # the long browser files last), a long browser file collected last leaves one worker
    # running it alone at the end. The
    # files with browser tests go first, then those with page tests, then the rest, each group
    # in its own order (measured: the fresh suite's tail was minutes of browser files). The
    # browser files that mostly wait (MOSTLY_WAITING) go last of the browser files.
    weight = {}
    for item in items:
        waits = item.nodeid.split("::")[0] in MOSTLY_WAITING
        rank = (0.5 if waits else 0) if "browser" in item.keywords else \
            1 if "slow" in item.keywords else 2
        weight[item.path] = min(weight.get(item.path, 2), rank)
    items.sort(key=lambda item: weight[item.path])


#: Browser files that spend most of their time waiting on the server's clock (a grace period
#: for closed tabs, a place in the heavy-job line given up after jobs.TICKET_TTL_S, a server
#: going quiet). In their places in the alphabet, beside SmolLM2's two sessions and the live
#: panels, the two cores were busy 55-83% for minutes; last of the browser files, the suite
#: took 416 s against 439 (first and last: 427; the LN-LSTM queue after the page tests, where
#: it ended the run: 436; single runs, which vary by about 10 s: docs/benchmarks.md §7).
MOSTLY_WAITING = ("tests/test_browser_memory.py", "tests/test_browser_ln_lstm.py")


#: Tests that load the same large model, run by one worker: each test process that loads Gemma 3
#: pays about 4 s of CPU, SmolLM2 about 1.3, and each app server the same for its pages
#: (docs/benchmarks.md §7). A group is the files named (whole) and the cases of the page-by-page
#: walks on the pages named; every other file is a unit of its own (``--dist loadfile``).
ONE_WORKER: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "the language models": (
        ("tests/test_gemma.py", "tests/test_models_gemma.py", "tests/test_smollm2.py",
         "tests/test_models_llama.py"),
        ("app_pages/gemma.py", "app_pages/smollm2.py")),
    # their server opens every page, and MiniLM's and SmolLM2's for their own journeys
    "the model pages in a browser": (
        ("tests/test_browser.py", "tests/test_browser_models.py",
         "tests/test_browser_smollm2.py", "tests/test_browser_minilm.py"), ()),
}


def work_unit(nodeid: str) -> str:
    """The unit of work a test is handed out in to a worker: its file, or its group of
    :data:`ONE_WORKER`."""
    path = nodeid.split("::", 1)[0]
    for group, (files, pages) in ONE_WORKER.items():
        if path in files or any(f"[{page}" in nodeid for page in pages):
            return group
    return path


@pytest.hookimpl(optionalhook=True)  # xdist's hook: no error where xdist is absent or off
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # -> xdist's scheduler
    """xdist's ``--dist loadfile`` (pyproject.toml's), with the groups of :data:`ONE_WORKER` as
    units; another ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByFileAndModel(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByFileAndModel(config, log)


@pytest.fixture(scope="session", params=DEVICE_PARAMS)
def device(request: pytest.FixtureRequest) -> str:
    """Each device to run a test on: the CPU, and every GPU that is present."""
    return request.param


@pytest.fixture(scope="session")
def shared_smollm2():
    """SmolLM2-135M-Instruct as the app holds it: loaded once per test process (about
    1.3 s here) for every module and page test that reads it."""
    from lnviz.models import smollm2
    from lnviz.ui.cache import shared

    return shared(smollm2)


@pytest.fixture(scope="session")
def shared_gemma3():
    """Gemma 3 270M as the app holds it: loaded once per test process (about 4 s here)."""
    from lnviz.models import gemma3
    from lnviz.ui.cache import shared

    return shared(gemma3)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Headless Debian Chromium through Playwright, one for the whole run."""
    from browserutil import missing

    from tools.localserver import CHROMIUM_ARGS

    if sync_playwright is None:
        missing("the playwright Python package (pip install playwright)")
    executable = shutil.which("chromium")
    if executable is None:
        missing("a `chromium` executable on PATH (apt-get install chromium)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=executable, headless=True,
                                      args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def server(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One ``streamlit run app.py`` for every browser test that needs no special server (a
    test that needs a fresh or differently configured one starts its own with
    ``browserutil.serve``)."""
    from browserutil import serve

    with serve(tmp_path_factory.mktemp("streamlit")) as base:
        yield base


def new_context(browser: Browser, viewport: dict[str, int] | None = None,
                **options) -> BrowserContext:
    """A browser context as every browser test opens one: the desktop's window unless told
    otherwise, the one timeout, and animations asked to stop (``prefers-reduced-motion``).
    Chromium composites in software here, and Streamlit's animations (the running indicator,
    elements fading in) kept its GPU process at about 1.1 CPU-s a page load; with reduced
    motion, 0.15 (docs/benchmarks.md §7). What the tests check is where the page settles, which
    motion does not change."""
    context = browser.new_context(viewport=viewport or DESKTOP_VIEWPORT, reduced_motion="reduce",
                                  **options)
    context.set_default_timeout(TIMEOUT_MS)
    return context


@pytest.fixture(scope="session")
def desktop(browser: Browser) -> Iterator[BrowserContext]:
    """One desktop-sized browser context per worker, whose tab (:class:`Tabs`) the tests open
    their pages in, each page a session of its own; a test that needs a second tab opens it
    here, and the tabs share the browser's cache, so a page's scripts load once (measured: 2.1 s
    to a drawn Explorer in a new tab against 2.8 s in a fresh context; the first page of a
    context costs its renderer about 9 CPU-s here, a later one 4-5). Every page records what
    the server sends (tools/loadtest.py's WebSocket hook: each page its own record, which
    starts afresh with every page the tab opens)."""
    from tools.loadtest import WS_HOOK

    context = new_context(browser)
    context.add_init_script(WS_HOOK)
    try:
        yield context
    finally:
        context.close()


class Tabs:
    """One tab of a context that test after test opens its page in, instead of a new tab each:
    a new tab cost Chromium about 4.5 s of CPU here, as much again as the page it then loaded
    (docs/benchmarks.md §7). Between tests the tab goes to about:blank, which ends the page's
    session on the server as closing the tab did; what a test changed on the tab (routes, the
    window's size, a held mouse button) is undone, and a tab the test closed is replaced."""

    def __init__(self, context: BrowserContext) -> None:
        self.context = context
        self.tab: Page | None = None

    def take(self) -> Page:
        if self.tab is None or self.tab.is_closed():
            self.tab = self.context.new_page()
        return self.tab

    def give_back(self) -> None:
        tab = self.tab
        if tab is None or tab.is_closed():
            return
        try:
            tab.unroute_all()
            tab.mouse.up()
            tab.set_viewport_size(self.context.viewport_size or DESKTOP_VIEWPORT)
            tab.goto("about:blank")
        except Exception:  # a tab left broken: the next test gets a new one
            tab.close()
            self.tab = None


@pytest.fixture(scope="session")
def desktop_tabs(desktop: BrowserContext) -> Tabs:
    return Tabs(desktop)


@pytest.fixture
def page(desktop_tabs: Tabs, server: str) -> Iterator[Page]:
    """A page of its own (a session of its own on the server) per test, in the worker's first
    reused tab."""
    try:
        yield desktop_tabs.take()
    finally:
        desktop_tabs.give_back()


@pytest.fixture(scope="session")
def second_tabs(desktop: BrowserContext) -> Tabs:
    """The worker's second reused tab of the same context, for a test with two tabs open at
    once (a second learner): a new tab cost Chromium about 4.5 CPU-s, a page in a reused one
    about 1.3 (docs/benchmarks.md §7)."""
    return Tabs(desktop)


@pytest.fixture
def second_page(second_tabs: Tabs, server: str) -> Iterator[Page]:
    """A second page at once, a session of its own, in the worker's second reused tab."""
    try:
        yield second_tabs.take()
    finally:
        second_tabs.give_back()
