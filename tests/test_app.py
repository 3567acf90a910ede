"""The app shell, run headless with Streamlit's AppTest."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

from tools.timedserver import append_to, timed_runs

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_app_starts_and_shows_the_formula():
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert any("\\gamma" in latex.value for latex in at.latex)


def test_each_run_is_timed_into_the_run_log(tmp_path):
    """tools/timedserver.py, which the load test starts the server with, logs every run."""
    log = tmp_path / "runs.log"
    at = AppTest.from_file(APP, default_timeout=60)
    with timed_runs(append_to(log)):
        at.switch_page("app_pages/padding.py").run()
        at.run()
    lines = [line.split(" ", 2) for line in log.read_text().splitlines()]
    assert len(lines) >= 2 and lines[-1][2] == "Padding and sequences"
    assert all(0 < float(ms) < 60_000 for _, ms, _ in lines)


def test_the_app_uses_no_streamlit_internals():
    """Only Streamlit's public API in the app: streamlit.runtime is internal and
    changes between releases without notice."""
    root = Path(APP).parent
    sources = [root / "app.py", *sorted((root / "app_pages").glob("*.py")),
               *sorted((root / "lnviz").rglob("*.py"))]
    offenders = [f"{path.relative_to(root)}:{n}" for path in sources
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if "streamlit.runtime" in line]
    assert offenders == []
