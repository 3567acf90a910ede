"""Scale and shift: what γ and β do after normalizing, and when they can undo it."""

import streamlit as st
import torch
from streamlit.delta_generator import DeltaGenerator

from lnviz import charts
from lnviz.devices import to_numpy
from lnviz.lessons.scale_shift import (
    AFFINE_NORMS,
    EPS,
    GRID_OPTIONS,
    drawn_samples,
    feature_batches,
    feature_caption,
    grid_answer,
    grid_caption,
    lstm_gate_inputs,
    per_feature_affine,
    recover_input,
    recover_next_batch,
    scale_shift_grid,
    scale_shift_snippet,
    split_bias,
    two_betas,
)
from lnviz.terms import NormKind
from lnviz.ui.cache import cached
from lnviz.ui.figures import show_figure
from lnviz.ui.live import affine_panel
from lnviz.ui.messages import refusal
from lnviz.ui.pages import folded, page_title
from lnviz.ui.params import live_values
from lnviz.ui.state import current_settings, prediction

settings = current_settings()

FEATURES = 4
SAMPLES = 16
#: Where the free γ and β start (their session keys and URL parameters): a spread of 1.5 around
#: 0.5, visibly not (1, 0).
FREE_VALUES = {"ss_gamma": 1.5, "ss_beta": 0.5}
#: Per-feature starting values: four different targets, so each column lands somewhere else.
FEATURE_GAMMA = (0.5, 1.0, 2.0, 1.0)
FEATURE_BETA = (-1.0, 0.0, 1.0, 2.0)
#: The free histogram's fixed range: wide enough for γ = ±3, β = ±3, so the axis stays put.
FREE_SPAN = (-13.0, 13.0)
FREE_BINS = 78

page_title("app_pages/scale_shift.py")
st.markdown(
    "BatchNorm (in training mode), LayerNorm, GroupNorm and InstanceNorm force every group of "
    "values to mean 0 and standard deviation 1 (up to ε); RMSNorm, which keeps the mean, to a "
    "root mean square of 1. That is good for optimization, but a layer may *want* its outputs "
    "elsewhere — a wider spread before a tanh, a positive shift before a ReLU. So a normalization "
    "layer ends with two learnable vectors, γ and β (RMSNorm does without β), applied as below. "
    "They start at γ = 1, β = 0 (no change) and are trained like any other weight."
)
st.latex(r"y = \gamma \cdot \hat x + \beta, \qquad \hat x = \frac{x - \mu}{\sqrt{\sigma^2 + "
         r"\epsilon}}")

# --- 1. The 3 × 3 grid ------------------------------------------------------------------------
st.subheader("1 · Nine choices of γ and β")
samples = st.select_slider(
    "Samples", [100, 1000, 10000], value=1000, key="ss_n", bind="query-params",
    help="How many N(0, 1) values are drawn (sidebar seed) and normalized before γ and β are "
         "applied. The formula tutorial uses 1000.",
)
with refusal():
    grid = cached(scale_shift_grid, n=samples, seed=settings.seed, bins=40,
                  device=settings.device, dtype=settings.dtype)
guess = prediction(
    f"below, the same {samples} normalized values go through y = γ·x̂ + β for three γ and three "
    "β. Where does each panel's mean go, and its standard deviation?", GRID_OPTIONS,
    key="ss_guess", what="the nine panels",
    help="Each panel has one γ and one β; x̂ is the same in all nine.")
if guess is not None:
    st.markdown(grid_answer(grid).reply(guess))
    st.latex(r"\operatorname{mean}(y) = \beta,\;\; \operatorname{std}(y) = |\gamma|"
             r"\sqrt{\tfrac{\sigma^2}{\sigma^2 + \epsilon}} \approx |\gamma|")
    st.caption("Both are taken over one group of values that shared μ and σ, and hold when γ "
               "and β are single numbers for that group, as in parts 1 and 2. With one γ_c, β_c "
               "per feature (part 3), it is a *feature's* values that end at mean β_c and "
               "std ≈ |γ_c| — under BatchNorm, whose groups are features; under LayerNorm a "
               "sample's values end at mean mean_c(γ_c·x̂_c) + mean_c(β_c), in general none of "
               "the β_c.")
    show_figure(charts.scale_shift.grid_figure, grid.centres, grid.counts, grid.gammas,
                grid.betas, grid.mean, grid.std,
                (grid.input_counts, grid.input_mean, grid.input_std), key="ss_grid_chart")
    st.caption(grid_caption(grid, samples))

#: What parts 2 to 4 say until part 1's question is answered: each shows its answer.
WAITS_FOR_PART_1 = "This part shows part 1's answer: answer the question in part 1 first."

# --- 2. Your own γ and β -------------------------------------------------------------------------
# A fragment, like sections 3 and 5: γ and β (the live controls) rerun this section and the
# PyTorch code at the end alone. It is called last, once the code's container exists.
free_box = folded("2 · Your own γ and β", "ss_part2")


@st.fragment
def free_section(box: DeltaGenerator, code: DeltaGenerator, samples: int, seed: int, device: str,
                 dtype: str, answered: bool) -> None:
    values = live_values(FREE_VALUES)
    gamma, beta = values["ss_gamma"], values["ss_beta"]
    if not answered:  # the histogram's title gives part 1's answer
        box.info(WAITS_FOR_PART_1, icon=":material/quiz:")
        # so does the code: it undoes a BatchNorm with γ = its σ and β = its μ
        code.caption("The code appears once part 1's question is answered: the γ and β that "
                     "undo a BatchNorm in it give the answer away.")
        return
    with box:
        one = cached(scale_shift_grid, (gamma,), (beta,), n=samples, seed=seed, bins=FREE_BINS,
                     span=FREE_SPAN, device=device, dtype=dtype)
        panel = affine_panel(
            to_numpy(drawn_samples(samples, seed, device, dtype)), gamma, beta, eps=EPS,
            span=FREE_SPAN, bins=FREE_BINS,
            help={"gamma": "Multiplies x̂ (a negative γ also flips the values).",
                  "beta": "Added after scaling."})
        show_figure(charts.scale_shift.histogram_figure, one.centres, one.counts[0, 0],
                    float(one.mean[0, 0]), float(one.std[0, 0]), gamma, beta,
                    key="ss_free_chart", live=dict(panel=panel, kind="affine"))
    code.code(scale_shift_snippet(gamma, beta, samples, SAMPLES, FEATURES), language="python")


# --- 3. Per feature ---------------------------------------------------------------------------
# Sections 3 and 5 are fragments too: their controls rerun that section alone.
@st.fragment
def per_feature(x: torch.Tensor) -> None:
    st.markdown(
        f"In a real layer γ and β are vectors with one entry per feature. Below, a batch of "
        f"{SAMPLES} samples × {FEATURES} features on very different scales (sidebar seed) is "
        "normalized and each feature gets its own pair. Under BatchNorm every feature column was "
        "standardized; under LayerNorm the *rows* were instead. The green markers are where "
        "each γ_c, β_c aims a column; the caption says how far each column landed from them."
    )
    norm = st.segmented_control(
        "Normalization", list(AFFINE_NORMS), default=NormKind.BATCH, required=True, key="ss_norm",
        bind="query-params",
        help="BatchNorm: μ, σ per feature (column). LayerNorm: μ, σ per sample (row).",
    )
    gammas, betas = [], []
    for c, col in enumerate(st.columns(FEATURES)):
        gammas.append(col.slider(
            f"γ_{c}", -3.0, 3.0, FEATURE_GAMMA[c], 0.1, key=f"ss_g{c}", bind="query-params",
            help=f"Scale of feature {c}: multiplies its x̂."))
        betas.append(col.slider(
            f"β_{c}", -3.0, 3.0, FEATURE_BETA[c], 0.1, key=f"ss_b{c}", bind="query-params",
            help=f"Shift of feature {c}: added after scaling."))
    with refusal():
        features = per_feature_affine(x, gammas, betas, norm)
    show_figure(charts.scale_shift.feature_figure, features.output, features.gamma, features.beta,
                features.mean, features.std, key="ss_feature_chart")
    st.caption(feature_caption(features))


x, next_x = feature_batches(settings.seed, SAMPLES, FEATURES, settings.device, settings.dtype)
with folded("3 · One γ and β per feature", "ss_part3"):
    if guess is None:
        st.info(WAITS_FOR_PART_1, icon=":material/quiz:")
    else:
        per_feature(x)

# --- 4. Undoing the normalization -------------------------------------------------------------
def undoing(x: torch.Tensor, next_x: torch.Tensor) -> None:
    """Part 4: when γ and β give the input back, on this batch and the next."""
    st.markdown(
        "Choose γ = √(σ² + ε) and β = μ, and γ·x̂ + β = (x − μ) + μ = x: the inputs those μ and σ "
        "were computed from come back exactly. The formula tutorial reads this as the layer being "
        "able to learn the identity, so that adding a normalization would never take away "
        "something the network could express. That holds only where μ and σ are the same for "
        "every input the layer sees — BatchNorm in evaluation mode, with frozen running "
        "statistics. The recovering γ and β need one value per group of the statistics. "
        "BatchNorm's statistics are per feature, so its own per-feature γ_c, β_c can undo it, for "
        "this batch. LayerNorm's are per sample: undoing it needs γ_n, β_n that change with every "
        "input, which are not parameters at all; the best per-feature pair (a least-squares fit) "
        "still misses."
    )
    with refusal():
        recoveries = {
            "BatchNorm, per-feature γ_c, β_c": recover_input(x, NormKind.BATCH),
            "LayerNorm, best per-feature γ_c, β_c": recover_input(x, NormKind.LAYER),
            "LayerNorm, per-sample γ_n, β_n": recover_input(x, NormKind.LAYER, per="sample"),
        }
        following = recover_next_batch(x, next_x)
    cols = st.columns(len(recoveries))
    for col, (name, recovery) in zip(cols, recoveries.items(), strict=True):
        col.metric(name, f"max |y − x| = {recovery.max_error:.2g}",
                   help="The largest difference between the input and the output of the "
                        f"normalization with the recovering γ and β, in {settings.dtype}.")
    show_figure(charts.scale_shift.recovery_figure,
                to_numpy(x), {name: r.output for name, r in recoveries.items()},
                {name: r.max_error for name, r in recoveries.items()}, key="ss_recovery_chart")
    st.caption("Points on the dashed diagonal are recovered exactly (up to the rounding of the "
               "sidebar's precision).")

    st.markdown(
        "**The same γ_c, β_c on the next batch.** In training mode BatchNorm normalizes every "
        "batch with that batch's own μ_c and σ_c, so each output column ends at mean β_c and "
        "deviation ≈ |γ_c| whatever the batch was: the batch's own mean and spread are gone. The "
        "γ_c, β_c fitted above give the next batch (drawn from the same population) back only as "
        "far as its statistics happen to match. In evaluation mode, with the running statistics "
        "frozen at the first batch's, the layer is one fixed straight line per feature, and the "
        "same γ_c, β_c undo it for every batch."
    )
    modes = {"training mode (the next batch's own μ, σ)": (following.training_output,
                                                           following.training_error),
             "evaluation mode (frozen μ, σ)": (following.eval_output, following.eval_error)}
    cols = st.columns(len(modes))
    for col, (name, (_, error)) in zip(cols, modes.items(), strict=True):
        col.metric(f"Next batch, {name.split(' (')[0]}", f"max |y − x| = {error:.2g}",
                   help=f"BatchNorm in {name}: γ_c = √(σ_c² + ε) and β_c = μ_c fitted on the batch "
                        f"above, applied to a new batch from the same population, in "
                        f"{settings.dtype}.")
    show_figure(charts.scale_shift.recovery_figure,
                to_numpy(next_x), {name: output for name, (output, _) in modes.items()},
                {name: error for name, (_, error) in modes.items()}, key="ss_next_chart")
    st.caption("So BatchNorm in training mode does remove something the network could otherwise "
               "express: how a batch's mean and spread differ from other batches'. LayerNorm "
               "removes each sample's own mean and spread, in training and in evaluation alike.")


with folded("4 · When γ and β can undo the normalization", "ss_part4"):
    if guess is None:
        st.info(WAITS_FOR_PART_1, icon=":material/quiz:")
    else:
        undoing(x, next_x)


# --- 5. Two betas in an LN-LSTM ---------------------------------------------------------------
@st.fragment
def two_betas_section(seed: int, device: str, dtype: str) -> None:
    st.markdown(
        "A layer-normalized LSTM normalizes the input term and the recurrent term separately and "
        "adds them: LN(Wx) + LN(Uh). If each LayerNorm keeps its own β, the two shifts are simply "
        "added — β enters after the normalization — so the network can only ever use β₁ + β₂. "
        "One of the two vectors is redundant; a single bias b after the sum does the same job."
    )
    st.latex(r"\mathrm{LN}(Wx;\,\beta_1) + \mathrm{LN}(Uh;\,\beta_2) "
             r"= \mathrm{LN}(Wx;\,0) + \mathrm{LN}(Uh;\,0) + (\beta_1 + \beta_2)")
    share = st.slider(
        "Share of the bias in β₁", 0.0, 1.0, 0.3, 0.05, key="ss_share", bind="query-params",
        help="β₁ = share · b and β₂ = (1 − share) · b for a fixed bias b: the split changes, the "
             "sum does not.",
    )
    wx, uh, bias = lstm_gate_inputs(seed=seed, device=device, dtype=dtype)
    beta1, beta2 = split_bias(bias, share)
    betas_result = two_betas(wx, uh, beta1, beta2)
    show_figure(charts.scale_shift.two_betas_figure, betas_result.beta1, betas_result.beta2,
                betas_result.separate[0], betas_result.merged[0], key="ss_betas_chart")
    st.success(f"Largest difference between the two sides over the whole batch: "
               f"{betas_result.max_difference:.2g} — zero up to {dtype} rounding, whatever "
               "the split.", icon="✅")


with folded("5 · Two betas that are really one (LN-LSTM)", "ss_part5"):
    two_betas_section(settings.seed, settings.device, settings.dtype)

st.info(
    "**Try this.** "
    # part 2's sentence ties the deviation to |γ|, part 1's answer: it waits for it
    + ("Open part 2 and set γ to −1: the histogram flips but its deviation stays 1 (up to ε). "
       if guess is not None else "")
    + "In part 3, switch to LayerNorm and watch the orange markers leave the green "
    "targets; the caption names the feature that misses most. In part 4, change the sidebar's "
    "seed: the next batch's miss in training mode changes with the draw, the evaluation-mode "
    "one stays at rounding. In part 5, move the share from 0 to 1: β₁ and β₂ trade places, "
    "and the gate values on the right do not move at all.", icon="🧪")

free_section(free_box, folded("The same in PyTorch", "ss_code").empty(), samples, settings.seed,
             settings.device, settings.dtype, guess is not None)

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("scale_shift")
