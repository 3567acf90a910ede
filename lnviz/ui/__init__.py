"""The few Streamlit helpers pages share: the sidebar settings, the data-source picker and the
normalization controls. This is the only part of lnviz that imports Streamlit."""
