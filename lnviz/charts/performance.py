"""Figures of the performance lesson: measured bandwidth against the memory roofline.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from lnviz.charts.base import OKABE_ITO, each_axis, figure, log_ticks, panel_grid
from lnviz.terms import NormKind


def bench_figure(rows: Sequence, roofline_gbps: dict[int, float] | None = None) -> go.Figure:
    """Benchmark results (lnviz.lessons.performance.Row): median time and achieved bandwidth
    against the number of values, one line per (norm, implementation), with the copy roofline
    drawn."""
    layout, refs = panel_grid(("median time (ms)", "bandwidth (GB/s)"), gap=0.1,
                               title_size=16)
    series: dict[tuple[str, str], list] = {}
    for row in rows:
        series.setdefault((row.norm, row.impl), []).append(row)
    impls = sorted({impl for _, impl in series})
    dashes = {NormKind.LAYER: "solid", NormKind.BATCH: "dash", NormKind.RMS: "dot"}
    left = dict(xaxis=refs[0][0], yaxis=refs[0][1])
    right = dict(xaxis=refs[1][0], yaxis=refs[1][1])
    data = []
    for (norm, impl), points in series.items():
        points = sorted(points, key=lambda r: r.size)
        color = OKABE_ITO[impls.index(impl) % len(OKABE_ITO)]
        common = dict(type="scatter", mode="lines+markers", name=f"{norm} · {impl}",
                      legendgroup=f"{norm}{impl}",
                      line=dict(color=color, dash=dashes.get(norm, "solid")))
        sizes = [p.size for p in points]
        data.append(dict(x=sizes, y=[p.seconds * 1e3 for p in points], **common, **left))
        data.append(dict(x=sizes, y=[p.gb_per_s for p in points], showlegend=False, **common,
                         **right))
    if roofline_gbps:
        sizes = sorted(roofline_gbps)
        # A level mark at each size: with a single size a bare line would be one invisible point.
        data.append(dict(type="scatter", x=sizes, y=[roofline_gbps[s] for s in sizes],
                         mode="lines+markers", name="copy (roofline)",
                         line=dict(color="black", width=3),
                         marker=dict(symbol="line-ew-open", size=26, color="black",
                                     line=dict(width=3, color="black")), **right))
    each_axis(layout, refs,
              x=dict(log_ticks(*(trace["x"] for trace in data)),
                     title=dict(text="values in the tensor")))
    for k, ref in enumerate(refs):  # times on the left, bandwidths on the right
        layout["yaxis" + ("" if k == 0 else str(k + 1))].update(
            log_ticks(*(trace["y"] for trace in data if trace["yaxis"] == ref[1])))
    layout.update(height=420, margin=dict(t=40, b=10))
    return figure(data, layout)
