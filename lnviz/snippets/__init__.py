"""The code the pages show a learner, kept as real Python files that ruff lints and the tests run.

Each file here (``lnviz/snippets/<name>.py``) runs as it stands, with its own example values.
:func:`snippet` reads it and fills in the page's view, in three ways that keep the file valid:

* **Values.** A top-level assignment ``NAME = <expression>`` whose NAME is passed gets the value
  instead (``snippet("bandwidth", ROWS=64)``): Python literals as ``repr`` writes them (a float's
  shortest exact form), or :class:`Code` for an expression written out (``torch.float16``).
* **Notes.** ``«name»`` inside a comment becomes the text passed for it (a number the page
  computed, a word that depends on the view).
* **Sections.** Lines between ``# [name]`` and ``# [/name]`` stay only where ``name`` is in
  ``keep`` (the markers go either way). A file holds every variant one after the other, so that
  it runs them all as it stands, and each view keeps its own.

The files import nothing of lnviz, so what a learner copies runs with torch alone, but for the
Padding page's generator, with which its snippet rebuilds a generated batch, and, as the file
stands, the Bug zoo's seven functions (:mod:`lnviz.snippets.zoo_functions`, which the page shows
apart and its view of the snippet leaves out).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.resources import files

__all__ = ["SNIPPETS", "Code", "snippet", "snippet_source"]

#: The snippet files, by name (``lnviz/snippets/<name>.py``).
SNIPPETS = tuple(sorted(p.name.removesuffix(".py") for p in files(__name__).iterdir()
                        if p.name.endswith(".py") and not p.name.startswith("_")))
_SECTION = re.compile(r"^\s*# \[(/?)([\w-]+)\]\s*$")
_NOTE = re.compile(r"«(\w+)»")


@dataclass(frozen=True)
class Code:
    """A value written out as this text (an expression such as ``torch.float16``)."""

    text: str

    def __repr__(self) -> str:
        return self.text


@functools.cache  # the files do not change while the app runs: read once, not every rerun
def snippet_source(name: str) -> str:
    """The file of snippet ``name`` as it stands."""
    if name not in SNIPPETS:
        raise ValueError(f"no snippet {name!r}; there are {', '.join(SNIPPETS)}")
    return files(__name__).joinpath(f"{name}.py").read_text(encoding="utf-8")


def snippet(name: str, *, keep: Iterable[str] = (), notes: dict[str, str] | None = None,
            **values: object) -> str:
    """Snippet ``name`` for one view: its top-level ``NAME = …`` set to ``values``, the
    sections in ``keep`` kept (the others dropped) and each ``«note»`` left written from
    ``notes``. Raises ValueError for a value, section or note the file does not have, and for
    a note left without its text, so that a file and its page cannot drift apart silently."""
    source = snippet_source(name)
    notes = notes or {}
    unknown = set(notes) - set(_NOTE.findall(source))
    source = _sections(_set_values(name, values), set(keep), name)
    missing = set(_NOTE.findall(source)) - set(notes)
    if unknown or missing:
        raise ValueError(f"snippet {name!r}: notes given that it does not have "
                         f"{sorted(unknown)}, notes its view needs {sorted(missing)}")
    return _NOTE.sub(lambda m: notes[m.group(1)], source)


@functools.cache  # parsed once per snippet, not on every rerun of its page
def _settings(name: str) -> dict[str, list[tuple[int, int, int, int]]]:
    """Where snippet ``name`` sets each top-level name (``NAME = …``): the value's first and
    last line (0-based) and columns, for every such assignment (an update of the value, such as
    ``gamma = gamma.expand(…)``, is not a setting)."""
    found: dict[str, list[tuple[int, int, int, int]]] = {}
    for node in ast.parse(snippet_source(name)).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            target, value = node.targets[0].id, node.value
            if any(isinstance(n, ast.Name) and n.id == target for n in ast.walk(value)):
                continue
            found.setdefault(target, []).append(
                (value.lineno - 1, value.col_offset, value.end_lineno - 1, value.end_col_offset))
    return found


def _set_values(name: str, values: dict[str, object]) -> str:
    """Snippet ``name``'s source with each of its settings in ``values`` written out."""
    lines = snippet_source(name).splitlines(keepends=True)
    settings = _settings(name)
    missing = set(values) - set(settings)
    if missing:
        raise ValueError(f"snippet {name!r} sets no {', '.join(sorted(missing))}")
    twice = sorted(key for key in values if len(settings[key]) > 1)
    if twice:  # which one the view means would be a guess
        raise ValueError(f"snippet {name!r} sets {twice[0]} more than once")
    # from the last to the first, so that earlier positions stay valid
    for key, (first, start, last, end_col) in sorted(
            ((key, settings[key][0]) for key in values), key=lambda kv: kv[1][:2],
            reverse=True):
        text = "".join(lines[first:last + 1])
        end = len(text) - len(lines[last]) + end_col
        text = text[:start] + repr(values[key]) + text[end:]
        lines[first:last + 1] = [text]
    return "".join(lines)


def _sections(source: str, keep: set[str], name: str) -> str:
    out, open_sections, seen = [], [], set()
    for line in source.splitlines(keepends=True):
        marker = _SECTION.match(line)
        if marker:
            closing, section = marker.groups()
            seen.add(section)
            if closing:
                if not open_sections or open_sections[-1] != section:
                    raise ValueError(f"snippet {name!r}: # [/{section}] closes nothing")
                open_sections.pop()
            else:
                open_sections.append(section)
            continue
        if all(s in keep for s in open_sections):
            out.append(line)
    if open_sections:
        raise ValueError(f"snippet {name!r}: # [{open_sections[-1]}] is never closed")
    unknown = keep - seen
    if unknown:
        raise ValueError(f"snippet {name!r} has no section {', '.join(sorted(unknown))}")
    return re.sub(r"\n{3,}", "\n\n", "".join(out))
