"""The yardstick for tools/livebench.py: a trivial Streamlit page with one slider and one chart.

``streamlit run tools/trivial_app.py``. Whatever Streamlit and the browser take to settle after a
slider move here is the floor that no page of lnviz can go below in the same browser.

With ``?figures=`` (comma-separated: ``heatmaps``, ``stats``, ``distributions``, ``lines``) the
page also draws the Explorer's three figures (through lnviz's own ``show_figure``) or three more
20-point charts, all following the slider: ``livebench.py --figures`` times what each costs.
With ``?text=N`` it also writes N short paragraphs that do not change, and with ``?changing=N``
N that follow the slider: what a page's element count costs, apart from its figures.
"""

import sys
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.title("Trivial page")
k = st.slider("k", 1, 20, 5, key="k", help="A number the chart shows.")
x = np.arange(20)
st.plotly_chart(go.Figure(go.Scatter(x=x, y=np.sin(x / k))), key="chart")

for i in range(int(st.query_params.get("text", 0))):
    st.markdown(f"Paragraph {i}: the same on every run.")
for i in range(int(st.query_params.get("changing", 0))):
    st.markdown(f"Paragraph {i}: k is {k}.")
figures = set(st.query_params.get("figures", "").split(","))
if "lines" in figures:
    for i in range(3):
        st.plotly_chart(go.Figure(go.Scatter(x=x, y=np.cos(x / k + i))), key=f"line{i}")
if figures & {"heatmaps", "stats", "distributions"}:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # lnviz is beside tools/
    from lnviz import charts
    from lnviz.data import get_preset
    from lnviz.lessons.explorer import histogram
    from lnviz.ui.figures import show_figure

    x_in = get_preset("padded_tokens").values  # the Explorer's default batch, 8 × 3 tokens
    x_in = x_in.reshape(-1, x_in.shape[-1])
    y = (x_in - x_in.mean(-1, keepdims=True)) / x_in.std(-1, keepdims=True) * k / 5
    rows = np.repeat(np.arange(len(x_in)), x_in.shape[1]).reshape(x_in.shape)
    if "heatmaps" in figures:
        show_figure(charts.explorer.norm_heatmaps, x_in, y, rows, key="heatmaps")
    if "stats" in figures:
        show_figure(charts.explorer.group_stats_figure, x_in.mean(-1), x_in.std(-1), y.mean(-1),
                    y.std(-1), key="stats")
    if "distributions" in figures:
        show_figure(charts.explorer.distributions_figure, histogram(x_in.ravel()),
                    histogram(y.ravel()), key="distributions")
