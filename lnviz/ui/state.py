"""Settings shared by every page (device, precision, seed), URL-bound controls, and the
Explorer's upload."""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from lnviz.limits import MAX_SHARED_TEXT, MAX_URL_NUMBER, MAX_URL_VALUE
from lnviz.terms import NormKind
from lnviz.ui.cache import forget_named


@dataclass(frozen=True)
class Settings:
    """What the shared sidebar chose: where and in which precision to compute, and the seed."""

    device: str
    dtype: str
    seed: int


#: The free-text controls bound to the URL: the only ones whose values may be longer than
#: MAX_URL_VALUE (up to MAX_SHARED_TEXT), or empty.
TEXT_URL_KEYS = frozenset({"ttext", "plen", "pd_lengths", "tf_text", "sl_text", "by_text",
                           "pl_text", "g3_text"})


#: The controls bound to the URL that hold several values (multiselects): their parameter may
#: repeat in a link (``tr_models=LSTM&tr_models=LN-LSTM``); every other control's holds one value.
#: The LN-LSTM page's sweep values are ``tr_values_<what is swept>``.
MULTI_URL_KEYS = frozenset({"bz_pick", "tr_models", "by_replace", "pf_norms", "pf_impls",
                            "pf_sizes"})
MULTI_URL_PREFIX = "tr_values_"


def holds_several(key: str) -> bool:
    """Whether the URL parameter ``key`` belongs to a control that holds several values."""
    return key in MULTI_URL_KEYS or key.startswith(MULTI_URL_PREFIX)


def url_size(text: str) -> int:
    """How many characters ``text`` takes in a URL (encoded as Streamlit encodes it)."""
    return len(urllib.parse.quote_plus(text))


def plausible_url_value(value: str) -> bool:
    """Whether a control of this app could have written ``value`` into the URL: not empty, not
    huge, and, when it reads as a number, finite and at most 2⁵³ in size."""
    if not value or len(value) > MAX_URL_VALUE:
        return False
    try:
        number = float(value)
    except ValueError:
        return True  # a label (an option's name): the control itself checks it
    return math.isfinite(number) and abs(number) <= MAX_URL_NUMBER


def clean_query_params() -> None:
    """Drop URL parameters that no control could have written, before any control reads them.

    Each control bound to the URL checks its own value, but Streamlit 1.67 crashes on some
    (an integer input given "1e309" raises OverflowError) and an empty value turns a required
    choice into None. A shared link is input like any other. Controls seed themselves from the
    URL as it was when the run started, so after dropping a parameter the run starts again
    (``st.rerun``) from the cleaned URL, before any control is drawn. Call it after
    ``st.navigation``: ``st.rerun`` reruns the page the script has resolved by then, and would
    go back to the default page before it.

    A parameter repeated for a control that holds one value (``sl_how=frozen&sl_how=removed``)
    keeps its last value (the one ``st.query_params`` gives), and the address is rewritten with
    that one before any control reads it.

    A parameter whose control this session already has (its key is in the session state) is left
    alone: that control's value comes from the session, not from the URL, Streamlit refuses to
    delete a parameter bound to a control, and :func:`url_text` takes a long text out of the URL
    itself.
    """
    fresh = [key for key in st.query_params if key not in st.session_state]
    bad = [key for key in fresh
           if not all(_plausible(key, value) for value in st.query_params.get_all(key))]
    repeated = [key for key in fresh if key not in bad and not holds_several(key)
                and len(st.query_params.get_all(key)) > 1]
    if bad or repeated:
        for key in bad:
            del st.query_params[key]
        for key in repeated:
            st.query_params[key] = st.query_params.get_all(key)[-1]
        st.rerun()


def _plausible(key: str, value: str) -> bool:
    if key in TEXT_URL_KEYS:
        return url_size(value) <= MAX_SHARED_TEXT
    return plausible_url_value(value)


def url_text(widget: Callable[..., str], label: str, value: str, *, key: str, what: str,
             **kwargs) -> str:
    """A text control (``st.text_input``, ``st.text_area``) kept in the URL while its text is
    short enough to share, and the note that says so when it is not.

    ``what`` names the text in that note ("the typed numbers"). A longer text is left out of the
    address, so that the link still opens (the server refuses an address above about 64 KB) and
    every other setting still travels with it.
    """
    if key not in TEXT_URL_KEYS:
        raise ValueError(f"{key!r} is not in TEXT_URL_KEYS, so a shared link would drop it")
    # the value this run will show: what the learner just typed, or what they had before
    incoming = st.session_state.get(key)
    shareable = not isinstance(incoming, str) or url_size(incoming) <= MAX_SHARED_TEXT
    unshared = f"_unshared_{key}"
    if shareable and st.session_state.pop(unshared, False):
        # Short again, but typed while the control was not bound, so the browser left it out of
        # the URL: set through the session state, Streamlit writes it there.
        st.session_state[key] = incoming
    text = widget(label, value, key=key, bind="query-params" if shareable else None, **kwargs)
    if not shareable:
        if not st.session_state.get(unshared) or key in st.query_params:
            # The browser wrote the long text into its address as it was typed, while the
            # control was still bound; the copy of the URL this run received may predate that
            # write. Sending this run's URL, without the text, replaces the browser's.
            st.query_params.pop(key, None)
            st.query_params.update()
        st.session_state[unshared] = True
        st.caption(f"This view is too large to share by link: in the address, {what} would "
                   f"take {url_size(text):,} characters (at most {MAX_SHARED_TEXT:,} fit), so "
                   "the link leaves it out.")
    return text


def keep_in_range(key: str, options: Sequence[Any], *, reset_to: Any = None) -> None:
    """Call before drawing the URL-bound control ``key`` whose choices (``options``) another
    control sets: a value that is no longer among them moves to the nearest one.

    Left alone, Streamlit shows the control's default while the URL keeps the old value, so the
    link no longer opens what the screen shows (``gr_row=7`` with ``gr_n=2``). A value set
    through the session state is one Streamlit writes into the URL. An ``st.slider`` is the
    exception: a new range makes it a new control, whose old value Streamlit only takes out of
    the URL, so a slider passes its default as ``reset_to`` and goes back to it. Options that
    are not numbers (a file's layers) have no nearest one: their control goes to ``reset_to``,
    or to the first option.
    """
    value = st.session_state.get(key)
    if value is None or value in options or not options:
        return
    if reset_to is not None:
        st.session_state[key] = reset_to
    elif all(isinstance(option, int | float) for option in options) \
            and isinstance(value, int | float):
        st.session_state[key] = min(options, key=lambda option: (abs(option - value), option))
    else:
        st.session_state[key] = options[0]


def sidebar_settings() -> Settings:
    """Draw the shared sidebar controls (once, from app.py) and return their values."""
    # Imported here, not at the top: it loads torch, and app.py imports this module before it
    # can show anything on a cold server.
    from lnviz.devices import available_devices, supported_dtypes

    with st.sidebar:
        st.subheader("Compute")
        devices = available_devices()
        device = st.selectbox(
            "Device", devices, key="device", bind="query-params",
            help="Where the normalization runs. CUDA or Apple MPS appear only when torch sees "
                 "one; figures always show a small window of the result.",
        )
        dtypes = supported_dtypes(device)
        dtype = st.selectbox(
            "Precision", dtypes, key="precision", bind="query-params",
            help="The input's dtype. float16/bfloat16 keep fewer digits; their statistics are "
                 "still accumulated in float32, as torch does.",
        )
        seed = st.number_input(
            "Random seed", min_value=0, max_value=2**31 - 1, value=0, step=1, key="seed",
            bind="query-params",
            help="Seeds every random batch, so the same seed gives the same numbers.",
        )
    st.session_state["_settings"] = Settings(device, dtype, int(seed))
    return st.session_state["_settings"]


def current_settings() -> Settings:
    """The settings app.py's sidebar chose on this run (defaults when a page runs alone)."""
    return st.session_state.get("_settings", Settings("cpu", "float32", 0))


#: Session state holding the Explorer's upload: (file id, the file's arrays, its captured layers
#: or None when it is not a capture).
UPLOAD_KEY = "_upload"
#: Session state holding the capture the Model inspector handed to the Explorer: (name shown,
#: file id, the file's bytes).
CAPTURE_KEY = "_capture"


def release_upload(*, capture: bool = True) -> None:
    """Forget the uploaded arrays, the capture handed over by the Model inspector (unless
    ``capture`` is False) and every result computed from them, so that their memory is released
    as soon as the learner moves on: to another source, or to another page (app.py)."""
    st.session_state.pop(UPLOAD_KEY, None)
    if capture:
        st.session_state.pop(CAPTURE_KEY, None)
    released = (("upload",), ("capture",)) if capture else (("upload",),)
    forget_named(lambda name: isinstance(name, tuple) and name[:1] in released)


def run_stop_buttons(prefix: str, *, run_help: str, stop_help: str) -> tuple[bool, bool]:
    """The Run and Stop training buttons of a page that trains (keys ``<prefix>_run`` and
    ``<prefix>_stop``), side by side: whether each was pressed in this run."""
    cols = st.columns([1, 1.5, 5.5])
    run = cols[0].button("Run", type="primary", key=f"{prefix}_run",
                         icon=":material/play_arrow:", help=run_help)
    stop = cols[1].button("Stop training", key=f"{prefix}_stop", icon=":material/stop:",
                          help=stop_help)
    return run, stop


def model_text(container, label: str, examples: Sequence[str], *, key: str, what: str,
               max_chars: int, help: str):  # -> (str, the side column for more controls)
    """A model page's text box (kept in the URL, :func:`url_text`) with a picker of
    ``examples`` beside it, in ``container`` (two columns); returns the text and the side
    column. A text longer than ``max_chars`` is
    cut there, with a note that says so (no ``max_chars`` on the box: with one, the browser
    drops a longer paste whole and keeps the old text without a word)."""
    picker = f"{key}_example"

    def use_example() -> None:
        st.session_state[key] = st.session_state[picker]

    cols = container.columns([3, 2])
    with cols[0]:
        text = url_text(st.text_area, label, examples[0], key=key, what=what, height=80,
                        help=help)
        if len(text) > max_chars:
            st.warning(f"This text has {len(text):,} characters: the page reads the first "
                       f"{max_chars:,}.", icon=":material/content_cut:")
            text = text[:max_chars]
    cols[1].selectbox("Examples", examples, index=None, key=picker, on_change=use_example,
                      placeholder=f"Pick an example {what.removeprefix('the ')}…",
                      help=f"Puts an example into the {label.lower()} box.")
    return text, cols[1]


def minilm_sentence_and_layer(text_key: str, layer_key: str, verb: str) -> tuple[str, int]:
    """The all-MiniLM-L6-v2 pages' controls, in a bordered box: a sentence (kept in the URL
    under ``text_key``, with the examples beside it) and which of the 13 LayerNorms to ``verb``
    ("open", "plot"; ``layer_key``, layer 0's after the feed-forward by default). Returns
    (text, layer index)."""
    from lnviz.lessons.minilm import FIRST_FFN, PRESETS, layer_label
    from lnviz.limits import MODEL_MAX_CHARS
    from lnviz.models.bert import layer_norm_names

    names = layer_norm_names()
    box = st.container(border=True)
    with box:
        text, side = model_text(box, "Sentence", PRESETS, key=text_key, what="the sentence",
                                max_chars=MODEL_MAX_CHARS,
                                help=f"Any text; the page reads its first {MODEL_MAX_CHARS:,} "
                                     "characters and the model their first 512 tokens.")
        keep_in_range(layer_key, range(len(names)), reset_to=names.index(FIRST_FFN))
        chosen = side.selectbox(
            NormKind.LAYER, range(len(names)), index=names.index(FIRST_FFN), key=layer_key,
            bind="query-params", format_func=lambda k: f"{k}: {layer_label(names[k])}",
            help=f"Which of the 13 LayerNorms to {verb}: the embeddings' one, then per layer "
                 "the one after attention and the one after the feed-forward.")
    return text, chosen


def _answered_for(key: str, mark: str, asked: str) -> None:
    """Remember the answer, and which question (and ``context``) it was given to, outside the
    radio's own state: Streamlit forgets a widget's value once a run leaves it off the page (a
    question shown for one layer, one loss, one setting at a time), and the answer must hold
    when the learner comes back to it and for the parts of the page that wait for it."""
    st.session_state[mark] = asked
    st.session_state[f"{key}__answer"] = st.session_state.get(key)


def answered(key: str, context: object = None) -> str | None:
    """The learner's answer to the :func:`prediction` ``key``, as another part of the page (one
    that waits for it, or would give it away) reads it: None while it is unanswered, or when it
    was given for another ``context`` than this one (the sentence, the input); without a
    context, any answer counts."""
    state = st.session_state
    answer = state.get(key)
    if answer is None:  # its radio was left off the page: the answer kept beside it
        answer = state.get(f"{key}__answer")
    if answer is None:
        return None
    if context is not None and state.get(f"{key}__asked", repr(context)) != repr(context):
        return None
    return answer


def settled(key: str, by: Iterable[str], context: object = None) -> bool:
    """Whether the :func:`prediction` ``key``, still unanswered, was settled by the reply to one
    of the questions ``by`` that the page has shown: the page then shows its reply unasked
    instead of asking what the learner has already been told."""
    return (answered(key, context) is None
            and any(answered(other, context) is not None for other in by))


def prediction(question: str, options: Sequence[str], *, key: str, help: str,
               what: str = "the figure", context: object = None) -> str | None:
    """A "Before you look" question: the learner's answer (None until they pick one, with a
    line saying that picking one shows ``what``). Not bound to the URL: a shared link opens
    the question, not the answer. An answer holds for the question it was given to: when its
    ``context`` (what the answer depends on beyond the key: the sentence, the input, ε)
    changes, or the question's words where no context is given, the question is asked again
    instead of grading the old answer."""
    asked = repr(question if context is None else context)
    mark, kept = f"{key}__asked", f"{key}__answer"
    state = st.session_state
    if state.get(key) is None and state.get(kept) in options:  # back on the page: as answered
        state[key] = state[kept]
    if state.get(key) is not None and state.get(mark, asked) != asked:
        state[key] = state[kept] = None  # another question now: ask it
    answer = st.radio(f"Before you look: {question}", list(options), index=None, key=key,
                      horizontal=True, help=help, on_change=_answered_for,
                      args=(key, mark, asked))
    if answer is None:
        st.caption(f"Pick an answer to see {what}.")
    return answer
