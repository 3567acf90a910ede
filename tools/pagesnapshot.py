"""What every page shows, as text, to check that a refactoring changed no number or sentence.

    python tools/pagesnapshot.py before.json [key=value ...]   # e.g. precision=float64 seed=7
    (change the code)
    python tools/pagesnapshot.py after.json [the same key=value ...]
    python tools/pagesnapshot.py --compare before.json after.json

Each page (all but the two whose numbers are timings or training runs) is run headless with
AppTest, its URL carrying the ``key=value`` settings given (a key a page does not have is
ignored there), and its markdown, captions, alerts, metrics, formulas, code and tables (rounded
to 4 decimals) are written to JSON. ``--compare`` prints every line that differs, page by page.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: lnviz is beside it

from lnviz.ui.pages import PAGES  # noqa: E402

#: Pages whose numbers are measurements (timings) or long computations (training runs).
SKIPPED = {"app_pages/ln_lstm.py", "app_pages/performance.py"}
KINDS = ("markdown", "caption", "info", "warning", "success", "error", "metric", "latex", "code")


def snapshot(query: dict[str, str]) -> dict[str, list[str]]:
    """Every page's shown text with ``query`` in its URL, by page title."""
    from streamlit.testing.v1 import AppTest

    shown: dict[str, list[str]] = {}
    for info in (p for pages in PAGES.values() for p in pages if p.path not in SKIPPED):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params.update(query)
        at.switch_page(info.path).run()
        lines = [f"{kind}: {element.value}" for kind in KINDS for element in getattr(at, kind)]
        lines += ["table: " + frame.value.round(4).to_string() for frame in at.dataframe]
        lines += [f"exception: {e.message}" for e in at.exception]
        shown[info.title] = lines
    return shown


def compare(before: dict[str, list[str]], after: dict[str, list[str]]) -> int:
    """Print what differs; return how many pages differ."""
    differing = 0
    for title in sorted(set(before) | set(after)):
        old, new = before.get(title, []), after.get(title, [])
        if old != new:
            differing += 1
            print(f"=== {title}")
            for line in difflib.unified_diff(old, new, lineterm="", n=0):
                print(line)
    return differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", action="store_true", help="compare two snapshots")
    parser.add_argument("paths", nargs="+", help="the snapshot to write (then key=value "
                        "settings), or with --compare the two to compare")
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.paths[:2])
        print(f"{compare(before, after)} page(s) differ")
        return
    query = dict(setting.split("=", 1) for setting in args.paths[1:])
    Path(args.paths[0]).write_text(json.dumps(snapshot(query), indent=0, ensure_ascii=False))


if __name__ == "__main__":
    main()
