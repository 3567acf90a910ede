"""Shared links: user text is never rendered as markdown, long typed text stays out of
the URL, and the URL always holds what the screen shows when one control narrows another."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from pageutil import live_controls, open_page, shown_text
from streamlit.testing.v1 import AppTest

from lnviz import data
from lnviz.data.files import load_arrays
from lnviz.limits import MAX_SHARED_TEXT
from lnviz.ui.messages import WORD_JOINER, plain
from lnviz.ui.state import url_size

# --- Markdown escaping ------------------------------------------------------------------------

PUNCTUATION = r"!-/:-@\[-`{-~"
#: Markdown that is only text: escaped punctuation, any other character but a line break, and
#: hard line breaks ("  " + newline).
INERT = re.compile(rf"(?:\\[{PUNCTUATION}]|[^{PUNCTUATION}\n]|  \n)*")

HOSTILE = [
    "**IMPORTANT** [download the fixed notebook](https://evil.example/x.ipynb)",
    "x![img](http://evil.example/pixel.png)",
    "<img src=http://evil.example/p.png onerror=alert(1)> <b>bold</b> &amp;",
    "$x^2$ and $$\\frac{1}{0}$$",
    ":material/warning: :red[red text] :blue-badge[badge] :smile: :+1: :streamlit:",
    "`code` ~~struck~~ _em_ __strong__",
    "# heading\n- item\n1. item\n> quote\n    indented code\n---\n| a | b |",
    "www.evil.example a@evil.example https://evil.example",
]


def assert_inert(markdown: str) -> None:
    """No markup can start anywhere in ``markdown``: every punctuation character is escaped, no
    line is indented, and nothing Streamlit recognises in the unescaped text is left whole: a
    colon or @ runs into what follows (``:smile:``, ``https://``, ``a@b.c``), ``www.``, or an
    arrow or dash pair (``->``, ``<=``, ``--``)."""
    assert INERT.fullmatch(markdown), markdown
    assert not re.search(r"^[ \t]+\S", markdown, re.M), markdown
    assert not re.search(rf"\\[:@](?!{WORD_JOINER})", markdown), markdown
    assert not re.search(r"www\\\.", markdown, re.I), markdown
    assert not re.search(r"\\[-<>~]\\[->=]", markdown), markdown


def shown_as(text: str) -> str:
    """What a learner sees for ``text``: lines without their leading indentation."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.lstrip(" \t") for line in lines).replace(WORD_JOINER, "")


@settings(max_examples=300, deadline=None)
@given(hs.text(alphabet=hs.characters(codec="utf-8"), max_size=200)
       | hs.text(alphabet="*_[]()!<>`$:@#~|\\-+=.&{}\n\t abcw1\u2060", max_size=200))
def test_plain_text_has_no_markup_and_keeps_every_character(text):
    markdown = plain(text)
    assert_inert(markdown)
    assert shown_text(markdown) == shown_as(text)


@pytest.mark.parametrize("text", HOSTILE)
def test_each_hostile_string_becomes_inert_literal_text(text):
    markdown = plain(text)
    assert_inert(markdown)
    assert shown_text(markdown) == shown_as(text)


# --- Hostile text through every page input that reaches a message --------------------------------

def _error_of(call) -> str:
    with pytest.raises(ValueError) as err:
        call()
    return str(err.value)


def _npz_with_member(name: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, b"not an array")
    return buffer.getvalue()


def _check_error_box(at, expected: str) -> None:
    assert not at.exception, at.exception
    bodies = [e.value for e in at.error]
    assert bodies, "no error box"
    assert_inert(bodies[0])
    assert shown_text(bodies[0]) == shown_as(expected)


@pytest.mark.parametrize("text", HOSTILE)
def test_padding_lengths_from_a_link_show_as_text(text):
    at = open_page("app_pages/padding.py", {"pd_src": "Generated", "pd_lengths": text})
    _check_error_box(at, _error_of(lambda: data.parse_lengths(text)))


@pytest.mark.parametrize("text", HOSTILE)
def test_explorer_padded_lengths_from_a_link_show_as_text(text):
    at = open_page("app_pages/explorer.py", {"src": "Padded sequences", "plen": text})
    _check_error_box(at, _error_of(lambda: data.parse_lengths(text)))


@pytest.mark.parametrize("text", HOSTILE)
def test_explorer_typed_numbers_from_a_link_show_as_text(text):
    typed = "1," + text
    at = open_page("app_pages/explorer.py",
                   {"src": "Type numbers", "tmode": "text", "ttext": typed})
    _check_error_box(at, _error_of(lambda: data.parse_numbers(typed)))


def test_explorer_typed_numbers_typed_in_show_as_text():
    at = open_page("app_pages/explorer.py", {"src": "Type numbers", "tmode": "text"})
    typed = "1, 2\n3, x![img](http://evil.example/pixel.png)"
    at.text_area(key="ttext").set_value(typed).run()
    _check_error_box(at, _error_of(lambda: data.parse_numbers(typed)))


def test_npz_member_names_show_as_text():
    content = _npz_with_member("**x** [fix](https://evil.example/f).txt")
    expected = _error_of(lambda: load_arrays(content))
    assert "evil.example" in expected
    at = open_page("app_pages/explorer.py", {"src": "Upload a file"})
    at.file_uploader(key="upload").upload("a.npz", content).run()
    _check_error_box(at, expected)


def test_training_upload_names_show_as_text():
    name = "**x** [fix](evil.example) ![i](pixel.png)"
    at = open_page("app_pages/ln_lstm.py")
    at.radio(key="tr_data").set_value("mnist").run()
    at.file_uploader(key="tr_upload").upload(name, b"junk").run()
    assert not at.exception, at.exception
    (body,) = [e.value for e in at.error]
    assert_inert(body)
    assert shown_text(body).startswith("Cannot read the upload: ")
    assert name in shown_text(body)


# --- Long typed text stays out of the URL ------------------------------------------------------

def _numbers(count: int) -> str:
    return "\n".join(", ".join(f"{(i * 37 + j * 11) % 1000 / 7:.4f}" for j in range(100))
                     for i in range(count // 100))


def test_long_typed_numbers_work_and_stay_out_of_the_url():
    at = open_page("app_pages/explorer.py", {"src": "Type numbers", "tmode": "text"})
    text = _numbers(20_000)
    assert url_size(text) > 200_000  # what the old link carried: refused by the server
    at.text_area(key="ttext").set_value(text).run()
    assert not at.exception and not at.error
    assert "ttext" not in at.query_params
    assert any("too large to share by link" in c.value for c in at.caption)
    # short again: back in the link, and the note is gone
    at.text_area(key="ttext").set_value("1, 2\n3, 5").run()
    assert at.query_params.get("ttext") == "1, 2\n3, 5"
    assert not any("too large to share by link" in c.value for c in at.caption)


def test_a_link_with_the_longest_shared_text_opens_it():
    text = _numbers(1000)[: MAX_SHARED_TEXT // 3].rsplit("\n", 1)[0]
    assert 200 < url_size(text) <= MAX_SHARED_TEXT
    at = open_page("app_pages/explorer.py", {"src": "Type numbers", "tmode": "text", "ttext": text})
    assert at.text_area(key="ttext").value == text
    assert not at.error


@pytest.mark.parametrize(("page", "query", "key"), [
    ("app_pages/padding.py", {"pd_src": "Generated"}, "pd_lengths"),
    ("app_pages/explorer.py", {"src": "Padded sequences"}, "plen"),
])
def test_long_lengths_stay_out_of_the_url(page, query, key):
    at = open_page(page, query)
    lengths = ", ".join(["1"] * 2000)
    at.text_input(key=key).set_value(lengths).run()
    assert key not in at.query_params
    assert any("too large to share by link" in c.value for c in at.caption)


# --- The URL holds what the screen shows -------------------------------------------------------

WIDGETS = ("slider", "select_slider", "number_input", "selectbox", "segmented_control", "radio",
           "toggle", "checkbox", "multiselect", "text_area", "text_input")


def shown(at) -> dict:
    """Every keyed control's value, as the screen shows it."""
    return {w.key: w.value for kind in WIDGETS for w in getattr(at, kind)
            if w.key and not w.key.startswith("$$")}


#: page, the link it opens with, the control then changed (kind, key, new value, the value the
#: browser writes into the address for it), and the controls whose range that change narrows.
NARROWING = [
    ("app_pages/gradients.py", {"gr_n": "8", "gr_row": "7", "gr_sample": "6"},
     ("slider", "gr_n", 2, "2"), ["gr_row", "gr_sample"]),
    ("app_pages/gradients.py", {"gr_c": "8", "gr_col": "7", "gr_feature": "5"},
     ("slider", "gr_c", 3, "3"), ["gr_col", "gr_feature"]),
    ("app_pages/bn_vs_ln.py", {"bl_c": "16", "bl_groups": "16", "bl_feat": "9"},
     ("slider", "bl_c", 2, "2"), ["bl_groups", "bl_feat"]),
    ("app_pages/bn_vs_ln.py", {"bl_c": "16", "bl_groups": "8"},
     ("slider", "bl_c", 12, "12"), ["bl_groups"]),
    ("app_pages/explorer.py", {"src": "Image batch", "dims": "3"},
     ("segmented_control", "src", "preset", "Course examples"), ["dims"]),
    ("app_pages/explorer.py", {"src": "Image batch", "norm": "GroupNorm", "ic": "8", "groups": "8"},
     ("number_input", "ic", 6, "6"), ["groups"]),
    ("app_pages/padding.py", {"pd_src": "Generated", "pd_d": "8", "pd_feat": "6"},
     ("slider", "pd_d", 2, "2"), ["pd_feat"]),
    ("app_pages/shapes.py", {"sh_tensor": "4-D", "sh_dims": "3"},
     ("segmented_control", "sh_tensor", "2-D", "2-D"), ["sh_dims"]),
]


@pytest.mark.parametrize(("page", "link", "change", "narrowed"), NARROWING,
                         ids=[f"{c[0][6:-3]}-{c[2][1]}" for c in NARROWING])
def test_the_url_follows_a_control_another_control_narrowed(page, link, change, narrowed):
    at = open_page(page, link)
    assert {k: str(shown(at)[k]) for k in narrowed} == {k: link[k] for k in narrowed}
    kind, key, value, url_value = change
    getattr(at, kind)(key=key).set_value(value)
    at.query_params[key] = url_value  # as the browser writes a changed control into the URL
    at.run()
    assert not at.exception, at.exception
    screen = shown(at)
    for k in narrowed:
        assert at.query_params.get(k) in (None, str(screen[k])), (k, screen[k], at.query_params)
    fresh = open_page(page, dict(at.query_params))  # the link, opened by someone else
    assert shown(fresh) == screen


#: Every page's ε control, by page and URL key (one control, lnviz.ui.params.eps_slider).
EPS_CONTROLS = [("app_pages/bug_zoo.py", "bz_eps"), ("app_pages/gradients.py", "gr_eps"),
                ("app_pages/padding.py", "pd_eps"), ("app_pages/geometry.py", "gm_eps")]


@pytest.mark.parametrize(("page", "key"), EPS_CONTROLS)
@pytest.mark.parametrize("written", ["1e-1", "0.1", "1e-01"])
def test_every_eps_control_reads_a_link_in_any_notation(page: str, key: str,
                                                         written: str) -> None:
    """One ε control on every page, labelled "1e-1" alike; a link from before (bug zoo, ε
    page and padding wrote "0.1" and "1e-01") opens on its value."""
    at = open_page(page, {key: written})
    control = next(s for s in at.select_slider if s.key == key)
    assert control.label == "ε (epsilon)" and control.value == 0.1
    # the bug zoo offers the values its tests check every implementation at; the others all
    expected = ["1e-8", "1e-6", "1e-5"] if page.endswith("bug_zoo.py") else ["0", "1e-12", "1e-11"]
    assert control.options[:3] == expected
    assert not at.exception


@pytest.mark.parametrize("written", ["1e-1", "0.1", "1e-01"])
def test_the_live_eps_controls_read_a_link_in_any_notation(written: str) -> None:
    """The Explorer's and the ε page's ε are live controls (lnviz.ui.live), not sliders: a link
    opens on its value in any notation, and the URL is rewritten as the sliders write ε."""
    at = open_page("app_pages/explorer.py", {"eps": written})
    assert live_controls(at)["server"]["epsValue"] == 0.1
    assert at.query_params["eps"] == "1e-1" and not at.exception
    at = open_page("app_pages/epsilon.py", {"ep_eps": written})
    assert at.session_state["ep_eps"] == 0.1
    assert at.query_params["ep_eps"] == "1e-1" and not at.exception


@pytest.mark.parametrize(("query", "expected", "url"), [
    ({"eps": "nan", "gamma": "inf", "beta": "abc"}, (1e-5, 1.0, 0.0), {}),
    # not an ε the control offers; γ too large for a link
    ({"eps": "1e-300", "gamma": "1e308"}, (1e-5, 1.0, 0.0), {}),
    # −0 is 0; β brought into its range
    ({"gamma": "-0", "beta": "-9"}, (1e-5, 0.0, -3.0), {"gamma": "0", "beta": "-3"}),
    # between the steps: as the link has it, and written back in full
    ({"eps": "0", "gamma": "0.15"}, (0.0, 0.15, 0.0), {"eps": "0", "gamma": "0.15"}),
    ({"gamma": "0.123456789012"}, (1e-5, 0.123456789012, 0.0), {"gamma": "0.123456789012"}),
])
def test_a_hostile_link_sets_the_explorers_live_controls_to_what_they_offer(
        query: dict[str, str], expected: tuple[float, float, float],
        url: dict[str, str]) -> None:
    """No widget checks the Explorer's ε, γ and β (they are live controls): a link's values are
    checked as a slider would, and the URL then says what the page took (a default is left
    out, as a slider leaves it out)."""
    at = open_page("app_pages/explorer.py", query)
    server = live_controls(at)["server"]
    assert (server["epsValue"], server["gamma"], server["beta"]) == expected
    assert not at.exception and not at.error
    assert {k: v for k, v in at.query_params.items() if k in ("eps", "gamma", "beta")} == url


def test_a_repeated_link_parameter_keeps_the_value_its_control_reads():
    """``norm=BatchNorm&norm=RMSNorm``: the Explorer computes RMSNorm, the last, and the address
    is rewritten with that one (before, the control took one value and the address kept both);
    a multiselect's repeated parameter is its values, and stays."""
    at = open_page("app_pages/explorer.py", {"norm": ["BatchNorm", "RMSNorm"]})
    assert at.segmented_control(key="norm").value == "RMSNorm"
    assert at.query_params["norm"] == "RMSNorm"  # one value now
    at = open_page("app_pages/ln_lstm.py", {"tr_models": ["LN-LSTM", "BN-LSTM"],
                                            "tr_steps": ["2", "3"]})
    assert at.multiselect(key="tr_models").value == ["ln-lstm", "bn-lstm"]
    assert at.query_params["tr_models"] == ["LN-LSTM", "BN-LSTM"]
    assert at.query_params["tr_steps"] == "3"


def test_an_answer_holds_while_its_question_is_off_the_page():
    """Streamlit forgets a widget's value once a run leaves it off the page. A question shown
    for one choice at a time (a layer, a loss) keeps its answer anyway: it is back, answered,
    when the learner returns, and parts that wait for it (answered) still see it meanwhile;
    for another context it is asked again."""
    script = """
import streamlit as st
from lnviz.ui.state import answered, prediction
shown = st.checkbox("show", value=True, key="show")
eps = st.number_input("eps", value=1.0, key="eps")
if shown:
    prediction("where?", ["here", "there"], key="q", help="h", context=eps)
st.write(f"answered: {answered('q', eps)!r}")
"""
    at = AppTest.from_string(script).run()
    at.radio(key="q").set_value("there").run()
    seen = lambda: [m.value for m in at.markdown if m.value.startswith("answered")]  # noqa: E731
    assert seen() == ["answered: 'there'"]
    for _ in range(3):  # off the page for several runs
        at.checkbox(key="show").uncheck().run()
        assert seen() == ["answered: 'there'"]
    at.checkbox(key="show").check().run()
    assert at.radio(key="q").value == "there" and seen() == ["answered: 'there'"]
    at.number_input(key="eps").set_value(2.0).run()  # another question: asked again
    assert at.radio(key="q").value is None and seen() == ["answered: None"]
    at.checkbox(key="show").uncheck().run()
    at.checkbox(key="show").check().run()
    assert at.radio(key="q").value is None
