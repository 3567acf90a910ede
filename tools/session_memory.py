"""What one learner's tab keeps in a real server's memory: after two inputs at the caps on each
model page, and after a visit to every page.

    python tools/session_memory.py [--full] [--only pages|every]
                                   [--page beyond|minilm|smollm2|gemma]

Starts ``streamlit run app.py`` (the demo's limits, LNVIZ_DEMO=1, unless --full) on a free
local port and one headless Chromium. A first tab opens every page once, so that the models are
loaded and every module imported; it closes, and after a garbage collection (the server runs
one every 15 s, lnviz.ui.memory) the server's resident size (VmRSS) is the baseline. Then:

- **One page, two inputs at the caps.** For Beyond LayerNorm, Inside a real transformer and
  Inside a real LLM, a new tab opens the page with one input at the model's cap (MiniLM reads
  512 tokens, SmolLM2's page 256) and then types a second one in the page's text box. With the
  tab still open, the rise of VmRSS over the baseline is what the tab keeps. The tab closes and
  the next page's starts from the new baseline. (Streamlit 1.67 lets a closed session go only
  when another tab closes, so a page measured after another can see that one's memory come
  back: ``--page`` measures one page on a fresh server.)
- **Every page.** A new tab opens Home and, from the navigation (one session throughout),
  every page, typing an input at the cap into each model page; it ends on Home and stays open:
  the rise is what a tab keeps after visiting everything.

Prints one line per measurement, in MB; docs/benchmarks.md records them (issue 42's targets:
150 MB and 250 MB).
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.localserver import CHROMIUM_ARGS, served  # noqa: E402

#: Every wait (ms): a 512-token MiniLM run with its fits takes seconds on a small machine.
TIMEOUT_MS = 600_000
#: Seconds to wait before reading VmRSS: the server's periodic garbage collection (15 s) has run.
SETTLE_S = 20
IDLE = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-stale="true"]');
}"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise KeyError("VmRSS")


def settled(pid: int) -> float:
    time.sleep(SETTLE_S)
    return rss_mb(pid)


def wait_idle(tab) -> None:
    tab.wait_for_timeout(500)
    tab.wait_for_function(IDLE, timeout=TIMEOUT_MS)


def type_into(tab, text: str) -> None:
    """Type ``text`` into the page's text box, as a learner does, and wait for the rerun."""
    box = tab.locator('[data-testid="stTextArea"] textarea').first
    box.fill(text)
    box.press("Control+Enter")
    wait_idle(tab)


def long_inputs() -> dict[str, tuple[str, str]]:
    """Two inputs at each model page's cap: one-digit words (a token each in both tokenizers)."""
    from lnviz.limits import GEMMA3_MAX_TOKENS, SMOLLM2_MAX_TOKENS

    minilm = [" ".join(str((k * 7 + j) % 10) for k in range(600)) for j in (1, 2)]
    # SmolLM2 reads " 3" as two tokens (the space, the digit): half as many words
    smollm2 = [" ".join(str((k * 3 + j) % 10) for k in range(SMOLLM2_MAX_TOKENS // 2))
               for j in (1, 2)]
    # Gemma 3 reads "3 1 4" as <bos> and a token a digit (the space goes with the digit)
    gemma = [" ".join(str((k * 3 + j) % 10) for k in range(GEMMA3_MAX_TOKENS - 1))
             for j in (1, 2)]
    return {"beyond": ("by_text", *minilm), "minilm": ("tf_text", *minilm),
            "smollm2": ("sl_text", *smollm2), "gemma": ("g3_text", *gemma)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the laptop's limits, not the demo's")
    parser.add_argument("--only", choices=["pages", "every"],
                        help="only the model pages one at a time, or only the visit to every page")
    parser.add_argument("--page", choices=["beyond", "minilm", "smollm2", "gemma"],
                        help="only this model page (the warm-up opens it alone): on a fresh "
                             "server, no other page's closed session is let go meanwhile")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from lnviz.ui.pages import PAGES

    pages = [p.path.removeprefix("app_pages/").removesuffix(".py")
             for section in PAGES.values() for p in section]
    inputs = long_inputs()
    if args.page:
        pages, inputs, args.only = [args.page], {args.page: inputs[args.page]}, "pages"

    def address(page: str, which: int = 1) -> str:
        if page not in inputs:
            return f"{base}/{page}"
        key, *texts = inputs[page]
        return f"{base}/{page}?{key}=" + urllib.parse.quote(texts[which - 1])

    with served(demo=not args.full) as (base, server), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.set_default_timeout(TIMEOUT_MS)
        warm = context.new_page()
        for page in pages:
            warm.goto(f"{base}/{page}")
            wait_idle(warm)
        warm.close()
        baseline = settled(server.pid)
        print(f"{'demo' if not args.full else 'full'} limits; baseline {baseline:.0f} MB "
              "(every page opened once, the tab closed)", flush=True)
        for page, (_, _, second) in (inputs.items() if args.only != "every" else ()):
            tab = context.new_page()
            tab.goto(address(page))
            wait_idle(tab)
            type_into(tab, second)
            kept = settled(server.pid) - baseline
            tab.close()
            after = settled(server.pid)
            print(f"{page}: two inputs at the cap, tab open: +{kept:.0f} MB; "
                  f"tab closed: {after - baseline:+.0f} MB", flush=True)
            baseline = after
        if args.only == "pages":
            return
        tab = context.new_page()  # one session: the pages are opened from the navigation
        tab.goto(f"{base}/home")
        wait_idle(tab)
        for page in [*pages, "home"]:
            link = tab.locator(f'[data-testid="stSidebarNavLink"][href$="/{page}"]').first
            if not link.count():  # the navigation shows its first ten until "View more"
                more = tab.locator('[data-testid="stSidebarNavViewButton"]')
                if more.count() and "more" in more.inner_text():
                    more.click()
            if not link.count():  # the default page's address is the root
                link = tab.locator('[data-testid="stSidebarNavLink"]').first
            link.click()
            print(f"  {page}", flush=True)
            wait_idle(tab)
            if page in inputs:
                type_into(tab, inputs[page][1])
        kept = settled(server.pid) - baseline
        print(f"every page visited (the model pages at the caps), tab open on Home: "
              f"+{kept:.0f} MB", flush=True)
        tab.close()
        browser.close()


if __name__ == "__main__":
    main()
