"""The Start-here path in a real browser: from the default page "/", every check of every step
answered right, the first of each kind (a choice, typed numbers; with the mouse, with the
keyboard) wrong first, with the feedback each answer should get (every wrong answer's feedback
is tests/test_start_here.py's, without a browser); steps 2 and 5 with the keyboard alone (step 2
by the steps' tabs and their arrow keys, step 5 by the previous step's button); the answers kept
by a reload, which opens the step the link names (as a teacher's link to one step does), and by
a trip to a concept page and back. A screenshot of every step goes to screenshots/.

Uses the server, browser and page fixtures of tests/conftest.py (one server for the whole run).
"""

from __future__ import annotations

import re
import urllib.parse

import pytest
from browserutil import (
    ALERT,
    FOCUSED,
    SAVE_SCREENSHOTS,
    TIMEOUT_MS,
    TITLE,
    assert_no_exception,
    shot,
    tab_to,
    wait_idle,
)
from conftest import DESKTOP_VIEWPORT

from lnviz.lessons.start_here import Question, Step, check, path_steps
from lnviz.ui.path import STEP_KEY, answer_key, links_of

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Page = None

pytestmark = pytest.mark.browser

STEPS = path_steps()
PANEL = '[role="tabpanel"]:visible'
PROGRESS = '[data-testid="stProgress"]'
#: Tall enough for one step, its answers, tables and figure, in one screenshot.
SHOT_VIEWPORT = {"width": 1400, "height": 2600}


def typed(values) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def wrong_answer(q: Question) -> str:
    """The first slip the question names as wrong (a choice: the first wrong option)."""
    if q.is_choice:
        return next(iter(q.feedback))
    return typed(next(m for m in q.mistakes if not m.exact).values)


def right_answer(q: Question) -> str:
    return q.answer if q.is_choice else typed(q.expected)


def alert(page: Page, message: str):
    """The alert box showing ``message`` (its first words: the box renders markdown)."""
    return page.locator(PANEL).locator(ALERT).filter(has_text=message[:60])


def expect_feedback(page: Page, q: Question, answer: str, kind: str) -> None:
    feedback = check(q, answer)
    assert feedback.verdict == kind
    expect(alert(page, feedback.message)).to_be_visible()
    wait_idle(page)
    assert_no_exception(page)


def answer_with_mouse(page: Page, q: Question, answer: str) -> None:
    if q.is_choice:
        group = page.get_by_role("radiogroup", name=q.prompt, exact=True)
        group.get_by_text(answer, exact=True).click()
    else:
        box = page.get_by_role("textbox", name=q.prompt, exact=True)
        box.fill(answer)
        box.press("Enter")


def answer_with_keyboard(page: Page, q: Question, answer: str) -> None:
    """Tab to the question's control; type and press Enter, or arrow to the option."""
    if q.is_choice:
        tab_to(page, lambda f: f["group"] == q.prompt, f"the options of {q.name}")
        for _ in range(len(q.options) + 1):
            label = page.evaluate("() => document.activeElement.closest('label')?.innerText"
                                  " || document.activeElement.getAttribute('aria-label')")
            if label and label.strip() == answer:
                break
            # an arrow key picks the next option, and each pick is a run: the next press once
            # it has ended, as a learner reading each option presses (presses milliseconds
            # apart once left the server on an earlier option, its feedback shown, while the
            # browser showed the later one picked: a Streamlit race left alone)
            page.keyboard.press("ArrowDown")
            wait_idle(page)
        page.keyboard.press("Space")
    else:
        tab_to(page, lambda f: f["tag"] == "INPUT" and f["label"] == q.prompt,
                f"the answer field of {q.name}")
        page.keyboard.press("Control+a")
        page.keyboard.type(answer)
        page.keyboard.press("Enter")


def shot_of_step(page: Page, step: Step) -> None:
    if not SAVE_SCREENSHOTS:  # the resize alone redraws every figure twice
        return
    page.set_viewport_size(SHOT_VIEWPORT)
    page.wait_for_timeout(800)  # let the figures take the new width
    shot(page, f"start-here-step-{step.number}")
    page.set_viewport_size(DESKTOP_VIEWPORT)


def open_step(page: Page, step: Step, keyboard: bool, *, by_tab: bool = False) -> None:
    """Move on to ``step`` with the previous step's "Step … →" button, or (``by_tab``, from
    the previous step) with the keyboard on the steps' tabs: Tab to the previous step's tab,
    the right arrow to this one's, Enter."""
    name = f"Step {step.outline.tab} →"
    if by_tab:
        before = STEPS[step.number - 2].outline.tab
        # from the page's title, as after a click on it: the steps' tabs come next
        page.locator(TITLE).click()
        tab_to(page, lambda f: f["role"] == "tab" and f["text"] == before,
               f"the tab of {before}")
        page.keyboard.press("ArrowRight")
        focused = page.evaluate(FOCUSED)
        assert focused["text"] == step.outline.tab, focused
        page.keyboard.press("Enter")
    elif keyboard:
        tab_to(page, lambda f: f["tag"] == "BUTTON" and f["text"] == name, f"the {name} button")
        page.keyboard.press("Enter")
    else:
        page.locator(PANEL).get_by_role("button", name=name, exact=True).click()
    expect(page.locator(PANEL).get_by_role(
        "heading", name=re.compile(rf"^Step {step.number} of 8"))).to_be_visible()
    value = re.escape(urllib.parse.quote_plus(step.outline.tab))
    expect(page).to_have_url(re.compile(rf"[?&]{STEP_KEY}={value}(&|$)"))
    wait_idle(page)


def test_the_whole_path_from_the_default_page(page: Page, server: str) -> None:
    page.goto(server)
    expect(page.locator(TITLE)).to_have_text("Start here", timeout=TIMEOUT_MS)
    wait_idle(page)
    expect(page.locator(PROGRESS).get_by_text("0 of 11 checks right", exact=True)).to_be_visible()
    keyboard_steps = {2, 5}
    wrong_first = set()  # (keyboard, a choice): the kinds answered wrong once already
    for step in STEPS:
        keyboard = step.number in keyboard_steps
        if step.number > 1:
            open_step(page, step, keyboard, by_tab=step.number == 2)
        for q in step.questions:
            act = answer_with_keyboard if keyboard else answer_with_mouse
            wrong, right = wrong_answer(q), right_answer(q)
            if (keyboard, q.is_choice) not in wrong_first:
                wrong_first.add((keyboard, q.is_choice))
                act(page, q, wrong)
                expect_feedback(page, q, wrong, "wrong")
                expect(page).to_have_url(re.compile(rf"[?&]{answer_key(q)}="))
            act(page, q, right)
            expect_feedback(page, q, right, "right")
            expect(alert(page, check(q, wrong).message)).to_have_count(0)
        expect(page.get_by_text(re.compile(rf"✓ {re.escape(step.outline.tab)}( ·|$)")))\
            .to_be_visible()
        shot_of_step(page, step)
    assert len(wrong_first) == 4, wrong_first  # both kinds, with the mouse and the keyboard
    expect(page.locator(PROGRESS).get_by_text("11 of 11 checks right", exact=True)).to_be_visible()
    expect(page.get_by_text("End of the path: 11 of 11 checks right")).to_be_visible()

    # a reload keeps every answer: they are in the URL, with the step on screen, which the
    # reloaded page opens (as a teacher's link to one step does)
    page.reload()
    expect(page.locator(TITLE)).to_have_text("Start here", timeout=TIMEOUT_MS)
    last = STEPS[-1]
    expect(page.locator(PANEL).get_by_role(
        "heading", name=re.compile(rf"^Step {last.number} of 8"))).to_be_visible()
    expect(page.get_by_role("tab", name=last.outline.tab)).to_have_attribute(
        "aria-selected", "true")
    wait_idle(page)  # the title can show before the rest of the page on a loaded machine
    expect(page.locator(PROGRESS).get_by_text("11 of 11 checks right", exact=True)).to_be_visible()
    assert_no_exception(page)
    shot(page, "start-here-reloaded")
    _trip_to_the_explorer_and_back(page)


def _trip_to_the_explorer_and_back(page: Page) -> None:
    """Step 3's link to the Explorer, and back by the Explorer's own link to the path: the
    answers and the progress are kept."""
    step = STEPS[2]
    page.get_by_role("tab", name=step.outline.tab).click()
    expect(page.locator(PANEL).get_by_role("heading", name=re.compile("^Step 3 of 8")))\
        .to_be_visible()
    link = links_of(step.outline)[0]
    page.locator(PANEL).get_by_role("link", name=link.label).click()
    expect(page.locator(TITLE)).to_have_text("Explorer", timeout=TIMEOUT_MS)
    expect(page).to_have_url(re.compile(r"/explorer\?.*norm=BatchNorm"))
    wait_idle(page)
    # the worked example is the transformer article's number: feature 1 of "I", the pad counted
    tex = [a.text_content() or "" for a in
           page.locator('annotation[encoding="application/x-tex"]').all()]
    assert any("(-1.091)" in t for t in tex), tex
    back = page.get_by_role("link", name=re.compile("Part of the Start-here path: step 2"))
    back.scroll_into_view_if_needed()
    shot(page, "start-here-deeper-explorer")
    back.click()
    expect(page.locator(TITLE)).to_have_text("Start here", timeout=TIMEOUT_MS)
    expect(page.locator(PANEL).get_by_role("heading", name=re.compile("^Step 2 of 8")))\
        .to_be_visible()
    wait_idle(page)
    # step 2 sent the learner to the Explorer first; step 3's answer is still there
    page.get_by_role("tab", name=step.outline.tab).click()
    q = step.questions[0]
    expect(alert(page, q.right)).to_be_visible()
    expect(page.locator(PROGRESS).get_by_text("11 of 11 checks right", exact=True)).to_be_visible()
    assert_no_exception(page)
