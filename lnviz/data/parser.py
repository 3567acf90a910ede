"""Numbers typed by hand: a table of rows, or nested brackets as numpy and torch print them.

Parsed values are float64, so that the sidebar's precision decides how they are rounded.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from lnviz.data.generators import check_whole
from lnviz.limits import MAX_TEXT_CHARS, MAX_TEXT_NESTING

_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?|nan)", re.IGNORECASE)
_BRACKET_TOKEN = re.compile(r"\s+|[\[\],]|[^\s\[\],]+")


def _to_number(token: str) -> float | str:
    """The token's value, or a description of what is wrong with it."""
    if not _NUMBER.fullmatch(token):
        return f"{token!r} is not a number"
    value = float(token)
    # float() turns '1e400' into inf; only a literal 'inf' should mean infinity.
    if math.isinf(value) and "inf" not in token.lower():
        return f"{token!r} is too large for any float (float64 holds up to about ±1.8e308)"
    return value


def _too_many(max_elements: int) -> ValueError:
    return ValueError(f"too many numbers: the limit is {max_elements:,}")


def _row_items(row: str, where: str) -> list[str]:
    pieces = row.split(",")
    # A single trailing comma is harmless, as in Python lists.
    if len(pieces) > 1 and not pieces[-1].strip():
        pieces.pop()
    items: list[str] = []
    for piece in pieces:
        words = piece.split()
        if not words:
            raise ValueError(f"{where}, item {len(items) + 1}: empty item between commas")
        items.extend(words)
    return items


def _parse_rows(text: str, max_elements: int) -> np.ndarray:
    rows: list[list[float]] = []
    first_where = ""
    total = 0
    for line_number, line in enumerate(text.splitlines(), start=1):
        segments = [segment for segment in line.split(";") if segment.strip()]
        for segment_number, segment in enumerate(segments, start=1):
            where = f"line {line_number}"
            if len(segments) > 1:
                where += f", row {segment_number}"
            items = _row_items(segment, where)
            total += len(items)
            if total > max_elements:
                raise _too_many(max_elements)
            row = [_to_number(item) for item in items]
            for i, value in enumerate(row, start=1):
                if isinstance(value, str):
                    raise ValueError(f"{where}, item {i}: {value}")
            if rows and len(row) != len(rows[0]):
                raise ValueError(
                    f"{where} has {len(row)} numbers but {first_where} has {len(rows[0])}; "
                    "every row needs the same count"
                )
            first_where = first_where or where
            rows.append(row)
    if not rows:
        raise ValueError("nothing to parse: type some numbers")
    return np.array(rows, dtype=np.float64)


class _NestedParser:
    """Recursive-descent reader for bracketed lists such as [[1, 2], [3, 4]].

    Commas between items are optional, so numpy's printed form [[1. 2.] [3. 4.]] also
    reads. Depth 1 is the outermost list.
    """

    def __init__(self, text: str, max_elements: int) -> None:
        self.text = text
        self.max_elements = max_elements
        # Tokens are read lazily so an over-long input fails at the limit, not after a full scan.
        self.matches = _BRACKET_TOKEN.finditer(text)
        self.current: tuple[str, int] | None = None
        self.numbers: list[float] = []
        self.sizes: dict[int, int] = {}
        self.leaf_depth: int | None = None
        self.advance()

    def advance(self) -> None:
        self.current = None
        for match in self.matches:
            if not match.group().isspace():
                self.current = (match.group(), match.start())
                return

    def where(self, offset: int) -> str:
        place = f"character {offset + 1}"
        if "\n" in self.text:
            line = self.text.count("\n", 0, offset) + 1
            column = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
            place += f" (line {line}, column {column})"
        return place

    def parse(self) -> np.ndarray:
        self.read_list(depth=1)
        if self.current is not None:
            token, offset = self.current
            if token == "]":
                raise ValueError(
                    f"unbalanced brackets at {self.where(offset)}: this ']' has no matching '['"
                )
            raise ValueError(
                f"{self.where(offset)}: unexpected {token!r} after the outer list closed; "
                "wrap everything in one pair of brackets"
            )
        shape = tuple(self.sizes[depth] for depth in range(1, (self.leaf_depth or 0) + 1))
        return np.array(self.numbers, dtype=np.float64).reshape(shape)

    def read_list(self, depth: int) -> None:
        _, start = self.current
        if depth > MAX_TEXT_NESTING:
            raise ValueError(
                f"nesting deeper than {MAX_TEXT_NESTING} levels at {self.where(start)}; "
                f"at most {MAX_TEXT_NESTING} pairs of brackets can nest"
            )
        self.advance()
        count = 0
        item_expected = True
        while self.current is not None:
            token, offset = self.current
            if token == "]":
                self.advance()
                self.close_list(depth, count, start)
                return
            if token == ",":
                if item_expected:
                    raise ValueError(f"{self.where(offset)}: ',' with no item before it")
                item_expected = True
                self.advance()
                continue
            if token == "[":
                self.read_list(depth + 1)
            else:
                self.read_number(token, offset, depth)
            count += 1
            item_expected = False
        raise ValueError(f"unbalanced brackets at {self.where(start)}: this '[' is never closed")

    def close_list(self, depth: int, count: int, start: int) -> None:
        if count == 0:
            raise ValueError(f"{self.where(start)}: empty list; every list needs numbers")
        expected = self.sizes.setdefault(depth, count)
        if count != expected:
            raise ValueError(
                f"ragged nested list at depth {depth}: expected {expected} items, found "
                f"{count} in the list starting at {self.where(start)}"
            )

    def read_number(self, token: str, offset: int, depth: int) -> None:
        if self.leaf_depth is None:
            self.leaf_depth = depth
        elif depth != self.leaf_depth:
            raise ValueError(
                f"mixed numbers and lists: the number at {self.where(offset)} is at depth "
                f"{depth}, but earlier numbers are at depth {self.leaf_depth}"
            )
        if len(self.numbers) >= self.max_elements:
            raise _too_many(self.max_elements)
        value = _to_number(token)
        if isinstance(value, str):
            raise ValueError(f"{self.where(offset)}: {value}")
        self.numbers.append(value)
        self.advance()


def parse_numbers(text: str, *, max_elements: int = 100_000) -> np.ndarray:
    """Turn numbers typed by hand into a float64 array (every digit typed is kept; the
    sidebar's precision rounds them later, and says when a value does not fit it).

    Two layouts are understood:

    * rows — one row per line (or rows separated by ';'), numbers separated by commas
      and/or spaces: "1, 2, 3\\n4 5 6" gives a 2 × 3 array; a single line gives shape (1, n);
    * nested lists — "[[1, 2], [3, 4]]", up to 5 levels deep; the brackets set the shape,
      so "[1, 2, 3]" gives shape (3,).

    Numbers may use decimals, exponents (1e-5), 'nan', 'inf' and '-inf'. Anything else
    raises ValueError saying where the problem is (line and item, or character position).
    Nothing is evaluated as code.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    max_elements = check_whole("max_elements", max_elements, 1)
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"text is {len(text):,} characters long; the limit is {MAX_TEXT_CHARS:,}")
    # Text pasted from documents often uses the typographic minus sign.
    text = text.replace("\u2212", "-")
    if not text.strip():
        raise ValueError("nothing to parse: type some numbers")
    if text.lstrip().startswith("["):
        return _NestedParser(text, max_elements).parse()
    return _parse_rows(text, max_elements)


def parse_table(table: Any) -> np.ndarray:
    """The cells of a table typed by hand (a pandas DataFrame of text or numbers) as a float64
    array of its shape. Each cell is read as one number the way :func:`parse_numbers` reads
    them (1e-3, -2.5E+1, nan, inf); an empty or malformed cell raises ValueError naming its row
    and column.
    """
    cells = table.to_numpy(dtype=object)
    out = np.empty(cells.shape, dtype=np.float64)
    for (i, j), cell in np.ndenumerate(cells):
        where = f"row {table.index[i]}, column {table.columns[j]}"
        if isinstance(cell, (int, float, np.number)) and not isinstance(cell, bool):
            value: float | str = float(cell)
            if math.isnan(value):
                value = "empty"
        else:
            token = "" if cell is None else str(cell).strip().replace("\u2212", "-")
            value = _to_number(token) if token else "empty"
        if isinstance(value, str):
            raise ValueError(f"{where}: {value}; every cell needs a number, e.g. 0.5 or 1e-3")
        out[i, j] = value
    return out


def parse_lengths(text: str) -> tuple[int, ...] | None:
    """Sequence lengths typed by hand ("6, 3, 1"; commas or semicolons), or None for empty
    text. A piece that is not a whole number raises ValueError naming that piece alone (never
    the whole text, which may be long)."""
    if not text.strip():
        return None
    lengths = []
    for number, part in enumerate(text.replace(";", ",").split(","), start=1):
        piece = part.strip()
        if not piece:
            continue
        if not re.fullmatch(r"[+-]?\d{1,9}", piece):
            shown = piece if len(piece) <= 100 else piece[:100] + "…"
            raise ValueError(f"lengths must be whole numbers separated by commas; item {number} "
                             f"is {shown!r}")
        lengths.append(int(piece))
    return tuple(lengths)
