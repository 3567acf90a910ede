"""Drawing a figure the accessible way: the chart, and its numbers as tables behind an
expander (for screen readers, keyboard users and anyone who wants the values)."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from lnviz.charts import figure_tables


def show_figure(fig: go.Figure, key: str, caption: str | None = None) -> None:
    """``st.plotly_chart`` plus a "Data behind this figure" expander with one table per trace."""
    st.plotly_chart(fig, key=key)
    if caption:
        st.caption(caption)
    tables = figure_tables(fig)
    if not tables:
        return
    with st.expander("Data behind this figure"):
        for name, table in tables:
            st.markdown(f"**{name}**")
            st.dataframe(table, height=min(35 * (len(table) + 1) + 3, 300))
