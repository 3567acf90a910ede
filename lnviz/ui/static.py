"""The app's static folder: with ``server.enableStaticServing`` Streamlit serves the folder
``static/`` beside the app's main script at ``app/static/``. The figures that follow a live
control draw with Plotly.js in the browser (:mod:`lnviz.ui.live`), loaded from there.

The app names its folder (app.py: ``serve_from(Path(__file__).parent / "static")``); lnviz
never writes inside its own package, wherever it is installed. An app that names none, or whose
folder cannot be written, gets its figures from ``st.plotly_chart``, which follow a control when
it is let go."""

from __future__ import annotations

import shutil
from pathlib import Path

import streamlit as st

__all__ = ["plotly_js", "serve_from"]

#: The app's static folder, once app.py has named it.
_folder: Path | None = None


def serve_from(folder: Path) -> None:
    """Name the folder Streamlit serves as ``app/static/`` (one per server process)."""
    global _folder
    _folder = Path(folder)


def plotly_js() -> bool:
    """Put the Plotly.js that the plotly package ships (plotly/package_data/plotly.min.js) into
    the app's static folder, where the page's live figures load it; returns whether it is there.
    Copied once per process, and again only when the package's copy changes (another plotly
    version): the file is not part of the repository."""
    return _folder is not None and _copied(str(_folder))


@st.cache_resource(show_spinner=False)
def _copied(folder: str) -> bool:
    import plotly

    source = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    target = Path(folder) / "plotly.min.js"
    try:
        if not target.is_file() or target.stat().st_size != source.stat().st_size:
            target.parent.mkdir(exist_ok=True)
            partial_copy = target.with_suffix(".tmp")
            shutil.copyfile(source, partial_copy)
            partial_copy.replace(target)  # whole or not at all, for a server reading it now
        return True
    except OSError:  # a read-only deployment: the figures are drawn by st.plotly_chart
        return False
