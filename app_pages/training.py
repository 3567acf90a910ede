"""LN-LSTM vs LSTM: train recurrent networks with and without normalization, live."""

import streamlit as st

from lnviz import charts
from lnviz.data.sequences import load_digits_data, load_files
from lnviz.lessons.training import (
    CHART_UPDATES,
    GATES,
    LN_LSTM_CELL_CODE,
    MODEL_LABELS,
    MODELS,
    TrainConfig,
    Training,
    check_work,
    evaluation_interval,
)
from lnviz.limits import current_limits
from lnviz.ui.cache import Named, cached
from lnviz.ui.figures import show_figure
from lnviz.ui.jobs import (
    finished_training,
    running_training,
    start_training,
    stop_training,
    train_to_the_end,
)
from lnviz.ui.messages import refusal
from lnviz.ui.state import current_settings

settings = current_settings()

st.title("LN-LSTM vs LSTM")
st.caption("Train an LSTM with and without Layer Normalization on images read row by row, and "
           "watch the curves, the gradients and the gate activations. The URL keeps your "
           "settings: copy it to share this exact comparison.")

# --- Controls ---------------------------------------------------------------------------------
with st.container(border=True):
    cols = st.columns([3, 2])
    models = cols[0].multiselect(
        "Models", list(MODELS), default=["lstm", "ln-lstm"], key="tr_models",
        bind="query-params", format_func=MODEL_LABELS.get,
        help="LSTM: the plain cell. LN-LSTM: LayerNorm on W·x, on U·h and on the cell state "
             "(Ba et al., 2016). BN-LSTM: BatchNorm there instead, with statistics per time "
             "step. All start from the same seed and see the same mini-batches.")
    source = cols[1].radio(
        "Data", ["digits", "mnist"], horizontal=True, key="tr_data", bind="query-params",
        format_func={"digits": "8×8 digits (built in)", "mnist": "MNIST (upload)"}.get,
        help="The 8×8 digits bundled with scikit-learn read as 8 steps of 8 pixels (1347 to "
             "train on, a fixed 450 held out), or sequential MNIST (28 steps of 28) from your "
             "own mnist.npz or its four IDX files.")
    cols = st.columns(4)
    hidden = cols[0].select_slider(
        "Hidden size H", [16, 32, 64, 128, 256], value=64, key="tr_hidden", bind="query-params",
        help="Units in h and c; each gate has H of them, so W·x and U·h have 4H values.")
    lr = cols[1].select_slider(
        "Learning rate", [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1], value=1e-2, key="tr_lr",
        bind="query-params", format_func=lambda v: f"{v:g}",
        help="Adam's step size. Raise it to see which model still trains when steps get big.")
    batch_size = cols[2].select_slider(
        "Batch size", [2, 4, 8, 16, 32, 64, 128, 256], value=64, key="tr_batch",
        bind="query-params",
        help="Sequences per mini-batch. BatchNorm's statistics come from these samples, so "
             "small batches make them noisy; LayerNorm does not look at the batch at all.")
    steps = cols[3].number_input(
        "Training steps", min_value=1, max_value=current_limits().max_training_steps,
        value=300, step=50, key="tr_steps",
        bind="query-params", help="Optimizer steps per model; the curves are redrawn about "
                                  f"{CHART_UPDATES} times on the way.")
    cols = st.columns(4)
    gamma_init = cols[0].number_input(
        "Initial γ", min_value=0.0, max_value=10.0, value=1.0, step=0.1, key="tr_gamma",
        bind="query-params",
        help="The gain every norm starts with. 1 keeps x̂'s unit spread; small values start "
             "the gates near σ(0) = ½ and tanh(0) = 0; large ones push them into saturation.")
    beta_init = cols[1].number_input(
        "Initial β", min_value=-5.0, max_value=5.0, value=0.0, step=0.5, key="tr_beta",
        bind="query-params", help="The shift every norm starts with (0 centres the gates).")
    single_bias = cols[2].toggle(
        "One shared bias", value=False, key="tr_single_bias", bind="query-params",
        help="Drop β from LN(W·x) and LN(U·h) and add one bias b after their sum: the two β's "
             "only ever act as their sum, so this saves 4H parameters for the same model.")
    cols[3].caption(f"Training on **{settings.device}** in float32 with seed **{settings.seed}**"
                    " (both from the sidebar).")
    upload = None
    if source == "mnist":
        upload_mb = current_limits().upload_mb
        upload = st.file_uploader(
            "mnist.npz, or the four IDX files", accept_multiple_files=True, key="tr_upload",
            max_upload_size=upload_mb,
            help="mnist.npz with x_train, y_train, x_test, y_test (as keras saves it), or "
                 "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte "
                 f"and t10k-labels-idx1-ubyte (optionally .gz), at most {upload_mb} MB each. "
                 "Nothing is downloaded.")
    cols = st.columns([1, 1.5, 5.5])
    run = cols[0].button("Run", type="primary", key="tr_run", icon=":material/play_arrow:",
                         help="Train every chosen model from scratch with these settings.")
    stop = cols[1].button("Stop training", key="tr_stop", icon=":material/stop:",
                          help="Stop the training; what was learned so far is kept and shown.")

# --- Data -------------------------------------------------------------------------------------
data, data_key = None, None
if source == "digits":
    data_key = "digits"
    data = cached(load_digits_data)
elif not upload:
    st.info("Upload mnist.npz or the four MNIST IDX files above, or switch back to the built-in "
            "digits.", icon="📂")
else:
    upload_key = tuple(f.file_id for f in upload)
    with refusal("Cannot read the upload: ", stop=False):
        # getvalue() hands back the uploader's bytes without copying them
        data = cached(load_files, Named({f.name: f.getvalue() for f in upload}, upload_key),
                      current_limits().training_values)
        data_key = upload_key
if not models:
    st.info("Choose at least one model.", icon="👆")
config = None if not models else TrainConfig(
    models=tuple(models), hidden_size=int(hidden), lr=float(lr), batch_size=int(batch_size),
    steps=int(steps), eval_every=evaluation_interval(int(steps)),
    gamma_init=float(gamma_init), beta_init=float(beta_init), single_bias=bool(single_bias),
    seed=settings.seed, device=settings.device)
key = (config, data_key)

# --- Computation: a training in chunks, which the next rerun resumes or stops ----------------
if stop and not stop_training():
    st.toast("Nothing is training.")
if run and (config is None or data is None):
    st.warning("Nothing to train yet: choose a model and a dataset first.", icon="👆")
elif run:
    with refusal(stop=False):
        check_work(config, data, current_limits())
        start_training(key, Training(data, config))

curves_slot = st.empty()  # the live curves while training, the finished ones after
if running_training() is not None:
    # RuntimeError: e.g. out of memory on the device
    with refusal("Training failed: ", stop=False, errors=(RuntimeError, ValueError)):
        if train_to_the_end(curves_slot) is None:
            st.info("Stopped before the first step: nothing to show.", icon="⏹️")

# --- Figures ----------------------------------------------------------------------------------
result, current = finished_training(key)
if result is not None and not current:
    st.info("The figures below are from your last training, with other settings; press **Run** "
            "to train with the current ones.", icon="ℹ️")
if result is None:
    if data is not None:  # after a refused upload there is nothing to run yet
        curves_slot.info("Press **Run** to train. With the default settings the comparison takes "
                         "well under a minute on a laptop CPU.", icon="▶️")
else:
    cfg = result.config
    with curves_slot.container():
        show_figure(charts.training.curves_figure, result.curves, cfg.steps, result.chance,
                    key="tr_curves")
    if result.stopped:
        st.warning(f"Stopped after {result.steps_done} of {cfg.steps} steps.", icon="⏹️")
    for label in result.diverged():
        st.warning(f"{label} diverged: its loss became NaN or infinite. Lower the learning "
                   "rate, or compare how the normalized models cope with it."
                   + ("" if label == "LSTM" else
                      " If the images have blank rows (all zeros, as at the top of MNIST "
                      "digits), that can be the cause too: at such a time step the norm sees a "
                      "vector with no spread and divides by √ε, multiplying the gradient by up "
                      "to 1/√ε ≈ 316 (ε = 1e-5) each time."), icon="⚠️")
    reached = result.steps_to_accuracy(0.9)
    for col, (label, accuracy) in zip(st.columns(len(result.curves)),
                                      result.final_accuracy().items(), strict=False):
        col.metric(f"{label}: held-out accuracy", f"{accuracy:.1%}",
                   help="At the last evaluation, on held-out images the model never trained on.")
        col.caption(f"90 % first reached at step {reached[label]}" if reached[label] else
                    "never reached 90 %")
        col.caption(f"{result.seconds[label]:.1f} s of training · "
                    f"{result.parameters[label]:,} parameters")
    st.caption(f"{result.dataset}; {result.steps_done} steps of "
               f"batch {cfg.batch_size}, H = {cfg.hidden_size}, learning rate {cfg.lr:g}, "
               f"γ₀ = {cfg.gamma_init:g}, β₀ = {cfg.beta_init:g}, seed {cfg.seed}, "
               f"{cfg.device}.")

    # --- Gradients ----------------------------------------------------------------------------
    st.subheader("Gradient norms")
    show_figure(charts.training.grad_norm_figure, result.step_grad_norm, key="tr_grads")
    st.caption("‖∇θ‖₂ of all parameters together at every step (log scale), before Adam's "
               "update. Adam rescales each step, so these norms do not set the step size, but "
               "spikes and drifts show how rough the loss surface is along the way.")

    # --- Gate pre-activations -----------------------------------------------------------------
    st.subheader("Gate pre-activations, step by step")
    cols = st.columns([3, 2])
    gate = cols[0].segmented_control(
        "Gate", ["all", *GATES], default="all", required=True, key="tr_gate",
        bind="query-params",
        help="The sums fed to σ (input, forget, output gates) or tanh (candidate g), for 256 "
             "held-out images: all four gates pooled, or one of them.")
    moment = cols[1].radio(
        "When", ["after training", "at initialization"], horizontal=True, key="tr_when",
        bind="query-params", help="The same images through the trained or the untrained model.")
    show_figure(charts.training.gates_figure,
                result.gate_bands(gate, at_init=moment == "at initialization"), key="tr_gates")
    st.caption("Light band: 5–95 % of the values at that time step; dark band: 25–75 %; line: "
               "the median. Dotted lines at ±4, beyond which σ is nearly flat (σ′ < 0.02) and "
               "a gate is stuck open or shut. LayerNorm makes each projection a sum of "
               "unit-scale terms at every step, so the LN-LSTM's bands stay put over time.")

    # --- Batch independence -------------------------------------------------------------------
    st.subheader("Does a sample's output depend on its batch?")
    st.dataframe(result.batch_table(), hide_index=True, key="tr_batch_table", column_config={
        "max |difference| of the logits": st.column_config.NumberColumn(format="%.2e")})
    findings = result.batch_findings()
    if findings:
        st.markdown(findings)
    else:
        st.caption("Add the LN-LSTM or the BN-LSTM to the comparison to see this check.")

# --- Explanation ------------------------------------------------------------------------------
st.subheader("What is going on")
st.markdown(
    "An LSTM reads an image one row at a time and keeps a memory c and an output h. At every "
    "step each gate adds up two projections, W·x of the new row and U·h of the previous output; "
    "how large those sums are depends on the weights, the data and how far the memory has "
    "drifted, and it changes as the weights learn. When a sum is large, σ or tanh is flat "
    "there, the gate is stuck and little gradient gets through.\n\n"
    "The LN-LSTM normalizes each projection by itself, over one sample's 4H values at one "
    "time step, and normalizes the memory before it is read out. The gates then see sums of "
    "terms with a fixed spread whatever the scale of W and U, so the early steps of training "
    "are steadier. Nothing is shared across the batch, so the model computes exactly the same "
    "thing for one image as inside a batch, in training and at test time. A BatchNorm LSTM "
    "has to keep separate running statistics for every time step and still depends on its "
    "batch while training.")
st.latex(r"""\begin{aligned}
\begin{pmatrix} i \\ f \\ g \\ o \end{pmatrix} &=
  \mathrm{LN}(W x_t;\, \gamma_x, \beta_x) + \mathrm{LN}(U h_{t-1};\, \gamma_h, \beta_h) \\
c_t &= \sigma(f) \odot c_{t-1} + \sigma(i) \odot \tanh(g) \\
h_t &= \sigma(o) \odot \tanh\big(\mathrm{LN}(c_t;\, \gamma_c, \beta_c)\big) \\
\mathrm{LN}(z;\, \gamma, \beta) &= \gamma \odot \frac{z - \mu}{\sqrt{\sigma^2 + \epsilon}}
  + \beta,\quad \mu = \tfrac{1}{n}\textstyle\sum_k z_k,\quad
  \sigma^2 = \tfrac{1}{n}\textstyle\sum_k (z_k - \mu)^2
\end{aligned}""")
st.caption("n is 4H for the two projections and H for the cell state; μ and σ² belong to one "
           "sample at one time step. The plain LSTM is the same without the three LNs, plus a "
           "bias b.")
st.markdown(
    "**Try this**\n"
    "- Raise the learning rate to 0.1, or lower it to 0.001: does LayerNorm's head start "
    "survive, and what do the gradient norms do?\n"
    "- Set the initial γ to 3 and look at the gates at initialization, then to 0.1.\n"
    "- Add the BN-LSTM and shrink the batch size to 4: compare its curves and the batch check.\n"
    "- Switch on *One shared bias*: the parameter count drops by 4H for the same family of "
    "models. Do the curves change?")
st.markdown("**The LN-LSTM cell in PyTorch**, self-contained (this app's version, "
            "`lnviz.lessons.training.LayerNormLSTMCell`, computes the same numbers with lnviz's "
            "own "
            "layer_norm):")
st.code(LN_LSTM_CELL_CODE, language="python")
