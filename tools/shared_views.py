"""What a class opening the same page costs the server: the CPU of each learner's first view,
one learner after another, with the app's own views kept for every session (as shipped,
``cached(..., for_all=True)`` in lnviz.ui.cache) and with that store emptied before each learner
(as every view was computed before).

    python tools/shared_views.py [--learners 4] [PAGE ...]

Each learner is a session of its own (Streamlit's AppTest, in this process): the page opened on
its defaults, its questions unanswered. A first, uncounted session loads the page's model and
imports what it uses. Prints, per page and way, the first learner's CPU-seconds (the process's,
every thread) and the mean of the others'; docs/benchmarks.md §4 records them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGES = ["app_pages/efficientnet.py", "app_pages/shapes.py", "app_pages/minilm.py",
         "app_pages/gemma.py"]


def open_page(page: str) -> float:
    """CPU-seconds of one new session's first view of ``page``."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    started = time.process_time()
    at.switch_page(page).run()
    if at.exception:
        raise SystemExit(f"{page}: {at.exception[0].message}")
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", default=PAGES)
    parser.add_argument("--learners", type=int, default=4)
    args = parser.parse_args()
    from lnviz.ui import cache

    for page in args.pages:
        open_page(page)  # the model loaded, everything imported
        for way, forget in (("each session", True), ("for all", False)):
            cache._FOR_ALL.clear()
            cpu = []
            for _ in range(args.learners):
                if forget:
                    cache._FOR_ALL.clear()
                cpu.append(open_page(page))
            rest = sum(cpu[1:]) / max(1, len(cpu) - 1)
            print(f"{page:28s} {way:13s} first learner {cpu[0]:.2f} CPU-s, "
                  f"each later one {rest:.2f}", flush=True)


if __name__ == "__main__":
    main()
