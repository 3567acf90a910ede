"""The geometry of LayerNorm: vectors of 2 or 3 features on their way to a circle."""

import streamlit as st

from lnviz import charts
from lnviz.lessons.geometry import (
    FEATURES,
    GEOMETRY_NORMS,
    LANDING_OPTIONS,
    SOURCES,
    closeup_caption,
    facts,
    geometry_snippet,
    geometry_view,
    input_vectors,
    landing_answer,
    path_caption,
    target_shapes,
    torch_check,
    vector_table,
)
from lnviz.limits import GEOMETRY_MAX_VECTORS
from lnviz.terms import NormKind
from lnviz.ui.cache import cached
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import plain, refusal
from lnviz.ui.pages import page_title
from lnviz.ui.params import eps_slider
from lnviz.ui.state import current_settings, prediction

settings = current_settings()

#: Where γ and β start when switched on: a different stretch per axis and a shift, so that the
#: circle visibly becomes a shifted ellipse.
GAMMA = (2.0, 1.0, 0.5)
BETA = (1.0, 0.0, -0.5)
TYPED = "1, 2, 3; 3, 1, 2; 0, 4, 1; 2, 2, 5"
SUBSCRIPTS = "₁₂₃"

page_title("app_pages/geometry.py")
st.markdown(
    "LayerNorm of a vector of H features is two moves in space. Subtracting the mean projects "
    "x onto the plane Σx = 0, along the diagonal (1, …, 1). Dividing by σ then slides the point "
    "along its ray from 0 to the sphere of radius √H, because |x − μ|² = H·σ². So x̂ ends on "
    "the set where that plane meets that sphere (for any x whose features are not all "
    "equal): at H = 3, a circle. ε pulls it inside, to "
    "√H·√(σ²/(σ² + ε)). With H = 2 or 3 you can watch it."
)
st.latex(r"\hat x = \frac{x - \mu\,\mathbf{1}}{\sqrt{\sigma^2 + \epsilon}}")
st.latex(r"\sum_i \hat x_i = 0, \qquad "
         r"\lVert \hat x \rVert = \sqrt{H}\,\sqrt{\frac{\sigma^2}{\sigma^2 + \epsilon}}")

cols = st.columns([4, 2, 4])
source = cols[0].segmented_control(
    "Input", list(SOURCES), format_func=SOURCES.__getitem__, default="sentences", required=True,
    key="gm_src", bind="query-params",
    help="The two sentences' seven token embeddings (\"I\" = [1, 2, 3] … \"powerful\" = "
         "[7, 13, 19]), "
         "random N(0, 1) vectors (sidebar seed), or vectors you type.",
)
h = cols[1].segmented_control(
    "H (features)", list(FEATURES), default=3, required=True, key="gm_h", bind="query-params",
    help="How many features each vector has: 3 draws a 3-D scene, 2 a plane. H = 2 keeps the "
         "first two features of each vector.",
)
norm = cols[2].segmented_control(
    "Normalization", list(GEOMETRY_NORMS), default=NormKind.LAYER, required=True, key="gm_norm",
    bind="query-params",
    help="LayerNorm: μ and σ of each vector. RMSNorm: only the root-mean-square of each "
         "vector, no centring. BatchNorm: μ and σ of each feature across the vectors.",
)
count, text = 8, ""
if source == "random":
    count = st.slider(
        "Number of vectors", 2, GEOMETRY_MAX_VECTORS, 8, key="gm_n", bind="query-params",
        help="How many vectors of 3 N(0, 1) features are drawn with the sidebar's seed.")
elif source == "typed":
    text = st.text_input(
        "Your vectors", TYPED, max_chars=200, key="gm_text", bind="query-params",
        help="Vectors separated by ';' (or one per line), numbers by commas or spaces, e.g. "
             "1, 2, 3; 3, 1, 2. Each needs at least H numbers; extra ones are left out.")
cols = st.columns([3, 2])
eps = eps_slider(
    cols[0], key="gm_eps", value=0.0,
    help="Added to σ² (RMSNorm: to the mean square) under the square root. At 0 LayerNorm "
         "puts x̂ exactly at distance √H from 0 on its plane (RMSNorm: anywhere at √H), "
         "except a constant vector (RMSNorm: a zero one), where 0/0 gives NaN; "
         "raise it towards 1 to pull the points inside.",
)
affine = cols[1].toggle(
    "γ and β", False, key="gm_affine", bind="query-params",
    help="Scale and shift after normalizing, one γ and β per feature: y = γ⊙x̂ + β.",
)
gamma = beta = None
if affine:
    gcols = st.columns(h)
    gamma = tuple(gcols[c].slider(
        f"γ{SUBSCRIPTS[c]}", -3.0, 3.0, GAMMA[c], 0.1, key=f"gm_g{c}", bind="query-params",
        help=f"Stretches x̂ along axis x{SUBSCRIPTS[c]}.") for c in range(h))
    if norm == NormKind.RMS:
        st.caption("RMSNorm has no β.")
    else:
        beta = tuple(gcols[c].slider(
            f"β{SUBSCRIPTS[c]}", -3.0, 3.0, BETA[c], 0.1, key=f"gm_b{c}", bind="query-params",
            help=f"Shifts the output along axis x{SUBSCRIPTS[c]}.") for c in range(h))

with refusal():
    inputs = cached(input_vectors, source, h, count=count, seed=settings.seed, text=text)
    view = cached(geometry_view, inputs.values, inputs.labels, norm, eps, gamma, beta,
                  device=settings.device, dtype=settings.dtype)
if inputs.dropped:
    st.caption(f"H = {h}: the first {h} of each vector's {h + inputs.dropped} features.")

# Before the figures, which answer it: where these vectors land (asked where two or more land)
answer = landing_answer(view)
guess = None
if answer is not None:
    where = "at ε = 0" if eps == 0 else f"with ε = {eps:g}"
    guess = prediction(
        f"under {norm} {where}, where do the {int(view.finite.sum())} vectors' x̂ land?",
        LANDING_OPTIONS, key=f"gm_guess_{norm}", what="the figures",
        context=(inputs.values.tobytes(), eps, gamma, beta),
        help="Points that land within rounding of each other count as one point.")
    if guess is not None:
        st.markdown(answer.reply(guess))


# --- 1 and 2, and what to try next: once the question is answered --------------------------
if answer is None or guess is not None:
    st.subheader("1 · Centre, then scale")
    far = cached(target_shapes, h, view.reach)
    show_figure(charts.geometry.path_figure, view.norm, view.inputs, view.centred, view.x_hat,
                view.labels, far.plane, far.sphere, far.faces, far.circle, key="gm_path",
                caption=plain(path_caption(view)))

    # --- 2. Up close
    st.subheader("2 · Where x̂ lands")
    near = cached(target_shapes, h, view.closeup_reach, view.gamma, view.beta)
    show_figure(charts.geometry.closeup_figure, view.norm, view.x_hat, view.labels, near.plane,
                near.sphere, near.faces, near.circle, view.output if view.affine else None,
                near.sphere_out if view.affine else None, near.circle_out if view.affine else None,
                key="gm_closeup", caption=plain(closeup_caption(view)))
    st.markdown("\n".join(f"- {plain(line)}" for line in facts(view)))
    st.caption(plain(torch_check(view)))
    st.dataframe(vector_table(view), hide_index=True, key="gm_table")

    st.info(
        # each of these asks the landing question again (its context changes): no answers here
        "**Try this.** On the two sentences under LayerNorm, slide ε up and answer again: do "
        "the tokens still share one point? Back at ε = 0, set H = 2 and answer again. Then pick "
        "RMSNorm and BatchNorm and answer the question for each: which of the two sentences' "
        "tokens still share a point? At H = 3, turn on γ and β: what does the circle become?",
        icon="🧪")

st.subheader("The same in PyTorch")
st.code(geometry_snippet(inputs.values, norm, eps, gamma, beta, settings.dtype),
        language="python")
