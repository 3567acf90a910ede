"""Memory that comes back: after every learner has left and Streamlit's grace period for closed
tabs has passed, the server is back within 1.5× of its warmed baseline, and rounds of closed
transformer tabs (whose state sits in reference cycles) add next to nothing.

A real ``streamlit run app.py`` (tests/browserutil.py's ``serve``) with the grace period
``server.disconnectedSessionTTL`` cut to a few seconds. The baseline is the server's RSS after one
learner has opened the pages below and left: everything imported, nobody connected. Then several
learners at once each explore a large random batch (about 60 MB of results per learner) and
upload a file, and leave. Streamlit drops a closed session lazily (at the next write to its
store of closed sessions, when the next tab closes), so the test also checks the RSS after one
more visitor has come and gone. Before lnviz.ui.memory fixed glibc's mmap threshold, the freed
results stayed in the process: 761 MB after, against a baseline of 402 MB (822 MB at the peak).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from browserutil import CHARTS, CHECK_BADGE, SERVER_PROCS, TIMEOUT_MS, serve, wait_idle

from tools.loadtest import tree_rss_mb

try:
    from playwright.sync_api import BrowserContext, Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    BrowserContext = Page = None

pytestmark = pytest.mark.browser

#: Streamlit keeps a closed tab's session this long (s) in case it reconnects (default 120).
GRACE_S = 2
#: Learners at once: two, each holding about 60 MB of results, show what several hold (the
#: assertion asks 8 MB each) at half the page loads of four.
LEARNERS = 2
#: A large random batch: 2,000,000 values (the full limits allow 13,421,772).
BIG = "/explorer?src=Random+batch&rlayout=NC&rn=4000&rc=500"
#: What the warming learner opens: every page the later learners open (BIG is the Explorer), so
#: that the baseline has imported what they use.
PAGES = [BIG, "/minilm"]
#: After everyone has left, the server holds at most this multiple of its warmed baseline.
RATIO = 1.5
#: ... and once a later visitor has come and gone (Streamlit has dropped the expired sessions):
#: the same bar again (measured 1.25× on 2026-11-23, 1.2× before).
REAPED = 1.5
#: Rounds of closed transformer tabs: each closed session kept about 25 MB in reference cycles
#: before the periodic collection (474 → 559 → 645 → 730 MB over three rounds of three), so one
#: round of two shows it (about +57 MB against a margin of 25); the suite's time is better spent
#: elsewhere than on more.
CLOSED_ROUNDS, CLOSED_TABS = 1, 2
#: What those rounds may add to the server once it has settled (MB): without the periodic
#: collection they added 39 MB here (597 → 621, 641, 636 MB), with it none (526 → 481, 484, 479).
CLOSED_MARGIN_MB = 25
#: The rest of each closed tab's sentence (60 words, 60 tokens more).
WORDS = "+words" * 60
#: The server's collection interval here (s), so that each round settles within seconds.
GC_EVERY_S = 2


def _visit(context: BrowserContext, base: str, paths: list[str], upload: Path | None = None):
    """A learner: a tab that opens ``paths`` in turn (and uploads ``upload`` on the Explorer);
    returned still open."""
    return _arrive(_start(context, base, paths[0]), base, paths[1:], upload)


def _start(context: BrowserContext, base: str, path: str) -> Page:
    """A learner's tab, asking for its first page (not waiting for it). Each tab is a session
    of its own on the server, and closing it ends the session as leaving does; the tabs of one
    context share the browser's cache, so that the learners' pages do not each compile the
    app's scripts again (about 5 CPU-s a tab here)."""
    page = context.new_page()
    page.goto(f"{base}{path}", wait_until="commit")
    return page


def _arrive(page: Page, base: str, paths: list[str], upload: Path | None = None) -> Page:
    """Wait for the page a tab asked for, then open ``paths`` in turn (and upload ``upload``
    on the Explorer); the tab, still open."""

    def shown() -> None:
        expect(page.locator('[data-testid="stMain"] h1').first).to_be_visible(
            timeout=TIMEOUT_MS)
        wait_idle(page)

    shown()
    for path in paths:
        page.goto(f"{base}{path}")
        shown()
    if upload is not None:
        page.goto(f"{base}/explorer?src=Upload+a+file")
        page.locator('[data-testid="stFileUploaderDropzoneInput"], '
                     '[data-testid="stFileUploader"] input[type=file]').first.set_input_files(
            str(upload))
        expect(page.locator(CHARTS).nth(2)).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.get_by_text(CHECK_BADGE)).to_be_visible(timeout=TIMEOUT_MS)
        wait_idle(page)
    return page


def _settled_rss(pid: int, ceiling: float, wait_s: float) -> float:
    """The server's RSS once it is at most ``ceiling`` MB, or after ``wait_s`` seconds."""
    end = time.monotonic() + wait_s
    while True:
        rss = tree_rss_mb(pid)
        if rss <= ceiling or time.monotonic() > end:
            return rss
        time.sleep(1)


def test_memory_comes_back_after_everyone_leaves(desktop: BrowserContext, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    upload = tmp_path / "acts.npy"
    np.save(upload, np.random.default_rng(0).standard_normal((1000, 100), dtype=np.float32))
    monkeypatch.setenv("LNVIZ_GC_EVERY_S", str(GC_EVERY_S))  # the server's own collector
    with serve(tmp_path, "--server.disconnectedSessionTTL", str(GRACE_S)) as base:
        pid = SERVER_PROCS[base].pid
        started = tree_rss_mb(pid)
        _visit(desktop, base, PAGES, upload).close()
        time.sleep(GRACE_S + 8)  # the session expires, its results are freed
        baseline = tree_rss_mb(pid)

        # at once, each with their own batch; half of them also upload a file
        opening = [_start(desktop, base, f"{BIG}&seed={i}") for i in range(LEARNERS)]
        learners = [_arrive(tab, base, [], upload if i % 2 else None)
                    for i, tab in enumerate(opening)]
        peak = tree_rss_mb(pid)
        for tab in learners:
            tab.close()
        after = _settled_rss(pid, RATIO * baseline, GRACE_S + 40)
        # Streamlit drops an expired session only at its session store's next write (the next
        # tab to close): until then the closed sessions' state is still in memory, so "after"
        # is an upper bound. A later visitor's leaving lets it go.
        time.sleep(GRACE_S + 1)
        _visit(desktop, base, ["/home"]).close()
        reaped = _settled_rss(pid, REAPED * baseline, 20)
        print(f"server RSS: started {started:.0f} MB, warmed baseline {baseline:.0f} MB, "
              f"{LEARNERS} learners {peak:.0f} MB, after {after:.0f} MB, after a later visitor "
              f"{reaped:.0f} MB")
        assert peak > baseline + 8 * LEARNERS, "the learners' sessions should hold memory"
        assert after <= RATIO * baseline, (
            f"{after:.0f} MB after every learner left, more than {RATIO} × the warmed baseline "
            f"{baseline:.0f} MB (peak {peak:.0f} MB)")
        assert reaped <= REAPED * baseline, (reaped, baseline)

        # Tabs that are closed give back what their state held in reference cycles: with the
        # shipped runner.postScriptGC = false that waited for a full collection that might
        # never come; lnviz.ui.memory's periodic one frees it.
        rounds = []
        for r in range(CLOSED_ROUNDS):
            # each tab with its own sentence, so each session holds results of its own
            tabs = [_arrive(tab, base, []) for tab in [
                _start(desktop, base, f"/minilm?tf_text=Round+{r}+tab+{k}" + WORDS)
                for k in range(CLOSED_TABS)]]
            for tab in tabs:
                tab.close()
            time.sleep(GRACE_S + 1)
            _visit(desktop, base, ["/home"]).close()  # lets Streamlit drop the expired sessions
            rounds.append(_settled_rss(pid, reaped + CLOSED_MARGIN_MB / 2, 4 * GC_EVERY_S + 10))
        print(f"after each round of {CLOSED_TABS} closed transformer tabs: "
              f"{', '.join(f'{r:.0f}' for r in rounds)} MB")
        assert rounds[-1] <= reaped + CLOSED_MARGIN_MB, (reaped, rounds)

