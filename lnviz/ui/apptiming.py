"""Server-side rerun time of every page after a control change, measured with AppTest.

Used by ``python -m lnviz.bench --app``. For each page (except the ones whose work is a long
computation the learner starts on purpose: training and benchmarking) it opens the page with its
default data, then moves every slider of the page, one at a time, to a few new values spread over
its range and times each rerun. New values mean that no cache has seen the numbers: this is a
learner dragging a slider, not toggling between two settings.

AppTest compiles app.py and the page afresh on every run (it makes a new script cache each time),
which a running server does once; the timings share one script cache so that they measure the
scripts' work and not that compilation.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest

from lnviz.ui.pages import PAGES

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = {"pages/training.py", "pages/performance.py"}


@contextmanager
def _one_script_cache() -> Iterator[None]:
    """Let every AppTest run share one compiled copy of the scripts, as the server does."""
    cache = ScriptCache()
    with mock.patch("streamlit.testing.v1.app_test.ScriptCache", lambda: cache), \
            mock.patch("streamlit.testing.v1.local_script_runner.ScriptCache", lambda: cache):
        yield


def _new_values(widget: object, count: int) -> list:
    """Up to ``count`` values spread over a slider's range, none of them its current value.

    Numeric sliders step through their range; select sliders through those options that read
    as numbers (their labels are formatted, so options that are words are left out).
    """
    if type(widget).__name__ == "SelectSlider":
        options = []
        for label in widget.options:
            try:
                options.append(float(label))
            except ValueError:
                continue
        picks = sorted({round(k * (len(options) - 1) / count) for k in range(count + 1)})
        values = [options[i] for i in picks] if options else []
    else:
        step = widget.step or (widget.max - widget.min) / 100
        slots = round((widget.max - widget.min) / step)
        picks = sorted({round(k * slots / count) for k in range(count + 1)})
        values = [type(widget.value)(widget.min + i * step) for i in picks]
    return [v for v in values if v != widget.value][:count]


def _sliders(at: AppTest) -> list[tuple[str, str]]:
    """(kind, key) of every single-valued slider in the page's main area."""
    found = []
    for kind in ("slider", "select_slider"):
        for widget in getattr(at.main, kind):
            if widget.key and not isinstance(widget.value, (tuple, list)):
                found.append((kind, widget.key))
    return found


def time_page(page: str, moves: int = 4) -> dict:
    """Rerun seconds after moving each of ``page``'s sliders to ``moves`` new values.

    Returns the page, the controls moved, every rerun's seconds per control, and any error.
    """
    with _one_script_cache():
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.switch_page(page).run()
        if at.exception:
            return {"page": page, "error": str(at.exception[0].message)}
        times: dict[str, list[float]] = {}
        for kind, key in _sliders(at):
            for value in _new_values(getattr(at, kind)(key=key), moves):
                try:
                    getattr(at, kind)(key=key).set_value(value)
                except (ValueError, KeyError):  # a label that does not map back to an option
                    continue
                start = time.perf_counter()
                at.run()
                times.setdefault(key, []).append(time.perf_counter() - start)
                if at.exception:
                    return {"page": page, "error": f"{key}={value}: {at.exception[0].message}"}
    if not times:
        return {"page": page, "error": "no slider to move"}
    return {"page": page, "times": times}


def page_timings(moves: int = 4) -> list[dict]:
    """:func:`time_page` for every page in the navigation that should answer instantly."""
    return [time_page(p.path, moves) for pages in PAGES.values() for p in pages
            if p.path not in SKIPPED]


def format_page_table(timings: list[dict]) -> str:
    """The timings as a Markdown table: per page, the median and the 90th percentile over all
    moves, and the control whose moves were slowest (by median)."""
    lines = ["| page | sliders moved | reruns | median ms | p90 ms | slowest control (median ms) |",
             "|---|---:|---:|---:|---:|---|"]
    for t in timings:
        if "error" in t:
            lines.append(f"| {t['page']} | — | — | {t['error']} | | |")
            continue
        every = sorted(s for values in t["times"].values() for s in values)
        p90 = every[min(len(every) - 1, round(0.9 * (len(every) - 1)))]
        slow_key = max(t["times"], key=lambda k: statistics.median(t["times"][k]))
        slow = statistics.median(t["times"][slow_key])
        lines.append(f"| {t['page']} | {len(t['times'])} | {len(every)} "
                     f"| {statistics.median(every) * 1e3:.0f} | {p90 * 1e3:.0f} "
                     f"| {slow_key} ({slow * 1e3:.0f}) |")
    return "\n".join(lines)
