"""The library's layers (DESIGN.md): imports run one way, ui → lessons, charts → models, train →
analysis → nn → batch, capture → norms, kernels, fused → data, limits, devices; a lesson imports
no other lesson (lessons/common.py aside) and a chart no other chart (charts/base.py aside); only
lnviz/ui imports Streamlit. Read from the source (every import statement, those inside functions
too), so that an import a test run never executes is checked as well."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lnviz"

#: Each module's layer, by its name below lnviz (the longest that matches): a module may import a
#: lower layer (a larger number), or its own package where that package is one layer (ui, data,
#: models). Within DESIGN.md's layers the order is finer where one module builds on another:
#: norms dispatches to fused, which falls back on kernels.
LAYERS = {
    "ui": 0, "bench": 0,
    "lessons": 1, "charts": 1,
    "models": 2, "train": 2,
    # the inspector's example files: two small models, and lnviz.capture of them
    "data.examples": 2,
    "analysis": 3,
    "nn": 4,
    "batch": 5, "capture": 5,
    "chunked": 6, "norms": 6,
    "fused": 6.5,
    "kernels": 6.7,
    "data": 7,
    "limits": 8, "devices": 8, "terms": 8,
    # the code the pages show: the snippets package reads its files; Padding's file imports
    # the data generator (lnviz.data) to rebuild a generated batch
    "snippets": 6.9,
}
#: Packages whose modules may import each other (they are one layer, not one module per lesson).
WHOLE = ("ui", "data", "models", "snippets")
#: What every lesson may import beside the layers below: the words and formats they share.
SHARED = {"lessons": "common", "charts": "base"}
#: Imports against the direction that remain, each with why: the fewer the better.
REMAINING: dict[tuple[str, str], str] = {}


@functools.cache
def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


@functools.cache  # each module is read by several tests: parsed once per process
def _imports(path: Path, name: str) -> frozenset[str]:
    """The lnviz modules ``path`` imports, a ``from`` import naming the module it takes a name
    from, or the submodule it names, and "streamlit" if it imports Streamlit."""
    modules = _modules()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == "streamlit":
                found.add("streamlit")
            elif target.startswith("lnviz.") and target != name:
                found.add(target)
    return frozenset(found)


def _layer(module: str) -> tuple[str, float] | None:
    """The module's package below lnviz (its first name) and its layer."""
    parts = module.split(".")[1:]
    if not parts:
        return None  # lnviz itself: the public API gathers the layers
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return parts[0], LAYERS[".".join(parts[:end])]
    raise KeyError(f"{module} has no layer in LAYERS")


def test_every_module_of_the_package_has_a_layer() -> None:
    for name in _modules():
        _layer(name)  # raises for a module no entry of LAYERS covers


def _against(name: str, imports: frozenset[str]) -> list[str]:
    """The imports of module ``name`` that run against the layers."""
    own, rank = _layer(name)
    against = []
    for target in sorted(imports - {"streamlit"}):
        where = _layer(target)
        if where is None:
            continue
        other, other_rank = where
        if other_rank > rank:
            continue
        if other == own and (own in WHOLE or name == f"lnviz.{own}"  # a package's __init__
                             or target in (f"lnviz.{own}", f"lnviz.{own}.{SHARED.get(own)}")):
            continue
        if (name, target) not in REMAINING:
            against.append(target)
    return against


@pytest.mark.parametrize("name", sorted(n for n in _modules() if n != "lnviz"))
def test_imports_run_one_way(name: str) -> None:
    against = _against(name, _imports(_modules()[name], name))
    assert against == [], f"{name} imports against the layers: {against}"


def test_the_check_refuses_what_the_design_forbids() -> None:
    assert _against("lnviz.lessons.beyond", {"lnviz.lessons.minilm", "lnviz.lessons.common",
                                            "lnviz.analysis"}) == ["lnviz.lessons.minilm"]
    assert _against("lnviz.nn", {"lnviz.analysis", "lnviz.norms"}) == ["lnviz.analysis"]
    assert _against("lnviz.charts.minilm", {"lnviz.charts.base", "lnviz.charts.beyond",
                                            "lnviz.lessons.minilm"}) == ["lnviz.charts.beyond",
                                                                        "lnviz.lessons.minilm"]
    assert _against("lnviz.ui.state", {"lnviz.ui.params", "lnviz.lessons.minilm"}) == []


def test_only_the_ui_imports_streamlit() -> None:
    importers = sorted(name for name, path in _modules().items()
                       if "streamlit" in _imports(path, name))
    assert importers and all(name.startswith("lnviz.ui") for name in importers), importers


def test_what_remains_against_the_direction_is_still_there() -> None:
    """An exception that no longer applies is taken off the list (and this test fails until it
    is)."""
    for importer, target in REMAINING:
        assert target in _imports(_modules()[importer], importer), (importer, target)


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from lnviz.lessons.minilm import PRESETS\n"
                      "import streamlit as st\nfrom lnviz import nn\n")
    assert _imports(source, "lnviz.probe") == {"lnviz.lessons.minilm", "streamlit", "lnviz.nn"}
