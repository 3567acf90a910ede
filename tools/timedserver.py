"""``streamlit run app.py`` with every script run timed into a log: the server the load test
starts, and a way to watch how fast a running server answers (docs/deploy.md).

    python tools/timedserver.py RUN_LOG [streamlit run options, e.g. --server.port 8501]

Each run of app.py appends one line to RUN_LOG: ``<unix time> <milliseconds> <page title>``, the
server-side rerun time (app.py and the page together). The timing wraps Streamlit's own script
execution, a private function patched here, in developer tooling: the app carries no timing code.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from streamlit.runtime.scriptrunner import script_runner
from streamlit.runtime.scriptrunner.exec_code import exec_func_with_error_handling

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def timed_runs(record: Callable[[float, str], None]) -> Iterator[None]:
    """Call ``record(seconds, page title)`` after every script run in this process while the
    context is open: a server's runs, or AppTest's."""

    def timed(func: Callable[[], Any], ctx: Any) -> Any:
        start = time.perf_counter()
        try:
            return exec_func_with_error_handling(func, ctx)
        finally:
            seconds = time.perf_counter() - start
            page = ctx.pages_manager.get_pages().get(ctx.page_script_hash, {})
            record(seconds, page.get("page_name") or "?")

    with mock.patch(f"{script_runner.__name__}.exec_func_with_error_handling", timed):
        yield


def append_to(path: str | Path) -> Callable[[float, str], None]:
    """A ``record`` for :func:`timed_runs` that appends each run's line to the file ``path``."""

    def record(seconds: float, page: str) -> None:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{time.time():.3f} {seconds * 1e3:.1f} {page}\n")

    return record


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    from streamlit.web import cli

    with timed_runs(append_to(args[0])):
        try:
            cli.main(["run", str(REPO / "app.py"), *args[1:]], prog_name="streamlit")
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
