"""lnviz — the app's entry point and shared frame: ``streamlit run app.py``.

Sets up the page, draws the shared sidebar (device, precision, seed) and routes to the pages in
pages/ with st.navigation. Pages read the sidebar's choices with lnviz.ui.state.current_settings.
"""

import streamlit as st

from lnviz.ui.pages import PAGES
from lnviz.ui.source import release_upload
from lnviz.ui.state import clean_query_params, logged_run, sidebar_settings

st.set_page_config(
    page_title="lnviz — see what normalization does",
    page_icon="📐",
    layout="wide",
    menu_items={"About": "lnviz: a visual explorer of LayerNorm, BatchNorm and their relatives."},
)
with logged_run() as run:
    clean_query_params()
    page = st.navigation(
        {section: [st.Page(p.path, title=p.title, icon=p.icon, default=p.default)
                   for p in pages] for section, pages in PAGES.items()}
    )
    run.page = page.title
    if page.url_path != "explorer":  # an uploaded tensor is kept only while the Explorer shows it
        release_upload()
    sidebar_settings()
    page.run()
