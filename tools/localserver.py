"""A local ``streamlit run app.py`` for the browser tests and the load test.

Only 127.0.0.1 is ever used: a free port there, the command that serves the app on it, the
health check that says it is ready, and the flags the browsers driving it are started with.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

__all__ = ["CHROMIUM_ARGS", "HOST", "free_port", "healthy", "served", "server_command"]

ROOT = Path(__file__).resolve().parents[1]

HOST = "127.0.0.1"
#: Headless Debian Chromium as the tests and the load test launch it: no sandbox (root in a
#: container), software rendering, and nothing that would reach the network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def healthy(base_url: str) -> bool:
    """Whether the app server at ``base_url`` answers its health check (``/_stcore/health``)."""
    try:
        with urllib.request.urlopen(f"{base_url}/_stcore/health", timeout=2) as response:
            return response.read().strip() == b"ok"
    except (urllib.error.URLError, OSError):
        return False


def server_command(port: int, run_log: str | None = None) -> list[str]:
    """``python -m streamlit run app.py`` on ``port`` of 127.0.0.1, headless, without usage
    statistics and without watching the sources (others may edit them while it runs). Run it
    from the repository root.

    With ``run_log``, the server is started through tools/timedserver.py, which appends the
    time of every script run to that file."""
    start = ([sys.executable, "tools/timedserver.py", run_log] if run_log
             else [sys.executable, "-m", "streamlit", "run", "app.py"])
    return [*start, "--server.port", str(port), "--server.address", HOST,
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none"]


@contextlib.contextmanager
def served(*, demo: bool) -> Iterator[tuple[str, subprocess.Popen]]:
    """The app served on a free port (the demo's limits, ``LNVIZ_DEMO=1``, or the full ones),
    once it answers its health check: its base URL and its process, ended afterwards."""
    port = free_port()
    base = f"http://{HOST}:{port}"
    server = subprocess.Popen(server_command(port), cwd=ROOT,
                              env=dict(os.environ, LNVIZ_DEMO="1" if demo else ""),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not healthy(base):
            if server.poll() is not None:
                raise RuntimeError(f"the app server exited with {server.returncode}")
            time.sleep(0.25)
        yield base, server
    finally:
        server.terminate()
        server.wait(timeout=30)
