"""A training race on a page (:class:`lnviz.train.Race`): the Shapes page races post-LN
against pre-LN, Beyond LayerNorm races LayerNorm, RMSNorm, DyT and no norm. One home for what
both do with their Run and Stop buttons, the growing figure and the finished one."""

from __future__ import annotations

import itertools

import streamlit as st

from lnviz import charts
from lnviz.limits import current_limits
from lnviz.train import Race, RaceConfig, RaceResult, race_work
from lnviz.ui import jobs
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import refusal


def race_panel(slot: str, config: RaceConfig | None, run_pressed: bool, stop_pressed: bool, *,
               idle: str, key: str) -> RaceResult | None:
    """The race kept in ``slot``: Run starts it with ``config`` (None: the settings were
    refused), Stop ends it, and while it trains its figure grows under a progress bar. Then the
    finished figure (the seeds' range shaded when there are several), a note when it ran with
    other settings or was stopped, and the result for the page to describe (None before any
    race, with ``idle`` shown instead). Figure keys start with ``key``. A race larger than
    :attr:`lnviz.limits.Limits.race_work` (the demo's cap) is refused with what fits."""
    if stop_pressed and not jobs.stop(slot):
        st.toast("Nothing is training.")
    too_large = too_large_race(config) if config is not None else None
    if too_large is not None:
        st.info(too_large, icon=":material/block:")
    if run_pressed and config is not None and too_large is None:
        jobs.start(slot, config, Race(config))
    place = st.empty()
    if jobs.running(slot) is not None:
        frames = itertools.count()  # one key per frame drawn while it trains
        with refusal("Training failed: ", stop=False, errors=(RuntimeError, ValueError)):
            jobs.run_to_end(slot, lambda now: place.plotly_chart(
                charts.shapes.race_figure(now.curves, config.steps, config.warmup),
                key=f"{key}_live_{next(frames)}"), "your race")
    result, current = jobs.finished(slot, config)
    if result is None:
        if too_large is None:
            place.info(idle, icon="▶️")
        return None
    if not current:
        st.info("The race below ran with other settings"
                + ("." if too_large else "; press **Run** to race with the current ones."),
                icon="ℹ️")
    cfg = result.config
    with place.container():
        show_figure(charts.shapes.race_figure, result.curves, cfg.steps, cfg.warmup,
                    bands={v: {k: result.band(v, k) for k in ("loss", "accuracy")}
                           for v in cfg.entrants} if cfg.seeds > 1 else None, key=key)
    if result.stopped:
        st.warning(f"Stopped after {result.steps_done} of {cfg.steps} steps.", icon="⏹️")
    return result


def too_large_race(config: RaceConfig) -> str | None:
    """Why ``config``'s race is too large for this server, with the most steps that fit at its
    other settings; None when it fits."""
    limit, work = current_limits().race_work, race_work(config)
    if work <= limit:
        return None
    per_step = work // config.steps
    steps = limit // per_step
    fits = (f"at these settings up to {steps:,} steps fit" if steps >= 10 else
            "fewer blocks or seeds are needed first")
    return (f"On this shared server a race trains at most {limit:,} block-steps (models × seeds "
            f"× steps × blocks); this one needs {work:,} ({len(config.entrants)} × "
            f"{config.seeds} × {config.steps:,} × {config.depth}): {fits}.")
