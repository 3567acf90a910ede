"""Drawing a figure the accessible way: the chart, and its numbers as tables behind an
expander (for screen readers, keyboard users and anyone who wants the values).

Figures are kept in the app's one cache (:mod:`lnviz.ui.cache`), keyed by the builder and its
arguments: moving one control rebuilds only the figures whose numbers changed. Each is built
straight into the plain-dict form that ``st.plotly_chart`` sends
(:func:`lnviz.charts.base.figure_dict`, no plotly objects), so neither the build nor a rerun
copies it through plotly's classes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from lnviz.charts.base import figure_dict, figure_tables, has_tables
from lnviz.ui.cache import fingerprint, remember


class _FinishedFigure(go.Figure):
    """A figure whose dict form is computed once, by :func:`lnviz.charts.base.figure_dict`.

    ``st.plotly_chart`` turns a figure into a dict with ``to_dict()`` on every call, which
    deep-copies every trace (about 1 ms a figure, as long as building it without validation).
    A finished figure hands back the dict it was made from; it is never modified.
    """

    def __init__(self, finished: dict) -> None:
        # go.Figure's own __init__ is not run (an empty figure costs about 1 ms):
        # st.plotly_chart calls nothing but to_dict() on a figure.
        self._finished = finished
        self._has_tables = has_tables(finished)

    @property
    def has_tables(self) -> bool:
        """Whether the figure has numbers to show as tables (a diagram has none)."""
        return self._has_tables

    def to_dict(self) -> dict:
        return self._finished


def _live_figures() -> bool:
    from lnviz.ui.live import plotly_js

    return plotly_js()


def _builder(module: str, name: str) -> Callable[..., go.Figure]:
    """The figure builder ``name`` of the charts module ``module``."""
    return getattr(importlib.import_module(module), name, None)


def show_figure(builder: Callable[..., go.Figure], *args: Any, key: str,
                caption: str | None = None, live: dict | None = None, **kwargs: Any) -> None:
    """Draw ``builder(*args, **kwargs)`` (a figure builder of :mod:`lnviz.charts`) with
    ``st.plotly_chart``, plus a "Data behind this figure" expander with one table per trace.

    With ``live`` (the keywords of :func:`lnviz.ui.live.live_figure` but the figure and key),
    the figure is drawn in the browser with Plotly.js instead, and follows a live panel's
    controls while they move; where Plotly.js cannot be served, st.plotly_chart draws it.

    The figure (and its tables, once asked for) come from the session's cache, keyed by the
    builder and its arguments.
    """
    module, name = getattr(builder, "__module__", ""), getattr(builder, "__name__", "")
    if not module.startswith("lnviz.charts.") or _builder(module, name) is not builder:
        raise TypeError(f"show_figure takes a figure builder from lnviz.charts, not {builder!r}")
    arguments = (fingerprint(args), fingerprint(kwargs))
    fig = remember(f"figure {module}.{name}", arguments,
                   lambda: _FinishedFigure(figure_dict(builder, *args, **kwargs)))
    if live is not None and _live_figures():
        from lnviz.ui.live import live_figure

        live_figure(fig.to_dict(), key=key, **live)
    else:
        st.plotly_chart(fig, key=key)
    if caption:
        st.caption(caption)
    if not fig.has_tables:
        return
    # The tables are sent only while the expander is open (opening it reruns the page, or the
    # fragment the figure is in): most learners never open it, and converting every table on
    # every rerun would cost each rerun several milliseconds per figure.
    data = st.expander("Data behind this figure", key=f"{key}_data", on_change="rerun")
    with data:
        if not data.open:
            return
        # Built again from the arguments when a learner opens them, rather than kept with
        # every figure that nobody inspects.
        tables = remember(f"tables {module}.{name}", arguments,
                          lambda: figure_tables(builder(*args, **kwargs)))
        for title, table in tables:
            st.markdown(f"**{title}**")
            st.dataframe(table, height=min(35 * (len(table) + 1) + 3, 300))
