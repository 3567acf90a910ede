"""The data-source picker: presets, generators, typed numbers, uploaded tensor files and the
layers of a capture (``lnviz.capture``).

:func:`data_source` draws the controls and returns a :class:`lnviz.batch.Batch` plus a key
that names it (for :class:`lnviz.ui.cache.Named`), or ``None`` after showing the learner a clear
message about what is wrong.

A captured layer's input comes with its layer's settings: when the learner picks one (in a
capture file they uploaded, or under "Captured layer"), the normalization controls are set as
the layer had them (:func:`lnviz.lessons.inspector.explorer_setup`), and :func:`layer_affine`
gives the layer's γ and β for the per-feature table. The Model inspector opens a layer here with
:func:`open_in_explorer`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from lnviz import data
from lnviz.batch import LAYOUTS, Batch
from lnviz.capture import CapturedLayer
from lnviz.data.files import TensorTooLargeError, load_arrays
from lnviz.lessons.inspector import (
    ExplorerSetup,
    capture_layers,
    explorer_batch,
    explorer_setup,
    layer_key,
)
from lnviz.lessons.padding import PaddedRecipe, check_lengths
from lnviz.limits import (
    EXPLORER_BYTES_PER_VALUE,
    EXPLORER_MAX_D_MODEL,
    EXPLORER_MAX_LENGTH,
    EXPLORER_MAX_SEQUENCES,
    current_limits,
)
from lnviz.terms import Layout
from lnviz.ui.cache import Named, cached
from lnviz.ui.messages import counted, plain, refusal
from lnviz.ui.params import NORM_KEYS, number_table, set_norm_controls
from lnviz.ui.state import CAPTURE_KEY, UPLOAD_KEY, release_upload, url_text

SOURCES = {
    "preset": "Course examples",
    "random": "Random batch",
    "padded": "Padded sequences",
    "images": "Image batch",
    "typed": "Type numbers",
    "upload": "Upload a file",
    "capture": "Captured layer",
}
#: The file types every tensor uploader of the app accepts (read by lnviz.load_arrays).
TENSOR_FILE_TYPES = ["npy", "npz", "safetensors", "pt", "pth"]
#: A layer the Model inspector asked the Explorer to open (its key in the capture).
OPEN_LAYER_KEY = "_open_layer"
#: The captured layer whose settings were last applied to the controls: (file id, layer key).
_APPLIED_KEY = "_layer_applied"
#: This run's captured layer's γ and β for the per-feature table, or None (see layer_affine).
_AFFINE_KEY = "_layer_affine"
#: Under an empty uploader: why a file the learner uploaded may be gone.
LOST_UPLOAD = ("An uploaded file is kept only by the server that received it, for as long as "
               "your session lasts: if the app's server restarted or you were moved to another "
               "one, upload the file again (the uploader may still list it).")
_DEFAULT_TABLE = pd.DataFrame(
    [[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0], [0.5, -1.0, 3.5, 10.0]],
    columns=["f0", "f1", "f2", "f3"],
)


#: Session state holding a batch another page handed to the Explorer: (batch, name, origin).
HANDED_KEY = "_handed_batch"
#: The Explorer, as the navigation knows it.
EXPLORER_PAGE = "app_pages/explorer.py"


def send_batch_to_explorer(batch: Batch, name: tuple, origin: str) -> None:
    """Go to the Explorer with ``batch`` as its data source, "From <origin>" (a page's title).

    ``name`` tells this batch apart from any other the page could hand over (it keys the
    Explorer's cache, :class:`lnviz.ui.cache.Named`). The batch stays in the session until
    another replaces it; the Explorer's own controls then apply any norm to it.
    """
    st.session_state[HANDED_KEY] = (batch, ("handed", *name), origin)
    # the source control keeps its choice's label in the URL
    st.switch_page(EXPLORER_PAGE, query_params={"src": _handed_label(origin)})


def _handed_label(origin: str) -> str:
    return f"From {origin}"


def data_source(seed: int) -> tuple[Batch, tuple] | None:
    """Draw the source controls; return (batch, identifying key), or None with a message."""
    st.session_state[_AFFINE_KEY] = None
    # A session's first run: the settings in its URL are a shared view, not to be overridden.
    from_link = "src" not in st.session_state
    opening = st.session_state.pop(OPEN_LAYER_KEY, None)
    if opening is not None:  # from the Model inspector: before the controls below exist
        st.session_state["src"] = "capture"
        st.session_state["layer"] = opening
    handed = st.session_state.get(HANDED_KEY)
    labels = SOURCES | ({"handed": _handed_label(handed[2])} if handed else {})
    kind = st.segmented_control(
        "Data source", list(labels), format_func=labels.__getitem__, default="preset",
        required=True, key="src", bind="query-params",
        help="Where the numbers come from: the worked examples of the course notes, a "
             "generated batch, numbers you type, your own tensor file (.npy, .npz, "
             ".safetensors, .pt/.pth), or a layer's input recorded by lnviz.capture (the "
             "Model inspector's example, or the file it opened)"
             + ("; or what another page sent here." if handed else "."),
    )
    if kind != "upload":
        release_upload(capture=kind != "capture")
    if kind == "handed":
        return handed[0], handed[1]
    with refusal(stop=False):
        if kind == "preset":
            return _preset_source()
        if kind == "random":
            return _random_source(seed)
        if kind == "padded":
            return _padded_source(seed)
        if kind == "images":
            return _image_source(seed)
        if kind == "typed":
            return _typed_source()
        if kind == "capture":
            return _capture_source(from_link)
        return _upload_source()
    return None


def uploaded_files(label: str, *, key: str, name: str, multiple: bool = False,
                   **kwargs: Any) -> tuple[tuple[str, str, bytes], ...]:
    """``st.file_uploader(label, key=key, ...)``, and the (name, file id, bytes) of each file
    uploaded, read once per upload: the same bytes on every rerun, kept in the session's cache
    under the name ``(name, file ids)`` (so that :func:`lnviz.ui.cache.forget_named` releases
    them with what was computed from them).

    The UploadedFile objects are not handed out. Streamlit gives each run a fresh copy of an
    upload's bytes, and a page's globals sit in a reference cycle with the functions the page
    defines: a global holding one run's UploadedFile kept its copy until Python's cycle
    collector ran, 138 MB more per rerun with a 144 MB capture in the Model inspector
    (tools/inspector_memory.py)."""
    files = st.file_uploader(label, key=key, accept_multiple_files=multiple, **kwargs)
    files = [] if files is None else files if isinstance(files, list) else [files]
    ids = tuple(f.file_id for f in files)
    return cached(_read_files, Named(files, (name, ids))) if files else ()


def _read_files(files: list[Any]) -> tuple[tuple[str, str, bytes], ...]:
    return tuple((f.name, f.file_id, f.getvalue()) for f in files)


def open_in_explorer(name: str, file_id: str, data: bytes, layer: CapturedLayer,
                     shape: tuple[int, ...]) -> dict[str, str]:
    """Hand a capture file and one of its layers (whose input has ``shape``) to the Explorer:
    its next run shows that layer's input with the layer's settings. Returns the Explorer's URL
    parameters for that view, for ``st.switch_page(..., query_params=...)``: the source and the
    layer (the layer's own settings need no parameter, they are what a link to it opens with).
    """
    st.session_state[CAPTURE_KEY] = (name, file_id, data)
    st.session_state[OPEN_LAYER_KEY] = layer_key(layer)
    return {"src": SOURCES["capture"], "layer": _layer_label(layer, shape)}


def layer_affine() -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """γ and β (one per feature) of the captured layer this run's source gave, or None."""
    return st.session_state.get(_AFFINE_KEY)


def _apply_layer(setup: ExplorerSetup, applied: tuple[str, str]) -> None:
    """Set the normalization controls as a captured layer had them, once per layer picked: the
    learner may change them afterwards. Called before those controls are drawn in this run."""
    st.session_state[_AFFINE_KEY] = (setup.gamma, setup.beta) if setup.gamma else None
    if st.session_state.get(_APPLIED_KEY) == applied:
        return
    st.session_state[_APPLIED_KEY] = applied
    set_norm_controls(norm=setup.norm, eps=setup.eps, dims=setup.dims, groups=setup.groups,
                      per_feature=bool(setup.gamma))


def _layer_label(layer: CapturedLayer, shape: tuple[int, ...]) -> str:
    return f"{layer_key(layer)} · {layer.kind} · input {tuple(shape)}"


def _capture_source(from_link: bool = False) -> tuple[Batch, tuple] | None:
    from lnviz.data.examples import EXAMPLE_CAPTURE  # loads torch.nn: only when asked for

    held = st.session_state.get(CAPTURE_KEY)
    name, file_id, data = held or ("the example capture (tiny seeded models)", "example",
                                   EXAMPLE_CAPTURE.read_bytes())
    limits = current_limits()
    cap = limits.capture_values  # the file, held whole; the layer explored is checked below
    named = Named(data, ("capture", file_id))
    layers = cached(capture_layers, named, cap)
    if not layers:
        raise ValueError(f"{name} holds no captured layer")
    arrays = cached(load_arrays, named, max_elements=cap, keep_float64=True)
    by_key = {layer_key(layer): layer for layer in layers}
    key = st.selectbox(
        "Layer", list(by_key), key="layer", bind="query-params",
        format_func=lambda k: _layer_label(by_key[k], arrays[by_key[k].arrays["input"]].shape),
        help="The normalization layer whose input to explore, in the order the model called "
             "them; picking one sets the normalization, ε, γ and β below as the layer had them.",
    )
    st.caption(plain(f"From {name}: {counted(len(layers), 'call')} of normalization layers. "
                     "Open another "
                     "file in the Model inspector and use its “Open in Explorer” button."))
    layer = by_key[key]
    weight = arrays.get(layer.arrays.get("weight", ""))
    bias = arrays.get(layer.arrays.get("bias", ""))
    values = arrays[layer.arrays["input"]]
    if values.size > limits.tensor_values:
        raise ValueError(
            f"this layer's input holds {values.size:,} values, more than the "
            f"{limits.tensor_values:,} the Explorer takes here (each costs it about "
            f"{EXPLORER_BYTES_PER_VALUE} bytes); the Model inspector shows it whole")
    setup = explorer_setup(layer, values.shape, weight, bias)
    if from_link and any(k in st.query_params for k in NORM_KEYS):
        st.session_state[_APPLIED_KEY] = (file_id, key)  # the link's settings stand
    _apply_layer(setup, (file_id, key))
    for note in setup.notes:
        st.caption(note)
    return (Batch(explorer_batch(values, setup), setup.layout),
            ("capture", file_id, key, setup.order))


def _preset_source() -> tuple[Batch, tuple]:
    key = st.selectbox(
        "Example", list(data.PRESETS), format_func=lambda k: data.PRESETS[k].name,
        key="preset", bind="query-params",
        help="The numbers from the course notes, plus a few cases that stress normalization.",
    )
    preset = data.get_preset(key)
    st.caption(f"{preset.description}" + (f" ({preset.source})" if preset.source else ""))
    values = preset.values if preset.values.ndim > 1 else preset.values[None, :]
    layout = Layout.NLC if values.ndim == 3 else Layout.NC
    rows = values.size // max(values.shape[-1], 1)
    labels = preset.labels if preset.labels and len(preset.labels) == rows else None
    return Batch(values, layout, preset.mask, labels), ("preset", key)


def _random_source(seed: int) -> tuple[Batch, tuple]:
    cols = st.columns(4)
    layout = cols[0].selectbox(
        "Layout", list(LAYOUTS), key="rlayout", bind="query-params",
        help="; ".join(f"{k} = {v}" for k, v in LAYOUTS.items()),
    )
    n = cols[1].number_input("Batch size", 1, 100_000, 8, key="rn", bind="query-params",
                             help="Samples in the batch (N).")
    c = cols[2].number_input("Features / channels", 1, 100_000, 6, key="rc",
                             bind="query-params", help="Features per token or channels (C).")
    shape: tuple[int, ...] = (n, c)
    if layout == Layout.NLC:
        length = cols[3].number_input("Sequence length", 1, 100_000, 5, key="rl",
                                      bind="query-params", help="Tokens per sequence (L).")
        shape = (n, length, c)
    elif layout == Layout.NCHW:
        side = cols[3].number_input("Image side", 1, 4096, 4, key="rhw", bind="query-params",
                                    help="Height = width of each image (H = W).")
        shape = (n, c, side, side)
    cols = st.columns(2)
    distribution = cols[0].selectbox(
        "Distribution", list(data.DISTRIBUTIONS), key="rdist", bind="query-params",
        help="normal; uniform; heavy-tailed (Student t, 2 d.o.f.); or normal with 1% outliers.",
    )
    spread = cols[1].slider(
        "Feature scale spread", 0.0, 3.0, 1.0, 0.25, key="rspread", bind="query-params",
        help="0: every feature on the same scale. Higher: feature scales range over "
             "10^±spread — the situation normalization exists for.",
    )
    _check_size(shape)
    with st.spinner("Generating the batch…"):
        values = cached(data.random_batch, tuple(int(s) for s in shape),
                        distribution=distribution, feature_spread=float(spread), seed=seed)
    return Batch(values, layout), ("random", layout, shape, distribution, spread, seed)


@dataclass(frozen=True)
class PaddedControls:
    """One page's controls for generated padded sequences: the URL key of each, their ranges,
    and whether the sizes are sliders (a batch small enough to draw whole) or typed numbers."""

    sequences: str
    padded_length: str
    d_model: str
    pad_value: str
    lengths: str
    max_sequences: int
    max_padded_length: int
    max_d_model: int
    max_pad: float  # the pad value lies in [-max_pad, max_pad]
    pad_step: float | None = None  # Streamlit's default step when None
    sliders: bool = False


#: The Explorer's padded sequences: large batches, sizes typed as numbers.
EXPLORER_PADDED = PaddedControls(
    sequences="pb", padded_length="pl", d_model="pd", pad_value="ppad", lengths="plen",
    max_sequences=EXPLORER_MAX_SEQUENCES, max_padded_length=EXPLORER_MAX_LENGTH,
    max_d_model=EXPLORER_MAX_D_MODEL,
    max_pad=1e6)


def padded_sequences(seed: int, controls: PaddedControls) -> tuple[Batch, PaddedRecipe]:
    """Draw the controls for a generated padded batch (count, padded length, d_model, pad
    value and optional typed lengths) and return the batch with the recipe that made it.

    Typed lengths are checked against ``controls``' ranges and set the number of sequences.
    A ValueError says what to change: lengths that are not whole numbers or out of range, or a
    batch beyond the Explorer's memory budget.
    """
    cols = st.columns(4)
    size = cols[0].slider if controls.sliders else cols[0].number_input
    length = cols[1].slider if controls.sliders else cols[1].number_input
    width = cols[2].slider if controls.sliders else cols[2].number_input
    batch = size("Sequences", 1, controls.max_sequences, 3, key=controls.sequences,
                 bind="query-params",
                 help="How many sequences are in the batch (typed lengths set it instead).")
    max_len = length("Padded length", 1, controls.max_padded_length, 6,
                     key=controls.padded_length, bind="query-params",
                     help="Every sequence is padded to this many positions.")
    d_model = width("d_model", 1, controls.max_d_model, 4, key=controls.d_model,
                    bind="query-params", help="Features (embedding size) of every token.")
    pad_value = cols[3].number_input(
        "Pad value", -controls.max_pad, controls.max_pad, 0.0, controls.pad_step,
        key=controls.pad_value, bind="query-params",
        help="What the pad positions hold. Zero is usual; any constant is a flat row for "
             "LayerNorm.")
    text = url_text(
        st.text_input, "Lengths (optional)", "", key=controls.lengths, what="the lengths",
        placeholder="e.g. 6, 3, 1 — empty for random lengths from the seed",
        help="Real tokens per sequence, comma-separated; the rest is padding. When given, they "
             f"also set the number of sequences (at most {controls.max_sequences:,}); each is "
             "at most the padded length.",
    )
    lengths = data.parse_lengths(text)
    if lengths is not None:  # the same rules and words on every page
        lengths = check_lengths(lengths, int(max_len), controls.max_sequences,
                                controls.max_padded_length)
        batch = len(lengths)
    _check_size((batch, max_len, d_model))
    recipe = PaddedRecipe(int(batch), int(d_model), lengths, int(max_len), float(pad_value), seed)
    with st.spinner("Generating sequences…"):
        values, mask = cached(data.padded_batch, recipe.batch_size, recipe.d_model,
                              lengths=recipe.lengths, max_len=recipe.max_len,
                              pad_value=recipe.pad_value, seed=recipe.seed)
    return Batch(values, Layout.NLC, mask), recipe


def _padded_source(seed: int) -> tuple[Batch, tuple]:
    batch, recipe = padded_sequences(seed, EXPLORER_PADDED)
    return batch, ("padded", *recipe)


def _image_source(seed: int) -> tuple[Batch, tuple]:
    cols = st.columns(4)
    n = cols[0].number_input("Images", 1, 10_000, 2, key="in", bind="query-params",
                             help="Images in the batch (N).")
    c = cols[1].number_input("Channels", 1, 4096, 4, key="ic", bind="query-params",
                             help="Channels per image (C); GroupNorm splits these into groups.")
    side = cols[2].number_input("Side", 2, 4096, 6, key="is", bind="query-params",
                                help="Height = width (H = W).")
    spread = cols[3].slider("Channel spread", 0.0, 3.0, 1.0, 0.25, key="ispread",
                            bind="query-params",
                            help="How differently scaled and offset the channels are.")
    _check_size((n, c, side, side))
    with st.spinner("Generating images…"):
        values = cached(data.image_batch, int(n), int(c), int(side), int(side), seed=seed,
                        channel_spread=float(spread))
    return Batch(values, Layout.NCHW), ("images", n, c, side, spread, seed)


def _typed_source() -> tuple[Batch, tuple] | None:
    how = st.radio("Enter as", ["table", "text"], horizontal=True, key="tmode",
                   bind="query-params",
                   help="Edit a small table, or type rows / nested lists as text.")
    if how == "table":
        st.caption("Rows are samples, columns are features. Add rows at the bottom; every cell "
                   "must hold a number.")
        values = number_table(_DEFAULT_TABLE, key="ttable", num_rows="dynamic")
        if values.size == 0:
            raise ValueError("the table is empty: add at least one row and one column")
        key = ("table", hashlib.sha1(values.tobytes()).hexdigest(), values.shape)
    else:
        text = url_text(
            st.text_area, "Numbers", "1, 2, 3\n2, 4, 6\n0, 0, 0", key="ttext",
            what="the typed numbers",
            help="One row per line (commas or spaces), or nested lists like "
                 "[[[1, 2], [3, 4]], [[5, 6], [7, 8]]] for a 3-D (batch, seq, features) tensor.",
        )
        values = data.parse_numbers(text)
        key = ("text", text)
    values = values if values.ndim > 1 else values[None, :]
    if values.ndim > 3:
        raise ValueError("typed numbers can have at most 3 dims (batch, sequence, features)")
    return Batch(values, Layout.NLC if values.ndim == 3 else Layout.NC), key


def _upload_source() -> tuple[Batch, tuple] | None:
    limits = current_limits()
    cap = limits.tensor_values
    uploaded = st.file_uploader(
        "Tensor file", type=TENSOR_FILE_TYPES, key="upload", max_upload_size=limits.upload_mb,
        help=f"A .npy or .npz file (numpy.save, numpy.savez), a .safetensors file (a checkpoint, "
             f"or a capture saved by lnviz.capture), or a .pt/.pth file of tensors (torch.save "
             f"of a tensor or a state dict); at most {limits.upload_mb} MB and {cap:,} values. "
             "Files are parsed, never run: torch files are read by torch's weights-only "
             "loader, and only if they hold nothing but tensors.",
    )
    if uploaded is None:
        release_upload()
        st.info("Upload a .npy, .npz, .safetensors, .pt or .pth file to explore your own "
                "tensor, e.g. `numpy.save('acts.npy', activations)` or "
                "`lnviz.capture(model, inputs).save('norms.safetensors')`.", icon="📂")
        # A session's upload lives only in the server process that received it: after that
        # process restarts, or the balancer moves the tab to another replica, the uploader can
        # still list the file while the server has none (tests/test_browser_balancer.py).
        st.caption(LOST_UPLOAD)
        return None
    held = st.session_state.get(UPLOAD_KEY)
    if held is None or held[0] != uploaded.file_id:
        release_upload()  # the previous file's arrays and results, before the new one loads
        try:
            arrays = load_arrays(uploaded.getvalue(), max_elements=cap,
                                 keep_float64=True)  # the sidebar's precision decides
        except TensorTooLargeError as err:
            raise TensorTooLargeError(
                f"this file is too large: an uploaded tensor may hold at most {cap:,} values "
                f"here, because each value costs the Explorer about {EXPLORER_BYTES_PER_VALUE} "
                "bytes for its copies and intermediates and one learner's tensor may take "
                f"{limits.tensor_mb:,} MB; save a slice or a smaller array") from err
        data = uploaded.getvalue()
        st.session_state[UPLOAD_KEY] = (uploaded.file_id, arrays, capture_layers(data, cap))
    _, arrays, layers = st.session_state[UPLOAD_KEY]
    names = [n for n in arrays if n != "mask"] or list(arrays)
    inputs = {layer.arrays["input"]: layer for layer in layers or ()}
    name = st.selectbox(
        "Array", names, key="array",
        # a capture opens on its first layer's input, not on the first tensor it lists (a bias)
        index=next((k for k, n in enumerate(names) if n in inputs), 0),
        format_func=lambda n: f"{n}  {tuple(arrays[n].shape)}",
        help="Which array of the file to explore (type to search; the shape follows each "
             "name). In a capture file, a layer's input (…].input) comes with the layer's "
             "normalization, ε, γ and β.") if len(names) > 1 else names[0]
    if name in inputs:
        layer = inputs[name]
        setup = explorer_setup(layer, arrays[name].shape,
                               arrays.get(layer.arrays.get("weight", "")),
                               arrays.get(layer.arrays.get("bias", "")))
        _apply_layer(setup, (uploaded.file_id, name))
        for note in setup.notes:
            st.caption(note)
        # arranged as the layer saw it, as the Captured layer source does: an unbatched
        # InstanceNorm's input gets its batch dim, and no axis is left to guess
        values, layout, order = explorer_batch(arrays[name], setup), setup.layout, setup.order
        st.caption(f"A captured layer's input: arranged as the layer saw it ({layout}).")
    else:
        values, layout, order = _arrange_axes(arrays[name])
    mask = _uploaded_mask(arrays.get("mask"), values, layout, order)
    # The key names everything the batch is built from: the file, the array and the order of
    # its axes (a permutation keeps the shape of a cube, so the shape alone cannot tell).
    return Batch(values, layout, mask), ("upload", uploaded.file_id, name, order, values.shape)


def _arrange_axes(values: np.ndarray) -> tuple[np.ndarray, str, tuple[int, ...]]:
    """Ask which axis is which for 3-D/4-D arrays and bring them to the NLC/NCHW layout.

    Returns the arranged values, their layout and the file's axes in their new order."""
    if values.ndim == 0 or values.size == 0:
        raise ValueError(f"this array has shape {list(values.shape)}: there is nothing to "
                         "normalize; upload an array with at least one value along every axis")
    if values.ndim == 1:
        return values[None, :], Layout.NC, (0,)
    if values.ndim == 2:
        return values, Layout.NC, (0, 1)
    if values.ndim > 4:
        raise ValueError(f"this array has {values.ndim} dims {list(values.shape)}; the Explorer "
                         "shows 1-D to 4-D tensors — reshape or slice it before saving")
    axes = list(range(values.ndim))

    def label(a: int) -> str:
        return f"axis {a} (size {values.shape[a]})"

    cols = st.columns(3)
    batch = cols[0].selectbox("Batch axis", axes, index=0, format_func=label, key="ax_batch",
                              help="The axis that indexes samples.")
    if values.ndim == 3:
        rest = [a for a in axes if a != batch]
        seq = cols[1].selectbox("Sequence axis", rest, index=0, format_func=label,
                                key="ax_seq", help="The axis that indexes tokens/time steps.")
        features = next(a for a in rest if a != seq)
        cols[2].caption(f"Features: {label(features)}")
        order = (batch, seq, features)
        return np.ascontiguousarray(values.transpose(order)), Layout.NLC, order
    rest = [a for a in axes if a != batch]
    channel = cols[1].selectbox("Channel axis", rest, index=0, format_func=label, key="ax_ch",
                                help="The axis that indexes channels; the other two are "
                                     "height and width, in order.")
    h, w = [a for a in rest if a != channel]
    cols[2].caption(f"Height: {label(h)}, width: {label(w)}")
    order = (batch, channel, h, w)
    return np.ascontiguousarray(values.transpose(order)), Layout.NCHW, order


def _uploaded_mask(mask: np.ndarray | None, values: np.ndarray, layout: str,
                   order: tuple[int, ...]) -> np.ndarray | None:
    """An .npz member called ``mask`` marks real tokens of an NLC array: its axes are the file's
    batch and sequence axes, in the file's order, which ``order`` (the file's axes as batch,
    sequence, features) puts as the values were put (a square mask was once used unturned)."""
    if mask is None or layout != Layout.NLC:
        return None
    batch, seq = order[0], order[1]
    if batch > seq and mask.ndim == 2:
        mask = mask.T
    if mask.shape != values.shape[:2]:
        st.warning(f"the file's `mask` has shape {list(mask.shape)}, not {list(values.shape[:2])}"
                   " (batch, sequence); it is ignored.", icon="⚠️")
        return None
    return mask != 0


def _check_size(shape: tuple[int, ...]) -> None:
    count = int(np.prod([int(s) for s in shape], dtype=object))
    limits = current_limits()
    cap = limits.tensor_values  # the same memory budget as an upload
    if count > cap:
        raise ValueError(f"{data.describe_shape(shape)} is more than the {cap:,} values the "
                         f"Explorer handles here (one learner's tensor may take "
                         f"{limits.tensor_mb:,} MB with everything built from it); make it "
                         "smaller")
