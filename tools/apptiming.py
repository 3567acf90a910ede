"""Server-side rerun time of every page after a control change, measured with AppTest.

Run ``python tools/apptiming.py`` (``--json PATH`` keeps the raw seconds). For each page (except the
ones whose work is a long computation the learner starts on purpose: training and benchmarking) it
opens the page with its default data, then moves every slider of the page, one at a time, to a few
new values spread over its range and times each rerun. New values mean that no cache has seen the
numbers: this is a learner dragging a slider, not toggling between two settings.

Two times are kept per rerun: the script's (app.py and the page running, what the server does for
a rerun) and AppTest's whole ``run()`` (which adds building its element tree from the messages).
AppTest also compiles app.py and the page afresh on every run (a new script cache each time),
which a running server does once; the timings share one script cache so that they measure the
scripts' work and not that compilation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: lnviz is beside it

from lnviz.lessons.performance import machine  # noqa: E402
from lnviz.ui.pages import PAGES  # noqa: E402
from tools.timedserver import timed_runs  # noqa: E402

SKIPPED = {"app_pages/ln_lstm.py", "app_pages/performance.py"}


@contextmanager
def _server_like(script_seconds: list[float]) -> Iterator[None]:
    """Let every AppTest run share one compiled copy of the scripts, as the server does, and
    append each script run's seconds to ``script_seconds``."""
    cache = ScriptCache()
    with mock.patch("streamlit.testing.v1.app_test.ScriptCache", lambda: cache), \
            mock.patch("streamlit.testing.v1.local_script_runner.ScriptCache", lambda: cache), \
            timed_runs(lambda seconds, _page: script_seconds.append(seconds)):
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

    Returns the page and, per control moved, the seconds of every rerun: ``script`` (the
    scripts' run, what the server does) and ``apptest`` (AppTest's whole run); or an error.
    """
    script_seconds: list[float] = []
    with _server_like(script_seconds):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.switch_page(page).run()
        if at.exception:
            return {"page": page, "error": str(at.exception[0].message)}
        script: dict[str, list[float]] = {}
        apptest: dict[str, list[float]] = {}
        for kind, key in _sliders(at):
            for value in _new_values(getattr(at, kind)(key=key), moves):
                try:
                    getattr(at, kind)(key=key).set_value(value)
                except (ValueError, KeyError):  # a label that does not map back to an option
                    continue
                script_seconds.clear()
                start = time.perf_counter()
                at.run()
                apptest.setdefault(key, []).append(time.perf_counter() - start)
                script.setdefault(key, []).append(sum(script_seconds))
                if at.exception:
                    return {"page": page, "error": f"{key}={value}: {at.exception[0].message}"}
    if not script:
        return {"page": page, "error": "no slider to move"}
    return {"page": page, "script": script, "apptest": apptest}


def page_timings(moves: int = 4) -> list[dict]:
    """:func:`time_page` for every page in the navigation that should answer instantly."""
    return [time_page(p.path, moves) for pages in PAGES.values() for p in pages
            if p.path not in SKIPPED]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def format_page_table(timings: list[dict]) -> str:
    """The timings as a Markdown table: per page, the script's median and 90th percentile over
    all moves, the control whose moves were slowest (by the script's median), and AppTest's
    median for comparison."""
    lines = ["| page | sliders | reruns | script median ms | script p90 ms "
             "| slowest control (median ms) | AppTest median ms |",
             "|---|---:|---:|---:|---:|---|---:|"]
    for t in timings:
        if "error" in t:
            lines.append(f"| {t['page']} | — | — | {t['error']} | | | |")
            continue
        script = [s for values in t["script"].values() for s in values]
        apptest = [s for values in t["apptest"].values() for s in values]
        slow_key = max(t["script"], key=lambda k: statistics.median(t["script"][k]))
        slow = statistics.median(t["script"][slow_key])
        lines.append(f"| {t['page']} | {len(t['script'])} | {len(script)} "
                     f"| {statistics.median(script) * 1e3:.0f} "
                     f"| {_percentile(script, 0.9) * 1e3:.0f} "
                     f"| {slow_key} ({slow * 1e3:.0f}) "
                     f"| {statistics.median(apptest) * 1e3:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/apptiming.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=4, help="new values per slider (default 4)")
    parser.add_argument("--json", metavar="PATH", help="write the timings as JSON")
    args = parser.parse_args(argv)
    timings = page_timings(args.moves)
    print(format_page_table(timings))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "pages": timings}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
