"""The one helper the sentences of several layers share (the lessons' and the trainer's)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["listed"]


def listed(items: Sequence[str], last: str = "and") -> str:
    """"a, b and c" (with ``last="or"``: "a, b or c"); one item alone; "" for none."""
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"
