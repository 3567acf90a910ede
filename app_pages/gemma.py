"""Inside Gemma 3: sandwich norms, QK-norm and 1 + γ in Gemma 3 270M, on a prompt you type."""

import streamlit as st

from lnviz import charts
from lnviz.charts.base import sentencepiece_piece
from lnviz.lessons.common import FROZEN_TEXT, GEMMA3, PERI_LN, REFERENCE_TEXT
from lnviz.lessons.gemma import (
    BREAK_TOKEN_RUNS,
    GROWTH_OPTIONS,
    LADDER_OPTIONS,
    OFFSET_OPTIONS,
    OFFSETS,
    PRESETS,
    QK_OPTIONS,
    SIZE_OPTIONS,
    SUBLAYERS,
    TOKEN_RUNS,
    WHERE_OPTIONS,
    analyze,
    design_streams,
    final_gamma,
    growth_answer,
    ladder,
    ladder_answer,
    ladder_table,
    ladder_work,
    offset_answer,
    offset_runs,
    post_norm_scale,
    qk_answer,
    qk_norm_removed,
    sandwich_answer,
    sandwich_caption,
    where_answer,
)
from lnviz.limits import GEMMA3_MAX_TOKENS, MODEL_MAX_CHARS, SMOLLM2_MAX_TOKENS
from lnviz.models import ModelFileError, gemma3, minilm, smollm2
from lnviz.ui import jobs
from lnviz.ui.cache import Named, cached, shared
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import code_span, refusal, token_line
from lnviz.ui.pages import folded, page_title
from lnviz.ui.state import model_text, prediction

#: The block part 1 asks about: the middle of the 18.
ASKED_BLOCK = 10


def shown(token: str) -> str:
    """A token as the page writes it ("␣Paris"), in a code span."""
    return code_span(sentencepiece_piece(token))


page_title("app_pages/gemma.py")
st.caption("Gemma 3 270M (base), a pretrained language model from Google (18 blocks, 640 "
           "features), runs on this server from its quantized file (the matrices 4- to 8-bit, "
           "the norms' weights exact): every number below is that copy's. Its weights come "
           "under the Gemma Terms of Use (ai.google.dev/gemma/terms). Type a prompt (up to "
           f"{GEMMA3_MAX_TOKENS} tokens); the URL keeps it.")
st.markdown(
    "Inside a real LLM showed a pre-norm decoder: each sublayer reads a normalized copy of the "
    "stream and adds its output back, x ← x + f(RMSNorm(x)). Gemma 3 puts a second RMSNorm "
    "*after* each sublayer, before the sum, and normalizes each attention head's queries and "
    "keys too:\n\n"
    "h = x + RMSNorm_post(attention(RMSNorm_pre(x))), &nbsp; "
    "x' = h + RMSNorm_post'(feed-forward(RMSNorm_pre'(h)))\n\n"
    "Six RMSNorms a block (input, q_norm, k_norm, post-attention, pre- and post-feed-forward) "
    "and the final one: 109, each computed here by lnviz's `rms_norm` inside the model written "
    "out in plain PyTorch (`lnviz.models.gemma3()`) and checked in the tests against Hugging "
    "Face's `Gemma3ForCausalLM` on the same file. "
    f"{GEMMA3.cited} describes these choices for the Gemma 3 family: grouped-query attention "
    "with post-norm and pre-norm, both RMSNorm, and QK-norm in place of Gemma 2's soft-capping "
    f"of the attention logits. {PERI_LN.cited} calls a norm on both sides of each sublayer "
    "Peri-LN and studies it.")

with refusal(icon=":material/block:", errors=(ValueError, ModelFileError)):
    model = shared(gemma3)

box = st.container(border=True)
with box:
    text, _ = model_text(box, "Prompt", PRESETS, key="g3_text", what="the prompt",
                         max_chars=MODEL_MAX_CHARS,
                         help=f"Any text; the page reads its first {MODEL_MAX_CHARS:,} "
                              "characters. Chat turns use <start_of_turn>user … "
                              "<end_of_turn>.")

everyones = text in PRESETS  # the app's own prompts: for_all (lnviz.ui.cache)
with refusal(icon=":material/block:"), st.spinner("Running the model…"):
    seen = cached(analyze, Named(model, "gemma3"), text, for_all=everyones)
tokens = len(seen.tokens)
st.markdown(token_line([sentencepiece_piece(t) for t in seen.tokens]))
st.caption("␣ is a space; <bos> is the token the model reads before every text. The most "
           "likely next token: " + ", ".join(f"{shown(t)} ({p:.0%})" for t, p in seen.top[:3])
           + ".")

# --- 1. The sandwich --------------------------------------------------------------------------
st.subheader("1 · A norm after each sublayer")
s = seen.sandwich
st.markdown(
    f"In block {ASKED_BLOCK} the feed-forward's raw output has an RMS of "
    f"{s.raw['feed-forward'][ASKED_BLOCK]:.3g} (the median token). Between it and the stream "
    "sits its post-norm, an RMSNorm with its own learned weights.")
size = prediction(
    f"how large is what block {ASKED_BLOCK}'s feed-forward adds to the stream (its RMS, the "
    "median token)?", SIZE_OPTIONS, key="g3_size_guess", what="each block's sizes",
    context=text, help="What is added is the post-norm's output.")
if size is not None:
    st.markdown(sandwich_answer(s, ASKED_BLOCK, eps=model.config.eps).reply(size))
    show_figure(charts.gemma.sandwich_figure, s.raw, s.added, s.gamma, key="g3_sandwich")
    st.caption(sandwich_caption(s, model.config.eps))

# --- 2. Three designs -------------------------------------------------------------------------
part = folded("2 · The stream through depth: post-LN, pre-norm and sandwich", "g3_part2",
              lazy=True)
if part.open:
    with part:
        st.markdown(
            "The same text through three real models: all-MiniLM-L6-v2 normalizes the stream "
            "after each sublayer (post-LN), SmolLM2 before each (pre-norm), Gemma 3 before and "
            "after (sandwich). The size of the median ordinary token in each stream, from the "
            "first block to the last: the first token ([CLS], <bos>, SmolLM2's first word), "
            "which carries the massive activations, is left out, and so is MiniLM's closing "
            "[SEP].")
        growth = prediction(
            "whose stream grows the most from its first block to its last?", GROWTH_OPTIONS,
            key="g3_growth_guess", what="the three streams", context=text,
            help="Growth: the last RMS divided by the first.")
        if growth is not None and size is None:  # Gemma's curve shows part 1's answer
            st.caption("Answer part 1's question first: this figure shows its answer too.")
        elif growth is not None:
            with refusal(icon=":material/block:", errors=(ValueError, ModelFileError)):
                if len(shared(smollm2).tokenize(text)[0]) > SMOLLM2_MAX_TOKENS:
                    raise ValueError(f"SmolLM2 reads this text as more than "
                                     f"{SMOLLM2_MAX_TOKENS} tokens, more than its page runs: "
                                     "shorten the prompt to compare the three")
                with st.spinner("Running all-MiniLM-L6-v2, SmolLM2 and Gemma 3…"):
                    streams = jobs.heavy_cached(
                        "the three models' runs", TOKEN_RUNS, 3 * tokens, design_streams,
                        Named(shared(minilm), "minilm"), Named(shared(smollm2), "smollm2"),
                        Named(model, "gemma3"), text, for_all=everyones)
                st.markdown(growth_answer(streams, post_norm_scale(model)).reply(growth))
                show_figure(charts.gemma.designs_figure, streams, key="g3_designs")

# --- 3. QK-norm -------------------------------------------------------------------------------
part = folded("3 · QK-norm: each head's queries and keys", "g3_part3", lazy=True)
if part.open:
    with part:
        st.markdown(
            "In every block, q_norm and k_norm divide each head's query and key (256 values "
            "each) by their RMS and multiply by a learned 1 + γ, before the rotary position "
            "embedding. An attention logit is q·k/16: with the norms, its size is set by their "
            "γs; without them, by whatever the projections make of the stream. Here both norms "
            "are replaced by the identity in all 18 blocks at once, and the largest |logit| of "
            "each block compared.")
        grows = prediction(
            "without q_norm and k_norm, in how many blocks does the largest attention logit "
            "grow?", QK_OPTIONS, key="g3_qk_guess", what="each block's largest logit",
            context=text,
            help="The largest |q·k/16| over the four heads and every pair a token may see.")
        if grows is not None:
            with st.spinner("Running the model without QK-norm…"):
                qk = jobs.heavy_cached(
                    "the runs without QK-norm", TOKEN_RUNS,
                    2 * (tokens + len(model.tokenize(REFERENCE_TEXT)[0])), qk_norm_removed,
                    Named(model, "gemma3"), text, for_all=everyones)
            st.markdown(qk_answer(qk, shown).reply(grows))
            show_figure(charts.gemma.qk_figure, qk.trained, qk.without, key="g3_qk")
            st.caption(f"The reference text: “{REFERENCE_TEXT}” Blocks 5, 11 and 17 see the "
                       "whole text; the others the last 512 tokens, which a prompt of this "
                       "page never passes.")

# --- 4. 1 + γ ---------------------------------------------------------------------------------
part = folded("4 · 1 + γ: what the file stores", "g3_part4", lazy=True)
if part.open:
    with part:
        st.markdown(
            "Gemma's RMSNorm multiplies by 1 + γ and learns γ starting from 0, so an untrained "
            "norm multiplies by 1. llama.cpp's converter writes 1 + γ into the GGUF file this "
            "page reads, and lnviz multiplies by what the file holds; transformers subtracts "
            "1 when it loads the file and adds it back in its forward. A reader that mixes the "
            "two conventions multiplies every norm by 2 + γ (the 1 added again) or by γ alone "
            "(the 1 forgotten).")
        offset = prediction(
            "with the 1 added again in all 109 norms, how much worse does the model predict "
            "a plain English sentence?", OFFSET_OPTIONS, key="g3_offset_guess",
            what="the three readers side by side", context=text,
            help="The sentence's mean loss (cross-entropy, nats per token) against the "
                 "model's own.")
        if offset is not None:
            with st.spinner("Running the model with each reading of γ…"):
                runs = jobs.heavy_cached(
                    "the runs with each reading of γ", TOKEN_RUNS,
                    len(OFFSETS) * (tokens + len(model.tokenize(REFERENCE_TEXT)[0])),
                    offset_runs, Named(model, "gemma3"), text, for_all=everyones)
            st.markdown(offset_answer(runs, shown).reply(offset))

# --- 5. The final norm's γ --------------------------------------------------------------------
part = folded("5 · The final norm's γ", "g3_part5", lazy=True)
if part.open:
    with part:
        gamma = model.weights["model.norm.weight"]
        st.markdown(
            f"The final norm, before the output head, multiplies its 640 features by 1 + γ "
            f"from {float(gamma.min()):.3g} to {float(gamma.max()):.3g}: a range of "
            f"{float(gamma.max() / gamma.min()):,.0f} times.")
        where = prediction(
            "where is the final norm's 1 + γ smallest?", WHERE_OPTIONS, key="g3_where_guess",
            what="every feature's 1 + γ against the stream", context=text,
            help="Look at the stream entering the final norm: its largest |x| per feature, "
                 "over the prompt's tokens.")
        if where is not None:
            with st.spinner("Running the model with the final γ evened out…"):
                final = jobs.heavy_cached(
                    "the runs with the final γ evened out", TOKEN_RUNS,
                    2 * tokens + 2 * len(model.tokenize(REFERENCE_TEXT)[0]), final_gamma,
                    Named(model, "gemma3"), text, for_all=everyones)
            st.markdown(where_answer(final, shown).reply(where))
            show_figure(charts.gemma.final_gamma_figure, final.gamma, final.peak,
                        [final.smallest], key="g3_final")

# --- 6. Break a norm before or after a sublayer -------------------------------------------------
part = folded("6 · Break the norm before a sublayer, or the one after", "g3_part6", lazy=True)
if part.open:
    with part:
        st.markdown(
            "Inside a real LLM breaks SmolLM2's norms four ways: removed, given one frozen RMS "
            "for every token, turned into LayerNorm with the same γ, or replaced by a Dynamic "
            "Tanh fitted to what the norm saw. Gemma has two norms around each sublayer: here "
            "both are broken, one at a time, each of the four ways.")
        cols = st.columns(2)
        block = cols[0].selectbox(
            "Block", list(range(model.config.n_layer)), index=ASKED_BLOCK, key="g3_block",
            bind="query-params", help="Which of the 18 blocks; 5, 11 and 17 see the whole "
                                      "text, the others a sliding window.")
        sublayer = cols[1].radio(
            "Sublayer", list(SUBLAYERS), key="g3_sublayer", bind="query-params",
            horizontal=True, help="The norms around it: before attention (input_layernorm) "
                                  "and after it, or before and after the feed-forward.")
        harm = prediction(
            f"which of block {block}'s two norms around its {sublayer} can be broken with "
            "less harm?", LADDER_OPTIONS,
            key=f"g3_ladder_guess_{block}_{sublayer}", what="the eight breaks", context=text,
            help="Less harm, by two measures: the next token's distribution moves less (a "
                 "smaller KL divergence, typically over the four ways of breaking it: their "
                 "geometric mean), and a reference text's loss rises less (on average over "
                 "the four). Where the two disagree, either answer is accepted.")
        if harm is not None:
            frozen_tokens = len(model.tokenize(FROZEN_TEXT)[0])
            with st.spinner("Breaking the two norms eight ways…"):
                broken = jobs.heavy_cached(
                    "the eight breaks", BREAK_TOKEN_RUNS,
                    ladder_work(tokens, len(model.tokenize(REFERENCE_TEXT)[0]), frozen_tokens),
                    ladder, Named(model, "gemma3"), text, int(block), sublayer,
                    for_all=everyones)
            st.markdown(ladder_answer(broken).reply(harm))
            st.dataframe(ladder_table(broken), hide_index=True, key="g3_ladder",
                         column_config={"KL (nats)": st.column_config.NumberColumn(
                             format="%.3g"), "reference loss (nats per token)":
                             st.column_config.NumberColumn(format="%.3f")})
            st.caption(f"A frozen RMS and the fitted DyT read what the norm saw on “"
                       f"{FROZEN_TEXT}”; the loss is on “{REFERENCE_TEXT}”.")

