"""BatchNorm vs LayerNorm: which values share statistics, how one sample's output depends on its
batch, and what changes between training and evaluation."""

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lnviz import charts
from lnviz.lessons.bn_vs_ln import (
    MATES_OPTIONS,
    POPULATION_MEAN,
    POPULATION_VAR,
    band_caption,
    batch_dependence,
    batch_mates,
    batch_noise_text,
    batch_size_sweep,
    bn_vs_ln_snippet,
    cheat_sheet,
    fixed_sample,
    mates_answer,
    modes_caption,
    running_statistics,
    sharing_cubes,
    variance_table,
)
from lnviz.limits import BN_VS_LN_MAX_BATCH
from lnviz.nn import MODEL_LABELS
from lnviz.terms import Layout
from lnviz.train import SWEEP_DEFAULTS, SWEEPS
from lnviz.ui.cache import cached
from lnviz.ui.figures import show_figure
from lnviz.ui.live import batches_panel
from lnviz.ui.messages import refusal
from lnviz.ui.pages import folded, page_title
from lnviz.ui.params import live_values
from lnviz.ui.state import answered, current_settings, keep_in_range, prediction

MOMENTA = [0.01, 0.05, 0.1, 0.2, 0.5, 1.0, None]

settings = current_settings()
page_title("app_pages/bn_vs_ln.py")
st.caption("The same recipe, different company: both subtract a mean and divide by a standard "
           "deviation, but they take those statistics over different values. The URL keeps "
           "your settings.")
st.markdown(
    "**BatchNorm** computes one μ and σ per *feature*, pooling that feature across every sample "
    "of the batch (and every position of a sequence or image). **LayerNorm** computes one μ and "
    "σ per *sample*, pooling its own features and nothing else. What follows from that single "
    "difference is what this page asks about."
)
st.latex(r"\text{BatchNorm: } \mu_c = \frac{1}{m}\sum_{j\,\in\,\text{batch}} x_{j,c}"
         r"\qquad\text{LayerNorm: } \mu_j = \frac{1}{C}\sum_{c\,\in\,\text{features}} x_{j,c}"
         r"\qquad y = \gamma\,\frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta")

# --- 1. Who shares a μ and σ -------------------------------------------------------------------
st.subheader("1 · Which values share one μ and σ")
shape_cols = st.columns([3, 2, 2, 2, 2])  # the layout's three options need the room
# C is the page's: the experiments below have C features too. The rest of the section is a
# fragment (sharing_section): its controls rerun the cubes alone.
c = shape_cols[2].slider("C (features / channels)", 2, 32, 6, key="bl_c", bind="query-params",
                         help="Features per token or channels per image: the cube's depth. Also "
                              "the feature count of the experiments below.")


@st.fragment
def sharing_section(cols: list[DeltaGenerator], c: int) -> None:
    layout = cols[0].segmented_control(
        "Tensor layout", [Layout.NC, Layout.NLC, Layout.NCHW], default=Layout.NCHW, required=True,
        key="bl_layout", bind="query-params",
        help="NC = (batch, features), a plain table; NLC = (batch, sequence, features), tokens "
             "as in a transformer; NCHW = (batch, channels, height, width), images.",
    )
    n = cols[1].slider("N (batch size)", 1, 16, 4, key="bl_n", bind="query-params",
                       help="Samples in the batch: the cube's width.")
    # The sizes' places, written on every run whatever the layout: a fragment rerun may write
    # only where the page's last full run saw it write (a layout of NC there, then NLC here,
    # raised StreamlitInvalidLayoutContextError).
    sizes = [cols[3].container(), cols[4].container()]
    if layout == Layout.NLC:
        length = sizes[0].slider("L (sequence length)", 1, 32, 5, key="bl_l",
                                bind="query-params", help="Tokens per sequence: the cube's height.")
        shape, positions, axis = (n, length, c), length, "L"
    elif layout == Layout.NCHW:
        h = sizes[0].slider("H (height)", 1, 8, 3, key="bl_h", bind="query-params",
                           help="Image height; the cube's height is H·W.")
        w = sizes[1].slider("W (width)", 1, 8, 3, key="bl_w", bind="query-params",
                           help="Image width; the cube's height is H·W.")
        shape, positions, axis = (n, c, h, w), h * w, "H·W"
    else:
        shape, positions, axis = (n, c), 1, ""
    divisors = [g for g in range(1, c + 1) if c % g == 0]
    keep_in_range("bl_groups", divisors)
    groups = st.columns([3, 2])[0].select_slider(
        "GroupNorm: number of groups G", divisors, value=divisors[1], key="bl_groups",
        bind="query-params",
        help=f"GroupNorm splits the {c} channels into G groups of C/G, each pooled with all "
             "of a sample's positions. On images G = 1 is LayerNorm over C, H, W and G = C is "
             "InstanceNorm; on tokens (NLC) G = 1 pools every token of a sample, more than "
             "LayerNorm's one token.",
    )
    with refusal(icon=":material/block:"):
        cubes = sharing_cubes(shape, layout, groups)
    show_figure(charts.bn_vs_ln.sharing_figure,
                (n, c, positions), [cube.norm for cube in cubes], [cube.cells for cube in cubes],
                [cube.note for cube in cubes], ("N", "C", axis), key="bl_cubes")
    st.caption(
        "After Wu & He (2018), *Group Normalization*, Figure 2: each cube is your tensor with "
        "the batch N across, the channels C going back and the positions (L or H·W) up. The "
        "blue cells are pooled into the μ and σ that normalize the front-top-left value. For "
        "tokens (NLC), LayerNorm pools one token's features; for images it pools the whole "
        "image, as in the paper."
    )


sharing_section(shape_cols, c)

# --- 2. Batch dependence -----------------------------------------------------------------------
with folded("2 · One sample, many batches", "bl_part2"):
    st.markdown(
        "Follow one fixed sample of C features through a batch of shape (batch size, C) and "
        "re-draw the *other* samples of its batch, at batch sizes from 1 to "
        f"{BN_VS_LN_MAX_BATCH}. Each re-drawn batch grows by keeping its mates and adding more: "
        "the batch of 8 is the batch of 4 and four more samples."
    )
    batch_cols = st.columns(2)
    redraws = batch_cols[0].slider(
        "Re-drawn batches", 2, 20, 8, key="bl_r", bind="query-params",
        help="How many batches to try: each keeps the fixed sample and draws new batch-mates.")
    keep_in_range("bl_feat", range(c), reset_to=0)
    feature = batch_cols[1].slider(
        "Feature to follow", 0, c - 1, 0, key="bl_feat", bind="query-params",
        help="The feature plotted against batch size here and in the training steps below.")
    sample = fixed_sample(c, settings.seed)
    with refusal(icon=":material/block:"):
        sweep = cached(batch_size_sweep, sample, redraws=redraws, seed=settings.seed,
                       device=settings.device, dtype=settings.dtype)
    mates_guess = prediction(
        "in training mode, re-draw the fixed sample's batch-mates. Whose output for the fixed "
        "sample changes?",
        MATES_OPTIONS, key="bl_guess", what="the fixed sample in every re-drawn batch",
        help="The fixed sample stays as it is; only the other samples of its batch are drawn "
             "again.")
    if mates_guess is not None:
        st.markdown(mates_answer(sweep).reply(mates_guess))
    batch_box = st.container()  # the batch size's own views: batch_section (below) fills it
    if mates_guess is not None:
        show_figure(charts.bn_vs_ln.batch_sizes_figure, sweep.batch_sizes,
                    sweep.batch_norm[:, :, feature], sweep.layer_norm[:, :, feature], feature,
                    key="bl_sweep")
        st.caption(band_caption(sweep, feature))


#: The batch size (its session key and URL parameter), a live control: where it starts, and its
#: range (a whole number).
BATCH_VALUES = {"bl_b": 8}
BATCH_RANGE = {"bl_b": (1, BN_VS_LN_MAX_BATCH, 1)}


# The PyTorch code at the end follows the batch size and the training settings of section 3, two
# fragments that each redraw it: so it reads both fragments' controls from the session (a
# fragment rerun keeps the arguments of the page's last full run).
SNIPPET_CONTROLS = ("bl_b", "bl_steps", "bl_mb", "bl_mom")


def show_snippet(code: DeltaGenerator, features: int) -> None:
    """Write the page's PyTorch code into ``code``, the place each fragment keeps in the
    ``st.empty`` both write: the one that ran last shows. On the first run the first fragment
    finds the other's control without a value yet and leaves its place empty. Until part 2's
    question (``bl_guess``) is answered, a line says why the code is not there."""
    state = st.session_state
    if state.get("bl_guess") is None:  # the code prints part 2's answer: it waits for it
        code.caption("The code appears once part 2's question is answered: it prints the "
                     "answer.")
        return
    if not all(key in state for key in SNIPPET_CONTROLS):
        return
    batch_size, steps, minibatch, momentum = (state[key] for key in SNIPPET_CONTROLS)
    code.code(bn_vs_ln_snippet(features, batch_size, steps, minibatch, momentum, settings.seed),
              language="python")


# A fragment: the batch size (a live control) reruns only what it changes, the views in
# batch_box and the PyTorch code at the end; it is called last, with training_section, once the
# containers it fills exist.
@st.fragment
def batch_section(box: DeltaGenerator, code: DeltaGenerator, sample: np.ndarray, redraws: int,
                  answered: bool) -> None:
    code = code.empty()  # the code's place first: a refusal below ends the run before it
    batch_size = int(live_values(BATCH_VALUES, BATCH_RANGE)["bl_b"])
    if not answered:  # the views answer part 2's question: they wait for the learner's guess
        show_snippet(code, sample.size)
        return
    with box, refusal(icon=":material/block:"):
        dependence = cached(batch_dependence, sample, batch_size, redraws, settings.seed,
                            device=settings.device, dtype=settings.dtype)
        refused = cached(batch_dependence, sample, 1, 1, settings.seed, device=settings.device,
                         dtype=settings.dtype)
        mates = cached(batch_mates, sample.size, redraws, settings.seed)
        panel = batches_panel(
            sample, mates, dependence, refused,
            help="Samples per batch, the fixed one included. At 1, BatchNorm in training mode "
                 "has a single value per feature and refuses, as torch does.")
        show_figure(charts.bn_vs_ln.redraws_figure, dependence.batch_norm,
                    dependence.layer_norm, dependence.refusal or refused.refusal,
                    key="bl_fixed", live=dict(panel=panel, kind="redraws"))
        if dependence.refusal:
            st.warning(f"**lnviz:** {dependence.refusal}.  \n**torch.nn.functional.batch_norm:** "
                       f"{dependence.torch_refusal}.  \nLayerNorm is happy with a batch of one: "
                       "it never looks at the other samples.", icon=":material/warning:")
        else:
            metrics = st.columns(2)
            metrics[0].metric("BatchNorm: largest change across re-draws",
                              f"{dependence.batch_norm_spread:.3g}")
            metrics[1].metric("LayerNorm: largest change across re-draws",
                              f"{dependence.layer_norm_spread:.3g}")
    show_snippet(code, sample.size)


# --- 3. Training and evaluation ----------------------------------------------------------------
# A fragment too: k, the momentum and m rerun this section and the PyTorch code alone. It is
# called last, beside batch_section.
training_box = folded("3 · Training mode vs evaluation mode", "bl_part3")


@st.fragment
def training_section(box: DeltaGenerator, code: DeltaGenerator, c: int, feature: int, seed: int,
                     device: str, dtype: str) -> None:
    code = code.empty()  # the code's place first: a refusal below ends the run before it
    if answered("bl_guess") is None:  # training mode's use of the batch: part 2's
        box.info("This part waits for part 2's question: answer it first (open “2 · One "
                 "sample, many batches”).", icon=":material/quiz:")
        show_snippet(code, c)
        return
    with box:
        st.markdown(
            "While training, BatchNorm normalizes with the current mini-batch's μ and σ² and "
            "keeps running averages of them for later; in evaluation it uses those running "
            "averages instead, so that a single test sample gets a deterministic answer. Step "
            f"through k mini-batches drawn from a population with μ = {POPULATION_MEAN:g}, "
            f"σ² = {POPULATION_VAR:g} and watch the running values (starting at 0 and 1) "
            "approach it. (The transformer article lists “batch size is 1 (during "
            "inference)” among BatchNorm's problems. In evaluation mode a batch of one is no "
            "problem: the running averages normalize each sample alone, whatever the batch. "
            "The batch of one that fails is in training mode, where each value is its own "
            "mean and torch refuses it.)"
        )
        st.page_link("app_pages/efficientnet.py", icon=":material/photo_camera:",
                     label="The same in a real image network: a photo alone in training mode, "
                           "and its batch-mates (BatchNorm in a real network)")
        st.latex(r"\hat\mu \leftarrow (1-\alpha)\,\hat\mu + \alpha\,\mu_B \qquad "
                 r"\hat\sigma^2 \leftarrow (1-\alpha)\,\hat\sigma^2 "
                 r"+ \alpha\,\frac{m}{m-1}\,\sigma_B^2"
                 r"\qquad \alpha = \text{momentum, or } 1/k \text{ when momentum is None}")
        cols = st.columns(3)
        steps = cols[0].slider("Training steps k", 1, 100, 10, key="bl_steps",
                               bind="query-params",
                               help="How many mini-batches BatchNorm sees in training mode.")
        momentum = cols[1].select_slider(
            "Momentum", MOMENTA, value=0.1, key="bl_mom", bind="query-params",
            format_func=lambda m: "None" if m is None else f"{m:g}",
            help="Weight of each new mini-batch in the running averages (torch's default is "
                 "0.1). None gives the plain average of all mini-batches so far (momentum = 1/k).")
        minibatch = cols[2].slider(
            "Mini-batch size m", 2, 64, 4, key="bl_mb", bind="query-params",
            help="Samples per training mini-batch. Small m: noisy batch statistics, and a big "
                 "gap between the biased (÷m) and unbiased (÷(m−1)) variance.")
        with refusal(icon=":material/block:"):
            stats = cached(running_statistics, steps, minibatch, c, momentum, seed,
                           device=device, dtype=dtype)
        show_figure(charts.bn_vs_ln.running_stats_figure,
                    stats.batch_mean[:, feature], stats.batch_var[:, feature],
                    stats.batch_var_unbiased[:, feature], stats.running_mean[:, feature],
                    stats.running_var[:, feature], POPULATION_MEAN, POPULATION_VAR,
                    key="bl_running")
        st.markdown(
            f"**Biased or unbiased?** A mini-batch is normalized with its biased variance (÷m, "
            f"the spread of exactly these values), but the running σ² is fed the unbiased one "
            f"(÷(m−1) = ×{minibatch / (minibatch - 1):.3g} here), because it estimates the "
            "population's variance from a small sample. The last mini-batch, feature by "
            "feature:"
        )
        st.dataframe(variance_table(stats), hide_index=True, key="bl_vartable")
        show_figure(charts.bn_vs_ln.modes_figure, stats.train_output, stats.eval_output,
                    stats.layer_norm_output, key="bl_traineval")
        st.caption(modes_caption(stats))
    show_snippet(code, c)


#: What parts 4 and 5 say until part 2's question is answered: they quote its measurements.
WAITS_FOR_PART_2 = ("This part quotes what part 2 measures: answer part 2's question first "
                    "(open “2 · One sample, many batches”).")

# --- 4. Why it helps -----------------------------------------------------------------------------
with folded("4 · Why does BatchNorm help? The story and the evidence", "bl_part4"):
    st.markdown(
        "**Internal covariate shift: the original story.** Ioffe and Szegedy (2015) introduced "
        "BatchNorm to reduce what they called *internal covariate shift*: as training updates the "
        "early layers, the distribution of the inputs every later layer receives keeps moving, and "
        "that layer has to keep re-adapting to it. Pinning each feature's mean and variance was "
        "meant to hold those distributions still. (Ba et al. motivated LayerNorm with the same "
        "argument in 2016.)"
    )
    st.markdown(
        "**Why it is disputed.** Santurkar et al. (2018, *How Does Batch Normalization Help "
        "Optimization?*) tested the story. Networks in which random noise with a changing mean and "
        "variance was added after every BatchNorm layer — more shift, not less — trained about as "
        "well as ordinary BatchNorm networks, and by a measure of shift based on how much a "
        "layer's gradient changes when the layers before it update, BatchNorm did not reliably "
        "reduce it. What they did find is a smoother optimization landscape: with BatchNorm the "
        "loss and its gradient change less abruptly along the training direction, so larger "
        "learning rates stay stable. Read *reducing internal covariate shift* as the historical "
        "motivation, not as the established explanation; why normalization helps is still studied."
    )
    if mates_guess is None:
        st.info(WAITS_FOR_PART_2, icon=":material/quiz:")
    else:
        st.markdown(batch_noise_text(sweep))


# --- 5. The cheat-sheet ---------------------------------------------------------------------------
with folded("5 · BatchNorm in practice: a cheat-sheet", "bl_part5"):
    if mates_guess is None:
        st.info(WAITS_FOR_PART_2, icon=":material/quiz:")
    else:
        where = {
            "small batches": [("app_pages/bn_vs_ln.py",
                               "Part 2: one sample across batches",
                               {"bl_part2": "true"}),
                              ("app_pages/ln_lstm.py",
                               "BN-LSTM against LN-LSTM at batch "
                               f"{', '.join(map(str, SWEEP_DEFAULTS['batch_size']))}",
                               {"tr_models": [MODEL_LABELS["bn-lstm"], MODEL_LABELS["ln-lstm"]],
                                "tr_sweep": SWEEPS["batch_size"]}),
                              ("app_pages/efficientnet.py",
                               "BatchNorm in a real network: how many batch-mates a photo needs",
                               {"en_part2": "true"})],
            "evaluation mode": [("app_pages/bn_vs_ln.py",
                                 "Part 3: training against evaluation mode",
                                 {"bl_part3": "true"}),
                                ("app_pages/efficientnet.py",
                                 "BatchNorm in a real network: a photo alone in training mode",
                                 {})],
            "frozen statistics": [("app_pages/scale_shift.py",
                                   "Scale and shift: frozen statistics", {}),
                                  ("app_pages/efficientnet.py",
                                   "BatchNorm in a real network: 49 BatchNorms folded into "
                                   "their convolutions", {"en_part4": "true"})],
            "padding": [("app_pages/padding.py",
                         "Padding and sequences: pad tokens and the mask",
                         {})],
            "CNN or transformer": [("app_pages/shapes.py",
                                    "Shapes: which dims share μ and σ²", {})],
        }
        for row in cheat_sheet(sweep):
            st.markdown(f"**{row.rule}** {row.why}")
            for page, label, query in where[row.topic]:
                st.page_link(page, label=label, icon=":material/arrow_forward:",
                             query_params=query or None)
        st.caption("The numbers are this page's (part 2, at the sidebar's seed) and the papers' "
                   "reports; the linked pages show each point on data you can change.")


if mates_guess is not None:  # its part 2 sentence is the answer to part 2's question
    st.info(
        "**Try this.** In the cubes of part 1, switch to NLC: LayerNorm's blue shrinks to a "
        "single token. Open part 2 and drag the live batch size to 1: LayerNorm still answers, "
        "BatchNorm refuses; drag it up to 64 and watch BatchNorm's lines draw together without "
        "ever meeting. In part 3's training steps, compare momentum 0.01 with None, and a "
        "mini-batch of 2 with 64 — where do biased and unbiased variance differ most? Set "
        "momentum to 1: the running μ is then the last batch's own, and the gap between the "
        "modes is the biased-against-unbiased σ² alone.",
        icon=":material/science:")

snippet_box = folded("The same in PyTorch", "bl_code").empty()
training_section(training_box, snippet_box, c, feature, settings.seed, settings.device,
                 settings.dtype)
batch_section(batch_box, snippet_box, sample, redraws, mates_guess is not None)

from lnviz.ui.path import path_link  # noqa: E402  (last: the way back to the Start-here path)

path_link("bn_vs_ln")
