"""Accessibility on every page: every control explains itself, and every figure is drawn in
colour-blind-safe colours (Okabe–Ito for categories, blue–orange for values, greys)."""

from __future__ import annotations

import re

import pytest
from pageutil import ALL_PAGES, figures, open_page

from lnviz import charts

CONTROLS = ("slider", "select_slider", "number_input", "selectbox", "segmented_control", "radio",
            "toggle", "multiselect", "text_area", "text_input", "checkbox", "button",
            "color_picker", "date_input", "time_input")
#: Colours a figure may use: the two palettes (and the darker Okabe–Ito blue of a cube's shaded
#: side), and black, white and greys.
SAFE = ({c.upper() for c in charts.base.OKABE_ITO} | {c.upper() for _, c in charts.base.DIVERGING}
        | {charts.base.DARK_BLUE.upper()})
#: A refusal written in a figure (charts.base.ALERT_FONT, dark red on pale red, as Streamlit's
#: error alerts): its words carry the meaning, the colour only repeats it.
ALERT = {charts.base.ALERT_FONT["color"].upper(), charts.base.ALERT_BACKGROUND.upper()}


def _hex(colour: str) -> str:
    """"rgb(0, 114, 178)" or "rgba(0, 114, 178, 0.2)" as "#0072B2" (transparency aside)."""
    rgb = re.fullmatch(r"rgba?\((\d+),\s*(\d+),\s*(\d+)(,\s*[\d.]+)?\)", colour.strip())
    if rgb:
        return "#" + "".join(f"{int(v):02X}" for v in rgb.groups()[:3])
    return colour.upper()


def _grey(colour: str) -> bool:
    hexa = re.fullmatch(r"#([0-9A-Fa-f]{2})([0-9A-Fa-f]{2})([0-9A-Fa-f]{2})", colour)
    if hexa:
        return len(set(hexa.groups())) == 1
    return colour.lower() in {"black", "white", "grey", "gray"}


def _colours(value: object, key: str = "") -> list[str]:
    """Every colour named anywhere in a figure's JSON (keys ending in "color", and the colours
    of colour scales)."""
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "template":
                continue  # Streamlit's theme, not the figure's own colours
            found += _colours(v, k)
    elif isinstance(value, list) and key == "colorscale":  # [[position, colour], ...]
        found += [pair[1] for pair in value if isinstance(pair, list) and len(pair) == 2]
    elif isinstance(value, list):
        for v in value:
            found += _colours(v, key)
    elif isinstance(value, str) and key.lower().endswith("color"):
        found.append(value)
    return found


@pytest.mark.parametrize("page", ALL_PAGES)
def test_every_control_has_help_text(page):
    at = open_page(page)
    missing = [f"{kind} {w.key or w.label!r}" for kind in CONTROLS
               for w in getattr(at, kind, []) if not getattr(w, "help", "")]
    assert missing == []


@pytest.mark.parametrize("page", ALL_PAGES)
def test_every_figure_uses_colour_blind_safe_colours(page):
    at = open_page(page)
    unsafe = sorted({c for fig in figures(at) for c in _colours(fig)
                     if _hex(c) not in SAFE | ALERT and not _grey(_hex(c))})
    assert unsafe == []
