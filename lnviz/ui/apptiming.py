"""Server-side rerun time of every page after a control change, measured with AppTest.

Used by ``python -m lnviz.bench --app``. For each page (except the ones whose work is a long
computation the learner starts on purpose: training and benchmarking) it opens the page with its
default data, then moves its first slider back and forth and times each rerun.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from lnviz.ui.pages import PAGES

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = {"pages/training.py", "pages/performance.py"}


def _movable(at: AppTest) -> tuple[object, list] | None:
    """The first numeric slider (or else number input) and two values to move it between."""
    for widget in at.slider:
        if isinstance(widget.value, (int, float)) and widget.max > widget.min:
            return widget, [widget.min, widget.max]
    for widget in at.number_input:
        if widget.max is None or widget.max > widget.value:
            return widget, [widget.value, widget.value + (widget.step or 1)]
    return None


def time_page(page: str, reruns: int = 7) -> dict:
    """Median and max seconds of a rerun after moving ``page``'s first control."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page(page).run()
    if at.exception:
        return {"page": page, "error": str(at.exception[0].message)}
    found = _movable(at)
    if found is None:
        return {"page": page, "error": "no movable control"}
    widget, options = found
    key, kind = widget.key, widget.type
    times = []
    for k in range(reruns):
        getattr(at, kind)(key=key).set_value(options[(k + 1) % 2])
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
    return {"page": page, "control": key, "median_s": statistics.median(times),
            "max_s": max(times), "exception": bool(at.exception)}


def page_timings(reruns: int = 7) -> list[dict]:
    """:func:`time_page` for every page in the navigation that should answer instantly."""
    return [time_page(p.path, reruns) for pages in PAGES.values() for p in pages
            if p.path not in SKIPPED]


def format_page_table(timings: list[dict]) -> str:
    """The timings as a Markdown table."""
    lines = ["| page | control moved | median ms | max ms |", "|---|---|---:|---:|"]
    for t in timings:
        if "error" in t:
            lines.append(f"| {t['page']} | — | {t['error']} | |")
        else:
            lines.append(f"| {t['page']} | {t['control']} | {t['median_s'] * 1e3:.0f} "
                         f"| {t['max_s'] * 1e3:.0f} |")
    return "\n".join(lines)
