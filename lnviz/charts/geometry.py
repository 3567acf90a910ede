"""Figures of the geometry lesson: vectors of H = 3 features in a 3-D scene (H = 2 in a plane)
on their way to the circle where the plane Σx = 0 meets the sphere of radius √H.

Both figures take the lesson's numbers (:mod:`lnviz.lessons.geometry`): the points, and the
plane, sphere and circle already computed at a modest resolution, so that a figure of 24 vectors
sends at most about 40 KB.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from lnviz.charts.base import AFTER, BEFORE, LEGEND_BELOW, OKABE_ITO, compact, figure
from lnviz.terms import NormKind

CENTRED, OUTPUT = OKABE_ITO[2], OKABE_ITO[5]
PLANE, SPHERE, GUIDE = "#888888", "#BBBBBB", "#777777"
#: The 3-D cameras: "up" is the diagonal (1, 1, 1), so the plane Σx = 0 lies flat like a floor
#: and centring drops each point straight down onto it. Both look at 0 along (1, −1, 0) turned
#: up towards the diagonal: the whole way from 28° above the floor (the drops show), the close-up
#: from 51° (the circle shows round); far enough that a phone's narrow scene still holds the
#: whole cube. Dragging turns the scene around the diagonal.
_UP = dict(x=1, y=1, z=1)
PATH_CAMERA = dict(up=_UP, eye=dict(x=2.42, y=-0.96, z=0.73))
CLOSEUP_CAMERA = dict(up=_UP, eye=dict(x=2.23, y=0.01, z=1.12))
_AXES = ("x₁", "x₂", "x₃")


def _coords(values: np.ndarray) -> dict:
    """x, y (and z) of a trace from an (N, H) array."""
    values = np.asarray(values, dtype=np.float64)
    return {axis: compact(values[:, k]) for k, axis in enumerate("xyz"[: values.shape[1]])}


def _kind(h: int, kind2: str = "scatter") -> str:
    return kind2 if h == 2 else "scatter3d"


def _points(values: np.ndarray, labels: Sequence[str], name: str, color: str,
            symbol: str = "circle") -> dict:
    h = np.shape(values)[1]
    where = "(%{x:.4g}, %{y:.4g})" if h == 2 else "(%{x:.4g}, %{y:.4g}, %{z:.4g})"
    return dict(type=_kind(h), mode="markers", name=name, text=list(labels),
                # outlined, and in 3-D larger than the mesh's shading would let a dot show
                marker=dict(color=color, size=9 if h == 2 else 8, symbol=symbol,
                            line=dict(color="#222222", width=1)),
                hovertemplate=f"%{{text}}<br>{where}<extra>{name}</extra>", **_coords(values))


def _segments(start: np.ndarray, end: np.ndarray, name: str, dash: str) -> dict:
    """One line from each row of ``start`` to the same row of ``end``, as one trace."""
    start, end = np.asarray(start, np.float64), np.asarray(end, np.float64)
    gap = np.full_like(start, np.nan)
    path = np.stack([start, end, gap], axis=1).reshape(-1, start.shape[1])
    return dict(type=_kind(start.shape[1]), mode="lines", name=name, hoverinfo="skip",
                line=dict(color=GUIDE, width=2, dash=dash), connectgaps=False, **_coords(path))


def _curve(values: np.ndarray, name: str, color: str, dash: str = "solid",
           width: float = 3) -> dict:
    return dict(type=_kind(np.shape(values)[1]), mode="lines", name=name, hoverinfo="skip",
                line=dict(color=color, width=width, dash=dash), **_coords(values))


def _marks(values: np.ndarray, name: str, color: str) -> dict:
    """Open markers at the few points a set consists of (H = 2: LayerNorm's ±(1, −1))."""
    return dict(type="scatter", mode="markers", name=name, hoverinfo="skip",
                marker=dict(color=color, size=16, symbol="circle-open", line=dict(width=2)),
                **_coords(values))


def _mesh(vertices: np.ndarray, faces: np.ndarray, name: str, color: str,
          opacity: float) -> dict:
    faces = np.asarray(faces, dtype=np.int32)
    return dict(type="mesh3d", name=name, color=color, opacity=opacity, hoverinfo="skip",
                showlegend=True, i=faces[:, 0], j=faces[:, 1], k=faces[:, 2],
                flatshading=True, **_coords(vertices))


def _plane(plane: np.ndarray) -> dict:
    """The plane Σx = 0: a patch (a fan of triangles from 0 to its corners) in 3-D, a segment
    of the line x₁ + x₂ = 0 in 2-D."""
    if plane.shape[1] == 2:
        return _curve(plane, "line x₁ + x₂ = 0", PLANE, "dot", 2)
    corners = len(plane)
    vertices = np.vstack([np.zeros((1, 3)), plane])
    faces = [(0, 1 + c, 1 + (c + 1) % corners) for c in range(corners)]
    return _mesh(vertices, np.array(faces), "plane Σx = 0", PLANE, 0.18)


def _sphere(sphere: np.ndarray, faces: np.ndarray | None, color: str,
            opacity: float = 0.15, name: str | None = None) -> dict:
    """The sphere of radius √H as a translucent mesh in 3-D, a dashed circle in 2-D (or its
    image under γ, named ``name``)."""
    h = np.shape(sphere)[1]
    name = name or (f"sphere |x| = √{h}" if h == 3 else f"circle |x| = √{h}")
    if faces is None:
        return _curve(sphere, name, color, "dash", 2)
    return _mesh(sphere, faces, name, color, opacity)


def _circle(circle: np.ndarray, name: str, color: str, dash: str = "solid") -> dict:
    if circle.shape[1] == 2:  # H = 2: the two points ±(1, −1)
        return _marks(circle, name, color)
    return _curve(circle, name, color, dash)


def _reach(*arrays: np.ndarray | None) -> float:
    """Half the width of a square (cube) view that holds every finite value given."""
    values = [np.abs(a[np.isfinite(a)]) for a in arrays if a is not None]
    largest = max((float(v.max()) for v in values if v.size), default=1.0)
    return 1.1 * largest


def _layout(h: int, reach: float, height: int, camera: dict) -> dict:
    span = [-reach, reach]
    layout: dict = dict(height=height, margin=dict(l=0, r=0, t=10, b=10), legend=LEGEND_BELOW)
    if h == 2:
        layout["xaxis"] = dict(title=dict(text=_AXES[0]), range=span, zeroline=True)
        layout["yaxis"] = dict(title=dict(text=_AXES[1]), range=span, zeroline=True,
                               scaleanchor="x", scaleratio=1)
    else:
        layout["scene"] = dict(
            aspectmode="cube", camera=camera,
            **{f"{axis}axis": dict(title=dict(text=_AXES[k]), range=span)
               for k, axis in enumerate("xyz")})
    return layout


def path_figure(
    norm: str,
    inputs: np.ndarray,
    centred: np.ndarray,
    x_hat: np.ndarray,
    labels: Sequence[str],
    plane: np.ndarray,
    sphere: np.ndarray,
    faces: np.ndarray | None,
    circle: np.ndarray,
) -> go.Figure:
    """The whole way from x to x̂: the inputs, x − μ (none for RMSNorm), x̂, the moves between
    them, and the shapes: the sphere, and but for RMSNorm the plane and LayerNorm's circle
    (dashed, for comparison, under BatchNorm).

    H = 3 is a 3-D scene, H = 2 a plane with equal axes. Traces: the shapes first (plane,
    sphere, circle), then the moves (dotted x → x − μ, dashed on to x̂), then the points: x,
    x − μ, x̂.
    """
    h = np.shape(inputs)[1]
    centring = norm != NormKind.RMS
    data = [_plane(plane)] if centring else []
    data.append(_sphere(sphere, faces, SPHERE if h == 3 else PLANE))
    if centring:
        data += [_circle(circle, "LayerNorm's circle" if h == 3 else "±(1, −1)", OKABE_ITO[7],
                         "solid" if norm == NormKind.LAYER else "dash"),
                 _segments(inputs, centred, "− μ", "dot"),
                 _segments(centred, x_hat, "÷ √(σ² + ε)", "dash")]
    else:
        data.append(_segments(inputs, x_hat, "÷ √(ms + ε)", "dash"))
    data.append(_points(inputs, labels, "input x", BEFORE))
    if centring:
        data.append(_points(centred, labels, "x − μ", CENTRED, "diamond"))
    data.append(_points(x_hat, labels, "x̂", AFTER))
    reach = _reach(inputs, centred, x_hat, plane if centring else sphere)
    return figure(data, _layout(h, reach, 640 if h == 3 else 480, PATH_CAMERA))


def closeup_figure(
    norm: str,
    x_hat: np.ndarray,
    labels: Sequence[str],
    plane: np.ndarray,
    sphere: np.ndarray,
    faces: np.ndarray | None,
    circle: np.ndarray,
    output: np.ndarray | None = None,
    sphere_out: np.ndarray | None = None,
    circle_out: np.ndarray | None = None,
) -> go.Figure:
    """Up close: where x̂ lands — LayerNorm's circle (in its plane, on its sphere) or RMSNorm's
    sphere — and, when ``output`` is given, y = γ⊙x̂ + β with the image of that set: an ellipse
    (``circle_out``), or for RMSNorm an ellipsoid (``sphere_out``).

    Traces: the shapes, then x̂, then (with ``output``) the shape's image and y.
    """
    h = np.shape(x_hat)[1]
    data = []
    if norm != NormKind.RMS:
        data += [_plane(plane), _sphere(sphere, faces, SPHERE if h == 3 else PLANE)]
        data.append(_circle(circle, "LayerNorm's circle" if h == 3 else "±(1, −1)",
                            OKABE_ITO[7], "solid" if norm == NormKind.LAYER else "dash"))
    else:
        data.append(_sphere(sphere, faces, PLANE, 0.25))
    data.append(_points(x_hat, labels, "x̂", AFTER))
    shown = [x_hat, sphere, plane if norm != NormKind.RMS else None]
    if output is not None:
        if norm == NormKind.RMS:
            name = "γ⊙circle" if h == 2 else "γ⊙sphere"
            data.append(_sphere(sphere_out, faces, OUTPUT, 0.12, name))
            shown.append(sphere_out)
        else:
            name = "γ⊙(±(1, −1)) + β" if h == 2 else "ellipse γ⊙circle + β"
            data.append(_marks(circle_out, name, OUTPUT) if h == 2
                        else _curve(circle_out, name, OUTPUT, "dash"))
            shown.append(circle_out)
        data.append(_points(output, labels, "y = γ⊙x̂" if norm == NormKind.RMS else "y = γ⊙x̂ + β",
                            OUTPUT, "diamond"))
        shown.append(output)
    return figure(data, _layout(h, _reach(*shown), 560 if h == 3 else 460, CLOSEUP_CAMERA))
