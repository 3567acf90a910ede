"""Cold start: how long the first learner of the morning waits, and the second.

    python tools/coldstart.py [--page explorer]

Starts ``streamlit run app.py`` on a free port of 127.0.0.1 and prints, in seconds from the
process start: the health check answering, then the first headless Chromium's page (Home, or
``--page``) rendered (script idle, a title in the main area), then a second browser's. The
server's RSS after each. Needs the playwright package and Debian's chromium.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere: tools/ is beside it

from tools.loadtest import _IDLE_WITH_TITLE, stop_tree, tree_rss_mb  # noqa: E402
from tools.localserver import CHROMIUM_ARGS, HOST, free_port, healthy, server_command  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", default="", help="URL path to open (default: Home)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    port = free_port()
    base = f"http://{HOST}:{port}"
    t0 = time.monotonic()
    server = subprocess.Popen(server_command(port), cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    try:
        while not healthy(base):
            if server.poll() is not None or time.monotonic() - t0 > 120:
                raise SystemExit("the server did not start")
            time.sleep(0.05)
        print(f"health check answers     {time.monotonic() - t0:6.1f} s   "
              f"RSS {tree_rss_mb(server.pid):5.0f} MB")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium"),
                                         headless=True, args=CHROMIUM_ARGS)
            for who in ("first", "second"):
                start = time.monotonic()
                page = browser.new_context().new_page()
                page.goto(f"{base}/{args.page}", timeout=180_000)
                page.wait_for_function(_IDLE_WITH_TITLE, polling=50, timeout=180_000)
                print(f"{who} page rendered    {time.monotonic() - t0:6.1f} s   "
                      f"RSS {tree_rss_mb(server.pid):5.0f} MB   "
                      f"(this browser waited {time.monotonic() - start:.1f} s)")
            browser.close()
    finally:
        stop_tree(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
