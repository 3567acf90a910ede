"""Settings shared by every page (device, precision, seed) and a small per-session memo."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import streamlit as st

from lnviz.devices import available_devices, supported_dtypes

T = TypeVar("T")
_MEMO_KEY = "_lnviz_memo"
_MEMO_ENTRIES = 2  # per slot: results can hold several full-size tensors, keep few per learner


@dataclass(frozen=True)
class Settings:
    """What the shared sidebar chose: where and in which precision to compute, and the seed."""

    device: str
    dtype: str
    seed: int


#: The longest URL value kept: every value a control writes is a short label or number.
MAX_URL_VALUE = 200
#: Numbers beyond this are refused in the URL: integers up to it convert exactly to floats.
MAX_URL_NUMBER = 2.0**53


def plausible_url_value(value: str) -> bool:
    """Whether a control of this app could have written ``value`` into the URL: not empty, not
    huge, and, when it reads as a number, finite and at most 2⁵³ in size."""
    if not value or len(value) > MAX_URL_VALUE:
        return False
    try:
        number = float(value)
    except ValueError:
        return True  # a label (an option's name): the control itself checks it
    return math.isfinite(number) and abs(number) <= MAX_URL_NUMBER


def clean_query_params() -> None:
    """Drop URL parameters that no control could have written, before any control reads them.

    Each control bound to the URL checks its own value, but Streamlit 1.67 crashes on some
    (an integer input given "1e309" raises OverflowError) and an empty value turns a required
    choice into None. A shared link is input like any other. Controls seed themselves from the
    URL as it was when the page loaded, so that snapshot is refreshed too, the way Streamlit
    refreshes it after a page change.
    """
    from streamlit.runtime.state.session_state_proxy import get_session_state

    with get_session_state().query_params() as params:
        bad = [key for key in list(params)
               if not params.is_bound(key)
               and not all(plausible_url_value(v) for v in params.get_all(key))]
        for key in bad:
            del params[key]
        if bad:
            params.set_initial_query_params_from_current()


#: Environment variable naming a file to which every script run appends its duration.
RUN_LOG_ENV = "LNVIZ_RUN_LOG"


@dataclass
class RunRecord:
    """What :func:`logged_run` writes for one run: the page, filled in once it is known."""

    page: str = "?"


@contextmanager
def logged_run() -> Iterator[RunRecord]:
    """Time one run of the app's script and, when ``LNVIZ_RUN_LOG`` names a file, append
    "<unix time> <milliseconds> <page>" to it — the server-side rerun time, as the load test
    reads it. Costs nothing when the variable is unset."""
    path = os.environ.get(RUN_LOG_ENV)
    record = RunRecord()
    start = time.perf_counter()
    try:
        yield record
    finally:
        if path:
            with open(path, "a", encoding="utf-8") as log:
                log.write(f"{time.time():.3f} {(time.perf_counter() - start) * 1e3:.1f} "
                          f"{record.page}\n")


def sidebar_settings() -> Settings:
    """Draw the shared sidebar controls (once, from app.py) and return their values."""
    with st.sidebar:
        st.subheader("Compute")
        devices = available_devices()
        device = st.selectbox(
            "Device", devices, key="device", bind="query-params",
            help="Where the normalization runs. CUDA or Apple MPS appear only when torch sees "
                 "one; figures always show a small window of the result.",
        )
        dtypes = supported_dtypes(device)
        dtype = st.selectbox(
            "Precision", dtypes, key="precision", bind="query-params",
            help="The input's dtype. float16/bfloat16 keep fewer digits; their statistics are "
                 "still accumulated in float32, as torch does.",
        )
        seed = st.number_input(
            "Random seed", min_value=0, max_value=2**31 - 1, value=0, step=1, key="seed",
            bind="query-params",
            help="Seeds every random batch, so the same seed gives the same numbers.",
        )
    st.session_state["_settings"] = Settings(device, dtype, int(seed))
    return st.session_state["_settings"]


def current_settings() -> Settings:
    """The settings app.py's sidebar chose on this run (defaults when a page runs alone)."""
    if _legacy_pages_mode():
        st.rerun()
    return st.session_state.get("_settings", Settings("cpu", "float32", 0))


def _legacy_pages_mode() -> bool:
    """Leave Streamlit's legacy multipage mode if this run is in it.

    Streamlit treats an app with a ``pages/`` folder as a legacy multipage app until the first
    run of app.py calls ``st.navigation``; a first visit straight to a page's URL would run that
    page without app.py's frame. Switching the flag off and rerunning routes it through app.py.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        return True
    return False


def memo(key: tuple, compute: Callable[[], T]) -> T:
    """``compute()`` once per ``key`` for this session, keeping the last few results per slot.

    ``key`` is a tuple whose first item names the slot (``("bl_sweep", n, seed)``): each slot
    keeps its own last :data:`_MEMO_ENTRIES` results, so a page's several computations do not
    push one another out. Per-session (never shared between learners) and bounded, unlike a
    global cache; used for results that hold large tensors, which ``st.cache_data`` would copy
    on every hit.
    """
    slots: dict = st.session_state.setdefault(_MEMO_KEY, {})
    store: dict = slots.setdefault(key[0], {})
    if key in store:
        store[key] = store.pop(key)  # most recently used goes last
        return store[key]
    value = compute()
    store[key] = value
    while len(store) > _MEMO_ENTRIES:
        store.pop(next(iter(store)))
    return value


def forget(match: Callable[[tuple], bool]) -> None:
    """Drop every result :func:`memo` keeps whose key ``match`` accepts, releasing its memory."""
    for store in st.session_state.get(_MEMO_KEY, {}).values():
        for key in [key for key in store if match(key)]:
            del store[key]


def request_run(flag: str) -> None:
    """Button callback: remember that the learner asked for a run.

    Callbacks run before the page script, so the request survives the rerun that
    :func:`current_settings` may trigger; read it with ``st.session_state.pop(flag, False)``.
    An ``if st.button(...)`` check would lose the click in that rerun.
    """
    st.session_state[flag] = True
