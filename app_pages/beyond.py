"""Beyond LayerNorm: what recent models do instead, measured on the models the app ships."""

import numpy as np
import pandas as pd
import streamlit as st

from lnviz import charts
from lnviz.analysis import TRIM, tanh_fits
from lnviz.lessons.beyond import (
    CAUTION,
    CAUTION_LOSS,
    CAUTION_SIZES,
    DERF,
    DYISRU,
    DYT,
    FAN,
    HEIMERSHEIM,
    KERNEL_SHAPES,
    LINE_FITS,
    LN_FREE,
    LN_FREE_LOSS,
    MINILM_TOKEN_RUNS,
    NEIGHBOURS,
    RMSNORM,
    RMSNORM_SAVING,
    STRAIGHT_BUT_EXTREMES,
    VIT_TOP1,
    frozen_caption,
    frozen_sigma,
    kernel_savings,
    mean_shares,
    placed,
    rank_correlation,
    rms_instead,
    run_sentence,
    shape_of,
    standard_substitutions,
    substitute,
    swap_runs,
    worst_sublayer,
    yardstick,
)
from lnviz.lessons.common import Answer, defined
from lnviz.lessons.minilm import FIRST_FFN, PRESETS, layer_label
from lnviz.lessons.performance import recorded_gpu_run
from lnviz.lessons.shapes import race_findings
from lnviz.models import ModelFileError, minilm
from lnviz.models.bert import indices_after, layer_norm_names, sublayer_of
from lnviz.nn import DYT_ALPHA
from lnviz.terms import NormKind
from lnviz.train import NORM_RACE, RACE_MAX_SEEDS, RACE_TASKS, RaceConfig
from lnviz.ui import jobs
from lnviz.ui.cache import Named, cached, shared
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import counted, refusal
from lnviz.ui.pages import page_title
from lnviz.ui.race import race_panel
from lnviz.ui.state import (
    answered,
    current_settings,
    minilm_sentence_and_layer,
    prediction,
    run_stop_buttons,
    settled,
)

NAMES = layer_norm_names()
#: Session-state slot of the training race (lnviz.ui.jobs).
RACE = "by_race"
settings = current_settings()
GUESSES = ["a straight line", "an S-shaped curve", "a cloud with no shape"]

page_title("app_pages/beyond.py")
st.caption("Recent models question the LayerNorm this app is built around. This page checks "
           "their ideas on the model it ships, all-MiniLM-L6-v2, and says which claims it "
           "reproduces and which it only reports. The URL keeps your sentence.")
st.markdown(
    "One of these ideas started from a plot: a trained transformer's LayerNorm, its output "
    "against its input, value by value. Here is that plot for a real model; first, what do you "
    "expect it to look like?")

with refusal(icon=":material/block:", errors=(ValueError, ModelFileError)):
    model = shared(minilm)

text, chosen = minilm_sentence_and_layer("by_text", "by_ln", "plot")
name = NAMES[chosen]
everyones = text in PRESETS  # the app's own sentences: for_all (lnviz.ui.cache)

with refusal(icon=":material/block:"), st.spinner("Running the model and fitting…"):
    original = cached(run_sentence, Named(model, "minilm"), text, for_all=everyones)
    fits = cached(tanh_fits, Named(original, ("by", text)), for_all=everyones)
fit = fits[chosen]
#: the LayerNorms by what is left of their bend without their extremes, on this sentence
s_shaped = [k for k, f in enumerate(fits) if shape_of(f) == "S-shaped"]
slightly = [k for k, f in enumerate(fits) if shape_of(f) == "slightly bent"]
extreme_only = [k for k, f in enumerate(fits) if shape_of(f) == STRAIGHT_BUT_EXTREMES]
tokens = len(original.tokens)  # a run's work, for the server's line (lnviz.ui.jobs)
fit_width = int(original.records[chosen].input.shape[-1])

# --- 1. The shape of a LayerNorm -------------------------------------------------------------
st.subheader("1 · A LayerNorm, value by value")
# Asked for the first LayerNorm the learner looks at: its answer opens all 13 (section 2),
# which answers the question for the others, so they are not asked again.
if settled(f"by_guess_{chosen}", (f"by_guess_{k}" for k in range(len(NAMES)) if k != chosen),
           text):
    guess = ""  # seen: the sections below show, and the reply has no verdict
else:
    guess = prediction(
        f"plotted against its input, what shape do the normalized values of LayerNorm {chosen} "
        f"({layer_label(name)}) make?", GUESSES, key=f"by_guess_{chosen}", what="the plot",
        context=text,
        help="Every token's 384 values go in; the LayerNorm takes each token's mean and spread "
             "and gives x̂ = (x − μ)/√(σ² + ε). One point per value: (x, x̂).")
if guess is not None:
    shape = shape_of(fit)
    # an S flattens at both ends: values squashed at one end only make a line with a bent tip
    ends = np.sign(fit.x[fit.extreme])
    one_end = shape == STRAIGHT_BUT_EXTREMES and not (ends.min() < 0 < ends.max())
    answer = GUESSES[0] if one_end else {"straight": GUESSES[0], "S-shaped": GUESSES[1]}.get(shape)
    if not guess:
        verdict = f"LayerNorm {chosen}"
    elif one_end and guess == answer:  # a line once those values are left out, not over all
        verdict = "Partly"
    elif shape == FAN:  # a line per token, and no shape over all of them: each partly
        verdict = "Partly" if guess != GUESSES[1] else "Not quite"
    elif guess == answer:
        verdict = "Right"
    elif answer is None and guess != GUESSES[2]:  # a line and a curve, each partly
        verdict = "Partly"
    else:
        verdict = "Not quite"
    alpha = "→ 0, a straight line through 0" if fit.straight else f"{fit.alpha:.3g}"
    largest = int(fit.extreme[-1])
    top_token = int(fit.tokens[largest])
    count = fit.extreme.size
    left_out = (("the value" if count == 1 else f"the {count} values") + " of largest |x| ("
                + (f"{count / fit.x.size:.2%} of them; " if count > 1 else "")
                + f"the largest, x = {fit.x[largest]:.3g}, is token {top_token}'s, "
                f"{original.tokens[top_token]})")
    st.markdown(
        f"**Dynamic Tanh (DyT)** ({DYT.cited}) started from this plot: its authors saw it bend "
        "like a tanh in trained transformers (mostly in deeper layers), and a tanh is what "
        "they put in the LayerNorm's place (section 4). Here, the best tanh and the best "
        "straight line are fitted to the points.")
    st.markdown(
        f"**{verdict}:** this LayerNorm is **{shape}** on this sentence. Over all its "
        f"{fit.x.size:,} points, the best s·tanh(αx) explains {defined('R²')} = "
        f"{fit.r2_tanh:.3f} of x̂'s "
        f"variance (α {alpha}) and the best straight line, which need not pass through 0, "
        f"R² = {fit.r2_line:.3f}"
        + ("." if fit.bend == 0 else
           f". Without {left_out}: tanh R² = {fit.r2_tanh_trimmed:.3f}, line R² = "
           f"{fit.r2_line_trimmed:.3f}.")
        + (f" The tanh fits all the values better only because of {left_out.split(' (')[0]}, "
           "squashed at one end: a line with a bent tip, not an S, which flattens at both "
           f"ends; without {'it' if count == 1 else 'them'}, a line." if one_end else
           " Over all the values it bends at both ends, an S as the paper saw in deeper "
           "layers; without those few values, a line: both answers are half of it."
           if shape == STRAIGHT_BUT_EXTREMES else
           f" Neither curve fits well (a line needs R² ≥ {LINE_FITS:g} to be called one here): "
           "each token's values lie on a line of their own, and the tokens' lines fan apart, "
           "so “a straight line” holds token by token and “no shape” over all of them: both "
           "are half of it." if shape == FAN else ""))
    if len(original.tokens) <= 2:
        st.caption("The sentence is empty: the model reads only [CLS] and [SEP], so these are "
                   "the points of two tokens.")
    drawn = np.union1d(fit.sample(), fit.extreme)
    cx, ct, cl = fit.curve()
    show_figure(charts.beyond.tanh_fit_figure, fit.x[drawn], fit.x_hat[drawn],
                fit.tokens[drawn], original.tokens, np.isin(drawn, fit.extreme), cx, ct, cl,
                f"LayerNorm {chosen}: {layer_label(name)}",
                f"tanh fit (R² {fit.r2_tanh:.3f})", f"line fit (R² {fit.r2_line:.3f})",
                key="by_scatter")
    low, median, high = fit.sigmas
    bound = (fit_width - 1) ** 0.5
    # how far the tokens' σ spread is section 3's answer in part: it waits for that question
    frozen_seen = answered("by_frozen_guess", text) is not None
    why = ("Within one token, x̂ = (x − μ)/σ is a straight line in x (slope 1/σ, through "
           "x = μ): each colour is one token's line, and the points bend only because tokens "
           "differ in μ and σ"
           + (f", here σ from {low:.3g} to {high:.3g} (the largest {high / median:.1f} times "
              "the median). " if frozen_seen else ". "))
    if shape == "straight":
        why += (f"Here their lines are close enough for one straight line to explain "
                f"R² = {fit.r2_line:.3f} of x̂.")
    elif shape == FAN:
        why += (f"Here they differ too much for one curve: the best line explains "
                f"R² = {fit.r2_line:.3f} of x̂ with every value, {fit.r2_line_trimmed:.3f} "
                "without the crosses.")
    else:
        top_x, top_hat = float(fit.x[largest]), float(fit.x_hat[largest])
        if frozen_seen:  # a value that sets its token's σ: section 3's answer in part
            why += (f"A value far from its token's mean forces a large σ on that token "
                    f"(σ ≥ |x − μ|/√(C − 1)), so no x̂ can pass √(C − 1) = {bound:.1f} "
                    f"(C = {fit_width} features): the farther a token's value, the flatter "
                    f"that token's line. Here the largest, x = {top_x:.3g}, lands at "
                    f"x̂ = {top_hat:.3g}"
                    + (": squashed near that edge, as a tanh squashes it. "
                       if abs(top_hat) >= 0.8 * bound else ", well inside that edge. "))
        else:
            why += (f"Here the largest, x = {top_x:.3g}, lands at x̂ = {top_hat:.3g} (how far "
                    "any x̂ can go, and why, joins this caption once section 3's question is "
                    "answered: it points at that answer). ")
        why += (f"Here the {fit.bend:,} value{'s' * (fit.bend != 1)} of largest |x| (the "
                f"crosses: {fit.bend / fit.x.size:.2%} of the {fit.x.size:,}) alone "
                f"make{'s' * (fit.bend == 1)} the bend: without "
                f"{'it' if fit.bend == 1 else 'them'} a line fits as well as the tanh, and "
                "within each token the mapping is straight."
                if shape == STRAIGHT_BUT_EXTREMES else
                f"Here the bend outlasts leaving out the top {TRIM:.0%} of the values of "
                "largest |x| (the crosses).")
    drawn_text = (f"All {fit.x.size:,} points are drawn" if drawn.size == fit.x.size else
                  f"{drawn.size:,} of the {fit.x.size:,} points are drawn, evenly spread in the "
                  "order of x so that the extremes are always among them; the fits use all of "
                  "them")
    st.caption(f"{drawn_text} (drag a box on the figure to zoom into the crowd). {why}")

    # --- 2. All thirteen ---------------------------------------------------------------------
    st.subheader("2 · All 13 LayerNorms")
    trimmed_title = "without the few values of largest |x| that make each bend"
    if frozen_seen:  # which of them bend, by sublayer, points at section 3's answer
        show_figure(charts.beyond.fit_quality_figure, [f"{k}: {layer_label(n)}"
                                                       for k, n in enumerate(NAMES)],
                    [f.r2_tanh for f in fits], [f.r2_line for f in fits],
                    [f.r2_tanh_trimmed for f in fits], [f.r2_line_trimmed for f in fits],
                    trimmed_title, key="by_quality")
    groups = {"after the feed-forward": [f for f in fits
                                         if sublayer_of(f.name) == "feed-forward"],
              "after attention": [f for f in fits if sublayer_of(f.name) == "attention"]}
    embeddings = fits[0]

    def spans(members: list) -> str:
        """The R² ranges of ``members``, with all their values and without the extremes."""
        def span(values: list[float]) -> str:
            return f"{min(values):.2f}–{max(values):.2f}" if len(values) > 1 else \
                f"{values[0]:.2f}"
        return (f"tanh R² {span([f.r2_tanh for f in members])}, line R² "
                f"{span([f.r2_line for f in members])}; {trimmed_title}: tanh "
                f"{span([f.r2_tanh_trimmed for f in members])}, line "
                f"{span([f.r2_line_trimmed for f in members])}")

    lines = [f"- **The embeddings' LayerNorm** (LayerNorm 0, before any layer): "
             f"{spans([embeddings])}; {shape_of(embeddings)}."]
    for label, members in groups.items():
        counts = {}
        for f in members:
            counts[shape_of(f)] = counts.get(shape_of(f), 0) + 1
        lines.append(f"- **{label.capitalize()}** ({len(members)} LayerNorms): "
                     f"{spans(members)}; "
                     + ", ".join(f"{n} {shape}" for shape, n in sorted(counts.items())) + ".")
    if frozen_seen:
        st.markdown("On this sentence:\n" + "\n".join(lines))
    else:  # which group bends through its extremes points at section 3's answer
        st.caption("The 13 fits side by side and by group (the embeddings', after attention, "
                   "after the feed-forward), and how far the tokens' σ spread, join this part "
                   "once section 3's question is answered: which LayerNorms bend points at its "
                   "answer.")
    bends = [fits[k].bend for k in extreme_only]  # how many values make each of those bends
    least, most = (min(bends), max(bends)) if bends else (0, 0)
    # after a feed-forward, where the bend is only its extremes: whose value is the largest
    tops = [(int(fits[k].tokens[fits[k].extreme[-1]]), int(fits[k].extreme[-1]) % fit_width,
             float(fits[k].x[fits[k].extreme[-1]]))
            for k in extreme_only if sublayer_of(NAMES[k]) == "feed-forward"]
    # Inside a real transformer's massive activation: the largest |x| at the first
    # feed-forward LayerNorm (lnviz.lessons.minilm), followed through the layers
    first = fits[NAMES.index(FIRST_FFN)]
    massive = (int(first.tokens[first.extreme[-1]]), int(first.extreme[-1]) % fit_width)
    same = [x for token, feature, x in tops if (token, feature) == massive]
    st.caption(
        "The paper's plots (ViT, wav2vec 2.0, DiT) show mostly straight mappings in early "
        "layers and S-curves deeper. "
        + (f"Here {len(extreme_only)} of the 13 bend only through their extremes: leave out "
           + (f"{least} to {most} values" if least != most else counted(most, "value"))
           + f" of largest |x| (of {fit.x.size:,}) and a straight line fits as well as the "
             "tanh. " if extreme_only else "")
        # where the massive activation sits points at section 3's answer: after it is given
        + (f"Of those {len(tops)} after a feed-forward, in {len(same)} the largest is the "
           f"same value: token {massive[0]}'s ({original.tokens[massive[0]]}) feature "
           f"{massive[1]}, x from {min(same):.3g} to {max(same):.3g}, the one *Inside a real "
           "transformer* follows as the massive activation. "
           if same and answered("by_frozen_guess", text) else "")
        + (f"The bend outlasts that in LayerNorm {', '.join(map(str, s_shaped))}. "
           if s_shaped else "No LayerNorm stays S-shaped without its extremes. ")
        + ("Compare the two rows of bars." if frozen_seen else ""))

# --- 3. Remove the norm: σ frozen --------------------------------------------------------------
st.subheader("3 · Remove the norm: freeze σ")
st.markdown(
    f"{HEIMERSHEIM.cited} removed every LayerNorm from GPT-2 small by fine-tuning it without "
    f"them, at a cost of {LN_FREE_LOSS['GPT-2 small']:+.2f} {defined('nats')} per token of "
    "cross-entropy "
    "loss; "
    f"{LN_FREE.cited} did the same up to GPT-2 XL "
    f"({LN_FREE_LOSS['GPT-2 XL']:+.2f}). Their released checkpoints keep the LayerNorm modules "
    "but switch them off: in the blocks ε is set to 10¹², every γ to 10⁶ and β to 0, while "
    "the final LayerNorm keeps its own γ and β (their model cards say so). √(σ² + 10¹²) ≈ 10⁶ "
    "for any σ the model produces, so a block's layer computes 10⁶·(x − μ)/10⁶: it only "
    "subtracts each token's mean, with σ frozen at one number for every token. Here is the "
    "same thing without the fine-tuning: each LayerNorm's σ frozen at σ̄, the median over this "
    "sentence's tokens of their own √(σ² + ε), so that the median token is untouched and one "
    "token's massive activation does not set σ̄.")
frozen_guess = prediction(
    "freezing σ in which LayerNorms moves the embedding most?",
    ["the embeddings' one", "those after attention", "those after the feed-forward"],
    key="by_frozen_guess", context=text,
    help="Frozen σ: y = γ·(x − μ)/σ̄ + β, μ still each token's mean, σ̄ one number.")
if frozen_guess is not None:
    with st.spinner("Running the model with σ frozen…"):
        frozen = jobs.heavy_cached(
            "the frozen-σ runs", MINILM_TOKEN_RUNS, swap_runs(len(NAMES)) * tokens, frozen_sigma,
            Named(model, "minilm"), text, Named(original, ("by", text)), for_all=everyones)
    worst = worst_sublayer(frozen)
    answer = {"embeddings": "the embeddings' one", "attention": "those after attention",
              "feed-forward": "those after the feed-forward"}[worst]
    k = int(np.argmin(frozen.alone))
    groups = frozen.by_sublayer
    sizes = {sublayer: len(indices_after(NAMES, sublayer)) for sublayer in groups}
    st.markdown(Answer(answer, (
        "On this sentence"
        + (" (empty: [CLS] and [SEP] alone)" if len(original.tokens) <= 2 else "")
        + ", with σ frozen in each group together, the embedding's cosine with the model's own "
        f"is {groups['embeddings']:.3f} for the embeddings' one, "
        f"{groups['attention']:.3f} for the {sizes['attention']} after attention and "
        f"{groups['feed-forward']:.3f} for the {sizes['feed-forward']} after a feed-forward; "
        f"all 13 together: {frozen.together:.3f}. The worst single one is LayerNorm {k} "
        f"({layer_label(frozen.names[k])}), with {frozen.alone[k]:.3f} alone.")
    ).reply(frozen_guess))
    show_figure(charts.beyond.swaps_figure,
                [f"{i}: {layer_label(n)}" for i, n in enumerate(frozen.names)], frozen.alone,
                frozen.measure, "largest token's √(σ² + ε) ÷ σ̄ (the median's)", key="by_frozen")
    rho = rank_correlation(frozen.measure, -frozen.alone)
    st.caption(frozen_caption(rho, worst, massive_seen=guess is not None))

# --- 4. Put DyT in its place -----------------------------------------------------------------
st.subheader("4 · Replace LayerNorms by their fitted DyT")
if guess is None:  # the curves fitted in section 1 (its reply) are what goes in
    st.caption("This part puts the curves fitted in section 1 in the LayerNorms' place: answer "
               "section 1's question first.")
else:
    st.markdown(
        "**Dynamic Tanh (DyT)** replaces each LayerNorm by a function of one value at a time, "
        "$\\mathrm{DyT}(x) = \\gamma\\,\\tanh(\\alpha x) + \\beta$: one learned number α per "
        "layer, no mean, no variance. "
        "Each fitted curve becomes a DyT layer, γ·(s·tanh(αx)) + β, with the LayerNorm's own γ and "
        "β and the fit's α and s. How far does the sentence embedding move? Measured by the "
        f"{defined('cosine similarity')} of the embeddings with and without the replacement.")
    replaced = st.multiselect(
        "LayerNorms replaced", NAMES, default=[name], key="by_replace", bind="query-params",
        format_func=lambda n: f"{NAMES.index(n)}: {layer_label(n)}",
        help="Each one chosen computes DyT with its fitted α instead of normalizing; the rest of "
             "the model is unchanged.")
    by_name = {f.name: f for f in fits}
    with st.spinner("Running the model with DyT in place…"):
        mine = cached(substitute, Named(model, "minilm"), text, [by_name[n] for n in replaced],
                      Named(original, ("by", text)), for_all=everyones)
    if replaced:
        st.metric("Cosine with the model's own embedding", f"{mine.cosine:.4f}",
                  help="The cosine similarity of the sentence embeddings with and without the "
                       "replacement.")
    else:
        st.caption("Nothing replaced: the embedding is the model's own (cosine 1).")
    # the four standard swaps compare the groups as section 3's question does: they wait for it
    if frozen_guess is None:
        st.caption("Four standard swaps — one LayerNorm, the six after attention, the six after a "
                   "feed-forward, all 13 — appear here once section 3's question is answered: "
                   "they compare the same groups.")
    else:
        with st.spinner("Running the model with DyT in place…"):
            standard = jobs.heavy_cached(
                "the four replacements' runs", MINILM_TOKEN_RUNS, 4 * tokens,
                standard_substitutions, Named(model, "minilm"), text,
                Named(fits, ("by fits", text)), Named(original, ("by", text)),
                for_all=everyones)
            anchors = cached(yardstick, Named(model, "minilm"), Named(original, ("by", text)),
                             for_all=everyones)
        table = pd.DataFrame({"replaced": [label for label, _ in standard],
                              "cosine with the model's embedding": [s.cosine for _, s in standard]})
        st.dataframe(table, hide_index=True, key="by_standard")
        st.caption(
            "For scale, cosines between sentence embeddings, highest first: this sentence's "
            "against other sentences', and one pair of two other sentences with one meaning: "
            + "; ".join(f"{a.kind}, “{a.text if len(a.text) <= 80 else a.text[:79] + '…'}”: "
                        f"{a.cosine:.2f}" for a in anchors)
            + f". Replacing all 13 gives {standard[-1][1].cosine:.2f}: "
            + placed(standard[-1][1].cosine, anchors) + "."
            + ("" if text in NEIGHBOURS else " (The first five example sentences also have a "
                                              "paraphrase and a sentence of the same frame with "
                                              "another meaning here.)"))
        one, ffn, attention, every = (sub.cosine for _, sub in standard)
        st.markdown(
            f"Layer 0's after-feed-forward LayerNorm alone gives a cosine of {one:.2f}; all 13 "
            f"together give {every:.2f}. "
            + (f"The six after attention cost little even together ({attention:.3f}); of the two "
               f"groups of six, those after a feed-forward cost more ({ffn:.2f}). "
               if attention > ffn else ""))
    st.markdown(
        "The paper does not drop DyT into a trained model: it trains the network with DyT from "
        "the start, and the weights learn to live with it. What this measures is how much a model "
        "trained with LayerNorm relies on the per-token statistics that DyT does without.")

# --- 5. What the papers report ---------------------------------------------------------------
st.subheader("5 · What the papers report")
vit = {name: f"{v:.1f} %" for name, v in VIT_TOP1.items()}
if guess is None:
    tested = "the shape of the mapping (answer section 1's question to see what MiniLM shows)"
else:
    kept = [f"clearly in LayerNorm {', '.join(map(str, s_shaped))}"] if s_shaped else []
    kept += [f"slightly in LayerNorm {', '.join(map(str, slightly))}"] if slightly else []
    tested = ("the S-shaped mapping — on this sentence "
              + (" and ".join(kept) if kept else "in no LayerNorm")
              + f" does a bend outlast leaving out the top {TRIM:.0%} of |x|"
              + (f"; in {len(extreme_only)} of the {len(NAMES)}, the squashed values of "
                 f"largest |x| (at most {TRIM:.0%} of them) alone make the bend, and the "
                 "mapping within each token is straight" if extreme_only else ""))
if guess is None:  # the papers' point-wise curves all bend: section 1's answer waits for them
    st.markdown(f"Tested on this page, on MiniLM (sections 1 and 2): {tested}. What four "
                "papers report after training with point-wise functions in LayerNorm's place "
                "(not reproduced here: each needs training runs this app does not make) shows "
                "once section 1's question is answered.")
else:
    st.markdown(
        f"Tested on this page, on MiniLM (sections 1 and 2): {tested}. "
        "Reported here, not reproduced (each needs training runs this app does not make):\n"
        f"- **{DYT.name}**, {DYT.cited}: transformers trained with DyT match or beat their "
        "normalized versions across vision, speech, diffusion, DNA and language models, e.g. "
        f"ImageNet top-1 of a ViT-B {vit['LayerNorm']} with LayerNorm, {vit['DyT']} with DyT.\n"
        f"- **{DERF.name}**, {DERF.cited}: a search over point-wise functions finds "
        f"γ·erf(αx + s) + β, which reaches {vit['Derf']} on the same ViT-B comparison, and "
        "attributes its gains to better generalization rather than a better fit.\n"
        f"- **{DYISRU.name}**, {DYISRU.cited}: derives DyT from RMSNorm through an approximation "
        "and, without it, the exact element-wise counterpart x·√C/√(β + x²), which follows "
        "RMSNorm on outliers more closely than DyT.\n"
        f"- **{CAUTION.name}**, {CAUTION.cited}: on GPT-2 models of {CAUTION_SIZES[0]} to "
        f"{CAUTION_SIZES[1]} parameters, DyT's bounding acts as a regularizer whose sign depends "
        f"on the data: at {CAUTION_SIZES[0]} parameters, validation loss "
        f"{-CAUTION_LOSS['1M']:.1f} % better on 1M tokens, "
        f"{CAUTION_LOSS['118M']:.1f} % worse on 118M tokens.")

# --- 6. RMSNorm: is the mean needed? ------------------------------------------------------------
st.subheader("6 · RMSNorm: is the mean needed?")
kernels = kernel_savings(recorded_gpu_run().rows, KERNEL_SHAPES)
run_device = recorded_gpu_run().device
st.markdown(
    f"{RMSNORM.cited} drops the mean: y = γ·x/√(mean x² + ε). T5, Llama and SmolLM2 use it, "
    f"and its paper reports {RMSNORM_SAVING[0]}–{RMSNORM_SAVING[1]} % less running time than "
    "LayerNorm in its models. Two questions, on real numbers: how far from 0 are the means a "
    "trained model's LayerNorms see, and what does dropping them save?")
means, largest = mean_shares(original.records)
# the yardstick that sets a cosine on a scale is drawn in section 4 once section 3's question
# is answered (its groups' cosines, beside it, would hint at that answer): this one waits too
anchors = (cached(yardstick, Named(model, "minilm"), Named(original, ("by", text)),
                  for_all=everyones)
           if frozen_guess is not None else [])
with st.spinner("Running the model with RMSNorm in place of LayerNorm…"):
    swapped = jobs.heavy_cached(
        "the RMSNorm runs", MINILM_TOKEN_RUNS, swap_runs(len(NAMES)) * tokens, rms_instead,
        Named(model, "minilm"), text, Named(original, ("by", text)), for_all=everyones)
table = pd.DataFrame({
    NormKind.LAYER: [f"{i}: {layer_label(n)}" for i, n in enumerate(swapped.names)],
    "median |μ|/σ": means, "largest |μ|/σ": largest,
    "cosine, this one as RMSNorm": swapped.alone})
if frozen_guess is None:  # which LayerNorms a swap hurts most hints at section 3's answer
    table = table.drop(columns="cosine, this one as RMSNorm")
st.dataframe(table, hide_index=True, key="by_means",
             column_config={c: st.column_config.NumberColumn(format="%.4f")
                            for c in table.columns[1:]})
if frozen_guess is None:
    st.caption("Each LayerNorm's own cosine as an RMSNorm joins the table once section 3's "
               "question is answered: which LayerNorms another swap hurts most is a strong "
               "hint to it.")
st.markdown(
    f"Per token, RMSNorm's x/√(mean x²) is LayerNorm's x̂ scaled by 1/√(1 + (μ/σ)²) plus "
    f"μ/√(σ² + μ²) in every feature. In MiniLM, on this sentence, |μ|/σ is at most "
    f"{largest.max():.3f} (median over tokens {means.min():.3f} to {means.max():.3f} per "
    f"LayerNorm). Each LayerNorm turned into an RMSNorm (with its own γ and β) alone leaves "
    f"a cosine of at least {swapped.alone.min():.4f}; all 13 together give "
    f"{swapped.together:.3f}."
    # which LayerNorm a swap hurts most hints at section 3's answer: named once it is answered
    + (f" The largest |μ|/σ is LayerNorm {int(np.argmax(largest))}'s, the worst single swap "
       f"LayerNorm {int(np.argmin(swapped.alone))}'s: how large the means are is not the "
       "whole story." if frozen_guess is not None
       and int(np.argmax(largest)) != int(np.argmin(swapped.alone)) else "")
    + (f" On section 4's yardstick, all 13 as RMSNorms fall "
       f"{placed(swapped.together, anchors)}." if anchors else
       " How far that is needs a scale: section 4 draws one "
       "once section 3's question is answered.")
    + (" The means are small next to σ here; this model was trained with them subtracted."
       if largest.max() < 0.2 else ""))
torch_saving = [s for _, s, _ in kernels]
fused_saving = [s for _, _, s in kernels]
st.markdown(
    f"**What it saves**, measured on an {run_device} (the Performance page's benchmark, "
    f"docs/benchmarks.md): with torch's own kernels RMSNorm takes "
    f"{min(torch_saving):.0%} to {max(torch_saving):.0%} less time than LayerNorm over "
    f"{', '.join(f'{r}×{c}' for (r, c), _, _ in kernels)}"
    + (f", the most at the narrowest rows (SmolLM2's {kernels[0][0][1]} features)"
       if int(np.argmax(torch_saving)) == 0 else "")
    + ". With lnviz's fused kernels, which read x once and write y once for both, RMSNorm is "
    + (f"within 5% of LayerNorm (from {-min(fused_saving):.1%} slower to "
       f"{max(fused_saving):.1%} faster, each the median of 30 runs whose spread was not "
       "recorded, so how much of that is noise is not known)"
       if max(abs(v) for v in fused_saving) < 0.05 else
       f"between {-min(fused_saving):.1%} slower and {max(fused_saving):.1%} faster"
       if min(fused_saving) < 0 else
       f"{min(fused_saving):.1%} to {max(fused_saving):.1%} faster")
    + ": a norm is memory-bound, and the mean costs arithmetic, not memory traffic. How much "
      "RMSNorm saves depends on the kernel more than on the formula.")
st.page_link("app_pages/smollm2.py", icon=":material/chat:",
             label="Inside a real LLM: an RMSNorm as its fitted DyT",
             query_params={"sl_part4": "true", "sl_how": "fitted DyT"})
st.page_link("app_pages/placement.py", icon=":material/vertical_align_center:",
             label="Where the norm sits: Peri-LN, OLMo-2, QK-norm")

# --- 7. Train with DyT from the start -----------------------------------------------------------
st.subheader("7 · Train with them from the start: a race")
st.markdown(
    "Sections 3 and 4 swap a trained model's norms and watch it break; the papers instead train "
    "with the replacement from the first step. Here is that on a small scale: four copies of "
    "*Shapes and transformer blocks*' little transformer, identical but for the norms in their "
    "pre-norm places — LayerNorm (pre-LN), RMSNorm, DyT (α starting at "
    f"{DYT_ALPHA:g}, learned) and none at all — learn to read 8 random digits and write them "
    "back, from the same weights and the same batches, each from one seed or more. The curves "
    "are the mean over the seeds; with several, the shading runs from the lowest seed to the "
    "highest.")
with st.container(border=True):
    cols = st.columns(4)
    race_task = cols[0].segmented_control(
        "Task", list(RACE_TASKS), default="reverse", required=True, key="by_race_task",
        bind="query-params", help="reverse: write the digits backwards; copy: as they are.")
    race_lr = cols[1].select_slider(
        "Learning rate", [1e-3, 3e-3, 1e-2], value=3e-3, key="by_race_lr",
        bind="query-params", format_func=lambda v: f"{v:g}", help="Adam's step size.")
    race_steps = cols[2].number_input(
        "Steps", min_value=10, max_value=400, value=150, step=10, key="by_race_steps",
        bind="query-params", help="Optimizer steps of every model.")
    race_seeds = cols[3].select_slider(
        "Seeds", list(range(1, RACE_MAX_SEEDS + 1)), value=2, key="by_race_seeds",
        bind="query-params",
        help="Runs per model, from the sidebar's seed and the next ones: where two models' "
             "ranges overlap, their order may be luck.")
    run_race, stop_race = run_stop_buttons(
        "by_race", run_help="Train the four models from scratch with these settings.",
        stop_help="Stop the race; the curves so far are kept and shown.")
race_config = None
with refusal(stop=False):
    race_config = RaceConfig(entrants=NORM_RACE, seeds=int(race_seeds), task=race_task,
                             lr=float(race_lr), steps=int(race_steps), seed=settings.seed)
raced = race_panel(
    RACE, race_config, run_race, stop_race, key="by_race_chart",
    idle=f"Press **Run** to start the race: {len(NORM_RACE)} models × {int(race_seeds)} "
         f"seed{'s' * (int(race_seeds) > 1)} × {int(race_steps)} steps, under a progress bar; "
         "**Stop** keeps what was learned.")
if raced is not None:
    st.markdown("\n".join(f"- {line}" if i else line
                          for i, line in enumerate(race_findings(raced))))
    st.caption(
        f"DyT's paper trains models of up to billions of parameters; this is "
        f"{raced.config.depth} blocks of width {raced.config.d_model}, {raced.steps_done} "
        "steps. "
        f"{CAUTION.cited} finds the sign of DyT's effect depends on the amount of data, so a "
        "small race says little about large ones. "
        f"{raced.seconds:.0f} s of wall-clock time on this server's CPU, which other work "
        "shares.")

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("beyond")
