"""Padding and sequences: how pad tokens drag BatchNorm's statistics, masked BatchNorm as the
repair, and why LayerNorm over each token's features does not care (the transformer
article)."""

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lnviz import charts
from lnviz.batch import Batch
from lnviz.charts.base import grid_labels
from lnviz.data import get_preset
from lnviz.lessons.common import short, worked_example_latex
from lnviz.lessons.padding import (
    PAD_MEAN_OPTIONS,
    FeatureStats,
    PaddedRecipe,
    PaddingSweep,
    PadPull,
    feature_stats,
    pad_mean_answer,
    pad_pull,
    pad_token_steps,
    padding_outputs,
    padding_snippet,
    padding_sweep,
    sigma_path,
)
from lnviz.limits import PADDING_MAX_D_MODEL, PADDING_MAX_LENGTH, PADDING_MAX_SEQUENCES
from lnviz.terms import Layout, NormKind
from lnviz.ui.cache import cached
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import refusal
from lnviz.ui.pages import page_title
from lnviz.ui.params import eps_slider
from lnviz.ui.source import PaddedControls, padded_sequences
from lnviz.ui.state import answered, current_settings, keep_in_range, prediction


def count(k: int, noun: str) -> str:
    """"1 sequence", "3 sequences"."""
    return f"{k} {noun}" + ("" if k == 1 else "s")


#: This page draws every position of every sequence, so its batches stay small.
PADDED = PaddedControls(
    sequences="pd_bs", padded_length="pd_len", d_model="pd_d", pad_value="pd_pad",
    lengths="pd_lengths", max_sequences=PADDING_MAX_SEQUENCES, max_padded_length=PADDING_MAX_LENGTH,
    max_d_model=PADDING_MAX_D_MODEL, max_pad=100.0, pad_step=0.5, sliders=True)

settings = current_settings()
_ARTICLE = get_preset("padded_tokens")
#: The transformer article's batch: two sentences, the shorter padded with one zero token.
ARTICLE_BATCH = Batch(_ARTICLE.values, Layout.NLC, _ARTICLE.mask, _ARTICLE.labels)


def _article_sentence(pull: PadPull) -> str:
    """The article's arithmetic on feature 0, every number from ``pull``."""
    word = _ARTICLE.labels[0]
    return (f" In the transformer article the first feature's real values have mean "
            f"{short(pull.mean_real)} and σ = {short(pull.std_real)}; the one zero pad pulls the "
            f"mean to {short(pull.total)}/{pull.positions} = {short(pull.mean_with_pad)} and "
            f"widens σ to √{short(pull.var_with_pad)} ≈ {short(pull.std_with_pad)}, so the word "
            f"“{word}” is normalized to ({short(pull.value)} − {short(pull.mean_with_pad)})/"
            f"{short(pull.std_with_pad)} ≈ {short(pull.x_hat_with_pad)} instead of "
            f"({short(pull.value)} − {short(pull.mean_real)})/{short(pull.std_real)} = "
            f"{short(pull.x_hat_real)}.")


page_title("app_pages/padding.py")
st.caption("Sentences come in different lengths; a batch needs one length. The URL keeps your "
           "settings.")
st.markdown(
    "To stack sentences of unequal length into one tensor, the short ones are filled up with "
    "**pad tokens** — placeholders, usually all zeros, that carry no meaning. A mask records "
    "which positions are real. **BatchNorm** pools every position of a feature into its μ and "
    "σ, so unless it is told about the mask the pads are averaged in like real words. "
    "**LayerNorm** as transformers use it (over the last dim, each token's features) looks at "
    "one token at a time, so a real token cannot notice the pads around it. Normalizing over "
    "more dims changes that: LayerNorm over (sequence, features) or InstanceNorm over the "
    "sequence pools every position of a sentence, pads included, and neither takes a mask."
)
st.latex(r"\mu_c^{\text{BN}} = \frac{\sum_{t} m_t\,x_{t,c}}{\sum_t m_t}\quad"
         r"(m_t = 1 \text{ for a real token, } 0 \text{ for a pad}) \qquad "
         r"\mu_t^{\text{LN}} = \frac{1}{C}\sum_{c} x_{t,c}")

# --- The batch --------------------------------------------------------------------------------
with st.container(border=True):
    source = st.segmented_control(
        "Batch", ["Two sentences", "Generated"], default="Two sentences", required=True,
        key="pd_src",
        bind="query-params",
        help="The transformer article's batch: “I love deep learning” and “Transformers are "
             "powerful” plus one pad, "
             "three features each. Generated: random sequences padded to a common length.",
    )
    with refusal(icon=":material/block:"):
        if source == "Two sentences":
            st.caption(_ARTICLE.description)
            batch = ARTICLE_BATCH
            recipe, pad_value = None, 0.0
        else:
            batch, recipe = padded_sequences(settings.seed, PADDED)
            pad_value = recipe.pad_value
        stats = cached(feature_stats, batch, settings.device, settings.dtype)
        outputs = cached(padding_outputs, batch, settings.device, settings.dtype)
        sweep = cached(padding_sweep, batch, float(pad_value), device=settings.device,
                       dtype=settings.dtype)

n, length, d = batch.values.shape
padding = ~batch.mask.reshape(-1)
st.markdown(f"**{count(n, 'sequence')} × {count(length, 'position')} × {count(d, 'feature')}**, "
            f"{int(padding.sum())} of {count(n * length, 'position')} padding "
            f"({stats.pad_fraction:.1%}); {count(stats.real_tokens, 'real token')}.")
# the two BatchNorm panels side by side show where the pads put μ, section 1's question: they
# join the figure once it is answered
# a batch without pads has nothing to ask: both BatchNorms pool the same values
has_pads = not batch.mask.all()
asking = (stats.counted_ok and stats.masked_ok and has_pads and answered("pd_guess") is None)
if asking:
    outputs = {title: grid for title, grid in outputs.items() if NormKind.BATCH not in title}
show_figure(charts.padding.tokens_figure,
            [(title, grid.reshape(n * length, d)) for title, grid in outputs.items()], padding,
            grid_labels(batch.values.shape, Layout.NLC, batch.row_labels)[0], key="pd_tokens")
st.caption("Each row is one position, each column a feature; a grey veil marks the pads. The "
           "input has its own colour scale, "
           + ("the outputs share one." if len(outputs) > 2 else "the output another.")
           # the shift's direction is section 1's question: pointed at once it is answered
           + (" BatchNorm's two panels, with the pads counted and masked, join once section "
              "1's question is answered." if asking else
              " Compare the real rows of the two BatchNorm panels: counting the pads shifts "
              "every one of them." if stats.counted_ok and stats.masked_ok
              and not batch.mask.all() else
              " This batch has no pad: the two BatchNorm panels are the same."
              if stats.counted_ok and stats.masked_ok else ""))

# Training-mode BatchNorm estimates each feature's σ from what it pools, and torch refuses a
# single value; masked BatchNorm pools the real tokens alone.
too_few = (
    "" if stats.masked_ok else
    f"**Masked BatchNorm needs at least 2 real tokens**: it takes each feature's μ and σ over "
    f"the real tokens alone, and this batch has {count(stats.real_tokens, 'real token')}. One "
    "value has no spread to estimate, and BatchNorm in training mode (torch's too) refuses it. "
    + ("BatchNorm with the pads counted still runs: it pools all "
       f"{count(stats.positions, 'position')}, the pads with the real token. "
       if stats.counted_ok else
       "BatchNorm with the pads counted has nothing more to pool: this batch has a single "
       "position. ")
    + "LayerNorm works token by token and is unaffected. Type lengths with at least 2 real "
      "tokens in all (e.g. 2, or 1, 1) to compare the BatchNorms.")
if too_few:
    st.warning(too_few, icon=":material/warning:")

# --- BatchNorm's statistics -------------------------------------------------------------------
st.subheader("1 · BatchNorm's μ and σ, with and without the pads")
# The question, where the real tokens have a μ of their own: the rest of this section and the
# next wait for its answer (both show it), and so does the "Try this" (its numbers are it)
guess = None
if not stats.counted_ok:
    st.info("With a single position there are no BatchNorm statistics to show: see the note "
            "above.", icon=":material/info:")
elif not has_pads:
    st.info("This batch has no pads, so BatchNorm pools the same values with the mask or "
            "without: the two μ and σ below are one. Type shorter lengths above to put pads "
            "in the batch, and this section asks where they move μ.", icon=":material/info:")
elif stats.masked_ok:
    guess = prediction(
        "counted with the pads, where does BatchNorm's μ of feature 0 land, against its μ over "
        "the real tokens alone?", PAD_MEAN_OPTIONS, key="pd_guess",
        what="both μ and σ, and what more padding does",
        help="Feature 0's μ, taken over the batch's positions twice: once with the pad "
             "positions counted, once over the real tokens alone (the mask).")
    if guess is not None:
        st.markdown(pad_mean_answer(batch, stats).reply(guess))
answered = guess is not None or not stats.masked_ok or not has_pads
if stats.counted_ok and answered:
    show_figure(charts.padding.feature_stats_figure, stats.mean_with_pad, stats.mean_masked,
                stats.std_with_pad, stats.std_masked, key="pd_stats")
    st.dataframe(stats.table(), hide_index=True, key="pd_stats_table")
    st.markdown(
        f"Feature 0 with the pads: μ = **{stats.mean_with_pad[0]:.4g}**, σ = "
        f"**{stats.std_with_pad[0]:.3g}**"
        + (f"; real tokens only: μ = **{stats.mean_masked[0]:.4g}**, σ = "
           f"**{stats.std_masked[0]:.3g}**." if stats.masked_ok else
           "; real tokens only: none — masked BatchNorm needs at least 2 real tokens.")
        + (_article_sentence(cached(pad_pull, batch, stats)) if source == "Two sentences" else "")
    )

# --- The sweep --------------------------------------------------------------------------------
# A fragment: the Feature control reruns this section alone.
@st.fragment
def sweep_section(stats: FeatureStats, sweep: PaddingSweep, d: int, pad_value: float) -> None:
    st.subheader("2 · More padding, more drift")
    st.markdown(
        "Keep this batch's real tokens and put more and more pads beside them. BatchNorm's mean "
        "slides toward the pad value; its σ widens over the first pads if the pad value lies "
        "far enough from the real tokens' mean (more than one σ: √((R + 1)/R)·σ for R real "
        "tokens, for the first pad to widen it), and shrinks once the pads dominate; every "
        "real token's "
        "output moves. Masked BatchNorm stays where it was, up to rounding; LayerNorm, bit for "
        "bit."
        if stats.masked_ok else
        "Keep this batch's single real token and put more and more pads beside it. BatchNorm's "
        "mean (from one pad on) slides toward the pad value. With one real token there is no "
        "BatchNorm without pads to measure a drift against, and no masked BatchNorm, so the last "
        "panel shows LayerNorm alone: it stays exactly where it was."
    )
    keep_in_range("pd_feat", range(d))
    feature = st.columns(4)[0].selectbox(
        "Feature", list(range(d)), key="pd_feat", bind="query-params",
        help="Which feature's μ and σ the first two panels follow.")
    show_figure(charts.padding.share_figure,
                sweep.fraction, sweep.mean_with_pad[:, feature], sweep.mean_masked[:, feature],
                sweep.std_with_pad[:, feature], sweep.std_masked[:, feature], sweep.drift_with_pad,
                sweep.drift_masked, sweep.drift_layer_norm, current=stats.pad_fraction,
                feature=feature, key="pd_sweep")
    path = sigma_path(sweep, feature, pad_value)
    if path:
        st.caption(path)
    moved = float(sweep.drift_layer_norm.max())
    tried = f"{len(sweep.pads)} amounts of padding (up to {int(sweep.pads.max())} pads)"
    if moved == 0.0:
        st.success(f"LayerNorm: across {tried}, the real tokens' outputs did not move at all — "
                   "identical, bit for bit.", icon=":material/check_circle:")
    else:
        st.warning(f"LayerNorm: across {tried}, the real tokens' outputs moved by at most "
                   f"{moved:.3g}.", icon=":material/warning:")
    st.caption("The dotted line marks this batch's own padded share."
               + (" Masked BatchNorm is the repair for BatchNorm: with the pads left out of the "
                  "sums, its μ and σ are those of the real tokens however much padding there is."
                  if stats.masked_ok else ""))


if answered:
    sweep_section(stats, sweep, d, float(pad_value))

# --- LayerNorm on the pad token ---------------------------------------------------------------
# A fragment, like section 2: ε, γ and β rerun this section and the PyTorch code at the end
# alone. It is called last, once the code's container exists.
pad_box = st.container()


@st.fragment
def pad_token_section(box: DeltaGenerator, code: DeltaGenerator, batch: Batch,
                      recipe: PaddedRecipe | None, device: str, dtype: str) -> None:
    with box:
        st.subheader("3 · What LayerNorm does to the pad token itself")
        st.markdown(
            "A pad token is a flat row: all its features are equal, so its mean is the pad value "
            "and its variance is 0. Then x − μ = 0 and x̂ = 0/√ε, which for any ε > 0 is 0: the "
            "output is **β**, whatever γ is. What does ε = 0 make of it? Set ε to 0 below and "
            "look at the pad token's row. (For a zero pad this is exact; for another pad value "
            "in low precision, rounding can leave μ a hair off the pad value, and a very small ε "
            "magnifies that hair.)"
        )
        cols = st.columns(3)
        eps = eps_slider(
            cols[0], key="pd_eps",
            help="Added to σ² before the square root. Try 0 and look at the pad token's row.")
        gamma = cols[1].slider("γ (scale)", -3.0, 3.0, 1.0, 0.1, key="pd_gamma",
                               bind="query-params",
                               help="Multiplies x̂, which is 0 for the pad at ε > 0, so γ changes "
                                    "nothing there.")
        beta = cols[2].slider("β (shift)", -3.0, 3.0, 0.5, 0.1, key="pd_beta",
                              bind="query-params",
                              help="Added after scaling: the pad token's whole output.")
        steps = pad_token_steps(batch, eps, gamma, beta, device, dtype)
        if steps is None:
            st.info("This batch has no padding: every sequence is full length. Type shorter "
                    "lengths above to get pad tokens.", icon=":material/info:")
        else:
            show_figure(charts.padding.pad_row_figure, steps["y"].to_numpy(), beta,
                        key="pd_pad_row")
            st.latex(worked_example_latex(steps.iloc[0], eps))
            st.dataframe(steps, hide_index=True, key="pd_pad_steps")
            if steps["y"].isna().any():
                st.warning("With ε = 0 the pad token's σ² + ε is 0, so x̂ = 0/0 = NaN — and the "
                           "NaN would flow into everything computed from it. This is why ε exists.",
                           icon=":material/warning:")
    code.code(padding_snippet(batch, eps, gamma, beta, recipe), language="python")


article = cached(pad_pull, ARTICLE_BATCH, cached(feature_stats, ARTICLE_BATCH))
if answered:
    st.info(
        "**Try this.** "
        # the article's numbers are the two sentences' bars, masked ones included
        + ("Compare the “pads counted” and “masked” bars for feature 0 with the transformer "
           f"article's numbers (μ {short(article.mean_with_pad)}, σ "
           f"{short(article.std_with_pad)} with the pad against {short(article.mean_real)} and "
           f"{short(article.std_real)} without). Then choose *Generated*, type"
           if source == "Two sentences" and stats.masked_ok else "On *Generated*, type")
        + " lengths like 6, 1, 1 "
        "and watch the padded share jump and BatchNorm's statistics slide, while LayerNorm's "
        "drift stays at 0. Finally set ε to 0 and see the pad token's LayerNorm output turn "
        "into NaN.", icon=":material/science:")

st.subheader("The same in PyTorch")
pad_token_section(pad_box, st.empty(), batch, recipe, settings.device, settings.dtype)

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("padding")
