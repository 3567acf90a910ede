"""Helpers the tests share: run a page through app.py with AppTest and read its figures, and the
batches several lessons' tests start from (tests/browserutil.py has the browser tests')."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from lnviz.batch import Batch
from lnviz.data import get_preset
from lnviz.lessons.smollm2 import BREAKS
from lnviz.models.llama import rms_norm_names
from lnviz.ui.messages import WORD_JOINER
from lnviz.ui.pages import PAGES

ROOT = Path(__file__).resolve().parents[1]
#: Every page of the navigation, as app.py routes to it.
ALL_PAGES = [p.path for pages in PAGES.values() for p in pages]


#: Pages that hold part of themselves back until their "Before you look" question is answered,
#: and the answer :func:`open_page` gives before the page's first run, as a learner who has
#: answered (no extra run): each answer's reply is tested in the page's own tests, right and
#: wrong. Beyond's and Where the norm sits' tests answer their questions themselves.
ANSWERS: dict[str, dict[str, str]] = {
    "app_pages/epsilon.py": {"ep_cancel_guess": "1% or more off, perhaps even negative"},
    "app_pages/padding.py": {"pd_guess": "closer to the pads' value"},
    "app_pages/gradients.py": {f"gr_guess_{kind}": "one feature's column"
                               for kind in ("one-hot", "ones", "random")},
    "app_pages/shapes.py": {f"sh_guess_{example}_{dims}": "no" for dims in (1, 2, 3)
                            for example in ("two words", "two words ×2", "2-D", "3-D", "4-D")},
    "app_pages/minilm.py": {f"tf_guess_{k}": "the first token" for k in range(13)},
    # SmolLM2's part 4: the break's question for every norm and way to break it (its third
    # question, which runs all four ways, only where a test asks it)
    "app_pages/smollm2.py": {"sl_next_guess": "over 75%", "sl_massive_guess": "the first token",
                             **{f"sl_stays_guess_{name}_{how}": "it changes"
                                for name in rms_norm_names() for how in BREAKS}},
    "app_pages/gemma.py": {"g3_size_guess": "under 0.5",
                           "g3_growth_guess": "post-LN (all-MiniLM-L6-v2)",
                           "g3_qk_guess": "in every block",
                           "g3_offset_guess": "about the same (within 10%)",
                           "g3_where_guess": "at no feature in particular"},
    # EfficientNet's part 1 alone: its folded parts each run the network dozens of times, and
    # its tests answer them where they ask
    "app_pages/efficientnet.py": {"en_alone_guess": "about as sure as in eval mode"},
    "app_pages/bn_vs_ln.py": {"bl_guess": "BatchNorm's only"},
    "app_pages/scale_shift.py": {"ss_guess": "mean β, standard deviation |γ|"},
    "app_pages/geometry.py": {f"gm_guess_{norm}": "all on one point"
                              for norm in ("LayerNorm", "RMSNorm", "BatchNorm")},
}


def open_page(page: str, query: dict[str, str] | None = None, timeout: float = 60, *,
              asked: bool = False) -> AppTest:
    """Run app.py (the shared frame) on ``page`` (e.g. "app_pages/explorer.py"), its questions
    answered (:data:`ANSWERS`), or with ``asked`` as a shared link opens it: unanswered."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.query_params.update(query or {})  # as if the page's URL carried them
    if not asked:
        for key, answer in ANSWERS.get(page, {}).items():
            at.session_state[key] = answer
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def load_afresh(monkeypatch) -> None:
    """For one test, pages load their models themselves (``lnviz.ui.cache.shared`` calls the
    loader) instead of taking the copy this process holds: a test of what a page says when a
    model's package is missing, without ``st.cache_resource.clear()``, which dropped the copy
    and made every later test of the process load the model again (9 s for Gemma 3 then)."""
    from lnviz.ui import cache

    monkeypatch.setattr(cache, "shared", lambda load: load())


def held_result(at: AppTest, computation: str) -> tuple[tuple, object]:
    """The result of ``computation`` ("lnviz.lessons.minilm.analyze") the session used last,
    and its slot in the session's cache (lnviz.ui.cache)."""
    from lnviz.ui.cache import STORE_KEY

    *_, (slot, entry) = [((c, k), e) for (c, k), e in at.session_state[STORE_KEY].items()
                         if c == computation]
    return slot, entry.value


def figures(at: AppTest) -> list[dict]:
    """Every Plotly figure on the page, as its JSON spec, in page order: those st.plotly_chart
    draws and those drawn in the browser to follow a live control (lnviz.ui.live.live_figure,
    whose data carries the same spec)."""
    return [json.loads(e.proto.spec) if e.type == "plotly_chart"
            else json.loads(e.proto.json)["figure"] for e in _figure_elements(at.main)]


def downloads(at: AppTest) -> dict[str, dict]:
    """The page's download buttons by label: a small payload's button (lnviz.ui.downloads)
    with its file's ``name``, ``mime`` and ``content`` (the bytes it saves when clicked), a
    large one's ``st.download_button`` as ``{"proto": …}`` (built on the server when clicked)."""
    shown: dict[str, dict] = {}
    for element in at.get("bidi_component"):
        if element.proto.component_name == "lnviz_download":
            sent = json.loads(element.proto.json)
            shown[sent["label"]] = dict(sent, content=base64.b64decode(sent["b64"]))
    for button in at.get("download_button"):
        shown[button.proto.label] = {"proto": button.proto}
    return shown


def live_controls(at: AppTest) -> dict:
    """What the Explorer's ε, γ and β controls (lnviz.ui.live.live_panel) were sent in the last
    run: their settled values under ``server``, their help and note, and the input."""
    panels = [e for e in at.get("bidi_component") if e.proto.component_name == "lnviz_live_norm"]
    assert len(panels) == 1, f"{len(panels)} sets of ε, γ and β controls"
    return json.loads(panels[0].proto.json)


def set_live(at: AppTest, **values: float) -> AppTest:
    """Set live controls' values by their session keys (the Explorer's eps, gamma and beta,
    Scale and shift's ss_gamma and ss_beta) as letting go of them does (the session's values,
    which lnviz.ui.params.live_values reads), and run the page."""
    for key, value in values.items():
        at.session_state[key] = value
    return at.run()


def _figure_elements(node) -> list:
    found = []
    for child in getattr(node, "children", {}).values():
        kind = getattr(child, "type", None)
        if kind == "plotly_chart" or (kind == "bidi_component"
                                      and child.proto.component_name == "lnviz_live_figure"):
            found.append(child)
        found += _figure_elements(child)
    return found


def decode(value: object) -> np.ndarray:
    """A Plotly array (plain list or the base64 typed-array form) as a NumPy array."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        if shape:
            array = array.reshape([int(s) for s in str(shape).split(",")])
        return array
    return np.asarray(value)


def trace_data(at: AppTest, figure: int, trace: int, field: str = "z") -> np.ndarray:
    return decode(figures(at)[figure]["data"][trace][field])


def shown_text(markdown: str) -> str:
    """The characters markdown made by :func:`lnviz.ui.messages.plain` renders as (any other
    markdown comes back unchanged, unless it escapes a character itself)."""
    text = markdown.replace("  \n", "\n").replace(WORD_JOINER, "")
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)


def alerts(at: AppTest) -> dict[str, list[str]]:
    """Each kind of alert box on the page: the text it shows."""
    return {kind: [shown_text(box.value) for box in getattr(at, kind)]
            for kind in ("error", "warning", "success", "info")}


def step_table(at: AppTest) -> pd.DataFrame:
    """The Explorer's step-by-step table: the st.dataframe, or the table drawn in the browser
    to follow the live controls (lnviz.ui.live.live_table), as the server sent it."""
    drawn = [e for e in at.get("bidi_component") if e.proto.component_name == "lnviz_live_table"]
    if not drawn:
        return table_with(at, "x̂").value
    data = json.loads(drawn[0].proto.json)
    return pd.DataFrame({name: np.frombuffer(base64.b64decode(cells), "<f8")
                         if isinstance(cells, str) else cells
                         for name, cells in data["cells"].items()})[data["columns"]]


def table_with(at: AppTest, column: str):
    """The first st.dataframe on the page whose table has ``column`` (figures' data tables
    behind their expanders come first on some pages, so position is no guide)."""
    return next(d for d in at.dataframe if column in d.value.columns)


def padded() -> Batch:
    """The seeds' padded two-sentence batch, with its mask and token labels."""
    p = get_preset("padded_tokens")
    return Batch(p.values, "NLC", p.mask, p.labels)


#: The widget kinds whose help texts :func:`page_text` reads.
_HELPED = ("radio", "slider", "select_slider", "selectbox", "multiselect", "number_input",
           "text_input", "text_area", "checkbox", "toggle", "button_group")


def page_text(at: AppTest) -> str:
    """Everything the page writes that a learner reads, one element to a line: its text
    elements, its code, its tables' cells and every control's help text."""
    parts = [e.value for kind in (at.markdown, at.caption, at.info, at.warning, at.success,
                                  at.error, at.code, at.latex, at.subheader) for e in kind]
    parts += [df.value.to_string() for df in at.dataframe]
    for kind in _HELPED:
        parts += [w.proto.help for w in at.get(kind) if getattr(w.proto, "help", "")]
    return "\n".join(parts)


def asks_first(page: str, key: str, right: str, query: dict[str, str] | None = None, *,
               hidden: tuple[str, ...] = ()) -> AppTest:
    """``page`` as a shared link opens it asks its question ``key`` ("Before you look: …"),
    unanswered, and holds back what answers it (fewer figures, and none of the texts
    ``hidden`` anywhere on the page, help texts and code included); then every option in turn:
    a reply of its own, "Right" for ``right`` and, for each other option, "Not quite" naming
    ``right``, with the held-back figures shown. Returns the page answered ``right``."""
    at = open_page(page, query, asked=True)
    question = at.radio(key=key)
    assert question.label.startswith("Before you look: ") and question.value is None
    held_back = len(figures(at))
    text = page_text(at)
    assert not [h for h in hidden if h in text], [h for h in hidden if h in text]
    options = [o for o in question.options if o != right] + [right]
    assert right in question.options, (right, question.options)
    for option in options:
        at.radio(key=key).set_value(option).run()
        assert not at.exception, at.exception
        replies = [m.value for m in at.markdown
                   if m.value.startswith(("**Right:**", "**Not quite:**"))]
        assert len(replies) == 1, replies
        if option == right:
            assert replies[0].startswith("**Right:** "), replies[0]
        else:
            assert replies[0].startswith(f"**Not quite:** the answer is “{right}”. "), replies[0]
        assert len(figures(at)) > held_back, option
    return at
