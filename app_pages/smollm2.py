"""Inside a real LLM: SmolLM2-135M-Instruct, a pre-norm decoder with RMSNorm, on a prompt you
type."""

import numpy as np
import streamlit as st

from lnviz import charts
from lnviz.charts.base import bpe_piece
from lnviz.lessons.common import TOKEN_PLACES, defined, short
from lnviz.lessons.minilm import PRESETS as SENTENCES
from lnviz.lessons.minilm import analyze as analyze_sentence
from lnviz.lessons.smollm2 import (
    BREAK_TOKEN_RUNS,
    BREAKS,
    BROKEN_AS,
    PRESETS,
    REFERENCE_TEXT,
    REFERENCE_TEXTS,
    SURENESS_OPTIONS,
    SURVIVES_OPTIONS,
    SWEEP_TOKEN_RUNS,
    TOKEN_RUNS,
    Broken,
    analyze,
    break_norm,
    break_work,
    encoder_stream_rms,
    even_share,
    gentlest_answer,
    massive_answer,
    norm_label,
    removals,
    sink_link,
    sink_link_text,
    sink_summary,
    sureness_answer,
    survives_answer,
    sweep_table,
    sweep_work,
)
from lnviz.limits import MODEL_MAX_CHARS, SMOLLM2_MAX_TOKENS, current_limits
from lnviz.models import ModelFileError, minilm, smollm2
from lnviz.models.llama import rms_norm_names
from lnviz.ui import jobs
from lnviz.ui.cache import Named, cached, shared
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import code_span, counted, refusal, token_line
from lnviz.ui.pages import folded, page_title
from lnviz.ui.state import answered, model_text, prediction, settled

NAMES = rms_norm_names()


def shown(token: str) -> str:
    """A token as the figures label it ("␣Paris"), in a code span."""
    return code_span(bpe_piece(token))

page_title("app_pages/smollm2.py")
st.caption("SmolLM2-135M-Instruct, a pretrained language model (a Llama-style decoder: 30 "
           "blocks, 576 features), runs on this server from its quantized file (the blocks' "
           "matrices 4-bit, the token embedding, which the output head shares, 8-bit, the "
           "RMSNorm weights exact): every number below is that copy's. Type "
           f"a prompt (up to {SMOLLM2_MAX_TOKENS} tokens), see its next token, and open its 61 "
           "RMSNorms. The URL keeps your prompt.")
st.markdown(
    "Every RMSNorm below is computed by lnviz's own `rms_norm`, inside the model written out in "
    "plain PyTorch (`lnviz.models.smollm2()`), and the tests check each one against Hugging "
    "Face's `LlamaForCausalLM` on the same file. The model is **pre-norm**: each block "
    "normalizes only the copy its attention and its feed-forward read, x ← x + f(RMSNorm(x)), "
    "and the residual stream itself is normalized once, by the final norm before the output "
    "head. RMSNorm divides by the root mean square, √(mean x² + ε), and subtracts no mean.")

with refusal(icon=":material/block:", errors=(ValueError, ModelFileError)):
    model = shared(smollm2)


box = st.container(border=True)
with box:
    text, _ = model_text(box, "Prompt", PRESETS, key="sl_text", what="the prompt",
                         max_chars=MODEL_MAX_CHARS,
                         help=f"Any text; the page reads its first {MODEL_MAX_CHARS:,} "
                              "characters. Chat turns use <|im_start|>user … <|im_end|>.")

everyones = text in PRESETS  # the app's own prompts: for_all (lnviz.ui.cache)
with refusal(icon=":material/block:"), st.spinner("Running the model…"):
    seen = cached(analyze, Named(model, "smollm2"), text, for_all=everyones)
reference_tokens = len(model.tokenize(REFERENCE_TEXT)[0])
st.markdown(token_line([bpe_piece(t) for t in seen.tokens]))  # "␣" a space, as the figures
if any("⟨" in bpe_piece(t) for t in seen.tokens):
    st.caption("␣ is a space; ⟨E6⟩ is one byte of a character the tokenizer split across "
               "tokens (東 is three bytes, E6 9D B1), shown in hexadecimal.")

# --- 1. The next token ------------------------------------------------------------------------
st.subheader("1 · What comes next")
sure = prediction(
    "how likely does the model find its most likely next token after this prompt?",
    SURENESS_OPTIONS, key="sl_next_guess", what="its five most likely next tokens", context=text,
    help=f"The model gives every token of its {model.config.vocab_size:,} a probability; the "
         "largest is its best guess.")
if sure is not None:
    st.markdown(sureness_answer(seen.prediction, shown).reply(sure))
    show_figure(charts.smollm2.prediction_figure, seen.prediction.tokens,
                seen.prediction.probabilities, key="sl_prediction")

# --- 2. A massive activation -------------------------------------------------------------------
# Parts 2 to 5 are lazy: each costs model runs (part 3 loads all-MiniLM-L6-v2 as well), so each
# runs only while it is open.
part = folded("2 · A massive activation", "sl_part2", lazy=True)
if part.open:
    with part:
        st.markdown(f"A {defined('massive activation')}.")
        place = prediction(
            "which token holds the residual stream's largest value, at the block where it "
            "peaks?", TOKEN_PLACES, key="sl_massive_guess", what="where it sits, block by block",
            context=text,
            help="The stream is what each block's first RMSNorm reads: the embeddings plus "
                 "every sublayer's output so far.")
        if place is not None:
            st.markdown(massive_answer(seen, shown).reply(place))
            m = seen.massive
            show_figure(charts.smollm2.massive_figure, m.largest, m.median, seen.tokens,
                        m.token, m.feature, key="sl_massive")
            # the same token as the attention sink of part 5: one figure for both
            link_work = len(seen.tokens) + sum(len(model.tokenize(t)[0]) for t in PRESETS)
            with st.spinner("Running the other example texts…"):
                link = jobs.heavy_cached("the first tokens' runs", TOKEN_RUNS, link_work,
                                         sink_link, Named(model, "smollm2"), text,
                                         for_all=everyones)
            st.markdown(f"**The massive activation and the {defined('attention sink')}.** "
                        "Follow the first token through the block where the stream peaks, on "
                        "this prompt and on the other example texts:")
            show_figure(charts.smollm2.sink_link_figure, link.before, link.after, link.keys,
                        link.column, link.firsts, link.feature, link.block, link.uniform,
                        key="sl_sink_link")
            st.markdown(sink_link_text(link, shown) + " Sun et al. (2024, section 4) connect "
                        "the two in several large language models: attention concentrates on "
                        "the tokens that hold massive activations, which act as fixed biases.")

# --- 3. Pre-norm against post-norm ------------------------------------------------------------
part = folded("3 · The residual stream through depth: pre-norm against post-norm", "sl_part3",
              lazy=True)
if part.open and answered("sl_massive_guess", text) is None:
    # it follows the first token's massive activation: part 2's answer
    part.caption("This part follows the token part 2 asks about: answer part 2's question "
                 "first (open “2 · A massive activation”).")
elif part.open:
    with part:
        typical, first = seen.stream
        # without all-MiniLM-L6-v2 installed, this part says so and the rest of the page goes on
        with refusal(icon=":material/block:", errors=(ValueError, ModelFileError), stop=False):
            encoder_model = shared(minilm)
            sentence = cached(analyze_sentence, Named(encoder_model, "minilm"), SENTENCES[0],
                              for_all=True)
            encoder = encoder_stream_rms(sentence)
            show_figure(charts.smollm2.stream_figure, typical, first, encoder, key="sl_stream")
            st.markdown(
                "Pre-norm here is what the path and the Shapes page call pre-LN, with RMSNorm "
                f"in place of LayerNorm. In all-MiniLM-L6-v2 (post-LN, on “{SENTENCES[0]}”) "
                "every layer ends with a LayerNorm, so the median token's RMS stays between "
                f"{short(encoder.min())} and {short(encoder.max())}. SmolLM2's stream is never "
                "normalized on its way: each block adds to it, and the median token's RMS goes "
                f"from {short(typical[0])} at block 0 to {short(typical[-1])} where the final "
                "norm reads it"
                + (" (this prompt is one token, so the median token is the first one and the "
                   "figure's two lines are one: type a longer prompt to see them part)"
                   if len(seen.tokens) == 1 else "")
                + f". The first token's jumps to {short(first.max())} at block "
                f"{int(first.argmax())}"
                + (": the massive activation of part 2, which the last blocks shrink again. "
                   if int(seen.massive.token[seen.massive.block]) == 0 else
                   f", and the last blocks shrink it again; on this prompt part 2's largest "
                   f"value is token {int(seen.massive.token[seen.massive.block])}'s, not the "
                   "first token's. ")
                + "Every sublayer reads the stream rescaled by its norm to "
                "RMS 1 (up to ε), then multiplied by γ, however large the stream has grown.")

st.page_link("app_pages/gemma.py", icon=":material/layers:",
             label="Inside Gemma 3: a third design, with a norm after each sublayer as well")

# --- 4. Break a norm --------------------------------------------------------------------------
part = folded("4 · Break a norm, watch the prediction", "sl_part4", lazy=True)
if part.open:
    with part:
        cols = st.columns(2)
        name = cols[0].selectbox(
            "RMSNorm", NAMES, index=6, key="sl_norm", bind="query-params",
            help="Which of the 61 RMSNorms to break, by transformers' name: in each block the "
                 "one before attention (input_layernorm) and the one before the feed-forward "
                 "(post_attention_layernorm), then the final one (model.norm).")
        how = cols[1].radio("Its output is", list(BREAKS), key="sl_how", bind="query-params",
                            captions=list(BREAKS.values()),
                            help="What the norm's output becomes; everything else is "
                                 "unchanged.")

        def broken_as(how: str) -> Broken:
            """The chosen norm broken as ``how`` says, on the prompt and the reference text."""
            with st.spinner("Running the model with the norm broken…"):
                return jobs.heavy_cached(
                    "the broken norm's runs", BREAK_TOKEN_RUNS,
                    break_work(len(seen.tokens), reference_tokens), break_norm,
                    Named(model, "smollm2"), text, name, how, for_all=everyones)

        # the "which moves least" reply below ranks all four ways of breaking this norm: once
        # it was given, the other ways' question is settled and shows its reply unasked
        if settled(f"sl_stays_guess_{name}_{how}", [f"sl_gentlest_guess_{name}"], text):
            stays = ""
        else:
            stays = prediction(
                f"with {code_span(name)} ({norm_label(name)}) {BROKEN_AS[how]}, does the most "
                "likely next token"
                # part 1's figure shows the token: named once part 1's question is answered
                + (f", {shown(seen.prediction.tokens[0])}," if sure is not None else "")
                + " stay?", SURVIVES_OPTIONS,
                key=f"sl_stays_guess_{name}_{how}", what="the prediction with the norm broken",
                context=text,
                help="Everything else in the model is unchanged; the norm's output is what the "
                     "choice beside the norm says.")
        if stays is not None:
            broken = broken_as(how)
            # how likely the token was is part 1's question: its numbers wait for its answer
            answer = survives_answer(broken, shown, probabilities=sure is not None)
            st.markdown(answer.reply(stays) if stays else answer.reason)
            if sure is None:
                st.caption("The probabilities before and after, and their figure, wait for "
                           "part 1's question: how likely the model finds its next token.")
            else:
                show_figure(charts.smollm2.prediction_figure, broken.before.tokens,
                            broken.before.probabilities, broken.after.probabilities,
                            broken.after.tokens, key="sl_broken")
            st.markdown(
                f"With the norm {code_span(name)} ({norm_label(name)}) {BROKEN_AS[how]}, the "
                f"next-token distribution moves by a {defined('KL divergence')} of "
                f"{short(broken.kl)} {defined('nats')}. On "
                f"the reference text “{REFERENCE_TEXT}” the model's loss goes from "
                f"{short(broken.loss_before, 3)} to {short(broken.loss_after, 3)} nats per token."
                + (" It went down: on this text the replacement does better than the norm "
                   "it stands in for. One text cannot say whether that holds for text in "
                   f"general; the sweep below measures it on {len(REFERENCE_TEXTS)} reference "
                   "texts." if broken.loss_after < broken.loss_before else ""))
            if how == "fitted DyT":
                st.page_link("app_pages/beyond.py", icon=":material/trending_flat:",
                             label="Beyond LayerNorm: where DyT's curve comes from, fitted to "
                                   "MiniLM's LayerNorms value by value")

            gentlest = prediction(
                f"of the four replacements of {code_span(name)}, which moves the prompt's "
                "next-token distribution least?", list(BREAKS),
                key=f"sl_gentlest_guess_{name}", what="all four side by side", context=text,
                help="Each is run on the prompt and on the reference text; the measure is the "
                     "KL divergence of the next-token distribution from the model's own.")
            if gentlest is not None:
                ladder = {other: broken if other == how else broken_as(other)
                          for other in BREAKS}
                # whether the top token stays is each way's own question: told where answered
                # (the others show it, unasked, once this reply has been given)
                kept_shown = [other for other in BREAKS if other == how or answered(
                    f"sl_stays_guess_{name}_{other}", text) is not None]
                st.markdown(gentlest_answer(ladder, kept_shown).reply(gentlest))
        references = sum(len(model.tokenize(t)[0]) for t in REFERENCE_TEXTS)
        work = sweep_work(len(seen.tokens), references, len(NAMES))
        about = jobs.estimate_s(SWEEP_TOKEN_RUNS, work)
        cap = current_limits().sweep_tokens
        st.markdown(
            f"**Which norms can go?** Break each of the {len(NAMES)} in turn as chosen above "
            f"({BROKEN_AS[how]}): {(1 + len(REFERENCE_TEXTS)) * (len(NAMES) + 1)} runs of the "
            f"model, on the prompt's {counted(len(seen.tokens), 'token')} and on "
            f"{len(REFERENCE_TEXTS)} reference texts' {references}"
            + (f", about {jobs.duration(about)} at the pace of this server's last sweep."
               if about is not None else
               ", how long it takes depends on the prompt's length.")
            + " Run it for each way of breaking a norm to set them side by side.")
        too_long = len(seen.tokens) > cap
        if too_long:
            st.info(f"On this shared server the sweep takes prompts of up to {cap} tokens; this "
                    f"one has {len(seen.tokens)}. Shorten the prompt to run it (the rest of "
                    f"the page reads up to {SMOLLM2_MAX_TOKENS}).", icon=":material/block:")
        # every sweep this session ran on this prompt, by how it broke the norms
        swept = {k: v for k, v in st.session_state.get("sl_removals", {}).items()
                 if k[0] == text}
        if st.button(f"Break each norm in turn: {how}", key="sl_remove_all",
                     disabled=too_long,
                     help="Runs the prompt and the reference texts once per norm, with that "
                          "norm broken as chosen above. On a shared server it waits its turn "
                          "behind other learners' heavy work."):
            note, bar = st.empty(), st.empty()
            with jobs.heavy("the norm sweep",
                            lambda line: note.info(line, icon=":material/hourglass_top:"),
                            kind=SWEEP_TOKEN_RUNS, units=work):
                note.empty()
                swept[text, how] = removals(
                    model, text, how=how,
                    progress=lambda f, m: bar.progress(min(f, 1.0), text=m))
                st.session_state["sl_removals"] = swept
            bar.empty()
        gone = swept.get((text, how))
        if stays is None and swept:  # a sweep answers the question above for every norm
            st.caption("The sweeps you ran on this prompt show once the question above is "
                       "answered: they answer it for every norm.")
            swept, gone = {}, None
        if gone is not None:
            show_figure(charts.smollm2.removals_figure,
                        [f"{k}: {norm_label(n)}" for k, n in enumerate(gone.names)], gone.loss,
                        gone.loss_before, gone.same_top, BROKEN_AS[how], key="sl_removals")
            worst = gone.worst(1)[0]
            low, high = gone.loss[worst].min(), gone.loss[worst].max()
            st.markdown(
                f"With one norm {BROKEN_AS[how]}, the prompt's most likely next token stays in "
                f"{int(gone.same_top.sum())} of {len(gone.names)} cases, and the reference "
                "texts' mean loss (over the "
                f"{len(REFERENCE_TEXTS)}: {short(gone.loss_before.mean(), 3)} with every norm in "
                f"place) is at most 10% worse in {gone.at_most_worse(0.1)} of the "
                f"{len(gone.names)}. The "
                f"costliest is {code_span(gone.names[worst])} ({norm_label(gone.names[worst])}):"
                f" mean loss {short(gone.mean_loss[worst], 3)}, from {short(low, 3)} to "
                f"{short(high, 3)} over the {len(REFERENCE_TEXTS)} texts.")
        if len(swept) > 1 or (swept and gone is None):
            st.dataframe(sweep_table(list(swept.values())), hide_index=True,
                         key="sl_sweeps")

# --- 5. Attention sinks -----------------------------------------------------------------------
part = folded("5 · Where attention goes: attention sinks", "sl_part5", lazy=True)
if part.open and answered("sl_massive_guess", text) is None:
    # it names the token that draws the attention, which part 2 asks about
    part.caption("This part names the token part 2 asks about: answer part 2's question first "
                 "(open “2 · A massive activation”).")
elif part.open:
    with part:
        shares = seen.sinks
        if np.isnan(shares).all():
            st.info("A one-token prompt has no token after the first to look at it: type a "
                    "longer prompt.", icon=":material/info:")
        else:
            uniform = even_share(len(seen.tokens))
            show_figure(charts.smollm2.sink_figure, shares, uniform, key="sl_sinks")
            st.markdown(f"Is the first token an {defined('attention sink')}? "
                        + sink_summary(shares, len(seen.tokens), shown(seen.tokens[0])))
