"""Controls for the normalization and its parameters (norm, dims, mode, ε, γ, β)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from lnviz.batch import NORM_TABLE, NORMS, Batch, NormSpec, channel_dim, param_size
from lnviz.data import parse_table
from lnviz.lessons.common import EPSILONS, group_description
from lnviz.limits import MAX_TABLE_FEATURES
from lnviz.terms import NormKind
from lnviz.ui.cache import fingerprint
from lnviz.ui.state import keep_in_range

#: The γ and β sliders' range and step (lnviz.ui.live's panel moves within the same).
AFFINE_RANGE = (-3.0, 3.0, 0.1)
_HELP = {
    NormKind.BATCH: "one μ, σ per feature, taken across the batch (and sequence/space)",
    NormKind.LAYER: "one μ, σ per position of the leading dims, taken across the trailing dims "
                 "(by default: per token, across its features)",
    NormKind.RMS: "LayerNorm without subtracting μ: only the root-mean-square is fixed",
    NormKind.GROUP: "one μ, σ per sample and group of channels",
    NormKind.INSTANCE: "one μ, σ per sample and channel, across the sequence/space",
}


def eps_label(eps: float) -> str:
    """ε as the sliders show it (and as the URL carries it): "0", "1e-5", …"""
    return "0" if eps == 0 else f"1e{round(math.log10(eps)):d}"


def eps_slider(container: Any = st, *, key: str, help: str, value: float = 1e-5,
               options: tuple[float, ...] | list[float] = tuple(EPSILONS),
               on_change: Any = None) -> float:
    """The ε control of every page: "ε (epsilon)", a slider over `EPSILONS` (0, then 1e-12 to
    1; a page may offer fewer), labelled as `eps_label` writes them, bound to the URL under
    ``key``. A link may write ε in any notation ("0.1", "1e-05", "1e-1"): it opens on that
    value."""
    written = st.query_params.get(key)
    if written is not None:
        try:
            number = float(written)
        except ValueError:
            number = math.nan  # junk: Streamlit's binding leaves the default
        if number in options and written != eps_label(number) and key not in st.session_state:
            st.session_state[key] = number
            st.query_params[key] = eps_label(number)
    return container.select_slider(
        "ε (epsilon)", options, value=value, format_func=eps_label, key=key,
        bind="query-params", on_change=on_change, help=help)


def settled_eps(value: float) -> float:
    """ε from a control that sends an index into :data:`EPSILONS` (the live controls)."""
    return EPSILONS[min(max(round(value), 0), len(EPSILONS) - 1)]


def settled_affine(value: float) -> float:
    """γ or β brought into :data:`AFFINE_RANGE`, on its steps."""
    low, high, step = AFFINE_RANGE
    return round(round(min(max(value, low), high) / step) * step, 1)


#: The Explorer's ε, γ and β, drawn as live controls (lnviz.ui.live.live_panel): their session
#: keys and URL parameters, and their values when nothing has set them.
NORM_VALUES = {"eps": 1e-5, "gamma": 1.0, "beta": 0.0}


def norm_values() -> dict[str, float]:
    """The Explorer's ε, γ and β (:func:`live_values` of :data:`NORM_VALUES`)."""
    return live_values(NORM_VALUES)


def live_values(defaults: dict[str, float],
                ranges: dict[str, tuple[float, float, float]] | None = None
                ) -> dict[str, float]:
    """The values of a page's live controls, by session key (``defaults``: each key's value
    when nothing has set it; a key ending in "eps" is an ε, one in ``ranges`` a whole number
    (low, high, step 1) such as a batch size, any other a γ or β): the session's, or the first
    time a link's (the URL's value, checked like any input: ε one of :data:`EPSILONS` in any
    notation, a whole number rounded into its range, γ and β numbers brought into
    :data:`AFFINE_RANGE`, as exact as the link has them), or the defaults. No Streamlit widget
    holds them, so this also writes them into the URL, as a widget bound to it would (a value
    at its default is left out)."""
    state = st.session_state
    ranges = ranges or {}
    for key, default in defaults.items():
        if key not in state:
            state[key] = _from_url(key, default, ranges.get(key))
    values = {key: float(state[key]) for key in defaults}
    for key, value in values.items():
        # γ and β in full (a link's 0.123456789012 stays that), without a trailing ".0"
        text = eps_label(value) if key.endswith("eps") else repr(value).removesuffix(".0")
        if value == defaults[key]:
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get_all(key) != [text]:  # a repeated parameter too: one value
            st.query_params[key] = text
    return values


def _from_url(key: str, default: float,
              whole: tuple[float, float, float] | None = None) -> float | int:
    try:
        number = float(st.query_params.get(key, default))
    except ValueError:
        return default
    if not math.isfinite(number):
        return default
    if key.endswith("eps"):
        return number + 0.0 if number in EPSILONS else default  # −0 is 0
    if whole is not None:  # kept a whole number in the session, as a slider of ints keeps it
        return int(min(max(round(number), whole[0]), whole[1]))
    low, high, _ = AFFINE_RANGE
    # a value between the steps is taken as the link has it; −0 is 0
    return min(max(number, low), high) + 0.0


#: The URL keys of the normalization controls `norm_controls` draws (and `set_norm_controls`
#: sets): this module owns them.
NORM_KEYS = ("norm", "eps", "dims", "groups", "mode", "affine", "gamma", "beta")


def set_norm_controls(*, norm: str, eps: float, dims: int, groups: int,
                      per_feature: bool) -> None:
    """Set the normalization controls as a source suggests (a captured layer's settings), in
    training mode with γ = 1 and β = 0 (or a per-feature table): called before they are drawn
    in this run; the learner may change them afterwards."""
    state = st.session_state
    state["norm"], state["eps"] = norm, eps
    state["dims"], state["groups"], state["mode"] = dims, groups, "train"
    state["affine"] = "per feature" if per_feature else "scalar"
    _reset_affine()


def _reset_affine() -> None:
    st.session_state["gamma"] = 1.0
    st.session_state["beta"] = 0.0
    for key in [k for k in st.session_state if str(k).startswith("affine_table")]:
        del st.session_state[key]


def _key_tag(value: object) -> str:
    """A short text that tells values apart (for a widget's key)."""
    return hashlib.blake2b(repr(fingerprint(value)).encode(), digest_size=6).hexdigest()


def _cell_text(value: float) -> str:
    text = repr(float(value))
    return text.removesuffix(".0") if text.endswith(".0") else text


def number_table(table: pd.DataFrame, key: str, **editor: Any) -> np.ndarray:
    """An editable table of numbers; returns its cells as a float64 array.

    The cells are text, read by :func:`lnviz.data.parse_table`: the grid's own number cells
    drop the "e" of 1e-3 as it is typed (1e-3 became −13), so scientific notation, nan and inf
    are read here instead, and a cell that is not a number is named in the error.
    """
    text = table.map(_cell_text)
    edited = st.data_editor(
        text, key=key,
        column_config={c: st.column_config.TextColumn(
            c, help="A number: 0.5, -2, 1e-3, 2.5E+2, nan or inf.") for c in text.columns},
        **editor)
    st.caption("Edits in this table stay in this browser tab: a copied link does not carry "
               "them.")
    return parse_table(edited)


def norm_controls(batch: Batch,
                  affine: tuple[tuple[float, ...], tuple[float, ...]] | None = None
                  ) -> tuple[NormSpec, Any]:
    """Draw the normalization controls for ``batch`` and return the chosen settings, and the
    container where the page draws the live ε, γ and β controls (lnviz.ui.live.live_panel,
    once the batch has been normalized: it sends the browser lnviz's numbers). Their values
    come from :func:`norm_values`.

    ``affine``: a captured layer's γ and β, one per feature, that the per-feature table starts
    from (where their number fits the chosen norm) instead of 1 and 0."""
    shape = batch.values.shape
    norm = st.segmented_control(
        "Normalization", list(NORMS), default=NormKind.LAYER, required=True, key="norm",
        bind="query-params",
        help="Which statistics are shared: " + "; ".join(f"{k}: {v}" for k, v in _HELP.items()),
    )
    about = st.empty()  # filled in below, once dims and mode are known
    spec = {"norm": norm}
    cols = st.columns(3)
    if NORM_TABLE[norm].trailing:  # LayerNorm, RMSNorm: over the trailing dims
        keep_in_range("dims", range(1, len(shape)))
        spec["dims"] = cols[0].radio(
            "Normalize over the last … dims", list(range(1, len(shape))), horizontal=True,
            key="dims", bind="query-params",
            help="normalized_shape: the trailing dims that share one μ and σ. Last 1 = per "
                 "token; last 2 of (words, batch, embedding) = the two-word notes' example.",
        )
        cols[1].caption(f"normalized_shape = {tuple(shape[-spec['dims']:])}")
    elif norm == NormKind.BATCH:
        mode = cols[0].segmented_control(
            "Mode", ["train", "eval"], default="train", required=True, key="mode",
            bind="query-params",
            help="train: normalize with this batch's statistics. eval: with running averages "
                 "built by earlier training passes — BatchNorm behaves differently in the two.",
        )
        spec["training"] = mode == "train"
        if not spec["training"]:
            spec["warmup_steps"] = cols[1].slider(
                "Training passes before eval", 1, 100, 10, key="warmup", bind="query-params",
                help="Running μ/σ² start at 0/1 and move 10% of the way (momentum 0.1) to this "
                     "batch's statistics at each training pass.",
            )
        if batch.mask is not None:
            spec["use_mask"] = cols[2].checkbox(
                "Leave padding out of the statistics", True, key="usemask",
                bind="query-params",
                help="Masked BatchNorm: μ and σ per feature from the real tokens only, so pad "
                     "tokens do not drag the statistics.",
            )
    elif norm == NormKind.GROUP:
        channels = shape[channel_dim(batch.layout)]
        divisors = [g for g in range(1, channels + 1) if channels % g == 0]
        keep_in_range("groups", divisors)
        spec["groups"] = cols[0].select_slider(
            "Groups", divisors, value=divisors[min(1, len(divisors) - 1)], key="groups",
            bind="query-params",
            help=f"How many groups the {channels} channels are split into: 1 group is "
                 "LayerNorm over (C, …); one group per channel is InstanceNorm.",
        )
    values = norm_values()
    spec["eps"] = values["eps"]
    affine_spec, slot = _affine_controls(batch, NormSpec(norm=norm, dims=spec.get("dims", 1)),
                                         affine, values)
    spec.update(affine_spec)
    chosen = NormSpec(**spec)
    about.caption(f"**{norm}**: {_HELP[norm]}. Here one group is "
                  f"{group_description(shape, batch.layout, chosen)}.")
    return chosen, slot


def norm_control_help(norm: str) -> dict[str, str]:
    """The help texts of the Explorer's ε, γ and β controls under ``norm``."""
    eps = ("Added to mean(x²) before the square root so that a group of zeros does not divide "
           "by zero. Try 0 on a padded batch: the pad token is all zeros."
           if not NORM_TABLE[norm].centred else
           "Added to σ² before the square root so that a group with no spread does not divide "
           "by zero. Try 0 on the constant-row example under LayerNorm.")
    return {"eps": eps, "gamma": "Multiplies x̂: the output's spread.",
            "beta": "Added after scaling: the output's mean."}


def _affine_controls(batch: Batch, spec: NormSpec,
                     affine: tuple[tuple[float, ...], tuple[float, ...]] | None,
                     values: dict[str, float]) -> tuple[dict, Any]:
    """γ and β: the live controls' values (:func:`norm_values`), or a per-feature table
    (starting from ``affine`` where it has one value per feature); a button resets them to
    their initial values. Returns them and the container the live controls go in (before the
    table)."""
    n = param_size(batch.values.shape, batch.layout, spec)
    start = affine if affine is not None and len(affine[0]) == n else None
    cols = st.columns([3, 2, 3])
    per_feature = cols[0].radio(
        "γ, β", ["scalar", "per feature"], horizontal=True, key="affine", bind="query-params",
        help="One γ and β for every feature, or one pair per feature (the learnable "
             "parameters of the layer).",
    ) == "per feature"
    if start is None:
        cols[1].button("Reset γ=1, β=0", on_click=_reset_affine, key="reset",
                       help="Back to the initial values: the identity affine step.")
    else:
        cols[1].button("Reset γ, β", on_click=_reset_affine, key="reset",
                       help="Back to the initial values: γ = 1 and β = 0 on the sliders, the "
                            "captured layer's own γ and β in the per-feature table.")
    slot = st.container()
    if per_feature and n > MAX_TABLE_FEATURES:
        st.caption(f"{n} features are too many to edit one by one (at most "
                   f"{MAX_TABLE_FEATURES}); using one γ and β for all.")
        per_feature = False
    if not per_feature:
        if spec.norm == NormKind.RMS:
            return {"gamma": values["gamma"]}, slot
        return {"gamma": values["gamma"], "beta": values["beta"]}, slot
    gamma, beta = start if start is not None else ([1.0] * n, [0.0] * n)
    table = pd.DataFrame({"γ": list(gamma), "β": list(beta)},
                         index=[f"feature {i}" for i in range(n)])
    st.caption("One γ and β per feature; click a cell to edit it (1e-3 and the like work)."
               + (" They start as the captured layer's." if start is not None else ""))
    # a table per starting point, so that one layer's edits do not carry over to another's
    tag = "" if start is None else f"_{_key_tag(start)}"
    edited = number_table(table, key=f"affine_table_{n}{tag}")
    return {"gamma": tuple(edited[:, 0].tolist()), "beta": tuple(edited[:, 1].tolist())}, slot
