"""Download buttons that deliver even when they are clicked while the page reruns.

A ``st.download_button`` given a callable registers it under a new id on every run (a
*deferred* file). Streamlit forgets the previous run's ids at the end of the next run that
completes or is interrupted, in any session ("orphaned" callables), while the browser still
shows the previous run's buttons until the new ones arrive. A click on such a stale button,
which by default also asks for a rerun that interrupts the run in flight, then asked for a
forgotten id: ``MediaFileStorageError: Deferred file … not found``, and nothing arrived.

So small payloads are built on every run and handed over as bytes: a stored file's id is a hash
of its content, so a rerun that builds the same bytes keeps the same link, and a link the page
no longer shows is kept through one more clean-up. Large payloads stay deferred, since building
them on every run would cost seconds and their size again in memory. No button asks for a rerun
(``on_click="ignore"``): a download changes nothing on the page, and that rerun was what cut the
run in flight short.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

#: Payloads of at most this many values are built on every run and sent as bytes (the largest
#: such .npz of the Explorer's intermediates takes about 3 ms to build, a CSV about 4 ms).
INLINE_VALUES = 16_384


def download_button(where: DeltaGenerator | None, label: str, build: Callable[[], bytes | str],
                    file_name: str, *, values: int, help: str) -> None:
    """A download button in ``where`` (a container or column; None: the page) for what
    ``build()`` returns, a payload of ``values`` numbers: built now and sent as bytes when
    small, else built when clicked.

    Pass ``build`` as a ``functools.partial`` of a module-level function: a lambda written in a
    page keeps every variable of that page's run alive for as long as Streamlit keeps it.
    """
    data = build() if values <= INLINE_VALUES else build
    (where or st).download_button(label, data, file_name, help=help, on_click="ignore")
