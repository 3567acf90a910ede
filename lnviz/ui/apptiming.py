"""Server-side rerun time of every page after a control change, measured with AppTest.

Used by ``python -m lnviz.bench --app``. For each page (except the ones whose work is a long
computation the learner starts on purpose: training and benchmarking) it opens the page with its
default data, then moves its first slider to new values across its range and times each rerun.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from lnviz.ui.pages import PAGES

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = {"pages/training.py", "pages/performance.py"}


def _movable(at: AppTest, count: int) -> tuple[object, list] | None:
    """The first numeric slider (or else number input) and ``count`` new values for it.

    The values are spread over the control's range and differ from each other and from the
    current value, so every rerun meets numbers no cache has seen (a learner dragging a slider).
    """
    for widget in at.slider:
        if isinstance(widget.value, (int, float)) and widget.max > widget.min:
            step = widget.step or (widget.max - widget.min) / 100
            slots = round((widget.max - widget.min) / step)
            picks = sorted({round(k * slots / count) for k in range(count + 1)})
            values = [type(widget.value)(widget.min + i * step) for i in picks]
            values = [v for v in values if v != widget.value]
            return widget, values
    for widget in at.number_input:
        step = widget.step or 1
        values = [widget.value + (k + 1) * step for k in range(count)]
        if widget.max is None or values[-1] <= widget.max:
            return widget, values
    return None


def time_page(page: str, reruns: int = 7) -> dict:
    """Median and max seconds of a rerun after moving ``page``'s first control to a new value."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page(page).run()
    if at.exception:
        return {"page": page, "error": str(at.exception[0].message)}
    found = _movable(at, reruns)
    if found is None:
        return {"page": page, "error": "no movable control"}
    widget, values = found
    key, kind = widget.key, widget.type
    times = []
    for value in values:
        getattr(at, kind)(key=key).set_value(value)
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
