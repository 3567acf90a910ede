"""A computation that outlives a rerun, advanced a chunk at a time under a progress bar: the
LN-LSTM page's training and the Shapes page's race.

The job lives in the session state, so a rerun (a click on Stop, any other widget, a visit to
another page) interrupts the run that is drawing it, and the next run finds the job where it was
and goes on with it, unless the learner asked to stop. The page draws between chunks of
:data:`CHUNK_SECONDS`, which is where Streamlit can stop an abandoned run (a closed tab) or start
the one a click asked for. A job is any object with ``done``, ``advance_for(seconds)``,
``stop()``, ``progress()`` (with a ``fraction`` and a ``text``) and ``result()`` (None for one
stopped before it learned anything); the jobs take a lock, so that two runs never advance one
job at once. Each page names its own ``slot`` in the session state (``<slot>_job``,
``<slot>_results``). Finished results are kept per settings' key, the newest last.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

import streamlit as st

#: Seconds of work between two redraws of the progress bar. Streamlit stops an abandoned run or
#: starts the one a click on Stop asks for only when the script draws, so the page draws this
#: often whatever the settings.
CHUNK_SECONDS = 0.3
#: Finished results kept per slot and session.
RESULTS_KEPT = 4


class Job(Protocol):
    @property
    def done(self) -> bool: ...

    def advance_for(self, seconds: float) -> int: ...

    def stop(self) -> None: ...

    def progress(self) -> Any: ...

    def result(self) -> Any: ...


def running(slot: str) -> tuple[Hashable, Job] | None:
    """The job under way in ``slot``, with its settings' key, if any."""
    return st.session_state.get(f"{slot}_job")


def stop(slot: str) -> bool:
    """Ask the job in ``slot`` to stop (the run drawing it ends at its next chunk); False if
    nothing is running."""
    job = running(slot)
    if job is not None:
        job[1].stop()
    return job is not None


def start(slot: str, key: Hashable, job: Job) -> None:
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
    finished ones and return it. None if nothing was running, or if the job's result is None (it
    stopped before it learned anything). Whatever happens, nothing is running in ``slot``
    afterwards."""
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
        result = work.result()
        if result is None:
            return None
        results = st.session_state.setdefault(f"{slot}_results", {})
        results.pop(key, None)
        results[key] = result
        while len(results) > RESULTS_KEPT:
            results.pop(next(iter(results)))
        return result
    finally:
        st.session_state[f"{slot}_job"] = None
        bar.empty()
