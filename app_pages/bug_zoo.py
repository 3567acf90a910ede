"""The bug zoo: seven hand-written LayerNorms, six with a slip from real code, checked against
torch.nn.LayerNorm on an input the learner picks."""

import streamlit as st

from lnviz import charts
from lnviz.lessons.bug_zoo import (
    INPUTS,
    OFFSETS,
    RANDOM_SHAPES,
    VARIANTS,
    ZOO_EPSILONS,
    ZooInput,
    ZooResult,
    compare,
    feedback,
    zoo_input,
    zoo_snippet,
)
from lnviz.ui.cache import cached
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import plain, refusal
from lnviz.ui.pages import page_title
from lnviz.ui.params import eps_slider
from lnviz.ui.state import current_settings

settings = current_settings()


def _uncheck() -> None:
    """A new input or ε asks for a new prediction: the answer is checked again on request."""
    st.session_state["bz_check"] = False


page_title("app_pages/bug_zoo.py")
st.markdown(
    "The formula tutorial's first exercise: implement LayerNorm and verify it against a library. "
    "Below are "
    "seven implementations; six carry a slip found in real code, some in the tutorials this "
    "app follows. Do "
    "the verifying: pick an input, read the code, say which ones give what "
    "`torch.nn.LayerNorm` gives, then check."
)

# --- 1. The input -----------------------------------------------------------------------------
st.subheader("1 · The input")
cols = st.columns([3, 2])
name = cols[0].segmented_control(
    "Input", list(INPUTS), default="I", required=True, key="bz_input", bind="query-params",
    on_change=_uncheck,
    help=" · ".join(f"{k}: {v}" for k, v in INPUTS.items()),
)
shape_name = cols[1].selectbox(
    "Random shape (seq, batch, emb)", list(RANDOM_SHAPES), key="bz_shape", bind="query-params",
    on_change=_uncheck,
    disabled=name != "random",
    help="The shape of the random input (only used by it): every choice has a batch of 2 or "
         "more.",
)
cols = st.columns(2)
offset = cols[0].select_slider(
    "Offset from zero", OFFSETS, value=0.0, format_func="{:g}".format, key="bz_offset",
    bind="query-params", on_change=_uncheck,
    help="Added to every value. LayerNorm ignores it (it subtracts the mean), but float32 "
         "rounding does not.",
)
eps = eps_slider(
    cols[1], key="bz_eps", options=ZOO_EPSILONS, on_change=_uncheck,
    help="Passed to every implementation and to torch.nn.LayerNorm. 1e-5 is torch's default.",
)
with refusal():
    zoo = cached(zoo_input, name, RANDOM_SHAPES[shape_name], offset, settings.seed)
    result = cached(compare, zoo.values, eps)
seq, batch, emb = zoo.shape
st.caption(
    f"**{name}**: {zoo.description}; (seq, batch, emb) = ({seq}, {batch}, {emb}). Always "
    "float32 on the CPU, whatever the sidebar's precision: one of the slips is a float32 slip."
)
st.dataframe(zoo.table(), height=min(35 * (len(zoo.labels) + 1) + 3, 250), key="bz_table")

# --- 2. The implementations -------------------------------------------------------------------
st.subheader("2 · Seven implementations")
st.markdown(
    "Each takes `x` of shape (seq, batch, emb) and should return "
    "`torch.nn.LayerNorm(emb, eps=eps)(x)`: a new layer, so γ = 1 and β = 0."
)
for letter, variant in VARIANTS.items():
    st.markdown(f"**{letter}**")
    st.code(variant.code, language="python", wrap_lines=True)

# --- 3. The question --------------------------------------------------------------------------
# A fragment: the prediction and the check rerun this section alone, not the input and the code.
@st.fragment
def question(zoo: ZooInput, result: ZooResult) -> None:
    st.subheader("3 · Which of these match torch?")
    picked = st.multiselect(
        "Which implementations give torch.nn.LayerNorm's output on this input?", list(VARIANTS),
        key="bz_pick", bind="query-params",
        help="Pick every letter you expect to match, within float32 rounding; more than one can. "
             "Then check.",
    )
    checked = st.toggle(
        "Check my answer", key="bz_check", bind="query-params",
        help="Runs all seven and torch.nn.LayerNorm on the input above, then says for each letter "
             "whether you were right and why, and draws the differences.",
    )
    if not checked:
        st.caption("Predict first: the differences are drawn once you check.")
    else:
        answers = feedback(result, zoo, picked)
        st.markdown(f"**{sum(a.right for a in answers)} of {len(answers)} right** on this input.")
        for answer in answers:
            box = st.success if answer.right else st.error
            box(plain(answer.text),
                icon=":material/check_circle:" if answer.right else ":material/cancel:")
        show_figure(charts.bug_zoo.diff_heatmaps, result.diffs, result.max_diffs, result.matches,
                    result.nonfinite, result.allowed, zoo.labels, key="bz_diff_chart")
        st.caption(
            "Each panel: |implementation − torch.nn.LayerNorm| per element, tokens down, features "
            "across, on one log scale (the lightest colour is 1e-08 or less; black, if any, is "
            "NaN or inf). Hover a cell for the "
            "difference allowed there: torch.testing.assert_close's float32 tolerance, wider for "
            "tokens far from zero, where float32 rounding alone moves any LayerNorm's output."
        )
        st.dataframe(result.table(), hide_index=True, key="bz_summary")
    st.info(
        "**Try this.** Predict and check on **I** first. "
        # the rest names letters that match on I: it waits for the check (in this fragment, so
        # that it follows the toggle)
        + ("Then switch to the two-sentence batch: which letters stop matching, and what does a "
           "batch of two expose? Raise ε until B fails, and move the offset to 10000 for G."
           if checked else
           "(More to try appears once you have checked: it names some of the answers.)"),
        icon="🧪")


question(zoo, result)


st.subheader("The same check in PyTorch")
st.caption("Paste the seven functions above first.")
st.code(zoo_snippet(name, RANDOM_SHAPES[shape_name], offset, settings.seed, eps),
        language="python", wrap_lines=True)
