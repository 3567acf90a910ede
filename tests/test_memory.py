"""lnviz.ui.memory: the server returns freed memory to the system.

What it achieves is measured end to end in tests/test_browser_memory.py.
"""

from __future__ import annotations

import ctypes.util
import gc
import platform
import re
import threading
import time
import weakref
from pathlib import Path

import pytest

from lnviz.ui.memory import collect_garbage_periodically, return_freed_memory


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc"
                    or ctypes.util.find_library("c") is None, reason="needs Linux with glibc")
def test_the_mmap_threshold_is_set_once_on_glibc() -> None:
    assert return_freed_memory() is True
    assert return_freed_memory() is True  # once per process: the second call is the first's


def test_the_shipped_config_runs_no_full_collection_after_every_rerun() -> None:
    """Streamlit's default gc.collect() after each run cost ~130 ms of CPU per rerun, most of
    a rerun's server cost (docs/benchmarks.md §4): the shipped config turns it off."""
    config = (Path(__file__).parents[1] / ".streamlit/config.toml").read_text()
    runner = re.search(r"^\[runner\]\n(.*?)(?=^\[|\Z)", config, re.M | re.S)
    assert runner and re.search(r"^postScriptGC = false\b", runner.group(1), re.M)


def test_the_periodic_collection_frees_reference_cycles() -> None:
    """With automatic collection off, an object kept alive only by a cycle is freed by the
    periodic collection's thread alone, within a few of its intervals."""
    class Node:
        pass

    was_enabled = gc.isenabled()
    stop = threading.Event()
    gc.disable()
    try:
        node = Node()
        node.self = node
        gone = weakref.ref(node)
        del node
        thread = collect_garbage_periodically(0.05, stop=stop)
        assert thread.daemon and thread.is_alive()
        deadline = time.monotonic() + 10
        while gone() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone() is None
    finally:
        stop.set()  # a collection every 50 ms left running slowed the rest of the suite 6-fold
        if was_enabled:
            gc.enable()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_the_apps_collector_is_started_once_per_process() -> None:
    first = collect_garbage_periodically()
    assert collect_garbage_periodically() is first and first.is_alive()
