"""A training that outlives a rerun: the LN-LSTM page's comparison, kept in the session.

Any rerun (a click on Stop, any other widget, a visit to another page) interrupts the run that
is drawing a training; the training itself lives in the session state, so the next run finds it
where it was and goes on with it, unless the learner asked to stop. :class:`Training`'s lock
keeps the interrupted run and the new one from stepping at once. Finished comparisons are kept
as :class:`TrainingResult` per setting, the newest last.
"""

from __future__ import annotations

from collections.abc import Hashable

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lnviz import charts
from lnviz.lessons.training import Training, TrainingResult, summarize

#: Session state: the running training as (its settings' key, Training), None once it ended.
JOB_KEY = "tr_job"
#: Session state: finished comparisons, {settings' key: TrainingResult}, the newest last.
RESULTS_KEY = "tr_results"
#: Finished comparisons kept per session.
RESULTS_KEPT = 4
#: Seconds of training between two redraws of the progress bar. Streamlit stops an abandoned run
#: (a closed tab) or starts the one a click on Stop asks for only when the script draws, so the
#: page draws this often whatever the settings.
CHUNK_SECONDS = 0.3


def finished_trainings() -> dict[Hashable, TrainingResult]:
    """This session's finished comparisons by their settings' key, the newest last."""
    return st.session_state.setdefault(RESULTS_KEY, {})


def finished_training(key: Hashable) -> tuple[TrainingResult | None, bool]:
    """The finished comparison for the settings ``key``, or else the newest one (None if there
    is none), and whether it is the one for ``key``."""
    results = finished_trainings()
    if key in results:
        return results[key], True
    return (list(results.values())[-1] if results else None), False


def running_training() -> tuple[Hashable, Training] | None:
    """The training under way in this session, with its settings' key, if any."""
    return st.session_state.get(JOB_KEY)


def stop_training() -> bool:
    """Ask the running training to stop (the run drawing it ends at its next piece of work);
    False if nothing is training."""
    job = running_training()
    if job is not None:
        job[1].stop()
    return job is not None


def start_training(key: Hashable, training: Training) -> None:
    """Make ``training`` (for the settings ``key``) this session's running one, stopping any
    other. Stored before any work (building a Training is instant), so that a rerun started by
    a quick click on Stop already finds it."""
    stop_training()
    st.session_state[JOB_KEY] = (key, training)


def train_to_the_end(live: DeltaGenerator) -> TrainingResult | None:
    """Drive the running training to its end (finished or stopped), a chunk at a time, under a
    progress bar, redrawing its curves into ``live`` after every evaluation; then keep its
    summary among the finished ones and return it. None if nothing was training, or if it
    stopped before its first step. Whatever happens, the training is no longer running after.
    """
    job = running_training()
    if job is None:
        return None
    key, training = job
    progress = st.progress(0.0, text="Preparing the models…")
    try:
        drawn = -1  # evaluations shown in the live chart
        while True:
            now = training.progress()
            progress.progress(now.fraction, text=now.text)
            if now.evaluations != drawn:
                live.plotly_chart(charts.training.curves_figure(
                    now.curves, training.config.steps, now.chance),
                    key=f"tr_live_{now.evaluations}")
                drawn = now.evaluations
            if training.done:
                break
            training.advance_for(CHUNK_SECONDS)
        if training.step == 0:
            return None
        results = finished_trainings()
        results.pop(key, None)
        results[key] = result = summarize(training)
        while len(results) > RESULTS_KEPT:
            results.pop(next(iter(results)))
        return result
    finally:
        st.session_state[JOB_KEY] = None
        progress.empty()
