"""Messages that may carry what a learner typed, uploaded or put in a link: shown as text.

Streamlit renders every message, caption and label as markdown, so text from a shared link
(``?pd_lengths=[download](https://evil.example)``), a typed number list or an .npz member name
would otherwise become live links, images, HTML, LaTeX, icons or coloured text inside the app's
own error box. :func:`plain` turns any text into markdown that renders as exactly those
characters; :func:`refusal` shows what lnviz refused through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

#: Every ASCII punctuation character. CommonMark lets a backslash escape each of them, and the
#: escaped character then stands for itself: no emphasis, link, image, HTML, code, heading, list,
#: table, strikethrough, ``$`` math or ``:name[…]`` directive can start from it.
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
#: Some of Streamlit's markdown works on the text after the escapes are resolved: it turns
#: ``https://…``, ``www.…`` and ``a@b.c`` into links, ``:smile:``, ``:material_home:`` and
#: ``:streamlit:`` into emoji, icons and images, and ``->``, ``<=``, ``--`` … into arrows and
#: dashes. An invisible word joiner after each colon and ``@``, inside ``www.`` and between the
#: characters of those pairs keeps each from being recognised, and shows nothing.
_BREAKS = re.compile(r"(?<=[:@])|(?<=www)(?=\.)|(?<=[-<>~])(?=[->=])", re.IGNORECASE)
WORD_JOINER = "\u2060"
#: Markdown's hard line break: the line ends here, but the paragraph (and its escapes) goes on.
_HARD_BREAK = "  \n"


def plain(text: object) -> str:
    """``text`` as markdown that Streamlit renders as the same characters, with no markup.

    Line breaks stay line breaks; indentation at the start of a line is dropped (browsers do
    not show it, and four spaces would start a code block).
    """
    lines = str(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return _HARD_BREAK.join(
        _PUNCTUATION.sub(r"\\\1", _BREAKS.sub(WORD_JOINER, line.lstrip(" \t")))
        for line in lines)


def code_span(text: object) -> str:
    """``text`` as a markdown code span that shows exactly its characters, backticks included:
    fenced by one more backtick than its longest run of them (CommonMark's rule), with a space
    inside the fence where the text itself starts or ends with one."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


@contextmanager
def refusal(prefix: str = "", *, icon: str = "🚫", stop: bool = True,
            errors: type[Exception] | tuple[type[Exception], ...] = ValueError
            ) -> Iterator[None]:
    """Turn what lnviz refuses inside the ``with`` block into a message on the page.

    lnviz refuses a setting, a typed text or a file it cannot use with a ValueError (a
    :class:`lnviz.data.files.TensorFileError` is one) whose message says what to change. That
    message, after ``prefix``, is shown as plain text in an error box, and this run of the page
    ends there; with ``stop=False`` the page goes on after the block instead (so whatever the
    block was to assign keeps the value it had before it). ``errors`` names other exceptions to
    treat the same way.
    """
    try:
        yield
    except errors as err:
        st.error(plain(f"{prefix}{err}"), icon=icon)
        if stop:
            st.stop()


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` things in words: "1 call", "2 calls", "1,024 arrays" (``plural`` where adding an
    "s" is wrong)."""
    return f"{n:,} {singular if n == 1 else plural or singular + 's'}"


def token_line(tokens: list[str], shown: int = 80) -> str:
    """A model's tokens as one markdown line: "**9 tokens:** `[CLS]` · `the` · …", the first
    ``shown`` of them."""
    return (f"**{counted(len(tokens), 'token')}:** " + " · ".join(map(code_span, tokens[:shown]))
            + (" …" if len(tokens) > shown else ""))
