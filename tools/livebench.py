"""Live controls measured in a browser (issue 17): how a page answers a drag, and how long it
takes to settle after a control is let go, next to a trivial one-chart page in the same browser.

A script, not a test::

    python tools/livebench.py                 # about 5 minutes on 2 cores (6.5 with --before)
    python tools/livebench.py --json /tmp/live.json --presses 12
    git archive <commit> | tar -x -C /tmp/before        # an earlier version, to compare:
    python tools/livebench.py --before /tmp/before      # its pages timed in turn with these
    python tools/livebench.py --only Padding --only ε   # just these rows (and the trivial page)

It starts ``streamlit run app.py`` and ``streamlit run tools/trivial_app.py`` on free ports of
127.0.0.1 and one headless Debian Chromium (nothing else is contacted), then measures:

1. **During a drag.** Each live panel (Explorer, Scale and shift, ε page, BatchNorm vs
   LayerNorm): its control is moved step by step (an ``input`` event per step, as a drag sends
   them, about 30 a second); per step, the time from the event to the next frame
   (``requestAnimationFrame``: the updated picture is painted with it), and whether the
   picture (canvases, SVGs, tables, and the page's figures that follow the Explorer's controls
   while on screen) changed.
   For comparison, the Explorer's own γ slider (``st.slider``) dragged with the mouse in 12
   steps: whether any chart on the page changed before the mouse button is let go.
2. **Release to settled.** A key press on a focused slider (ArrowRight, then ArrowLeft, and so
   on: every press is a new value, like a release), timed until the script run it started has
   finished and the page is idle again, as tools/loadtest.py times a run (the server's messages
   said the run started and finished, the script-run state is "notRunning", nothing stale), for the
   trivial page, for the pages' sliders that rerun the whole page, for those inside an
   ``st.fragment``, and for the live panels' controls (a step and a release, as a pointer
   makes them: their arrow keys wait until they have rested for 250 ms). Beside
   each time, the CPU the browser (Chromium and Playwright's driver) spent on the press, up to
   300 ms after the run's end. And beside it, **drawn**: the time from the press to the last
   change of the page's main area, read once it has been still for 250 ms. Streamlit draws a
   Plotly figure after the run has ended, so this is when the picture is final.
3. **What a figure costs** (``--figures`` instead of 1 and 2): the trivial page's slider with
   the Explorer's figures added one by one (tools/trivial_app.py ``?figures=``), and with
   paragraphs added instead (``?text=``, ``?changing=``): what the number of elements costs.

Prints a Markdown table (docs/benchmarks.md keeps the numbers) and, with ``--json``, every time.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere: lnviz is beside it

from tools.loadtest import (  # noqa: E402  (one way to time a run, one way to read CPU time)
    _DONE,
    _WATCH,
    WS_HOOK,
    _children_map,
    _proc_table,
    descendants,
)
from tools.localserver import CHROMIUM_ARGS, HOST, free_port, healthy  # noqa: E402

TRIVIAL = "trivial"
#: The query strings that open the folded parts holding the timed controls.
SCALE_SHIFT_OPEN = "?ss_part2=true&ss_part3=true"
BN_VS_LN_OPEN = "?bl_part2=true&bl_part3=true&bl_part4=true"
#: (what, page path or TRIVIAL, the slider's accessible name, the query string to open with)
SETTLE_TARGETS = [
    ("trivial one-chart page: its slider", TRIVIAL, "k", ""),
    # the Explorer's γ: its one control (a live control since issue 30; a slider before)
    ("Explorer: γ, released (whole page)", "/explorer", "γ (scale)", ""),
    ("Gradients: Batch size N (whole page)", "/gradients", "Batch size N", ""),
    ("Gradients: Shift (fragment)", "/gradients", "Shift", ""),
    # the folded pages open the parts that hold these controls (lnviz.ui.pages.folded)
    # Scale and shift's γ: its one control (a live control since issue 30; a slider and a
    # live panel's second γ before)
    ("Scale and shift: γ, released (fragment)", "/scale_shift", "γ (scale)", SCALE_SHIFT_OPEN),
    ("Scale and shift: γ_0 (fragment)", "/scale_shift", "γ_0", SCALE_SHIFT_OPEN),
    # the ε page's ε: its one control (a live control since issue 30; a slider and a live
    # panel's second ε before)
    ("ε page: ε, released (fragment)", "/epsilon", "ε (epsilon)", ""),
    ("BatchNorm vs LayerNorm: N (fragment)", "/bn_vs_ln", "N (batch size)", BN_VS_LN_OPEN),
    # the batch size: its one control (a live control since issue 30; a slider and a live
    # panel's second batch size before)
    ("BatchNorm vs LayerNorm: Batch size, released (fragment)", "/bn_vs_ln", "Batch size",
     BN_VS_LN_OPEN),
    ("BatchNorm vs LayerNorm: Training steps k (fragment)", "/bn_vs_ln", "Training steps k",
     BN_VS_LN_OPEN),
    ("Padding: γ (fragment)", "/padding", "γ (scale)", ""),
    ("Bug zoo: Offset from zero (whole page)", "/bug_zoo", "Offset from zero", ""),
    ("Geometry: ε (whole page)", "/geometry", "ε (epsilon)", ""),
    ("Shapes: Init gain (whole page)", "/shapes", "Init gain", "?sh_part3=true"),
    ("Transformer: Attention of layer (fragment)", "/minilm", "Attention of layer", ""),
]
#: ``--figures``: the trivial page with more to redraw after each press (tools/trivial_app.py)
FIGURE_TARGETS = [
    ("the trivial page alone (one 20-point chart)", ""),
    ("+ three more 20-point charts", "lines"),
    ("+ the Explorer's heatmaps (x, groups, y)", "heatmaps"),
    ("+ the Explorer's group statistics", "stats"),
    ("+ the Explorer's distributions", "distributions"),
    ("+ all three Explorer figures", "heatmaps,stats,distributions"),
    ("+ 25 paragraphs that do not change", "&text=25"),
    ("+ 75 paragraphs that do not change (the Explorer draws about 75 elements)", "&text=75"),
    ("+ 25 paragraphs that follow the slider", "&changing=25"),
    ("+ 75 paragraphs that follow the slider", "&changing=75"),
]
#: (what, page and query, the live panel, its control, the values a drag takes it through)
DRAG_TARGETS = [
    ("Explorer defaults (8 × 3 tokens): γ", "/explorer", ".lv-root", "gamma",
     [round(1.0 - 0.1 * k, 1) for k in range(41)]),
    ("Explorer, random batch 32 × 128 (4,096 values, the live limit): γ",
     "/explorer?src=Random+batch&rlayout=NC&rn=32&rc=128", ".lv-root", "gamma",
     [round(1.0 - 0.1 * k, 1) for k in range(41)]),
    ("Scale and shift, 1,000 samples: γ", f"/scale_shift{SCALE_SHIFT_OPEN}", ".lv-affine", "gamma",
     [round(1.5 - 0.1 * k, 1) for k in range(41)]),
    ("Scale and shift, 10,000 samples: γ", f"/scale_shift{SCALE_SHIFT_OPEN}&ss_n=10000",
     ".lv-affine", "gamma",
     [round(1.5 - 0.1 * k, 1) for k in range(41)]),
    ("ε page: ε (1 down to 0, 14 steps)", "/epsilon", ".lv-sweep", "eps",
     list(range(13, -1, -1))),
    ("BatchNorm vs LayerNorm defaults (8 re-draws × 6 features): batch size 1 to 64",
     f"/bn_vs_ln{BN_VS_LN_OPEN}", ".lv-batches", "batch", list(range(1, 65))),
    ("BatchNorm vs LayerNorm, 20 re-draws × 32 features (40,960 values at 64): batch size",
     f"/bn_vs_ln{BN_VS_LN_OPEN}&bl_r=20&bl_c=32", ".lv-batches", "batch", list(range(1, 65))),
]

_IDLE = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-stale="true"]');
}"""
#: Drag the live panel's γ through `values`: per step, ms from the input event to the handler's
#: end and to the next animation frame, and the picture's signature after it.
_LIVE_DRAG = """async (root, [name, values]) => {
  const input = root.querySelector(`input[data-control=${name}]`);
  const steps = [];
  for (const v of values) {
    const t0 = performance.now();
    input.value = String(v);
    input.dispatchEvent(new Event('input', {bubbles: true}));
    const handled = performance.now() - t0;
    // the next frame; and while a figure on screen that follows the panel has not redrawn yet
    // (figure.js redraws in an animation frame), the frames after it
    const figures = [...document.querySelectorAll('.lv-figure')].filter((e) => {
      const box = e.getBoundingClientRect();
      return box.bottom > 0 && box.top < innerHeight;
    });
    const before = figures.map((e) => e.dataset.frame);
    for (let k = 0; k < 10; k++) {
      await new Promise((resolve) => requestAnimationFrame(() => resolve()));
      if (figures.every((e, i) => e.dataset.frame !== before[i])) break;
    }
    const framed = performance.now() - t0;
    // the panel's own views, and the page's figures that follow it (lnviz/ui/live/figure.js:
    // redrawn in the animation frame after the event, before this one's callback)
    const picture = [...root.querySelectorAll('canvas')].map((c) => c.toDataURL()).join()
      + [...root.querySelectorAll('svg, tbody')].map((e) => e.innerHTML).join()
      + [...document.querySelectorAll('.lv-figure')].map((e) => e.dataset.frame).join();
    steps.push({handled, framed, picture});
    await new Promise((resolve) => setTimeout(resolve, 30));  // a drag's pace: ~30 events/s
  }
  return steps;
}"""
#: A live panel's control moved one step and let go, as a pointer does (its arrow keys send the
#: value only once they have rested for 250 ms, lnviz/ui/live/common.js).
_STEP_AND_RELEASE = """(input, up) => {
  if (up) input.stepUp(); else input.stepDown();
  input.dispatchEvent(new Event('input', {bubbles: true}));
  input.dispatchEvent(new Event('change', {bubbles: true}));
}"""
#: Watch the page's main area: the time of its latest change (a node added, removed or
#: changed; a Plotly figure is drawn as SVG nodes), so that "drawn" can be read once the main
#: area has been still for a while.
_WATCH_DRAWING = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  if (window.__drawn && window.__drawn.observer) window.__drawn.observer.disconnect();
  const drawn = {last: null};
  // a dataframe draws on a canvas, and refreshes its hidden cells for screen readers up to
  // 300 ms later: those cells are not the picture
  const seen = (m) => {
    const e = m.target.nodeType === 1 ? m.target : m.target.parentElement;
    return !(e && e.closest('[data-testid^="glide-cell"]'));
  };
  drawn.observer = new MutationObserver((ms) => {
    if (ms.some(seen)) drawn.last = performance.now();
  });
  drawn.observer.observe(main, {childList: true, subtree: true, attributes: true,
                                characterData: true});
  window.__drawn = drawn;
}"""
#: Once the main area has not changed for 250 ms: ms from the press to its last change.
_DRAWN = """() => {
  const last = window.__drawn.last ?? window.__lt.t0;
  return performance.now() - last > 250 ? last - window.__lt.t0 : null;
}"""
#: How many elements the server sent since the press (tools/loadtest.py's WebSocket hook records
#: each delta): what a control's run redraws, the whole page's or its fragment's.
_ELEMENTS_SENT = """() => window.__ltdeltas.filter((e) => e.t >= window.__lt.t0).length"""
_CHARTS = """() => Array.from(
  document.querySelectorAll('[data-testid="stPlotlyChart"], .lv-figure'))
  .map((c) => (c.dataset.frame || '') + ':' + c.innerHTML.length + ':'
       + c.innerHTML.slice(-2000)).join('|')"""


#: The servers this run started: what is not theirs below this process is the browser.
_SERVERS: set[int] = set()


def _browser_cpu_s() -> float:
    """CPU seconds used so far by the browser: every process below this one (Chromium and
    Playwright's driver) except the app servers and theirs."""
    table = _proc_table()
    children = _children_map(table)
    servers = set(_SERVERS).union(*(descendants(pid, children) for pid in _SERVERS))
    ticks = sum(table[pid][1] for pid in descendants(os.getpid(), children)
                if pid not in servers and pid in table)
    return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _serve(script: str, log_dir: Path, root: Path) -> Iterator[str]:
    """``streamlit run script`` from the checkout ``root`` on a free port; its base URL."""
    port = free_port()
    base = f"http://{HOST}:{port}"
    command = [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
               "--server.address", HOST, "--server.headless", "true",
               "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    with open(log_dir / f"{Path(script).stem}-{port}.log", "wb") as log:
        proc = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT)
        _SERVERS.add(proc.pid)
        try:
            deadline = time.monotonic() + 90
            while not healthy(base):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{script}: the server did not start")
                time.sleep(0.25)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # run() says so when it imports playwright
    PlaywrightTimeout = TimeoutError


#: A "Before you look" question (lnviz.ui.state.prediction) not answered yet: the views it
#: holds back (BatchNorm vs LayerNorm's batch panel, Scale and shift's nine panels, ...) appear
#: once it is, whatever the answer.
_UNANSWERED = ('[data-testid="stRadio"]:has-text("Before you look")'
               ':not(:has(input[type=radio]:checked))')


def _open(page, url: str) -> None:
    """Open ``url`` and wait for its run; then answer each of its "Before you look" questions
    with their first option, as a learner would before using what they hold back."""
    page.goto(url)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=120_000)
    page.wait_for_function(_IDLE, polling=50, timeout=120_000)
    page.wait_for_timeout(500)  # the page's title can come before the end of its run
    page.wait_for_function(_IDLE, polling=50, timeout=120_000)
    asked = page.locator(_UNANSWERED)
    for _ in range(asked.count()):
        first = asked.first.locator('[role="radiogroup"] label').first.inner_text().strip()
        asked.first.get_by_text(first, exact=True).click()  # (a click on the label misses)
        page.wait_for_timeout(300)  # the run the answer starts
        page.wait_for_function(_IDLE, polling=50, timeout=120_000)
    page.wait_for_timeout(500)


def _slider(page, url: str, name: str):
    """The slider ``name`` on a freshly opened ``url``, or None where the page has none."""
    _open(page, url)
    slider = page.locator(f'input[type=range][aria-label="{name}"]')
    try:
        slider.wait_for(state="attached", timeout=15_000)
    except PlaywrightTimeout:  # a control this version of the app does not have
        return None
    slider.scroll_into_view_if_needed()
    return slider


def _settle_times(pages: list, urls: list[str], name: str, presses: int) -> list[list[dict]]:
    """Per press of a key on the slider ``name``: seconds until the page has settled ("s") and
    of those, the server's from the run's start to its finish ("server_s"), for each of ``urls``
    (one page each), the presses taking turns so that every version meets the same load; the
    first press of each, which may fill caches, is not counted."""
    sliders = [_slider(page, url, name) for page, url in zip(pages, urls, strict=True)]
    times: list[list[dict]] = [[] for _ in urls]
    for k in range(presses + 1):
        for i, (page, kept) in enumerate(zip(pages, times, strict=True)):
            slider = sliders[i]
            if slider is None:
                continue
            slider.focus()
            page.evaluate(_WATCH)
            page.evaluate(_WATCH_DRAWING)
            cpu = _browser_cpu_s()
            if name.endswith(", live") or slider.evaluate("(e) => !!e.closest('.lv-root')"):
                # a live control: one step, let go as a pointer does
                slider.evaluate(_STEP_AND_RELEASE, k % 2 == 0)
            else:
                page.keyboard.press("ArrowRight" if k % 2 == 0 else "ArrowLeft")
            try:
                done = page.wait_for_function(_DONE, polling=20, timeout=60_000).json_value()
            except PlaywrightTimeout:  # no run, or one that never ended: say so, go on
                print(f"{name}: no finished run within 60 s of press {k}; left out",
                      file=sys.stderr)
                sliders[i] = None
                continue
            page.wait_for_timeout(300)  # and what the browser still draws after the run
            cpu = _browser_cpu_s() - cpu
            drawn = page.wait_for_function(_DRAWN, polling=50, timeout=30_000).json_value()
            # the elements the run sent (Streamlit's deltas: each element it drew anew)
            elements = page.evaluate(_ELEMENTS_SENT)
            if k:
                kept.append({"s": done["ms"] / 1000, "server_s": done["server_ms"] / 1000,
                             "browser_cpu_s": cpu, "drawn_s": drawn / 1000,
                             "elements": elements})
    return times


def _live_drag(page, url: str, selector: str, control: str, values: list[float]) -> dict:
    _open(page, url)
    panel = page.locator(selector)
    try:
        panel.wait_for(timeout=15_000)
    except PlaywrightTimeout:  # this version of the app has no live panel
        return {}
    figures = page.locator(".lv-figure")
    if figures.count():  # the page's figures follow the panel: drag with the first one in view
        figures.first.evaluate("e => e.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(500)
    result = panel.evaluate(_LIVE_DRAG, [control, values])
    changed = sum(a["picture"] != b["picture"] for a, b in itertools.pairwise(result))
    framed = [s["framed"] for s in result[1:]]
    return {"handled_ms": [s["handled"] for s in result[1:]], "framed_ms": framed,
            "changed": changed, "steps": len(result) - 1}


def _slider_drag(page, url: str, steps: int) -> dict:
    """The page's own γ control dragged with the mouse: does any chart change before release?
    With the page's first figure in view (where the page pins its controls while scrolled
    past them, they stay at hand)."""
    _open(page, url)
    figures = page.locator('[data-testid="stPlotlyChart"], .lv-figure')
    figures.first.evaluate("e => e.scrollIntoView({block: 'center'})")
    page.wait_for_timeout(500)
    control = page.locator('input[type=range][aria-label="γ (scale)"]')
    if control.evaluate("(e) => !!e.closest('.lv-root')"):
        thumb = control  # a live control (issue 30): the range input itself, at γ = 1
    else:  # st.slider's thumb: the element that holds its (visually hidden) range input
        thumb = control.locator("xpath=..")
    thumb.scroll_into_view_if_needed()  # a slider that stays where it is (before issue 30)
    box = thumb.bounding_box()
    # from the middle (γ = 0 on a live control), left 6 px a step (about 0.3 of γ at 1400 px)
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    before = page.evaluate(_CHARTS)
    page.mouse.move(x, y)
    page.mouse.down()
    changed = 0
    for k in range(1, steps + 1):
        page.mouse.move(x - 6 * k, y)
        page.wait_for_timeout(50)
        now = page.evaluate(_CHARTS)
        changed += now != before
        before = now
    page.evaluate(_WATCH)
    page.mouse.up()
    page.wait_for_function(_DONE, polling=20, timeout=60_000)
    return {"changed": changed, "steps": steps}


def _ms(values: list[float], scale: float = 1.0) -> dict:
    ordered = sorted(v * scale for v in values)
    return {"p50": statistics.median(ordered),
            "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
            "max": ordered[-1]}


def run(args: argparse.Namespace) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict = {"machine": f"{platform.system()} {platform.machine()}, "
                            f"{platform.processor() or 'cpu'}", "settle": {}, "drag": {},
                 "figures": {}}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack, \
            sync_playwright() as pw:
        apps = [stack.enter_context(_serve("app.py", Path(tmp), REPO))]
        if args.before:
            apps.append(stack.enter_context(_serve("app.py", Path(tmp), args.before)))
        trivial = stack.enter_context(_serve("tools/trivial_app.py", Path(tmp), REPO))
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                     args=CHROMIUM_ARGS)
        pages = []
        for _ in apps:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.add_init_script(WS_HOOK)  # timestamps of the server's run messages
            pages.append(page)
        if args.figures:
            for what, figures in FIGURE_TARGETS:
                out["figures"][what] = _settle_times(
                    pages[:1], [f"{trivial}/?figures={figures}"], "k", args.presses)[0]
            browser.close()
            return out
        for what, path, selector, control, values in DRAG_TARGETS:
            if args.only and not any(o in what for o in args.only):
                continue
            out["drag"][what] = _live_drag(pages[0], f"{apps[0]}{path}", selector, control,
                                           values)
        if not args.only:
            what = "Explorer's γ (the first a learner meets), mouse drag, figures in view"
            out["drag"][what] = _slider_drag(pages[0], f"{apps[0]}/explorer", 12)
        for what, path, name, query in SETTLE_TARGETS:
            if args.only and path != TRIVIAL and not any(o in what for o in args.only):
                continue
            if path == TRIVIAL:
                out["settle"][what] = _settle_times(pages[:1], [trivial], name, args.presses)
            else:
                out["settle"][what] = _settle_times(
                    pages, [f"{app}{path}{query}" for app in apps], name, args.presses)
        browser.close()
    return out


def figures_summary(r: dict) -> str:
    """``--figures``: what each figure adds to the trivial page's settle time and browser CPU."""
    lines = ["| after a press, the page redraws | presses | settled p50 ms | p90 ms | "
             "browser CPU p50 ms | drawn p50 ms |", "|---|---:|---:|---:|---:|---:|"]
    for what, times in r["figures"].items():
        s, cpu = _ms([t["s"] for t in times], 1000), _ms([t["browser_cpu_s"] for t in times], 1000)
        drawn = _ms([t["drawn_s"] for t in times], 1000)
        lines.append(f"| {what} | {len(times)} | {s['p50']:.0f} | {s['p90']:.0f} | "
                     f"{cpu['p50']:.0f} | {drawn['p50']:.0f} |")
    return "\n".join(lines)


def summary(r: dict) -> str:
    lines = ["| during a drag | steps | picture changed | event → frame p50 ms | p90 | max |"
             " handler p50 ms |", "|---|---:|---:|---:|---:|---:|---:|"]
    for what, d in r["drag"].items():
        if not d:
            lines.append(f"| {what} | – | absent | – | – | – | – |")
        elif "framed_ms" in d:
            f, h = _ms(d["framed_ms"]), _ms(d["handled_ms"])
            lines.append(f"| {what} | {d['steps']} | {d['changed']} | {f['p50']:.1f} | "
                         f"{f['p90']:.1f} | {f['max']:.1f} | {h['p50']:.2f} |")
        else:
            lines.append(f"| {what} | {d['steps']} | {d['changed']} | – | – | – | – |")
    first = next(iter(r["settle"].values()))[0]
    trivial = statistics.median(t["s"] for t in first)
    trivial_drawn = statistics.median(t.get("drawn_s", math.nan) for t in first)
    versions = ["this checkout", "before"][:max(len(t) for t in r["settle"].values())]
    lines += ["", "| release to settled | presses | "
              + " | ".join(f"{v}: elements sent | p50 ms | p90 ms | server p50 ms | "
                           "browser CPU p50 ms | p50 / trivial | drawn p50 ms | drawn / trivial"
                           for v in versions)
              + " |", "|---|---:|" + "---:|---:|---:|---:|---:|---:|---:|---:|" * len(versions)]
    for what, runs in r["settle"].items():
        cells = []
        for times in runs:
            if not times:
                cells.append("absent | | | | | | | ")
                continue
            elements = statistics.median(t.get("elements", math.nan) for t in times)
            s = _ms([t["s"] for t in times], 1000)
            server = _ms([t["server_s"] for t in times], 1000)
            cpu = _ms([t.get("browser_cpu_s", math.nan) for t in times], 1000)
            drawn = _ms([t.get("drawn_s", math.nan) for t in times], 1000)
            cells.append(f"{elements:.0f} | {s['p50']:.0f} | {s['p90']:.0f} | "
                         f"{server['p50']:.0f} | {cpu['p50']:.0f} | "
                         f"{s['p50'] / 1000 / trivial:.1f}× | {drawn['p50']:.0f} | "
                         f"{drawn['p50'] / 1000 / trivial_drawn:.1f}×")
        lines.append(f"| {what} | {max(len(t) for t in runs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presses", type=int, default=8, help="timed key presses per slider")
    parser.add_argument("--json", type=Path, help="write every time to this file")
    parser.add_argument("--before", type=Path,
                        help="another checkout of lnviz (e.g. `git archive <commit> | tar -x "
                             "-C DIR`) whose pages are timed in turn with this one's")
    parser.add_argument("--only", action="append", metavar="TEXT",
                        help="time only the targets whose name contains TEXT (repeatable; the "
                             "trivial page is always timed)")
    parser.add_argument("--figures", action="store_true",
                        help="instead: the trivial page with the Explorer's figures added, one "
                             "by one, to time what each costs the browser")
    args = parser.parse_args(argv)
    result = run(args)
    print(figures_summary(result) if args.figures else summary(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
