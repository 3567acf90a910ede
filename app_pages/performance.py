"""Performance: time the implementations of the norms against the memory roofline."""

import math
import os
import time

import streamlit as st
import torch

from lnviz import charts
from lnviz.lessons import performance
from lnviz.lessons.common import defined
from lnviz.limits import FULL_LIMITS, current_limits
from lnviz.terms import NormKind
from lnviz.ui import jobs
from lnviz.ui.figures import show_figure
from lnviz.ui.pages import page_title
from lnviz.ui.state import current_settings

settings = current_settings()
limits = current_limits()
# on a shared server (LNVIZ_DEMO) the page offers what one learner may take of it
SIZE_LABELS = {f"{r}×{c}": (r, c) for r, c in performance.DEFAULT_SIZES
               if r * c <= limits.benchmark_values}
OFFERED = [i for i in performance.IMPLEMENTATIONS if limits.benchmark_compile or i != "compiled"]
IMPL_HELP = {
    "numpy": "NumPy, two passes (mean, then squared deviations) — CPU only",
    "scratch": "lnviz's readable code: every intermediate is a full-size tensor",
    "fast": "lnviz's fast path: torch's fused native kernels, same NormResult",
    "fused": "lnviz's own Triton kernel: one read of x, one write of y (LayerNorm and RMSNorm, "
             "CUDA GPU only)",
    "torch": "torch.nn.functional — the native kernel",
    "compiled": "torch.compile of the scratch code (slow to compile the first time)",
}

page_title("app_pages/performance.py")
st.markdown(
    "A normalization does a few additions and multiplications per value — far less arithmetic "
    "than memory traffic. So its speed is set by how fast the machine can **read x and write "
    f"y**: a plain copy, which moves the same bytes, is the ceiling — the {defined('roofline')}. "
    "Code that "
    "writes every intermediate (x − μ, (x − μ)², x̂, γ·x̂ …) to memory moves the tensor many "
    "times over; a fused kernel moves it about once."
)
st.latex(r"\text{bandwidth} = \frac{\text{bytes read} + \text{bytes written}}{\text{time}} "
         r"= \frac{2 \cdot n \cdot 4\ \text{B}}{t}\quad(\text{float32})")

cols = st.columns(3)
norms = cols[0].multiselect("Norms", list(performance.NORMS), default=[NormKind.LAYER],
                            key="pf_norms", bind="query-params",
                            help="LayerNorm over each row (the last dim); BatchNorm (training) "
                                 "over each column (the rows); RMSNorm over each row.")
impls = cols[1].multiselect("Implementations", OFFERED,
                            default=["numpy", "scratch", "fast", "torch"]
                            + (["fused"] if settings.device == "cuda" else []), key="pf_impls",
                            bind="query-params",
                            help="; ".join(f"{k}: {v}" for k, v in IMPL_HELP.items()))
sizes = cols[2].multiselect("Sizes (rows × features)", list(SIZE_LABELS),
                            default=["256×256", "1024×1024", "4096×1024"], key="pf_sizes",
                            bind="query-params",
                            help="Float32 inputs; larger sizes take longer to time.")
cols = st.columns(3)
budget = cols[0].slider("Time budget (s)", 5, limits.benchmark_s, 30, 5, key="pf_budget",
                        bind="query-params",
                        help="A case that would not finish within this time is skipped "
                             "(and listed); torch.compile's compile time counts.")
repeats = cols[1].slider("Repeats", 3, 15, 5, key="pf_repeats", bind="query-params",
                         help="Each case is timed this many times; the median is shown.")
cols[2].caption(f"Device: **{settings.device}** (change it in the sidebar).")
if (len(SIZE_LABELS) < len(performance.DEFAULT_SIZES)
        or len(OFFERED) < len(performance.IMPLEMENTATIONS)):
    st.caption(
        f"On this shared server the benchmark takes sizes up to "
        f"{max(SIZE_LABELS, key=lambda label: math.prod(SIZE_LABELS[label]))}, a "
        f"budget of up to {limits.benchmark_s} s"
        + ("" if limits.benchmark_compile else " and no torch.compile")
        + ", and waits its turn behind other learners' heavy work; on your own machine "
          f"(`streamlit run app.py`) the page offers every size, {FULL_LIMITS.benchmark_s} s and "
          "torch.compile.")

if st.button("Run benchmark", type="primary", key="pf_run",
             help="Times every chosen case on the selected device."):
    progress = st.progress(0.0, text="Starting…")
    skipped: list[performance.Skipped] = []
    # one budget-second of work is at most about a second: the measured pace says how much less
    with jobs.heavy("your benchmark", lambda line: progress.progress(0.0, text=line),
                    kind="benchmark budget-seconds", units=budget):
        start = time.perf_counter()
        threads = torch.get_num_threads()
        rows = performance.run([SIZE_LABELS[s] for s in sizes], norms, impls, settings.device,
                               repeats, budget,
                               progress=lambda f, m: progress.progress(min(f, 1.0), text=m),
                               on_skip=skipped.append)
    st.session_state["pf_rows"] = rows
    st.session_state["pf_skipped"] = skipped
    st.session_state["pf_took"] = (time.perf_counter() - start, budget, threads)
    progress.empty()

rows = st.session_state.get("pf_rows")
skipped = st.session_state.get("pf_skipped", [])
if "pf_took" in st.session_state:
    took, budget_then, threads = st.session_state["pf_took"]
    cores = os.cpu_count() or 1
    st.caption(f"The run took {took:.1f} s; its budget was {budget_then} s."
               + (f" torch ran on {threads} of the machine's {cores} cores"
                  + (": a heavy job leaves one to the other learners' pages." if threads < cores
                     else ".") if settings.device == "cpu" else ""))
if skipped:
    st.warning(f"{len(skipped)} of the chosen cases were not timed; the table says why. To "
               "time those skipped for time, raise the budget or choose fewer or smaller cases.",
               icon=":material/timer_off:")
    st.dataframe([{"norm": s.norm, "implementation": s.impl, "size": f"{s.rows}×{s.cols}",
                   "why": s.reason} for s in skipped], hide_index=True, key="pf_skipped_table")
if "pf_took" not in st.session_state:
    about = jobs.estimate_s("benchmark budget-seconds", budget)
    st.info("Choose what to compare and press **Run benchmark**. It keeps to its time budget "
            f"({budget} s): a case that would not finish within it is skipped and listed"
            + (f"; about {jobs.duration(about)} at the pace of this server's last benchmark."
               if about is not None else "."), icon="⏱️")
elif rows:
    roofline = {r.size: r.copy_gb_per_s for r in rows}
    doubtful = [r for r in rows if r.doubt]
    if doubtful:
        st.warning(f"{len(doubtful)} of {len(rows)} measurements cannot be read as they stand "
                   "(marked ⚠ in the numbers below), e.g. "
                   f"{doubtful[0].norm} by {doubtful[0].impl} at "
                   f"{doubtful[0].rows}×{doubtful[0].cols}: {doubtful[0].doubt}",
                   icon=":material/warning:")
    show_figure(charts.performance.bench_figure, rows, roofline, key="pf_figure")
    with st.expander("The numbers", expanded=bool(doubtful)):
        st.markdown(performance.format_table(rows))
    st.caption(f"Times in {defined('ms')}, on float32 inputs whatever the sidebar's precision "
               f"(the bandwidth formula counts 4 bytes a value). Measured on: "
               f"{performance.machine()}")

st.subheader("One read, one write: lnviz's fused kernel")
gpu_run = performance.recorded_gpu_run()
shape = (16384, 4096)
fused_row, torch_row = (performance.find_row(gpu_run.rows, "layer", impl, shape)
                        for impl in ("fused", "torch"))
st.markdown(
    "The scratch code (left) writes x − μ, x̂ and y as full-size tensors and reads them back. "
    "lnviz's fused kernel (right, `impl=\"fused\"`, written in Triton) loads a few rows into "
    "registers, takes μ and σ² there with the same three sums, and writes y once: the least "
    "traffic a normalization can have. One kernel serves LayerNorm and RMSNorm "
    "(`CENTRE=False`: no μ, and no β).")
left, right = st.columns(2)
scratch_code, kernel_code = performance.kernel_sources()
left.caption("scratch — `lnviz.layer_norm(..., impl=\"scratch\")`")
left.code(scratch_code, language="python", wrap_lines=True)
right.caption("fused — the kernel in `lnviz/fused.py`")
right.code(kernel_code, language="python", wrap_lines=True)
if settings.device == "cuda":
    where = ("Choose **fused** above to time it on this GPU. For comparison, a run on "
             f"an {gpu_run.device}")
else:
    where = (f"The kernel needs a CUDA GPU, and this machine's device is {settings.device}. "
             f"On an {gpu_run.device}")
st.markdown(
    f"{where} ({gpu_run.date}; {gpu_run.machine.split(', ')[-2]}, Triton {gpu_run.triton}) "
    f"the fused LayerNorm moved {fused_row.gb_per_s:,.0f} GB/s at {shape[0]}×{shape[1]}, "
    f"{fused_row.roofline:.0%} of a copy, where torch's own kernel reached "
    f"{torch_row.roofline:.0%}. GPU times between CUDA events, the cache overwritten before "
    "each call; the table has every size and both norms.")
show_figure(charts.performance.bench_figure, performance.one_shape_per_size(gpu_run.rows),
            {r.size: r.copy_gb_per_s for r in gpu_run.rows}, key="pf_gpu_figure")
with st.expander(f"The numbers on the {gpu_run.device}"):
    st.markdown(performance.format_table(gpu_run.rows))
    st.code(gpu_run.command, language="bash")

st.info("**Try this:** compare *scratch* and *fast* at 4096×1024. Scratch writes about five "
        "full-size intermediates, so it moves the tensor several times; fast sits near torch's "
        "native kernel. At 64×64 everything is dominated by fixed per-call overhead instead.",
        icon="💡")
st.code(performance.bandwidth_snippet(), language="python")
st.page_link("app_pages/beyond.py", icon=":material/trending_flat:",
             label="Beyond LayerNorm, part 6: what RMSNorm's dropped mean saves with torch's "
                   "kernels and with the fused ones, and how far from 0 a real model's means are")
