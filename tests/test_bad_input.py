"""Bad input never crashes a page: every odd tensor gets a clear message, every page survives a
URL full of junk, and nothing a learner sends (file names included) is run or used as a path.

The Explorer is where learners bring their own tensors (uploads, typed numbers); the other pages
take only bounded controls, whose one outside door is the URL (every control is bound to it).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from pageutil import ALL_PAGES, ROOT, alerts, figures, open_page, set_live
from streamlit.testing.v1 import AppTest

from lnviz.batch import Batch, NormSpec
from lnviz.lessons.explorer import explain, explore
from lnviz.ui.state import holds_several, plausible_url_value

EXPLORER = "app_pages/explorer.py"


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def upload(name: str, content: bytes, norm: str | None = None):
    at = open_page(EXPLORER)
    at.segmented_control(key="src").set_value("upload").run()
    at.file_uploader(key="upload").upload(name, content).run()
    if norm is not None:
        at.segmented_control(key="norm").set_value(norm).run()
    assert not at.exception, at.exception
    return at


# --- explain(): the reasons, as plain functions ------------------------------------------------


def notes_for(values, norm: str = "LayerNorm", eps: float = 1e-5, dtype: str = "float32"):
    spec = NormSpec(norm, eps=eps)
    ex = explore(Batch(np.asarray(values, dtype=np.float64), "NC"), spec, dtype=dtype)
    return ex, explain(ex, spec, dtype)


def test_an_ordinary_batch_needs_no_explanation():
    ex, notes = notes_for([[1.0, 2.0, 3.0], [4.0, 6.0, 8.0]])
    assert notes == [] and ex.overflowed_groups == ex.overflowed_inputs == 0
    assert ex.smallest_group == 3


def test_values_whose_square_overflows_float32_are_explained_and_float64_is_exact():
    values = [[1e30, -2e30, 3e30], [1.0, 2.0, 3.0]]
    ex, notes = notes_for(values)
    assert ex.overflowed_groups == 1 and len(notes) == 1
    assert "σ² overflowed in 1 group" in notes[0] and "float64" in notes[0]
    np.testing.assert_array_equal(ex.output_values[0], 0.0)  # lnviz: σ² = inf, so 0
    ex64, notes64 = notes_for(values, dtype="float64")
    assert notes64 == []
    row = np.array(values[0]) / 1e30
    np.testing.assert_allclose(ex64.output_values[0], (row - row.mean()) / row.std(), atol=1e-6)


def test_values_beyond_the_dtype_are_told_apart_from_nan_in_the_data():
    ex, notes = notes_for([[1e300, 1.0, 2.0], [1.0, 2.0, 3.0]])
    assert ex.overflowed_inputs == 1
    assert "1 input values lie beyond float32's range" in notes[0]
    ex, notes = notes_for([[np.nan, 1.0, 2.0], [1.0, np.inf, 3.0]])
    assert ex.overflowed_inputs == 0
    assert notes[0].startswith("The input holds 2 NaN or infinite values")


def test_eps_zero_on_a_constant_group_and_single_value_groups():
    _, notes = notes_for([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]], eps=0.0)
    assert len(notes) == 1 and "0/0 is NaN" in notes[0]
    ex, notes = notes_for([[1.0], [5.0]])  # LayerNorm over one feature
    assert ex.smallest_group == 1 and "single value" in notes[0]
    np.testing.assert_array_equal(ex.output_values, 0.0)  # x − μ = 0 everywhere: y = β


# --- The Explorer with odd uploads --------------------------------------------------------------


@pytest.mark.parametrize(("name", "content", "norm", "kind", "message", "charts"), [
    ("nan.npy", npy(np.array([[1, np.nan, 3], [4, 5, 6]], np.float32)), None, "warning",
     "1 NaN or infinite values", 3),
    ("inf.npy", npy(np.array([[1, np.inf, 3], [4, 5, 6]], np.float32)), None, "warning",
     "1 NaN or infinite values", 3),
    ("huge.npy", npy(np.array([[1e30, -2e30, 3e30], [1, 2, 3]], np.float32)), None, "warning",
     "σ² overflowed", 3),
    ("beyond.npy", npy(np.array([[1e300, 1, 2], [1, 2, 3]])), None, "warning",
     "beyond float32's range", 3),
    ("one_feature.npy", npy(np.arange(4, dtype=np.float32).reshape(4, 1)), None, "warning",
     "single value", 3),
    ("one_sample.npy", npy(np.arange(5, dtype=np.float32).reshape(1, 5)), "BatchNorm", "error",
     "more than one value per channel", 0),
    ("empty.npz", npz(), None, "error", "holds no arrays", 0),
    ("zero_size.npy", npy(np.zeros((3, 0), np.float32)), None, "error", "nothing to normalize", 0),
    ("five_d.npy", npy(np.zeros((1, 2, 1, 2, 2), np.float32)), None, "error", "1-D to 4-D", 0),
    ("text.npy", b"print('hello')", None, "error", "not a .npy or .npz file", 0),
])
def test_every_odd_upload_gets_a_clear_message(name, content, norm, kind, message, charts):
    at = upload(name, content, norm)
    found = alerts(at)[kind]
    assert any(message in text for text in found), alerts(at)
    assert len(figures(at)) == charts  # NaN, inf and overflow still draw every figure


def test_overflow_is_not_reported_as_an_lnviz_bug():
    at = upload("huge.npy", npy(np.array([[1e30, -2e30, 3e30], [1, 2, 3]], np.float32)))
    assert not alerts(at)["error"]
    assert any("Both overflowed" in w for w in alerts(at)["warning"])
    at.selectbox(key="precision").set_value("float64").run()
    assert not alerts(at)["warning"] and "matches" in alerts(at)["success"][0]


def test_eps_zero_on_a_constant_row_of_an_upload():
    at = upload("constant.npy", npy(np.array([[3, 3, 3], [1, 2, 3]], np.float32)))
    set_live(at, eps=0.0)
    assert not at.exception
    assert any("0/0 is NaN" in w for w in alerts(at)["warning"]), alerts(at)
    assert len(figures(at)) == 3


# --- File names are text, never markup or paths -------------------------------------------------


def test_a_hostile_file_name_is_neither_markup_nor_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = '../../<img src=x onerror="alert(1)">.npy'
    at = upload(name, npy(np.ones((2, 3), np.float32)))
    assert len(figures(at)) == 3
    assert list(tmp_path.iterdir()) == []  # nothing written, nowhere
    assert not (tmp_path.parent.parent / '<img src=x onerror="alert(1)">.npy').exists()
    for element in at.markdown:  # markdown is shown without raw HTML (see the next test)
        assert "onerror" not in element.value or "<img" not in element.value


def _app_sources() -> list[Path]:
    """app.py, every page and every module of lnviz: what a learner's input can reach."""
    pages = sorted((ROOT / "app_pages").glob("*.py"))
    assert len(pages) >= 10, "the page folder moved: these checks would read nothing"
    return [ROOT / "app.py", *pages, *sorted((ROOT / "lnviz").rglob("*.py"))]


def test_no_raw_html_anywhere_in_the_app():
    """Streamlit escapes text unless a call passes ``unsafe_allow_html=True`` (or uses st.html):
    no page and no part of lnviz does, so nothing a learner types or uploads becomes markup."""
    sources = _app_sources()
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in sources
                 for n, line in enumerate(Path(path).read_text().splitlines(), 1)
                 if re.search(r"unsafe_allow_html\s*=\s*True|\bst\.html\(|components\.html\(",
                              line)]
    assert offenders == []


def test_no_pickle_on_the_path_of_user_data():
    """Uploads are parsed by lnviz.data.files (never unpickled, torch.save files read with
    torch's weights-only unpickler alone; hostile corpus: test_files.py); nothing imports the
    pickle module, calls torch.load without weights_only=True or evaluates text (module.eval()
    is fine)."""
    sources = _app_sources()
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in sources
                 for n, line in enumerate(Path(path).read_text().splitlines(), 1)
                 if re.search(r"\bimport pickle\b|allow_pickle\s*=\s*True|"
                              r"torch\.load\((?!.*weights_only=True)|(?<![.\w])(eval|exec)\(",
                              line)]
    assert offenders == []


# --- Every page survives a URL full of junk -----------------------------------------------------

JUNK = ["", "abc", "-1", "1e309", "nan", "9" * 40, "<script>", "Random+batch", "0"]


def open_with_query(page: str, query: dict[str, str]) -> AppTest:
    """Run ``page`` as if its URL carried ``query`` (values that may well be refused)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params.update(query)
    at.switch_page(page).run()
    return at


@pytest.mark.parametrize("page", ALL_PAGES)
def test_every_page_survives_junk_in_every_url_parameter(page):
    at = open_page(page)
    keys = sorted({w.key for kind in ("slider", "select_slider", "number_input", "selectbox",
                                      "segmented_control", "radio", "toggle", "multiselect",
                                      "text_area", "text_input", "checkbox")
                   for w in getattr(at, kind) if w.key and not w.key.startswith("$$")})
    assert keys, f"{page} has no controls bound to the URL"
    # which parameters may repeat in a link (lnviz.ui.state.holds_several): a multiselect's
    several = {w.key for w in at.multiselect if w.key and not w.key.startswith("$$")}
    assert {key for key in keys if holds_several(key)} == several, page
    for k in range(len(JUNK)):  # every key gets every junk value once
        query = {key: JUNK[(k + i) % len(JUNK)] for i, key in enumerate(keys)}
        at = open_with_query(page, query)
        assert not at.exception, (page, query, at.exception)
        assert at.title and at.title[0].value
    # what a learner typed is theirs: no result kept for every session was computed from it
    from lnviz.ui import cache

    typed = {"abc", "<script>", "Random+batch", "9" * 40}
    assert not [slot for slot in cache._FOR_ALL if typed & set(_strings(slot))], page


def _strings(key) -> list[str]:
    """The strings in a cache key (lnviz.ui.cache.fingerprint keeps text as it is)."""
    if isinstance(key, str):
        return [key]
    return [text for part in key for text in _strings(part)] if isinstance(key, tuple) else []


@pytest.mark.parametrize(("value", "kept"), [
    ("3", True), ("1e-3", True), ("Random batch", True), ("-2.5", True), (str(2**53), True),
    ("", False), ("1e309", False), ("-inf", False), ("nan", False), (str(2**53 + 2), False),
    ("x" * 201, False),
])
def test_only_values_a_control_could_have_written_stay_in_the_url(value, kept):
    assert plausible_url_value(value) is kept


# --- refusal(): the one way a page shows what lnviz refused -------------------------------------


def _refusing_page(stop: bool) -> None:
    import streamlit as st

    from lnviz.data.files import TensorFileError
    from lnviz.ui.messages import refusal

    with refusal("Cannot read it: ", icon=":material/block:", stop=stop):
        raise TensorFileError("**bold** [link](https://example.com)")
    st.markdown("after the block")


@pytest.mark.parametrize("stop", [True, False])
def test_refusal_shows_the_message_as_plain_text_and_stops_unless_told(stop):
    at = AppTest.from_function(_refusing_page, kwargs={"stop": stop}).run()
    assert not at.exception, at.exception
    assert alerts(at)["error"] == ["Cannot read it: **bold** [link](https://example.com)"]
    assert at.error[0].icon == ":material/block:"
    assert [m.value for m in at.markdown] == ([] if stop else ["after the block"])


def test_refusal_lets_other_errors_through_unless_named():
    def page() -> None:
        from lnviz.ui.messages import refusal

        with refusal(stop=False, errors=(RuntimeError, ValueError)):
            raise RuntimeError("out of memory")
        with refusal():
            raise KeyError("a bug, not a refusal")

    at = AppTest.from_function(page).run()
    assert alerts(at)["error"] == ["out of memory"]
    assert len(at.exception) == 1  # the KeyError, left to Streamlit (its text is redacted)


#: URL values Streamlit 1.67 itself fails on when a control bound to the URL reads them, before
#: the control can check them: an integer st.number_input given a number beyond float's range
#: raises OverflowError, and a required st.segmented_control given an empty value returns None.
CRASHING_VALUES = [
    ("app_pages/home.py", "number_input", "seed", "1e309"),
    ("app_pages/home.py", "number_input", "seed", "-1e309"),
    ("app_pages/home.py", "number_input", "seed", "inf"),
    ("app_pages/explorer.py", "number_input", "group", "1e309"),
    ("app_pages/gradients.py", "number_input", "gr_row", "inf"),
    ("app_pages/ln_lstm.py", "number_input", "tr_steps", "-1e309"),
    ("app_pages/explorer.py", "segmented_control", "norm", ""),
    ("app_pages/epsilon.py", "segmented_control", "ep_vec", ""),
    ("app_pages/shapes.py", "segmented_control", "sh_tensor", ""),
]


@pytest.mark.parametrize(("page", "kind", "key", "value"), CRASHING_VALUES,
                         ids=[f"{c[0][10:-3]}-{c[2]}={c[3]}" for c in CRASHING_VALUES])
def test_a_value_streamlit_fails_on_leaves_the_link_and_the_rest_of_it_opens(page, kind, key,
                                                                          value):
    default = getattr(open_page(page), kind)(key=key).value
    at = open_with_query(page, {key: value, "precision": "float64"})
    assert not at.exception, at.exception
    assert getattr(at, kind)(key=key).value == default
    assert key not in at.query_params
    # the link's other settings survive the run that starts again from the cleaned URL
    assert at.selectbox(key="precision").value == "float64"
    assert at.query_params.get("precision") == "float64"
