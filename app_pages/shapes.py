"""Shapes and transformer blocks: normalized_shape on 2-D, 3-D and 4-D tensors, and how the
placement of LayerNorm in a block (post-LN, pre-LN, none) shapes the residual stream with depth."""

import math

import pandas as pd
import streamlit as st

from lnviz import charts
from lnviz.batch import grid_labels
from lnviz.lessons.shapes import (
    ACTIVATIONS,
    SHAPE_EXAMPLES,
    VARIANTS,
    StackConfig,
    block_snippet,
    depth_profiles,
    first_blocks,
    layer_norm_shapes,
    layer_norm_snippet,
    shape_example,
)
from lnviz.ui.cache import cached
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import refusal
from lnviz.ui.state import current_settings, keep_in_range

settings = current_settings()
#: The depth slider's maximum (and default): the stack that is computed and cached.
MAX_DEPTH = 48


st.title("Shapes, and where LayerNorm sits")
st.markdown(
    "LayerNorm's one structural choice is **which trailing dims share a mean and a variance**: "
    "`normalized_shape` names them, counted from the end of the tensor. Everything in front "
    "of them — the batch, and often the sequence — gets its own statistics. The second half of "
    "this page puts LayerNorm inside a transformer block and follows what its position does "
    "to the activations as blocks are stacked."
)
st.latex(
    r"\mu_{i} = \frac{1}{|S|}\sum_{j \in S} x_{i,j},\quad"
    r"\sigma^2_{i} = \frac{1}{|S|}\sum_{j \in S} (x_{i,j}-\mu_{i})^2,\quad "
    r"y_{i,j} = \gamma_j\,\frac{x_{i,j}-\mu_{i}}{\sqrt{\sigma^2_{i}+\epsilon}} + \beta_j"
)
st.caption("i indexes the leading dims, j the trailing dims in normalized_shape (the set S); "
           "γ and β have one entry per j, so their shape is normalized_shape.")

# --- normalized_shape ---------------------------------------------------------------------------
st.subheader("normalized_shape: which values share μ and σ")
with st.container(border=True):
    cols = st.columns([3, 2])
    example = cols[0].segmented_control(
        "Tensor", list(SHAPE_EXAMPLES), default="seed 003", required=True, key="sh_tensor",
        bind="query-params",
        help="seed 003: two words as (words, batch, embedding) = (2, 1, 3). 2-D: a (batch, "
             "features) table. 3-D: seed 002's padded tokens, (batch, seq, features). 4-D: "
             "small images, (batch, channels, H, W).")
    batch = shape_example(example, settings.seed)
    ndim = batch.values.ndim
    keep_in_range("sh_dims", range(1, ndim))
    dims = cols[1].radio(
        "Normalize over the last … dims", list(range(1, ndim)), horizontal=True,
        key="sh_dims", bind="query-params",
        help="normalized_shape = x.shape[-k:]. The batch dim is never included: that would "
             "make samples share statistics.")
st.caption(f"Dims of this tensor: {' × '.join(SHAPE_EXAMPLES[example])}.")
with refusal():
    view = layer_norm_shapes(batch, dims)

cols = st.columns(4)
cols[0].metric("x.shape", str(view.shape), help="The input tensor.")
cols[1].metric("normalized_shape = γ, β shape", str(view.normalized_shape),
               help="The trailing dims one μ and σ are taken over; γ and β have this shape.")
cols[2].metric("μ, σ² shape", str(view.stats_shape),
               help="The statistics keep the normalized dims with size 1, so they broadcast.")
cols[3].metric("groups × values", f"{view.groups} × {view.group_size}",
               help="How many (μ, σ²) pairs there are, and how many values each is taken over.")
rows, columns = grid_labels(view.shape, batch.layout, batch.row_labels)
show_figure(charts.explorer.norm_heatmaps,
            view.input_grid, view.output_grid, view.group_grid, row_labels=rows, col_labels=columns,
            title_out="LayerNorm output y", key="sh_groups")
with st.expander("Output values", expanded=view.output_grid.size <= 24):
    st.dataframe(pd.DataFrame(view.output_grid, index=rows, columns=columns), key="sh_output")
st.info(
    "**Try this.** On seed 003 both choices give [[0, −1.2238, 1.2238]] and "
    "[[1.4140, −0.7070, −0.7070]]: the middle dim has size 1, so the last two dims hold the "
    "same three values as the last one — only γ's shape changes, (3,) versus (1, 3). On the "
    "3-D batch, go from the last 1 dim (one μ per token) to the last 2 (one per sentence) and "
    "watch the pad token join its sentence's statistics. On the images, the last 3 dims are "
    "one μ per image, as in a CNN's LayerNorm.", icon="🔍")
st.code(layer_norm_snippet(view), language="python")

# --- Transformer blocks -------------------------------------------------------------------------
st.subheader("LayerNorm in a transformer block")
st.markdown(
    "A block adds two sublayers to a residual stream: self-attention, then a feed-forward "
    "network. **Post-LN** (the original transformer) normalizes the stream after each "
    "addition. **Pre-LN** normalizes only the copy each sublayer reads, so the stream itself "
    "is never normalized and every block adds a roughly equal-sized piece to it. Below, one "
    "random batch (RMS ≈ 1) goes through the same stack of randomly initialised blocks "
    "arranged each way; nothing is trained."
)
st.latex(
    r"\text{post-LN:}\quad x_1 = \mathrm{LN}(x + \mathrm{Attn}(x)),\quad "
    r"x' = \mathrm{LN}(x_1 + \mathrm{FFN}(x_1))"
)
st.latex(
    r"\text{pre-LN:}\quad x_1 = x + \mathrm{Attn}(\mathrm{LN}(x)),\quad "
    r"x' = x_1 + \mathrm{FFN}(\mathrm{LN}(x_1))"
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
with refusal():
    # Always the deepest stack: a shallower one is its first blocks, so the depth slider only
    # slices the cached result.
    with st.spinner("Sending the batch through the stack…"):
        deepest = cached(depth_profiles, StackConfig(depth=MAX_DEPTH, d_model=d_model,
                                                     activation=activation, init_gain=gain,
                                                     seed=settings.seed))
    profiles = first_blocks(deepest, depth)
show_figure(charts.shapes.depth_figure,
            {v: profiles[v].stream for v in VARIANTS},
            {v: profiles[v].attention for v in VARIANTS},
            {v: profiles[v].ffn for v in VARIANTS}, key="sh_depth_chart")
cols = st.columns(len(VARIANTS))
for col, variant in zip(cols, VARIANTS, strict=True):
    final = profiles[variant].stream[-1]
    col.metric(f"{variant}: stream RMS after {depth} blocks",
               "overflow" if math.isnan(final) else f"{final:.3g}",
               help="√(mean x²) of the residual stream leaving the last block.")
st.info(
    "**Try this.** Post-LN's stream sits at RMS 1 after every block — the last operation is a "
    "LayerNorm. Pre-LN's grows steadily (roughly like √depth): each sublayer reads a "
    "normalized input, so it adds about the same amount each time, and the sum keeps growing. "
    "Without any LayerNorm, each sublayer's output grows with its input, and the stream grows "
    "geometrically — close to a straight line on this log scale. Set the gain to 0.5: the "
    "sublayers add less, everything grows more slowly, and it takes more blocks before 'none' "
    "pulls ahead. In the right "
    "panel, pre-LN's sublayer outputs stay level while its stream grows, so deep blocks change "
    "the stream relatively less and less.", icon="🔍")
st.code(block_snippet(d_model, activation), language="python")

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("shapes")
