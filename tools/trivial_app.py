"""The yardstick for tools/livebench.py: a trivial Streamlit page with one slider and one chart.

``streamlit run tools/trivial_app.py``. Whatever Streamlit and the browser take to settle after a
slider move here is the floor that no page of lnviz can go below in the same browser.
"""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.title("Trivial page")
k = st.slider("k", 1, 20, 5, key="k", help="A number the chart shows.")
x = np.arange(20)
st.plotly_chart(go.Figure(go.Scatter(x=x, y=np.sin(x / k))), key="chart")
