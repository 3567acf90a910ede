"""Does a light page stay quick while two learners run the heaviest job? The server's one line
for heavy work (lnviz.ui.jobs), measured.

    python tools/queue_bench.py [--page /epsilon] [--loads 3] [--full]

Starts ``streamlit run app.py`` (the demo's limits, LNVIZ_DEMO=1: one heavy job at a time,
unless --full) on a free local port and one headless Chromium. A first tab opens the light
page and Inside a real LLM once (the model loads). Then:

1. **quiet**: the light page is loaded ``--loads`` times in a new tab each, timed from the
   navigation to the page drawn (its script run over, its figures on screen);
2. **busy**: two tabs open Inside a real LLM with part 4 open on a prompt near the demo's cap
   and press "Break each norm in turn" (the heaviest job: 248 runs of the model); the second
   waits in line, and what it shows is printed. While the first sweep runs, the light page is
   loaded ``--loads`` times again.

Prints the median load time of each, their ratio (issue 42's target: within 2×), and the time
the sweeps took. docs/benchmarks.md records the numbers.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Inside a real LLM's sweep button ("Break each norm in turn: removed").
SWEEP_BUTTON = re.compile(r"^Break each norm in turn")
sys.path.insert(0, str(ROOT))

from tools.localserver import CHROMIUM_ARGS, served  # noqa: E402

TIMEOUT_MS = 600_000
IDLE = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-stale="true"]')
    && document.querySelectorAll('[data-testid="stPlotlyChart"], .lv-figure').length > 0;
}"""
#: Inside a real LLM, part 4 open, with a prompt near the demo's cap for the sweep (64 tokens):
#: one-digit words, two tokens each (the space, the digit), so the heaviest sweep it allows.
SWEEP = "/smollm2?sl_part4=true&sl_text=" + "+".join(str(k % 10) for k in range(30))


def load_s(context, url: str) -> float:
    tab = context.new_page()
    try:
        started = time.monotonic()
        tab.goto(url)
        tab.wait_for_function(IDLE, timeout=TIMEOUT_MS, polling=100)
        return time.monotonic() - started
    finally:
        tab.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", default="/epsilon", help="the light page (default /epsilon)")
    parser.add_argument("--loads", type=int, default=3, help="loads of it, quiet and busy")
    parser.add_argument("--full", action="store_true", help="the laptop's limits")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with served(demo=not args.full) as (base, _), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.set_default_timeout(TIMEOUT_MS)
        load_s(context, base + args.page)
        load_s(context, base + SWEEP)
        quiet = [load_s(context, base + args.page) for _ in range(args.loads)]
        print(f"quiet: {args.page} drawn in " + ", ".join(f"{t:.1f}" for t in quiet)
              + " s", flush=True)
        tabs = []
        for _ in range(2):  # both opened first, then both buttons pressed one after the other
            tab = context.new_page()
            tab.goto(base + SWEEP)
            tab.get_by_role("button", name=SWEEP_BUTTON).wait_for()
            tab.wait_for_function(IDLE, timeout=TIMEOUT_MS)
            tabs.append(tab)
        sweeps = []
        for tab in tabs:
            tab.get_by_role("button", name=SWEEP_BUTTON).click()
            sweeps.append((tab, time.monotonic()))
        waiting = sweeps[1][0].get_by_text("Waiting for the server")
        try:
            waiting.wait_for(timeout=60_000)
        except Exception:
            for k, (tab, _) in enumerate(sweeps):
                tab.screenshot(path=f"/tmp/queue_tab{k}.png", full_page=True)
            raise
        print(f"the second learner reads: {waiting.inner_text()!r}", flush=True)
        busy = [load_s(context, base + args.page) for _ in range(args.loads)]
        print(f"busy: {args.page} drawn in " + ", ".join(f"{t:.1f}" for t in busy) + " s",
              flush=True)
        for tab, started in sweeps:
            tab.get_by_text("Removing one norm keeps").wait_for(timeout=TIMEOUT_MS)
            print(f"a sweep done {time.monotonic() - started:.0f} s after its click",
                  flush=True)
        ratio = statistics.median(busy) / statistics.median(quiet)
        print(f"median {statistics.median(quiet):.1f} s quiet, {statistics.median(busy):.1f}"
              f" s busy: {ratio:.2f}×", flush=True)
        browser.close()


if __name__ == "__main__":
    main()
