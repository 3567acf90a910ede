"""tools/balancer.py without a browser: the HAProxy configuration it writes.

The end-to-end behaviour (stickiness, spread, uploads, a killed replica) is in
tests/test_browser_balancer.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tools.balancer import COOKIE, REPLICA_HEADER, Replica, haproxy_config

REPLICAS = [Replica(f"r{i}", 9100 + i, Path(f"r{i}.log")) for i in range(3)]


def test_the_configuration_pins_by_cookie_and_keeps_websockets_open() -> None:
    config = haproxy_config(8501, REPLICAS)
    assert "bind 127.0.0.1:8501" in config
    assert f"cookie {COOKIE} insert indirect nocache" in config
    for r in REPLICAS:
        assert f"server {r.name} 127.0.0.1:{r.port} cookie {r.name}" in config
    assert "timeout tunnel 1h" in config  # an idle WebSocket survives a lesson
    assert "option redispatch" in config  # a dead replica's learners go elsewhere
    assert "option httpchk GET /_stcore/health" in config
    assert f"set-header {REPLICA_HEADER} %[srv_name]" in config


def test_haproxy_accepts_the_configuration(tmp_path: Path) -> None:
    haproxy = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin")
    if haproxy is None:
        pytest.skip("haproxy is not installed (apt-get install haproxy)")
    path = tmp_path / "haproxy.cfg"
    path.write_text(haproxy_config(8501, REPLICAS), encoding="utf-8")
    check = subprocess.run([haproxy, "-c", "-f", str(path)], capture_output=True, text=True,
                           check=False)
    assert check.returncode == 0, check.stdout + check.stderr
