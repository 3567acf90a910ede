"""The way back from a concept page to the Start-here path: one line at the end of each page."""

from __future__ import annotations

import streamlit as st

from lnviz.lessons.start_here import STEP_KEY, outline_for_page

#: The path's page, as the navigation knows it.
PATH_PAGE = "app_pages/start_here.py"


def path_link(page: str) -> None:
    """A link back to the step of the Start-here path that sends learners to ``page`` (its
    name: "bn_vs_ln"), opened on that step."""
    outline = outline_for_page(page)
    if outline is None:
        raise ValueError(f"no step of the Start-here path links to {page!r}")
    st.divider()
    st.page_link(PATH_PAGE, query_params={STEP_KEY: outline.tab}, icon=":material/route:",
                 label=f"Part of the Start-here path: step {outline.number}, "
                       f"{outline.title} — back to it",
                 help="The twenty-minute path through normalization, opened on the step that "
                      "led here.")
