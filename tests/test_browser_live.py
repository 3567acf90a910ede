"""The Explorer's live ε, γ and β in a real browser: the page's figures follow them at every
step of a drag, the numbers the browser computes equal lnviz's (and are the ones the figures
draw), and on release the page settles on lnviz's numbers and the URL follows (also when the
server corrects the value). The Explorer's journey with the keyboard, from the navigation on,
shares its page load with the panel's keyboard checks.

The panel on the running app: its numbers against lnviz's, its controls, the value protocol and
the keyboard; so too the ε page's sweep, Scale and shift's histogram and BatchNorm vs
LayerNorm's batch panel. The arithmetic alone (norms.js, and batches.js's re-drawn batches) is
tested with Node (tests/js/, tests/test_live.py).
Uses the fixtures of tests/conftest.py (one server for the whole run).
"""

from __future__ import annotations

import base64
import itertools
import math
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from browserutil import (
    ALERT,
    BN_VS_LN,
    CHARTS,
    CHECK_BADGE,
    FOCUSED,
    SCALE_SHIFT,
    TIMEOUT_MS,
    TITLE,
    WATCH_RUNS,
    assert_no_exception,
    chart_title,
    norm_option,
    open_explorer,
    question,
    shot,
    tab_to,
    type_first_gamma,
    wait_idle,
)
from fragmentutil import (
    SCALE_SHIFT_ANSWER,
    check_fragment_controls,
    code_follows_both_fragments,
    sidebar_reruns_the_whole_page,
)

from lnviz.batch import Batch, NormSpec
from lnviz.ui.params import EPSILONS
from tools.live_fixtures import expected

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None

pytestmark = pytest.mark.browser

PANEL = ".lv-root"


def _close(ours: np.ndarray, theirs: np.ndarray, atol: float | np.ndarray, what: str) -> None:
    """Equal where both are finite (within ``atol``), and NaN or ±inf at the same places."""
    ours, theirs = np.asarray(ours, np.float64).ravel(), np.asarray(theirs, np.float64).ravel()
    assert ours.shape == theirs.shape, what
    same = (np.isnan(ours) & np.isnan(theirs)) | (ours == theirs)
    with np.errstate(invalid="ignore"):  # inf − inf where both are infinite
        gap = np.where(same, 0.0, np.abs(ours - theirs))
    bad = np.flatnonzero(~(gap <= atol))
    assert bad.size == 0, (f"{what}: {bad.size} of {ours.size} differ, first at {bad[0]}: "
                           f"browser {ours[bad[0]]!r}, lnviz {theirs[bad[0]]!r}")


def _compare(js: dict, batch: Batch, spec: NormSpec) -> None:
    """The panel's numbers against lnviz's, in float64 (to rounding) and in float32 (to the
    tolerance lnviz's check allows a correct float32 implementation): the tolerances of the
    Node tests of norms.js (tools/live_fixtures.py)."""
    want = expected(batch, spec)
    assert js["group"] == want["group"]
    for dtype in ("float64", "float32"):
        e, where = want[dtype], f"{spec} in {dtype}"
        atol = e["atol"]
        _close(js["y"], e["y"], atol, f"y, {where}")
        _close(js["xHat"], e["xHat"], atol, f"x̂, {where}")
        if e["mean"] is not None:
            _close(js["mean"], e["mean"], atol * 10, f"μ, {where}")
        _close(js["var"], e["var"], atol * np.maximum(1.0, np.abs(e["var"])) * 10,
               f"σ², {where}")
        _close(js["rstd"], e["rstd"], atol * np.maximum(1.0, np.abs(e["rstd"])),
               f"rstd, {where}")
        _close(js["meanOut"], e["meanOut"], atol, f"μ after, {where}")
        _close(js["spreadOut"], e["spreadOut"], atol, f"σ after, {where}")


# --- The panel on the running app -----------------------------------------------------------------

#: The panel's data and the numbers the browser computed last (NaN and ±inf survive the trip).
_PANEL_STATE = """(root) => {
  const s = root.__lv, last = s.last;
  return {data: s.data, shown: root.dataset.shown, frame: Number(root.dataset.frame),
          js: {eps: last.eps, gamma: last.gamma, beta: last.beta, y: Array.from(last.y),
               xHat: Array.from(last.xHat), group: Array.from(last.group),
               mean: last.mean && Array.from(last.mean), var: Array.from(last.var),
               rstd: Array.from(last.rstd), meanOut: Array.from(last.meanOut),
               spreadOut: Array.from(last.spreadOut)}};
}"""

#: Move one of the panel's range inputs to a value as a drag does (an input event, no change),
#: and after the next animation frame return what the page's first figure then draws: its
#: frame count and its output heatmap (lnviz/ui/live/figure.js redraws in that frame).
_DRAG_TO = """async (root, [name, value]) => {
  const input = root.querySelector(`input[data-control=${name}]`);
  input.value = String(value);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  for (let k = 0; k < 3; k++) await new Promise((resolve) => requestAnimationFrame(resolve));
  const figure = document.querySelector('.lv-figure');
  const z = figure.querySelector('.lv-plot').data[1].z;
  return {frame: figure.dataset.frame, shown: figure.dataset.shown,
          z: Array.from(z, (row) => Array.from(row, (v) => v ?? NaN)).flat(),
          y: Array.from(root.__lv.last.y)};
}"""

#: The step-by-step table as drawn (lnviz/ui/live/table.js): whose numbers, its frame count,
#: each row's element and the cells' text.
_STEPS = """(steps) => {
  const table = steps.querySelector('table');
  return {frame: steps.dataset.frame, shown: steps.dataset.shown,
          elements: steps.__lvt.data.elements,
          columns: Array.from(table.tHead.rows[0].cells, (c) => c.textContent),
          rows: Array.from(table.tBodies[0].rows,
                           (r) => Array.from(r.cells, (c) => c.textContent))};
}"""

#: The page's first figure (the heatmaps) as drawn now: whose numbers, and its output heatmap.
_FIGURE = """() => {
  const figure = document.querySelector('.lv-figure');
  const z = figure.querySelector('.lv-plot').data[1].z;
  const flat = z.bdata ? null : Array.from(z, (row) => Array.from(row, (v) => v ?? NaN)).flat();
  return {shown: figure.dataset.shown, z: flat};
}"""

_RELEASE = """(root, name) => root.querySelector(`input[data-control=${name}]`)
  .dispatchEvent(new Event('change', {bubbles: true}))"""

#: A tampered control (or a stale page): widen the range input ``name``, move it to ``value``
#: and let go, so that the browser reports a value the server must correct.
_TAMPER = """(root, [name, value]) => {
  const input = root.querySelector(`input[data-control=${name}]`);
  input.max = String(value + 8); input.value = String(value);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  input.dispatchEvent(new Event('change', {bubbles: true}));
}"""


#: Let go of the panel's control at ``a``, then at ``b`` a moment later (before the server has
#: answered ``a``), then watch the control for 3 s: the values it showed.
_TWO_RELEASES = """async (root, [name, a, b]) => {
  const input = root.querySelector(`input[data-control=${name}]`);
  const release = (v) => {
    input.value = String(v);
    input.dispatchEvent(new Event('input', {bubbles: true}));
    input.dispatchEvent(new Event('change', {bubbles: true}));
  };
  release(a);
  await new Promise((r) => setTimeout(r, 30));
  release(b);
  const seen = new Set();
  const t0 = performance.now();
  while (performance.now() - t0 < 3000) {
    seen.add(input.value);
    await new Promise((r) => setTimeout(r, 5));
  }
  return [...seen];
}"""


def _tampered(page: Page, panel, name: str, value: float, written: str, settled: str) -> None:
    """Report ``value``, outside the range of the panel's control ``name`` (a tampered page, a
    stale control): the server moves it into the range, the URL carries ``written`` (a regex)
    and the control follows the server (``settled``), not the browser."""
    panel.evaluate(_TAMPER, [name, value])
    expect(page).to_have_url(re.compile(rf"[?&]{written}(&|$)"), timeout=TIMEOUT_MS)
    expect(panel).to_have_attribute("data-shown", "server")
    wait_idle(page)
    assert panel.evaluate(f"(root) => root.querySelector('input[data-control={name}]').value"
                          ) == settled
    assert_no_exception(page)


def _decode(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f8")


def _from_panel(data: dict, js: dict) -> tuple[Batch, NormSpec]:
    """The batch the panel was sent, and the settings the browser computed with."""
    shape = tuple(data["shape"])
    x = _decode(data["x"]).astype(np.float32).reshape(shape)
    mask = None
    if data["mask"] is not None:
        c = len(shape) - 1 if data["layout"] == "NLC" else 1
        mask = np.asarray(data["mask"], dtype=bool).reshape(
            tuple(s for d, s in enumerate(shape) if d != c))

    def param(v: float | list[float]) -> float | tuple[float, ...]:
        return tuple(v) if isinstance(v, list) else float(v)

    spec = NormSpec(norm=data["norm"], dims=data["dims"], training=data["training"],
                    warmup_steps=data["warmup"], momentum=data["momentum"],
                    use_mask=data["useMask"], groups=data["groups"], eps=js["eps"],
                    gamma=param(js["gamma"]), beta=param(js["beta"]))
    return Batch(x, data["layout"], mask), spec


def _panel(page: Page):
    panel = page.locator(PANEL)
    expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
    # the figures follow a drag while on screen: the heatmaps in view
    page.locator(".lv-figure").first.evaluate("e => e.scrollIntoView({block: 'center'})")
    expect(page.locator(".lv-figure").first).to_have_attribute("data-ready", "1")
    return panel


def _table_column(table: dict, name: str) -> np.ndarray:
    """A column of the step-by-step table as drawn (Python's .6g text, a real minus sign)."""
    k = table["columns"].index(name)
    return np.array([float(row[k].replace("−", "-")) for row in table["rows"]])


def _drag(panel, name: str, values: list[float]) -> int:
    """Drag ``name`` through ``values``; at how many steps the page's heatmaps and its
    step-by-step table were both redrawn with the browser's numbers (the y the panel computed:
    the heatmap's exactly, the table's to the 6 digits it shows)."""
    steps = panel.page.locator(".lv-steps")
    before = panel.evaluate(_DRAG_TO, [name, values[0]]), steps.evaluate(_STEPS)
    changed = 0
    for value in values[1:]:
        now, table = panel.evaluate(_DRAG_TO, [name, value]), steps.evaluate(_STEPS)
        changed += (now["frame"] != before[0]["frame"] and now["shown"] == "browser"
                    and table["frame"] != before[1]["frame"] and table["shown"] == "browser")
        y = np.asarray(now["y"], np.float64)
        _close(np.asarray(now["z"], np.float64), y, 0.0, "the heatmap drawn against the panel's y")
        want = y[table["elements"]]
        scale = np.maximum(1.0, np.abs(np.nan_to_num(want, nan=0.0, posinf=0.0, neginf=0.0)))
        _close(_table_column(table, "y"), want, 5e-6 * scale,
               "the step-by-step table's y against the panel's")
        before = now, table
    return changed


def _drags_follow_lnviz(page: Page, panel) -> None:
    """Every step of a γ, β and ε drag of the Explorer's panel (a LayerNorm's) redraws the page's
    figures and its step-by-step table, in the browser alone (no script run), and at each
    setting the browser's numbers equal lnviz's: ε down to 0, γ negative. Every norm and
    layout, constant rows and ε = 0 included, is checked without a browser, by Node on lnviz's
    numbers (tests/js/norms.test.mjs, tools/live_fixtures.py); per-feature γ and β have a test
    of their own (test_per_feature_gamma_and_beta_come_from_the_table)."""
    state = panel.evaluate(_PANEL_STATE)
    data = state["data"]
    _compare(state["js"], *_from_panel(data, state["js"]))  # before the drags

    gammas = [round(1.0 - 0.4 * k, 1) for k in range(7)]  # 1.0 down to −1.4
    changed = _drag(panel, "gamma", gammas)
    assert changed >= 0.8 * (len(gammas) - 1), f"γ drag changed the picture {changed} times"
    expect(page.locator(".lv-figure").first).to_have_attribute("data-shown", "browser")
    state = panel.evaluate(_PANEL_STATE)
    assert state["js"]["gamma"] == -1.4
    _compare(state["js"], *_from_panel(data, state["js"]))

    betas = [round(-0.35 * k, 2) for k in range(5)]  # 0 down to −1.4
    changed = _drag(panel, "beta", betas)
    assert changed >= 0.8 * (len(betas) - 1), f"β drag changed the picture {changed} times"

    # ε from 1 down to 0: each of the large ones (they change the picture), then a few small
    last = len(EPSILONS) - 1
    indices = [last, last - 1, last - 2, last - 3, last - 5, last - 8, 2, 0]
    changed = _drag(panel, "eps", indices)
    # ε below the groups' σ² changes nothing to four digits: at least the large ε must show
    assert changed >= 3, f"ε drag changed the picture {changed} times"
    state = panel.evaluate(_PANEL_STATE)
    assert state["js"]["eps"] == 0.0
    _compare(state["js"], *_from_panel(data, state["js"]))
    assert_no_exception(page)


def test_release_settles_on_lnviz_and_moves_the_page(page: Page, server: str) -> None:
    """One page load, BatchNorm in eval mode from a hand-edited link:

    - the panel's numbers with the running statistics are lnviz's as the page opens, and at
      ε = 0 (μ, σ², 1/σ, x̂ and y, in float64 and float32);
    - the link puts γ between the slider's steps (0.15 on steps of 0.1): the page takes it as it
      is, and so does the panel (its range input would snap it to 0.2);
    - let go at γ = −1.5: the server takes it, the URL follows, and the figures show lnviz's
      numbers, which equal what the browser had drawn while the control was held; ε let go at
      0 settles too;
    - two releases, the second before the server has answered the first: the first run's reply
      must not put the control back to ``a``, and the page, the URL and the panel end on ``b``;
      twice over, down and up (not back to the value before: Streamlit can then leave ``a`` in
      the URL after the run the second release interrupted, a Streamlit behaviour left alone);
    - BatchNorm in eval mode and LayerNorm have as many step-table columns, named differently
      ("running μ" against "μ"): switching redraws the names, not only the numbers."""
    open_explorer(page, server, "?norm=BatchNorm&mode=eval&warmup=10&gamma=0.15")
    panel = _panel(page)
    state = panel.evaluate(_PANEL_STATE)
    assert state["data"]["server"]["gamma"] == 0.15 and state["js"]["gamma"] == 0.15
    assert state["data"]["training"] is False and state["data"]["warmup"] == 10
    _compare(state["js"], *_from_panel(state["data"], state["js"]))  # running statistics
    expect(panel.locator("[data-show=gamma]")).to_have_text("0.15")
    figure = next(f for f in page.evaluate(_FIGURES) if f["kind"] == "heatmaps")
    shown = _decode_figure_array(figure["figure"]["data"][1]["z"])
    _close(state["js"]["y"], shown, 1e-5 * max(1.0, float(np.nanmax(np.abs(shown)))),
           "the browser's y at γ = 0.15 against lnviz's")
    header = page.locator(".lv-steps thead th")
    expect(header.nth(2)).to_have_text("running μ")
    columns = header.count()

    steps = page.locator(".lv-steps")
    before = steps.evaluate("(e) => e.querySelector('tbody').textContent")
    _drag(panel, "gamma", [1.0, 0.0, -1.0, -1.5])
    dragged = page.evaluate(_FIGURE)
    assert dragged["shown"] == "browser"
    # every text the step table shows from the release on (the run's panel arrives before the
    # table: the table must not show the last run's numbers in between)
    steps.evaluate("""(e) => { e.__seen = [];
      new MutationObserver(() => e.__seen.push(e.querySelector('tbody').textContent))
        .observe(e, {childList: true, subtree: true, characterData: true}); }""")
    panel.evaluate(_RELEASE, "gamma")
    expect(page).to_have_url(re.compile(r"[?&]gamma=-1\.5(&|$)"), timeout=TIMEOUT_MS)
    expect(panel).to_have_attribute("data-shown", "server")
    expect(page.locator(".lv-figure").first).to_have_attribute("data-shown", "server")
    wait_idle(page)
    settled = panel.evaluate(_PANEL_STATE)
    assert settled["data"]["server"]["gamma"] == -1.5
    figure = next(f for f in page.evaluate(_FIGURES) if f["kind"] == "heatmaps")
    z = _decode_figure_array(figure["figure"]["data"][1]["z"])
    _close(dragged["z"], z, 1e-5 * max(1.0, float(np.nanmax(np.abs(z)))),
           "the browser's heatmap against lnviz's after release")

    # the step-by-step table settles on lnviz's numbers too, which are the ones it showed
    expect(steps).to_have_attribute("data-shown", "server")
    assert before not in steps.evaluate("(e) => e.__seen"), "the table showed γ = 0.15 again"
    table = steps.evaluate(_STEPS)
    assert {row[table["columns"].index("γ")] for row in table["rows"]} == {"−1.5"}
    y = _table_column(table, "y")
    _close(y, np.asarray(dragged["z"], np.float64)[table["elements"]],
           1e-5 * max(1.0, float(np.nanmax(np.abs(y)))),
           "lnviz's step-by-step y after release against the browser's during the drag")

    panel.evaluate(_DRAG_TO, ["eps", 0])
    state = panel.evaluate(_PANEL_STATE)
    _compare(state["js"], *_from_panel(state["data"], state["js"]))  # ε = 0, γ = −1.5
    panel.evaluate(_RELEASE, "eps")
    expect(page).to_have_url(re.compile(r"[?&]eps=0(&|$)"), timeout=TIMEOUT_MS)
    expect(panel).to_have_attribute("data-shown", "server")
    wait_idle(page)
    assert_no_exception(page)
    shot(page, "live-settled")

    for a, b in [(1.5, 0.5), (-2.0, 2.5)]:
        seen = panel.evaluate(_TWO_RELEASES, ["gamma", a, b])
        assert seen == [f"{b:g}"], f"the control showed {seen} after the release at {b}"
        expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
        wait_idle(page)
        assert panel.evaluate("(root) => root.__lv.data.server.gamma") == b
        expect(page).to_have_url(re.compile(rf"[?&]gamma={b:g}(&|$)"))
        assert_no_exception(page)

    norm_option(page, "LayerNorm").click()
    expect(header.nth(2)).to_have_text("μ", timeout=TIMEOUT_MS)
    assert header.count() == columns
    wait_idle(page)
    assert_no_exception(page)


#: The data every live figure was last sent by the server (its figure, kind and panel).
_FIGURES = """() => Array.from(document.querySelectorAll('.lv-figure'), (e) => e.__lvf.data)"""


def _decode_figure_array(value: dict | list) -> np.ndarray:
    """A plotly array as the server sent it (base64 typed array, or a plain list)."""
    if isinstance(value, dict):
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        return flat.astype(np.float64)
    return np.asarray(value, np.float64).ravel()


def test_the_explorer_works_with_the_keyboard_and_the_server_corrects_what_its_panel_reports(
        page: Page, server: str) -> None:
    """One page load for the Explorer's journey, with the keyboard:

    - from the navigation, a choice (BatchNorm: its figures, captions, URL and check), the γ
      slider one step right (announced, the URL follows, the panel settles on the server's
      numbers) and a figure's data table, without touching the mouse; then back to LayerNorm
      with the mouse;
    - one step of γ and one back sends nothing (``_there_and_back``);
    - a value outside the control's range (a tampered page, a stale control) is moved into it
      by the server, and the control follows the server, not the browser;
    - a burst of ArrowLeft presses settles once, where the keys stopped (``_burst``);
    - the Group control, inside the panel's fragment, writes the URL, and the step-by-step
      table (drawn in the browser, lnviz/ui/live/table.js) shows that group;
    - then γ, β and ε dragged, the browser's numbers lnviz's at every step
      (``_drags_follow_lnviz``)."""
    page.goto(server)
    expect(page.locator(TITLE)).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)

    tab_to(page, lambda f: f["testid"] == "stSidebarNavLink" and f["text"].endswith("Explorer"),
            "the Explorer's navigation link")
    page.evaluate(WATCH_RUNS)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/explorer/?(\?.*)?$"))
    expect(page.locator(CHARTS).nth(2)).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    expect(norm_option(page, "LayerNorm")).to_be_checked()  # the default

    # the Normalization choice is one tab stop; arrow keys move within it, Space picks
    focused = tab_to(page, lambda f: f["role"] == "radio" and f["group"] == "Normalization",
                      "the Normalization choice")
    for _ in range(6):
        if focused["text"] == "BatchNorm":
            break
        page.keyboard.press("ArrowRight")
        focused = page.evaluate(FOCUSED)
    assert focused["text"] == "BatchNorm", focused
    page.keyboard.press("Space")
    captions = page.locator('[data-testid="stCaptionContainer"]')
    expect(chart_title(page, "output y (BatchNorm)")).to_be_visible()
    expect(page).to_have_url(re.compile(r"[?&]norm=BatchNorm(&|$)"))
    expect(norm_option(page, "BatchNorm")).to_be_checked()
    expect(captions.filter(has_text="BatchNorm: one μ, σ per feature")).to_be_visible()
    expect(chart_title(page, "output y (LayerNorm)")).to_have_count(0)
    wait_idle(page)
    assert_no_exception(page)
    expect(page.get_by_text(CHECK_BADGE)).to_be_visible()
    shot(page, "explorer-batchnorm")

    tab_to(page, lambda f: f["label"] == "γ (scale)", "the γ slider")
    page.keyboard.press("ArrowRight")
    gamma = page.get_by_role("slider", name="γ (scale)")
    expect(gamma).to_have_attribute("aria-valuetext", "γ = 1.1")
    expect(page).to_have_url(re.compile(r"[?&]gamma=1\.1(&|$)"), timeout=TIMEOUT_MS)
    expect(page.locator(".lv-root [data-show=gamma]")).to_have_text("1.1")
    panel = _panel(page)
    expect(panel).to_have_attribute("data-shown", "server")
    wait_idle(page)
    assert math.isclose(float(panel.evaluate(_PANEL_STATE)["js"]["gamma"]), 1.1)
    eps = page.get_by_role("slider", name="ε (epsilon)")
    expect(eps).to_have_attribute("aria-valuetext", "ε = 1e-5")

    tab_to(page, lambda f: f["tag"] == "SUMMARY" and "Data behind this figure" in f["text"],
            "a figure's data expander")
    page.keyboard.press("Enter")
    table = page.locator('[data-testid="stExpander"] [data-testid="stDataFrame"]').first
    expect(table).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    shot(page, "explorer-keyboard")

    # and back to LayerNorm with the mouse: the figures, captions and check follow
    norm_option(page, "LayerNorm").click()
    expect(chart_title(page, "output y (LayerNorm)")).to_be_visible()
    expect(norm_option(page, "LayerNorm")).to_be_checked()
    expect(captions.filter(has_text="LayerNorm: one μ, σ per position")).to_be_visible()
    expect(captions.filter(has_text="BatchNorm: one μ, σ per feature")).to_have_count(0)
    expect(chart_title(page, "output y (BatchNorm)")).to_have_count(0)
    wait_idle(page)
    assert_no_exception(page)
    expect(page.get_by_text(CHECK_BADGE)).to_be_visible()
    shot(page, "explorer-layernorm")

    # the panel, with the keyboard, on the same page load (γ at 1.1 with LayerNorm)
    _there_and_back(page, panel, KEY_CASES["explorer-gamma"])
    _tampered(page, panel, "beta", 42, r"beta=3(\.0)?", "3")

    _burst(page, panel, KEY_CASES["explorer-gamma"])

    group = page.get_by_label("Group", exact=True)
    group.fill("2")
    group.press("Enter")
    expect(page).to_have_url(re.compile(r"[?&]group=2(&|$)"), timeout=TIMEOUT_MS)
    wait_idle(page)
    # the first sentence's third token
    expect(page.locator(".lv-steps tbody tr").first.locator("td").first).to_have_text(
        "(0, 2, 0)")
    assert_no_exception(page)

    # last, on the same page load: LayerNorm's γ, β and ε dragged (the heatmaps back in view)
    _drags_follow_lnviz(page, _panel(page))
    shot(page, "live-layernorm")


# --- Scale and shift: the γ, β histogram ----------------------------------------------------------

#: Move Scale and shift's γ or β as a drag does and, after the next animation frames, return what
#: its page figure (the free histogram, a live figure) then draws, and the browser's numbers.
_AFFINE_DRAG = """async (root, [name, value]) => {
  const input = root.querySelector(`input[data-control=${name}]`);
  input.value = String(value);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  for (let k = 0; k < 3; k++) await new Promise((resolve) => requestAnimationFrame(resolve));
  const figure = [...document.querySelectorAll('.lv-figure')]
    .find((f) => f.__lvf && f.__lvf.data.kind === 'affine');
  const plot = figure.querySelector('.lv-plot');
  const last = root.__lv.last;
  return {frame: figure.dataset.frame, shown: figure.dataset.shown,
          bars: Array.from(plot.data[0].y), mean: Array.from(plot.data[1].x),
          title: plot.layout.title.text, counts: last.counts, jsMean: last.mean, std: last.std,
          gamma: last.gamma, beta: last.beta};
}"""


def test_the_scale_and_shift_histogram_follows_a_drag(page: Page, server: str) -> None:
    """A hand-edited link puts γ and β between the sliders' steps (0.15 and −0.05): the page
    and the panel take them as they are, and the first key step moves from the slider's grid
    (with the page's other fragment controls: ``check_fragment_controls``). Then γ from 1.5
    down to −1.5 and β from 0.5 to −3: the page's own histogram (no second one) is redrawn at
    every step from the browser's numbers, which are lnviz's; let go, and the URL and the
    figure settle on lnviz's."""
    from lnviz.lessons.scale_shift import scale_shift_grid

    page.goto(f"{server}{SCALE_SHIFT}&ss_gamma=0.15&ss_beta=-0.05")
    # part 2 waits for part 1's question (the replies: tests/layoututil.py's GUESSED)
    question(page).get_by_text(SCALE_SHIFT_ANSWER, exact=True).click(timeout=TIMEOUT_MS)
    panel = page.locator(".lv-affine")
    expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
    wait_idle(page)
    expect(panel.locator("[data-show=gamma]")).to_have_text("0.15")
    expect(panel.locator("[data-show=beta]")).to_have_text("−0.05")
    expect(page.locator(".lv-figure text", has_text="γ = 0.15, β = -0.05 → mean -0.050, "
                        "std 0.150")).to_have_count(1)
    assert panel.evaluate("(root) => [root.__lv.last.gamma, root.__lv.last.beta]") == [0.15, -0.05]
    # the page's fragment controls, γ's one step right among them: from 0.15 to 0.3, written
    # into the URL by a run of its fragment alone (fragmentutil's "scale-shift-gamma")
    check_fragment_controls(page, "/scale_shift")
    expect(panel.locator("[data-show=gamma]")).to_have_text("0.3")
    expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
    assert page.locator(".lv-affine svg").count() == 0  # the controls only: one histogram
    expect(page.locator(".lv-figure[data-ready='1']")).to_have_count(1, timeout=TIMEOUT_MS)
    page.locator(".lv-figure").scroll_into_view_if_needed()  # off screen, it waits to redraw
    # a few steps show that each redraws (Node checks the arithmetic at other settings:
    # tools/live_fixtures.py's affine cases)
    drags = {"gamma": [1.5, 1.2, 0.7, 0.3, 0.0, -0.4, -0.9, -1.5],  # 1.5 down to −1.5
             "beta": [0.5, 0.0, -0.6, -1.3, -2.1, -3.0]}  # 0.5 down to −3
    for name, values in drags.items():
        before, moved = None, 0
        for value in values:
            now = panel.evaluate(_AFFINE_DRAG, [name, value])
            assert now["shown"] == "browser" and now["bars"] == now["counts"]
            assert now["mean"] == [now["jsMean"]] * 2
            moved += before is not None and now["frame"] != before
            before = now["frame"]
            if value in (-1.5, 0.0, -3.0, 1.2):
                grid = scale_shift_grid((now["gamma"],), (now["beta"],), n=1000, seed=0,
                                        bins=78, span=(-13.0, 13.0))
                # a value on a bin's edge may fall either side in float32 and float64
                assert np.abs(np.subtract(now["counts"], grid.counts[0, 0])).sum() <= 2, value
                assert now["jsMean"] == pytest.approx(grid.mean[0, 0], abs=1e-6)
                assert now["std"] == pytest.approx(grid.std[0, 0], rel=1e-5, abs=1e-6)
                assert now["title"].startswith(f"γ = {now['gamma']:g}, β = {now['beta']:g} → ")
        assert moved >= 0.8 * (len(values) - 1), f"{name}: the figure moved {moved} times"
        panel.evaluate(_RELEASE, name)
        key = {"gamma": "ss_gamma", "beta": "ss_beta"}[name]
        written = re.escape(f"{values[-1]:g}")
        expect(page).to_have_url(re.compile(rf"[?&]{key}={written}(\.0)?(&|$)"),
                                 timeout=TIMEOUT_MS)
        expect(panel).to_have_attribute("data-shown", "server")
        wait_idle(page)
    expect(page.locator(".lv-figure[data-shown='server'] text",
                        has_text=re.compile(r"γ = −?-?1\.5, β = −?-?3"))).to_have_count(1)
    assert_no_exception(page)
    shot(page, "live-scale-shift")


# --- The ε page: the sweep's marker -------------------------------------------------------------

#: Move the ε page's ε as a drag does and, after the next animation frames, return what its
#: sweep figure (a live figure) then draws as its chosen-ε lines, and the browser's numbers.
_SWEEP_DRAG = """async (root, index) => {
  const input = root.querySelector('input[data-control=eps]');
  input.value = String(index);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  for (let k = 0; k < 3; k++) await new Promise((resolve) => requestAnimationFrame(resolve));
  const figure = [...document.querySelectorAll('.lv-figure')]
    .find((f) => f.__lvf && f.__lvf.data.kind === 'sweep');
  const lines = figure.querySelector('.lv-plot').data
    .filter((t) => String(t.name).startsWith('chosen ε'));
  const last = root.__lv.last;
  return {frame: figure.dataset.frame, shown: figure.dataset.shown,
          lines: lines.map((t) => ({x: Array.from(t.x), visible: t.visible, name: t.name})),
          eps: last.eps, output: last.output, grad: last.grad};
}"""


def test_the_epsilon_sweeps_marker_follows_a_drag(page: Page, server: str) -> None:
    """ε from 1 down to 0 on the constant vector: the page's sweep figure moves its chosen-ε
    lines at every step (hidden at ε = 0), and the max |y| and ‖∂L/∂x‖ shown under the control
    are lnviz's (float32, as the page computes by default): finite while ε > 0, without a
    value at ε = 0 (σ² = 0 too); let go and the page's ε follows. The other vectors' numbers
    are Node's to check (tools/live_fixtures.py's sweep cases). First, on the same page load:
    its fragment controls (tests/fragmentutil.py) and its arrow keys: one step there and back
    sends nothing, and a burst that runs into the end of the range settles once
    (``_there_and_back``, ``_burst``); last, a sidebar control that reruns the whole page."""
    from lnviz.lessons.epsilon import epsilon_sweep, stability_vector

    vector = "constant"
    page.goto(f"{server}/epsilon?ep_vec={vector}")
    panel = page.locator(".lv-sweep")
    expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
    wait_idle(page)
    check_fragment_controls(page, "/epsilon")  # ε is 1e-4 after them
    _there_and_back(page, panel, KEY_CASES["epsilon-eps"])
    _burst(page, panel, KEY_CASES["epsilon-eps"])
    assert page.locator(".lv-sweep svg").count() == 0  # the control only: one sweep figure
    expect(page.locator(".lv-figure[data-ready='1']")).to_have_count(1, timeout=TIMEOUT_MS)
    page.locator(".lv-figure").scroll_into_view_if_needed()  # off screen, it waits to redraw
    x = stability_vector(vector)
    before, changed = None, 0
    for index in range(len(EPSILONS) - 1, -1, -1):
        now = panel.evaluate(_SWEEP_DRAG, index)
        eps = EPSILONS[index]
        assert now["shown"] == "browser" and now["eps"] == eps
        assert len(now["lines"]) == 2 and all(line["visible"] == (eps > 0)
                                              for line in now["lines"])
        if eps > 0:
            assert all(line["x"] == [eps, eps] and line["name"] == f"chosen ε = {eps:.0e}"
                       for line in now["lines"])
        changed += before is not None and now["frame"] != before
        before = now["frame"]
        ours = np.array([now["output"], now["grad"]], dtype=np.float64)
        for dtype in ("float64", "float32"):
            sweep = epsilon_sweep(x, (EPSILONS[index],), dtype=dtype)
            theirs = np.array([sweep.max_output[0], sweep.grad_norm[0]])
            finite = np.isfinite(theirs) & np.isfinite(ours)
            # where ε = 0 meets σ² = 0 the formula has no value: both are NaN or ±inf
            assert (np.isfinite(ours) == np.isfinite(theirs)).all(), (index, ours, theirs)
            rel = 1e-9 if dtype == "float64" else 1e-4
            np.testing.assert_allclose(ours[finite], theirs[finite], rtol=rel, atol=rel,
                                       err_msg=f"ε = {EPSILONS[index]}, {dtype}")
    assert changed >= len(EPSILONS) - 2, f"the figure moved {changed} times"
    # let go at 1e-3 (the keys above left the page at 0)
    panel.evaluate(_SWEEP_DRAG, EPSILONS.index(1e-3))
    panel.evaluate(_RELEASE, "eps")
    expect(page).to_have_url(re.compile(r"[?&]ep_eps=1e-3(&|$)"), timeout=TIMEOUT_MS)
    expect(panel).to_have_attribute("data-shown", "server")
    wait_idle(page)
    assert_no_exception(page)
    # last: the seed draws the sweep's upstream gradient, which the numbers above are lnviz's for
    sidebar_reruns_the_whole_page(page)
    shot(page, f"live-epsilon-{vector}")


def test_per_feature_gamma_and_beta_come_from_the_table(page: Page, server: str) -> None:
    """Per-feature γ and β (BatchNorm): the panel's numbers are lnviz's as the page opens, and
    it offers no γ or β of its own (the page's table holds them). Then γ of feature 0 typed as
    −2e0 in that table: the panel computes with −2 (the grid's number cell once dropped the "e"
    and stored −20; the cell is read as text now), and its numbers equal lnviz's as ε is
    dragged down to 0. (BatchNorm's running statistics reach the panel in
    test_release_settles_on_lnviz_and_moves_the_page.)"""
    open_explorer(page, server, "?affine=per+feature&norm=BatchNorm")
    # not scrolled to the figures first (_panel): type_first_gamma then missed the cell
    panel = page.locator(PANEL)
    expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
    state = panel.evaluate(_PANEL_STATE)
    assert state["data"]["perFeature"]
    _compare(state["js"], *_from_panel(state["data"], state["js"]))  # as the page opened
    expect(panel.locator("[data-control-box=gamma]")).to_be_hidden()
    expect(panel.locator("[data-control-box=beta]")).to_be_hidden()

    type_first_gamma(page, "-2e0")
    panel = _panel(page)
    state = panel.evaluate(_PANEL_STATE)
    assert state["data"]["perFeature"] and state["data"]["gamma"][0] == -2.0
    assert state["js"]["gamma"][0] == -2.0
    _compare(state["js"], *_from_panel(state["data"], state["js"]))
    assert _drag(panel, "eps", list(range(len(EPSILONS) - 1, -1, -1))) >= 3
    state = panel.evaluate(_PANEL_STATE)
    assert state["js"]["eps"] == 0.0
    _compare(state["js"], *_from_panel(state["data"], state["js"]))
    assert_no_exception(page)


# --- BatchNorm vs LayerNorm: the batch-size panel ------------------------------------------------

#: Move the batch size as a drag does and, after the next animation frames, return the
#: browser's numbers, what the control shows under it, and what the page's re-draws figure (a
#: live figure) then draws: each line's y, which lines are shown, and whether the refusal is.
_BATCH_DRAG = """async (root, size) => {
  const input = root.querySelector('input[data-control=batch]');
  input.value = String(size);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  for (let k = 0; k < 3; k++) await new Promise((resolve) => requestAnimationFrame(resolve));
  const figure = [...document.querySelectorAll('.lv-figure')]
    .find((f) => f.__lvf && f.__lvf.data.kind === 'redraws');
  const plot = figure.querySelector('.lv-plot');
  const last = root.__lv.last, notice = root.querySelector('.lv-refusal');
  return {frame: figure.dataset.frame, figureShown: figure.dataset.shown,
          lines: plot.data.map((t) => ({group: t.legendgroup, visible: t.visible,
                                        y: Array.from(t.y, (v) => v ?? NaN)})),
          refusalShown: plot.layout.annotations.find((a) => a.name === 'refusal').visible,
          batch: last.batch, batchNorm: last.batchNorm && Array.from(last.batchNorm),
          layerNorm: Array.from(last.layerNorm), bnSpread: last.bnSpread,
          lnSpread: last.lnSpread, shown: root.dataset.shown,
          refusal: notice.hidden ? null : notice.textContent,
          table: root.querySelector('tbody').textContent};
}"""
#: float32 precision: lnviz computes in float32 (the sidebar's default), the browser in float64.
F32_ATOL = 2e-5


def _open_batches(page: Page, server: str, query: str):
    """BatchNorm vs LayerNorm with part 2 open, its question answered (the batch size's views
    wait for it: tests/layoututil.py's GUESSED checks the replies), and its batch panel."""
    case = KEY_CASES["bn-vs-ln-batch"]
    joined = query.replace("?", "&", 1) if "?" in case.path else query
    page.goto(f"{server}{case.path}{joined}")
    question(page).get_by_text("BatchNorm's only", exact=True).click(timeout=TIMEOUT_MS)
    panel = page.locator(case.panel)
    expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
    wait_idle(page)
    return panel


def _check_batch(now: dict, size: int, redraws: int, features: int, seed: int) -> None:
    """The browser's numbers at batch size ``size`` against lnviz's batch_dependence."""
    from lnviz.lessons.bn_vs_ln import batch_dependence, fixed_sample

    dep = batch_dependence(fixed_sample(features, seed), size, redraws, seed)
    assert now["batch"] == size and now["shown"] == "browser"
    np.testing.assert_allclose(now["layerNorm"], dep.layer_norm.ravel(), atol=F32_ATOL)
    assert now["lnSpread"] == 0.0
    # the page's figure draws the browser's numbers: BatchNorm's lines, then LayerNorm's
    assert now["figureShown"] == "browser"
    bn = [line for line in now["lines"] if line["group"] == "BatchNorm"]
    ln = [line for line in now["lines"] if line["group"] == "LayerNorm"]
    assert len(bn) == len(ln) == redraws and all(line["visible"] for line in ln)
    np.testing.assert_allclose(np.ravel([line["y"] for line in ln]), now["layerNorm"])
    assert now["refusalShown"] == (size == 1)
    assert all(line["visible"] == (size > 1) for line in bn)
    if size > 1:
        np.testing.assert_allclose(np.ravel([line["y"] for line in bn]), now["batchNorm"])
    if size == 1:
        assert now["batchNorm"] is None and math.isnan(now["bnSpread"])
        assert f"lnviz: {dep.refusal}." in now["refusal"]
        assert f"torch.nn.functional.batch_norm: {dep.torch_refusal}." in now["refusal"]
        assert "refused" in now["table"]
    else:
        np.testing.assert_allclose(now["batchNorm"], dep.batch_norm.ravel(), atol=F32_ATOL,
                                   err_msg=f"batch size {size}")
        assert now["bnSpread"] == pytest.approx(dep.batch_norm_spread, abs=2 * F32_ATOL)
        assert now["refusal"] is None


#: The batch test's page: its link's query (bl_layout=NC: as its first fragment control's link
#: opens it), then the batch size, re-draws, features and seed it shows. BatchNorm vs LayerNorm
#: at its default sizes, 8 re-drawn batches of 6 features, and seed 7, not the default 0, so
#: that the batch-mates the panel is sent are seen to follow the seed. The panel's arithmetic
#: at every size this test's drags pass is Node's to check on lnviz's numbers too, for two
#: features (LayerNorm answers ±1), these six and the largest batch, 40,960 values at 64
#: (tools/live_fixtures.py's batch cases, tests/js/norms.test.mjs); tools/livebench.py times a
#: drag at the largest.
BATCH_PAGE = ("?bl_layout=NC&seed=7", 8, 8, 6, 7)
#: The batch test's drag, from the largest size the server settled on: down through either side
#: of 32 and 16 to the refusal at 1, then up to 5, where it is let go.
DRAGGED = [33, 32, 17, 16, 9, 8, 4, 3, 2, 1, 2, 6, 5]


def test_the_batch_panel_works_with_the_keyboard_and_the_server_corrects_what_it_reports(
        page: Page, server: str) -> None:
    """One page load for BatchNorm vs LayerNorm's fragments and the batch size's control
    (:data:`BATCH_PAGE`):

    - the page's fragment controls (tests/fragmentutil.py: the batch size among them, one step
      right with the keyboard) and the code two of those fragments draw;
    - the batch size, moved to 10 with the keyboard, is announced "batch size = 10" and settles;
    - 150 reported by a tampered control: the server settles on 64, and so does the panel;
    - dragged from 64 down to 1 and up to 5 (:data:`DRAGGED`): every step redraws the page's
      re-draws figure in the browser, and the fixed sample's BatchNorm and LayerNorm outputs in
      every re-drawn batch equal lnviz's (float32); at 1 the figure and the control say lnviz's
      and torch's refusal;
    - let go at 5: the URL follows, the page's metric shows lnviz's number, and the control and
      the figure show lnviz's numbers, equal to what the browser had;
    - dragged to 64, the largest, the browser's numbers are lnviz's there too; let go at 1: the
      page's alert says the refusal, once."""
    from lnviz.lessons.bn_vs_ln import batch_dependence, fixed_sample

    query, batch, redraws, features, seed = BATCH_PAGE
    panel = _open_batches(page, server, query)
    assert page.locator(".lv-batches svg").count() == 0  # the control only: one figure
    # each figure's own fold, by its label (a folded part of the page holds some of them)
    tables = page.locator('[data-testid="stExpander"] summary', has_text="Data behind this figure")
    expect(tables).to_have_count(4)  # the figures of sections 2 and 3 (the cubes have none)
    control = page.get_by_role("slider", name="Batch size", exact=True)
    expect(control).to_have_attribute("aria-valuetext", f"batch size = {batch}")
    check_fragment_controls(page, "/bn_vs_ln")
    code_follows_both_fragments(page)  # the batch size is 10 after it
    expect(control).to_have_attribute("aria-valuetext", "batch size = 10")
    expect(page).to_have_url(re.compile(r"[?&]bl_b=10(&|$)"), timeout=TIMEOUT_MS)
    expect(panel).to_have_attribute("data-shown", "server")
    wait_idle(page)
    assert panel.evaluate("(root) => root.__lv.data.server.batch") == 10
    # the numbers stay readable as tables: the panel's, and every figure's data table (the
    # fragments' reruns redrew their own and left the other sections' in place)
    expect(panel.locator("table.lv-stats tbody tr")).to_have_count(1)
    expect(panel.locator("tbody td").first).to_have_text("10")
    expect(tables).to_have_count(4)
    assert_no_exception(page)

    _tampered(page, panel, "batch", 150, r"bl_b=64", "64")
    expect(page.locator('input[type=range][aria-label="Batch size"]')).to_have_value("64")

    figure = page.locator(".lv-figure")
    expect(figure).to_have_attribute("data-ready", "1")
    figure.scroll_into_view_if_needed()  # off screen, it waits to redraw
    before, changed = figure.get_attribute("data-frame"), 0
    for size in DRAGGED:
        dragged = panel.evaluate(_BATCH_DRAG, size)
        changed += dragged["frame"] != before
        before = dragged["frame"]
        _check_batch(dragged, size, redraws, features, seed)
    assert changed >= 0.9 * len(DRAGGED), f"the figure moved {changed} times"
    assert_no_exception(page)
    panel.evaluate(_RELEASE, "batch")
    expect(page).to_have_url(re.compile(r"[?&]bl_b=5(&|$)"), timeout=TIMEOUT_MS)
    expect(panel).to_have_attribute("data-shown", "server")
    expect(page.locator(".lv-figure")).to_have_attribute("data-shown", "server")
    wait_idle(page)
    # one Batch size control on the page: the live one
    expect(page.get_by_role("slider", name="Batch size", exact=True)).to_have_count(1)
    data = panel.evaluate("(root) => root.__lv.data")
    assert data["server"]["batch"] == 5
    np.testing.assert_allclose(dragged["batchNorm"], _decode(data["server"]["batchNorm"]),
                               atol=F32_ATOL)
    spread = batch_dependence(fixed_sample(features, seed), 5, redraws, seed).batch_norm_spread
    metric = page.locator('[data-testid="stMetric"]', has_text="BatchNorm: largest change")
    expect(metric).to_contain_text(f"{spread:.3g}")
    # the panel's table prints it as the page does
    assert panel.locator("tbody td").nth(1).text_content() == f"{spread:.3g}"
    code = page.locator('[data-testid="stCode"]').last.text_content()
    assert f"features = {features}\n" in code and "batch_size = 5\n" in code

    # the largest batch, worked out in the browser (the server has 5)
    figure.scroll_into_view_if_needed()
    _check_batch(panel.evaluate(_BATCH_DRAG, 64), 64, redraws, features, seed)
    panel.evaluate(_BATCH_DRAG, 1)
    panel.evaluate(_RELEASE, "batch")
    expect(page).to_have_url(re.compile(r"[?&]bl_b=1(&|$)"), timeout=TIMEOUT_MS)
    expect(panel).to_have_attribute("data-shown", "server")
    wait_idle(page)
    expect(page.locator(ALERT, has_text="Expected more than 1 value per channel")
           ).to_have_count(1)
    expect(panel.locator(".lv-refusal")).to_be_hidden()  # the page's alert says it, once
    assert_no_exception(page)
    shot(page, "live-bn-vs-ln-1")


# --- The keyboard on every live panel ----------------------------------------------------------

class KeyCase(NamedTuple):
    """A live panel's control driven by the keyboard: its page, panel and accessible name, the
    key pressed and how often, and then the URL it writes and the server's value for it."""

    path: str
    panel: str
    name: str
    key: str
    presses: int
    written: str
    server: str
    value: float


KEY_CASES = {
    # 26 presses from γ = 1.1, where the Explorer's keyboard journey (the same test) put it
    "explorer-gamma": KeyCase("/explorer", ".lv-root", "γ (scale)", "ArrowLeft", 26,
                              r"gamma=-1\.5", "gamma", -1.5),
    # 14 presses from ε = 1e-4 (the 10th of EPSILONS, where the page's fragment controls leave
    # it): the last 5 meet the end of the range
    "epsilon-eps": KeyCase("/epsilon", ".lv-sweep", "ε (epsilon)", "ArrowLeft", 14,
                           r"ep_eps=0(\.0)?", "eps", 0),
    "bn-vs-ln-batch": KeyCase(BN_VS_LN, ".lv-batches", "Batch size", "ArrowRight", 12,
                              r"bl_b=20", "batch", 20),
}
# The keys are handled by the code every panel shares (lnviz/ui/live/common.js): two panels'
# arrow keys are pressed (``_there_and_back``, ``_burst``), the Explorer's and the ε page's,
# whose presses run into the end of the range; "bn-vs-ln-batch" gives the batch test its page.


def _open_panel(page: Page, server: str, case: KeyCase, query: str = ""):
    joined = query.replace("?", "&", 1) if "?" in case.path else query
    page.goto(f"{server}{case.path}{joined}")
    panel = page.locator(case.panel)
    expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
    wait_idle(page)
    return panel


_RUNS_SINCE = """() => window.__ltws.filter(e => e.kind === 'run' && e.t >= window.__keysT0)
  .length"""
#: Start counting: the runs from now on (``_RUNS_SINCE``), and when each key goes down.
_KEYS_FROM_NOW = """() => {
  window.__keysT0 = performance.now();
  window.__keyTimes = [];
  if (!window.__keyWatch) {
    window.__keyWatch = true;
    document.addEventListener('keydown', () => window.__keyTimes.push(performance.now()), true);
  }
}"""
#: How many values the panel has sent to the server (lnviz/ui/live/common.js's ``seq``).
_SENT = "(root) => root.__lv.seq"
#: How long the keys rest before a control sends their value, read from where it is set.
KEY_SETTLE_MS = int(re.search(r"const KEY_SETTLE_MS = (\d+);", (
    Path(__file__).parents[1] / "lnviz" / "ui" / "live" / "common.js").read_text()).group(1))


def _rests(page: Page) -> int:
    """How often the keys pressed since ``_KEYS_FROM_NOW`` rested long enough between two
    presses for a control to send a value: on a busy machine a press can come late, and each
    such rest may start a run of its own."""
    times = page.evaluate("() => window.__keyTimes")
    return sum(1 for a, b in itertools.pairwise(times) if b - a > KEY_SETTLE_MS)


def _there_and_back(page: Page, panel, key: KeyCase) -> None:
    """One step and one step back on the panel's control ``key``: the value is lnviz's again,
    so nothing is sent, nothing reruns, the URL keeps the page's value and the panel says it
    shows lnviz's numbers."""
    url = page.url
    control = page.get_by_role("slider", name=key.name, exact=True)
    control.focus()
    page.evaluate(_KEYS_FROM_NOW)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowLeft")
    expect(panel.locator(".lv-status")).to_have_text(re.compile("^Showing lnviz's numbers"),
                                                     timeout=TIMEOUT_MS)
    expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
    page.wait_for_timeout(1_000)
    if _rests(page) == 0:  # the two presses came together, as on any machine not overloaded
        assert page.evaluate(_RUNS_SINCE) == 0
        assert page.url == url
    # and it still says so: no value was sent that would have it wait for lnviz
    expect(panel.locator(".lv-status")).to_have_text(re.compile("^Showing lnviz's numbers"))
    assert_no_exception(page)


def _burst(page: Page, panel, key: KeyCase) -> None:
    """``key``'s arrow key pressed as fast as the browser takes it: every press counts, the
    panel sends the value once the keys rest (a press each would start a rerun each, and a
    reply to an earlier one would put the control back), and the page, its URL and the panel
    end on the value the keys reached."""
    control = page.get_by_role("slider", name=key.name, exact=True)
    control.focus()
    page.evaluate(_KEYS_FROM_NOW)
    sent = panel.evaluate(_SENT)
    for _ in range(key.presses):
        page.keyboard.press(key.key)
    expect(page).to_have_url(re.compile(rf"[?&]{key.written}(&|$)"), timeout=TIMEOUT_MS)
    expect(panel).to_have_attribute("data-shown", "server", timeout=TIMEOUT_MS)
    wait_idle(page)
    page.wait_for_timeout(600)  # a late reply would move the control back now
    server_value = panel.evaluate(f"(root) => root.__lv.data.server.{key.server}")
    assert server_value == (EPSILONS.index(key.value) if key.server == "eps" else key.value)
    assert float(control.input_value()) == server_value
    expect(panel).to_have_attribute("data-shown", "server")
    expect(panel.locator(".lv-status")).to_have_text(re.compile("^Showing lnviz's numbers"))
    # one value sent when the keys rested at the end, and one more for each rest on the way
    # (the values the panel sent, not the runs: Streamlit folds the requests that come during
    # a run into one, so a value sent per press started as few as three runs, within a bound
    # on runs)
    sent = panel.evaluate(_SENT) - sent
    assert 1 <= sent <= 1 + _rests(page), f"the burst sent {sent} values for {key.presses} presses"
    expect(page.get_by_text("Connection error")).to_have_count(0)
    assert_no_exception(page)
