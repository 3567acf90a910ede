r"""The geometry of LayerNorm: what normalizing does to a vector of H = 2 or 3 features.

LayerNorm is two moves in ℝᴴ. Subtracting the mean, x − μ·1, is the orthogonal projection onto
the plane Σx = 0 along the diagonal 1 = (1, …, 1). Dividing by √(σ² + ε) then slides the point
along its own ray from 0, and because |x − μ·1|² = H·σ² it lands at distance

    |x̂| = √H·√(σ²/(σ² + ε)),

on the sphere of radius √H when ε = 0. So every x̂ lies on the circle where that plane meets that
sphere (for H = 2: on one of the two points ±(1, −1)), inside it when ε > 0. RMSNorm skips the
projection: x̂ = x/√(ms + ε) lies on the sphere, anywhere on it. BatchNorm normalizes each feature
across the vectors instead, which holds no single vector to any circle. γ and β map the circle to
an ellipse, y = γ⊙x̂ + β.

* :func:`input_vectors` — the page's sources: the two sentences' seven tokens, random or typed
vectors;
* :func:`geometry_view` — the vectors through a norm (lnviz's, through
  :func:`lnviz.batch.table_norm`) with every number the figures draw: x − μ, x̂, y, the lengths,
  the distances to the circle, and torch's check;
* :func:`target_shapes` — the plane, the sphere and the circle to draw, and their images under
  γ and β;
* :func:`facts`, :func:`path_caption`, :func:`closeup_caption`, :func:`vector_table` — the page's
  text, written from those numbers;
* :func:`geometry_snippet` — the same in PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lnviz.batch import TABLE_NORMS, max_abs_difference, table_norm, torch_table_norm
from lnviz.data import get_preset, parse_numbers, random_batch
from lnviz.data.generators import check_whole
from lnviz.devices import to_numpy, to_tensor
from lnviz.lessons.common import Answer
from lnviz.limits import GEOMETRY_MAX_MAGNITUDE, GEOMETRY_MAX_VECTORS
from lnviz.snippets import Code, snippet
from lnviz.terms import NormKind, listed

__all__ = [
    "FEATURES",
    "GEOMETRY_NORMS",
    "LANDING_OPTIONS",
    "SOURCES",
    "GeometryView",
    "Inputs",
    "TargetShapes",
    "closeup_caption",
    "distance_to_circle",
    "facts",
    "geometry_snippet",
    "geometry_view",
    "groups_of_equal",
    "input_vectors",
    "landing_answer",
    "path_caption",
    "plane_basis",
    "sentence_tokens",
    "target_shapes",
    "torch_check",
    "vector_table",
]

#: The norms the page compares, in the order it offers them.
GEOMETRY_NORMS = tuple(sorted(TABLE_NORMS,
                             key=(NormKind.LAYER, NormKind.RMS, NormKind.BATCH).index))
#: Where the vectors come from.
SOURCES = {"sentences": "The two sentences' tokens", "random": "Random", "typed": "Typed"}
#: The vector lengths H that can be drawn.
FEATURES = (2, 3)
#: Points on a drawn circle, and the sphere's mesh: latitudes × longitudes.
CIRCLE_POINTS = 72
SPHERE_GRID = (12, 24)
#: The plane Σx = 0 is drawn as a regular polygon of this many corners around 0.
PLANE_CORNERS = 12


def _check_h(h: object) -> int:
    if isinstance(h, bool) or h not in FEATURES:
        raise ValueError(f"H must be one of {list(FEATURES)}, got {h!r}")
    return int(h)


def _check_norm(norm: object) -> str:
    if norm not in GEOMETRY_NORMS:
        raise ValueError(f"norm must be one of {', '.join(GEOMETRY_NORMS)}, got {norm!r}")
    return str(norm)


# --- Sources ----------------------------------------------------------------------------------


def sentence_tokens() -> tuple[np.ndarray, tuple[str, ...]]:
    """The two sentences' seven real tokens ("I" = [1, 2, 3] … "powerful" = [7, 13, 19]) and their
    names, from the padded-batch preset with the pad token left out.

    Every one is a + b·(0, 1, 2) with b > 0 ("powerful": a = 7, b = 6), so LayerNorm, which
    forgets a (centring) and b (scaling), sends all seven to one x̂.
    """
    preset = get_preset("padded_tokens")
    real = preset.mask.reshape(-1)
    values = preset.values.reshape(-1, preset.values.shape[-1])[real]
    labels = tuple(label for label, keep in zip(preset.labels, real, strict=True) if keep)
    return values.astype(np.float64), labels


@dataclass(frozen=True)
class Inputs:
    """The vectors to normalize: ``values`` (N, H), a name for each, and how many trailing
    features of the source were left out to make H (H = 2 keeps the first two)."""

    values: np.ndarray
    labels: tuple[str, ...]
    dropped: int


def input_vectors(source: str, h: int, *, count: int = 8, seed: int = 0,
                  text: str = "") -> Inputs:
    """The page's vectors: the first ``h`` features of each.

    ``"sentences"``: the two sentences' seven tokens (:func:`sentence_tokens`). ``"random"``:
    ``count`` N(0, 1) vectors of 3 features drawn with ``seed`` (H = 2 keeps the first two of
    the same draws). ``"typed"``: ``text``, one vector per line or per ';'
    (``"1, 2, 3; 3, 1, 2"``). Raises ValueError, saying what to change, for anything else.
    """
    h = _check_h(h)
    if source == "sentences":
        values, labels = sentence_tokens()
    elif source == "random":
        count = check_whole("the number of vectors", count, 1)
        if count > GEOMETRY_MAX_VECTORS:
            raise ValueError(f"at most {GEOMETRY_MAX_VECTORS} vectors, got {count}")
        values = random_batch((count, 3), seed=seed)
        labels = tuple(f"v{i + 1}" for i in range(count))
    elif source == "typed":
        values = _typed_vectors(text, h)
        labels = tuple(f"v{i + 1}" for i in range(len(values)))
    else:
        raise ValueError(f"source must be one of {list(SOURCES)}, got {source!r}")
    return Inputs(values[:, :h].astype(np.float64), labels, values.shape[1] - h)


def _typed_vectors(text: str, h: int) -> np.ndarray:
    values = parse_numbers(text, max_elements=GEOMETRY_MAX_VECTORS * 64)
    if values.ndim == 1:
        values = values[None, :]
    if values.ndim != 2:
        raise ValueError("type one vector per line, or vectors separated by ';' "
                         "(e.g. 1, 2, 3; 3, 1, 2)")
    if len(values) > GEOMETRY_MAX_VECTORS:
        raise ValueError(f"at most {GEOMETRY_MAX_VECTORS} vectors can be drawn; {len(values)} "
                         "were typed")
    if values.shape[1] < h:
        raise ValueError(f"H = {h} needs at least {h} numbers in each vector; these have "
                         f"{values.shape[1]}")
    if not np.isfinite(values).all():
        raise ValueError("every number must be finite: nan and inf have no place in a picture")
    if np.abs(values).max() > GEOMETRY_MAX_MAGNITUDE:
        raise ValueError(f"numbers up to ±{GEOMETRY_MAX_MAGNITUDE:g} only (float16 must hold "
                         f"them); the largest typed is {np.abs(values).max():g}")
    return values


# --- The geometry -----------------------------------------------------------------------------


def plane_basis(h: int) -> np.ndarray:
    """An orthonormal basis of the plane Σx = 0 in ℝᴴ, one vector per row: (1, −1)/√2 for
    H = 2, and (1, −1, 0)/√2, (1, 1, −2)/√6 for H = 3."""
    h = _check_h(h)
    first = np.zeros(h)
    first[:2] = (1.0, -1.0)
    rows = [first / math.sqrt(2.0)]
    if h == 3:
        rows.append(np.array([1.0, 1.0, -2.0]) / math.sqrt(6.0))
    return np.stack(rows)


def distance_to_circle(points: np.ndarray) -> np.ndarray:
    """Each point's distance from LayerNorm's set at ε = 0: the circle where the plane Σx = 0
    meets the sphere of radius √H (for H = 2, the two points ±(1, −1)).

    A point p splits into p∥ along the diagonal (its distance from the plane, |Σp|/√H) and p⊥
    in the plane, whose nearest point of the circle is √H·p⊥/|p⊥|: the distance is
    √(p∥² + (|p⊥| − √H)²).
    """
    points = np.asarray(points, dtype=np.float64)
    h = points.shape[-1]
    along = points.sum(axis=-1) / math.sqrt(h)
    across = np.linalg.norm(points - points.mean(axis=-1, keepdims=True), axis=-1)
    return np.hypot(along, across - math.sqrt(h))


def groups_of_equal(points: np.ndarray, tolerance: float) -> list[list[int]]:
    """The rows of ``points`` in groups of (nearly) equal ones: each row joins the first group
    whose first member lies within ``tolerance`` of it, or starts a new one. Indices, in order
    of first appearance; rows with NaN are left out."""
    groups: list[list[int]] = []
    for i, point in enumerate(np.asarray(points, dtype=np.float64)):
        if not np.isfinite(point).all():
            continue
        for group in groups:
            if np.linalg.norm(point - points[group[0]]) <= tolerance:
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


@dataclass(frozen=True)
class GeometryView:
    """N vectors of H features through one norm, with every number the page draws or says.

    Attributes:
        norm, eps: the normalization (one of :data:`GEOMETRY_NORMS`) and its ε.
        labels: a name for each vector.
        inputs: x (N, H), as the chosen precision stores it.
        centred: x − μ (N, H): LayerNorm's μ is each vector's own mean, BatchNorm's each
            feature's mean over the vectors; RMSNorm does not centre (x itself).
        x_hat: x̂ (N, H), the normalized vectors before γ and β.
        exact_x_hat: the same x̂ computed in float64 from ``inputs``: which vectors share a
            point is read from these (:attr:`exact_tolerance`), so that a difference ε makes
            (a dozen units of float32's last place at ε = 1e-5) is not taken for rounding.
        output: y = γ⊙x̂ + β (N, H); x̂ itself when ``affine`` is False.
        gamma, beta: γ and β (H,); RMSNorm has no β (zeros).
        affine: whether γ and β were given.
        mean: μ, per vector (N,) for LayerNorm, per feature (H,) for BatchNorm, None for RMSNorm.
        var: σ² per vector (N,) for LayerNorm, the mean square per vector (N,) for RMSNorm, σ²
            per feature (H,) for BatchNorm.
        radius: |x̂| (N,).
        expected_radius: √H·√(σ²/(σ² + ε)) (LayerNorm) or √H·√(ms/(ms + ε)) (RMSNorm) (N,);
            None for BatchNorm, which has no such law per vector.
        plane_sum: Σx̂ per vector (N,): 0 on the plane.
        circle_distance: each x̂'s distance from LayerNorm's circle (:func:`distance_to_circle`).
        resolution: the machine epsilon of the dtype x̂ was computed in (float32 for half inputs).
        dtype: the precision's name.
        torch_difference: max |lnviz − torch.nn.functional| over y; None where torch refuses.
        torch_refusal: torch's message where it refuses (BatchNorm at ε = 0), else "".
    """

    norm: str
    eps: float
    labels: tuple[str, ...]
    inputs: np.ndarray
    centred: np.ndarray
    x_hat: np.ndarray
    exact_x_hat: np.ndarray
    output: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    affine: bool
    mean: np.ndarray | None
    var: np.ndarray
    radius: np.ndarray
    expected_radius: np.ndarray | None
    plane_sum: np.ndarray
    circle_distance: np.ndarray
    resolution: float
    dtype: str
    torch_difference: float | None
    torch_refusal: str

    @property
    def h(self) -> int:
        return self.inputs.shape[1]

    @property
    def finite(self) -> np.ndarray:
        """Which vectors have a finite x̂ (0/0 at ε = 0 makes NaN)."""
        return np.isfinite(self.x_hat).all(axis=1)

    @property
    def tolerance(self) -> float:
        """How far apart two x̂ computed in this precision may be and still count as one point:
        sixteen roundings of a number of size √H."""
        return 16 * self.resolution * math.sqrt(self.h)

    @property
    def exact_tolerance(self) -> float:
        """How far apart two :attr:`exact_x_hat` may be and still count as one point: float64's
        rounding of x̂, the page's sixteen units of its last place times √H (:attr:`tolerance`
        in float64), times how far the inputs reach from 0 next to their spread √(σ² + ε):
        centring rounds in units of the inputs, x̂ in units of the spread. An ε > 0 puts
        vectors of unequal σ² about √H·(ε/2)·|1/σ₁² − 1/σ₂²| apart, on σ² of order one some
        hundred times this at ε = 1e-12; closer than this, float64 cannot tell them apart."""
        spread = np.sqrt(np.asarray(self.var, dtype=np.float64) + self.eps).ravel()
        spread = spread[np.isfinite(spread) & (spread > 0)]
        reach = float(np.nanmax(np.abs(self.inputs), initial=0.0))
        scale = max(1.0, reach / float(spread.min())) if spread.size else 1.0
        return 16 * float(np.finfo(np.float64).eps) * math.sqrt(self.h) * scale

    @property
    def points(self) -> list[list[int]]:
        """Which vectors share a point, in groups of indices (NaN x̂ left out), by what exact
        arithmetic says rather than by how close the computed x̂ happen to be: under LayerNorm
        (RMSNorm) two vectors share a point when x − μ (x) points the same way and, at any
        ε > 0 however small, they have the same σ² (mean square); under BatchNorm when their
        float64 x̂ are equal. Directions and spreads are compared within float64's rounding
        (:attr:`exact_tolerance`)."""
        if self.norm == NormKind.BATCH:
            return groups_of_equal(self.exact_x_hat, self.exact_tolerance)
        x = self.inputs.astype(np.float64)
        centred = x - x.mean(axis=1, keepdims=True) if self.norm == NormKind.LAYER else x
        length = np.linalg.norm(centred, axis=1, keepdims=True)
        direction = np.divide(centred, length, out=np.zeros_like(centred), where=length > 0)
        direction[~np.isfinite(self.exact_x_hat).all(axis=1)] = np.nan  # 0/0 at ε = 0
        rays = groups_of_equal(direction, self.exact_tolerance)
        if self.eps == 0:
            return rays
        spread = np.square(centred).mean(axis=1)  # σ² (LayerNorm) or the mean square (RMSNorm)
        relative = self.exact_tolerance ** 2 / self.h  # (16·eps·scale)², far above σ²'s rounding
        points = []
        for ray in rays:
            for i in ray:
                for group in points:
                    j = group[0]
                    if j in ray and abs(spread[i] - spread[j]) <= relative * max(spread[i],
                                                                                  spread[j]):
                        group.append(i)
                        break
                else:
                    points.append([i])
        return sorted(points, key=lambda group: group[0])

    @property
    def reach(self) -> float:
        """How far from 0 the path figure's points go (at least √H): its plane reaches this
        far."""
        return _largest(self.inputs, self.centred, self.x_hat, math.sqrt(self.h))

    @property
    def closeup_reach(self) -> float:
        """How far from 0 the close-up's x̂ go (at least √H): its plane reaches this far."""
        return _largest(self.x_hat, math.sqrt(self.h))


def _largest(*values: np.ndarray | float) -> float:
    """The largest length of a finite row (a vector) among ``values`` (arrays or lengths)."""
    lengths = [np.linalg.norm(v, axis=-1) if isinstance(v, np.ndarray) else np.array([v])
               for v in values]
    finite = np.concatenate([v[np.isfinite(v)] for v in lengths])
    return float(finite.max())


def geometry_view(
    values: np.ndarray,
    labels: Sequence[str],
    norm: str = NormKind.LAYER,
    eps: float = 1e-5,
    gamma: Sequence[float] | None = None,
    beta: Sequence[float] | None = None,
    *,
    device: str = "cpu",
    dtype: str = "float32",
) -> GeometryView:
    """``values`` (N, H) through ``norm`` with lnviz (:func:`lnviz.batch.table_norm`; BatchNorm
    in training mode, statistics over the N vectors), and the same through torch for the check.

    ``gamma`` and ``beta`` (H values each, or None for 1 and 0) give y = γ⊙x̂ + β; RMSNorm takes
    no β.
    """
    norm = _check_norm(norm)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] not in FEATURES or len(values) == 0:
        raise ValueError(f"expected (N, H) vectors with N ≥ 1 and H in {list(FEATURES)}, got "
                         f"shape {list(values.shape)}")
    if len(labels) != len(values):
        raise ValueError(f"{len(values)} vectors need {len(values)} labels, got {len(labels)}")
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"ε must be finite and ≥ 0, got {eps}")
    n, h = values.shape
    affine = gamma is not None or beta is not None
    gammas = np.ones(h) if gamma is None else np.asarray(gamma, dtype=np.float64)
    betas = np.zeros(h) if beta is None or norm == NormKind.RMS else np.asarray(beta, np.float64)
    if gammas.shape != (h,) or betas.shape != (h,):
        raise ValueError(f"γ and β need one value per feature ({h}), got {gammas.size} and "
                         f"{betas.size}")
    x = to_tensor(values, device, dtype)
    params = dict(dtype=torch.float64 if x.dtype == torch.float64 else torch.float32,
                  device=x.device)
    weight = torch.tensor(gammas, **params) if affine else None
    bias = torch.tensor(betas, **params) if affine and norm != NormKind.RMS else None
    result = table_norm(x, norm, weight, bias, float(eps))
    try:
        reference = torch_table_norm(x, norm, weight, bias, float(eps))
        difference, refusal = max_abs_difference(result.output, reference), ""
    except (ValueError, RuntimeError) as err:  # torch refuses BatchNorm at ε = 0
        difference, refusal = None, str(err)
    inputs = to_numpy(x)
    x_hat = to_numpy(result.x_hat)
    exact = to_numpy(table_norm(torch.from_numpy(inputs.astype(np.float64)), norm, None, None,
                                float(eps)).x_hat)
    mean = None if result.mean is None else to_numpy(result.mean)
    var = to_numpy(result.var)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = (None if norm == NormKind.BATCH
                    else math.sqrt(h) * np.sqrt(var / (var + eps)).reshape(n))
    return GeometryView(
        norm=norm,
        eps=float(eps),
        labels=tuple(labels),
        inputs=inputs,
        centred=inputs if mean is None else inputs - mean,
        x_hat=x_hat,
        exact_x_hat=exact,
        output=to_numpy(result.output),
        gamma=gammas,
        beta=betas,
        affine=affine,
        mean=None if mean is None else mean.reshape(-1),
        var=var.reshape(-1),
        radius=np.linalg.norm(x_hat, axis=1),
        expected_radius=expected,
        plane_sum=x_hat.sum(axis=1),
        circle_distance=distance_to_circle(x_hat),
        resolution=float(torch.finfo(result.x_hat.dtype).eps),
        dtype=dtype,
        torch_difference=difference,
        torch_refusal=refusal,
    )


@dataclass(frozen=True)
class TargetShapes:
    """What the figures draw around the points, in ℝᴴ.

    Attributes:
        plane: the plane Σx = 0 as a patch, the corners (:data:`PLANE_CORNERS`, 3) of a regular
            polygon for H = 3, or the line x₁ + x₂ = 0 as a segment (2, 2) for H = 2, reaching
            ``extent`` from 0.
        sphere: the sphere of radius √H: mesh vertices (V, 3) with ``faces`` (F, 3) for H = 3, a
            closed circle (M, 2) for H = 2 (``faces`` None).
        circle: LayerNorm's set at ε = 0, plane ∩ sphere: a closed circle (M, 3) for H = 3, the
            two points ±(1, −1) for H = 2.
        sphere_out, circle_out: their images under y = γ⊙x̂ + β (RMSNorm: γ⊙x̂; β is 0).
    """

    plane: np.ndarray
    sphere: np.ndarray
    faces: np.ndarray | None
    circle: np.ndarray
    sphere_out: np.ndarray
    circle_out: np.ndarray


def target_shapes(h: int, extent: float, gamma: Sequence[float] | None = None,
                  beta: Sequence[float] | None = None) -> TargetShapes:
    """The plane Σx = 0, the sphere of radius √H and their intersection, drawn at modest
    resolution (:data:`CIRCLE_POINTS`, :data:`SPHERE_GRID`), and their images under γ and β."""
    h = _check_h(h)
    if not math.isfinite(extent) or extent <= 0:
        raise ValueError(f"extent must be positive, got {extent}")
    basis = plane_basis(h)
    radius = math.sqrt(h)
    angles = np.linspace(0.0, 2 * math.pi, CIRCLE_POINTS + 1)
    ring = np.stack([np.cos(angles), np.sin(angles)], axis=1)  # (M, 2), closed
    if h == 2:
        plane = np.stack([-extent * basis[0], extent * basis[0]])
        sphere, faces = radius * ring, None
        circle = np.stack([radius * basis[0], -radius * basis[0]])  # ±(1, −1)
    else:
        corners = np.linspace(0.0, 2 * math.pi, PLANE_CORNERS, endpoint=False)
        plane = extent * np.stack([np.cos(corners), np.sin(corners)], axis=1) @ basis
        sphere, faces = _sphere_mesh(radius)
        circle = radius * ring @ basis
    gammas = np.ones(h) if gamma is None else np.asarray(gamma, dtype=np.float64)
    betas = np.zeros(h) if beta is None else np.asarray(beta, dtype=np.float64)
    return TargetShapes(plane, sphere, faces, circle, sphere * gammas + betas,
                        circle * gammas + betas)


def _sphere_mesh(radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangles of a latitude–longitude sphere (poles included once each)."""
    rows, cols = SPHERE_GRID
    theta = np.linspace(0.0, math.pi, rows + 1)[1:-1]  # latitudes between the poles
    phi = np.linspace(0.0, 2 * math.pi, cols, endpoint=False)
    t, p = np.meshgrid(theta, phi, indexing="ij")
    ring = np.stack([np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)], axis=-1)
    vertices = radius * np.vstack([[0.0, 0.0, 1.0], ring.reshape(-1, 3), [0.0, 0.0, -1.0]])
    south = len(vertices) - 1

    def at(row: int, col: int) -> int:
        return 1 + row * cols + col % cols

    faces = [(0, at(0, c), at(0, c + 1)) for c in range(cols)]
    for r in range(rows - 2):
        for c in range(cols):
            faces += [(at(r, c), at(r + 1, c), at(r + 1, c + 1)),
                      (at(r, c), at(r + 1, c + 1), at(r, c + 1))]
    faces += [(south, at(rows - 2, c + 1), at(rows - 2, c)) for c in range(cols)]
    return vertices, np.array(faces, dtype=np.int32)


# --- The page's text, from the numbers --------------------------------------------------------


def _g(value: float, digits: int = 2) -> str:
    """A number as the page writes it: ``digits`` significant digits, −0 as 0."""
    return f"{value + 0.0:.{digits}g}"


def _span(low: float, high: float) -> tuple[str, str]:
    """``low`` and ``high`` with enough digits (at least 4) to tell them apart."""
    for digits in range(4, 17):
        if _g(low, digits) != _g(high, digits):
            break
    return _g(low, digits), _g(high, digits)


def _vector(values: np.ndarray, digits: int = 3) -> str:
    return "(" + ", ".join(_g(v, digits) for v in values) + ")"


def facts(view: GeometryView) -> list[str]:
    """What the figures show, as sentences whose numbers come from ``view``: for every setting,
    each sentence is checked against the numbers it states (tests/test_geometry.py)."""
    h = view.h
    finite = view.finite
    lines: list[str] = []
    if (view.var == 0).any():
        lines.append(_no_spread(view))
    if finite.any():
        lines += _where_they_land(view)
    if finite.sum() > 1:
        lines.append(_collapse(view))
    if view.norm == NormKind.LAYER and h == 2:
        lines.append(_two_points(view))
    return lines


#: The page's "Before you look" question: how many places the vectors' x̂ go to.
LANDING_OPTIONS = ("all on one point", "on more than one point, fewer than vectors",
                   "each on a point of its own")
#: What each norm keeps of a vector, which decides the vectors that share an x̂.
_KEEPS = {
    NormKind.LAYER: "LayerNorm keeps only the direction of x − μ·(1, …, 1) and, when ε > 0, how "
                 "large σ² is against ε: at ε = 0, vectors a·(1, …, 1) + b·v with one v and any "
                 "a and b > 0 share an x̂.",
    NormKind.RMS: "RMSNorm does not centre: it keeps the direction of x itself and, when ε > 0, "
               "how large its mean square is against ε: at ε = 0 only positive multiples of one "
               "vector share an x̂.",
    NormKind.BATCH: "BatchNorm takes each feature's μ and σ over all the vectors and applies the "
                 "same ones to each, so two vectors share an x̂ only if they are equal.",
}


def landing_answer(view: GeometryView) -> Answer | None:
    """Which of :data:`LANDING_OPTIONS` ``view``'s x̂ make right, and why: what the norm keeps
    of a vector, and where these vectors went (:func:`facts`' count). None with fewer than two
    finite x̂, where the question has no answer."""
    count = int(view.finite.sum())
    if count < 2:
        return None
    groups = view.points
    option = LANDING_OPTIONS[0 if len(groups) == 1 else 2 if len(groups) == count else 1]
    reason = f"{_KEEPS[view.norm]} {_collapse(view)}{_instance(view, groups)}"
    stored = groups_of_equal(view.x_hat, view.tolerance)  # as the chosen precision holds them
    shown = LANDING_OPTIONS[0 if len(stored) == 1 else 2 if len(stored) == count else 1]
    if len(stored) < len(groups) and shown != option:  # ε's distances below the precision's
        return Answer(option, reason + (
            f" In {view.dtype} some of those distances are smaller than its rounding, so "
            f"“{shown}” is right too, as the numbers are stored."), (shown,))
    return Answer(option, reason)


def _instance(view: GeometryView, groups: list[list[int]]) -> str:
    """One shared x̂ worked out: the last vector of the first group of two or more written as
    a·(1, …, 1) + b·(its first) (RMSNorm: b·(its first)); "" where no two vectors share one or
    under BatchNorm."""
    if view.norm == NormKind.BATCH:
        return ""
    shared = [g for g in groups if len(g) > 1]
    # a group of constant vectors (RMSNorm: of zeros) shares x̂ = 0 only because there is
    # nothing to scale: no a + b·x of one gives another; a group with a spread is the instance
    spread = np.std if view.norm == NormKind.LAYER else (lambda v: np.sqrt(np.mean(v * v)))
    varied = [g for g in shared if spread(view.inputs[g[0]].astype(np.float64)) > 0]
    if not varied:
        if not shared:
            return ""
        first, last = shared[0][0], shared[0][-1]
        what = "constant" if view.norm == NormKind.LAYER else "zero"
        return (f" “{view.labels[first]}” and “{view.labels[last]}” share x̂ = 0 because they "
                f"are {what} vectors: {'x − μ' if view.norm == NormKind.LAYER else 'x'} is 0, "
                "so x̂ = 0/√ε = 0.")
    first, last = varied[0][0], varied[0][-1]
    x0, x1 = view.inputs[first].astype(np.float64), view.inputs[last].astype(np.float64)
    if view.norm == NormKind.LAYER:
        b = float(np.std(x1) / np.std(x0))
        a = float(x1.mean() - b * x0.mean())
        form = f"{a:.3g}·(1, …, 1) + {b:.3g}·“{view.labels[first]}”"
    else:
        b = float(np.sqrt(np.mean(x1**2) / np.mean(x0**2)))
        form = f"{b:.3g}·“{view.labels[first]}”"
    if view.eps > 0 and len(groups) > 1:  # a shared point at ε > 0 takes the same spread too
        stat = "σ²" if view.norm == NormKind.LAYER else "mean square"
        return (f" With ε > 0, two vectors share a point only if they also have the same {stat}"
                f": “{view.labels[last]}” = {_vector(x1)} = {form}, and “{view.labels[first]}”"
                f" has the same {stat}.")
    return (f" For instance, “{view.labels[last]}” = {_vector(x1)} = {form}.")


def _where_they_land(view: GeometryView) -> list[str]:
    """The law the finite x̂ follow: LayerNorm's plane and radius, RMSNorm's radius, or
    BatchNorm's per-feature statistics."""
    h, finite = view.h, view.finite
    if view.norm == NormKind.LAYER:
        plane = "line x₁ + x₂ = 0" if h == 2 else "plane Σx = 0"
        return [f"Every x̂ lies on the {plane} (largest |Σx̂|: "
                f"{_g(np.abs(view.plane_sum[finite]).max())}) at distance √H·√(σ²/(σ² + ε)) "
                f"from 0 (largest difference: {_g(_radius_error(view))})."]
    if view.norm == NormKind.RMS:
        sums = view.plane_sum[finite]
        return [f"Every x̂ lies at distance √H·√(ms/(ms + ε)) from 0, ms being the mean square "
                f"(largest difference: {_g(_radius_error(view))}): on the "
                f"{'circle' if h == 2 else 'sphere'} of radius √{h} at ε = 0, inside it when "
                f"ε > 0, and anywhere around it, since nothing is centred "
                f"(Σx̂ runs from {_g(sums.min(), 3)} to {_g(sums.max(), 3)})."]
    return _batch_norm_facts(view)


def _no_spread(view: GeometryView) -> str:
    """What happens to vectors (BatchNorm: features) with no spread: 0/0 at ε = 0, else 0."""
    n, h = view.x_hat.shape
    count = int((view.var == 0).sum())
    if view.norm == NormKind.BATCH:
        what = (f"{count} of the {h} features {'has' if count == 1 else 'have'} σ² = 0 "
                "across the vectors, so x − μ = 0 there")
        nan = "that coordinate of every x̂ is 0/0 = NaN and nothing is drawn"
    else:
        stat, zero = ("ms", "x = 0") if view.norm == NormKind.RMS else ("σ²", "x − μ = 0")
        what = f"{count} of the {n} vectors {'has' if count == 1 else 'have'} {stat} = 0, so {zero}"
        nan = f"{'its' if count == 1 else 'their'} x̂ is 0/0 = NaN and is not drawn"
    if view.eps == 0:
        return f"{what}: with ε = 0, {nan}; any ε > 0 gives 0 instead."
    return f"{what}: with ε = {view.eps:g}, x̂ is 0/√ε = 0 there."


def _radius_error(view: GeometryView) -> float:
    finite = view.finite
    return float(np.abs(view.radius[finite] - view.expected_radius[finite]).max())


def _batch_norm_facts(view: GeometryView) -> list[str]:
    """Where BatchNorm's x̂ are with respect to LayerNorm's circle, and what it fixes instead."""
    finite = view.finite
    n = len(view.x_hat)
    far = float(view.circle_distance[finite].max())
    sums = view.plane_sum[finite]
    if far <= view.tolerance:
        where = f"here they happen to lie on it (up to {_g(far)})"
    else:
        where = (f"here they are up to {_g(far, 3)} from it, and Σx̂ runs from "
                 f"{_g(sums.min(), 3)} to {_g(sums.max(), 3)}")
    target = "two points ±(1, −1)" if view.h == 2 else "circle"
    lines = [f"BatchNorm centres and scales each feature across the {n} vectors, so no single "
             f"x̂ is held to LayerNorm's {target}: {where}."]
    # Called only when x̂ is finite, which for BatchNorm means every feature's: with ε = 0 a
    # feature without spread makes NaN of that coordinate of every vector.
    spread = bool((view.var > 0).all())
    column_means = np.abs(view.x_hat.mean(axis=0)).max()
    square = float((view.x_hat**2).sum(axis=1).mean())
    lines.append(
        f"What it fixes is the cloud: each feature of x̂ has mean 0 over the vectors (largest: "
        f"{_g(column_means)}), and the mean of |x̂|² is Σ σ²/(σ² + ε) over the features, "
        f"{_g(square, 4)}" + (f" (H = {view.h} at ε = 0)." if spread else "."))
    if n == 2 and spread:
        lines.append("With 2 vectors each feature of x̂ is ±√(σ²/(σ² + ε)), ±1 at ε = 0: the "
                     "twin of LayerNorm's ±(1, −1) at H = 2.")
    return lines


def _collapse(view: GeometryView) -> str:
    """How many places the vectors went to: one point, one ray, or several."""
    finite = view.finite
    count = int(finite.sum())
    points = view.points
    if len(points) == 1:
        spread = max(np.linalg.norm(view.x_hat[i] - view.x_hat[points[0][0]])
                     for i in points[0])
        return (f"All {count} x̂ land on one point, {_vector(view.x_hat[points[0][0]])} (they "
                f"differ by at most {_g(spread)}).")
    if view.norm == NormKind.BATCH:
        return _shared(f"The {count} x̂ land on {len(points)} different points", points, view)
    radius = np.linalg.norm(view.exact_x_hat, axis=1)
    moved = finite & (radius > view.exact_tolerance)
    directions = np.full_like(view.exact_x_hat, np.nan)
    directions[moved] = view.exact_x_hat[moved] / radius[moved, None]
    rays = groups_of_equal(directions, view.exact_tolerance)
    at_zero = int((finite & ~moved).sum())
    if len(points) == len(rays) + (at_zero > 0):  # a ray holds one point: ε moved nothing apart
        return _shared(f"The {count} x̂ land on {len(points)} different points", points, view)
    zero = f" ({at_zero} at 0)" if at_zero else ""
    if len(rays) == 1:
        low, high = _span(radius[rays[0]].min(), radius[rays[0]].max())
        return (f"All {len(rays[0])}{' nonzero' if at_zero else ''} x̂{zero} point the same way, "
                f"{_vector(directions[rays[0][0]])}, but ε sets each one's distance: from "
                f"{low} to {high}. At ε = 0 they would land on one point.")
    return _shared(f"The {count} x̂ point in {len(rays)} different directions{zero}, ε setting "
                   "each one's distance", rays, view)


def _shared(text: str, groups: list[list[int]], view: GeometryView) -> str:
    """``text``, then which vectors share a place (a group of more than one)."""
    shared = [g for g in groups if len(g) > 1]
    if not shared:
        return text + "."
    return text + ": " + "; ".join(listed([view.labels[i] for i in g]) + " share one"
                                   for g in shared) + "."


def _two_points(view: GeometryView) -> str:
    x1, x2 = view.inputs[:, 0], view.inputs[:, 1]
    up, down, equal = int((x1 > x2).sum()), int((x1 < x2).sum()), int((x1 == x2).sum())
    tail = f", and 0 when x₁ = x₂ ({equal}; NaN at ε = 0)" if equal else ""
    return ("With H = 2 LayerNorm has two places for a vector: (1, −1)·√(σ²/(σ² + ε)) when "
            f"x₁ > x₂ ({up} here) and (−1, 1)·√(σ²/(σ² + ε)) when x₁ < x₂ ({down} here){tail}: "
            "the twin of BatchNorm's ±1 at a batch of 2.")


def torch_check(view: GeometryView) -> str:
    """One sentence: does lnviz match torch.nn.functional here?"""
    name = f"torch.nn.functional.{NormKind(view.norm).function}"
    if view.torch_difference is None:
        return f"{name} refuses this setting ({view.torch_refusal}); lnviz computes it."
    return (f"lnviz matches {name} here: the largest difference in y is "
            f"{_g(view.torch_difference)} ({view.dtype}).")


def path_caption(view: GeometryView) -> str:
    """What the path figure's lines mean, for this norm and H."""
    h = view.h
    if view.norm == NormKind.LAYER:
        diagonal, plane = ("(1, 1)", "line x₁ + x₂ = 0") if h == 2 else ("(1, 1, 1)",
                                                                         "plane Σx = 0")
        target = ("one of the two points ±(1, −1)" if h == 2
                  else "the circle of radius √3 in that plane")
        return (f"Dotted: subtracting μ moves each input (blue) along the diagonal {diagonal} "
                f"onto the {plane} (green). Dashed: dividing by √(σ² + ε) slides it along its "
                f"ray from 0 to {target} (orange; inside when ε > 0).")
    sphere = "circle of radius √2" if h == 2 else "sphere of radius √3"
    if view.norm == NormKind.RMS:
        return ("RMSNorm does not centre. Dashed: dividing by √(ms + ε) slides each input "
                f"(blue) along its own ray from 0 onto the {sphere} (orange; inside when "
                "ε > 0).")
    target = "two points ±(1, −1) are" if h == 2 else "circle is"
    return ("Dotted: subtracting each feature's mean over the vectors moves every input (blue) "
            "by the same vector (green). Dashed: dividing each feature by its own √(σ² + ε) "
            f"stretches each axis by its own factor (orange). LayerNorm's {target} drawn for "
            "comparison.")


def closeup_caption(view: GeometryView) -> str:
    """What the close-up shows, for this norm, H and γ/β."""
    h = view.h
    if view.norm == NormKind.LAYER:
        text = ("The circle of radius √2 and the line x₁ + x₂ = 0 meet in the two points "
                "±(1, −1): LayerNorm's only outputs at ε = 0." if h == 2 else
                "The sphere of radius √3 and the plane Σx = 0 meet in the circle where "
                "LayerNorm puts x̂ at ε = 0.")
    elif view.norm == NormKind.RMS:
        text = (f"RMSNorm puts x̂ on the {'circle' if h == 2 else 'sphere'} of radius √{h} at "
                "ε = 0, anywhere on it.")
    else:
        text = (f"LayerNorm's {'two points' if h == 2 else 'circle'}, for comparison: "
                "BatchNorm's x̂ are not held to it.")
    if not view.affine:
        return text
    if not view.gamma.any():  # nothing of x̂ is left: no ellipse to lie on or inside
        return text + (f" With every γ at 0, y = γ⊙x̂ + β (vermillion) is β = "
                       f"{_vector(view.beta)} for every vector, at any ε."
                       if view.norm != NormKind.RMS else
                       " With every γ at 0, y = γ⊙x̂ (vermillion) is 0 for every vector, at any "
                       "ε.")
    if view.norm == NormKind.RMS:
        shape = "ellipse" if h == 2 else "ellipsoid"
        return (text + f" y = γ⊙x̂ (vermillion; RMSNorm has no β) lies on the {shape} γ⊙"
                f"{'circle' if h == 2 else 'sphere'} at ε = 0, inside it when ε > 0.")
    image = (f"the points β ± γ⊙(1, −1) = {_vector(view.beta + view.gamma * [1, -1])} and "
             f"{_vector(view.beta - view.gamma * [1, -1])}" if h == 2 else
             f"an ellipse centred at β = {_vector(view.beta)}: the circle stretched by γ along "
             "each axis" + _flattened(view.gamma))
    if view.norm == NormKind.LAYER and h == 2:
        return (text + f" y = γ⊙x̂ + β (vermillion) maps those two points to {image}; y lies "
                "on them at ε = 0, on the segment between them when ε > 0.")
    if view.norm == NormKind.LAYER:
        return (text + f" y = γ⊙x̂ + β (vermillion) maps the circle to {image}; y lies on "
                "it at ε = 0, inside it when ε > 0.")
    return text + f" y = γ⊙x̂ + β (vermillion); the same map sends LayerNorm's set to {image}."


def _flattened(gamma: np.ndarray) -> str:
    """What LayerNorm's circle (in the plane Σx = 0 of three features) becomes where some γ_i
    are 0: y_i = β_i there, and the plane loses no direction to one such axis (its points are
    told apart by the other two coordinates), one direction to two, both to three."""
    zeros = np.flatnonzero(np.asarray(gamma) == 0)
    if zeros.size == 0:
        return ""
    if zeros.size == 1:
        i = "₁₂₃"[int(zeros[0])]
        return f" (γ{i} = 0 lays it in the plane y{i} = β{i}: still an ellipse, not a segment)"
    return " (squeezed to a segment: two γ are 0, so one coordinate alone still varies)"


def vector_table(view: GeometryView) -> pd.DataFrame:
    """One row per vector, as text: x, its statistics, x̂, |x̂| (and the law it follows), Σx̂,
    the distance from LayerNorm's circle, and y when γ and β are on."""
    rows = {"vector": list(view.labels), "x": [_vector(v, 4) for v in view.inputs]}
    if view.norm == NormKind.LAYER:
        rows["μ"] = [_g(v, 4) for v in view.mean]
        rows["σ²"] = [_g(v, 4) for v in view.var]
    elif view.norm == NormKind.RMS:
        rows["ms"] = [_g(v, 4) for v in view.var]
    rows["x̂"] = [_vector(v, 4) for v in view.x_hat]
    rows["|x̂|"] = [_g(v, 5) for v in view.radius]
    if view.expected_radius is not None:
        law = "√H·√(σ²/(σ²+ε))" if view.norm == NormKind.LAYER else "√H·√(ms/(ms+ε))"
        rows[law] = [_g(v, 5) for v in view.expected_radius]
    rows["Σx̂"] = [_g(v, 2) for v in view.plane_sum]
    circle = "±(1, −1)" if view.h == 2 else "the circle" if view.norm == NormKind.LAYER else \
        "LayerNorm's circle"
    rows[f"from {circle}"] = [
        _g(v, 2) for v in view.circle_distance]
    if view.affine:
        rows["y"] = [_vector(v, 4) for v in view.output]
    return pd.DataFrame(rows)


def geometry_snippet(values: np.ndarray, norm: str, eps: float,
                     gamma: Sequence[float] | None = None, beta: Sequence[float] | None = None,
                     dtype: str = "float32") -> str:
    """Self-contained PyTorch code (``lnviz/snippets/geometry.py``) that computes the page's x̂
    (``x_hat``) with ``torch.nn.functional`` and prints what the page checks: Σx̂ and |x̂|
    against its law (LayerNorm, RMSNorm) or each feature's mean (BatchNorm); with γ/β, ``y``
    as well."""
    norm = _check_norm(norm)
    values = np.asarray(values, dtype=np.float64)
    n, h = values.shape
    rows = ",\n                  ".join("[" + ", ".join(repr(float(v)) for v in row) + "]"
                                        for row in values)
    keep = {norm} | ({"eps-zero"} if norm == NormKind.BATCH and eps == 0 else set())
    affine = {}
    if gamma is not None or beta is not None:
        keep |= {"affine"} | ({"beta"} if norm != NormKind.RMS else set())
        gammas = [1.0] * h if gamma is None else [float(g) for g in gamma]
        betas = [0.0] * h if beta is None else [float(b) for b in beta]
        affine = {"gamma": Code(f"torch.tensor({gammas})"),
                  "beta": Code(f"torch.tensor({betas})")}
    x = Code(f"torch.tensor([{rows}],\n                 dtype=torch.{dtype})")
    return snippet("geometry", keep=keep, x=x, eps=eps, **affine,
                   notes={"count": str(n), "h": str(h), "flat": "line" if h == 2 else "plane"})
