"""Model inspector: a checkpoint's normalization parameters, or what a capture's layers did."""

import streamlit as st

from lnviz import charts
from lnviz.batch import grid_view
from lnviz.lessons.inspector import (
    DEFAULT_SIGMAS,
    MAX_OUTLIER_ROWS,
    SNIPPET,
    ModelFile,
    NormLayer,
    capture_overview,
    extreme_channels,
    layer_key,
    layer_view,
    near_zero_gamma,
    no_norm_message,
    open_model_file,
    parameter_table,
    running_stats,
)
from lnviz.limits import current_limits
from lnviz.ui.cache import Named, cached
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import counted, plain, refusal
from lnviz.ui.pages import page_title
from lnviz.ui.source import TENSOR_FILE_TYPES, open_in_explorer, uploaded_files
from lnviz.ui.state import keep_in_range

FILES = {"capture": "Example capture", "checkpoint": "Example checkpoint",
         "upload": "Upload a file"}

page_title("app_pages/inspector.py")
st.caption("What the normalization layers of a model hold (a checkpoint's γ, β and running "
           "statistics) and what they do (a capture of one forward pass: each layer's input and "
           "output). Capture your own model in two lines and open the file here:")
st.code(SNIPPET, language="python")

# --- Controls ---------------------------------------------------------------------------------
limits = current_limits()
with st.container(border=True):
    source = st.segmented_control(
        "File", list(FILES), format_func=FILES.__getitem__, default="capture", required=True,
        key="in_src", bind="query-params",
        help="The examples: a capture and the state dict of two tiny seeded models (a pre-LN "
             "transformer encoder with one channel made large, and a CNN with BatchNorm, "
             "GroupNorm and InstanceNorm). Or your own capture or checkpoint.")
    if source == "upload":
        uploaded = uploaded_files(
            "Capture or checkpoint", type=TENSOR_FILE_TYPES, key="in_upload",
            name="inspector", max_upload_size=limits.upload_mb,
            help="A capture saved by lnviz.capture(model, inputs).save(path), or a checkpoint: "
                 "a state dict in .safetensors, or torch.save(model.state_dict(), path) as "
                 f".pt/.pth (at most {limits.upload_mb} MB and {limits.capture_values:,} "
                 "values). Files are parsed, never run.")
        if not uploaded:
            st.info("Upload a capture (.safetensors) or a checkpoint (.safetensors, .pt, .pth).",
                    icon="📂")
            st.stop()
        (name, file_id, data), = uploaded
    else:
        from lnviz.data.examples import EXAMPLE_CAPTURE, EXAMPLE_CHECKPOINT

        path = EXAMPLE_CAPTURE if source == "capture" else EXAMPLE_CHECKPOINT
        name, file_id, data = path.name, f"example {source}", path.read_bytes()

with refusal(f"Cannot open {name}: "), st.spinner("Reading the file…"):
    model_file = cached(open_model_file, Named(data, ("inspector", file_id)),
                        max_elements=limits.capture_values)
named_file = Named(model_file, ("inspector", file_id))

# --- Sections with their own controls ---------------------------------------------------------
# Fragments: a capture's one layer and a checkpoint's running statistics rerun alone when their
# layer changes, not the file's reading and the tables above them.
@st.fragment
def one_layer(model_file: ModelFile, name: str, file_id: str, data: bytes, sigmas: float) -> None:
    st.subheader("One layer")
    by_key = {layer_key(layer): layer for layer in model_file.layers}
    keep_in_range("in_layer", list(by_key))  # another file: its first layer, in the URL too
    cols = st.columns([3, 1])
    key = cols[0].selectbox(
        "Layer", list(by_key), key="in_layer", bind="query-params",
        format_func=lambda k: f"{k} · {by_key[k].kind}",
        help="A captured layer (module path and call), in the order the model called them.")
    layer = by_key[key]
    if cols[1].button("Open in Explorer", key="in_open", type="primary",
                      icon=":material/biotech:",
                      help="Explore this layer's input in the Explorer, with the layer's "
                           "normalization, axes, ε, γ and β already set."):
        # Streamlit writes into the URL only the settings a learner changes there: the link to
        # the view is given here (and a mapping, not None: for None, Streamlit 1.67 refuses to
        # clear this page's URL-bound parameters)
        st.switch_page("app_pages/explorer.py", query_params=open_in_explorer(
            name, file_id, data, layer, model_file.arrays[layer.arrays["input"]].shape))
    with refusal():
        view = cached(layer_view, layer, Named(model_file.arrays, ("inspector", file_id)),
                      float(sigmas))
    metrics = st.columns(4)
    metrics[0].metric("input shape", str(view.shape))
    metrics[1].metric("max |x| in", f"{view.max_abs_in:.4g}")
    metrics[2].metric("max |y| out", f"{view.max_abs_out:.4g}")
    metrics[3].metric(f"values beyond {sigmas:g} σ", f"{view.outlier_values:,}")
    kind = view.kind + ("" if view.module == view.kind
                                    else f" ({view.module})")
    st.caption(plain(f"{kind}: one group is one {view.group_word}, "
                     f"its μ and σ taken over {view.over} ({view.members:,} values; "
                     f"{len(view.mean):,} groups)."))
    for note in view.notes:
        st.info(note, icon="ℹ️")
    shown = grid_view((1, len(view.mean)), max_rows=1, max_cols=512).cols
    show_figure(charts.inspector.group_stats_figure, view.mean[shown], view.std[shown],
                [view.group_labels[g] for g in shown], view.group_word, key="in_groups")
    if len(shown) < len(view.mean):
        st.caption(f"{len(shown)} of the {len(view.mean):,} groups drawn, evenly spaced.")
    st.markdown(f"**Channels with outliers** (values more than {sigmas:g} σ from their "
                f"{view.group_word}'s mean)")
    if view.outliers.empty:
        st.caption(f"No value of this layer's input lies more than {sigmas:g} σ from its "
                   f"{view.group_word}'s mean.")
    else:
        st.dataframe(view.outliers, hide_index=True, key="in_outliers")
        st.caption(view.outlier_note)
    show_figure(charts.inspector.outlier_figure, view.scatter_x, view.scatter_y,
                view.scatter_outlier, float(sigmas), key="in_scatter")
    st.caption("Each point is one value of the input: across, what went in; up, what the layer "
               "made of it." + ("" if len(view.scatter_x) == view.members * len(view.mean)
                                else " An evenly spaced sample is drawn, with the outliers."))


@st.fragment
def running_statistics(layers: list[NormLayer]) -> None:
    with_stats = {layer.name: layer for layer in layers if layer.running_mean is not None}
    if with_stats:
        st.subheader("BatchNorm running statistics")
        keep_in_range("in_bn", list(with_stats))
        chosen = st.selectbox(
            "Layer with running statistics", list(with_stats), key="in_bn",
            bind="query-params",
            help="The running mean and variance this layer normalizes with in evaluation "
                 "mode, one per channel.")
        mean, var = running_stats(with_stats[chosen])
        show_figure(charts.inspector.running_stats_figure, mean, var, key="in_running")
        tracked = with_stats[chosen].num_batches_tracked
        if tracked is not None:
            st.caption(f"num_batches_tracked = {tracked:,}: the training batches these running "
                       "averages have seen.")


# --- A capture: what each layer did -----------------------------------------------------------
if model_file.kind == "capture":
    st.caption(plain(f"{name}: a capture of {counted(len(model_file.layers), 'call')} of "
                     "normalization "
                     "layers (a layer called twice is there twice), in the order the model made "
                     "them."))
    if not model_file.layers:
        st.info("This capture holds no layer: the model called no normalization layer that "
                "lnviz.capture recognises (cap.skipped lists the norm-like calls it could not "
                "record, with the reason).", icon="ℹ️")
        st.stop()
    sigmas = st.columns([1, 2])[0].number_input(
        "Outlier threshold (σ)", min_value=0.5, max_value=1000.0, value=DEFAULT_SIGMAS, step=0.5,
        key="in_sigma", bind="query-params",
        help="A value is an outlier when it lies more than this many standard deviations from "
             "the mean of its group: the values that share one μ and σ in that layer (a "
             "token's features for LayerNorm, a channel's values for BatchNorm).")
    with refusal():
        overview = cached(capture_overview, named_file, float(sigmas))
    st.subheader("Every layer")
    st.dataframe(overview, hide_index=True, key="in_overview")
    show_figure(charts.inspector.layers_figure, overview["layer"].tolist(),
                overview["max |x|"].to_numpy(), overview["max |y|"].to_numpy(),
                overview["σ min"].to_numpy(), overview["σ max"].to_numpy(), key="in_layers")

    one_layer(model_file, name, file_id, data, sigmas)

# --- A checkpoint: γ, β and running statistics ------------------------------------------------
else:
    layers = list(model_file.norm_layers)
    if not layers:
        st.warning(plain(no_norm_message(model_file)), icon="⚠️")
        st.stop()
    st.caption(plain(f"{name}: {counted(len(layers), 'normalization layer')} found among "
                     f"{counted(len(model_file.arrays), 'array')}, recognised as the table "
                     "says."))
    cols = st.columns(2)
    zero_tol = cols[0].number_input(
        "γ ≈ 0 up to", min_value=0.0, max_value=10.0, value=0.1, step=0.05, key="in_zero",
        bind="query-params", format="%.3g",
        help="A channel whose |γ| is at most this counts as γ ≈ 0: its output is β plus a "
             "small multiple of x̂. That is near β for typical inputs, but x̂ can reach "
             "√(n − 1) (n values share μ and σ), so an outlier can still stand out.")
    top = cols[1].number_input(
        "Extreme channels per layer", min_value=1, max_value=50, value=3, key="in_top",
        bind="query-params",
        help="How many channels to list per layer whose γ (and, separately, β) lies farthest "
             "from that layer's median.")
    st.subheader("Every layer")
    table = parameter_table(layers, float(zero_tol))
    st.dataframe(table, hide_index=True, key="in_params")
    show_figure(charts.inspector.parameters_figure, [layer.name for layer in layers],
                [layer.weight for layer in layers], [layer.bias for layer in layers],
                key="in_boxes")
    st.caption("One box per layer: the median and quartiles of its channels' γ (or β); "
               "whiskers reach 1.5 times the interquartile range, channels beyond are points "
               f"(at most {charts.inspector.MAX_OUTLIERS_SHOWN} per layer, the farthest out).")
    st.subheader("Extreme channels")
    st.dataframe(extreme_channels(layers, int(top)), hide_index=True, key="in_extreme")
    st.subheader("Channels with γ ≈ 0")
    near_zero = near_zero_gamma(layers, float(zero_tol))
    if near_zero.empty:
        st.caption(f"No channel has |γ| ≤ {zero_tol:g}.")
    else:
        st.dataframe(near_zero, hide_index=True, key="in_zero_table")
        if len(near_zero) < table["γ ≈ 0"].sum():
            st.caption(f"At most the first {MAX_OUTLIER_ROWS} of a layer are listed; the table "
                       "of every layer counts them all (γ ≈ 0).")
    running_statistics(layers)
