"""Start here: the path's answers checked against torch and the transformer article, the checking
of typed
answers (tolerance, the slips it names), its figures, and the page run headless with AppTest:
every question answered wrong and right, the progress, the URL, and the links both ways."""

from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pageutil import ROOT, alerts, figures, open_page, page_text
from streamlit.testing.v1 import AppTest

from lnviz import charts
from lnviz.data import PRESETS
from lnviz.lessons.start_here import (
    OUTLINE,
    TOLERANCE,
    Question,
    check,
    epsilon_curve,
    format_numbers,
    parse_numbers,
    path_numbers,
    path_steps,
    progress,
    real_tokens,
    step_status,
)
from lnviz.ui.path import PATH_PAGE, STEP_KEY, answer_key, links_of, outline_for_page

PAGE = "app_pages/start_here.py"
#: The concept pages that end with the way back to the path.
CONCEPT_PAGES = ("explorer", "bn_vs_ln", "padding", "epsilon", "scale_shift", "gradients",
                 "shapes")
SEED = torch.tensor([[[1, 2, 3], [2, 4, 6], [3, 6, 9], [4, 8, 12]],
                     [[5, 10, 15], [6, 12, 18], [7, 13, 19], [0, 0, 0]]], dtype=torch.float64)


@pytest.fixture(scope="module")
def steps():
    return path_steps()


@pytest.fixture(scope="module")
def questions(steps) -> dict[str, Question]:
    return {q.name: q for s in steps for q in s.questions}


def typed(values) -> str:
    """An answer as a learner types it: two decimals, ASCII minus."""
    return ", ".join(f"{v:.2f}" for v in values)


# --- Reading typed answers ----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "numbers"), [
    ("-1.22, 0, 1.22", (-1.22, 0.0, 1.22)),
    ("−1.22, 0, 1.22", (-1.22, 0.0, 1.22)),  # typographic minus
    ("[-1.22 0 1.22]", (-1.22, 0.0, 1.22)),
    ("(0.82; 2)", (0.82, 2.0)),
    ("  -1.09 ", (-1.09,)),
    ("1e-3,nan", (0.001, math.nan)),
])
def test_typed_numbers_are_read_in_every_usual_form(text, numbers):
    read = parse_numbers(text)
    assert len(read) == len(numbers)
    assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(read, numbers,
                                                                              strict=True))


@pytest.mark.parametrize(("text", "message"), [
    ("abc", "“abc” is not a number"), ("1, two, 3", "“two” is not a number"),
    ("[ ]", "Type a number"),
])
def test_what_is_not_a_number_is_named(text, message):
    with pytest.raises(ValueError, match=message):
        parse_numbers(text)


def test_numbers_are_shown_with_a_true_minus_and_without_trailing_zeros():
    assert format_numbers([-1.2247, 0.0, 1.2247]) == "[−1.22, 0, 1.22]"
    assert format_numbers([-0.001]) == "0"
    assert format_numbers([math.nan, math.inf]) == "[NaN, inf]"
    assert format_numbers([2.0]) == "2"


# --- The answers, against torch and the transformer article
# ---------------------------------------------------


def test_prompts_are_plain_text_as_screen_readers_read_them(questions):
    """A prompt is its control's label, and the label's text its accessible name: markdown
    emphasis would be read out as asterisks."""
    assert [q.name for q in questions.values() if set(q.prompt) & set("*_`#")] == []


def test_no_option_of_a_later_question_gives_an_earlier_answer_away(steps):
    for step in steps:
        for k, q in enumerate(step.questions):
            earlier = {format_numbers(e.expected) for e in step.questions[:k] if e.expected}
            assert earlier.isdisjoint(q.options), q.name


def test_the_expected_answers_are_torchs(questions):
    i_token, learning = SEED[0, 0], SEED[0, 3]
    np.testing.assert_allclose(questions["ln_i"].expected, F.layer_norm(i_token, (3,)))
    np.testing.assert_allclose(questions["ln_learning"].expected, F.layer_norm(learning, (3,)))
    counted = F.batch_norm(SEED.reshape(-1, 3), None, None, training=True)
    assert questions["bn_seed"].expected == pytest.approx((float(counted[0, 0]),))
    mask = SEED.abs().sum(-1) > 0
    masked = F.batch_norm(SEED[mask], None, None, training=True)
    assert questions["bn_masked"].expected == pytest.approx((float(masked[0, 0]),))
    pair = F.batch_norm(SEED[:, 0], None, None, training=True)
    np.testing.assert_allclose(questions["bn_two"].expected, pair[0])
    var = float(i_token.var(unbiased=False))
    np.testing.assert_allclose(questions["eps"].expected, F.layer_norm(i_token, (3,), eps=var))
    gamma, beta = questions["undo"].expected
    undone = F.layer_norm(i_token, (3,), torch.full((3,), gamma, dtype=torch.float64),
                          torch.full((3,), beta, dtype=torch.float64))
    np.testing.assert_allclose(undone, i_token, atol=1e-12)


def test_the_answers_are_the_two_sentences_worked_numbers(questions):
    assert questions["ln_i"].expected == pytest.approx((-1.2247, 0, 1.2247), abs=1e-4)
    assert questions["ln_learning"].expected == pytest.approx((-1.2247, 0, 1.2247), abs=1e-4)
    assert questions["bn_seed"].expected[0] == pytest.approx(-1.09, abs=5e-3)  # (1 − 3.5)/2.29
    assert questions["bn_masked"].expected[0] == pytest.approx(-1.5, abs=1e-5)
    assert questions["bn_two"].expected == pytest.approx((-1, -1, -1), abs=1e-5)
    assert questions["eps"].expected == pytest.approx((-math.sqrt(0.75), 0, math.sqrt(0.75)))
    assert questions["undo"].expected == pytest.approx((math.sqrt(2 / 3), 2.0), abs=1e-5)


def test_the_choices_are_decided_by_the_computation(questions):
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm(SEED[0, :1], None, None, training=True)
    assert questions["bn_one"].answer == "It raises an error"
    assert torch.isnan(F.layer_norm(SEED[1, 3], (3,), eps=0.0)).all()
    assert questions["eps_pad"].answer == "[NaN, NaN, NaN]"
    numbers = path_numbers()
    stream = {v: p.stream for v, p in numbers.stack.items()}
    assert np.abs(stream["post-LN"][1:] - 1).max() < 1e-3
    assert stream["pre-LN"][-1] > 2 and stream["none"][-1] > stream["pre-LN"][-1]
    assert questions["where"].answer.startswith("post-LN")
    assert questions["why"].answer == "About as well as with plain BatchNorm"


def test_the_first_step_sets_up_santurkars_test_without_its_outcome():
    """Step 1 says what Santurkar et al. tested, not what they found: that (the explanation
    disputed, a smoother landscape credited) is in the reveal and in each wrong answer's."""
    step = path_steps()[0]
    assert "Santurkar" in step.intro and "put that explanation to a test" in step.intro
    assert "disputed" not in step.intro and "smoother" not in step.intro
    question = step.questions[0]
    assert "smoother loss landscape" in question.right
    assert all("disputed" in text or "smoother" in text for text in question.feedback.values())


def test_the_wrong_formulas_give_the_numbers_their_feedback_names(questions):
    slips = {m.why.split(":")[0]: m.values for m in questions["ln_i"].mistakes}
    assert slips["That is the unbiased variance"] == pytest.approx((-1, 0, 1), abs=1e-5)
    assert slips["That is RMSNorm"] == pytest.approx(
        F.rms_norm(SEED[0, 0], (3,), eps=1e-5).tolist())
    eps_slips = {m.why.split(":")[0]: m.values for m in questions["eps"].mistakes}
    sigma = math.sqrt(2 / 3)
    assert eps_slips["That adds ε to σ"] == pytest.approx((-1 / (sigma + 2 / 3), 0,
                                                          1 / (sigma + 2 / 3)))
    unbiased = questions["bn_seed"].mistakes[0]
    assert unbiased.why.startswith("That is the unbiased variance, dividing by 7")
    assert unbiased.values[0] == pytest.approx(-2.5 / math.sqrt(6.0), abs=1e-5)  # σ² = 42/7
    assert questions["bn_two"].mistakes[0].values == pytest.approx((-math.sqrt(0.5),) * 3,
                                                                   abs=1e-5)


def test_every_slip_is_told_apart_from_the_answer(questions):
    for q in questions.values():
        for mistake in q.mistakes:
            assert len(mistake.values) == len(q.expected), (q.name, mistake.why)
            distance = max(abs(a - b) for a, b in zip(mistake.values, q.expected, strict=True))
            # a source's printed number is matched exactly, so it may lie inside the tolerance
            assert distance > (0 if mistake.exact else 3 * TOLERANCE), (q.name, mistake.why)


# --- Checking ---------------------------------------------------------------------------------


def test_right_answers_pass_within_the_tolerance(questions):
    for q in questions.values():
        if q.is_choice:
            assert check(q, q.answer).verdict == "right"
            continue
        assert check(q, typed(q.expected)).verdict == "right", q.name
        off = [v + 0.9 * TOLERANCE for v in q.expected]
        assert check(q, ", ".join(repr(v) for v in off)).verdict == "right", q.name
        assert check(q, typed(q.expected)).message == q.right


def test_the_articles_carried_cut_is_named_and_a_true_rounding_counts(questions):
    """The article's ±1.23 comes from σ = 0.8165 cut to 0.81 (1/0.81 = 1.2346). Typed so, it is
    inside the check's ±0.01, and right, as it is for "learning" (a learner who kept σ = 0.816
    gets 1.2255 → 1.23 too), with the article's slip named beside; ±1.22 is right plainly."""
    q = questions["ln_i"]
    noted = check(q, "-1.23, 0, 1.23")  # inside the tolerance: right, as in the next question
    assert noted.verdict == "right" and noted.message.startswith(q.right)
    assert "cut to 0.81" in noted.message
    assert "1.2346" in noted.message and "±1.2247" in noted.message
    assert check(questions["ln_learning"], "-1.23, 0, 1.23").verdict == "right"
    assert check(q, "-1.22, 0, 1.22").message == q.right
    assert check(q, "-1.225, 0, 1.225").verdict == "right"
    assert "cuts σ = 0.8165 to 0.81 (rounding would give 0.82)" in q.reveal
    assert abs(1 / 0.81 - 1.2346) < 1e-4 and round(math.sqrt(2 / 3), 2) == 0.82


def test_a_reversed_sign_is_named(questions):
    for name in ("ln_i", "ln_learning", "eps"):  # (bn_two's flip is “Transformers”, named)
        flipped = ", ".join(repr(-v) for v in questions[name].expected)
        assert "opposite sign" in check(questions[name], flipped).message, name


def test_every_slip_gets_its_own_feedback(questions):
    for q in questions.values():
        for mistake in q.mistakes:
            feedback = check(q, typed(mistake.values))
            # a source's number inside the tolerance is right, with the source's slip as a note
            assert feedback.verdict == ("right" if mistake.exact else "wrong"), (q.name,
                                                                               mistake.why)
            assert mistake.why[1:] in feedback.message  # "That is…", or "Or: that is…"


def test_an_unbiased_variance_and_a_missing_division_both_explain_minus_one_zero_one(questions):
    feedback = check(questions["ln_i"], "-1, 0, 1")
    assert feedback.verdict == "wrong"
    assert "unbiased variance" in feedback.message and "Or: that is x − μ" in feedback.message


def test_an_unexplained_answer_gets_the_hint_and_a_near_one_is_told_so(questions):
    q = questions["bn_seed"]
    assert check(q, "7").message == q.hint
    assert check(q, "-1.12").message.startswith("Nearly")


@pytest.mark.parametrize(("answer", "verdict", "message"), [
    (None, "unanswered", ""), ("  ", "unanswered", ""),
    ("1, 2", "invalid", "Type 3 numbers, separated by commas: you typed 2."),
    ("one", "invalid", "“one” is not a number"),
])
def test_what_is_not_an_answer_is_not_marked_wrong(questions, answer, verdict, message):
    feedback = check(questions["ln_i"], answer)
    assert feedback.verdict == verdict and message in feedback.message
    assert not feedback.answered


def test_every_wrong_choice_is_explained(questions):
    for q in questions.values():
        if not q.is_choice:
            continue
        assert q.answer in q.options
        assert set(q.feedback) == set(q.options) - {q.answer}
        for option, why in q.feedback.items():
            assert check(q, option).verdict == "wrong" and check(q, option).message == why
        assert check(q, "something else").verdict == "invalid"


def test_progress_marks_each_step(steps):
    answers = {"why": steps[0].questions[0].answer, "ln_i": "-1, 0, 1",
               "ln_learning": "-1.22, 0, 1.22", "bn_seed": "-1.09"}
    assert [step_status(s, answers) for s in steps[:4]] == ["right", "wrong", "right", "todo"]
    right, total, line = progress(steps, answers)
    assert (right, total) == (3, 11)
    assert line.startswith("✓ 1 Why · ✗ 2 LayerNorm · ✓ 3 BatchNorm · ○ 4 Padding")


# --- The numbers behind the text ---------------------------------------------------------------


def test_all_seven_real_tokens_collapse_onto_one_point_as_the_text_says(questions):
    names, _inputs, outputs = real_tokens(path_numbers())
    assert names == ["I", "love", "deep", "learning", "Transformers", "are", "powerful"]
    np.testing.assert_allclose(outputs, np.tile(F.layer_norm(SEED[0, 0], (3,)), (7, 1)),
                               atol=1e-5)
    assert "all 7 real tokens" in questions["ln_learning"].right


def test_gamma_and_beta_undo_batchnorm_for_every_token_but_layernorm_only_for_one(questions):
    """Step 7's claims: per-feature γ = σ_c, β = μ_c give BatchNorm's input back for the whole
    batch; LayerNorm sends "I" and "learning" to the same x̂, so no one γ, β gives both back."""
    x = SEED.reshape(-1, 3)
    mean, var = x.mean(0), x.var(0, unbiased=False)
    undone = F.batch_norm(x, None, None, torch.sqrt(var + 1e-5), mean, training=True)
    np.testing.assert_allclose(undone, x, atol=1e-9)
    gamma, beta = questions["undo"].expected
    # said whatever the answer (a wrong one too), naming the formula tutorial's identity claim
    assert "“learning” would need γ = 3.27, β = 8" in questions["undo"].aside
    assert "The formula tutorial says this choice lets the layer learn the identity" in \
        questions["undo"].aside
    assert (gamma, beta) != pytest.approx((math.sqrt(32 / 3), 8.0), abs=0.1)


def test_epsilon_curve_falls_like_one_over_root_eps_past_the_variance():
    _eps, x_hat, variance = epsilon_curve([1e-4, 2 / 3, 100.0])
    assert variance == pytest.approx(2 / 3)
    assert x_hat[0] == pytest.approx(math.sqrt(1.5), rel=1e-3)
    assert x_hat[1] == pytest.approx(math.sqrt(0.75))
    assert x_hat[2] == pytest.approx(1 / math.sqrt(100 + 2 / 3))


def test_figures_carry_the_numbers():
    names, inputs, outputs = real_tokens(path_numbers())
    fig = charts.start_here.tokens_figure(names, inputs, outputs)
    assert len(fig.data) == 14 and list(fig.data[3].y) == [4, 8, 12]
    np.testing.assert_allclose(fig.data[10].y, [-1.2247, 0, 1.2247], atol=1e-4)
    eps, x_hat, variance = epsilon_curve()
    fig = charts.start_here.epsilon_figure(eps, x_hat, variance, math.sqrt(0.75))
    assert list(fig.data[2].x) == [pytest.approx(2 / 3)]
    assert fig.data[2].text == ("0.866",)


# --- The page ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def page() -> AppTest:
    return open_page(PAGE)


def test_start_here_is_the_apps_default_page():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert at.title[0].value == "Start here"
    assert any(r"\gamma" in latex.value for latex in at.latex)


def test_the_page_shows_eight_steps_and_nothing_answered(page):
    assert [t.label for t in page.tabs] == [o.tab for o in OUTLINE]
    assert [s.value for s in page.subheader][:2] == ["Step 1 of 8 · Why normalize",
                                                     "Step 2 of 8 · LayerNorm on one token, "
                                                     "by hand"]
    assert alerts(page) == {"error": [], "warning": [], "success": [], "info": []}
    assert "0 of 11 checks right" in page.get("progress")[0].proto.text
    assert page.markdown[0].value.startswith("○ 1 Why · ○ 2 LayerNorm")
    assert page.dataframe == [] and figures(page) == []  # nothing revealed yet


def answer(at: AppTest, q: Question, value: str) -> AppTest:
    if q.is_choice:
        at.radio(key=answer_key(q)).set_value(value).run()
    else:
        at.text_input(key=answer_key(q)).input(value).run()
    assert not at.exception, at.exception
    return at


def test_every_question_answered_wrong_then_right_gets_the_matching_feedback(questions):
    """In path order, the questions before each one answered right (its feedback may quote
    theirs): each wrong answer gets its own explanation, the right one its reply."""
    at = open_page(PAGE)
    names = list(questions)
    for number, q in enumerate(questions.values()):
        later = set(names[number + 1:])  # still open: a slip that is their answer is not named
        wrongs = (list(q.feedback) if q.is_choice
                  else [typed(m.values) for m in q.mistakes if not m.exact]
                  + [typed([123.0] * len(q.expected))])  # no slip explains it: the hint
        for wrong in wrongs:
            answer(at, q, wrong)
            assert alerts(at)["error"] == [check(q, wrong, later).message], (q.name, wrong)
        answer(at, q, q.answer if q.is_choice else typed(q.expected))
        assert not alerts(at)["error"] and alerts(at)["success"][-1] == q.right


def test_a_question_answered_before_the_ones_it_quotes_gives_only_its_verdict(questions):
    """Steps are tabs: a learner who answers step 4 first gets "Right" but not the worked answer,
    which quotes steps 2 and 3 (LayerNorm("I") and the −1.09 the pad gives); answering the
    questions before it brings the whole reply."""
    at = open_page(PAGE)
    q = questions["bn_masked"]
    answer(at, q, typed(q.expected))
    assert alerts(at)["success"] == ["Right. Why comes once the questions before this one are "
                                     "answered: it quotes their answers."]
    shown = page_text(at)
    assert "1.22" not in shown and "1.09" not in shown
    for name in ("why", "ln_i", "ln_learning", "bn_seed"):
        before = questions[name]
        answer(at, before, before.answer if before.is_choice else typed(before.expected))
    assert alerts(at)["success"][-1] == q.right


def test_a_steps_figure_waits_for_the_earlier_answers_it_shows(questions):
    """Step 6's ε curve levels off at LayerNorm("I")'s last x̂, 1.2247, step 2's answer: while
    questions before it are open it waits, and says why; once they are answered it is drawn."""
    names = list(questions)
    at = open_page(PAGE)
    for name in ("eps", "eps_pad"):
        q = questions[name]
        answer(at, q, q.answer if q.is_choice else typed(q.expected))
    assert figures(at) == []
    assert any("once the questions before this one are answered" in c.value for c in at.caption)
    for name in names[:names.index("eps")]:
        before = questions[name]
        answer(at, before, before.answer if before.is_choice else typed(before.expected))
    assert len(figures(at)) >= 2  # step 2's tokens and step 6's ε curve


def test_answers_reveal_the_numbers_and_figures_and_mark_progress(questions):
    at = open_page(PAGE)
    answer(at, questions["why"], questions["why"].answer)  # step 1 first: in order
    answer(at, questions["ln_i"], "-1, 0, 1")
    assert "✗ 2 LayerNorm" in at.markdown[0].value
    # a wrong answer offers the worked answer folded, and the step's figure, which answers
    # "learning" too, waits for that question
    assert [e.label for e in at.expander] == ["Show the worked answer"]
    assert any("The transformer article cuts σ" in m.value for m in at.expander[0].markdown)
    assert figures(at) == []
    answer(at, questions["ln_i"], "-1.22, 0, 1.22")
    answer(at, questions["ln_learning"], "-1.22, 0, 1.22")
    tokens = figures(at)
    assert len(tokens) == 1 and tokens[0]["data"][0]["name"] == "I"
    assert "✓ 2 LayerNorm" in at.markdown[0].value
    assert "3 of 11 checks right" in at.get("progress")[0].proto.text  # with step 1
    table = at.dataframe[-1].value
    assert list(table["token"]) == ["I", "learning"]
    answer(at, questions["eps"], "0.87, 0, 0.87")  # the sign of the first slipped
    assert len(figures(at)) == 1  # the ε figure waits for the step's second question
    answer(at, questions["eps_pad"], questions["eps_pad"].answer)
    assert len(figures(at)) == 1  # and for steps 3 to 5, still open
    names = list(questions)
    for name in names[names.index("ln_learning") + 1:names.index("eps")]:
        q = questions[name]
        answer(at, q, q.answer if q.is_choice else typed(q.expected))
    eps_chart = figures(at)[1]
    assert eps_chart["data"][2]["text"] == ["0.866"]
    for name in names[names.index("eps_pad") + 1:names.index("where") + 1]:  # steps 7 and 8
        q = questions[name]
        answer(at, q, q.answer if q.is_choice else typed(q.expected))
    depth = figures(at)[2]
    assert {t["name"] for t in depth["data"]} == {"post-LN", "pre-LN", "none"}


def test_a_link_restores_the_step_and_the_answers():
    query = {STEP_KEY: "3 BatchNorm", "sp_bn_seed": "-1.09", "sp_why": "Worse than without "
             "BatchNorm"}
    at = open_page(PAGE, query)
    assert at.session_state[STEP_KEY] == "3 BatchNorm"
    assert at.text_input(key="sp_bn_seed").value == "-1.09"
    assert at.markdown[0].value.startswith("✗ 1 Why · ○ 2 LayerNorm · ✓ 3 BatchNorm")
    assert len(alerts(at)["success"]) == 1 and len(alerts(at)["error"]) == 1


def test_next_and_back_move_between_steps_and_into_the_url():
    at = open_page(PAGE)
    at.button(key="sp_next_1").click().run()
    assert at.session_state[STEP_KEY] == "2 LayerNorm"
    assert at.query_params[STEP_KEY] == "2 LayerNorm"
    at.button(key="sp_back_3").click().run()
    assert at.session_state[STEP_KEY] == "2 LayerNorm"
    assert "sp_next_8" not in [b.key for b in at.button]
    assert any("End of the path: 0 of 11" in m.value for m in at.markdown)


def test_junk_in_the_url_opens_the_path_at_step_one():
    at = open_page(PAGE, {STEP_KEY: "<script>", "sp_where": "junk", "sp_ln_i": "nan"})
    assert at.session_state[STEP_KEY] == "1 Why"
    assert at.radio(key="sp_where").value is None


def test_a_typed_answer_is_shown_as_text_not_markup(questions):
    at = answer(open_page(PAGE), questions["bn_seed"], "**1**")
    assert alerts(at)["warning"] == ["“**1**” is not a number: type numbers like 0.5, −1.25 or "
                                     "2, separated by commas."]
    assert "\\*\\*1\\*\\*" in at.warning[0].value  # escaped: no bold


# --- Links into the concept pages and back ------------------------------------------------------

KINDS = ("slider", "select_slider", "number_input", "selectbox", "segmented_control", "radio",
         "checkbox", "text_input")
LINKS = [link for o in OUTLINE for link in links_of(o) if link.query]


def control_value(key: str, text: str) -> object:
    """The value a control shows for the URL value ``text`` a link gives it."""
    if key == "preset":  # the Explorer's examples go by their names in the URL
        return next(k for k, preset in PRESETS.items() if preset.name == text)
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


@pytest.mark.parametrize("link", LINKS, ids=[f"{link.name}-{'-'.join(link.query)}"
                                             for link in LINKS])
def test_each_link_opens_its_page_on_the_view_it_names(link):
    at = open_page(link.page, link.query)
    shown = {w.key: w.value for kind in KINDS for w in getattr(at, kind) if w.key in link.query}
    # a live control (lnviz.ui.live) is no widget: its value is the session's
    shown |= {key: at.session_state[key] for key in link.query
              if key not in shown and key in at.session_state}
    assert shown == {key: control_value(key, text) for key, text in link.query.items()}


def test_the_batchnorm_link_opens_the_explorer_on_the_two_sentences_number(questions):
    link = links_of(OUTLINE[2])[0]
    at = open_page(link.page, link.query)
    worked = " ".join(latex.value for latex in at.latex)
    assert "(-1.091)" in worked, worked  # the worked example: feature 1 of "I", pad counted
    assert questions["bn_seed"].expected[0] == pytest.approx(-1.091, abs=5e-4)


def test_the_page_links_into_every_view_it_names(page, questions):
    """A step's links open once its questions are answered (the pages show the answers)."""
    def links(at: AppTest) -> set[tuple[str, str]]:
        return {(link.proto.label, link.proto.query_string) for link in at.get("page_link")}

    assert links(page) == {("Home: a map of every page", "")}
    assert sum("appear once this step's questions are answered" in c.value
               for c in page.caption) == len(OUTLINE)
    at = open_page(PAGE, {answer_key(q): q.answer if q.is_choice else typed(q.expected)
                          for q in questions.values()})
    assert links(at) == {(link.label, urlencode(link.query))
                         for o in OUTLINE for link in links_of(o)} | {
        ("Home: a map of every page", "")}


@pytest.mark.parametrize("name", CONCEPT_PAGES)
def test_every_concept_page_links_back_to_its_step(name):
    outline = outline_for_page(name)
    assert outline is not None
    source = (ROOT / "app_pages" / f"{name}.py").read_text().rstrip().splitlines()
    assert source[-1] == f'path_link("{name}")'
    at = open_page(f"app_pages/{name}.py")
    back = [link.proto for link in at.get("page_link") if link.proto.label.startswith(
        "Part of the Start-here path")]
    assert len(back) == 1
    assert back[0].label == (f"Part of the Start-here path: step {outline.number}, "
                             f"{outline.title} — back to it")
    assert back[0].query_string == urlencode({STEP_KEY: outline.tab})


def test_the_home_page_maps_the_path_and_every_page():
    at = open_page("app_pages/home.py")
    links = [link.proto for link in at.get("page_link")]
    to_path = [link.query_string for link in links if link.label[0].isdigit()]
    assert to_path == [urlencode({STEP_KEY: o.tab}) for o in OUTLINE]
    assert {link.label for link in links} >= {"Explorer", "Performance", "LN-LSTM vs LSTM"}
    # the glossary and the sources are folded, for looking things up
    folded = {m.value for e in at.expander for m in e.markdown}
    assert [e.label for e in at.expander] == ["Glossary: the terms the pages use",
                                              "Sources: the course notes the pages quote"]
    assert sum(len(m.value.split()) for m in at.markdown if m.value not in folded) < 120
    # a map, not an essay


def test_path_page_is_the_one_the_navigation_knows():
    assert (ROOT / PATH_PAGE).exists()
    assert Path(PAGE) == Path(PATH_PAGE)


def test_no_other_step_shows_step_2s_working_before_it_is_answered():
    """All eight steps are tabs on one screen: what a learner can read before answering anything
    (every step's intro, question and options) holds neither LayerNorm("I") (step 2's answer)
    nor its σ² = 2/3, except where step 2 itself asks for them."""
    from lnviz.lessons.start_here import path_numbers, path_steps

    numbers = path_numbers()
    steps = path_steps(numbers)
    ln = numbers.ln
    working = {f"{float(ln.var[0, 0, 0]):.3g}", f"{abs(float(ln.output[0, 0, 0])):.2f}",
               f"{abs(float(ln.output[0, 0, 0])):.4f}"}
    assert working == {"0.667", "1.22", "1.2247"}
    for step in steps:
        if step.number == 2:
            continue
        shown = " ".join([step.intro] + [q.prompt for q in step.questions]
                         + [o for q in step.questions for o in q.options])
        assert not [w for w in working if w in shown], (step.number, shown)


def test_what_a_question_quotes_of_an_answer_is_its_fractional_numbers(questions):
    """The numbers a later reply would quote: step 3's −1.09 (as 1.09 and 1.0911), not step
    5's ±1, which any sentence with a 1 in it would seem to quote."""
    from lnviz.lessons.start_here import answer_quotes

    assert answer_quotes(questions["bn_seed"]) == {"1.09", "1.0911"}
    assert answer_quotes(questions["bn_two"]) == frozenset()
    assert answer_quotes(questions["why"]) == {questions["why"].answer}



def test_the_batch_of_two_reply_says_how_close_two_values_may_come(steps):
    """Step 5's reply: BatchNorm on two values gives ±1 within the check's tolerance unless
    they lie within _NEAR_PAIR (about 14·√ε, 0.044 at ε = 1e-5) of each other: torch's own
    batch_norm on a pair that far apart gives ±(1 − TOLERANCE), and nearer, less."""
    from lnviz.lessons.start_here import _NEAR_PAIR, EPS, TOLERANCE

    for gap, size in ((_NEAR_PAIR, 1 - TOLERANCE), (_NEAR_PAIR / 2, None)):
        x = torch.tensor([[0.0], [gap]], dtype=torch.float64)
        out = torch.nn.functional.batch_norm(x, None, None, training=True, eps=EPS)
        if size is None:
            assert float(out.abs().max()) < 1 - 2 * TOLERANCE
        else:
            assert float(out.abs().max()) == pytest.approx(size, abs=1e-9)
    replies = [q.right for q in steps[4].questions]
    assert any(f"within {_NEAR_PAIR:.2g} of each other, 14·√ε" in r for r in replies), replies


def test_a_wrong_answer_that_is_another_questions_answer_is_named_once_that_one_is_answered(
        questions):
    """Typing step 4's answer (the pad left out) into step 3 is wrong there, and saying so
    ("step 4's masked BatchNorm") would answer step 4: while step 4 is open the reply is the
    hint; once step 4 is answered, the slip is named. The same holds on the page, where the
    answers travel in the link."""
    bn_seed, bn_masked = questions["bn_seed"], questions["bn_masked"]
    typed_masked = typed(bn_masked.expected)
    hidden = check(bn_seed, typed_masked, {"bn_masked"})
    assert hidden.verdict == "wrong" and hidden.message == bn_seed.hint
    named = check(bn_seed, typed_masked)
    assert named.verdict == "wrong" and "step 4's masked BatchNorm" in named.message
    # every slip that is another question's answer names a question that exists
    names = set(questions)
    assert all(m.answers in names for q in questions.values() for m in q.mistakes if m.answers)
    step3 = {"sp_bn_seed": typed_masked}
    text = lambda at: " ".join(e.value for e in at.error)  # noqa: E731
    assert "step 4's masked" not in text(open_page("app_pages/start_here.py", step3))
    answered = open_page("app_pages/start_here.py",
                         {**step3, "sp_bn_masked": typed(bn_masked.expected)})
    assert "step 4's masked BatchNorm" in text(answered)


@pytest.mark.parametrize("undo", ["right", "0.67, 2"])
def test_step_7_says_why_gamma_and_beta_undo_one_token_only_whatever_the_answer(questions, undo):
    """The formula tutorial's identity claim is named, and why one γ, β cannot undo LayerNorm
    for every token, open after a right answer and after a wrong one (σ² typed for σ)."""
    answers = {answer_key(q): q.answer if q.is_choice else typed(q.expected)
               for q in questions.values()}
    if undo != "right":
        answers[answer_key(questions["undo"])] = undo
    at = open_page(PAGE, answers)
    assert questions["undo"].aside in alerts(at)["info"]


def test_step_3_names_the_articles_rounding_slip_on_its_last_line(questions):
    """The transformer article's (7 − 3.5)/2.29 = 1.52: 3.5/2.2913 is 1.5275, which rounds to
    1.53 (the pad counted), as torch's batch_norm gives."""
    x = SEED.reshape(-1, 3)[:, :1]
    top = float(F.batch_norm(x, None, None, training=True, eps=1e-5).max())
    assert top == pytest.approx(1.5275, abs=1e-4)
    reveal = questions["bn_seed"].reveal
    assert f"= 1.52, slips in the rounding: 3.5/2.2913 = {top:.4f}, so 1.53." in reveal
