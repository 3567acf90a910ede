"""ε and numerical stability: tiny variances, ε = 0, low precision and the one-pass variance
E[x²] − E[x]²."""

import math

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lnviz import charts
from lnviz.devices import to_numpy
from lnviz.lessons.common import defined, short
from lnviz.lessons.epsilon import (
    CANCELLATION_OFFSET,
    CANCELLATION_OPTIONS,
    VECTORS,
    cancellation_answer,
    cancellation_sweep,
    epsilon_snippet,
    epsilon_steps,
    epsilon_sweep,
    fixed_upstream_gradient,
    formula_module_without_epsilon,
    precision_sweep,
    stability_vector,
)
from lnviz.ui.cache import cached
from lnviz.ui.figures import show_figure
from lnviz.ui.live import sweep_panel
from lnviz.ui.messages import refusal
from lnviz.ui.pages import page_title
from lnviz.ui.params import live_values
from lnviz.ui.state import answered, current_settings, prediction

settings = current_settings()


def _variance(name: str) -> float:
    return float(np.var(stability_vector(name).astype(np.float64)))


def _vector(name: str) -> str:
    return "[" + ", ".join(f"{v:g}" for v in stability_vector(name).astype(np.float64)) + "]"


#: The ε the formula tutorial's example adds.
TUTORIAL_EPS = 1e-8


def _tiny(eps: float) -> float:
    """The tiny vector's largest |x̂| at ``eps``, in float64 (the sentence's numbers)."""
    return cached(epsilon_steps, stability_vector("tiny"), eps, dtype="float64").max_output


VECTOR_HELP = {
    "tiny": f"the formula tutorial's {_vector('tiny')}: σ² = {short(_variance('tiny'))}",
    "constant": f"{_vector('constant')}: no spread at all, σ² = {short(_variance('constant'))}",
    "ordinary": f"{_vector('ordinary')}: σ² = {short(_variance('ordinary'))}, far above any "
                "usual ε",
}

page_title("app_pages/epsilon.py")
st.markdown(
    "LayerNorm divides by the row's standard deviation. That is harmless for ordinary rows, "
    "but a row whose values barely differ has a deviation near zero, and dividing by nearly "
    "zero blows tiny differences (often just rounding noise) up to order one, with gradients "
    "to match. The small ε under the square root sets a floor on the divisor. This page shows "
    "where that floor starts to matter, what happens without it, and two other ways finite "
    "precision can spoil a normalization."
)
st.latex(r"\hat x_i = \frac{x_i - \mu}{\sqrt{\sigma^2 + \epsilon}}, \qquad "
         r"\sigma^2 = \frac{1}{H}\sum_{i=1}^{H}(x_i - \mu)^2")

# --- 1. ε against a tiny variance -------------------------------------------------------------
# A fragment, like sections 2 and 3: the vector and ε (a live control) rerun this section and
# the PyTorch code at the end alone. It is called last, once the code's container
# exists.
sweep_box = st.container()
#: The sweep's ε (its session key and URL parameter), a live control, and where it starts:
#: PyTorch's default.
SWEEP_VALUES = {"ep_eps": 1e-5}


@st.fragment
def sweep_section(box: DeltaGenerator, code: DeltaGenerator, seed: int, device: str,
                  dtype: str) -> None:
    code = code.empty()  # the code's place first: a refusal below ends the run before it
    with box:
        st.subheader("1 · How ε competes with σ²")
        vector = st.segmented_control(
            "Vector", list(VECTORS), default="tiny", required=True, key="ep_vec",
            bind="query-params",
            help="tiny: " + VECTOR_HELP["tiny"] + ". constant: " + VECTOR_HELP["constant"] +
                 ". ordinary: " + VECTOR_HELP["ordinary"] + ".",
        )
        eps = live_values(SWEEP_VALUES)["ep_eps"]
        st.caption(f"**{vector}**: {VECTOR_HELP[vector]}. Computed in {dtype} on "
                   f"{device} (sidebar).")
        x = stability_vector(vector)
        with refusal():
            sweep = cached(epsilon_sweep, x, seed=seed, device=device, dtype=dtype)
            steps = epsilon_steps(x, eps, seed=seed, device=device, dtype=dtype)

        with refusal():
            at = cached(epsilon_sweep, x, (eps,), seed=seed, device=device, dtype=dtype)
            panel = sweep_panel(
                x, to_numpy(fixed_upstream_gradient(len(x), seed)), eps,
                (at.max_output[0], at.grad_norm[0]),
                help="The ε added to σ² (the dotted line on the sweep). 1e-05 is PyTorch's "
                     "default; 0 removes the floor entirely — try it on the constant vector.")
        show_figure(charts.epsilon.sweep_figure, sweep.eps, sweep.max_output, sweep.grad_norm,
                    sweep.variance, eps, key="ep_sweep_chart",
                    live=dict(panel=panel, kind="sweep"))
        st.caption(sweep.caption())
        if sweep.nonfinite:
            st.warning(f"{sweep.nonfinite} points of the sweep overflowed {dtype} (inf or NaN) "
                       "and are missing from the plot: float16 stops at 65 504, and a small ε "
                       "makes the gradient larger than that.", icon="⚠️")
        if sweep.variance > 0:
            st.markdown(
                f"Here σ² = {sweep.variance:.3g}. At ε = σ² the divisor is √(2σ²), so the output "
                f"is 1/√2 ≈ 0.71 of its ε = 0 size. With ε = {eps:g} the largest |x̂| is "
                f"**{steps.max_output:.4g}**."
            )
        else:
            st.markdown(
                "This vector has σ² = 0 and x − μ = 0 everywhere, so for every ε > 0 the output "
                "is 0/√ε = 0. Its gradient is not zero, though: it grows like 1/√ε as ε shrinks, "
                "because a vanishing ε leaves nothing to limit how strongly a small change in x "
                "is amplified. (The formula tutorial credits ε with “meaningful outputs and "
                "gradients” for a constant input. ε keeps both finite, not meaningful: every "
                "constant vector, whatever its value, comes out 0 (then β), and the gradient is "
                "1/√ε times the upstream gradient's deviation from its mean: "
                + (f"{1 / math.sqrt(eps):.3g}× it at ε = {eps:g}.)" if eps > 0 else
                   "at ε = 0, 0/0 makes both NaN.)")
            )

        st.dataframe(steps.text_table(), hide_index=True, key="ep_steps")
        residue = steps.residue()
        if residue:
            st.caption(residue)
        note = steps.explain(dtype)
        if note:
            st.warning(note, icon="⚠️")

        cell = cached(formula_module_without_epsilon, x)
        st.markdown("**The formula tutorial's “Error without epsilon”.** Its example divides by "
                    "√σ² with no "
                    "ε inside `try` … `except Exception`, to print an error. On this vector it "
                    "prints:")
        st.code(cell.printed, language="text")
        st.caption(cell.explain())
        if vector == "tiny":  # the tutorial's own fix, named: its ε outweighs its example's σ²
            var = _variance("tiny")
            st.markdown(
                f"Its fix, ε = {short(TUTORIAL_EPS)}, is {TUTORIAL_EPS / var:.3g} times its own "
                f"example's σ² = {short(var)}: the largest |x̂| falls from {short(_tiny(0.0))} "
                f"to {short(_tiny(TUTORIAL_EPS))}, so ε, not the data, sets the output's scale. "
                "ε leaves x̂ as it is only while it is small beside σ².")
    code.code(epsilon_snippet(vector, eps, dtype), language="python")


# --- 2. Precision -----------------------------------------------------------------------------
# Sections 2 and 3 are fragments: their controls rerun that section alone.
@st.fragment
def precision_section(seed: int, device: str) -> None:
    st.subheader("2 · Half precision: how many digits survive")
    st.markdown(
        "float16 keeps about 3 significant decimal digits and overflows above 65 504; bfloat16 "
        "keeps the float32 range but only about 2–3 digits; float32 about 7. Each point below is "
        "the worst difference between LayerNorm computed from the input rounded to that dtype and "
        "LayerNorm of the exact float64 input (statistics are accumulated in float32, as torch "
        "does). Values offset from zero lose their *spread* to rounding: the input's step size "
        "grows with the offset, while σ stays 1."
    )
    cols = st.columns(2)
    axis = cols[0].radio(
        "Vary", ["offset", "size"], horizontal=True, key="ep_axis", bind="query-params",
        help="offset: N(0, 1) values plus an offset from 0.01 to 10⁶. size: the row length, "
             "from 4 to 65 536 values.",
    )
    if axis == "offset":
        size = cols[1].select_slider(
            "Row length", [16, 64, 256, 1024, 4096], value=256, key="ep_psize",
            bind="query-params", help="How many values each row holds while the offset varies.")
        options = {"size": size}
    else:
        offset = cols[1].select_slider(
            "Offset from zero", [0.0, 1.0, 10.0, 100.0, 1000.0], value=0.0, key="ep_poff",
            bind="query-params", help="Added to every value while the row length varies.")
        options = {"offset": offset}
    with refusal():
        precision = cached(precision_sweep, axis, seed=seed, device=device, **options)
    title = "offset from zero" if axis == "offset" else "row length H"
    show_figure(charts.epsilon.precision_figure, precision.values, precision.errors, title,
                key="ep_precision_chart")
    st.caption(precision.caption())


precision_section(settings.seed, settings.device)


# --- 3. Cancellation --------------------------------------------------------------------------
@st.fragment
def cancellation_section(seed: int) -> None:
    st.subheader("3 · One pass or two: the variance as E[x²] − E[x]²")
    st.markdown(
        "Expanding the variance gives a one-pass formula, σ² = E[x²] − E[x]²: one pass over "
        "the data for both sums. The alternatives subtract the mean first (two passes), or "
        f"use {defined('Welford')}. For "
        "data near 10 000 with spread 1, both terms of the one-pass formula are about 10⁸ and "
        "σ² is about 1."
    )
    st.latex(r"\underbrace{\tfrac{1}{H}\textstyle\sum x_i^2 - \mu^2}_{\text{one pass}}"
             r"\quad\text{vs}\quad"
             r"\underbrace{\tfrac{1}{H}\textstyle\sum (x_i - \mu)^2}_{\text{two-pass}}"
             r"\quad\text{vs}\quad"
             r"\underbrace{M_{2,k} = M_{2,k-1} + (x_k - \mu_{k-1})(x_k - \mu_k)}_{\text{Welford}}")
    cancel_size = st.select_slider(
        "Row length", [16, 64, 256, 1024], value=256, key="ep_csize", bind="query-params",
        help="How many values (offset + N(0, 1)) each variance is taken over, in float32.")
    cancellation = cached(cancellation_sweep, size=cancel_size, seed=seed)
    guess = prediction(
        f"on {cancel_size} values near {CANCELLATION_OFFSET:,.0f} with spread 1, how far from "
        "the true σ² does the one-pass E[x²] − E[x]² land in float32?", CANCELLATION_OPTIONS,
        key="ep_cancel_guess", what="the three methods across offsets",
        help="Both sums are taken in float32 over the same values; the truth is their variance "
             "in float64.")
    if guess is None:
        return
    st.markdown(cancellation_answer(cancellation).reply(guess))
    show_figure(charts.epsilon.cancellation_figure, cancellation.offsets,
                cancellation.relative_error, cancellation.variances, key="ep_cancel_chart")
    st.caption(
        "Always float32, whatever the sidebar says, so the three methods meet the same rounding. "
        "The reference is the two-pass variance in float64 of the very numbers float32 stored. "
        "× marks a negative variance from the naive formula; hover a point for the σ² it "
        "computed. lnviz's readable norms (impl=\"scratch\") take the corrected two-pass "
        "variance; impl=\"fast\", used for large tensors, leaves it to torch's fused kernels. "
        + cancellation.summary()
    )


cancellation_section(settings.seed)

st.info(
    "**Try this.** On the tiny vector, slide ε from 1e-12 up to 1 and watch the table: the "
    f"largest |x̂| stays near {short(_tiny(1e-12))} until ε approaches σ² = "
    f"{short(_variance('tiny'))}, then shrinks (at the formula tutorial's ε = "
    f"{short(TUTORIAL_EPS)} it is {short(_tiny(TUTORIAL_EPS))}). Choose the constant vector "
    "and set ε to 0 to see the 0/0. "
    "Switch the sidebar's precision to float16 and compare the gradient sizes."
    # part 3's "Try this" names its answer (the naive variance fails): it waits for the guess
    + (" In part 3, change the row length: does the offset where the naive variance first fails "
       "move?" if answered("ep_cancel_guess") is not None else ""), icon="🧪")

st.subheader("The same in PyTorch")
sweep_section(sweep_box, st.empty(), settings.seed, settings.device, settings.dtype)

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("epsilon")
