"""Inside a real transformer: type a sentence into all-MiniLM-L6-v2 and open its 13 LayerNorms."""

from functools import partial

import streamlit as st

from lnviz import charts
from lnviz.lessons.common import TOKEN_PLACES, defined
from lnviz.lessons.minilm import (
    MIN_ORDINARY,
    PRESETS,
    TransformerRun,
    ablation,
    ablation_text,
    across_sentences,
    across_text,
    analyze,
    capture_bytes,
    control_feature,
    explorer_batch,
    first_word_run,
    first_word_text,
    int8_errors,
    int8_input_text,
    int8_intro,
    int8_text,
    layer_label,
    layer_text,
    layer_view,
    massive_text,
    outlier_text,
    pair_similarities,
    peak_answer,
    sink_text,
    token_lead,
    truncation_note,
)
from lnviz.limits import MINILM_MAX_DRAWN_TOKENS
from lnviz.models import ModelFileError, minilm
from lnviz.models.bert import MiniLM, layer_norm_names
from lnviz.ui.cache import Named, cached, shared
from lnviz.ui.downloads import download_button
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import refusal, token_line
from lnviz.ui.pages import page_title, title_of
from lnviz.ui.source import send_batch_to_explorer
from lnviz.ui.state import minilm_sentence_and_layer, prediction, settled

TITLE = title_of("app_pages/minilm.py")
NAMES = layer_norm_names()

page_title("app_pages/minilm.py")
st.caption("all-MiniLM-L6-v2, a pretrained sentence encoder (BERT, 6 layers, 384 features), "
           "runs on this server: type a sentence and open any of its 13 LayerNorms. The URL "
           "keeps your sentence.")
st.markdown(
    "Every LayerNorm below is computed by lnviz's own `layer_norm`, inside the model written "
    "out in plain PyTorch (`lnviz.models.minilm()`), and the tests check each one against "
    "Hugging Face's `BertModel` on the same weights. The model is **post-LN**: each layer adds "
    "attention's output to its input and normalizes, then adds the feed-forward's output and "
    "normalizes again, so the 13 LayerNorms are the embeddings' one and two per layer.")

with refusal(icon=":material/block:", errors=(ValueError, ModelFileError)):
    model = shared(minilm)


# --- Controls ---------------------------------------------------------------------------------
text, chosen = minilm_sentence_and_layer("tf_text", "tf_ln", "open")
name = NAMES[chosen]
everyones = text in PRESETS  # the app's own sentences: for_all (lnviz.ui.cache)

with refusal(icon=":material/block:"), st.spinner("Running the model…"):
    run = cached(analyze, Named(model, "minilm"), text, for_all=everyones)
    view = cached(layer_view, Named(run, ("tf", text)), name, for_all=everyones)
note = truncation_note(run)
if note:
    st.warning(note, icon=":material/content_cut:")
st.markdown(token_line(run.tokens))

# --- One LayerNorm ----------------------------------------------------------------------------
st.subheader(f"1 · LayerNorm {chosen}: {layer_label(name)}")
st.caption(f"`{name}`, as transformers' BertModel names it.")
massive = run.massive
# Asked for the first LayerNorm the learner looks at: its answer opens all 13 at a glance
# (section 2), which answers the question for the others, so they are not asked again.
if settled(f"tf_guess_{chosen}", (f"tf_guess_{k}" for k in range(len(NAMES)) if k != chosen),
           text):
    peak = ""  # seen: the sections below show
    st.markdown(peak_answer(run, name).reason)
else:
    peak = prediction(
        f"in this LayerNorm's input, {len(run.tokens)} tokens × 384 features, which token "
        "holds the largest |x|?", TOKEN_PLACES, key=f"tf_guess_{chosen}", context=text,
        what="this LayerNorm, all 13 at a glance and the largest values",
        help="The first token is [CLS] and the last [SEP], which the tokenizer adds around the "
             "text's word pieces.")
    if peak is not None:
        st.markdown(peak_answer(run, name).reply(peak))
if peak is not None:
    show_figure(charts.minilm.ln_heatmaps, run.tokens[:view.drawn], view.input, view.output,
                view.color_limit, layer_label(name), key="tf_heat")
    st.caption("Each row is a token, each column one of the 384 features. The input's colours end "
               f"at ±{view.color_limit:.3g} (the 99.5th percentile of |x|): larger values show the "
               "end colour; hover for the true numbers."
               + (f" Only the first {MINILM_MAX_DRAWN_TOKENS} of {len(run.tokens)} tokens are "
                  "drawn; the statistics below use all of them."
                  if view.drawn < len(run.tokens) else ""))
    st.markdown(layer_text(run, view))
    show_figure(charts.minilm.token_stats, run.tokens, view.mean, view.std, view.peak_in,
                view.peak_out, key="tf_stats")
    cols = st.columns(2)
    if cols[0].button("Open this input in the Explorer", icon=":material/biotech:", key="tf_open",
                      help="The Explorer puts these activations through any of the five norms, "
                           "with its own ε, γ and β."):
        send_batch_to_explorer(explorer_batch(run, name), (text, name), TITLE)
    download_button(cols[1], "Download the run as a capture file",
                    partial(capture_bytes, run), "minilm_capture.safetensors",
                    values=2 * 13 * len(run.tokens) * 384,
                    help="All 13 LayerNorms' inputs, outputs, γ and β as a .safetensors "
                         "capture (lnviz.capture's format), which lnviz's read_capture "
                         "and the app open.")

    # --- All layers -------------------------------------------------------------------------------
    st.subheader("2 · All 13 LayerNorms at a glance")
    show_figure(charts.minilm.layers_overview, [layer_label(n) for n in NAMES], run.peak,
                run.median, run.first_share, key="tf_overview")
    st.page_link("app_pages/beyond.py", icon=":material/trending_flat:",
                 label="Beyond LayerNorm: the same 13 LayerNorms plotted value by value — do "
                       "they bend like tanh, as Dynamic Tanh assumes? — and replaced by fitted "
                       "curves",
                 query_params={"by_text": text} if len(text) <= 500 else None)

    # --- Massive activations ----------------------------------------------------------------------
    st.subheader("3 · One number hundreds of times the rest")
    st.caption("Massive activations: Sun et al. 2024, “Massive Activations in Large Language "
               "Models”.")
    st.markdown(f"A {defined('massive activation')}. " + massive_text(run))
    show_figure(charts.minilm.massive_figure, massive.per_layer, massive.per_layer_median,
                massive.feature, run.tokens[massive.token], key="tf_massive")
    with st.spinner("Running the examples…"):
        across = cached(across_sentences, Named(model, "minilm"), massive.feature,
                        for_all=everyones)  # the feature where a typed sentence peaks
        first_word = cached(first_word_run, Named(model, "minilm"), text, for_all=everyones)
    st.markdown(across_text(across, massive.feature) + " "
                + first_word_text(first_word, massive.feature))
    st.dataframe(across, hide_index=True, key="tf_across")

# --- Outlier features -------------------------------------------------------------------------
if peak is not None:  # sections 4 to 7 name the first token too: after the answer
    st.subheader("4 · A feature large in every token, and γ's part in it")
    st.caption("Outlier features: Kovaleva et al. 2021, “BERT Busters: Outlier Dimensions that "
               "Disrupt Transformers”.")
    st.markdown(outlier_text(run))
    if run.outliers.ordinary >= MIN_ORDINARY:  # a median over too few tokens says nothing
        show_figure(charts.minilm.outlier_figure, [layer_label(n) for n in NAMES],
                    run.outliers.median, run.outliers.typical, view.gamma, run.outliers.feature,
                    massive.feature, layer_label(name), key="tf_outliers")

# --- Attention sink ---------------------------------------------------------------------------
# Sections 5 and 6 are fragments: their controls rerun that section alone, not the model's run.
@st.fragment
def attention_section(run: TransformerRun) -> None:
    st.subheader("5 · Where attention goes: the first token as a sink")
    st.caption("Attention sinks: Xiao et al. 2024, “Efficient Streaming Language Models with "
               "Attention Sinks”.")
    st.markdown(f"An {defined('attention sink')}. " + sink_text(run))
    layer = st.select_slider("Attention of layer", list(range(len(run.sink.share))), value=2,
                             key="tf_att", bind="query-params",
                             help="Which layer's attention map to draw, averaged over its heads.")
    show_figure(charts.minilm.attention_figure, run.sink.share, run.sink.uniform,
                run.sink.mean_map[layer][:MINILM_MAX_DRAWN_TOKENS, :MINILM_MAX_DRAWN_TOKENS],
                run.tokens, layer,
                key="tf_attention")


if peak is not None:
    attention_section(run)

# --- Ablation ---------------------------------------------------------------------------------
@st.fragment
def ablation_section(model: MiniLM, text: str, feature_default: int) -> None:
    st.subheader("6 · Remove one feature from every LayerNorm")
    st.markdown("Set γ and β of one feature to 0 in all 13 LayerNorms: that feature then leaves "
                "every LayerNorm as 0. Compare the sentence embedding with the original, and with "
                "the same done to a control feature (the one whose |γ|, averaged over the 13 "
                "LayerNorms, is the median of the 384; the next above it when you remove that "
                "one).")
    feature = st.number_input("Feature to remove", 0, 383, feature_default, key="tf_feature",
                              bind="query-params",
                              help="γ and β of this feature are set to 0 in every LayerNorm.")
    control = control_feature(model, int(feature))
    with st.spinner("Running the ablation…"):
        result = cached(ablation, Named(model, "minilm"), text, int(feature), control,
                        for_all=everyones)
        pairs = cached(pair_similarities, Named(model, "minilm"), int(feature), control,
                       for_all=True)
    st.markdown(ablation_text(result, pairs))
    show_figure(charts.minilm.ablation_figure, result.feature, result.control, result.cosine,
                result.control_cosine, key="tf_ablation")
    st.dataframe(pairs, hide_index=True, key="tf_pairs")


if peak is not None:
    ablation_section(model, text, massive.feature)

# --- int8 -------------------------------------------------------------------------------------
if peak is not None:
    st.subheader("7 · Why it matters for int8")
    st.caption("Dettmers et al. 2022, “LLM.int8(): 8-bit Matrix Multiplication for Transformers at "
               "Scale”.")
    # what the next layer's matmuls read: the LayerNorm's output (post-LN), not its input
    table, outliers = cached(int8_errors, run.records[chosen].output[0].numpy(),
                             for_all=everyones)
    inputs, _ = cached(int8_errors, run.records[chosen].input[0].numpy(), for_all=everyones)
    normalized, _ = cached(int8_errors, run.records[chosen].replay().x_hat[0].numpy(),
                           for_all=everyones)
    ratio = run.peak[chosen] / run.median[chosen]  # the input's largest |x| over its median
    st.markdown(f"{int8_intro(NAMES, chosen)} Rounded to int8 with {defined('absmax')}, "
                "three ways: " + int8_text(table, outliers)
                + int8_input_text(inputs, table, ratio, token_lead(run, name), normalized))
    show_figure(charts.minilm.int8_figure, table["int8 scheme"].tolist(),
                table["values turned to 0"].to_numpy(),
                table["relative error (tokens after the first)"].to_numpy(), key="tf_int8")
    st.dataframe(table, hide_index=True, key="tf_int8_table")
st.info("**Try this.** Pick another example or type your own sentence and watch section 3: the "
        "numbers are recomputed for every sentence. Switch the LayerNorm to one after "
        "attention and look at γ in section 4. In section 6, remove the feature named in "
        "section 4 instead.", icon=":material/science:")
