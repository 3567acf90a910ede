"""Gradients and invariances: backpropagation through LayerNorm and BatchNorm, their Jacobians,
and what changes to the input or the weights leave each norm's output alone."""

import streamlit as st

from lnviz import charts
from lnviz.devices import to_numpy
from lnviz.lessons.gradients import (
    GRAD_NORMS,
    ONE_HOT,
    REACH_OPTIONS,
    UPSTREAM,
    gradient_input,
    gradient_report,
    gradients_snippet,
    gradients_try_this,
    invariance_caption,
    invariance_probes,
    jacobian_caption,
    norm_jacobian,
    pair_note,
    probe_inputs,
    probed_variances,
    reach_answer,
    upstream_gradient,
    weight_scale_gradient,
    weight_scale_text,
)
from lnviz.lessons.placement import INIT_SCALES
from lnviz.limits import GRADIENTS_MAX_JACOBIAN
from lnviz.terms import NormKind
from lnviz.ui.cache import cached
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import refusal
from lnviz.ui.pages import page_title
from lnviz.ui.params import eps_slider
from lnviz.ui.state import answered, current_settings, keep_in_range, prediction

settings = current_settings()
page_title("app_pages/gradients.py")
st.markdown(
    "A normalization layer is differentiated like any other layer, but its μ and σ are "
    "themselves functions of the input, so every input that went into them also receives "
    "gradient. Which inputs those are decides where a gradient can travel. The same fact "
    "decides what the "
    "layer ignores: a constant added to every value of a group that shares μ and σ is "
    "normalized away, and so (up to ε) is a positive factor multiplying all of them. "
    "Everything here runs the lnviz norms under `torch.autograd` in float64."
)
st.latex(
    r"\frac{\partial L}{\partial x} = \frac{1}{H\sqrt{\sigma^2+\epsilon}}\Big(H\,\hat g"
    r" - \textstyle\sum \hat g - \hat x \sum \hat g\,\hat x\Big),\quad \hat g = \gamma\odot"
    r"\frac{\partial L}{\partial y},\qquad \frac{\partial L}{\partial \gamma} = \sum_n"
    r"\frac{\partial L}{\partial y}\,\hat x,\quad \frac{\partial L}{\partial \beta} = \sum_n"
    r"\frac{\partial L}{\partial y}"
)
st.caption("The sums run over the H values that share one μ and σ (training mode for "
           "BatchNorm).")

# --- Controls ---------------------------------------------------------------------------------
with st.container(border=True):
    cols = st.columns([2, 2, 3, 3])
    n = cols[0].slider("Batch size N", 2, 8, 4, key="gr_n", bind="query-params",
                       help="How many samples (rows) the batch holds.")
    c = cols[1].slider("Features C", 2, 8, 4, key="gr_c", bind="query-params",
                       help="How many features (columns) each sample has.")
    eps = eps_slider(
        cols[2], key="gr_eps",
        help="Added to σ². The scale invariances below are exact only for ε = 0; a large ε "
             "also damps the gradients.")
    kind = cols[3].segmented_control(
        "Upstream gradient ∂L/∂y", list(UPSTREAM), default="one-hot", required=True,
        key="gr_up", bind="query-params",
        help="What the layers above send back: 1 at one output cell (L = y[n, c]), 1 at "
             "every cell (L = Σ y), or random values (seeded by the sidebar's seed).")
    cell = (0, 0)
    if kind == "one-hot":
        cols = st.columns([2, 2, 6])
        keep_in_range("gr_row", range(n))
        keep_in_range("gr_col", range(c))
        row = cols[0].number_input("Sample n of the one-hot", 0, n - 1, 0, key="gr_row",
                                   bind="query-params",
                                   help="The row of the output cell the loss looks at.")
        col = cols[1].number_input("Feature c of the one-hot", 0, c - 1, 0, key="gr_col",
                                   bind="query-params",
                                   help="The column of the output cell the loss looks at.")
        cell = (int(row), int(col))

# --- Computation --------------------------------------------------------------------------------
x = gradient_input(n, c, seed=settings.seed)
with refusal():
    grad_output = upstream_gradient((n, c), kind, cell=cell, seed=settings.seed)
    report = cached(gradient_report, x, grad_output, eps)
ln, bn = report.by_norm[NormKind.LAYER], report.by_norm[NormKind.BATCH]

# --- Gradients ----------------------------------------------------------------------------------
st.subheader("Where the gradient goes")
LOSSES = {"one-hot": f"y[{cell[0]}, {cell[1]}], one output cell", "ones": "Σ y, every output cell",
          "random": "Σ g·y, with a random g at every output cell (the sidebar's seed)"}
# the answer changes with two samples (and there with ε): asked again across that line
asked_for = ("N = 2", eps) if n == 2 else "N ≥ 3"
if kind != ONE_HOT and answered(f"gr_guess_{ONE_HOT}", asked_for) is None:
    # another loss's reply and figures show which values each norm pools: the one-hot loss's
    # answer, so its question comes first
    st.caption(f"The {ONE_HOT} loss's question comes first: what this loss's gradients show "
               f"answers it. Pick **{ONE_HOT}** under “Upstream gradient ∂L/∂y” and answer "
               "there.")
    guess = None
else:
    guess = prediction(
        f"the loss is {LOSSES[kind]}. Which inputs does BatchNorm's ∂L/∂x reach?",
        REACH_OPTIONS, key=f"gr_guess_{kind}", what="both norms' gradients", context=asked_for,
        help="The loss is the one chosen under “Upstream gradient ∂L/∂y”.")
if guess is not None:
    st.markdown(reach_answer(bn.grad_input, kind, cell, x=to_numpy(x), eps=eps).reply(guess))
    st.caption("The H values that share one μ and σ: a sample's C features for LayerNorm, a "
               "feature's N samples for BatchNorm. An input gets gradient through its own "
               "output, and through the μ and σ it helped compute.")
    show_figure(charts.gradients.heatmaps, {
        "input x": to_numpy(x), "upstream ∂L/∂y": to_numpy(grad_output),
        "∂L/∂x, LayerNorm": ln.grad_input, "∂L/∂x, BatchNorm": bn.grad_input,
    }, key="gr_grads")
    show_figure(charts.gradients.param_figure,
                {norm: report.by_norm[norm].grad_weight for norm in GRAD_NORMS},
                {norm: report.by_norm[norm].grad_bias for norm in GRAD_NORMS}, key="gr_params")
    st.caption("∂L/∂β is the upstream gradient summed over the batch, the same for both norms; "
               "∂L/∂γ weighs it by x̂, which each norm computes differently.")
message = (f"lnviz's outputs and gradients match torch.nn.functional's autograd: largest "
           f"|lnviz − torch| = {report.max_difference:.2g}"
           + ("." if len(report.compared) == len(GRAD_NORMS) else
              f" ({', '.join(report.compared)} only: torch refuses BatchNorm in training "
              "mode with ε = 0)."))
if report.max_difference <= 1e-9:
    st.success(message, icon="✅")
else:
    st.error(message.replace("match", "differ from"), icon="❌")
# The Try-this's account of the one-hot loss, the Jacobian and the invariances say which inputs
# each norm ties together: the one-hot question's answer, given before any other loss's
explained = guess is not None
if guess is not None:
    st.info(gradients_try_this(n, kind), icon="🔍")
    note = pair_note(n, c)  # with N = 2 it says where BatchNorm's gradient goes: after the guess
    if note:
        st.warning(note, icon="⚠️")

# --- Jacobian -----------------------------------------------------------------------------------
if explained:
    st.subheader("The Jacobian ∂y/∂x")
    st.markdown(
        "Every output against every input, with the batch flattened sample by sample. The "
        "outlined squares are each sample's own block: an entry outside them means one sample's "
        "output moves when *another* sample's input does."
    )
    if n * c <= GRADIENTS_MAX_JACOBIAN:
        jacobians = {f"{norm}, training" if norm == NormKind.BATCH else norm:
                     cached(norm_jacobian, x, norm, eps) for norm in GRAD_NORMS}
        show_figure(charts.gradients.jacobian_figure, jacobians, n, key="gr_jac")
        st.caption(jacobian_caption(jacobians, n))

# --- Invariances --------------------------------------------------------------------------------
# A fragment: its four controls rerun this section alone, not the gradients and Jacobians above.
@st.fragment
def invariances(n: int, c: int, eps: float, seed: int, answered: bool) -> None:
    st.subheader("What leaves the output unchanged")
    if not answered:  # it says which values each norm pools: the one-hot question's answer
        st.caption(f"This section says which values each norm pools, which answers the {ONE_HOT} "
                   "loss's question above: answer it first.")
        return
    st.markdown(
        "Here the norm sits after a linear layer, y = Norm(x Wᵀ), as it does in a network. Each "
        "probe changes one thing and measures the largest change of the output, once at the "
        "chosen ε and once at ε = 0. LayerNorm normalizes each sample, so it cancels a shift or a "
        "rescaling of a whole sample; BatchNorm normalizes each feature, so it cancels a shift or "
        "a rescaling of a whole feature — and re-scaling one row of W scales exactly one feature. "
        "Both cancel scaling all of W: the weights' overall size does not matter to the layers "
        "above. The rescalings are cancelled exactly only at ε = 0; what is left at ε > 0 is "
        "ε's doing, and the chart says so."
    )
    with st.container(border=True):
        cols = st.columns(4)
        factor = cols[0].select_slider(
            "Scale factor", [0.01, 0.1, 0.5, 2.0, 10.0, 100.0], value=2.0, key="gr_factor",
            bind="query-params", help="What the scaling probes multiply by.")
        shift = cols[1].slider("Shift", -5.0, 5.0, 3.0, 0.5, key="gr_shift", bind="query-params",
                               help="What the shifting probes add.")
        keep_in_range("gr_sample", range(n))
        keep_in_range("gr_feature", range(c))
        sample = cols[2].number_input("Probed sample", 0, n - 1, 0, key="gr_sample",
                                      bind="query-params",
                                      help="The sample (row of h) the sample probes change.")
        feature = cols[3].number_input("Probed feature", 0, c - 1, 0, key="gr_feature",
                                       bind="query-params",
                                       help="The feature (column of h, row of W) the feature "
                                            "probes change.")
    with refusal():
        x_in, weight = probe_inputs(n, c, seed=seed)
        table = cached(invariance_probes, x_in, weight, factor=factor, shift=shift,
                       sample=int(sample), feature=int(feature), eps=eps)
    show_figure(charts.gradients.invariance_figure,
                list(table["probe"]), {norm: list(table[norm]) for norm in GRAD_NORMS},
                {norm: list(table[f"{norm}: verdict"]) for norm in GRAD_NORMS},
                {norm: list(table[f"{norm}, ε = 0"]) for norm in GRAD_NORMS}, key="gr_probes")
    st.caption(invariance_caption(table, eps, probed_variances(x_in, weight, int(sample),
                                                               int(feature)), factor))
    st.dataframe(table, hide_index=True, key="gr_table", column_config={
        **{norm: st.column_config.NumberColumn(f"{norm}: max |Δy|", format="%.2e")
           for norm in GRAD_NORMS},
        **{f"{norm}, ε = 0": st.column_config.NumberColumn(f"{norm}: max |Δy| at ε = 0",
                                                          format="%.2e") for norm in GRAD_NORMS}})
    st.info(
        "**Try this.** The shifts each norm cancels leave the output unchanged at any ε (what "
        "remains is float64 rounding, around 1e-15). Rescalings are cancelled only up to ε, which "
        "is not scaled along with σ²: set the factor to 0.01 and watch the hatched bars — ε's "
        "doing — grow, then set ε to 0 and watch them vanish. 'Scale one feature' and 'scale one "
        "row of W' give the same numbers up to rounding — they are the same change, seen from "
        "the layer or from its weights.", icon="🔍")
    scale = cached(weight_scale_gradient, x_in, weight, factor, seed)
    st.markdown(
        "**Small weights, big steps?** The two-word notes say that after normalization \"with "
        "small values, we take big steps\". What holds is about the weights before a LayerNorm: "
        "the output does not depend on their overall size, so the gradient shrinks as they "
        f"grow. {weight_scale_text(scale, c)} What that does to how fast a large W learns "
        "is a question of its own: Where the norm sits, part 3 (linked below), asks it. Small "
        "normalized *activations* make no step bigger."
    )


invariances(n, c, eps, settings.seed, explained)

st.page_link("app_pages/placement.py", icon=":material/vertical_align_center:",
             label="Where the norm sits, part 3: how a norm after a weight changes the way "
                   "that weight learns — with and without weight decay",
             query_params={"pl_wscale": f"{INIT_SCALES[-1]:g}"})

st.subheader("In PyTorch")
st.code(gradients_snippet((n, c), kind, cell, eps), language="python")

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("gradients")
