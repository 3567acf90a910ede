"""How much of a page's rerun is lnviz's own work, and so how low its settle time could go
(issue 30's floor: the same elements with lnviz's work removed).

    python tools/rerun_share.py            # about a minute on 2 cores

Each page is opened in Streamlit's AppTest and one control is moved between two values, as
tools/livebench.py presses it (one step and back, the first presses untimed so that the
session's caches hold both settings). Each timed run is profiled in the script's thread; lnviz's
work is the time inside lnviz's own functions (not lnviz.ui) called from the page or from
lnviz.ui, the rest being Streamlit building and sending the page's elements. Prints a Markdown
table; docs/benchmarks.md §2 keeps the numbers. The times include the profiler's overhead: the
share is the number to read.
"""

from __future__ import annotations

import cProfile
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from pageutil import open_page  # noqa: E402

BN_VS_LN_OPEN = {"bl_part2": "true", "bl_part3": "true", "bl_part4": "true"}
#: (what, page, query, session key of the control, the two values it moves between)
CASES = [
    ("Explorer: γ, released (whole page)", "app_pages/explorer.py", {}, "gamma", 1.0, 1.1),
    ("Gradients: Batch size N (whole page)", "app_pages/gradients.py", {}, "gr_n", 4, 5),
    ("Shapes: Init gain (whole page)", "app_pages/shapes.py", {"sh_part3": "true"}, "sh_gain",
     1.0, 1.414),
    ("BatchNorm vs LayerNorm: Training steps k (fragment)", "app_pages/bn_vs_ln.py",
     BN_VS_LN_OPEN, "bl_steps", 10, 11),
    ("ε page: ε, released (fragment)", "app_pages/epsilon.py", {}, "ep_eps", 1e-5, 1e-4),
]
CORE = str(REPO / "lnviz") + "/"
UI = str(REPO / "lnviz" / "ui") + "/"


def _core(filename: str) -> bool:
    return filename.startswith(CORE) and not filename.startswith(UI)


def _lnviz_seconds(stats: dict) -> float:
    """Time inside lnviz's own functions, counted where they are entered from outside them."""
    total = 0.0
    for function, (*_, callers) in stats.items():
        if _core(function[0]):
            total += sum(edge[3] for caller, edge in callers.items() if not _core(caller[0]))
    return total


def measure(page: str, query: dict, key: str, a: float, b: float, runs: int = 8
            ) -> tuple[float, float]:
    """p50 seconds of a rerun and of lnviz's work in it."""
    at = open_page(page, query, timeout=120)
    for value in (b, a):  # fill the caches, as livebench's untimed first presses do
        at.session_state[key] = value
        at.run()
    totals, works = [], []
    for k in range(runs):
        at.session_state[key] = b if k % 2 == 0 else a
        profiles: list[cProfile.Profile] = []

        def start(*_: object, profiles: list = profiles) -> None:
            profile = cProfile.Profile()  # the script runs in a thread AppTest starts
            profiles.append(profile)
            profile.enable()

        threading.setprofile(start)
        started = time.perf_counter()
        at.run()
        totals.append(time.perf_counter() - started)
        threading.setprofile(None)
        stats: dict = {}
        for profile in profiles:
            profile.disable()
            profile.create_stats()
            stats.update(profile.stats)
        works.append(_lnviz_seconds(stats))
        if at.exception:
            raise RuntimeError(f"{page}: {at.exception}")
    return statistics.median(totals), statistics.median(works)


def main() -> int:
    print("| control | rerun p50 ms (profiled) | lnviz's work p50 ms | share |")
    print("|---|---:|---:|---:|")
    for what, page, query, key, a, b in CASES:
        total, work = measure(page, query, key, a, b)
        print(f"| {what} | {1000 * total:.0f} | {1000 * work:.1f} | {100 * work / total:.0f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
