"""Shapes and transformer blocks: normalized_shape on 2-D, 3-D and 4-D tensors (and the two-word
notes'
(words, batch, embedding) tensor with a batch of two), and how the placement of LayerNorm in a
block (post-LN, pre-LN, none) shapes the residual stream, the gradients and training."""

import math

import pandas as pd
import streamlit as st

from lnviz import charts
from lnviz.analysis import StackConfig, depth_profiles, depth_sweep, first_blocks, gradient_norms
from lnviz.charts.base import grid_labels
from lnviz.lessons.common import defined
from lnviz.lessons.shapes import (
    BATCH_OF_TWO,
    COMPARED,
    SHAPE_EXAMPLES,
    SHARES_OPTIONS,
    VARIANTS,
    batch_of_two_caption,
    batch_of_two_snippet,
    block_snippet,
    dependence_table,
    depth_findings,
    gradient_findings,
    layer_norm_shapes,
    layer_norm_snippet,
    notes_batch_of_two,
    race_findings,
    reshape_table,
    shape_example,
    shapes_try_this,
    shares_answer,
    twin_setting,
)
from lnviz.nn import ACTIVATIONS
from lnviz.train import RACE_TASKS, RaceConfig
from lnviz.ui.cache import cached
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import refusal
from lnviz.ui.pages import folded, page_title
from lnviz.ui.race import race_panel
from lnviz.ui.state import (
    answered,
    current_settings,
    keep_in_range,
    prediction,
    run_stop_buttons,
    settled,
)

settings = current_settings()
#: The depth slider's maximum (and default): the stack that is computed and cached.
MAX_DEPTH = 48
#: Session-state slot of the training race (lnviz.ui.jobs).
RACE = "sh_race"


page_title("app_pages/shapes.py")
st.markdown(
    "LayerNorm's one structural choice is **which trailing dims share a mean and a variance**: "
    "`normalized_shape` names them, counted from the end of the tensor. Every index of the "
    "dims in front of them gets its own statistics. The second half of this page puts "
    "LayerNorm inside a transformer block and follows what its position does to the "
    "activations, to the gradients and to training."
)
st.latex(
    r"\mu_{i} = \frac{1}{|S|}\sum_{j \in S} x_{i,j},\quad"
    r"\sigma^2_{i} = \frac{1}{|S|}\sum_{j \in S} (x_{i,j}-\mu_{i})^2,\quad "
    r"y_{i,j} = \gamma_j\,\frac{x_{i,j}-\mu_{i}}{\sqrt{\sigma^2_{i}+\epsilon}} + \beta_j"
)
st.caption("i indexes the leading dims, j the trailing dims in normalized_shape (the set S); "
           "γ and β have one entry per j, so their shape is normalized_shape.")

# --- normalized_shape ---------------------------------------------------------------------------
# No section of this page is an st.fragment: Streamlit queues a fragment's rerun behind a running
# script instead of interrupting it, so while the race below runs in the page's run a control in
# a fragment would answer only when the race ends (measured: 27 s for a 300-step race), and Stop
# inside one could not stop it.
st.subheader("normalized_shape: which values share μ and σ")
with st.container(border=True):
    cols = st.columns([3, 2])
    example = cols[0].segmented_control(
        "Tensor", list(SHAPE_EXAMPLES), default="two words", required=True, key="sh_tensor",
        bind="query-params",
        help="“two words”: the two-word notes' word vectors as (words, batch, embedding) = "
             "(2, 1, 3). “two words ×2”: the "
             "same words beside a second sample, (2, 2, 3). 2-D: a (batch, features) table. "
             "3-D: the two sentences' padded tokens, (batch, seq, features). 4-D: small images, "
             "(batch, channels, H, W).")
    batch = shape_example(example, settings.seed)
    ndim = batch.values.ndim
    keep_in_range("sh_dims", range(1, ndim))
    dims = cols[1].radio(
        "Normalize over the last … dims", list(range(1, ndim)), horizontal=True,
        key="sh_dims", bind="query-params",
        help="normalized_shape = x.shape[-k:]: μ and σ² are taken over the last k dims, "
             "once for every index of the dims before them.")
st.caption(f"Dims of this tensor: {' × '.join(SHAPE_EXAMPLES[example])}.")
with refusal():
    view = layer_norm_shapes(batch, dims)
names = SHAPE_EXAMPLES[example]
# asked again for every tensor and every choice of dims: each is its own prediction, but for
# the one whose twin's reply settled it (lnviz.lessons.shapes.twin_setting): that shows unasked
twin = twin_setting(example, dims)
if twin is not None and settled(f"sh_guess_{example}_{dims}", [f"sh_guess_{twin[0]}_{twin[1]}"]):
    shares = ""
    st.markdown(shares_answer(example, dims, view).reason)
else:
    shares = prediction(
        f"normalizing this {' × '.join(names)} tensor, shape {tuple(view.shape)}, over its "
        f"last {dims} dim{'s' if dims > 1 else ''} ({', '.join(names[-dims:])}): does one "
        "sample's output depend on the other samples of its batch?", SHARES_OPTIONS,
        key=f"sh_guess_{example}_{dims}", what="the groups",
        help="Every index of the dims in front of normalized_shape gets a μ and σ² of its own.")
    if shares is not None:
        st.markdown(shares_answer(example, dims, view).reply(shares))
if shares is not None:
    cols = st.columns(4)
    cols[0].metric("x.shape", str(view.shape), help="The input tensor.")
    cols[1].metric("normalized_shape = γ, β shape", str(view.normalized_shape),
                   help="The trailing dims one μ and σ are taken over; γ and β have this shape.")
    cols[2].metric("μ, σ² shape", str(view.stats_shape),
                   help="The statistics keep the normalized dims with size 1, so they broadcast.")
    cols[3].metric("groups × values", f"{view.groups} × {view.group_size}",
                   help="How many (μ, σ²) pairs there are, and how many values each is taken "
                        "over.")
    rows, columns = grid_labels(view.shape, batch.layout, batch.row_labels)
    show_figure(charts.explorer.norm_heatmaps,
                view.input_grid, view.output_grid, view.group_grid, row_labels=rows,
                col_labels=columns, title_out="LayerNorm output y", key="sh_groups")
    with st.expander("Output values", expanded=view.output_grid.size <= 24):
        st.dataframe(pd.DataFrame(view.output_grid, index=rows, columns=columns),
                     key="sh_output")
    st.info(cached(shapes_try_this), icon="🔍")
    st.code(layer_norm_snippet(view), language="python")  # it prints the groups: the answer

# --- The two words with a batch of two
# ---------------------------------------------------------------
with folded("The two words with a batch of two", "sh_part2"):
    # this part works the question above through for the batch of two over its last 2 dims and
    # over its last dim (its table and code compare both): it waits for both guesses
    over_two = any(answered(f"sh_guess_{name}_{d}") is not None
                   for name, d in ((BATCH_OF_TWO, 2), twin_setting(BATCH_OF_TWO, 2)))
    if not over_two or answered(f"sh_guess_{BATCH_OF_TWO}_1") is None:
        st.caption(f"This part works the question above through for “{BATCH_OF_TWO}” over its "
                   "last 2 dims and over its last dim: choose that tensor above and answer it "
                   "for both first.")
    else:
        two = cached(notes_batch_of_two)
        st.markdown(
            "The two-word notes type their words batch first, `torch.Tensor([[[0.2, 0.1, 0.3], "
            "[0.5, 0.1, 0.1]]])` — (batch, words, embedding) = (1, 2, 3) — then turn it into "
            "(words, batch, embedding) with `inputs.reshape(sequence_size, batch_size, "
            "embedding_size)` and take their variance (and, in their commented-out lines, their "
            "mean) over `dims = (-2, -1)`. With one sample both steps happen to give the right "
            "numbers. Here the same steps run on a batch of two: the notes' sample and a second "
            "one.\n\n**1. `reshape` is not `permute`.** A reshape keeps the values in memory "
            "order and only changes how they are indexed; moving a dim needs `permute(1, 0, 2)`. "
            "With two samples the reshaped tensor files the words under the wrong labels:")
        st.dataframe(reshape_table(two), hide_index=True, key="sh_reshape")
        st.markdown(
            "**2. `dims = (-2, -1)` pools the batch.** On (words, batch, embedding) the last two "
            "dims are (batch, embedding): each word position gets one μ and σ² across both "
            "samples. Below, the notes' sample is normalized alone (as in the notes) and beside "
            "the second sample (permuted correctly, so only the dims differ):")
        st.dataframe(dependence_table(two), hide_index=True, key="sh_dependence",
                     column_config={"max |change|":
                                    st.column_config.NumberColumn(format="%.4f")})
        st.caption(batch_of_two_caption(two))
        st.code(batch_of_two_snippet(), language="python")


# --- Transformer blocks -------------------------------------------------------------------------
with folded("LayerNorm in a transformer block", "sh_part3"):
    st.markdown(
        f"A block adds two sublayers to a {defined('residual stream')}: self-attention, then a "
        "feed-forward "
        "network. **Post-LN** (the original transformer) normalizes the stream after each "
        "addition. **Pre-LN** normalizes only the copy each sublayer reads, and the stream itself "
        "once, after the last block (GPT-2's `ln_f`), before the output head. Below, one random "
        "batch (RMS ≈ 1) goes through the same stack of randomly initialised blocks arranged each "
        "way; nothing is trained yet."
    )
    st.latex(
        r"\text{post-LN:}\quad x_1 = \mathrm{LN}(x + \mathrm{Attn}(x)),\quad "
        r"x' = \mathrm{LN}(x_1 + \mathrm{FFN}(x_1))"
    )
    st.latex(
        r"\text{pre-LN:}\quad x_1 = x + \mathrm{Attn}(\mathrm{LN}(x)),\quad "
        r"x' = x_1 + \mathrm{FFN}(\mathrm{LN}(x_1)),\quad \text{head reads } \mathrm{LN}_f(x_L)"
    )
    with st.container(border=True):
        cols = st.columns(4)
        depth = cols[0].slider("Depth (blocks)", 1, MAX_DEPTH, MAX_DEPTH, key="sh_depth",
                               bind="query-params", help="How many blocks are stacked.")
        d_model = cols[1].select_slider("d_model", [16, 32, 64, 128], value=64, key="sh_dmodel",
                                        bind="query-params",
                                        help="Width of the residual stream; the FFN has 4·d_model "
                                             "hidden units. 16 tokens × 4 sequences go through.")
        activation = cols[2].segmented_control(
            "FFN activation", list(ACTIVATIONS), default="GELU", required=True, key="sh_act",
            bind="query-params", help="The feed-forward network's non-linearity.")
        gain = cols[3].select_slider(
            "Init gain", [0.5, 1.0, 1.414, 2.0], value=1.0, key="sh_gain", bind="query-params",
            help="Weights are drawn with standard deviation gain/√fan_in: 1 keeps a linear layer's "
                 "output as large as its input, 1.414 (√2) does so after a ReLU.")
    stack = StackConfig(depth=MAX_DEPTH, d_model=d_model, activation=activation, init_gain=gain,
                        seed=settings.seed)
    with refusal():
        # Always the deepest stack: a shallower one is its first blocks, so the depth slider only
        # slices the cached result.
        with st.spinner("Sending the batch through the stack…"):
            deepest = cached(depth_profiles, stack, for_all=True)
        profiles = first_blocks(deepest, depth)
    show_figure(charts.shapes.depth_figure,
                {v: profiles[v].stream for v in VARIANTS},
                {v: profiles[v].attention for v in VARIANTS},
                {v: profiles[v].ffn for v in VARIANTS}, key="sh_depth_chart")
    cols = st.columns(len(VARIANTS))
    for col, variant in zip(cols, VARIANTS, strict=True):
        final = profiles[variant].stream[-1]
        col.metric(f"{variant}: stream RMS after {depth} block{'s' * (depth > 1)}",
                   "overflow" if math.isnan(final) else f"{final:.3g}",
                   help="√(mean x²) of the residual stream leaving the last block"
                        + (" (before ln_f)." if variant == "pre-LN" else "."))
    st.markdown("\n".join(f"- {line}" for line in depth_findings(profiles)))
    st.info(
        "**Try this.** Move the gain to 0.5 and to 2, or switch the activation, and read the "
        "sentences above again: they are recomputed from the curves. A flat stream in post-LN "
        "only shows that LayerNorm was the last operation; whether a stack trains is a question "
        "for its gradients and for training, below.", icon="🔍")


# --- Gradients at initialization ----------------------------------------------------------------
with folded("Gradients at initialization", "sh_part4"):
    st.markdown(
        "The same batch and the same stack, arranged as post-LN and as pre-LN, now with a loss: "
        "the head reads the last block's "
        "output (through `ln_f` for pre-LN), a random linear map to 16 classes scores it "
        "against random labels, and backpropagation gives every block's gradient. Each point is "
        "‖∂L/∂θ‖ over all of that block's weights. The right panel repeats it for stacks of "
        "1 to 48 blocks (the first blocks of the same stack).")
    with refusal(), st.spinner("Backpropagating through the stack…"):
        sweep = cached(depth_sweep, stack, for_all=True)
        # the sweep holds the stacks of its depths block by block: the default 48 among them
        norms = sweep.blocks.get(depth) or cached(
            gradient_norms, StackConfig(depth=depth, d_model=d_model, activation=activation,
                                        init_gain=gain, seed=settings.seed), for_all=True)
    show_figure(charts.shapes.gradient_figure, norms, sweep.depths, sweep.first, sweep.last,
                key="sh_grad_chart")
    st.markdown("\n".join(f"- {line}" for line in gradient_findings(norms, sweep)))
    st.caption(
        "Xiong et al. (2020) bound, for a simplified transformer at initialization, the gradient "
        "of the last layer: for post-LN by a size that does not depend on the depth, for pre-LN "
        "by one that shrinks like 1/√depth. They conclude that post-LN's parameters near the "
        "output get large gradients, that a large learning rate on them makes the first steps "
        "unstable, and that a warm-up of the learning rate avoids this. NormFormer (Shleifer et "
        "al., 2021) reports that in "
        "pre-LN language models the early layers' gradients are much larger than the later "
        "ones', and adds extra norms to even them out. One stack is one random draw: change the "
        "seed in the sidebar to see which of these numbers hold across draws.")


# --- Training race ------------------------------------------------------------------------------
with folded("A training race: post-LN against pre-LN", "sh_part5"):
    st.markdown(
        "Two small transformers, identical but for where their LayerNorms sit (and pre-LN's "
        "`ln_f`), learn to read 8 random digits and write them back (reversed, or as they are) "
        "with Adam, from the same initial weights and on the same mini-batches of 32 sequences. "
        "Every step draws a new batch and scores it before training on it, so the accuracy is "
        "measured on sequences the model has not trained on. The curves grow as it runs, "
        "**Stop** keeps what was learned so far, and the time it took is shown under them.")
    with st.container(border=True):
        cols = st.columns(5)
        race_depth = cols[0].select_slider(
            "Blocks", [2, 4, 6, 8, 10, 12], value=6, key="sh_race_depth", bind="query-params",
            help="Blocks in each model (d_model = 64, one attention head, 4·64 hidden units).")
        lr = cols[1].select_slider(
            "Learning rate", [1e-4, 3e-4, 1e-3, 3e-3, 1e-2], value=3e-3, key="sh_race_lr",
            bind="query-params", format_func=lambda v: f"{v:g}",
            help="Adam's step size after the warm-up.")
        warmup = cols[2].select_slider(
            "Warm-up steps", [0, 25, 50, 100, 200], value=0, key="sh_race_warmup",
            bind="query-params",
            help="The learning rate grows linearly from lr/warm-up to lr over these first steps; "
                 "0 starts at the full rate.")
        steps = cols[3].number_input(
            "Steps", min_value=10, max_value=600, value=200, step=50, key="sh_race_steps",
            bind="query-params", help="Optimizer steps for each model.")
        task = cols[4].segmented_control(
            "Task", list(RACE_TASKS), default="reverse", required=True, key="sh_race_task",
            bind="query-params",
            help="reverse: output the digits backwards (attention has to move each one); copy: "
                 "output them as they are.")
        run, stop = run_stop_buttons(
            "sh_race", run_help="Train both models from scratch with these settings.",
            stop_help="Stop the race; the curves so far are kept and shown.")
    race_config = None
    with refusal(stop=False):
        race_config = RaceConfig(depth=int(race_depth), lr=float(lr), warmup=min(int(warmup),
                                 int(steps)), steps=int(steps), task=task, seed=settings.seed)
    result = race_panel(RACE, race_config, run, stop, idle="Press **Run** to start the race.",
                        key="sh_race_chart")
    if result is not None:
        cols = st.columns(len(COMPARED))
        for col, variant in zip(cols, COMPARED, strict=True):
            solved = result.solved_at(variant)
            col.metric(f"{variant}: 90 % token accuracy at step",
                       str(solved) if solved else "not reached",
                       help="The first step at which the accuracy, averaged over 10 steps, reached "
                            "90 %.")
        st.markdown("\n".join(f"- {line}" if i else line
                              for i, line in enumerate(race_findings(result))))
        st.caption(f"{result.seconds:.1f} s of wall-clock time for both models on this server's "
                   "CPU, which other work shares: a rough guide, not a benchmark.")


# --- What each arrangement costs ---------------------------------------------------------------
with folded("What each arrangement costs", "sh_part6"):
    st.markdown(
        "- **Post-LN** keeps the stream at a fixed scale and normalizes what the next block and "
        "the head read. Its cost is at the start of training: Xiong et al. (2020) argue that its "
        "gradients near the output are large at initialization and report that, without a "
        "learning-rate warm-up, it trained much worse in their experiments; deep post-LN stacks "
        "are harder still (Liu et al., 2020). The race above lets you try warm-up against no "
        "warm-up.\n"
        "- **Pre-LN** trained without warm-up in Xiong et al.'s experiments and is what GPT-2 and "
        "most later models use. Its costs: its stream grows with depth (the forward chart shows "
        "how fast for this stack), so each later block changes it relatively less; its gradients "
        "at initialization tend to be larger in the first blocks than in the last (the gradient "
        "chart shows whether this stack's are); and it needs the extra `ln_f` before the head. "
        "Several papers report that a post-LN model that does train can end up slightly better "
        "(e.g. Liu et al., 2020; Takase et al., 2022).\n"
        "- **Residual scaling** is a third way: DeepNorm (Wang et al., 2022) keeps post-LN but "
        "computes LN(α·x + F(x)) with α > 1 and smaller initial weights in the sublayers, and "
        "trains transformers with up to 1,000 layers that way.")
    st.code(block_snippet(d_model, activation), language="python")
    st.page_link("app_pages/placement.py", icon=":material/vertical_align_center:",
                 label="Where the norm sits: Peri-LN and OLMo-2's reordered norm on this stack, "
                       "beside post-LN and pre-LN")

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("shapes")
