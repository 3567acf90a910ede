"""lnviz app entry point: ``streamlit run app.py``."""

import streamlit as st

st.set_page_config(page_title="lnviz — see normalization", page_icon="📐", layout="wide")
st.title("lnviz")
st.latex(r"y = \gamma \cdot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta")
st.write("A visual explorer of Layer Normalization and its relatives.")
