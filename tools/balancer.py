"""N replicas of the app behind HAProxy, all on 127.0.0.1: the way Streamlit scales past one
process, as a command and as a context manager for the tests and the load test.

    python tools/balancer.py                        # 3 replicas behind http://127.0.0.1:8501
    python tools/balancer.py --replicas 2 --port 8080 -- --server.disconnectedSessionTTL 10

Ctrl-C (or SIGTERM) stops HAProxy and every replica. Needs Debian's ``haproxy`` on PATH
(``apt-get install haproxy``).

Why the balancer is set up as it is (the configuration is written to a temporary directory;
:func:`haproxy_config` makes it):

- **Sticky sessions by a cookie HAProxy inserts** (``lnviz_replica=r0``, ``r1``, ...). A
  Streamlit session lives in the process that served its WebSocket; its uploads (an HTTP PUT) and
  media requests must reach that process, or they fail (HTTP 400). A cookie pins one browser to
  one replica whatever address it comes from; pinning by client address would send a classroom
  behind one NAT to one replica.
- **WebSockets**: HAProxy passes the upgrade of ``/_stcore/stream`` through in HTTP mode;
  ``timeout tunnel`` (1 h) keeps an idle learner's connection open through a lesson.
- **Failover**: every replica is health-checked on ``/_stcore/health`` every 2 s; a browser
  whose replica is down (or refuses the connection) is sent to another one (``option
  redispatch``) and gets that replica's cookie. A replica is counted down only after three
  missed checks in a row: a replica busy computing answers late, and moving its learners would
  cost them their sessions. The app's URL holds the view's settings, so the
  reconnected tab shows the same view; what only the lost process held (an upload, a training
  run's results) is gone.
- Every response carries ``X-Lnviz-Replica: r<i>``, the replica that served it, for the tests
  and for anyone watching with the browser's developer tools.
- The replicas share one ``server.cookieSecret`` (generated per start), so a cookie one replica
  signed (Streamlit's XSRF token) is accepted by the others.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere: tools/ is beside it

from tools.localserver import HOST, free_port, healthy, server_command  # noqa: E402

__all__ = ["COOKIE", "REPLICA_HEADER", "Balancer", "Replica", "haproxy_config"]

#: The cookie HAProxy inserts to pin a browser to a replica, and the response header naming the
#: replica that served a response.
COOKIE = "lnviz_replica"
REPLICA_HEADER = "X-Lnviz-Replica"


@dataclass
class Replica:
    """One ``streamlit run app.py`` behind the balancer: ``name`` is its cookie value."""

    name: str
    port: int
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def haproxy_config(port: int, replicas: list[Replica]) -> str:
    """HAProxy's configuration: the frontend on ``port`` of 127.0.0.1, the replicas behind it."""
    servers = "\n".join(f"    server {r.name} {HOST}:{r.port} cookie {r.name}" for r in replicas)
    return f"""\
global
    maxconn 4096

defaults
    mode http
    option forwardfor
    option redispatch            # a pinned replica that is down: go to another one
    retries 2
    timeout connect 3s
    timeout http-request 30s
    timeout client 1h
    timeout server 1h            # a long computation (a training run) answers late
    timeout tunnel 1h            # an open WebSocket, idle through a lesson
    timeout client-fin 10s

frontend lnviz
    bind {HOST}:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    cookie {COOKIE} insert indirect nocache httponly attr "SameSite=Lax"
    option httpchk GET /_stcore/health
    http-check expect string ok
    # A replica busy importing torch or computing can answer its health check late: only
    # three misses in a row (about 6 s) count as down, or a busy replica's learners would be
    # sent elsewhere and lose their session. A killed replica refuses connections, and a
    # refused request is sent to another replica at once (redispatch), without waiting.
    default-server check inter 2s fall 3 rise 2
    timeout check 5s
    http-response set-header {REPLICA_HEADER} %[srv_name]
{servers}
"""


class Balancer:
    """HAProxy on a free port (or ``port``) of 127.0.0.1 in front of ``replicas`` app servers.

    Use it as a context manager: on entry every replica is started at once and HAProxy once
    all of them answer their health check; on exit all are stopped. ``extra_args`` are added to
    each replica's ``streamlit run`` options; with ``run_log`` each replica appends its script
    runs' times there (tools/timedserver.py). The configuration and the logs go to ``workdir``
    (default: a new temporary directory)."""

    def __init__(self, replicas: int = 3, *, port: int | None = None,
                 extra_args: tuple[str, ...] = (), run_log: str | None = None,
                 env: dict[str, str] | None = None, start_timeout: float = 120,
                 workdir: Path | None = None) -> None:
        if replicas < 1:
            raise ValueError("a balancer needs at least one replica")
        self.port = port or free_port()
        self.extra_args, self.run_log, self.start_timeout = tuple(extra_args), run_log, \
            start_timeout
        self.env = {**os.environ, **(env or {}),
                    "STREAMLIT_SERVER_COOKIE_SECRET": secrets.token_hex(32)}
        # the configuration and every process's log (kept after the stop, for a post-mortem)
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="lnviz-balancer-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.replicas = [Replica(f"r{i}", free_port(), self.dir / f"r{i}.log")
                         for i in range(replicas)]
        self.haproxy: subprocess.Popen | None = None
        self.haproxy_log = self.dir / "haproxy.log"

    @property
    def url(self) -> str:
        """The balancer's base URL: what learners open."""
        return f"http://{HOST}:{self.port}"

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def __enter__(self) -> Balancer:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        # Debian installs it in /usr/sbin, which a non-root user's PATH may leave out
        haproxy = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin")
        if haproxy is None:
            raise RuntimeError("needs the `haproxy` executable on PATH (apt-get install haproxy)")
        for r in self.replicas:  # all at once: their imports overlap
            self._launch(r)
        deadline = time.monotonic() + self.start_timeout
        for r in self.replicas:
            self._wait(r.url, deadline, r.proc, r.log)
        config = self.dir / "haproxy.cfg"
        config.write_text(haproxy_config(self.port, self.replicas), encoding="utf-8")
        check = subprocess.run([haproxy, "-c", "-q", "-f", str(config)], capture_output=True,
                               text=True, check=False)
        if check.returncode:
            raise RuntimeError(f"haproxy refused {config}: {check.stderr or check.stdout}")
        with open(self.haproxy_log, "wb") as log:
            self.haproxy = subprocess.Popen([haproxy, "-db", "-f", str(config)], stdout=log,
                                            stderr=subprocess.STDOUT)
        self._wait(self.url, deadline, self.haproxy, self.haproxy_log)

    def _launch(self, replica: Replica) -> None:
        command = [*server_command(replica.port, run_log=self.run_log), *self.extra_args]
        with open(replica.log, "ab") as log:
            replica.proc = subprocess.Popen(command, cwd=REPO, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT)

    def restart(self, name: str) -> None:
        """Start a stopped replica again (HAProxy sends new sessions to it once it is up)."""
        replica = self.replica(name)
        if replica.alive:
            return
        self._launch(replica)
        self._wait(replica.url, time.monotonic() + self.start_timeout, replica.proc, replica.log)

    @staticmethod
    def _wait(url: str, deadline: float, proc: subprocess.Popen | None, log: Path) -> None:
        while not healthy(url):
            if proc is None or proc.poll() is not None or time.monotonic() > deadline:
                state = (f"exited with code {proc.returncode}" if proc and proc.poll() is not None
                         else "did not answer its health check in time")
                tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                raise RuntimeError(f"{url} {state}; its log ends with:\n{tail}")
            time.sleep(0.2)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Stop one replica abruptly (a crash, an out-of-memory kill) and wait for its end."""
        replica = self.replica(name)
        if replica.alive:
            replica.proc.send_signal(sig)
            replica.proc.wait(timeout=30)

    def stop(self) -> None:
        """Stop HAProxy and every replica: SIGTERM to all, SIGKILL after 15 s to what is left."""
        procs = [p for p in [self.haproxy, *(r.proc for r in self.replicas)]
                 if p is not None and p.poll() is None]
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
        end = time.monotonic() + 15
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)

    def pids(self) -> list[int]:
        """The processes serving the app: HAProxy and the live replicas."""
        return [p.pid for p in [self.haproxy, *(r.proc for r in self.replicas)]
                if p is not None and p.poll() is None]


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3, help="app servers (default 3)")
    parser.add_argument("--port", type=int, default=8501,
                        help="the balancer's port on 127.0.0.1 (default 8501)")
    parser.add_argument("--run-log", help="each replica appends its script runs' times here "
                                          "(tools/timedserver.py)")
    parser.add_argument("streamlit_args", nargs="*",
                        help="options for every replica's `streamlit run`, after --")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        with Balancer(args.replicas, port=args.port, extra_args=tuple(args.streamlit_args),
                      run_log=args.run_log) as balancer:
            for r in balancer.replicas:
                print(f"replica {r.name}: {r.url} (pid {r.proc.pid}, log {r.log})", flush=True)
            print(f"balancer: {balancer.url} (haproxy pid {balancer.haproxy.pid}, config "
                  f"{balancer.dir / 'haproxy.cfg'}); Ctrl-C stops all", flush=True)
            while True:
                time.sleep(1)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
