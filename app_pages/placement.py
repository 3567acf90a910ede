"""Where the norm sits: post-LN, pre-LN, Peri-LN and OLMo-2's reordered norm on the Shapes
lesson's stack at initialization, and QK-norm on a real attention head as its logits grow."""

import numpy as np
import streamlit as st

from lnviz import charts
from lnviz.analysis import StackConfig
from lnviz.lessons.beyond import run_sentence
from lnviz.lessons.common import apart, defined, short
from lnviz.lessons.minilm import PRESETS
from lnviz.lessons.placement import (
    GAINS,
    GROWTH_RACE,
    INIT_SCALES,
    LAARHOVEN,
    LOSS_WINDOW,
    OLMO2,
    PERI_LN,
    PERI_LN_SIZE,
    QK_SCALES,
    STEADY_WITHIN,
    VIT22B,
    VIT22B_DIVERGED,
    WEIGHT_DECAYS,
    XIONG,
    ScaleConfig,
    attention_scaling,
    gain_sensitivity,
    gain_table,
    grows_faster,
    growth_race,
    growth_text,
    learns,
    norm_change,
    normalized_adds,
    placement_findings,
    placements,
    scale_runs,
    steady_placements,
)
from lnviz.limits import MODEL_MAX_CHARS
from lnviz.models import ModelFileError, minilm
from lnviz.ui.cache import Named, cached, shared
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import refusal
from lnviz.ui.pages import page_title
from lnviz.ui.race import race_panel
from lnviz.ui.state import (
    answered,
    current_settings,
    model_text,
    prediction,
    run_stop_buttons,
)

settings = current_settings()

page_title("app_pages/placement.py")
st.caption("Two choices every transformer makes about its norms: where around each sublayer "
           "they go, and whether attention normalizes its queries and keys. The first is shown "
           "on the random blocks of *Shapes and transformer blocks* at initialization, the "
           "second on a real model's attention. The URL keeps every setting.")

# --- 1. Around the sublayers -----------------------------------------------------------------
st.subheader("1 · Around the sublayers: four placements")
st.latex(
    r"\begin{aligned}"
    r"\text{post-LN:}\;& x' = \mathrm{LN}(x + F(x))\\"
    r"\text{pre-LN:}\;& x' = x + F(\mathrm{LN}(x))\\"
    r"\text{Peri-LN:}\;& x' = x + \mathrm{LN}(F(\mathrm{LN}(x)))\\"
    r"\text{OLMo-2:}\;& x' = x + \mathrm{LN}(F(x))"
    r"\end{aligned}")
st.markdown(
    "F is attention, then the feed-forward network, each with its own LayerNorms. Post-LN is "
    "the original transformer's (BERT, and the MiniLM of *Inside a real transformer*); pre-LN "
    f"is GPT-2's and Llama's. **Peri-LN** ({PERI_LN.cited}) normalizes what each sublayer reads "
    f"and what it adds; **OLMo-2** ({OLMO2.cited}, its *reordered norm*) normalizes only what "
    "it adds. The three that leave the stream itself un-normalized end with one more "
    "LayerNorm before the head. “none” has no norm at all. (OLMo 2 itself uses RMSNorm; here "
    "every placement uses the same LayerNorm, so that only the placement differs.)")
with st.container(border=True):
    cols = st.columns(2)
    depth = cols[0].select_slider(
        "Blocks", [6, 12, 24, 48], value=24, key="pl_depth", bind="query-params",
        help="How many blocks are stacked (d_model 64, 4 sequences of 16 tokens).")
    gain = cols[1].select_slider(
        "Init gain", list(GAINS), value=1.0, key="pl_gain", bind="query-params",
        help="Every weight is drawn with standard deviation gain/√fan_in: the weights' scale "
             "at initialization.")
stack = StackConfig(depth=int(depth), init_gain=float(gain), seed=settings.seed)

guess = prediction(
    "pre-LN and Peri-LN both let the stream grow. Whose growth depends more on the init gain "
    "(the weights' scale)?", ["pre-LN's", "Peri-LN's", "both alike"],
    key="pl_guess", help="Pre-LN adds F(LN(x)); Peri-LN adds LN(F(LN(x))). The answer compares "
                         f"gains {GAINS[0]:g} and {GAINS[-1]:g}, whichever gain the slider "
                         "shows.")
if guess is not None:
    with refusal(), st.spinner("Sending the batch through every placement…"):
        result = cached(placements, stack)
        sensitivity = cached(gain_sensitivity, stack)
    steady = steady_placements(sensitivity)
    faster = grows_faster(sensitivity, "pre-LN", "Peri-LN")
    verdict = "Right" if guess == (f"{faster}'s" if faster else "both alike") else "Not quite"
    pre, peri = sensitivity["pre-LN"], sensitivity["Peri-LN"]
    st.markdown(
        f"**{verdict}:** after {depth} blocks, pre-LN's stream variance is {pre[0]:.3g} at "
        f"gain {GAINS[0]:g} and {pre[-1]:.3g} at gain {GAINS[-1]:g}; Peri-LN's is "
        f"{peri[0]:.3g} and {peri[-1]:.3g}. Pre-LN adds what its sublayers compute from a "
        "normalized input, so the weights' scale passes straight into the stream; Peri-LN "
        "normalizes that too, so each sublayer adds a vector of RMS 1 whatever the weights "
        "(how those vectors line up with the stream still depends on them, a little).")
    show_figure(charts.placement.placement_figure, result.variance, result.gradient,
                key="pl_figure")
    st.caption(
        "Top: the residual stream's mean square (RMS², its variance about 0) at the input "
        "(block 0) and after each block. Bottom: each block's gradient norm ‖∂L/∂θ‖ at "
        "initialization, through the final norm and a random head scored against random "
        "labels, as on *Shapes and transformer blocks*. Log axes, one range per row but for "
        "“none”, whose numbers would squash the rest. "
        "A gap is a value that overflowed float64.")
    st.markdown("\n".join(f"- {line}" for line in placement_findings(result, sensitivity)))
    table = gain_table(sensitivity)
    st.dataframe(table.rename_axis(f"stream variance after block {depth}"), key="pl_gains",
                 column_config={c: st.column_config.TextColumn(alignment="right")
                                for c in table.columns})
    low, high = normalized_adds(result)
    olmo, pre_grad = result.gradient["OLMo-2"][0], result.gradient["pre-LN"][0]
    st.caption(
        f"Whose last variance changes by less than {STEADY_WITHIN:g}× across the gains: "
        f"{', '.join(steady) if steady else 'none'}. Post-LN's stream is normalized last, so "
        "its variance is 1 by construction (up to ε). Peri-LN's and OLMo-2's sublayers each "
        "add a normalized vector (RMS 1): were each vector unrelated to the stream, the "
        "variance would grow by exactly 2 per block (two sublayers). Here it grows by "
        f"{low:.2f} to {high:.2f}, the rest being how those vectors line up with the stream"
        + ("; and since the norm takes away the weights' scale, the gain barely moves it "
           "(the table). " if {"Peri-LN", "OLMo-2"} <= set(steady) else ". ")
        + "This is one random stack of width 64 at initialization, not a trained model, and "
        f"the gradients are one draw (change the seed in the sidebar). {PERI_LN.name}'s "
        f"authors train models up to {PERI_LN_SIZE} parameters and report steadier variance, "
        "gradients and convergence than with pre-LN or post-LN. "
        + (f"OLMo-2's block 1 gets a gradient {olmo / pre_grad:.3g}× pre-LN's here, in this "
           "stack without the rest of OLMo-2's recipe (QK-norm, below, and its own "
           "initialization). " if olmo > 5 * pre_grad else "")
        + f"{XIONG.cited} explain why post-LN needs a learning-rate warm-up that pre-LN "
          "does not; *Shapes and transformer blocks* races the two.")
    st.markdown(
        "**In training.** The stacks above are freshly initialized. Does the placement whose "
        "stream depended less on the init gain also grow less while it learns? Train pre-LN and "
        f"Peri-LN side by side, as Shapes' race trains ({GROWTH_RACE.depth} blocks of width "
        f"{GROWTH_RACE.d_model}, Adam, {GROWTH_RACE.steps} steps of the reverse task), and "
        "follow ‖W‖ and the stream's mean square at every step.")
    run_growth, stop_growth = run_stop_buttons(
        "pl_race", run_help="Train both stacks from the sidebar's seed.",
        stop_help="Stop the training; the curves so far are kept and shown.")
    raced = race_panel("pl_race", growth_race(settings.seed), run_growth, stop_growth,
                       idle="Press **Run** to train them (on a shared server it waits its "
                            "turn behind other learners' heavy work).", key="pl_race_chart")
    if raced is not None:
        show_figure(charts.placement.growth_figure, raced.curves, key="pl_growth")
        st.markdown(growth_text(raced))
st.page_link("app_pages/shapes.py", icon=":material/view_in_ar:",
             label="Shapes and transformer blocks: post-LN against pre-LN in more detail, "
                   "and a training race")
st.page_link("app_pages/gemma.py", icon=":material/layers:",
             label="Inside Gemma 3: Peri-LN's norms on both sides of each sublayer in a real "
                   "checkpoint, with QK-norm")

# --- 2. Inside attention: QK-norm ------------------------------------------------------------
st.subheader("2 · Inside attention: QK-norm")
st.markdown(
    f"Training ViT-22B ({VIT22B.cited}), its authors saw the loss diverge at about "
    f"{VIT22B_DIVERGED} parameters: attention logits q·k/√d grew very large. Their fix was to "
    "put a LayerNorm on "
    "the queries and the keys before the dot product; OLMo 2 normalizes them too, with "
    "RMSNorm. Here is a real attention head of all-MiniLM-L6-v2. Scale its queries and keys "
    "by c (W_q, W_k and their biases), as training that lets them grow would: every logit "
    "grows like c².")
with refusal(icon=":material/block:", errors=(ValueError, ModelFileError)):
    model = shared(minilm)
with st.container(border=True):
    text, side = model_text(st.container(), "Sentence", PRESETS, key="pl_text",
                            what="the sentence", max_chars=MODEL_MAX_CHARS,
                            help=f"Any text; the page reads its first {MODEL_MAX_CHARS:,} "
                                 "characters and the model their first 512 tokens.")
    layer = side.selectbox("Layer", range(model.config.n_layer), key="pl_layer",
                           bind="query-params", help="Which of the 6 encoder layers.")
    head = side.selectbox("Head", range(model.config.n_head), key="pl_head",
                          bind="query-params", help="Which of the layer's 12 heads (32 dims each).")
    scale = st.select_slider(
        "Scale c of W_q and W_k", [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0], value=1.0,
        key="pl_scale", bind="query-params",
        help="Queries and keys are multiplied by c (1 = the model as trained): the logits by c².")
qk_guess = prediction(
    "without QK-norm, as c grows, each token's attention…",
    ["spreads over more tokens", "piles onto fewer tokens", "stays as it is"],
    key="pl_qk_guess", what="the figures",
    help="The entropy of a row of attention is ln T when it is uniform over T tokens and 0 "
         "when all of it goes to one token.")
if qk_guess is not None:
    with refusal(), st.spinner("Running the model…"):
        run = cached(run_sentence, Named(model, "minilm"), text)
        scaling = attention_scaling(model, run, int(layer), int(head), float(scale))
    without, with_norm = scaling.entropy["without"], scaling.entropy["with"]
    verdict = ("**Right:**" if qk_guess == "piles onto fewer tokens" else
               "**Not quite:** the answer is “piles onto fewer tokens”.")
    st.markdown(
        f"{verdict} Multiplying every logit by c² sharpens each softmax row, so its "
        f"entropy only falls as c grows. For this head, over the curve's range, it goes from "
        f"{without[0]:.3f} {defined('nats')} at c = {QK_SCALES[0]:g} to {without[-1]:.3f} at "
        f"c = {QK_SCALES[-1]:g} (uniform over "
        f"the {len(scaling.tokens)} tokens: {scaling.uniform:.3f}). With QK-norm it stays "
        + (f"at {with_norm.mean():.3f} (it moves by {np.ptp(with_norm):.1e})"
           if np.ptp(with_norm) < 5e-4 else
           f"between {with_norm.min():.3f} and {with_norm.max():.3f}")
        # that a norm removes the scale of what feeds it is section 1's answer in part
        + (": LN(c·q) = LN(q) for any c > 0, up to ε" if answered("pl_guess") is not None
           else "")
        + ". This is what ViT-22B's authors saw before their fix: attention nearly one-hot, "
          "its entropy near 0.")
    show_figure(charts.placement.entropy_figure, scaling.scales, without, with_norm,
                scaling.uniform, scaling.scale, key="pl_entropy")
    show_figure(charts.placement.attention_pair_figure, scaling.tokens,
                scaling.attention["without"], scaling.attention["with"], scaling.scale,
                key="pl_attention")
    st.caption(
        f"At c = {scaling.scale:g} the largest |logit| is "
        f"{scaling.largest_logit['without']:.3g} without QK-norm and "
        f"{scaling.largest_logit['with']:.3g} with it. With γ = 1, QK-norm's q̂ and k̂ each "
        f"have length √32, so no logit q̂·k̂/√32 can pass √32 = {scaling.bound:.2f} in size "
        + ("at any c: the logits cannot grow with W_q and W_k. "
           if answered("pl_guess") is not None else "here. ")
        + "A trained model's QK-norm has "
        "its own γ, which can still scale the logits, but only as the model learns to, not "
        "as a side effect of W_q and W_k growing. MiniLM was trained without QK-norm, so "
        "the normalized head is not the model's own head even at c = 1: what to read is "
        "that its curve does not move.")

# --- 3. Before a norm: the weight's scale ------------------------------------------------------
st.subheader("3 · Before a norm: the weight's scale and the learning rate")
# that a norm removes the scale of the weight before it is section 1's answer in part (which
# placement's stream the weights' scale reaches): stated once that question is answered
st.markdown(
    ("A weight matrix W followed by a norm cannot change the network's output by changing its "
     "size: LN(c·Wx) = LN(Wx) for every c > 0 (up to ε). Here is such a W"
     if answered("pl_guess") is not None else "Here is a weight matrix W followed by a norm")
    + " in a small "
    "classifier of scikit-learn's handwritten digits, W·x → LayerNorm → ReLU → a linear head, "
    f"trained with plain SGD (η = {ScaleConfig.lr:g}, batches of {ScaleConfig.batch}, "
    f"{ScaleConfig.steps} steps).")
with st.container(border=True):
    cols = st.columns(2)
    init_scale = cols[0].select_slider(
        "W's initial scale", list(INIT_SCALES), value=10.0, key="pl_wscale",
        bind="query-params",
        help="W's first draw multiplied by this.")
    decay = cols[1].select_slider(
        "Weight decay on W", list(WEIGHT_DECAYS), value=1e-2, key="pl_decay",
        bind="query-params", format_func=lambda v: f"{v:g}",
        help="λ: each step also takes η·λ·W off W, which shrinks it.")
if answered("pl_guess") is None:  # its premise, the output unchanged, is section 1's answer
    st.caption("This part's question waits for section 1's: that the output does not change "
               "with the scale of a weight before a norm is part of section 1's answer.")
    scale_guess = None
elif init_scale == 1:  # the very run it would be compared with: nothing to predict
    st.caption("At scale 1 W starts at its usual size: the run the other scales are compared "
               "with, so there is nothing to predict. Pick another scale to be asked.")
    scale_guess = ""
else:
    scale_guess = prediction(
        f"W starts {init_scale:g}× its usual size, and the network's output at step 0 is the "
        "same. Without weight decay, does it learn…", ["as fast", "faster", "slower"],
        key="pl_scale_guess", what="the runs",
        help="Compare with W at its usual scale (1), the same batches, the same η.")
if scale_guess is not None:
    with refusal(), st.spinner("Training the classifier three ways…"):
        runs = cached(scale_runs, float(init_scale), float(decay), int(settings.seed))
    labels = list(runs)
    reference, plain = runs[labels[0]], runs[f"scale {init_scale:g}, no decay"]
    decayed = runs[labels[-1]]
    speed = learns(plain, reference)
    same = plain is reference  # scale 1: the usual size, the very run it is compared with
    st.markdown(
        ("" if not scale_guess else "**Right:** " if scale_guess == speed else
         f"**Not quite:** the answer is “{speed}”. ")
        + (f"At scale 1 W starts at its usual size: it is the same run, and its "
           f"{defined('effective learning rate')} η/‖W‖² the same, {plain.effective_lr[0]:.3g}. "
           "Pick another scale to compare." if same else
           f"{speed.capitalize()}, by its training loss: after {reference.config.steps} steps "
           f"it is {plain.smoothed_loss()[-1]:.3f} against "
           f"{reference.smoothed_loss()[-1]:.3f} (test accuracy {plain.test_accuracy:.1%} "
           f"against {reference.test_accuracy:.1%}). Its "
           f"{defined('effective learning rate')} starts at {plain.effective_lr[0]:.3g} "
           f"against {reference.effective_lr[0]:.3g} at scale 1: ‖W‖ starts {init_scale:g}× "
           "its usual size, and the rate goes with 1/‖W‖²."))
    st.markdown(
        "Why: since the output does not change along W, neither does the loss, and its "
        "gradient is orthogonal to W. A gradient step then moves W sideways, and sideways "
        "moves only lengthen it: ‖W − η∇‖² = ‖W‖² + η²‖∇‖². What matters is W's direction, "
        "which a step of size η turns by about η‖∇‖/‖W‖, and ‖∇‖ itself shrinks like 1/‖W‖: "
        "the direction learns at an effective rate η/‖W‖².")
    st.caption(
        "Where this holds in a real transformer: only for a weight whose output goes straight "
        "into a norm, nothing in between (a bias added after W breaks LN(c·Wx) = LN(Wx)), and "
        "for the whole matrix scaled at once. It covers W_q and W_k under QK-norm (section 2)"
        # which output weights it covers and which not is section 1's answer (the weights'
        # scale reaches pre-LN's stream, not Peri-LN's): said once that question is answered
        + (", and W_o and the feed-forward's W_down under OLMo 2's reordered norm, which "
           "normalizes each sublayer's output before the residual sum. It does not cover "
           "pre-LN's W_o and W_down: their outputs are added to the residual stream, and a "
           "larger W_o makes a larger stream." if answered("pl_guess") is not None else
           "; which other weights it covers joins this caption once section 1's question is "
           "answered."))
    show_figure(charts.placement.scale_figure, labels, [r.weight_norm for r in runs.values()],
                [r.effective_lr for r in runs.values()],
                [r.smoothed_loss() for r in runs.values()], key="pl_scale_runs")
    undecayed = [r for r in runs.values() if r.config.weight_decay == 0]
    cosine = max(float(np.abs(r.gradient_cosine).max()) for r in runs.values())
    grows = all(np.all(np.diff(r.weight_norm) > 0) for r in undecayed)
    notes = [
        f"The gradient is orthogonal to W: |cos(W, ∇W)| is at most {cosine:.1e} in every "
        "step of every run (not exactly 0 because of the LayerNorm's ε).",
        ("Without weight decay ‖W‖ grows at every step"
         if grows else "Without weight decay ‖W‖ changes only by the sideways steps")
        + ": " + "; ".join(f"{norm_change(r.weight_norm)} at scale {r.config.init_scale:g}"
                           for r in undecayed) + "."]
    if decayed.config.weight_decay > 0:
        gain = decayed.effective_lr[-1] / plain.effective_lr[-1]
        start, end = apart(decayed.weight_norm[0], decayed.weight_norm[-1])
        notes.append(
            f"With weight decay {decayed.config.weight_decay:g}, ‖W‖ goes from {start} to "
            f"{end} ({short(plain.weight_norm[-1])} without decay), so the effective "
            f"learning rate ends {gain:.3g}× what it is without decay, and the loss ends at "
            f"{decayed.smoothed_loss()[-1]:.3f} against {plain.smoothed_loss()[-1]:.3f}. The "
            "function cannot feel W's size, so the decay regularizes nothing here: it acts "
            "through the learning rate.")
    st.markdown("\n".join(f"- {n}" for n in notes))
    st.caption(
        f"{LAARHOVEN.cited} shows this for BatchNorm and weight normalization: with a norm "
        "after the weights, L2 regularization only changes their scale and with it the "
        f"effective learning rate. The loss is the running mean of {LOSS_WINDOW} mini-batch "
        "losses; the test accuracy is on the held-out quarter of the digits. Change the seed "
        "in the sidebar for another draw.")
st.page_link("app_pages/gradients.py", icon=":material/timeline:",
             label="Gradients and invariances: what rescaling a norm's input leaves unchanged, "
                   "in the Jacobian")

st.page_link("app_pages/beyond.py", icon=":material/trending_flat:",
             label="Beyond LayerNorm: a real model's LayerNorms replaced by Dynamic Tanh")

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("placement")
