"""lnviz — the app's entry point and shared frame: ``streamlit run app.py``.

Sets up the page, draws the shared sidebar (device, precision, seed) and routes to the pages in
app_pages/ with st.navigation. Pages read the sidebar's choices with
lnviz.ui.state.current_settings.
"""

import sys
from pathlib import Path

import streamlit as st

from lnviz.ui.cache import enter_page
from lnviz.ui.memory import collect_garbage_periodically, return_freed_memory
from lnviz.ui.pages import PAGES
from lnviz.ui.state import clean_query_params, release_upload, sidebar_settings
from lnviz.ui.static import serve_from

return_freed_memory()  # once per process: a session's memory leaves with the session
collect_garbage_periodically()  # once per process: so do closed sessions' reference cycles
serve_from(Path(__file__).parent / "static")  # Plotly.js for the live figures goes there
st.set_page_config(
    page_title="lnviz — see what normalization does",
    page_icon="📐",
    layout="wide",
    menu_items={"About": "lnviz: a visual explorer of LayerNorm, BatchNorm and their relatives."},
)
page = st.navigation(
    {section: [st.Page(p.path, title=p.title, icon=p.icon, default=p.default)
               for p in pages] for section, pages in PAGES.items()}
)
clean_query_params()  # after st.navigation: a run it starts again stays on this page
# What a page computed is kept only while the learner is on it: the inspector's file, the
# LN-LSTM page's uploaded data set and every other result of the page left are dropped here
enter_page(page.url_path)
if page.url_path != "explorer":  # and an uploaded tensor only while the Explorer shows it
    release_upload()
# The first run after the server starts loads torch, numpy and plotly (seconds on a small
# machine): say so instead of showing a blank page. Later runs find them loaded. The placeholder
# is there on every run, empty on the later ones: were it only on the first, every element of
# that session's next run would sit one place further up, and Streamlit would mount the whole
# page afresh (the figures collapse while they redraw, and the page jumps to its end).
starting = st.empty()
loading = "torch" not in sys.modules
if loading:
    starting.info("Starting lnviz: loading PyTorch and the figures takes a few seconds "
                  "after the server starts…", icon=":material/hourglass_top:")
sidebar_settings()
page.run()
if loading:
    starting.empty()
