"""The suite's own arrangement (tests/conftest.py): which tests one worker runs together."""

from __future__ import annotations

from pathlib import Path

from conftest import MOSTLY_WAITING, ONE_WORKER, work_unit
from pageutil import ALL_PAGES

REPO = Path(__file__).resolve().parents[1]


def test_every_file_and_page_a_group_names_exists() -> None:
    """A renamed file or page would silently leave its group (and load its model twice), or
    its place in the order."""
    for files, pages in ONE_WORKER.values():
        assert files and all((REPO / f).is_file() for f in files), files
        assert all(p in ALL_PAGES for p in pages), pages
    # and a renamed file that mostly waits would run beside the other browser files again
    assert all((REPO / f).is_file() for f in MOSTLY_WAITING), MOSTLY_WAITING


def test_a_test_is_handed_out_with_its_file_or_its_models_group() -> None:
    assert work_unit("tests/test_norms.py::test_layer_norm[cpu]") == "tests/test_norms.py"
    assert work_unit("tests/test_gemma.py::test_the_sandwich") == "the language models"
    assert work_unit("tests/test_accessibility.py::test_every_control_has_help_text"
                     "[app_pages/gemma.py]") == "the language models"
    assert work_unit("tests/test_bad_input.py::test_x[app_pages/smollm2.py-slider-k-1]") \
        == "the language models"
    # another page's case stays with its file
    assert work_unit("tests/test_accessibility.py::test_every_control_has_help_text"
                     "[app_pages/explorer.py]") == "tests/test_accessibility.py"
    assert work_unit("tests/test_browser.py::test_every_page_opens_from_the_navigation") \
        == "the model pages in a browser"
    assert work_unit("tests/test_browser_live.py::test_x") == "tests/test_browser_live.py"
