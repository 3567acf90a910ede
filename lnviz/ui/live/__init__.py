"""Live controls: a page's ε, γ, β or batch size as range inputs that are its only control for
them, whose page figures follow while they are dragged, recomputed in the browser
(``st.components.v2``, inline HTML, CSS and JavaScript; the figures with Plotly.js).

Since Streamlit's sliders send their value only when let go, no server can answer a drag; the
browser can, for a tensor small enough to draw whole (:data:`LIVE_LIMIT` values on the
Explorer). ``norms.js`` holds the five norms' arithmetic (the same steps as :mod:`lnviz.norms`),
``view.js`` the Explorer's controls; the concept pages have controls of their own on the same
arithmetic: Scale and shift's γ and β (``affine.js``), the ε page's ε (``sweep.js``) and
BatchNorm vs LayerNorm's batch size (``batches.js``). The controls send what they computed to the
page's figures (``figure.js``; what each kind of figure redraws is in ``plots.js``). The server
stays the source of truth: on release the control sends the value as a trigger, the callback
writes it into the session (and the page, through :func:`lnviz.ui.params.live_values`, into the
URL), lnviz recomputes, and the control and the figures settle on lnviz's numbers."""

from __future__ import annotations

import base64
import hashlib
import json
import math
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from lnviz.batch import Batch, NormSpec, channel_dim, grouping, param_ids
from lnviz.lessons.bn_vs_ln import BatchDependence
from lnviz.lessons.explorer import Exploration
from lnviz.limits import BN_VS_LN_MAX_BATCH, LIVE_LIMIT, LIVE_MAX_SIDE
from lnviz.terms import Layout, NormKind
from lnviz.ui.params import EPSILONS, norm_control_help, settled_affine, settled_eps
from lnviz.ui.static import plotly_js

__all__ = ["AFFINE_CONTROLS", "AFFINE_KEY", "BATCHES_CONTROLS", "BATCHES_KEY", "LIVE_KEY",
           "SWEEP_CONTROLS", "SWEEP_KEY", "affine_panel", "batches_panel", "batches_payload",
           "fits", "live_figure", "live_js", "live_panel", "live_payload", "live_table",
           "plotly_js", "step_table_data", "sweep_panel"]

#: The panel's widget key; its trigger "settle" carries {control, value} when a control is let go.
LIVE_KEY = "live"
_HERE = Path(__file__).parent


def live_js(view: str = "view.js", *more: str) -> str:
    """A panel's JavaScript module: the norms' arithmetic, the shared helpers, any ``more``
    files it uses, then the panel's own ``view`` file (its default export)."""
    return "\n".join((_HERE / name).read_text()
                     for name in ("norms.js", "common.js", *more, view))


_component = st.components.v2.component(
    "lnviz_live_norm",
    html=(_HERE / "live.html").read_text(),
    css=(_HERE / "live.css").read_text(),
    js=live_js(),
)
_sweep_component = st.components.v2.component(
    "lnviz_live_sweep",
    html=(_HERE / "sweep.html").read_text(),
    css=(_HERE / "live.css").read_text(),
    js=live_js("sweep.js"),
)
_affine_component = st.components.v2.component(
    "lnviz_live_affine",
    html=(_HERE / "affine.html").read_text(),
    css=(_HERE / "live.css").read_text(),
    js=live_js("affine.js", "plots.js"),
)
#: A page figure drawn with Plotly.js in the browser (figure.js). Not style-isolated: Plotly.js
#: puts its own stylesheet in the page's head, which a shadow root would keep out.
_figure_component = st.components.v2.component(
    "lnviz_live_figure",
    html='<div class="lv-figure" data-shown="none"><div class="lv-plot"></div>'
         '<p class="lv-fallback" hidden>This figure could not load Plotly.js from the app\'s '
         'static folder.</p></div>',
    js="\n".join((_HERE / name).read_text() for name in ("plots.js", "figure.js")),
    isolate_styles=False,
)
#: The Explorer's step-by-step table, drawn in the browser (table.js) to follow the controls.
_table_component = st.components.v2.component(
    "lnviz_live_table",
    html='<div class="lv-steps" data-shown="none" data-frame="0"><table><thead><tr></tr>'
         '</thead><tbody></tbody></table></div>',
    css=(_HERE / "live.css").read_text(),
    js="\n".join((_HERE / name).read_text() for name in ("common.js", "plots.js", "table.js")),
)
_batches_component = st.components.v2.component(
    "lnviz_live_batches",
    html=(_HERE / "batches.html").read_text(),
    css=(_HERE / "live.css").read_text(),
    js=live_js("batches.js"),
)


def live_figure(figure: dict, *, key: str, panel: str, kind: str, **extra: Any) -> None:
    """Draw ``figure`` (a :mod:`lnviz.charts` dict) in the browser with Plotly.js, following the
    live panel whose payload key is ``panel``: ``kind`` names which of its traces the panel's
    numbers replace while a control moves (figure.js's UPDATES: "heatmaps", "stats",
    "distributions"); ``extra`` is what that kind needs (the grid's rows and cols, the groups
    drawn)."""
    _figure_component(key=key, data=dict(figure=_plain(figure), panel=panel, kind=kind, **extra))


def step_table_data(table: pd.DataFrame, panel: str) -> dict[str, Any]:
    """What :func:`live_table` sends the browser for ``table``: its columns, numbers exactly
    (float64 in base64) and text as it is, each row's element (a flat index into the tensor),
    and which column is √(σ²+ε) of which (``sqrtOf``, or None)."""
    cells: dict[str, Any] = {}
    for name in table.columns:
        column = table[name]
        if column.dtype.kind in "fiu":
            cells[name] = _b64(column.to_numpy(np.float64))
        else:
            cells[name] = [v if isinstance(v, str) else bool(v) for v in column]
    sqrt_of = next(({"name": name, "column": name[2:-3]} for name in table.columns
                    if name.startswith("√(") and name.endswith("+ε)")), None)
    return dict(panel=panel, columns=list(table.columns), cells=cells, sqrtOf=sqrt_of,
                elements=[int(e) for e in table.attrs["elements"]])


def live_table(table: pd.DataFrame, *, key: str, panel: str) -> None:
    """Draw :func:`lnviz.lessons.common.step_by_step`'s ``table`` in the browser, following the
    live panel whose payload key is ``panel``: while ε, γ or β move, its √(σ²+ε) (from the
    row's σ² and the new ε), x̂, γ, β and y columns take the browser's numbers."""
    _table_component(key=key, data=step_table_data(table, panel))


def _plain(value: Any) -> Any:
    """``value`` with what JSON lacks made plain: the arrays plotly leaves as they are (empty
    ones are not turned into base64) as lists, numpy scalars as numbers, NaN and ±inf as None.
    Streamlit sends a component's data as JSON, and anything it cannot encode as one string."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return _plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or infinity; plotly draws None as a gap
    return value


def _b64(values: Any, dtype: str = "<f8") -> str:
    """float64 (or ``dtype``) little-endian bytes in base64: exact, and NaN/inf survive (JSON
    has neither)."""
    array = np.ascontiguousarray(np.asarray(values, dtype=dtype).ravel())
    return base64.b64encode(array.tobytes()).decode("ascii")


def _eps_index(eps: float) -> int:
    """The index of ``eps`` (or the nearest) in :data:`EPSILONS`: what the panels' ε holds."""
    return min(range(len(EPSILONS)), key=lambda k: abs(EPSILONS[k] - eps))


def _param(value: float | tuple[float, ...]) -> float | list[float]:
    return [float(v) for v in value] if isinstance(value, (tuple, list)) else float(value)


def _grid_shape(shape: tuple[int, ...], layout: str) -> tuple[int, int]:
    """The rows and columns of :func:`lnviz.batch.to_grid`'s table for ``shape``."""
    if layout == Layout.NCHW:
        return math.prod(shape[:2]), math.prod(shape[2:])
    return math.prod(shape[:-1]), shape[-1]


def element_indices(shape: tuple[int, ...], layout: str, spec: NormSpec) -> dict[str, Any]:
    """Who shares μ and σ, for the browser (norms.js's liveGroups): for every element its group
    (lnviz.batch.grouping), the index of its γ and β, and its position in the mask (the shape
    without the channel dim); and the number of groups."""
    c = channel_dim(layout)
    index = np.indices(shape, sparse=True)
    others = tuple(i for d, i in enumerate(index) if d != c)
    positions = np.ravel_multi_index(others, tuple(s for d, s in enumerate(shape) if d != c))

    def ints(values: np.ndarray) -> np.ndarray:
        return np.broadcast_to(values, shape).astype(np.int32).ravel()

    groups = grouping(shape, layout, spec)
    return dict(groupIds=ints(groups.ids()), paramIds=ints(param_ids(shape, layout, spec)),
                positions=ints(positions), groupCount=groups.count)


def live_payload(batch: Batch, spec: NormSpec, ex: Exploration | None) -> dict:
    """What the Explorer's ε, γ and β controls are sent: their values (``spec``'s, on which
    they settle), their help, and for a tensor that :func:`fits` (and was normalized: ``ex``)
    the input and every other setting of ``spec``, so that the browser can recompute the norm
    for any ε, γ, β while one moves and the page's figures can follow."""
    per_feature = isinstance(spec.gamma, (tuple, list))
    shape = tuple(batch.values.shape)
    drawable = plotly_js()  # else the page's figures are st.plotly_chart's: no drag to follow
    live = ex is not None and fits(shape, batch.layout) and drawable
    structure = dict(shape=list(shape), layout=batch.layout, norm=spec.norm, dims=spec.dims,
                     groups=spec.groups, training=spec.training, warmup=spec.warmup_steps,
                     momentum=spec.momentum, useMask=spec.use_mask)
    data = dict(**structure, epsilons=EPSILONS, perFeature=per_feature,
                gamma=_param(spec.gamma), beta=_param(spec.beta), help=norm_control_help(spec.norm),
                note=_note(spec, shape, live or ex is None, drawable),
                server=dict(eps=_eps_index(spec.eps), epsValue=spec.eps,
                            gamma=None if per_feature else float(spec.gamma),
                            beta=None if per_feature else float(spec.beta)))
    if not live:
        data["key"] = hashlib.blake2b(json.dumps(structure).encode(), digest_size=8).hexdigest()
        return _settled_key(data)
    mask = None if batch.mask is None else np.asarray(batch.mask, dtype=np.uint8).ravel()
    x = _b64(ex.input_values)
    indices = {k: v if isinstance(v, int) else _b64(v, "<i4")
               for k, v in element_indices(shape, batch.layout, spec).items()}
    structure["mask"] = None if mask is None else mask.tolist()
    key = hashlib.blake2b((x + json.dumps(structure)).encode(), digest_size=8).hexdigest()
    return _settled_key({**data, **indices, "mask": structure["mask"], "key": key, "x": x})


def _note(spec: NormSpec, shape: tuple[int, ...], live: bool, drawable: bool = True) -> str:
    """The line under the Explorer's ε, γ and β controls: what they move, and, where the
    figures cannot follow a drag (not ``live``), why (a tensor too large, or no Plotly.js to
    draw them with: not ``drawable``)."""
    parts = []
    if isinstance(spec.gamma, (tuple, list)):
        parts.append("γ and β are per feature: edit them in the table below.")
    elif spec.norm == NormKind.RMS:
        parts.append("RMSNorm has no β: it shifts nothing.")
    values = math.prod(shape)
    if not live and not drawable:
        parts.append("The figures follow when you let go: the app could not put Plotly.js "
                     "where your browser loads it from (its static/ folder).")
    elif not live and values > LIVE_LIMIT:
        parts.append(f"The figures follow when you let go: this tensor has {values:,} values, "
                     f"more than the {LIVE_LIMIT:,} your browser recomputes at every step of a "
                     "drag.")
    elif not live:
        parts.append("The figures follow when you let go: this tensor's grid is wider than "
                     f"{LIVE_MAX_SIDE} rows or columns, more than your browser redraws at every "
                     "step of a drag.")
    return " ".join(parts)


def _settled_batch(value: float) -> int:
    """A batch size, a whole number from 1 to :data:`BN_VS_LN_MAX_BATCH`."""
    return int(min(max(round(value), 1), BN_VS_LN_MAX_BATCH))


#: How each panel control's value is brought into its page control's range.
_SETTLED = {"eps": settled_eps, "gamma": settled_affine, "beta": settled_affine,
            "batch": _settled_batch}


def _settled_key(data: dict) -> dict:
    """``data`` with its key naming the values it settles on (``server``) as well: the key the
    page's figures follow. A release starts a run whose panel arrives before the figures below
    it; the panel then says it has settled under its new key, which the figures still holding
    the last run's numbers do not answer to, so they keep the browser's numbers until their own
    new data comes (instead of showing the last run's figure in between)."""
    server = json.dumps(data.get("server"), sort_keys=True, default=str)
    digest = hashlib.blake2b(server.encode(), digest_size=6).hexdigest()
    return {**data, "key": f"{data['key']}@{digest}"}


def _answered_key(key: str) -> str:
    return f"{key}_answered"


def _with_answer(key: str, data: dict) -> dict:
    """``data`` for the panel ``key``, with the number (``seq``) of the last value it sent that
    this session has taken: until it sees that number, the panel keeps its controls where the
    learner has them (a run started before that value was sent would put them back)."""
    return {**data, "seq": int(st.session_state.get(_answered_key(key), 0))}


def _mount(component: Any, key: str, data: dict, controls: dict[str, str] | None = None) -> None:
    """Draw a panel ``component`` under ``key`` with ``data`` (and the number of the last value
    it sent that was taken); its releases go into the page's ``controls`` (:func:`_settle`)."""
    component(key=key, data=_with_answer(key, data),
              on_settle_change=partial(_settle, key, controls))


def _settle(key: str = LIVE_KEY, controls: dict[str, str] | None = None) -> None:
    """A control of the panel ``key`` was let go: write its value into the page's own control
    (``controls`` maps the panel's names to the page's keys; by default the Explorer's), and so
    into the URL.

    The value comes from the browser, so it is checked like any input: ε must be an index into
    :data:`EPSILONS`, γ and β finite numbers, a batch size a number; out-of-range values are
    moved into range (to the slider's steps), and anything else is ignored. Either way the
    panel is sent the value the page settled on, and moves its control there; the event's
    ``seq`` (a whole number) is kept and sent back with the panel's data
    (:func:`_with_answer`)."""
    controls = controls or {"eps": "eps", "gamma": "gamma", "beta": "beta"}
    state = st.session_state.get(key)
    event = state.get("settle") if isinstance(state, dict) else None
    if not isinstance(event, dict):
        return
    seq = event.get("seq")
    if isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq < 2**53:
        # the panel waits for this number; one replayed or out of order does not go back
        st.session_state[_answered_key(key)] = max(seq, st.session_state.get(_answered_key(key), 0))
    control, value = event.get("control"), event.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not isinstance(control, str):
        return
    try:
        value = float(value)  # an integer of 400 digits (JSON has them) does not fit
    except OverflowError:
        return
    if not math.isfinite(value):
        return
    if control in controls and control in _SETTLED:
        st.session_state[controls[control]] = _SETTLED[control](value)


def fits(shape: tuple[int, ...], layout: str) -> bool:
    """Whether the panel can draw a tensor whole: at most :data:`LIVE_LIMIT` values, in a grid
    of at most :data:`LIVE_MAX_SIDE` rows and columns (as the page's heatmaps draw at most)."""
    rows, cols = _grid_shape(shape, layout)
    return 0 < rows * cols <= LIVE_LIMIT and rows <= LIVE_MAX_SIDE and cols <= LIVE_MAX_SIDE


def live_panel(container: Any, batch: Batch, spec: NormSpec, ex: Exploration | None
               ) -> str | None:
    """Draw the Explorer's ε, γ and β controls in ``container`` (the place
    :func:`lnviz.ui.params.norm_controls` kept for them) for ``batch`` through ``spec``,
    normalized as ``ex`` (None when lnviz refused it: the controls still work, on release).
    Returns the key the page's figures follow (:func:`live_figure`), or None when the tensor
    is too large for the browser to follow a drag (:func:`fits`)."""
    payload = live_payload(batch, spec, ex)
    with container:
        _mount(_component, LIVE_KEY, payload)
    return payload["key"] if "x" in payload else None


#: The Scale and shift panel's widget key (and the key its figure follows), and the session keys
#: (and URL parameters) its γ and β settle into.
AFFINE_KEY = "ss_live"
AFFINE_CONTROLS = {"gamma": "ss_gamma", "beta": "ss_beta"}


def affine_panel(x: np.ndarray, gamma: float, beta: float, *, eps: float, span: tuple[float, float],
                 bins: int, help: dict[str, str]) -> str:
    """Scale and shift's γ and β controls (labels and ``help`` as a slider has them): while they
    are dragged, the browser recomputes γ·x̂ + β, x̂ the LayerNorm of the samples ``x`` (one row,
    ``eps``), and its histogram on ``bins`` bins over ``span``, and the page's figure drawn with
    ``live=dict(panel=<the returned key>, kind="affine")`` follows. On release the value goes
    into the session (:data:`AFFINE_CONTROLS`) and lnviz recomputes. Returns the key."""
    data = _settled_key(dict(key=AFFINE_KEY, x=_b64(x), n=int(np.size(x)), eps=eps,
                             span=[float(v) for v in span], bins=int(bins), help=help,
                             server=dict(gamma=float(gamma), beta=float(beta))))
    _mount(_affine_component, AFFINE_KEY, data, AFFINE_CONTROLS)
    return data["key"]


#: The ε page's panel key (and the key its figure follows), and the session key (and URL
#: parameter) its ε settles into.
SWEEP_KEY = "ep_live"
SWEEP_CONTROLS = {"eps": "ep_eps"}


def sweep_panel(x: np.ndarray, upstream: np.ndarray, eps: float, at_eps: tuple[float, float],
                help: str) -> str:
    """The ε page's ε control (label and ``help`` as a slider has them), one of
    :data:`EPSILONS`, with max |y| and ‖∂L/∂x‖ of LayerNorm on the vector ``x`` at that ε
    under it (L = Σ y·``upstream``), computed in the browser while it is dragged: the page's
    sweep figure drawn with ``live=dict(panel=<the returned key>, kind="sweep")`` moves its
    chosen-ε lines with it. ``at_eps`` is lnviz's (max |y|, ‖∂L/∂x‖) at ``eps``, on which the
    panel settles; on release ε goes into the session (:data:`SWEEP_CONTROLS`). Returns the
    key."""
    data = _settled_key(dict(key=SWEEP_KEY, x=_b64(x), g=_b64(upstream), epsilons=EPSILONS,
                             help=help, server=dict(eps=_eps_index(eps), at=_b64(at_eps))))
    _mount(_sweep_component, SWEEP_KEY, data, SWEEP_CONTROLS)
    return data["key"]


#: The BatchNorm-vs-LayerNorm page's panel key (and the key its figure follows), and the session
#: key (and URL parameter) its batch size settles into.
BATCHES_KEY = "bl_live"
BATCHES_CONTROLS = {"batch": "bl_b"}


def batches_payload(sample: np.ndarray, mates: np.ndarray, dependence: BatchDependence,
                    refused: BatchDependence, help: str, eps: float = 1e-5) -> dict:
    """What the BatchNorm-vs-LayerNorm panel is sent: the fixed ``sample`` (C,) and every
    re-draw's batch-mates ``mates`` (redraws, BN_VS_LN_MAX_BATCH − 1, C), from which the browser
    builds the batch of any size; lnviz's messages where BatchNorm refuses (``refused``, the
    experiment at batch size 1); the control's ``help``; and lnviz's numbers at the page's batch
    size (``dependence``), on which the panel settles."""
    redraws, mate_count, features = mates.shape
    bn = dependence.batch_norm

    def finite(v: float) -> float | None:
        return float(v) if math.isfinite(v) else None

    return _settled_key(dict(
        key=BATCHES_KEY, sample=_b64(sample), mates=_b64(mates, "<f4"), redraws=int(redraws),
        features=int(features), mateCount=int(mate_count), maxBatch=BN_VS_LN_MAX_BATCH,
        eps=float(eps), help=help,
        refusal=refused.refusal, torchRefusal=refused.torch_refusal,
        server=dict(batch=int(dependence.batch_size), batchNorm=None if bn is None else _b64(bn),
                    layerNorm=_b64(dependence.layer_norm),
                    bnSpread=finite(dependence.batch_norm_spread),
                    lnSpread=finite(dependence.layer_norm_spread)),
    ))


def batches_panel(sample: np.ndarray, mates: np.ndarray, dependence: BatchDependence,
                  refused: BatchDependence, help: str, eps: float = 1e-5) -> str:
    """BatchNorm vs LayerNorm's batch-size control (:func:`batches_payload` says what it is
    sent): while it is dragged the browser recomputes the fixed sample's outputs in every
    re-drawn batch, and the page's re-draws figure drawn with ``live=dict(panel=<the returned
    key>, kind="redraws")`` follows, with the largest changes under the control; on release the
    size goes into the session (:data:`BATCHES_CONTROLS`). Returns the key."""
    data = batches_payload(sample, mates, dependence, refused, help, eps)
    _mount(_batches_component, BATCHES_KEY, data, BATCHES_CONTROLS)
    return data["key"]
