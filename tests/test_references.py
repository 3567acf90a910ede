"""Every dotted name the code and the docs point at (``lnviz.batch.grid_view`` in a docstring,
a comment, README or docs/) exists: a reference to a function that moved fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: A dotted name under lnviz: `lnviz.a.b.c`, as written in prose; not a host name
#: (lnviz.example.org) nor a key of the capture format in quotes ("lnviz.version").
NAME = re.compile(r"(?<![\w/\"'.-])lnviz(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?![\w\"'-])")
HOSTS = (".org", ".com", ".io", ".net")


def _sources() -> list[Path]:
    files = [*ROOT.glob("lnviz/**/*.py"), *ROOT.glob("lnviz/**/*.js"), *ROOT.glob("app_pages/*.py"),
             *ROOT.glob("tools/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("tests/**/*.mjs"),
             ROOT / "app.py", ROOT / "README.md", *ROOT.glob("docs/*.md")]
    return sorted(f for f in files if f.name != "test_references.py")


def _resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute (of an attribute …) of one."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            fields = getattr(target, "__dataclass_fields__", {})
            if attribute in fields and not hasattr(target, attribute):
                return attribute == parts[-1]  # a dataclass field without a default
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def _references() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in _sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in NAME.findall(line):
                if name.endswith(HOSTS):
                    continue
                found.setdefault(name, []).append(f"{path.relative_to(ROOT)}:{number}")
    return found


REFERENCES = _references()


def test_there_are_references_to_check() -> None:
    assert len(REFERENCES) > 100  # the scan reads the sources (a broken glob finds nothing)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_every_dotted_name_the_code_and_docs_point_at_exists(name: str) -> None:
    assert _resolves(name), f"{name} does not exist; written at {REFERENCES[name][:5]}"
