"""End to end on the LN-LSTM page: two learners' large trainings share the one heavy-job place,
leaving a page ends its training, Stop ends one promptly, and the server goes quiet.

Uses the server, browser, page and second_page fixtures of tests/conftest.py.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

import pytest
from browserutil import (
    ALERT,
    SERVER_PROCS,
    TIMEOUT_MS,
    assert_no_exception,
    shot,
    to_front,
    wait_idle,
)

from lnviz.ui.jobs import CHUNK_SECONDS

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails) the test
    expect = None

pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads the server's CPU time from /proc")]

#: The largest settings the page allows (full limits), with all three models: each chunk of the
#: old page took eval_every = 167 steps of every model before it looked at Stop again.
LARGE = ("tr_models=LSTM&tr_models=LN-LSTM&tr_models=BN-LSTM&tr_hidden=256&tr_batch=256"
         "&tr_steps=5000")
#: The first learner's training, which only has to hold the heavy-job place meanwhile: one model
#: (the plain LSTM, the cheapest of the three) at the same size instead of three, still minutes
#: from its end.
FIRST = "tr_models=LSTM&tr_hidden=256&tr_batch=256&tr_steps=5000"
#: The server counts as quiet when it uses less than half a CPU-second in a 3 s window (training
#: three models keeps both cores busy, 2 CPU-seconds a second); it must get there within 30 s.
QUIET_WINDOW_S = 3.0
QUIET_WITHIN_S = 30.0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads together (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_quiet(base: str) -> tuple[float, float]:
    """Wait until the server at ``base`` is quiet: (seconds waited, CPU-seconds of its last
    window)."""
    pid, start = SERVER_PROCS[base].pid, time.monotonic()
    while True:
        before = _cpu_seconds(pid)
        time.sleep(QUIET_WINDOW_S)
        busy = _cpu_seconds(pid) - before
        waited = time.monotonic() - start
        if busy < 0.5 * QUIET_WINDOW_S or waited > QUIET_WITHIN_S:
            return waited, busy


def _start_large_run(tab, base: str, query: str) -> tuple[float, float]:
    """Open the page at large settings (``query``: H and batch at 256, 5000 steps) and press
    Run: the seconds to the first step shown, and when it was shown (``time.monotonic``)."""
    tab.goto(f"{base}/ln_lstm?{query}")
    run = tab.get_by_role("button", name="Run", exact=True)
    expect(run).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(tab)
    thumbs = tab.locator('[data-testid="stSliderThumbValue"]')
    expect(thumbs.filter(has_text=re.compile(r"^256$"))).to_have_count(2)  # H and batch
    clicked = time.monotonic()
    run.click()
    progress = tab.locator('[data-testid="stProgress"]')
    expect(progress.filter(has_text=re.compile(r"Step [1-9]\d* of 5000"))).to_be_visible(
        timeout=TIMEOUT_MS)
    return time.monotonic() - clicked, time.monotonic()


def _step_shown(text: str) -> int:
    match = re.search(r"Step (\d+) of 5000", text)
    assert match, f"no 'Step … of 5000' in {text!r}"
    return int(match.group(1))


def test_a_training_waits_its_turn_ends_with_its_tab_and_stops_on_request(
        page, second_page, server: str) -> None:
    """The tests' servers run one heavy job at a time (LNVIZ_HEAVY_JOBS=1, tests/conftest.py,
    as the demo does): a second learner's training waits in line and says so with its place;
    when the first learner leaves, their training ends and the second one starts; Stop ends
    that one within its chunk, and then nothing trains behind the pages (one test, two
    trainings: each of the three it once was started its own). The first learner is the
    worker's second reused tab (tests/conftest.py's ``second_page``), and leaves by going to
    about:blank, which ends their session on the server as closing the tab does."""
    first = second_page
    try:
        first_progress, first_shown = _start_large_run(first, server, FIRST)
        page.goto(f"{server}/ln_lstm?{LARGE}")
        run = page.get_by_role("button", name="Run", exact=True)
        expect(run).to_be_visible(timeout=TIMEOUT_MS)
        wait_idle(page)
        run.click()
        progress = page.locator('[data-testid="stProgress"]')
        waiting = progress.filter(has_text=re.compile(
            r"Waiting for the server: your training starts after 1 other learner's job in "
            r"line"))
        expect(waiting).to_be_visible(timeout=TIMEOUT_MS)
        shot(page, "training-waits-its-turn")
        # a click elsewhere on the page (here the sidebar's seed) starts the next run at once,
        # while this one waits: the next run takes the job and its place over
        seed = page.locator('[data-testid="stSidebar"] [data-testid="stNumberInput"] input')
        seed.first.fill("5")
        seed.first.press("Enter")
        expect(page).to_have_url(re.compile(r"[?&]seed=5"), timeout=TIMEOUT_MS)
        page.wait_for_timeout(1500)  # three looks at the line later (jobs.WAIT_POLL_S)
        expect(waiting).to_be_visible(timeout=TIMEOUT_MS)
        assert_no_exception(page)
        # the first learner's training goes on meanwhile, and this one has not started
        first_bar = first.locator('[data-testid="stProgress"]').filter(
            has_text=re.compile(r"Step \d+ of 5000"))
        expect(first_bar).to_be_visible()
        assert waiting.count() == 1
        # its pace bounds the second's, whose steps train three models of the same size: how
        # many steps a chunk of the second training can hold on this machine
        pace = (_step_shown(first_bar.inner_text()) - 1) / (time.monotonic() - first_shown)
        chunk_steps = max(1, math.ceil(pace * CHUNK_SECONDS))
    finally:
        first.goto("about:blank")  # the first learner leaves: their training ends, the second
        # one starts
        to_front(page)
    closed = time.monotonic()
    started = progress.filter(has_text=re.compile(r"Step [1-9]\d* of 5000"))
    expect(started).to_be_visible(timeout=TIMEOUT_MS)
    to_start = time.monotonic() - closed
    step_at_stop = _step_shown(started.inner_text())
    clicked = time.monotonic()
    page.get_by_role("button", name="Stop training", exact=True).click()
    stopped = page.locator(ALERT).filter(has_text=re.compile(r"Stopped after \d+ of 5000 steps"))
    try:
        expect(stopped).to_be_visible(timeout=TIMEOUT_MS)
    except AssertionError:
        shot(page, "training-stop-FAILED")
        raise
    to_stopped = time.monotonic() - clicked
    wait_idle(page)
    assert_no_exception(page)
    shot(page, "training-stopped")
    steps_done = int(re.search(r"Stopped after (\d+)", stopped.inner_text()).group(1))
    # within the chunk Stop came in, and the one the page had not shown yet, counted in the
    # first training's chunks, which hold at least as many steps as this one's (a Stop that
    # took effect 15 s late still passed a bound of the 5000 steps)
    assert step_at_stop <= steps_done <= step_at_stop + 2 * chunk_steps + 1, (
        f"Stop at step {step_at_stop}, stopped after {steps_done}; chunks of at most "
        f"{chunk_steps} step(s) here")
    # the live progress bar is gone: no run is training
    expect(page.locator('[data-testid="stProgress"]')).to_have_count(0)

    # nothing trains on behind the pages: neither the stopped run nor the one left behind
    waited, busy = _wait_quiet(server)
    print(f"first progress {first_progress:.1f} s; the second training started "
          f"{to_start:.1f} s after the first learner left; Stop at step {step_at_stop} -> "
          f"stopped after {steps_done} steps in {to_stopped:.1f} s (chunks of at most "
          f"{chunk_steps} step(s)); server quiet "
          f"{waited:.1f} s later")
    assert busy < 0.5 * QUIET_WINDOW_S, f"the server still uses {busy:.1f} CPU-s every 3 s " \
                                        f"{waited:.0f} s after the stop"
