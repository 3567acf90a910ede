"""LN-LSTM vs LSTM: train recurrent networks with and without normalization, live."""

from collections.abc import Callable

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lnviz import charts
from lnviz.data.sequences import DIGIT_READINGS, load_digits_data, load_files
from lnviz.lessons.ln_lstm import (
    CUSTOM_LAYER_NORM_CODE,
    LN_LSTM_CELL_CODE,
    batch_findings,
    custom_layer_norm_table,
    first_step,
    gate_findings,
    gate_range_text,
    length_findings,
    reach_text,
    training_findings,
)
from lnviz.limits import LN_LSTM_MAX_SEEDS, current_limits
from lnviz.nn import GATES, MODEL_LABELS, MODELS
from lnviz.train import (
    LEARNING_RATES,
    LOG_SWEEPS,
    SWEEP_CHOICES,
    SWEEP_DEFAULTS,
    SWEEPS,
    TARGET_ACCURACY,
    Progress,
    TrainConfig,
    Training,
    TrainingResult,
    check_work,
    evaluation_interval,
)
from lnviz.ui import jobs
from lnviz.ui.cache import Named, cached
from lnviz.ui.figures import show_figure
from lnviz.ui.messages import refusal
from lnviz.ui.pages import page_title
from lnviz.ui.source import uploaded_files
from lnviz.ui.state import current_settings, run_stop_buttons

settings = current_settings()
GOAL = f"{TARGET_ACCURACY:.0%}"

page_title("app_pages/ln_lstm.py")
#: Session-state slot of the training (lnviz.ui.jobs).
TRAINING = "tr"
st.caption("Train an LSTM with and without Layer Normalization on images read as sequences, "
           "from one seed or several, and watch the curves, the gradients and the gate "
           "activations. The URL keeps your settings: copy it to share this exact comparison.")

# --- Controls ---------------------------------------------------------------------------------
with st.container(border=True):
    cols = st.columns([3, 2])
    models = cols[0].multiselect(
        "Models", list(MODELS), default=["lstm", "ln-lstm"], key="tr_models",
        bind="query-params", format_func=MODEL_LABELS.get,
        help="LSTM: the plain cell. LN-LSTM: LayerNorm on W·x, on U·h and on the cell state "
             "(Ba et al., 2016). BN-LSTM: BatchNorm there instead, with statistics per time "
             "step. Runs of the same seed start from the same W, U and output layer and see "
             "the same mini-batches, whatever the model.")
    source = cols[1].radio(
        "Data", ["digits", "mnist"], horizontal=True, key="tr_data", bind="query-params",
        format_func={"digits": "8×8 digits (built in)", "mnist": "MNIST (upload)"}.get,
        help="The 8×8 digits bundled with scikit-learn (1347 to train on, a fixed 450 held "
             "out), or sequential MNIST (28 steps of 28) from your own mnist.npz or its four "
             "IDX files.")
    reading = "rows"
    if source == "digits":
        reading = st.selectbox(
            "Read each digit", list(DIGIT_READINGS), key="tr_reading", bind="query-params",
            format_func=lambda r: DIGIT_READINGS[r][1],
            help="How an image becomes a sequence. Longer sequences ask the network to carry "
                 "what it saw over more steps, and every time step costs time: on two CPU cores "
                 "the default comparison took about 3 times as long with 28 steps of 28 as "
                 "with 8 of 8, and about 6 times with 32 steps of 2.")
    cols = st.columns([2, 5])
    sweep = cols[0].selectbox(
        "Sweep", ["none", *SWEEPS], key="tr_sweep", bind="query-params",
        format_func=lambda s: "nothing" if s == "none" else SWEEPS[s],
        help="Train every model at several values of one setting, side by side, to see how "
             "each copes with it (a sweep of the initial γ is the formula tutorial's exercise 3).")
    sweep_values: list[float] = []
    if sweep != "none":
        sweep_values = cols[1].multiselect(
            f"Values of the {SWEEPS[sweep]}", list(SWEEP_CHOICES[sweep]),
            default=list(SWEEP_DEFAULTS[sweep]), key=f"tr_values_{sweep}", bind="query-params",
            format_func=lambda v: f"{v:g}",
            help="Each model is trained at each of these values, from every seed"
                 + (". The plain LSTM has no norms, so it is trained once, as the reference."
                    if sweep != "lr" else "."))
    cols = st.columns(4)
    hidden = cols[0].select_slider(
        "Hidden size H", [16, 32, 64, 128, 256], value=64, key="tr_hidden", bind="query-params",
        help="Units in h and c; each gate has H of them, so W·x and U·h have 4H values.")
    lr = cols[1].select_slider(
        "Learning rate", list(LEARNING_RATES), value=1e-2, key="tr_lr", bind="query-params",
        format_func=lambda v: f"{v:g}", disabled=sweep == "lr",
        help="Adam's step size (the sweep above sets it while it sweeps the learning rate).")
    batch_size = cols[2].select_slider(
        "Batch size", [2, 4, 8, 16, 32, 64, 128, 256], value=64, key="tr_batch",
        bind="query-params", disabled=sweep == "batch_size",
        help="Sequences per mini-batch. BatchNorm's statistics come from these samples, so "
             "small batches make them noisy; LayerNorm does not look at the batch at all.")
    steps = cols[3].number_input(
        "Training steps", min_value=1, max_value=current_limits().max_training_steps,
        value=300, step=50, key="tr_steps", bind="query-params",
        help="Optimizer steps of every run. The held-out set is evaluated every steps/30 steps "
             "(rounded; every step below 45 steps): the points of the curves.")
    cols = st.columns(4)
    gamma_init = cols[0].number_input(
        "Initial γ", min_value=0.0, max_value=10.0, value=1.0, step=0.1, key="tr_gamma",
        bind="query-params", disabled=sweep == "gamma_init",
        help="The gain every norm starts with. 1 keeps x̂'s unit spread; small values start "
             "every normalized sum near its shift, so the gates begin near σ(2β₀) (½ at "
             "β₀ = 0); large ones spread the sums out, towards saturation.")
    beta_init = cols[1].number_input(
        "Initial β", min_value=-5.0, max_value=5.0, value=0.0, step=0.5, key="tr_beta",
        bind="query-params", disabled=sweep == "beta_init",
        help="The shift every norm starts with; each gate's sum starts centred on 2β₀ "
             "(0 centres the gates).")
    single_bias = cols[2].toggle(
        "One shared bias", value=False, key="tr_single_bias", bind="query-params",
        help="Drop β from the norms of W·x and U·h and add one bias b after their sum "
             "(Ba et al. write both β's and a b): the β's only ever act as their sum, so "
             "this saves 4H parameters for the same family of functions.")
    seeds = cols[3].select_slider(
        "Seeds", list(range(1, LN_LSTM_MAX_SEEDS + 1)), value=3, key="tr_seeds",
        bind="query-params",
        help="Runs per model and setting, from the sidebar's seed and the next ones. The "
             "curves show their mean and, shaded, the range from the lowest seed to the "
             "highest: where two models' ranges overlap, their order may be luck of the draw.")
    seed_text = (f"seed **{settings.seed}**" if seeds == 1 else
                 f"seeds **{settings.seed}–{settings.seed + seeds - 1}**")
    st.caption(f"Training on **{settings.device}** in float32 with {seed_text} (the device "
               "and the first seed from the sidebar).")
    upload = ()
    if source == "mnist":
        upload_mb = current_limits().upload_mb
        upload = uploaded_files(
            "mnist.npz, or the four IDX files", multiple=True, key="tr_upload",
            name="ln_lstm upload", max_upload_size=upload_mb,
            help="mnist.npz with x_train, y_train, x_test, y_test (as keras saves it), the same "
                 "four arrays as .safetensors or .pt/.pth, or "
                 "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte "
                 f"and t10k-labels-idx1-ubyte (optionally .gz), at most {upload_mb} MB each. "
                 "Nothing is downloaded.")
    run, stop = run_stop_buttons(
        "tr", run_help="Train every chosen model from scratch with these settings.",
        stop_help="Stop the training; what was learned so far is kept and shown.")

# --- Data -------------------------------------------------------------------------------------
data, data_key = None, None
if source == "digits":
    data_key = ("digits", reading)
    data = cached(load_digits_data, 0.25, reading)
elif not upload:
    st.info("Upload mnist.npz or the four MNIST IDX files above, or switch back to the built-in "
            "digits.", icon="📂")
else:
    upload_key = tuple(file_id for _, file_id, _ in upload)
    with refusal("Cannot read the upload: ", stop=False):
        data = cached(load_files, Named({name: content for name, _, content in upload}, upload_key),
                      current_limits().training_values)
        data_key = upload_key
if not models:
    st.info("Choose at least one model.", icon="👆")
elif sweep != "none" and not sweep_values:
    st.info(f"Choose at least one value of the {SWEEPS[sweep]} to sweep.", icon="👆")
config = None if not models or (sweep != "none" and not sweep_values) else TrainConfig(
    models=tuple(models), hidden_size=int(hidden), lr=float(lr), batch_size=int(batch_size),
    steps=int(steps), eval_every=evaluation_interval(int(steps)),
    gamma_init=float(gamma_init), beta_init=float(beta_init), single_bias=bool(single_bias),
    seed=settings.seed, device=settings.device, seeds=int(seeds),
    sweep=None if sweep == "none" else sweep,
    sweep_values=tuple(float(v) for v in sweep_values))
key = (config, data_key)

# --- Computation: a training in chunks, which the next rerun resumes or stops ----------------
if stop and not jobs.stop(TRAINING):
    st.toast("Nothing is training.")
if run and (config is None or data is None):
    st.warning("Nothing to train yet: choose a model (and values to sweep) and a dataset "
               "first.", icon="👆")
elif run:
    with refusal(stop=False):
        check_work(config, data, current_limits())
        jobs.start(TRAINING, key, Training(data, config))

curves_slot = st.empty()  # the live curves while training, the finished ones after


def live_curves(slot: DeltaGenerator, steps: int) -> Callable[[Progress], None]:
    """Redraw the running training's curves into ``slot`` after each new evaluation."""
    drawn = [-1]  # evaluations shown so far

    def draw(now: Progress) -> None:
        if now.evaluations != drawn[0]:
            slot.plotly_chart(charts.ln_lstm.curves_figure(now.curves, steps, now.chance),
                              key=f"tr_live_{now.evaluations}")
            drawn[0] = now.evaluations

    return draw


if (running := jobs.running(TRAINING)) is not None:
    # RuntimeError: e.g. out of memory on the device
    with refusal("Training failed: ", stop=False, errors=(RuntimeError, ValueError)):
        if jobs.run_to_end(TRAINING, live_curves(curves_slot, running[1].config.steps),
                           "your training") is None:
            st.info("Stopped before the first step: nothing to show.", icon="⏹️")

# --- Gate pre-activations, batch check, longer sequences --------------------------------------
# A fragment: the setting shown, the gate and the moment rerun these three sections alone, not the
# training and the curves above. While a training runs, a click here waits for that run to end.
@st.fragment
def gates_and_checks(result: TrainingResult) -> None:
    cfg = result.config
    st.subheader("Gate pre-activations, step by step")
    shown = None  # every series, or those of one setting of a sweep
    if cfg.sweep:
        choices = {text: labels for text, labels in result.settings()}
        chosen = st.selectbox(
            "Setting shown", list(choices), key="tr_setting",
            help="The gates, the batch check and the longer test sequences below show one "
                 "setting of the sweep at a time.")
        shown = choices[chosen]
    cols = st.columns([3, 2])
    gate = cols[0].segmented_control(
        "Gate", ["all", *GATES], default="all", required=True, key="tr_gate",
        bind="query-params",
        help=f"The sums fed to σ (input, forget, output gates) or tanh (candidate g), for "
             f"{result.gate_samples} held-out images: all four gates pooled, or one of them.")
    moment = cols[1].radio(
        "When", ["after training", "at initialization"], horizontal=True, key="tr_when",
        bind="query-params", help="The same images through the trained or the untrained model.")
    at_init = moment == "at initialization"
    show_figure(charts.ln_lstm.gates_figure, result.gate_bands(gate, at_init, shown),
                key="tr_gates")
    st.caption(f"{result.gate_samples} held-out images through the run of seed {cfg.seed}. "
               "Light band: 5–95 % of the values at that time step; dark band: 25–75 %; line: "
               "the median. Dotted lines at ±4, beyond which σ is nearly flat (σ′ < 0.02, and "
               "tanh′ < 0.002 for g): a gate there is stuck open or shut. In the LN-LSTM each "
               "projection is normalized at every step, so its spread is set by γ, not by W, "
               "U or how far h has drifted (a projection of all zeros, as U·h₀ at the first step, "
               "is β alone); the sum of the two can still move as γ and β learn. "
               + gate_findings(result, gate, at_init, shown))

    # --- Batch independence -------------------------------------------------------------------
    st.subheader("Does a sample's output depend on its batch?")
    st.dataframe(result.batch_table(shown), hide_index=True, key="tr_batch_table",
                 column_config={"max |difference| of the logits":
                                st.column_config.NumberColumn(format="%.2e")})
    findings = batch_findings(result, shown)
    if findings:
        st.markdown(findings)
    else:
        st.caption("Add the LN-LSTM or the BN-LSTM to the comparison to see this check.")

    # --- Longer sequences ---------------------------------------------------------------------
    st.subheader("Test sequences longer than the training ones")
    st.markdown(
        "The BN-LSTM normalizes time step t with statistics gathered at step t during "
        "training, so it keeps one set per step, and it has none for steps beyond the "
        "training length: this one reuses the last step's (Cooijmans et al.'s choice). Here "
        "every held-out image is read again with blank rows above it: the same digit, in a "
        "longer sequence. The digit's rows then arrive at later steps, whose statistics were "
        "gathered for other rows, or at steps that have none of their own. LayerNorm's "
        "statistics come from the sample at hand, at every step.")
    length = result.length.subset(shown) if result.length else None
    if length is None:
        st.caption("This check runs after the last training step; this training was stopped "
                   "before it was done.")
    else:
        show_figure(charts.ln_lstm.length_figure, length.lengths, length.train_length,
                    length.bands(), length.batch_means(), length.running_var, result.chance,
                    key="tr_length")
        st.caption(f"{length.samples} held-out images at each length"
                   + (f"; lines: the mean of {cfg.seeds} seeds, shaded: lowest to highest"
                      if cfg.seeds > 1 else "") + "."
                   + (" Left: the BN-LSTM's running variance of the cell state c (mean over "
                      f"its H units, seed {cfg.seed}) at each step it has statistics for."
                      if length.running_var else
                      " Add the BN-LSTM to see its per-step statistics and how it copes."))
        st.markdown("\n".join(f"- {sentence}" for sentence in length_findings(length)))


# --- Figures ----------------------------------------------------------------------------------
result, current = jobs.finished(TRAINING, key)
if result is not None and not current:
    st.info("The figures below are from your last training, with other settings; press **Run** "
            "to train with the current ones.", icon="ℹ️")
if result is None:
    if data is not None and config is not None:  # nothing to run after a refused upload
        curves_slot.info(f"Press **Run** to train {config.runs} run"
                         f"{'s' * (config.runs > 1)} of {config.steps} steps each "
                         f"({config.describe()}).", icon="▶️")
else:
    cfg = result.config
    with curves_slot.container():
        show_figure(charts.ln_lstm.curves_figure, result.curves, cfg.steps, result.chance,
                    key="tr_curves")
        st.caption(
            (f"Lines: the mean over {cfg.seeds} seeds; shaded: from the lowest seed to the "
             "highest at each point." if cfg.seeds > 1 else
             f"One seed ({cfg.seed}): one draw of the initial weights and of the mini-batches.")
            + " Runs of the same seed start from the same W, U and output layer and see the "
              "same mini-batches.")
    if result.stopped:
        st.warning(f"Stopped after {result.steps_done} of {cfg.steps} steps.", icon="⏹️")
    for label, count in result.diverged().items():
        seeds_text = "" if cfg.seeds == 1 else f" in {count} of {cfg.seeds} seeds"
        st.warning(f"{label} diverged{seeds_text}: its loss became NaN or infinite. Lower the "
                   "learning rate, or compare how the normalized models cope with it.",
                   icon="⚠️")

    st.subheader("What these runs show")
    st.markdown("\n".join(f"- {sentence}" for sentence in training_findings(result)))
    if cfg.sweep:
        show_figure(charts.ln_lstm.sweep_figure, cfg.sweep_values, result.sweep_accuracy(),
                    SWEEPS[cfg.sweep], cfg.sweep in LOG_SWEEPS, result.chance,
                    key="tr_sweep_fig")
        st.caption("Each point: the mean final held-out accuracy over the seeds; the bars run "
                   "from the lowest seed to the highest."
                   + (f" Every run takes the same {cfg.steps} steps, so a smaller batch sees "
                      "fewer sequences in all (batch × steps): compare the models at one batch "
                      "size, not one batch size with another."
                      if cfg.sweep == "batch_size" else ""))
        st.dataframe(result.sweep_table(), hide_index=True, key="tr_sweep_table",
                     column_config={c: st.column_config.NumberColumn(format="percent")
                                    for c in ("final accuracy (mean)", "lowest seed",
                                              "highest seed")})
    else:
        finals = result.final_accuracies()
        for col, (label, accuracy) in zip(st.columns(len(result.curves)),
                                          result.final_accuracy().items(), strict=False):
            col.metric(f"{label}: held-out accuracy", f"{accuracy:.1%}",
                       help="At the last evaluation, on held-out images the model never "
                            "trained on" + ("; the mean over the seeds." if cfg.seeds > 1
                                            else "."))
            if cfg.seeds > 1:
                col.caption(f"seeds: {min(finals[label]):.1%} to {max(finals[label]):.1%}")
            col.caption(reach_text(result, label))
            col.caption(f"{result.parameters[label]:,} parameters")
    swept = f"swept over {', '.join(f'{v:g}' for v in cfg.sweep_values)}"
    t, f = result.sequence
    st.caption(
        f"{result.dataset} ({t} steps of {f}); {result.steps_done} steps of batch "
        f"{swept if cfg.sweep == 'batch_size' else cfg.batch_size} per run, "
        f"H = {cfg.hidden_size}, "
        f"learning rate {swept if cfg.sweep == 'lr' else f'{cfg.lr:g}'}, "
        f"γ₀ {swept if cfg.sweep == 'gamma_init' else f'= {cfg.gamma_init:g}'}, "
        f"β₀ {swept if cfg.sweep == 'beta_init' else f'= {cfg.beta_init:g}'}, "
        f"seed{'s' * (cfg.seeds > 1)} {', '.join(map(str, result.seeds))}, {cfg.device}. "
        "Speed is measured in steps, not seconds: the runs take turns, and the machine may be "
        "busy with other work, so their wall-clock times say more about its load than about "
        "the models.")

    # --- Gradients ----------------------------------------------------------------------------
    st.subheader("Gradient norms")
    show_figure(charts.ln_lstm.grad_norm_figure, *result.grad_norm_bands(), key="tr_grads")
    st.caption("‖∇θ‖₂ of all parameters together at every step (log scale), before Adam's "
               "update" + (f"; line: the median of the {cfg.seeds} seeds, shaded: the lowest "
                           "to the highest." if cfg.seeds > 1 else ".")
               + " Adam rescales each step, so these norms do not set the step size; a spike "
                 "marks a step where the loss surface was steep.")

    gates_and_checks(result)

# --- Explanation ------------------------------------------------------------------------------
st.subheader("What is going on")
st.markdown(
    "An LSTM reads an image one step at a time and keeps a memory c and an output h. At every "
    "step each gate adds up two projections, W·x of the new input and U·h of the previous "
    "output; how large those sums are depends on the weights, the data and how far the memory "
    "has drifted, and it changes as the weights learn. When a sum is large, σ or tanh is flat "
    "there, the gate is stuck and little gradient gets through.\n\n"
    "The LN-LSTM normalizes each projection by itself, over one sample's 4H values at one "
    "time step, and normalizes the memory before it is read out. The gates then see sums of "
    "terms whose spread is set by γ, whatever the scale of W and U. Ba et al. report that this "
    "makes recurrent networks train faster; the runs above test it on this task, and what "
    "they show is written under the curves. Nothing is shared across the batch, so the model "
    "computes the same thing for one image as inside a batch, in training and at test time. "
    "A BatchNorm LSTM has to keep separate running statistics for every time step and depends "
    "on its batch while training.")
st.markdown(gate_range_text(int(hidden)))  # the walkthrough's slip, named before any run
st.latex(r"""\begin{aligned}
\begin{pmatrix} f \\ i \\ o \\ g \end{pmatrix} &=
  \mathrm{LN}(W_h h_{t-1};\, \alpha_1, \beta_1) + \mathrm{LN}(W_x x_t;\, \alpha_2, \beta_2)
  + b \\
c_t &= \sigma(f) \odot c_{t-1} + \sigma(i) \odot \tanh(g) \\
h_t &= \sigma(o) \odot \tanh\big(\mathrm{LN}(c_t;\, \alpha_3, \beta_3)\big) \\
\mathrm{LN}(z;\, \alpha, \beta) &= \alpha \odot \frac{z - \mu}{\sigma} + \beta,\quad
  \mu = \tfrac{1}{n}\textstyle\sum_k z_k,\quad
  \sigma = \sqrt{\tfrac{1}{n}\textstyle\sum_k (z_k - \mu)^2}
\end{aligned}""")
zero = first_step(int(hidden))
st.caption(
    "Ba et al.'s LN-LSTM as the paper writes it (α is its name for the gain γ). n is 4H for "
    "the two projections and H for the cell state; μ and σ belong to one sample at one time "
    "step. The plain LSTM is the same without the three LNs. This app's version differs in "
    "two places. **No “+ b” by default:** β₁ + β₂ already add a learned vector to every gate, "
    "so a third one would only be its sum in disguise; *One shared bias* keeps b and drops "
    "β₁ and β₂ instead (4H parameters fewer). Both compute the same family of functions as "
    "the paper's. **An ε under the root:** x̂ = (z − μ)/√(σ² + ε) with ε = "
    f"{zero.eps:g}, as torch.nn.LayerNorm has. At the first step h₀ = 0, so U·h₀ is "
    f"{zero.size} zeros with σ = 0: the paper's formula gives 0/0, NaN in "
    f"{zero.nan_without_eps} of {zero.size} entries, where the app's gives β "
    f"(largest |x̂| {zero.with_eps:g}). A blank image row makes W·x a vector of zeros too. "
    "(The paper stacks the gates as f, i, o, g; torch and this app as i, f, g, o: only the "
    "order of the rows of W, U and b differs.)")

st.markdown("**The LN-LSTM walkthrough's LayerNorm from scratch**, with `unbiased=False`:")
st.code(CUSTOM_LAYER_NORM_CODE, language="python")
st.dataframe(cached(custom_layer_norm_table, (int(hidden), 4 * int(hidden))), hide_index=True,
             key="tr_custom_ln", column_config={
                 "max |Δ| from torch": st.column_config.NumberColumn(format="%.1e"),
                 "max |Δ| from lnviz": st.column_config.NumberColumn(format="%.1e"),
                 "spread of x̂": st.column_config.NumberColumn(format="%.6f"),
                 "√((n − 1)/n)": st.column_config.NumberColumn(format="%.6f")})
st.caption("Random rows of n = H and n = 4H values (the sizes this cell normalizes), through "
           "the class above with γ = 1, β = 0, against torch.nn.functional.layer_norm and "
           "lnviz.layer_norm. With `unbiased=False` it agrees with both to float32 rounding. "
           "`x.var`'s default, `unbiased=True`, divides by n − 1: σ² comes out n/(n − 1) times "
           "too large, and every x̂ shrinks by √((n − 1)/n) (the last column), as the spread of "
           "x̂ shows.")
st.markdown(
    "**Try this**\n"
    "- Sweep the learning rate over 0.001, 0.01 and 0.1 with 3 seeds or more: at which rates "
    "does the LN-LSTM end ahead, and where do the seed ranges overlap? The sentences under the "
    "curves are computed from the runs, so they change with them.\n"
    "- Sweep the initial γ over 0.1, 1 and 3 (the formula tutorial's exercise 3) and look at the "
    "gates at "
    "initialization for each setting.\n"
    "- Add the BN-LSTM and shrink the batch size to 4: compare its curves and the batch check.\n"
    "- Add the BN-LSTM and look at the longer test sequences: which model loses the most when "
    "the digit arrives late?\n"
    "- Read the digits 2 pixels at a time (32 steps): which models still learn in 300 steps?\n"
    "- Switch on *One shared bias*: the normalized models lose 4H parameters each for the "
    "same family of functions. Do the curves change?")
st.markdown("**The LN-LSTM cell in PyTorch**, self-contained (this app's version, "
            "`lnviz.nn.LayerNormLSTMCell`, computes the same numbers with lnviz's "
            "own layer_norm):")
st.code(LN_LSTM_CELL_CODE, language="python")
