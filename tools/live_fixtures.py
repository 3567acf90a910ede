"""The live panels' arithmetic cases for Node's tests (tests/js/): each problem lnviz.ui.live's
JavaScript is given, with the numbers lnviz computes for it and how close the browser must come.

    python tools/live_fixtures.py [PATH]    # default tests/js/live_cases.json (not in git)
    node --test tests/js/                   # reads PATH from $LIVE_CASES, or the default

tests/test_live.py does both, with the cases written afresh: they are lnviz's numbers on this
machine, so the Node tests always compare the browser's arithmetic with lnviz as it is now (and
no committed file holds one CPU's rounding). Non-finite numbers are written as the strings
"NaN", "Infinity" and "-Infinity" (JSON has no literal for them).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lnviz.batch import Batch, NormSpec, group_ids  # noqa: E402
from lnviz.devices import to_numpy  # noqa: E402
from lnviz.lessons.explorer import check_tolerance, explore  # noqa: E402
from lnviz.norms import layer_norm  # noqa: E402
from lnviz.terms import Layout, NormKind  # noqa: E402
from lnviz.ui.live import element_indices  # noqa: E402

#: Where the Node tests read the cases.
CASES_PATH = ROOT / "tests" / "js" / "live_cases.json"
#: The browser's numbers (float64) against lnviz's float64 run: the same formula, to rounding.
F64_RTOL = 1e-9


def batches() -> dict[str, Batch]:
    """Small batches with what breaks arithmetic: a pad token, a constant row (σ² = 0), values
    far from 0, images."""
    rng = np.random.default_rng(17)
    tokens = rng.normal(2.0, 3.0, (2, 4, 6)).astype(np.float32)
    tokens[1, 3] = 0.0  # a pad token: all zeros
    mask = np.ones((2, 4), dtype=bool)
    mask[1, 3] = False
    table = rng.normal(0.0, 1.0, (5, 4)).astype(np.float32)
    table[2] = 0.25  # a constant row: σ² = 0, so ε = 0 gives 0/0
    far = (10_000 + rng.normal(0.0, 1.0, (3, 5))).astype(np.float32)
    images = rng.normal(1.0, 2.0, (2, 4, 3, 3)).astype(np.float32)
    return {"tokens": Batch(tokens, Layout.NLC, mask), "table": Batch(table, Layout.NC),
            "far": Batch(far, Layout.NC), "images": Batch(images, Layout.NCHW)}


def cases() -> list[tuple[str, NormSpec]]:
    """Every norm and layout, ε = 0, negative and per-feature γ and β, BatchNorm in eval mode
    and with or without its mask."""
    per_feature_6 = dict(gamma=(1.5, -2.0, 0.0, 0.5, 3.0, -0.1), beta=(0.0, 1.0, -3.0, 2.5, 0, .2))
    per_feature_4 = dict(gamma=(-1.0, 2.0, 0.3, 1.0), beta=(0.5, -0.5, 0.0, 3.0))
    per_feature_5 = dict(gamma=(1.0, -1.0, 2.0, 0.1, -3.0), beta=(0.0, 0.0, 1.0, -1.0, 0.5))
    return [
        ("tokens", NormSpec(NormKind.LAYER, eps=1e-5, gamma=-1.3, beta=0.4)),
        ("tokens", NormSpec(NormKind.LAYER, dims=2, eps=0.0, **per_feature_6)),
        ("tokens", NormSpec(NormKind.RMS, eps=0.0, gamma=2.0)),
        ("tokens", NormSpec(NormKind.RMS, eps=1e-2, gamma=per_feature_6["gamma"])),
        ("tokens", NormSpec(NormKind.BATCH, eps=1e-5, gamma=-0.7, beta=2.0)),
        ("tokens", NormSpec(NormKind.BATCH, use_mask=False, eps=1.0, **per_feature_6)),
        ("tokens", NormSpec(NormKind.BATCH, training=False, warmup_steps=10, eps=0.0, gamma=1.5,
                            beta=-1.0)),
        ("tokens", NormSpec(NormKind.BATCH, training=False, warmup_steps=1, use_mask=False,
                            eps=1e-3, **per_feature_6)),
        ("tokens", NormSpec(NormKind.GROUP, groups=3, eps=1e-5, **per_feature_6)),
        ("tokens", NormSpec(NormKind.INSTANCE, eps=0.0, gamma=-2.5, beta=0.1)),
        ("table", NormSpec(NormKind.LAYER, eps=0.0, gamma=-1.0, beta=0.5)),
        ("table", NormSpec(NormKind.LAYER, eps=1e-12, **per_feature_4)),
        ("table", NormSpec(NormKind.BATCH, training=False, warmup_steps=100, eps=1e-8,
                           **per_feature_4)),
        ("table", NormSpec(NormKind.RMS, eps=1e-5, gamma=-3.0)),
        ("far", NormSpec(NormKind.LAYER, eps=1e-5, gamma=2.0, beta=-3.0)),
        ("far", NormSpec(NormKind.BATCH, eps=1e-5, **per_feature_5)),
        ("images", NormSpec(NormKind.GROUP, groups=2, eps=0.0, **per_feature_4)),
        ("images", NormSpec(NormKind.INSTANCE, eps=1e-1, gamma=0.5, beta=-0.5)),
        ("images", NormSpec(NormKind.BATCH, training=False, warmup_steps=3, eps=1e-5, gamma=-1.0)),
        ("images", NormSpec(NormKind.LAYER, dims=3, eps=1e-5, gamma=1.0, beta=1.0)),
    ]


def grouped_in_the_browser(batch: Batch, spec: NormSpec) -> bool:
    """Whether norms.js groups the problem itself, as the panels that build a table in the
    browser need (a (rows, features) table under LayerNorm, RMSNorm or BatchNorm); every other
    problem is sent its groups by lnviz (lnviz.ui.live.element_indices)."""
    return batch.layout == Layout.NC and spec.dims == 1 and spec.norm in (
        NormKind.LAYER, NormKind.RMS, NormKind.BATCH)


def problem(batch: Batch, spec: NormSpec) -> dict[str, Any]:
    """What norms.js takes, from a batch and settings (as lnviz.ui.live sends them)."""
    x = np.asarray(batch.values, dtype=np.float32)

    def param(v: float | tuple[float, ...]) -> float | list[float]:
        return list(v) if isinstance(v, tuple) else v

    indices = ({} if grouped_in_the_browser(batch, spec)
               else element_indices(x.shape, batch.layout, spec))
    return dict(x=x.astype(np.float64).ravel().tolist(), shape=list(x.shape),
                layout=batch.layout, norm=spec.norm, training=spec.training,
                warmup=spec.warmup_steps, momentum=spec.momentum, useMask=spec.use_mask,
                eps=spec.eps, gamma=param(spec.gamma), beta=param(spec.beta),
                mask=None if batch.mask is None else batch.mask.astype(int).ravel().tolist(),
                **{k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in indices.items()})


def _per_group(t: torch.Tensor, shape: tuple[int, ...], ids: np.ndarray) -> np.ndarray:
    """A statistic lnviz keeps with size-1 dims, one value per group (in group order)."""
    _, first = np.unique(ids.ravel(), return_index=True)
    return to_numpy(t.expand(shape), torch.float64).ravel()[first]


def expected(batch: Batch, spec: NormSpec) -> dict[str, Any]:
    """lnviz's numbers for one problem, in float64 (the browser must match them to rounding)
    and in float32 (to twice what lnviz's check allows a correct float32 implementation), each
    with the absolute tolerance ``atol`` of y, x̂ and the statistics after; μ is allowed 10 ×
    atol, σ² 10 × atol × max(1, |σ²|) and 1/√(σ²+ε) atol × max(1, |1/√(σ²+ε)|)."""
    shape = batch.values.shape
    ids = group_ids(shape, batch.layout, spec)
    out: dict[str, Any] = {"group": ids.ravel().tolist()}
    for dtype in ("float64", "float32"):
        ex = explore(batch, spec, dtype=dtype)
        finite = np.where(np.isfinite(ex.output_values), ex.output_values, np.nan)
        scale = np.nanmax(np.abs(finite), initial=1.0)
        # torch's own check has no tolerance where torch refuses (BatchNorm training, ε = 0)
        atol = (F64_RTOL * max(1.0, scale) if dtype == "float64"
                else 2 * check_tolerance(ex.x, ex.result, spec, scale))
        r = ex.result
        out[dtype] = {
            "atol": float(atol),
            "y": np.ravel(ex.output_values), "xHat": to_numpy(r.x_hat, torch.float64).ravel(),
            "mean": None if r.mean is None else _per_group(r.mean, shape, ids),
            "var": _per_group(r.var, shape, ids), "rstd": _per_group(r.rstd, shape, ids),
            "meanOut": np.ravel(ex.mean_out), "spreadOut": np.ravel(ex.spread_out)}
    return out


def sweep_cases() -> list[dict[str, Any]]:
    """The ε page's sweep: LayerNorm of one vector (no γ, β) and ∂L/∂x for L = Σ g·y, as
    lnviz computes them with autograd, in float64."""
    rng = np.random.default_rng(5)
    vectors = {"ordinary": rng.normal(0.0, 1.0, 6), "tiny": 1e-4 * rng.normal(0.0, 1.0, 6),
               "constant": np.full(5, 0.3)}
    found = []
    for name, x in vectors.items():
        g = rng.normal(0.0, 1.0, x.size)
        for eps in (0.0, 1e-5, 1e-2):
            xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
            r = layer_norm(xt[None], x.size, eps=eps)
            (r.output[0] * torch.tensor(g)).sum().backward()
            found.append({"name": f"{name}, ε = {eps:g}", "x": x.tolist(), "g": g.tolist(),
                          "eps": eps, "xHat": r.x_hat.detach().numpy().ravel(),
                          "grad": xt.grad.numpy()})
    return found


def plot_cases() -> dict[str, Any]:
    """What the live figures recompute (lnviz/ui/live/plots.js), as lnviz computes it: the
    histogram of the values after (bin centres and counts), the colour range, and the colorbars'
    end labels (f"{v:.2g}")."""
    from lnviz.charts.base import symmetric_range
    from lnviz.lessons.explorer import histogram

    rng = np.random.default_rng(11)
    arrays = {"normal": rng.normal(0.0, 1.0, 500), "constant": np.full(7, 0.25),
              "with NaN and inf": np.array([np.nan, 1.0, -2.0, np.inf, 0.5, 3.0]),
              "all NaN": np.array([np.nan, np.nan]), "huge": rng.normal(0.0, 1e300, 50),
              "tiny": rng.normal(0.0, 1e-30, 50), "ties at edges": np.array([-1.0, 0.0, 1.0] * 5),
              "float32 rounded": rng.normal(0.0, 3.0, 300).astype(np.float32).astype(np.float64)}
    numbers = [0.0, 1.0, -1.0, 2.3456, 9.99, 10.0, 99.5, 123.0, 0.5, 1e-4, 1.25e-5, -3.7e8,
               0.000123, 1e21, 7.0, 0.1, 15.0]
    return {"histograms": [{"name": name, "values": values,
                            "centres": histogram(values)[0], "counts": histogram(values)[1],
                            "range": list(symmetric_range(values))}
                           for name, values in arrays.items()],
            "labels": [{"value": v, "text": f"{v:.2g}"} for v in numbers],
            "affine": affine_cases(), "sweepFigure": sweep_figure_cases(),
            "redraws": redraws_cases(), "steps": steps_cases()}


def batch_number_cases() -> list[dict[str, Any]]:
    """BatchNorm vs LayerNorm's batch panel (lnviz/ui/live/batches.js): what the page sends it
    (lnviz.ui.live.batches_payload: the fixed sample and every re-draw's batch-mates, float32),
    and lnviz's batch_dependence at each batch size a drag passes, from the refusal at 1 to
    the largest: the browser must build the same batches and get lnviz's numbers. Two features
    (LayerNorm answers ±1), the page's default size and its largest."""
    import base64

    from lnviz.lessons.bn_vs_ln import batch_dependence, batch_mates, fixed_sample
    from lnviz.limits import BN_VS_LN_MAX_BATCH
    from lnviz.ui.live import batches_payload

    def decoded(text: str, dtype: str) -> np.ndarray:
        return np.frombuffer(base64.b64decode(text), dtype=dtype).astype(np.float64)

    found = []
    for features, redraws, seed in ((2, 2, 123), (6, 8, 0), (32, 20, 7)):
        sample = fixed_sample(features, seed)
        refused = batch_dependence(sample, 1, 1, seed)
        data = batches_payload(sample, batch_mates(features, redraws, seed),
                               batch_dependence(sample, 8, redraws, seed), refused, help="")
        sizes = sorted({1, 2, 3, 4, 5, 6, 8, 9, 10, 16, 17, 32, 33, BN_VS_LN_MAX_BATCH})
        found.append({
            "name": f"{redraws} re-draws of {features} features, seed {seed}",
            "data": {k: data[k] for k in ("redraws", "features", "mateCount", "eps")},
            "sample": decoded(data["sample"], "<f8"), "mates": decoded(data["mates"], "<f4"),
            "sizes": [{"size": size, "batchNorm": None if dep.batch_norm is None
                       else dep.batch_norm.ravel(), "layerNorm": dep.layer_norm.ravel(),
                       "bnSpread": dep.batch_norm_spread}
                      for size in sizes
                      for dep in [batch_dependence(sample, size, redraws, seed)]]})
    return found


def steps_cases() -> dict[str, Any]:
    """The Explorer's step-by-step table (lnviz.lessons.common.step_by_step) as the server
    sends it at one setting (``table``: lnviz.ui.live.step_table_data) and as lnviz computes it
    at another (``want``, the moved columns), with the problem norms.js solves at the second:
    the browser moves the first table to the second's numbers. Also how a cell writes numbers
    (Python's .6g, with a real minus sign)."""
    from lnviz.lessons.common import step_by_step
    from lnviz.ui.live import step_table_data

    all_batches = batches()
    moves = [("table", NormSpec(NormKind.LAYER, eps=1e-5), NormSpec(NormKind.LAYER, eps=0.0), 2),
             ("table", NormSpec(NormKind.LAYER), NormSpec(NormKind.LAYER, eps=1e-1, gamma=-2.5,
                                                        beta=0.7), 1),
             ("tokens", NormSpec(NormKind.RMS), NormSpec(NormKind.RMS, eps=1.0, gamma=0.3), 3),
             ("tokens", NormSpec(NormKind.BATCH, training=False, warmup_steps=3),
              NormSpec(NormKind.BATCH, training=False, warmup_steps=3, eps=1e-2, gamma=2.0,
                       beta=-1.0), 4),
             ("images", NormSpec(NormKind.GROUP, groups=2), NormSpec(NormKind.GROUP, groups=2,
                                                                  eps=1.0, beta=3.0), 1),
             ("far", NormSpec(NormKind.LAYER), NormSpec(NormKind.LAYER, gamma=0.0), 0)]
    found = []
    for source, before, after, group in moves:
        batch = all_batches[source]
        tables = []
        for spec in (before, after):
            ex = explore(batch, spec, dtype="float64")
            tables.append(step_by_step(ex.x, ex.result, spec, ex.groups, group, batch.layout,
                                       mask=batch.mask))
        sent = step_table_data(tables[0], "panel")
        moved = [name for name in tables[1].columns
                 if name in ("x̂", "y", "γ", "β") or name.startswith("√(")]
        found.append({"name": f"{source} {before.norm} group {group}: {before} → {after}",
                      "table": sent, "problem": problem(batch, after),
                      "want": {name: tables[1][name].to_numpy(np.float64) for name in moved}})
    numbers = [0.0, -0.0, -0.5, 1.0, 123456.0, 1234567.0, 0.000123456789, 1.5e-7, -2.25e-5,
               3.14159265, 99999.95, 1e300, float("inf"), float("nan")]
    texts = [{"value": v, "text": "NaN" if math.isnan(v) else f"{v:.6g}".replace("-", "−")}
             for v in numbers]
    return {"cases": found, "texts": texts}


def redraws_cases() -> list[dict[str, Any]]:
    """BatchNorm vs LayerNorm's re-draws figure, built by lnviz at one batch size and at
    another (a batch of one refused): the browser moves the first to the second's numbers."""
    from lnviz.charts.bn_vs_ln import redraws_figure
    from lnviz.lessons.bn_vs_ln import batch_dependence, fixed_sample

    sample = fixed_sample(6, 0)
    refusal = batch_dependence(sample, 1, 1, 0).refusal

    def built(size: int) -> tuple[dict, Any]:
        dep = batch_dependence(sample, size, 8, 0)
        fig = json.loads(redraws_figure(dep.batch_norm, dep.layer_norm,
                                        dep.refusal or refusal).to_json())
        return {"data": fig["data"],  # what the browser reads
                "layout": {"annotations": fig["layout"]["annotations"]}}, dep

    found = []
    for start, size in ((8, 32), (8, 1), (1, 2), (1, 64), (64, 8)):
        first, _ = built(start)
        target, dep = built(size)
        found.append({"name": f"batch size {start} → {size}", "from": first,
                      "batchNorm": None if dep.batch_norm is None else dep.batch_norm.ravel(),
                      "layerNorm": dep.layer_norm.ravel(),
                      "ys": [t["y"] for t in target["data"]],
                      "visible": [t.get("visible", True) for t in target["data"]],
                      "refused": dep.batch_norm is None})
    return found


def sweep_figure_cases() -> list[dict[str, Any]]:
    """The ε page's sweep figure with the chosen ε at each value the control offers, built by
    lnviz from one ε and then another: what its "chosen ε" lines are at the second (the live
    figure moves the first's lines there)."""
    from lnviz.charts.epsilon import sweep_figure
    from lnviz.lessons.common import EPSILONS
    from lnviz.lessons.epsilon import epsilon_sweep, stability_vector

    found = []
    for vector in ("tiny", "constant"):
        sweep = epsilon_sweep(stability_vector(vector))

        def built(eps: float, sweep=sweep) -> dict:
            fig = sweep_figure(sweep.eps, sweep.max_output, sweep.grad_norm, sweep.variance, eps)
            return {"data": json.loads(fig.to_json())["data"]}  # what the browser reads

        start = built(1e-5)
        for eps in EPSILONS:
            lines = [t for t in built(eps)["data"] if t["name"].startswith("chosen ε")]
            found.append({"name": f"{vector}, ε = {eps:g}", "eps": eps, "from": start,
                          "lines": [{k: t[k] for k in ("x", "name", "visible", "hovertemplate")}
                                    for t in lines]})
    return found


def affine_cases() -> list[dict[str, Any]]:
    """Scale and shift's histogram of γ·x̂ + β (the page's fixed bins) as lnviz computes it and
    draws it (lnviz.charts.scale_shift.histogram_figure: the bars' x, the lines, the title), for
    the samples the page sends the browser."""
    from lnviz.charts.scale_shift import histogram_figure
    from lnviz.devices import to_numpy
    from lnviz.lessons.scale_shift import EPS, drawn_samples, scale_shift_grid

    span, bins = (-13.0, 13.0), 78  # app_pages/scale_shift.py's FREE_SPAN and FREE_BINS
    found = []
    for n, seed, gamma, beta, dtype in ((1000, 0, 1.5, 0.5, "float32"),
                                        (100, 3, -2.7, 3.0, "float32"),
                                        (10000, 1, 0.0, -1.2, "float32"),
                                        (1000, 7, 3.0, -3.0, "float64"),
                                        (100, 0, 0.15, -0.05, "float32")):
        one = scale_shift_grid((gamma,), (beta,), n=n, seed=seed, bins=bins, span=span,
                               dtype=dtype)
        mean, std = float(one.mean[0, 0]), float(one.std[0, 0])
        fig = histogram_figure(one.centres, one.counts[0, 0], mean, std, gamma, beta)
        found.append({"name": f"n = {n}, seed {seed}, γ = {gamma}, β = {beta}, {dtype}",
                      "x": to_numpy(drawn_samples(n, seed, "cpu", dtype)).ravel(),
                      "gamma": gamma, "beta": beta, "eps": EPS, "span": list(span),
                      "bins": bins, "counts": one.counts[0, 0], "mean": mean, "std": std,
                      "barsX": np.asarray(fig.data[0].x),
                      "lines": [[list(t.x), list(t.y)] for t in fig.data[1:4]],
                      "title": fig.layout.title.text})
    return found


def _plain(value: Any) -> Any:
    """JSON-ready: arrays as lists, non-finite floats as strings."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.astype(np.float64).tolist()]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def fixtures() -> dict[str, Any]:
    """Every case Node's tests run: the norms (``norms``), the ε sweep (``sweep``), what the
    live figures recompute (``plots``) and the batch panel's numbers (``batches``)."""
    all_batches = batches()
    norms = [{"name": f"{source}-{spec.norm}-{k}",
              "problem": problem(all_batches[source], spec),
              "expected": expected(all_batches[source], spec)}
             for k, (source, spec) in enumerate(cases())]
    return _plain({"norms": norms, "sweep": sweep_cases(), "plots": plot_cases(),
                   "batches": batch_number_cases()})


def write(path: Path = CASES_PATH) -> Path:
    """Write the cases to ``path`` (JSON) and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fixtures(), sort_keys=True) + "\n")
    return path


def main() -> None:
    print(f"wrote {write(Path(sys.argv[1]) if len(sys.argv) > 1 else CASES_PATH)}")


if __name__ == "__main__":
    main()
