"""Home: the LayerNorm formula, and a sentence and a link for every page."""

import streamlit as st

from lnviz.ui.pages import PAGES

st.title("lnviz — see what normalization does")
st.markdown(
    "Neural networks keep their activations in a healthy range by **normalizing** them: "
    "subtract a mean, divide by a standard deviation, then let the network rescale. "
    "The layers differ only in *which* numbers share that mean and deviation."
)
st.latex(r"y = \gamma \cdot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta")
st.markdown(
    "- **μ, σ²** — the mean and (biased) variance of a group of values;\n"
    "- **ε** — a small constant so that a group with no spread never divides by zero;\n"
    "- **γ, β** — learned scale and shift, starting at 1 and 0.\n\n"
    "**LayerNorm** takes μ and σ across the features of *one* sample, so it never looks at the "
    "rest of the batch. **BatchNorm** takes them across the batch for *one* feature — which is "
    "why batch size, padding and train/eval mode change its answer."
)
for section, pages in PAGES.items():
    st.subheader(section)
    for page in pages:
        if page.path == "app_pages/home.py":
            continue
        st.page_link(page.path, label=page.title, icon=page.icon)
        st.caption(page.summary)
