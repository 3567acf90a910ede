"""Start here: the twenty-minute path through normalization, one prediction at a time."""

import streamlit as st

from lnviz import charts
from lnviz.lessons.start_here import (
    OUTLINE,
    TOLERANCE,
    answer_quotes,
    check,
    epsilon_curve,
    path_numbers,
    path_steps,
    progress,
    real_tokens,
    stack_series,
)
from lnviz.limits import START_HERE_MAX_ANSWER_CHARS
from lnviz.ui.cache import Named, cached
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import plain
from lnviz.ui.pages import page_title
from lnviz.ui.path import STEP_KEY, answer_key, links_of

ICONS = {"right": ":material/check_circle:", "wrong": ":material/cancel:",
         "invalid": ":material/edit:"}


def go_to(tab: str) -> None:
    st.session_state[STEP_KEY] = tab


page_title("app_pages/start_here.py")
st.caption("Eight short steps, about twenty minutes. Each asks you to predict a number or make "
           "a choice before it shows the answer. Your answers stay in the URL: a reload keeps "
           "them, and a copied link opens the same step.")
st.latex(r"y = \gamma \cdot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta")
top = st.container()  # progress, filled in once every answer has been read

numbers = cached(path_numbers)
steps = cached(path_steps, Named(numbers, "the transformer article"))
answers = {}
# a question's feedback may quote the answers of questions before it (steps are tabs, and a
# learner may skip ahead, or arrive by a teacher's link): what quotes an answer still open waits
open_answers: set[str] = set()
# a wrong answer can be another question's answer (the pad left out is step 4's): said so only
# once that one is answered, on any step (the answers travel in the link)
open_questions = {q.name for s in steps for q in s.questions
                  if not check(q, st.query_params.get(answer_key(q),
                                                      st.session_state.get(answer_key(q)))
                               ).answered}
#: The steps that draw a figure once their questions are answered.
FIGURE_STEPS = (2, 6, 8)
tabs = st.tabs([o.tab for o in OUTLINE], key=STEP_KEY, bind="query-params")
for tab, step in zip(tabs, steps, strict=True):
    with tab:
        outline = step.outline
        st.subheader(f"Step {step.number} of {len(steps)} · {outline.title}")
        st.caption(f"About {outline.minutes} minutes.")
        st.markdown(step.intro)
        answered = []
        for q in step.questions:
            if q.is_choice:
                value = st.radio(q.prompt, q.options, index=None, key=answer_key(q),
                                 bind="query-params",
                                 help="Pick what you expect; the feedback explains every "
                                      "choice.")
            else:
                value = st.text_input(
                    q.prompt, key=answer_key(q), bind="query-params",
                    max_chars=START_HERE_MAX_ANSWER_CHARS,
                    placeholder=q.placeholder,
                    help=f"Numbers separated by commas; two decimals are enough (the check "
                         f"allows ±{TOLERANCE}). Press Enter to check.")
            answers[q.name] = value
            feedback = check(q, value, open_questions - {q.name})
            said = " ".join([feedback.message, q.reveal, q.aside]
                            + ([q.table.to_string()] if q.table is not None else []))
            if feedback.verdict in ("right", "wrong") and any(a in said for a in open_answers):
                verdict = "Right." if feedback.verdict == "right" else "Not quite."
                (st.success if feedback.verdict == "right" else st.error)(
                    f"{verdict} Why comes once the questions before this one are answered: it "
                    "quotes their answers.", icon=ICONS[feedback.verdict])
                answered.append(feedback.answered)
                continue
            if not feedback.answered:
                open_answers |= answer_quotes(q)
            if feedback.verdict == "right":
                st.success(feedback.message, icon=ICONS["right"])
            elif feedback.verdict == "wrong":
                st.error(feedback.message, icon=ICONS["wrong"])
            elif feedback.verdict == "invalid":
                st.warning(plain(feedback.message), icon=ICONS["invalid"])
            answered.append(feedback.answered)
            if q.aside and feedback.verdict in ("right", "wrong"):
                st.info(q.aside, icon=":material/priority_high:")
            # a right answer earns the worked answer; a wrong one may ask for it, folded
            worked = (st.container() if feedback.verdict == "right" else
                      st.expander("Show the worked answer", icon=":material/visibility:")
                      if feedback.verdict == "wrong" and (q.reveal or q.table is not None)
                      else None)
            if worked is not None:
                with worked:
                    if q.reveal:
                        st.markdown(q.reveal)
                    if q.table is not None:
                        st.dataframe(q.table, hide_index=True, key=f"{answer_key(q)}_table")
        # the step's figure answers all its questions: it waits until every one is answered,
        # and for the questions before this one, whose answers its numbers may show (step 6's
        # curve levels off at step 2's x̂)
        answered = all(answered)
        drawn = answered and not open_answers
        if answered and open_answers and step.number in FIGURE_STEPS:
            st.caption("This step's figure appears once the questions before this one are "
                       "answered: it shows their answers too.")
        if drawn and step.number == 2:
            show_figure(charts.start_here.tokens_figure, *real_tokens(numbers),
                        key="sp_tokens_chart")
        elif drawn and step.number == 6:
            eps, x_hat, variance = cached(epsilon_curve)
            show_figure(charts.start_here.epsilon_figure, eps, x_hat, variance,
                        float(numbers.ln_eps_var.x_hat[-1]), key="sp_eps_chart")
        elif drawn and step.number == 8:
            show_figure(charts.shapes.depth_figure, *stack_series(numbers),
                        key="sp_depth_chart")
        st.markdown("**Go deeper**")
        if answered:  # the pages behind the links show this step's answers
            for link in links_of(outline):
                st.page_link(link.page, label=link.label, query_params=link.query,
                             icon=":material/arrow_forward:",
                             help="Opens the page on this view; the path's link at its end "
                                  "brings you back.")
        else:
            st.caption("Links to the pages that go deeper appear once this step's questions "
                       "are answered: those pages show the answers.")
        cols = st.columns(2)
        if step.number > 1:
            back = OUTLINE[step.number - 2]
            cols[0].button(f"← Step {back.tab}", key=f"sp_back_{step.number}",
                           on_click=go_to, args=(back.tab,),
                           help=f"Back to step {back.number}: {back.title}.")
        if step.number < len(steps):
            ahead = OUTLINE[step.number]
            cols[1].button(f"Step {ahead.tab} →", key=f"sp_next_{step.number}",
                           on_click=go_to, args=(ahead.tab,), type="primary",
                           help=f"On to step {ahead.number}: {ahead.title}.")
        else:
            right, total, _ = progress(steps, answers)
            cols[1].markdown(f"**End of the path: {right} of {total} checks right.**")
            cols[1].page_link("app_pages/home.py", label="Home: a map of every page",
                              icon=":material/home:", help="Every page of lnviz, with a "
                                                           "sentence on each.")

right, total, line = progress(steps, answers)
with top:
    st.progress(right / total, text=f"{right} of {total} checks right")
    st.markdown(line)
    st.caption("✓ every check of the step right · ✗ a check answered wrong · ○ still to do. "
               "The path computes in float64 on the CPU, whatever the sidebar says.")
