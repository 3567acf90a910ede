"""Explorer: any batch through any normalization, with every number visible."""

from functools import partial

import streamlit as st

from lnviz import charts
from lnviz.batch import Batch, NormSpec, grid_view, to_grid
from lnviz.charts.base import grid_labels
from lnviz.data.files import to_csv_text, to_npy_bytes, to_npz_bytes
from lnviz.lessons.common import group_description, spread_name, step_by_step, worked_example_latex
from lnviz.lessons.explorer import (
    Exploration,
    describe_check,
    explain,
    explore,
    impl_note,
    padding_grid,
    pytorch_snippet,
    shared_outputs,
    shared_title,
    statistics_note,
    stats_heading,
    worked_checks,
)
from lnviz.ui.cache import Named, cached
from lnviz.ui.downloads import download_button
from lnviz.ui.figures import show_figure
from lnviz.ui.live import live_panel, live_table
from lnviz.ui.messages import refusal
from lnviz.ui.pages import page_title
from lnviz.ui.params import norm_controls
from lnviz.ui.source import data_source, layer_affine
from lnviz.ui.state import current_settings, keep_in_range

CSV_LIMIT = 1_000_000  # values; a larger CSV would be slow to build and to open

page_title("app_pages/explorer.py")
st.caption("Choose a batch, choose a normalization, move ε, γ and β — every figure and number "
           "below follows. The URL keeps your settings: copy it to share this exact view.")
settings = current_settings()

# --- Controls ---------------------------------------------------------------------------------
with st.container(border=True):
    picked = data_source(settings.seed)
if picked is None:
    st.stop()
batch, source_key = picked
with st.container(border=True), refusal():
    spec, live_slot = norm_controls(batch, layer_affine())

# --- Computation (one call into lnviz, once per setting) ---------------------------------------
ex = None
with refusal(stop=False), st.spinner("Normalizing…"):
    ex = cached(explore, Named(batch, source_key), spec, settings.device, settings.dtype)
# ε, γ and β: drawn once lnviz's numbers are known (they are sent to the browser, which follows
# a drag with them), and also when lnviz refused the settings, so that they can be changed
live_key = live_panel(live_slot, batch, spec, ex)
if ex is None:
    st.stop()
result, shape, layout = ex.result, ex.x.shape, batch.layout
if ex.impl == "fast":
    st.caption(impl_note(ex))

for note in explain(ex, spec, settings.dtype):
    st.warning(note, icon="⚠️")

# --- Figures ----------------------------------------------------------------------------------
# Each section is a fragment: its own controls (the view of a large tensor, a figure's data
# tables, the worked group) rerun that section alone, not the page.


@st.fragment
def figures(ex: Exploration, spec: NormSpec, batch: Batch, live_key: str | None) -> None:
    shape, layout = ex.x.shape, batch.layout
    st.subheader(stats_heading(spec))
    grid_in = to_grid(ex.input_values, layout)
    cols = st.columns([2, 2, 3])
    mode = cols[0].radio("Large tensors", ["downsample", "slice"], horizontal=True, key="view",
                         bind="query-params",
                         help="The figures draw at most 128 × 128 cells: evenly spaced rows and "
                              "columns of the whole tensor, or a contiguous window of it.")
    start = 0
    if mode == "slice" and grid_in.shape[0] > 128:
        keep_in_range("row0", range(grid_in.shape[0]))
        start = cols[1].number_input("First row", 0, grid_in.shape[0] - 1, 0, key="row0",
                                     bind="query-params", help="The window's first row.")
    view = grid_view(grid_in.shape, mode=mode, start_row=start)
    cols[2].caption(f"Tensor {tuple(shape)} in layout {layout}, drawn as a "
                    f"{grid_in.shape[0]} × {grid_in.shape[1]} grid"
                    + ("" if view.shape == grid_in.shape
                       else f"; showing {view.shape[0]} × {view.shape[1]} of it") + ".")
    rows, columns = grid_labels(tuple(shape), layout, batch.row_labels, view)
    live = (lambda kind, **extra: None) if live_key is None or view.shape != grid_in.shape \
        else (lambda kind, **extra: dict(panel=live_key, kind=kind, **extra))
    show_figure(charts.explorer.norm_heatmaps,
                view.take(grid_in), view.take(to_grid(ex.output_values, layout)),
                view.take(to_grid(ex.groups, layout)), padding=padding_grid(batch, view),
                row_labels=rows, col_labels=columns,
                title_out=f"output y ({spec.norm})", title_groups=shared_title(spec),
                key="heatmaps", live=live("heatmaps", rows=grid_in.shape[0], cols=grid_in.shape[1]))
    alike = shared_outputs(ex, spec, batch)
    if alike:
        st.info(alike, icon="🔁")

    n_groups = len(ex.mean_in)
    shown = grid_view((1, n_groups), max_rows=1, max_cols=512).cols
    show_figure(charts.explorer.group_stats_figure,
                ex.mean_in[shown], ex.spread_in[shown], ex.mean_out[shown], ex.spread_out[shown],
                labels=[str(g) for g in shown], spread_title=spread_name(spec),
                used=None if ex.running is None else tuple(r[shown] for r in ex.running),
                key="stats", live=live("stats", shown=[int(g) for g in shown]))
    st.caption(f"{n_groups:,} group{'s' * (n_groups != 1)}"
               + ("" if len(shown) == n_groups else f", {len(shown)} of them drawn")
               + ". " + statistics_note(ex, spec))
    show_figure(charts.explorer.distributions_figure, ex.histogram_in, ex.histogram_out,
                key="distributions", live=live("distributions"))


figures(ex, spec, batch, live_key)


# --- Step by step -----------------------------------------------------------------------------
@st.fragment
def steps(ex: Exploration, spec: NormSpec, batch: Batch, live_key: str | None) -> None:
    shape, layout, n_groups = ex.x.shape, batch.layout, len(ex.mean_in)
    st.subheader("Step by step")
    keep_in_range("group", range(n_groups))
    group = st.number_input(
        "Group", 0, n_groups - 1, 0, key="group", bind="query-params",
        help="Which group to work through, numbered as in the charts above: here one group is "
             f"{group_description(tuple(shape), layout, spec)}.")
    table = step_by_step(ex.x, ex.result, spec, ex.groups, int(group), layout, mask=batch.mask)
    if live_key is None:
        st.dataframe(table, hide_index=True, key="steps")
    else:  # drawn in the browser: it follows ε, γ and β while they are dragged
        live_table(table, key="steps", panel=live_key)
    if table.attrs["note"]:
        st.caption(table.attrs["note"])
    st.latex(worked_example_latex(table.iloc[0], spec.eps))
    st.caption("The first element of the group, with its numbers substituted into the formula"
               + (". While ε, γ or β is dragged, the table above follows in your browser; this "
                  "line follows when you let go." if live_key else "."))


steps(ex, spec, batch, live_key)

if source_key[0] == "preset" and (check := worked_checks(source_key[1])) is not None:
    st.subheader(check.title)
    st.table(check.table.set_index("step"))  # a static table wraps the long verdicts
    st.caption(check.note)

# --- Check ------------------------------------------------------------------------------------
st.subheader("Check against PyTorch")
level, message = describe_check(ex.check, spec, settings.dtype, ex.overflowed_groups > 0)
{"success": st.success, "warning": st.warning, "error": st.error}[level](
    message, icon={"success": "✅", "warning": "⚠️", "error": "❌"}[level])

# --- Take it away -----------------------------------------------------------------------------
st.subheader("Take it away")
cols = st.columns(4)
n = ex.x.numel()  # partials, not lambdas: a lambda would keep this whole run's variables alive
download_button(cols[0], "output.npy", partial(to_npy_bytes, result.output), "output.npy",
                values=n, help="The normalized output y as a NumPy file.")
download_button(cols[1], "intermediates.npz", partial(to_npz_bytes, ex.intermediates()),
                "intermediates.npz", values=sum(t.numel() for t in ex.intermediates().values()),
                help="Input, μ, σ², 1/√(σ²+ε), x̂ and y in one .npz file.")
download_button(cols[2], "input.npy", partial(to_npy_bytes, ex.x), "input.npy", values=n,
                help="The input, for the PyTorch snippet below.")
if ex.output_values.size <= CSV_LIMIT:
    download_button(cols[3], "output.csv", partial(to_csv_text, result.output), "output.csv",
                    values=n, help="The output as comma-separated text.")
else:
    cols[3].caption(f"CSV is offered up to {CSV_LIMIT:,} values; use the .npy file.")
if batch.mask is not None:
    download_button(None, "mask.npy", partial(to_npy_bytes, batch.mask), "mask.npy",
                    values=batch.mask.size, help="True at real tokens, False at padding.")
st.code(pytorch_snippet(tuple(shape), layout, spec, settings.dtype, settings.device,
                        has_mask=batch.mask is not None), language="python")

st.info(
    "**Try this.** Choose the example *Two words, batch of one* (the two-word notes' two words, "
    "one word "
    "a row). Under LayerNorm the middle heatmap colours each row as one group: every word gets "
    "its own μ and σ. Switch to BatchNorm and the groups turn into columns: each feature is "
    "pooled over both words. Back under LayerNorm, choose *A constant row* and set ε to 0: "
    "the constant row's x − μ = 0 is divided by √0, and the page shows why 0/0 is NaN.",
    icon=":material/science:")

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("explorer")
