"""The app shell, run headless with Streamlit's AppTest."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_app_starts_and_shows_the_formula():
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert any("\\gamma" in latex.value for latex in at.latex)
