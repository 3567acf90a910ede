"""Plotly figure builders: pure functions, data in and ``go.Figure`` out.

Nothing here computes a statistic of its own or touches Streamlit; every figure can be built and
checked in a unit test. Colour scales are colour-blind safe (a blue–orange diverging scale for
values, the Okabe–Ito palette for categories), and each figure is sized by what it is given:
callers pass windows of the tensor (see :func:`lnviz.batch.grid_view`) and histogram
counts, so no figure grows with the tensor.

:mod:`~lnviz.charts.base` holds what every figure shares (palette, panels, legends, the tables of
numbers behind a figure); then there is one module per lesson, named as its page is.
"""

from lnviz.charts import (
    base,
    beyond,
    bn_vs_ln,
    bug_zoo,
    efficientnet,
    epsilon,
    explorer,
    gemma,
    geometry,
    gradients,
    inspector,
    ln_lstm,
    minilm,
    padding,
    performance,
    placement,
    scale_shift,
    shapes,
    smollm2,
    start_here,
)

__all__ = ["base", "beyond", "bn_vs_ln", "bug_zoo", "efficientnet", "epsilon", "explorer",
           "gemma", "geometry", "gradients", "inspector", "ln_lstm", "minilm", "padding",
           "performance", "placement", "scale_shift", "shapes", "smollm2", "start_here"]
