"""Load test: N concurrent Chromium sessions walking every page of a local ``streamlit run app.py``.

A script, not a pytest test::

    python tools/loadtest.py                          # 10 sessions, 60 s
    python tools/loadtest.py --sessions 2 --seconds 15 --json /tmp/smoke.json
    python tools/loadtest.py --sessions 1 --once      # open every page once: memory footprint
    python tools/loadtest.py --sessions 6 --warmup --session-ttl 5 [--replicas 3]
                                                      # memory that comes back; 3 replicas

What it does, bounded in count and time throughout:

1. starts ``streamlit run app.py`` through tools/timedserver.py (which logs every script run's
   time) on a free port of 127.0.0.1 (nothing else is ever contacted), waits for
   ``/_stcore/health`` and reads the server's resident memory (VmRSS of the process and its
   children, from /proc);
2. starts one process per session, each with its own ``sync_playwright()`` and its own headless
   Debian Chromium (``shutil.which("chromium")``); every session opens the home page, and once
   all are ready they start together;
3. each session walks the pages of the sidebar navigation (read at run time), round and round,
   for ``--seconds``. On each page it moves up to two controls — a slider (ArrowRight/ArrowLeft
   on its focused thumb) and a segmented control (a click on an unselected option) — and times
   each rerun from the interaction until the app is idle again: the server's messages on the
   app's WebSocket said the run started and finished, the script-run state is "notRunning" and
   the status widget ``[data-testid="stStatusWidget"]`` is gone (every wait bounded). Page
   opens from the navigation are timed the same way. The training page and the Performance
   page are only opened: their work is a long computation a learner starts on purpose;
4. errors: an exception box, the redacted "This app has encountered an error" notice, a lost
   connection, a crashed page, a timed-out wait, a session that could not start;
5. the server's RSS is sampled every second (peak), and again ``--settle`` seconds after the
   browsers have closed. With ``--warmup``, one session per replica first opens every page once
   and closes, and the RSS ``--settle`` seconds later is the warmed baseline that the RSS after
   the run is compared with; ``--session-ttl`` shortens the server's grace period for a closed
   tab's session (``server.disconnectedSessionTTL``, 120 s by default), and ``--settle``
   defaults to 15 s past it. With ``--replicas N`` the sessions go through HAProxy to N replicas
   (tools/balancer.py), and "the server" is all of them and HAProxy together.

It prints a summary table and, with ``--json PATH``, writes every figure. The exit status is 0
when every session ran and no error was counted, 1 otherwise. The server and every browser are
stopped in ``finally``, and a global ``--timeout`` bounds the whole run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing as mp
import os
import platform
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere: lnviz is beside it

from tools.localserver import CHROMIUM_ARGS, free_port, healthy, server_command  # noqa: E402

#: Pages that are only opened, never driven: their work is a long computation started on purpose.
NO_MOVES = {"LN-LSTM vs LSTM", "Performance"}
#: Segmented-control options never clicked: "Upload" leaves the Explorer waiting for a file.
SKIP_OPTIONS = ("Upload",)
VIEWPORT = {"width": 1280, "height": 900}

NAV_LINKS = '[data-testid="stSidebarNavLink"]'
EXCEPTION = '[data-testid="stException"]'
REDACTED_ERROR = "This app has encountered an error"

#: Installed before the app's own scripts: timestamps (page clock, ms) of the server's messages on
#: the app's WebSocket that start and end a script run. Each message is a ForwardMsg protobuf:
#: field 6 is ``script_finished`` (an enum; 2 = stopped early for a newer rerun) and field 9 is
#: ``session_status_changed`` (a SessionStatus whose field 2 is ``script_is_running``). Field 4,
#: ``new_session``, opens every run: it and ``script_finished`` carry the run's identity in
#: ``metadata`` (field 2), whose ``run`` (field 6) lists the fragments the run was for
#: (``fragment_ids``, field 2; empty for a run of the whole page), recorded as a 'run' entry and
#: on the 'finished' one. Each ``delta`` (field 5) is recorded in ``__ltdeltas`` with the fragment
#: its element belongs to (its field 8; '' outside any fragment). Only top-level fields and those
#: small messages are read, so the cost per message is tiny.
WS_HOOK = r"""(() => {
  if (window.__ltHooked) return;
  window.__ltHooked = true;
  window.__ltws = [];
  window.__ltdeltas = [];
  const varint = (b, i) => {
    let v = 0, s = 1, x;
    do { x = b[i++]; v += (x & 0x7f) * s; s *= 128; } while (x & 0x80 && i < b.length);
    return [v, i];
  };
  const fields = (b, from, to, cb) => {
    let i = from;
    while (i < to) {
      let key, v, n;
      [key, i] = varint(b, i);
      const f = Math.floor(key / 8), w = key & 7;
      if (w === 0) { [v, i] = varint(b, i); cb(f, v, 0, 0); }
      else if (w === 2) { [n, i] = varint(b, i); cb(f, null, i, i + n); i += n; }
      else if (w === 1) i += 8;
      else if (w === 5) i += 4;
      else return;
    }
  };
  const text = (b, from, to) => new TextDecoder().decode(b.subarray(from, to));
  const fragmentsOf = (b, from, to) => {
    const ids = [];
    fields(b, from, to, (f, v, a, z) => {
      if (f === 6 && v === null) {
        fields(b, a, z, (g, w, c, d) => { if (g === 2 && w === null) ids.push(text(b, c, d)); });
      }
    });
    return ids;
  };
  const parse = (b, t) => {
    try {
      let fragments = [], session = false, finished = null, delta = null;
      fields(b, 0, b.length, (f, v, from, to) => {
        if (f === 2 && v === null) fragments = fragmentsOf(b, from, to);
        if (f === 4) session = true;
        if (f === 5 && v === null) {
          delta = '';
          fields(b, from, to, (g, w, c, d) => {
            if (g === 8 && w === null) delta = text(b, c, d);
          });
        }
        if (f === 6) finished = v;
        if (f === 9) {
          let running = false;
          fields(b, from, to, (g, w) => { if (g === 2 && w) running = true; });
          window.__ltws.push({t: t, kind: running ? 'start' : 'stop'});
        }
      });
      // the metadata may come after the fields it describes: pushed once the message is read
      if (session) window.__ltws.push({t: t, kind: 'run', fragments: fragments});
      if (finished !== null) {
        window.__ltws.push({t: t, kind: 'finished', v: finished, fragments: fragments});
      }
      if (delta !== null) window.__ltdeltas.push({t: t, fragment: delta});
    } catch (e) { /* not a ForwardMsg: ignore */ }
    if (window.__ltws.length > 2000) window.__ltws.splice(0, 1000);
    if (window.__ltdeltas.length > 4000) window.__ltdeltas.splice(0, 2000);
  };
  const Native = window.WebSocket;
  class Hooked extends Native {
    constructor(...args) {
      super(...args);
      if (!String(args[0]).includes('/_stcore/stream')) return;
      this.addEventListener('message', (ev) => {
        const t = performance.now();
        if (ev.data instanceof ArrayBuffer) parse(new Uint8Array(ev.data), t);
        else if (ev.data instanceof Blob) {
          ev.data.arrayBuffer().then(a => parse(new Uint8Array(a), t));
        }
      });
    }
  }
  window.WebSocket = Hooked;
})();"""

#: Start watching for a script run: the interaction's time, and the DOM's switch back to idle.
_WATCH = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (window.__lt && window.__lt.observer) window.__lt.observer.disconnect();
  const lt = {t0: performance.now(), idleAt: null, status: false};
  lt.observer = new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'notRunning') lt.idleAt = performance.now();
  });
  lt.observer.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
  window.__lt = lt;
}"""

#: Polled after an interaction: null while the run it caused is pending, else its timings (ms
#: from the interaction). Done means: the server said a run started and then finished (not
#: "stopped early for a rerun", with no newer start), the script-run state is "notRunning", the
#: status widget ``[data-testid="stStatusWidget"]`` is gone and no element is stale. The end is
#: the latest of the finish message, the "not running" status message and the DOM's switch to
#: "notRunning" — the moment the learner sees the app idle again.
_DONE = """() => {
  const lt = window.__lt;
  const app = document.querySelector('[data-testid="stApp"]');
  if (!lt || !app || !window.__ltws) return null;
  if (document.querySelector('[data-testid="stStatusWidget"]')) { lt.status = true; return null; }
  if (app.getAttribute('data-test-script-state') !== 'notRunning') return null;
  if (document.querySelector('[data-stale="true"]')) return null;
  const ev = window.__ltws.filter(e => e.t >= lt.t0);
  const start = ev.find(e => e.kind === 'start');
  let last = -1;
  ev.forEach((e, i) => { if (e.kind === 'start') last = i; });
  const after = ev.slice(last + 1);
  const fin = after.find(e => e.kind === 'finished' && e.v !== 2);
  if (!start || !fin) return null;
  const stop = after.find(e => e.kind === 'stop');
  let end = fin.t;
  if (stop && stop.t > end) end = stop.t;
  if (lt.idleAt !== null && lt.idleAt > end) end = lt.idleAt;
  return {ms: end - lt.t0, start_ms: start.t - lt.t0, server_ms: fin.t - start.t,
          status_seen: lt.status, runs: ev.filter(e => e.kind === 'start').length};
}"""

#: The page's script has run to the end: idle, nothing stale, a title in the main area.
_IDLE_WITH_TITLE = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-testid="stStatusWidget"]')
    && !document.querySelector('[data-stale="true"]')
    && !!document.querySelector('[data-testid="stMain"] h1');
}"""

#: Candidate controls in the main area: sliders (their thumbs are range inputs or role=slider)
#: and segmented controls (button groups of role=radio); each tagged for a later locator.
_CONTROLS = """(skip) => {
  const out = [];
  const main = document.querySelector('[data-testid="stMain"]');
  if (!main) return out;
  document.querySelectorAll('[data-lt-id]').forEach(e => e.removeAttribute('data-lt-id'));
  let n = 0;
  // laid out and shown: a control in a closed expander has a box but cannot be clicked
  const visible = (e) => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0
      && e.checkVisibility({visibilityProperty: true, opacityProperty: true});
  };
  main.querySelectorAll('[data-testid="stSlider"]').forEach(box => {
    const thumb = box.querySelector('input[type="range"], [role="slider"]');
    if (!thumb || !visible(box) || thumb.disabled) return;
    const get = (a, b) => parseFloat(thumb.getAttribute(a) ?? thumb.getAttribute(b));
    const id = 'lt' + (n++);
    thumb.setAttribute('data-lt-id', id);
    const label = box.querySelector('[data-testid="stWidgetLabel"]');
    out.push({kind: 'slider', id: id, label: label ? label.innerText.trim() : '?',
              value: thumb.value !== undefined && thumb.tagName === 'INPUT'
                       ? parseFloat(thumb.value) : get('aria-valuenow', 'value'),
              min: get('min', 'aria-valuemin'), max: get('max', 'aria-valuemax')});
  });
  main.querySelectorAll('[data-testid="stButtonGroup"] [role="radiogroup"]').forEach(group => {
    if (!visible(group)) return;
    const options = [];
    group.querySelectorAll('[role="radio"]').forEach(b => {
      const text = b.innerText.trim();
      if (b.getAttribute('aria-checked') === 'true' || b.disabled || !visible(b)) return;
      if (skip.some(s => text.startsWith(s))) return;
      const id = 'lt' + (n++);
      b.setAttribute('data-lt-id', id);
      options.push({id: id, text: text});
    });
    if (options.length) out.push({kind: 'segmented', label: group.getAttribute('aria-label') || '?',
                                  options: options});
  });
  return out;
}"""


# --- memory ----------------------------------------------------------------------------------

def _proc_table() -> dict[int, tuple[int, int]]:
    """Each live process: (parent pid, CPU clock ticks used so far, user + system), from
    /proc/*/stat."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces: split after its last ")"
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 12:
            table[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return table


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (all cores, from /proc/stat)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children_map(table: dict[int, tuple[int, int]] | None = None) -> dict[int, list[int]]:
    """Each live process's children."""
    table = _proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    return children


def descendants(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    """Every process below ``pid`` (not ``pid`` itself)."""
    children = _children_map() if children is None else children
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def rss_kb(pid: int) -> int:
    """VmRSS of one process in kB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def pss_kb(pid: int) -> int:
    """Proportional set size of one process in kB: shared pages split among their users, so
    that the sum over many browser processes is not inflated (0 when unreadable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def tree_pss_mb(pid: int, children: dict[int, list[int]] | None = None) -> float:
    """PSS of ``pid`` and all its descendants, in MB (MiB)."""
    return sum(pss_kb(p) for p in [pid, *descendants(pid, children)]) / 1024


def tree_rss_mb(pid: int, children: dict[int, list[int]] | None = None) -> float:
    """Resident memory of ``pid`` and all its descendants, in MB (MiB)."""
    return sum(rss_kb(p) for p in [pid, *descendants(pid, children)]) / 1024


class Sampler(threading.Thread):
    """Samples once a second: the server's RSS (its process and children); every
    ``browser_every`` samples also the browsers' PSS; and the CPU time both have used (each
    process's last-seen total, so that a browser that has exited still counts)."""

    def __init__(self, server_pid: int, workers: list, t0: float, browser_every: int = 5):
        super().__init__(name="loadtest-sampler", daemon=True)
        self.server_pid, self.workers, self.t0 = server_pid, workers, t0
        self.browser_every = browser_every
        self.phase = "before"
        self.samples: list[dict] = []
        self.cpu_ticks: dict[str, dict[int, int]] = {"server": {}, "browsers": {}}
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._tick = os.sysconf("SC_CLK_TCK")

    def snap(self, browsers: bool = True) -> dict:
        with self._lock:
            table = _proc_table()
            children = _children_map(table)
            server_pids = [self.server_pid, *descendants(self.server_pid, children)]
            browser_pids = [p for w in self.workers if w.pid
                            for p in [w.pid, *descendants(w.pid, children)]]
            for name, pids in (("server", server_pids), ("browsers", browser_pids)):
                seen = self.cpu_ticks[name]
                for pid in pids:
                    if pid in table:
                        seen[pid] = max(seen.get(pid, 0), table[pid][1])
            s = {"t": round(time.time() - self.t0, 1), "phase": self.phase,
                 "server_mb": round(sum(rss_kb(p) for p in server_pids) / 1024, 1),
                 "server_cpu_s": round(sum(self.cpu_ticks["server"].values()) / self._tick, 2),
                 "browsers_cpu_s": round(sum(self.cpu_ticks["browsers"].values())
                                         / self._tick, 2),
                 "machine_cpu_s": round(machine_cpu_s(), 2)}
            if browsers:
                s["sessions_mb"] = round(sum(pss_kb(p) for p in browser_pids) / 1024, 1)
            self.samples.append(s)
            return s

    def run(self) -> None:
        n = 0
        while not self._halt.wait(1.0):
            n += 1
            self.snap(browsers=n % self.browser_every == 0)

    def halt(self) -> None:
        self._halt.set()
        self.join(timeout=10)


# --- server ----------------------------------------------------------------------------------

def stop_tree(proc: mp.Process | subprocess.Popen, grace: float = 10) -> None:
    """Stop a process and everything below it, each by its own pid: TERM, then KILL."""
    pid = proc.pid
    if pid is None:
        return
    below = descendants(pid)
    alive = proc.poll() is None if isinstance(proc, subprocess.Popen) else proc.is_alive()
    if alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end:
            done = proc.poll() is not None if isinstance(proc, subprocess.Popen) \
                else not proc.is_alive()
            if done:
                break
            time.sleep(0.2)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if isinstance(proc, subprocess.Popen):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    else:
        proc.join(timeout=5)
    # what it started (browsers, Playwright's driver) may outlive it: end those by pid too
    for p in below:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)


# --- one session (runs in its own process) ---------------------------------------------------

class SessionError(Exception):
    """Something the session counts as an error."""


def _session(index: int, base: str, cfg: dict, ready: mp.Queue, go: mp.Event,
             results: mp.Queue) -> None:
    """One browser session: its own Playwright and Chromium; reports one dict on ``results``."""
    # the parent stops this process with SIGTERM: unwind, so that the browser closes
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if cfg["nice"]:  # the browser (a child) inherits it: the server gets the CPU first
        os.nice(cfg["nice"])
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    rng = random.Random(1000 + index)
    out: dict = {"session": index, "reruns": [], "opens": [], "errors": [], "noops": 0,
                 "js_errors": 0, "pages_visited": 0, "started": False}
    hard_end = cfg["hard_deadline"]
    rerun_ms = int(cfg["rerun_timeout"] * 1000)
    page_ms = int(cfg["page_timeout"] * 1000)
    crashed = {"flag": False}
    tick = os.sysconf("SC_CLK_TCK")

    def server_cpu_s() -> float:
        """CPU seconds the server (its process tree: replicas and HAProxy too) has used. The
        difference around one interaction is that interaction's cost when this session is
        the only one (``--sessions 1``); with several, the others' work is mixed in."""
        table = _proc_table()
        pids = [cfg["server_pid"], *descendants(cfg["server_pid"], _children_map(table))]
        return sum(table[p][1] for p in pids if p in table) / tick

    def error(what: str) -> None:
        out["errors"].append(f"session {index}: {what}")

    def left_ms(cap: int) -> int:
        return max(1000, min(cap, int((hard_end - time.time()) * 1000)))

    def check(page, where: str) -> None:
        """Count an exception box, the redacted error notice, a lost connection, a crash."""
        if crashed["flag"]:
            raise SessionError(f"{where}: page crashed")
        found = page.evaluate(
            """(notice) => {
              const app = document.querySelector('[data-testid="stApp"]');
              return {exc: document.querySelectorAll('[data-testid="stException"]').length,
                      notice: (document.body.innerText || '').includes(notice),
                      conn: app ? app.getAttribute('data-test-connection-state') : null};
            }""", REDACTED_ERROR)
        if found["exc"]:
            error(f"{where}: {found['exc']} exception box(es)")
        if found["notice"]:
            error(f"{where}: '{REDACTED_ERROR}'")
        if found["conn"] not in (None, "CONNECTED"):
            error(f"{where}: connection state {found['conn']}")

    def wait_run(page, where: str, timeout_ms: int) -> dict | None:
        """Wait for the run the last action started; its timings, or None when none started."""
        try:
            handle = page.wait_for_function(_DONE, polling=50, timeout=left_ms(timeout_ms))
            return handle.json_value()
        except PlaywrightTimeout:
            started = page.evaluate(
                "() => !!window.__ltws && window.__ltws.some(e => e.kind === 'start'"
                " && e.t >= window.__lt.t0)")
            if started:
                error(f"{where}: run not finished within {timeout_ms / 1000:.0f} s")
            return None

    def open_page(page, link: dict) -> bool:
        """Click the page's navigation link; wait until its script has run to the end."""
        where = f"open {link['title']}"
        page.evaluate(_WATCH)
        cpu = server_cpu_s()
        page.locator(NAV_LINKS).nth(link["index"]).click(timeout=left_ms(page_ms))
        n_errors = len(out["errors"])
        timing = wait_run(page, where, page_ms)
        if timing is None:
            if len(out["errors"]) == n_errors:  # else wait_run has said what happened
                error(f"{where}: no script run within {page_ms / 1000:.0f} s")
            return False
        page.wait_for_function(_IDLE_WITH_TITLE, polling=100, timeout=left_ms(page_ms))
        here = page.evaluate("() => location.href.split('?')[0].replace(/\\/$/, '')")
        if here != link["href"]:
            error(f"{where}: landed on {here}")
        out["opens"].append({"page": link["title"], **timing,
                             "server_cpu_s": round(server_cpu_s() - cpu, 3)})
        out["pages_visited"] += 1
        check(page, where)
        return True

    def move(page, title: str, slider_dirs: dict) -> None:
        controls = page.evaluate(_CONTROLS, list(SKIP_OPTIONS))
        sliders = [c for c in controls if c["kind"] == "slider" and c["max"] > c["min"]]
        groups = [c for c in controls if c["kind"] == "segmented"]
        chosen = []
        if sliders:
            chosen.append(rng.choice(sliders))
        if groups:
            chosen.append(rng.choice(groups))
        for control in chosen[: cfg["moves"]]:
            if time.time() > hard_end:
                return
            if control["kind"] == "slider":
                key = (title, control["label"])
                direction = -slider_dirs.get(key, -1)   # alternate: +1, -1, +1, ...
                if control["value"] >= control["max"]:
                    direction = -1
                elif control["value"] <= control["min"]:
                    direction = 1
                slider_dirs[key] = direction
                what = f"slider {control['label']!r} {'→' if direction > 0 else '←'}"
                target = page.locator(f'[data-lt-id="{control["id"]}"]')
                target.focus(timeout=left_ms(page_ms))
                page.evaluate(_WATCH)
                cpu = server_cpu_s()
                page.keyboard.press("ArrowRight" if direction > 0 else "ArrowLeft")
                now = page.evaluate(
                    """(id) => {
                      const e = document.querySelector(`[data-lt-id="${id}"]`);
                      return e ? parseFloat(e.value ?? e.getAttribute('aria-valuenow')) : null;
                    }""", control["id"])
                if now == control["value"]:  # the thumb did not move: no rerun to wait for
                    out["noops"] += 1
                    continue
            else:
                option = rng.choice(control["options"])
                what = f"segmented {control['label']!r} → {option['text']!r}"
                target = page.locator(f'[data-lt-id="{option["id"]}"]')
                target.scroll_into_view_if_needed(timeout=left_ms(page_ms))
                page.evaluate(_WATCH)
                cpu = server_cpu_s()
                target.click(timeout=left_ms(page_ms))
            timing = wait_run(page, f"{title}: {what}", rerun_ms)
            if timing is None:
                out["noops"] += 1
            else:
                out["reruns"].append({"page": title, "control": what, **timing,
                                      "server_cpu_s": round(server_cpu_s() - cpu, 3)})
            check(page, f"{title}: {what}")

    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=cfg["chromium"], headless=True,
                                         args=CHROMIUM_ARGS, timeout=left_ms(120_000))
            try:
                context = browser.new_context(viewport=VIEWPORT)
                context.set_default_timeout(page_ms)
                context.add_init_script(WS_HOOK)

                def fresh_page():
                    """A new tab on the home page; the navigation is complete once the home
                    page's script has run."""
                    tab = context.new_page()
                    tab.on("crash", lambda *_: crashed.update(flag=True))
                    tab.on("pageerror", lambda *_: out.update(js_errors=out["js_errors"] + 1))
                    tab.goto(base, timeout=left_ms(page_ms))
                    tab.wait_for_function(_IDLE_WITH_TITLE, polling=100,
                                          timeout=left_ms(page_ms))
                    return tab

                page = fresh_page()
                links = page.evaluate(
                    """(sel) => Array.from(document.querySelectorAll(sel)).map((a, i) => ({
                         index: i, href: a.href.split('?')[0].replace(/\\/$/, ''),
                         title: a.innerText.split('\\n').filter(s => s.trim()).pop().trim()}))""",
                    NAV_LINKS)
                if len(links) < 2:
                    raise SessionError(f"navigation lists {len(links)} page(s)")
                check(page, "home")
                out["pages"] = [link["title"] for link in links]
                ready.put(index)
                if not go.wait(timeout=max(1.0, hard_end - time.time())):
                    raise SessionError("never told to start")
                out["started"] = True
                end = time.time() + cfg["seconds"]
                slider_dirs: dict = {}
                # spread the sessions over the pages: session i starts at page i + 1
                order = [links[(index + 1 + k) % len(links)] for k in range(len(links))]
                current = links[0]["href"]
                k = 0
                while time.time() < hard_end:
                    if cfg["once"] and k >= len(order):
                        break
                    if not cfg["once"] and time.time() >= end:
                        break
                    link = order[k % len(order)]
                    k += 1
                    if link["href"] == current:
                        continue
                    try:
                        if not open_page(page, link):
                            current = None
                            continue
                        current = link["href"]
                        if link["title"] not in NO_MOVES and cfg["moves"] > 0:
                            move(page, link["title"], slider_dirs)
                    except PlaywrightTimeout as err:
                        error(f"{link['title']}: timeout: {str(err).splitlines()[0]}")
                        current = None
                    except SessionError as err:
                        error(str(err))
                        if crashed["flag"]:  # start over in a fresh tab
                            crashed["flag"] = False
                            with contextlib.suppress(PlaywrightError):
                                page.close()
                            page = fresh_page()
                            current = links[0]["href"]
                out["seconds_walked"] = round(time.time() - (end - cfg["seconds"]), 1)
            finally:
                with contextlib.suppress(PlaywrightError):
                    browser.close()
    except SessionError as err:
        error(str(err))
    except PlaywrightTimeout as err:
        error(f"timeout: {str(err).splitlines()[0]}")
    except (PlaywrightError, OSError) as err:
        error(f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    finally:
        results.put(out)


# --- the run ---------------------------------------------------------------------------------

def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def run(args: argparse.Namespace) -> dict:
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("needs a `chromium` executable on PATH (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as err:
        raise SystemExit("needs the playwright package (pip install playwright)") from err

    started_at = time.time()
    deadline = started_at + args.timeout
    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    fd, log_name = tempfile.mkstemp(prefix="lnviz-loadtest-", suffix=".log")
    log = os.fdopen(fd, "wb")
    fd, runs_name = tempfile.mkstemp(prefix="lnviz-loadtest-runs-", suffix=".log")
    os.close(fd)  # the server appends one line per script run (tools/timedserver.py)
    streamlit_args = ([] if args.session_ttl is None
                      else ["--server.disconnectedSessionTTL", str(args.session_ttl)])
    if args.replicas:  # HAProxy on ``port`` and the replicas behind it (tools/balancer.py)
        command = [sys.executable, "tools/balancer.py", "--replicas", str(args.replicas),
                   "--port", str(port), "--run-log", runs_name, "--", *streamlit_args]
    else:
        command = [*server_command(port, run_log=runs_name), *streamlit_args]
    ctx = mp.get_context("spawn")
    workers: list[mp.Process] = []
    server: subprocess.Popen | None = None
    report: dict = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "command": " ".join(["python", "tools/loadtest.py", *sys.argv[1:]]),
        "server_command": " ".join(["python", *command[1:]]),
        "sessions": args.sessions, "seconds": args.seconds, "once": args.once,
        "replicas": args.replicas or 1, "balancer": bool(args.replicas),
        "session_ttl_s": args.session_ttl, "settle_s": args.settle,
        "browser_nice": args.nice,
        "errors": [], "server_log": log_name, "server_run_log": runs_name,
    }
    sampler: Sampler | None = None
    got: list[dict] = []

    try:
        server = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        while not healthy(base):
            if server.poll() is not None:
                raise SystemExit(f"the server exited with code {server.returncode}; log: "
                                 f"{log_name}")
            if time.time() > min(deadline, started_at + args.server_start):
                raise SystemExit(f"the server was not healthy after {args.server_start} s")
            time.sleep(0.25)
        report["server_start_s"] = round(time.time() - started_at, 1)
        report["load_average_at_start"] = os.getloadavg()[0]
        time.sleep(1)
        sampler = Sampler(server.pid, workers, started_at)
        report["rss_before_mb"] = sampler.snap()["server_mb"]
        sampler.phase = "warmup"
        sampler.start()

        cfg = {"chromium": chromium, "seconds": args.seconds, "once": args.once,
               "moves": args.moves, "rerun_timeout": args.rerun_timeout,
               "page_timeout": args.page_timeout, "hard_deadline": deadline - 30,
               "nice": args.nice, "server_pid": server.pid}
        if args.warmup:
            report["rss_warm_mb"] = _warm_up(args, ctx, base, cfg, workers, sampler, report)
            sampler.phase = "warm"
        ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        for i in range(args.sessions):
            w = ctx.Process(target=_session, args=(i, base, cfg, ready, go, results),
                            name=f"loadtest-session-{i}", daemon=True)
            w.start()
            workers.append(w)
            time.sleep(args.stagger)

        def collect() -> None:
            while True:
                try:
                    got.append(results.get_nowait())
                except queue.Empty:
                    return

        # wait until every session has opened the home page (or died, or ran out of time)
        n_ready = 0
        ready_end = min(deadline - 60, time.time() + args.ready_timeout)
        while n_ready < args.sessions and time.time() < ready_end:
            with contextlib.suppress(queue.Empty):
                ready.get(timeout=1)
                n_ready += 1
            collect()  # a session that failed early reports at once
            if len(got) + n_ready >= args.sessions:
                break
        report["sessions_ready"] = n_ready
        sampler.phase = "load"
        at_go = sampler.snap()
        report["rss_ready_mb"] = at_go["server_mb"]
        go.set()
        walk_start = time.time()

        while len(got) < args.sessions and time.time() < deadline - 25:
            time.sleep(0.5)
            collect()
        at_end = sampler.snap()
        sampler.phase = "closing"
        report["walk_s"] = round(time.time() - walk_start, 1)
        report["walk_window"] = (walk_start, time.time())
        busy = max(1e-9, time.time() - walk_start)
        report["server_cores_busy"] = round(
            (at_end["server_cpu_s"] - at_go["server_cpu_s"]) / busy, 2)
        report["browsers_cores_busy"] = round(
            (at_end["browsers_cpu_s"] - at_go["browsers_cpu_s"]) / busy, 2)
        report["machine_cores_busy"] = round(
            (at_end["machine_cpu_s"] - at_go["machine_cpu_s"]) / busy, 2)
        # what else ran meanwhile (this script itself, and anything else on the machine)
        report["other_cores_busy"] = round(report["machine_cores_busy"]
                                           - report["server_cores_busy"]
                                           - report["browsers_cores_busy"], 2)
        report["load_average_at_end"] = os.getloadavg()[0]
        missing = args.sessions - len(got)
        if missing:
            report["errors"].append(f"{missing} session(s) did not report before the deadline")
        for w in workers:
            stop_tree(w, grace=10)
        samples = sampler.samples
        # the walk's peak; the warm-up (every page once, per replica) has its own
        report["rss_peak_mb"] = max(s["server_mb"] for s in samples
                                    if s["phase"] in ("load", "closing"))
        report["rss_warmup_peak_mb"] = max((s["server_mb"] for s in samples
                                            if s["phase"].startswith("warm")), default=None)
        report["sessions_pss_peak_mb"] = max(s.get("sessions_mb", 0) for s in samples)

        sampler.phase = "settle"
        time.sleep(max(0.0, min(deadline - 2, time.time() + args.settle) - time.time()))
        report["rss_after_mb"] = sampler.snap()["server_mb"]
    finally:
        if sampler is not None and sampler.is_alive():
            sampler.halt()
        for w in workers:
            stop_tree(w, grace=5)
        if server is not None:
            stop_tree(server, grace=15)
        log.close()

    report.update(_server_runs(Path(runs_name), report.get("walk_window")))
    got.sort(key=lambda o: o["session"])
    reruns = [r for o in got for r in o["reruns"]]
    opens = [r for o in got for r in o["opens"]]
    report["errors"] += [e for o in got for e in o["errors"]]
    report["errors"] += [f"session {o['session']}: never started walking" for o in got
                         if not o["started"] and not o["errors"]]
    ms = [r["ms"] for r in reruns]
    open_ms = [r["ms"] for r in opens]
    by_open: dict[str, list[float]] = {}
    for r in opens:
        by_open.setdefault(r["page"], []).append(r["ms"])
    by_page: dict[str, list[float]] = {}
    by_page_slider: dict[str, list[float]] = {}
    for r in reruns:
        by_page.setdefault(r["page"], []).append(r["ms"])
        if r["control"].startswith("slider"):
            by_page_slider.setdefault(r["page"], []).append(r["ms"])
    slider_ms = [v for values in by_page_slider.values() for v in values]
    report.update({
        "sessions_reported": len(got),
        "pages": got[0].get("pages") if got else None,
        "page_opens": len(opens),
        "page_open_p50_ms": percentile(open_ms, 50), "page_open_p95_ms": percentile(open_ms, 95),
        "reruns": len(reruns), "noop_moves": sum(o["noops"] for o in got),
        "rerun_p50_ms": percentile(ms, 50), "rerun_p95_ms": percentile(ms, 95),
        "rerun_max_ms": max(ms) if ms else None,
        "rerun_start_p50_ms": percentile([r["start_ms"] for r in reruns], 50),
        "rerun_server_p50_ms": percentile([r["server_ms"] for r in reruns], 50),
        "rerun_server_p95_ms": percentile([r["server_ms"] for r in reruns], 95),
        "reruns_status_widget_seen": sum(r["status_seen"] for r in reruns),
        "by_page": {p: {"reruns": len(v), "p50_ms": percentile(v, 50),
                        "p95_ms": percentile(v, 95)} for p, v in sorted(by_page.items())},
        "slider_reruns": len(slider_ms),
        "slider_p50_ms": percentile(slider_ms, 50), "slider_p95_ms": percentile(slider_ms, 95),
        "slider_by_page": {p: {"reruns": len(v), "p50_ms": percentile(v, 50),
                               "p95_ms": percentile(v, 95)}
                           for p, v in sorted(by_page_slider.items())},
        "server_cpu_by_page": _cpu_by_page(reruns, opens),
        "opens_by_page": {p: {"opens": len(v), "p50_ms": percentile(v, 50),
                              "p95_ms": percentile(v, 95)} for p, v in sorted(by_open.items())},
        "js_errors": sum(o["js_errors"] for o in got),
        "error_count": 0,
        "rerun_records": reruns,
        "samples": sampler.samples if sampler else [],
    })
    report["error_count"] = len(report["errors"])
    if report.get("rss_warm_mb") and report.get("rss_after_mb"):
        report["rss_after_over_warm"] = round(report["rss_after_mb"] / report["rss_warm_mb"], 3)
    return report


def _cpu_by_page(reruns: list[dict], opens: list[dict]) -> dict:
    """Per page: the server's CPU seconds for a rerun and for a page open (medians), and the
    reruns one core sustains at that cost. Exact with ``--sessions 1``."""
    out: dict = {}
    for kind, records in (("rerun", reruns), ("open", opens)):
        by_page: dict[str, list[float]] = {}
        for r in records:
            if "server_cpu_s" in r:
                by_page.setdefault(r["page"], []).append(r["server_cpu_s"])
        for page, values in by_page.items():
            out.setdefault(page, {})[f"{kind}_cpu_s"] = percentile(values, 50)
            out[page][f"{kind}s"] = len(values)
    for values in out.values():
        cpu = values.get("rerun_cpu_s")
        values["reruns_per_core_s"] = round(1 / cpu, 1) if cpu else None
    return dict(sorted(out.items()))


def _warm_up(args: argparse.Namespace, ctx, base: str, cfg: dict, workers: list,
             sampler: Sampler, report: dict) -> float:
    """One session per replica opens every page once and closes; after ``--settle`` s (past
    the server's grace period for closed sessions) the server's RSS is the warmed baseline:
    everything imported and every page's module-level state built, no session held."""
    wcfg = {**cfg, "once": True, "moves": 0}
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    go.set()
    warm = []
    for i in range(args.replicas or 1):  # round robin deals them out over the replicas
        w = ctx.Process(target=_session, args=(i, base, wcfg, ready, go, results),
                        name=f"loadtest-warmup-{i}", daemon=True)
        w.start()
        workers.append(w)
        warm.append(w)
        time.sleep(args.stagger)
    for _ in warm:
        try:
            out = results.get(timeout=args.page_timeout * 3)
        except queue.Empty:
            report["errors"].append("warm-up: a session did not report in time")
            break
        report["errors"] += [f"warm-up: {e}" for e in out["errors"]]
    for w in warm:
        stop_tree(w, grace=10)
    sampler.phase = "warm-settle"
    time.sleep(args.settle)
    return sampler.snap()["server_mb"]


def _server_runs(path: Path, window: tuple[float, float] | None) -> dict:
    """The server's own script-run times (tools/timedserver.py) while the sessions walked."""
    runs: list[tuple[float, str]] = []
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8").splitlines():
            stamp, ms, page = line.split(" ", 2)
            if window is None or window[0] <= float(stamp) <= window[1] + 1:
                runs.append((float(ms), page))
    by_page: dict[str, list[float]] = {}
    for ms, page in runs:
        by_page.setdefault(page, []).append(ms)
    times = [ms for ms, _ in runs]
    return {"server_runs": len(times), "server_script_p50_ms": percentile(times, 50),
            "server_script_p95_ms": percentile(times, 95),
            "server_script_by_page": {p: {"runs": len(v), "p50_ms": percentile(v, 50),
                                          "p95_ms": percentile(v, 95)}
                                      for p, v in sorted(by_page.items())}}


def _fmt(v: float | None, digits: int = 0) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def summary(r: dict) -> str:
    rows = [
        ("sessions (ready / reported)", f"{r['sessions']} ({r.get('sessions_ready', 0)} / "
                                        f"{r.get('sessions_reported', 0)})"),
        ("duration per session", "every page once" if r["once"] else f"{r['seconds']} s"),
        ("page opens (p50 / p95 ms)", f"{r.get('page_opens', 0)} ({_fmt(r.get('page_open_p50_ms'))}"
                                      f" / {_fmt(r.get('page_open_p95_ms'))})"),
        ("reruns measured", str(r.get("reruns", 0))),
        ("rerun p50 / p95 / max (ms)", f"{_fmt(r.get('rerun_p50_ms'))} / "
                                       f"{_fmt(r.get('rerun_p95_ms'))} / "
                                       f"{_fmt(r.get('rerun_max_ms'))}"),
        ("  slider moves: count, p50 / p95 (ms)", f"{r.get('slider_reruns', 0)}, "
                                                 f"{_fmt(r.get('slider_p50_ms'))} / "
                                                 f"{_fmt(r.get('slider_p95_ms'))}"),
        ("  of which: to run start p50 (ms)", _fmt(r.get("rerun_start_p50_ms"))),
        ("  of which: server run p50 / p95 (ms)", f"{_fmt(r.get('rerun_server_p50_ms'))} / "
                                                 f"{_fmt(r.get('rerun_server_p95_ms'))}"),
        ("server's own script runs: count, p50 / p95 (ms)",
         f"{r.get('server_runs', 0)}, {_fmt(r.get('server_script_p50_ms'))} / "
         f"{_fmt(r.get('server_script_p95_ms'))}"),
        ("moves with no rerun", str(r.get("noop_moves", 0))),
        ("errors", str(r.get("error_count", 0))),
        ("server RSS before (MB)", _fmt(r.get("rss_before_mb"), 1)),
        ("server RSS sessions ready (MB)", _fmt(r.get("rss_ready_mb"), 1)),
        ("server RSS peak (MB): the walk, the warm-up", f"{_fmt(r.get('rss_peak_mb'), 1)}, "
                                                        f"{_fmt(r.get('rss_warmup_peak_mb'), 1)}"),
        ("server RSS after (MB)", _fmt(r.get("rss_after_mb"), 1)),
        ("server RSS warmed baseline (MB), after / warmed",
         f"{_fmt(r.get('rss_warm_mb'), 1)}, {_fmt(r.get('rss_after_over_warm'), 2)}"),
        ("browsers' PSS peak, all (MB)", _fmt(r.get("sessions_pss_peak_mb"), 1)),
        ("CPU cores busy: server / browsers / other",
         f"{_fmt(r.get('server_cores_busy'), 2)} / {_fmt(r.get('browsers_cores_busy'), 2)} / "
         f"{_fmt(r.get('other_cores_busy'), 2)} (of {r['machine']['cpus']})"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    if r.get("by_page"):
        lines += ["", "reruns by page: count, p50 / p95 ms"]
        lines += [f"  {p:<36} {v['reruns']:>4}  {_fmt(v['p50_ms'])} / {_fmt(v['p95_ms'])}"
                  for p, v in r["by_page"].items()]
    if r.get("server_script_by_page"):
        lines += ["", "server's own script runs by page: count, p50 / p95 ms"]
        lines += [f"  {p:<36} {v['runs']:>4}  {_fmt(v['p50_ms'])} / {_fmt(v['p95_ms'])}"
                  for p, v in r["server_script_by_page"].items()]
    if r.get("server_cpu_by_page"):
        lines += ["", "server CPU by page (medians; exact with --sessions 1): rerun s, "
                      "reruns/s per core, page open s"]
        lines += [f"  {p:<36} {_fmt(v.get('rerun_cpu_s'), 3):>7} "
                  f"{_fmt(v.get('reruns_per_core_s'), 1):>6} {_fmt(v.get('open_cpu_s'), 3):>7}"
                  for p, v in r["server_cpu_by_page"].items()]
    if r.get("slider_by_page"):
        lines += ["", "slider moves by page: count, p50 / p95 ms"]
        lines += [f"  {p:<36} {v['reruns']:>4}  {_fmt(v['p50_ms'])} / {_fmt(v['p95_ms'])}"
                  for p, v in r["slider_by_page"].items()]
    if r.get("errors"):
        lines += ["", "errors:"] + [f"  {e}" for e in r["errors"][:30]]
        if len(r["errors"]) > 30:
            lines.append(f"  … and {len(r['errors']) - 30} more")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10,
                        help="concurrent browser sessions (default 10)")
    parser.add_argument("--seconds", type=float, default=60,
                        help="how long each session walks the pages (default 60)")
    parser.add_argument("--once", action="store_true",
                        help="open every page once per session instead of walking for --seconds")
    parser.add_argument("--moves", type=int, default=2,
                        help="controls moved on each page visit (default 2; 0: only open pages)")
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument("--port", type=int, help="server port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--settle", type=float,
                        help="seconds to wait after the sessions close before the last RSS "
                             "(default 20, or --session-ttl + 15: past the grace period)")
    parser.add_argument("--session-ttl", type=int,
                        help="the server's grace period for a closed tab's session, s "
                             "(server.disconnectedSessionTTL; Streamlit's default is 120)")
    parser.add_argument("--warmup", action="store_true",
                        help="first one session per replica opens every page once and closes; "
                             "the RSS --settle s later is the warmed baseline that the RSS "
                             "after the run is compared with")
    parser.add_argument("--replicas", type=int, default=0,
                        help="serve through HAProxy in front of this many replicas "
                             "(tools/balancer.py; default 0: one server, no balancer)")
    parser.add_argument("--stagger", type=float, default=1.0,
                        help="seconds between starting two browsers")
    parser.add_argument("--nice", type=int, default=0,
                        help="run the browsers at this niceness (e.g. 10): a lower CPU priority "
                             "than the server's, for a machine that hosts both")
    parser.add_argument("--rerun-timeout", type=float, default=150,
                        help="longest wait for one rerun, s")
    parser.add_argument("--page-timeout", type=float, default=180,
                        help="longest wait for one page to open, s")
    parser.add_argument("--ready-timeout", type=float, default=240,
                        help="longest wait for every session to open the home page, s")
    parser.add_argument("--server-start", type=float, default=90,
                        help="longest wait for the server's health check, s")
    parser.add_argument("--timeout", type=float,
                        help="global limit for the whole run, s (default: seconds + the "
                             "ready and page timeouts + 10 per session + settle + 60)")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 50:
        parser.error("--sessions must be between 1 and 50")
    if not 0 < args.seconds <= 3600:
        parser.error("--seconds must be in (0, 3600]")
    if args.settle is None:
        args.settle = 20 if args.session_ttl is None else args.session_ttl + 15
    if args.timeout is None:
        args.timeout = (args.seconds + args.ready_timeout + args.page_timeout
                        + 10 * args.sessions + args.settle + 60)
        if args.warmup:
            args.timeout += 3 * args.page_timeout + args.settle
    if args.once:
        args.timeout += 180

    # SIGTERM unwinds like Ctrl-C, so that ``finally`` stops the server and the browsers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    report = run(args)
    print(summary(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        print(f"\nwritten: {args.json}")
    ok = report["error_count"] == 0 and report.get("sessions_reported") == args.sessions
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
