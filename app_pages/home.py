"""Home: a map of the Start-here path and of every page."""

import streamlit as st

from lnviz.lessons.common import GLOSSARY, SOURCES
from lnviz.lessons.start_here import OUTLINE
from lnviz.ui.pages import PAGES
from lnviz.ui.path import PATH_PAGE, STEP_KEY

st.title("lnviz — see what normalization does")
st.markdown(
    "A normalization layer subtracts a mean μ, divides by a standard deviation √(σ² + ε), "
    "then lets the network rescale with γ and β. BatchNorm, LayerNorm, GroupNorm and "
    "InstanceNorm differ in *which* numbers share that μ and σ; RMSNorm subtracts no mean and "
    "divides by the root mean square; and BatchNorm in evaluation mode uses the running "
    "statistics it kept during training instead of the batch's own."
)
st.latex(r"y = \gamma \cdot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta")
path, pages = st.columns(2, gap="large")
with path:
    st.subheader("The path")
    st.caption("Twenty minutes in eight steps, each a prediction to check. New here? Begin "
               "at step 1.")
    for outline in OUTLINE:
        st.page_link(PATH_PAGE, label=f"{outline.number}. {outline.title}",
                     query_params={STEP_KEY: outline.tab},
                     help=f"The Start-here path, opened on step {outline.number} "
                          f"(about {outline.minutes} minutes).")
with pages:
    st.subheader("The pages")
    for section, infos in PAGES.items():
        st.markdown(f"**{section}**")
        for info in infos:
            if info.path in ("app_pages/home.py", PATH_PAGE):
                continue
            st.page_link(info.path, label=info.title, icon=info.icon)
            st.caption(info.summary)

with st.expander("Glossary: the terms the pages use", icon=":material/menu_book:"):
    st.markdown("\n".join(f"- **{term}**: {meaning}." for term, meaning in GLOSSARY.items()))

with st.expander("Sources: the course notes the pages quote", icon=":material/library_books:"):
    st.markdown("The pages reproduce these notes' worked examples and numbers, and say where "
                "a note slips and what the fix is.\n"
                + "\n".join(f"- **{name[0].upper() + name[1:]}**: {what}."
                             for name, what in SOURCES.items()))
