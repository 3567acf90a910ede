"""End to end on the LN-LSTM page: Stop ends a long training promptly, and the server goes quiet.

Reuses the server, browser and page fixtures of ``test_browser`` (a ``streamlit run app.py`` of
its own for this module, driven by headless Chromium).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from test_browser import (  # noqa: F401  (fixtures are found by name)
    ALERT,
    APP_TIMEOUT_MS,
    SERVER_PROCS,
    _assert_no_exception,
    _shot,
    _wait_idle,
    browser,
    page,
    server,
)

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails) the test
    expect = None

pytestmark = pytest.mark.browser

#: The largest settings the page allows (full limits), with all three models: each chunk of the
#: old page took eval_every = 167 steps of every model before it looked at Stop again.
LARGE = ("tr_models=LSTM&tr_models=LN-LSTM&tr_models=BN-LSTM&tr_hidden=256&tr_batch=256"
         "&tr_steps=5000")
#: Generous bounds: what they catch is a page that steps on for minutes (as it did), not a slow
#: machine. The measured times are printed.
FIRST_PROGRESS_TIMEOUT_MS = 30_000
STOP_TIMEOUT_MS = 30_000
#: After the stopped page shows, the server may finish the run's last drawing; then it is idle.
QUIET_AFTER_S = 2.0
QUIET_WINDOW_S = 3.0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads together (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _step_shown(text: str) -> int:
    match = re.search(r"Step (\d+) of 5000", text)
    assert match, f"no 'Step … of 5000' in {text!r}"
    return int(match.group(1))


def test_stop_ends_a_large_training_and_the_server_goes_quiet(
        page, server: str) -> None:  # noqa: F811 (the imported fixtures)
    if not Path("/proc/self/stat").exists():
        pytest.skip("reads the server's CPU time from /proc")
    page.goto(f"{server}/training?{LARGE}")
    run = page.get_by_role("button", name="Run", exact=True)
    stop = page.get_by_role("button", name="Stop training", exact=True)
    expect(run).to_be_visible(timeout=APP_TIMEOUT_MS)
    _wait_idle(page)
    thumbs = page.locator('[data-testid="stSliderThumbValue"]')
    expect(thumbs.filter(has_text=re.compile(r"^256$"))).to_have_count(2)  # H and batch

    clicked = time.monotonic()
    run.click()
    progress = page.locator('[data-testid="stProgress"]')
    expect(progress.filter(has_text=re.compile(r"Step [1-9]\d* of 5000"))).to_be_visible(
        timeout=FIRST_PROGRESS_TIMEOUT_MS)
    first_progress = time.monotonic() - clicked
    page.wait_for_timeout(2000)  # let it train a little further
    step_at_stop = _step_shown(progress.inner_text())

    clicked = time.monotonic()
    stop.click()
    stopped = page.locator(ALERT).filter(has_text=re.compile(r"Stopped after \d+ of 5000 steps"))
    try:
        expect(stopped).to_be_visible(timeout=STOP_TIMEOUT_MS)
    except AssertionError:
        _shot(page, "training-stop-FAILED")
        raise
    to_stopped = time.monotonic() - clicked
    _wait_idle(page)
    _assert_no_exception(page)
    _shot(page, "training-stopped")
    steps_done = int(re.search(r"Stopped after (\d+)", stopped.inner_text()).group(1))
    assert step_at_stop <= steps_done < 5000
    expect(progress).to_have_count(0)  # the live progress bar is gone: no run is training

    # Nothing trains on behind the page: the interrupted run ended too, so the server's CPU
    # time hardly grows (training three models keeps both cores busy, 2 CPU-seconds a second).
    pid = SERVER_PROCS[server].pid
    time.sleep(QUIET_AFTER_S)
    before = _cpu_seconds(pid)
    time.sleep(QUIET_WINDOW_S)
    busy = _cpu_seconds(pid) - before
    print(f"first progress {first_progress:.1f} s; Stop at step {step_at_stop} -> stopped "
          f"after {steps_done} steps in {to_stopped:.1f} s; server CPU afterwards "
          f"{busy:.2f} s in {QUIET_WINDOW_S:.0f} s")
    assert busy < 0.5 * QUIET_WINDOW_S, f"the server used {busy:.1f} s of CPU after Stop"
