"""The server gives memory back: what a learner's session held returns to the system once the
session ends, instead of staying in the server process until it restarts.

glibc's ``malloc`` serves a block of 128 KiB or more with a mapping of its own, returned to the
system by ``free`` — until such a block is freed: then it raises that threshold (up to 32 MiB) so
that blocks of that size come from its heaps, which it keeps. The app frees tensors of a few MB on
every rerun (torch and numpy allocate them with ``malloc``), so the threshold climbs at once, and a
class's results, freed when the sessions end, stayed in the process: in
tests/test_browser_memory.py, 761 MB 40 s after four learners with 2,000,000-value batches had
left, against a warmed baseline of 402 MB. Setting the threshold turns that adjustment off: every
block above it is its own mapping, gone from the process when it is freed (the same test: 424 MB
after, 446 MB at the peak instead of 822 MB).

A closed session's state also sits in reference cycles, which only a full garbage collection
frees. Streamlit runs one after every script run unless told not to; the shipped config tells it
not to (``runner.postScriptGC = false``: about 130 ms of CPU per rerun, docs/benchmarks.md), so
:func:`collect_garbage_periodically` runs one in a thread of its own every `GC_EVERY_S` seconds
instead, off every rerun's path. Without it a hostile tester's three rounds of three closed
transformer tabs left 474 → 559 → 645 → 730 MB in the process; tests/test_browser_memory.py's
rounds added 39 MB without it and none with it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
import threading

__all__ = ["GC_EVERY_S", "MMAP_THRESHOLD", "collect_garbage_periodically", "return_freed_memory"]

#: Seconds between two full garbage collections of the server process (``LNVIZ_GC_EVERY_S``
#: sets another: about 0.3 s of CPU each with torch, pandas and plotly loaded).
GC_EVERY_S = float(os.environ.get("LNVIZ_GC_EVERY_S", "15"))

#: Blocks from this size up get their own mapping (glibc's initial value, fixed).
MMAP_THRESHOLD = 128 * 1024
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number, from glibc's malloc.h


@functools.cache
def return_freed_memory() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD`, once per process. False where the
    C library is not glibc (macOS, musl): those allocators have no such adjustment to turn off."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1


_collector: threading.Thread | None = None
_collector_lock = threading.Lock()


def collect_garbage_periodically(every_s: float = GC_EVERY_S, *,
                                 stop: threading.Event | None = None) -> threading.Thread:
    """Start a daemon thread that runs a full garbage collection every ``every_s`` seconds
    until ``stop`` is set, so that what closed sessions left in reference cycles is freed
    without a collection after every rerun. Without ``stop`` it runs for the life of the
    process, and only one is started: later calls return it."""
    global _collector

    def collect(until: threading.Event) -> None:
        while not until.wait(every_s):
            gc.collect()

    if stop is not None:
        thread = threading.Thread(target=collect, args=(stop,), name="lnviz-gc", daemon=True)
        thread.start()
        return thread
    with _collector_lock:
        if _collector is None:
            _collector = collect_garbage_periodically(every_s, stop=threading.Event())
        return _collector
