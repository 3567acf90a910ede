"""A computation that outlives a rerun, advanced a chunk at a time under a progress bar: the
Shapes page's training race.

It follows the LN-LSTM page's pattern (:mod:`lnviz.ui.jobs`): the job lives in the session
state, so a rerun (a click on Stop, any other widget) finds it where the interrupted run left
it and goes on with it, unless the learner asked to stop; the page draws between chunks of
:data:`lnviz.ui.jobs.CHUNK_SECONDS`, which is where Streamlit can stop an abandoned run or start
the one a click asked for. A job is any object with ``done``, ``advance_for(seconds)``,
``stop()``, ``progress()`` (with a ``fraction`` and a ``text``) and ``result()``; each page names
its own ``slot`` in the session state. Finished results are kept per settings' key, the newest
last.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

import streamlit as st

from lnviz.ui.jobs import CHUNK_SECONDS

#: Finished results kept per slot and session.
RESULTS_KEPT = 4


class ChunkedJob(Protocol):
    @property
    def done(self) -> bool: ...

    def advance_for(self, seconds: float) -> int: ...

    def stop(self) -> None: ...

    def progress(self) -> Any: ...

    def result(self) -> Any: ...


def running(slot: str) -> tuple[Hashable, ChunkedJob] | None:
    """The job under way in ``slot``, with its settings' key, if any."""
    return st.session_state.get(f"{slot}_job")


def stop(slot: str) -> bool:
    """Ask the job in ``slot`` to stop (the run drawing it ends at its next chunk); False if
    nothing is running."""
    job = running(slot)
    if job is not None:
        job[1].stop()
    return job is not None


def start(slot: str, key: Hashable, job: ChunkedJob) -> None:
    """Make ``job`` (for the settings ``key``) the one running in ``slot``, stopping any other;
    stored before any work, so that a rerun started by a quick click on Stop finds it."""
    stop(slot)
    st.session_state[f"{slot}_job"] = (key, job)


def finished(slot: str, key: Hashable) -> tuple[Any | None, bool]:
    """The finished result for the settings ``key``, or else the newest one in ``slot`` (None
    if there is none), and whether it is the one for ``key``."""
    results = st.session_state.setdefault(f"{slot}_results", {})
    if key in results:
        return results[key], True
    return (list(results.values())[-1] if results else None), False


def run_to_end(slot: str, draw: Callable[[Any], None]) -> Any | None:
    """Drive the job in ``slot`` to its end (finished or stopped), a chunk at a time, under a
    progress bar, calling ``draw(progress)`` after every chunk; then keep its result among the
    finished ones and return it. None if nothing was running. Whatever happens, nothing is
    running in ``slot`` afterwards."""
    job = running(slot)
    if job is None:
        return None
    key, work = job
    bar = st.progress(0.0, text="Preparing the models…")
    try:
        while True:
            now = work.progress()
            bar.progress(now.fraction, text=now.text)
            draw(now)
            if work.done:
                break
            work.advance_for(CHUNK_SECONDS)
        results = st.session_state.setdefault(f"{slot}_results", {})
        results.pop(key, None)
        results[key] = result = work.result()
        while len(results) > RESULTS_KEPT:
            results.pop(next(iter(results)))
        return result
    finally:
        st.session_state[f"{slot}_job"] = None
        bar.empty()
