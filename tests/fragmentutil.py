"""URL-bound controls inside ``st.fragment`` sections, checked in a real browser: each writes its
value into the URL and reruns its own fragment alone (what the server sends after a move says
so), and the link it writes opens the page with those values (AppTest). The controls of every
page (``FRAGMENT_CONTROLS``); tests/test_browser_fragments.py opens most of those pages for
them, and a test that has such a page open already for its own checks runs
:func:`check_fragment_controls` on it (``RIDDEN``)."""

from __future__ import annotations

import re
import urllib.parse
from typing import NamedTuple

import pytest
from browserutil import (
    BN_VS_LN,
    SCALE_SHIFT,
    TIMEOUT_MS,
    assert_no_exception,
    question,
    wait_idle,
)
from pageutil import open_page

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None


# --- Sections in st.fragment keep their links --------------------------------------------------

class FragmentControl(NamedTuple):
    """A URL-bound control inside a fragment: its page, what it is (``slider``: moved one step
    right with the keyboard; ``radio``: a segmented control or radio, ``pick`` clicked;
    ``select``: a selectbox, ``pick`` typed and chosen; ``toggle``: switched on), its label, the
    value it then shows (``pick``), what the URL then carries (``written``, a regex, the URL's
    key before its "=") and the value the page holds when that link is opened (``value``)."""

    path: str
    kind: str
    name: str
    pick: str
    written: str
    #: the value the page holds under the URL's key when the link is opened
    value: object
    #: which of the controls with this label (a page may have two "Row length" sliders)
    nth: int = 0
    #: a button to press first, after every opening, for a section that needs it (a training)
    setup: str | None = None
    #: the answer to click first in the page's "Before you look" question, for a section that
    #: waits for it
    guess: str | None = None


#: Scale and shift's parts 2 and 3 wait for part 1's answer (tests/layoututil.py checks its
#: replies): any answer opens them.
SCALE_SHIFT_ANSWER = "mean β, standard deviation |γ|"

FRAGMENT_CONTROLS = {
    "gradients-shift": FragmentControl("/gradients", "slider", "Shift", "3.50", r"gr_shift=3\.5",
                                       3.5),
    # the parts of a folded page that hold the controls are opened by the address
    "scale-shift-gamma0": FragmentControl(SCALE_SHIFT, "slider", "γ_0", "0.60", r"ss_g0=0\.6",
                                          0.6, guess=SCALE_SHIFT_ANSWER),
    "epsilon-cancellation": FragmentControl("/epsilon", "slider", "Row length", "1024",
                                            r"ep_csize=1024", 1024, nth=1),
    "padding-feature": FragmentControl("/padding", "select", "Feature", "2", r"pd_feat=2", 2),
    "bug-zoo-check": FragmentControl("/bug_zoo", "toggle", "Check my answer", "",
                                     r"bz_check=true", True),
    "inspector-layer": FragmentControl("/inspector", "select", "Layer", "cnn.4[0] · GroupNorm",
                                       r"in_layer=cnn\.4%5B0%5D\+%C2%B7\+GroupNorm", "cnn.4[0]"),
    "transformer-attention": FragmentControl("/minilm", "slider", "Attention of layer", "3",
                                             r"tf_att=3", 3),
    "training-gate": FragmentControl(
        "/ln_lstm?tr_models=LSTM&tr_seeds=1&tr_steps=2&tr_hidden=16", "radio", "Gate",
        "forget f", r"tr_gate=forget(\+|%20)f", "forget f", setup="Run"),
    # first of its page, which it opens on NC: that full run draws no size slider beside C, so
    # NLC's L slider is the first thing the fragment writes there (Streamlit used to refuse it
    # with an exception)
    "bn-vs-ln-layout": FragmentControl(f"{BN_VS_LN}&bl_layout=NC", "radio", "Tensor layout",
                                       "NLC", r"bl_layout=NLC", "NLC"),
    "bn-vs-ln-n": FragmentControl(BN_VS_LN, "slider", "N (batch size)", "5", r"bl_n=5", 5),
    # a live control (lnviz.ui.live): it announces its value as "batch size = 9"
    "bn-vs-ln-batch-size": FragmentControl(BN_VS_LN, "slider", "Batch size", "batch size = 9",
                                           r"bl_b=9", 9),
    "bn-vs-ln-steps": FragmentControl(BN_VS_LN, "slider", "Training steps k", "11",
                                      r"bl_steps=11", 11),
    # a live control (lnviz.ui.live): it announces its value as "γ = 0.3". Moved on the page
    # test_browser_live's histogram test opens with γ between the slider's steps (0.15, on steps
    # of 0.1): one step right lands on the grid, at 0.3
    "scale-shift-gamma": FragmentControl(SCALE_SHIFT, "slider", "γ (scale)", "γ = 0.3",
                                         r"ss_gamma=0\.3", 0.3, guess=SCALE_SHIFT_ANSWER),
    # a live control (lnviz.ui.live): it announces its value as "ε = 1e-4"
    "epsilon-eps": FragmentControl("/epsilon", "slider", "ε (epsilon)", "ε = 1e-4",
                                   r"ep_eps=1e-4", 1e-4),
    "padding-gamma": FragmentControl("/padding", "slider", "γ (scale)", "1.10",
                                     r"pd_gamma=1\.1", 1.1),
}


def fragment_control(page: Page, control: FragmentControl):
    """The control's element: the one that takes the input, and shows its state."""
    if control.kind == "slider":
        return page.locator(f'input[type=range][aria-label="{control.name}"]').nth(control.nth)
    if control.kind == "radio":
        return (page.get_by_role("radiogroup", name=control.name, exact=True)
                .nth(control.nth).get_by_role("radio", name=control.pick, exact=True))
    if control.kind == "select":
        return page.get_by_role("combobox", name=control.name, exact=True).nth(control.nth)
    return page.get_by_role("switch", name=control.name, exact=True).nth(control.nth)


def open_fragment_control(page: Page, url: str, control: FragmentControl):
    page.goto(url)
    if control.guess:
        question(page).get_by_text(control.guess, exact=True).click(timeout=TIMEOUT_MS)
        wait_idle(page)
    if control.setup:
        button = page.get_by_role("button", name=control.setup, exact=True)
        expect(button).to_be_visible(timeout=TIMEOUT_MS)
        wait_idle(page)
        button.click()
    element = fragment_control(page, control)
    expect(element).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    return element


#: Sliders whose press must start a run of their fragment alone: the ε page's cancellation and
#: its ε sweep, Scale and shift's free γ, the training steps of BatchNorm vs LayerNorm and
#: Padding's γ (all but the first also redraw the PyTorch code at the end of their page, outside
#: their section).
FRAGMENT_RUNS = {"epsilon-cancellation", "epsilon-eps", "scale-shift-gamma", "bn-vs-ln-steps",
                 "padding-gamma"}
#: The controls of FRAGMENT_CONTROLS by page (the path before any query), in the order moved.
FRAGMENT_PAGES = {path: [case for case, control in FRAGMENT_CONTROLS.items()
                         if control.path.split("?")[0] == path]
                  for path in dict.fromkeys(c.path.split("?")[0]
                                            for c in FRAGMENT_CONTROLS.values())}


#: What the server sent since ``window.__fragT0`` (tools/loadtest.py's WebSocket hook): the runs
#: it started, each with the fragments it was for (none: the whole page), and the fragment of
#: every element it drew ('' outside any fragment).
_SENT_SINCE = """() => ({
  runs: window.__ltws.filter(e => e.kind === 'run' && e.t >= window.__fragT0)
                     .map(e => e.fragments),
  drawn: window.__ltdeltas.filter(e => e.t >= window.__fragT0).map(e => e.fragment)})"""


def sent_after(page: Page, act, url: str) -> dict:
    """Do ``act``; wait until the page has written ``url`` (a regex) and the run it started has
    finished; what the server sent meanwhile (``_SENT_SINCE``)."""
    page.evaluate("() => { window.__fragT0 = performance.now(); }")
    act()
    expect(page).to_have_url(re.compile(url), timeout=TIMEOUT_MS)
    # the browser writes the URL before the run starts: wait for the run's end
    page.wait_for_function("() => window.__ltws.some(e => e.kind === 'finished'"
                           " && e.t >= window.__fragT0)", polling=50, timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    return page.evaluate(_SENT_SINCE)


def move_control(page: Page, control: FragmentControl, element) -> None:
    """Move one control as a learner would: a slider one step right with the keyboard, a
    selectbox by typing and Enter, a toggle with Space, a radio by clicking its option."""
    if control.kind == "slider":
        element.focus()
        page.keyboard.press("ArrowRight")
    elif control.kind == "select":
        option = page.get_by_role("option", name=control.pick, exact=True)
        # a rerun ending on a busy machine can close the open list, before the option shows or
        # between its focus and the Enter: then the choice is made again
        for attempt in range(3):
            try:
                element.click()
                page.keyboard.type(control.pick.split(" ")[0])  # it filters as one types
                expect(option).to_be_visible(timeout=TIMEOUT_MS // 3)
                # the list redraws as it filters (a click can meet a detached option): choose
                # it with Enter once it is the focused one
                expect(option).to_have_attribute("data-focused", "true")
                page.keyboard.press("Enter")
                expect(element).to_have_value(control.pick, timeout=TIMEOUT_MS // 3)
                break
            except AssertionError:
                if attempt == 2:
                    raise
                page.keyboard.press("Escape")
    elif control.kind == "toggle":
        element.focus()  # its label covers the switch's input
        page.keyboard.press("Space")
    else:  # a radio's label covers its input: click the option's text
        (page.get_by_role("radiogroup", name=control.name, exact=True).nth(control.nth)
         .get_by_text(control.pick, exact=True).click())


#: The pages whose fragment controls another browser test checks on its own page load (it has
#: the page open already): the page, and that test (its module under tests/ and its name).
RIDDEN = {
    "/bn_vs_ln": ("test_browser_live",
                  "test_the_batch_panel_works_with_the_keyboard_and_the_server_corrects_what_it_reports"),
    "/epsilon": ("test_browser_live", "test_the_epsilon_sweeps_marker_follows_a_drag"),
    "/scale_shift": ("test_browser_live", "test_the_scale_and_shift_histogram_follows_a_drag"),
    "/minilm": ("test_browser_minilm",
                "test_typed_text_redraws_the_figures_and_a_norms_input_opens_in_the_explorer"),
    "/inspector": ("test_browser_inspector",
                   "test_upload_a_capture_and_open_a_layer_in_the_explorer"),
    # the pages whose first control's link is the navigation's: moved where the navigation
    # test has opened them, after their layout was checked
    **{path: ("test_browser", "test_every_page_opens_from_the_navigation")
       for path in ("/gradients", "/padding", "/bug_zoo")},
}


def check_fragment_controls(page: Page, path: str) -> None:
    """Move every fragment control of the page ``path`` (FRAGMENT_CONTROLS), which ``page``
    shows as its first control's link opens it: each writes the link, and those of
    FRAGMENT_RUNS start a run of their fragment alone, which redraws only that fragment's
    elements (read from the server's messages: each run's ``new_session`` names the fragments it
    runs, each element its fragment). Then the link the browser wrote, opened by someone else
    (a full run of the page, here without a browser: Streamlit's AppTest, which reads a link as
    a fresh tab does), holds every control's value."""
    cases = FRAGMENT_PAGES[path]
    controls = [FRAGMENT_CONTROLS[case] for case in cases]
    # opened as the first control's link: its path, and every setting of its query
    url = urllib.parse.urlsplit(page.url)
    link = urllib.parse.urlsplit(controls[0].path)
    assert url.path.rstrip("/").endswith(link.path), (page.url, controls[0].path)
    opened_with = urllib.parse.parse_qsl(url.query)
    assert all(pair in opened_with for pair in urllib.parse.parse_qsl(link.query)), (
        page.url, controls[0].path)
    for case, control in zip(cases, controls, strict=True):
        element = fragment_control(page, control)
        expect(element).to_be_visible(timeout=TIMEOUT_MS)
        sent = sent_after(page, lambda c=control, e=element: move_control(page, c, e),
                           rf"[?&]{control.written}(&|$)")
        if case in FRAGMENT_RUNS:
            assert len(sent["runs"]) == 1, (case, sent["runs"])
            fragments = sent["runs"][0]
            assert len(fragments) == 1 and fragments[0], f"{case}: not a fragment run: {sent}"
            assert sent["drawn"], f"{case}: the fragment's run drew nothing"
            assert set(sent["drawn"]) == set(fragments), (
                f"{case}: the fragment's run drew outside it: {sorted(set(sent['drawn']))}")
    assert_no_exception(page)

    # the link the browser wrote, opened by someone else (a full run of the page, here without
    # a browser: Streamlit's AppTest, which reads a link as a fresh tab does)
    query = {key: values[0] if len(values) == 1 else values for key, values in
             urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).items()}
    opened = open_page(f"app_pages/{path.lstrip('/')}.py", query)
    if controls[0].setup:  # the section that holds the controls needs its button pressed
        next(b for b in opened.button if b.label == controls[0].setup).click().run()
        assert not opened.exception, opened.exception
    for case, control in zip(cases, controls, strict=True):
        key = control.written.split("=")[0]
        held = opened.session_state[key]
        if isinstance(control.value, float):
            assert held == pytest.approx(control.value), (case, held)
        else:
            assert held == control.value, (case, held)


def sidebar_reruns_the_whole_page(page: Page) -> None:
    """The sidebar's seed, outside any fragment, starts a run of the whole page, which redraws
    elements outside fragments too."""
    seed = page.get_by_label("Random seed", exact=True)

    def new_seed() -> None:
        seed.fill("3")
        seed.press("Enter")

    sent = sent_after(page, new_seed, r"[?&]seed=3(&|$)")
    assert sent["runs"] == [[]], f"not one run of the whole page: {sent['runs']}"
    assert "" in sent["drawn"], "the page's run drew nothing outside the fragments"


def code_follows_both_fragments(page: Page) -> None:
    """BatchNorm vs LayerNorm's code shows the batch size and the training steps, two
    fragments' controls (moved above to 9 and 11): a run of one fragment must not bring back
    the other's old value, either way."""
    steps = fragment_control(page, FRAGMENT_CONTROLS["bn-vs-ln-steps"])
    batch = fragment_control(page, FRAGMENT_CONTROLS["bn-vs-ln-batch-size"])
    # one code block, which both fragments redraw: never two
    code = page.locator('[data-testid="stCode"]', has_text="torch.nn.BatchNorm1d")
    expect(code).to_contain_text("steps = 11\n")
    expect(code).to_contain_text("batch_size = 9\n")

    def step_right(control, written: str, *shown: str) -> None:
        control.focus()
        page.keyboard.press("ArrowRight")
        expect(page).to_have_url(re.compile(rf"[?&]{written}(&|$)"), timeout=TIMEOUT_MS)
        wait_idle(page)
        expect(code).to_have_count(1)
        for text in shown:
            expect(code).to_contain_text(text)

    step_right(steps, "bl_steps=12", "steps = 12\n", "batch_size = 9\n")
    step_right(batch, "bl_b=10", "batch_size = 10\n", "steps = 12\n")
    assert_no_exception(page)
