"""Download buttons; a small file's button delivers even when clicked while the page reruns.

Streamlit's ``st.download_button`` hands the browser a link to a file the server keeps for the
run that drew it. When the learner changes a control, the server starts a new run at once, but
the browser goes on showing the old run's buttons until the new ones arrive, and a click on one
asks for the old run's file. The server stops holding a run's files when the next run of the
session starts, and frees a file that no session holds at the second clean-up after that (every
run of every session ends with one: streamlit/runtime/media_file_manager.py). A busy browser
can be two runs behind, and a hosted class runs many sessions at once: the click then got
nothing ("Download.path: canceled" in the browser test on a busy machine). A deferred file's
callable goes at the first clean-up ("MediaFileStorageError: Deferred file … not found").

So a small payload travels with the page: the server sends its bytes with the button (a
``st.components.v2`` element, inline JavaScript in lnviz/ui/download.js), and a click saves
them from the browser's memory, asking the server for nothing and rerunning nothing. A large
payload would cost its size on every run that changes it, so it stays a deferred
``st.download_button``, built only when clicked (the MiniLM page's capture file, for one): a
click during a rerun can miss it, and Streamlit then shows its own error under the button.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable
from pathlib import Path

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

__all__ = ["INLINE_VALUES", "download_button"]

#: Payloads of at most this many values are built on every run and sent with the page (the
#: largest such .npz of the Explorer's intermediates takes about 3 ms to build, a CSV about
#: 4 ms; the largest, a CSV of 16,384 values, is about 0.2 MB of base64).
INLINE_VALUES = 16_384

_HERE = Path(__file__).parent
_component = st.components.v2.component(
    "lnviz_download",
    html='<div class="lv-dl"><button type="button" class="lv-download" aria-describedby="tip">'
         '</button><div class="lv-tip" id="tip" role="tooltip"></div></div>',
    css=(_HERE / "download.css").read_text(),
    js=(_HERE / "live" / "common.js").read_text() + (_HERE / "download.js").read_text(),
)


def _sent(label: str, payload: bytes | str, file_name: str, help: str) -> dict:
    """What the browser's button is sent: its label and help, the file's name and type, and
    its bytes in base64 (text as UTF-8, typed as st.download_button types it)."""
    data = payload.encode() if isinstance(payload, str) else payload
    mime = "text/plain" if isinstance(payload, str) else "application/octet-stream"
    return dict(label=label, help=help, name=file_name, mime=mime,
                b64=base64.b64encode(data).decode("ascii"))


def download_button(where: DeltaGenerator | None, label: str, build: Callable[[], bytes | str],
                    file_name: str, *, values: int, help: str) -> None:
    """A download button in ``where`` (a container or column; None: the page) for what
    ``build()`` returns, a payload of ``values`` numbers: built now and sent with the page when
    small, else built when clicked.

    Pass ``build`` as a ``functools.partial`` of a module-level function: a lambda written in a
    page keeps every variable of that page's run alive for as long as Streamlit keeps it.
    """
    if values > INLINE_VALUES:
        (where or st).download_button(label, build, file_name, help=help, on_click="ignore")
        return
    with where if where is not None else contextlib.nullcontext():
        _component(key=f"download_{file_name}", width="content",
                   data=_sent(label, build(), file_name, help))
