"""lnviz.lessons.geometry and "The geometry of LayerNorm" page: every point against lnviz's and
torch's norms, the plane, the sphere and the radius law, the transformer article's collapse, H =
2's two points,
BatchNorm's contrast, the page's sentences across settings; the page run headless with AppTest."""

from __future__ import annotations

import itertools
import json
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as hs
from pageutil import alerts, asks_first, decode, figures, open_page, shown_text

import lnviz
from lnviz import charts
from lnviz.batch import TABLE_NORMS
from lnviz.data import get_preset, random_batch
from lnviz.lessons.geometry import (
    FEATURES,
    GEOMETRY_MAX_VECTORS,
    GEOMETRY_NORMS,
    LANDING_OPTIONS,
    SOURCES,
    closeup_caption,
    distance_to_circle,
    facts,
    geometry_snippet,
    geometry_view,
    groups_of_equal,
    input_vectors,
    landing_answer,
    path_caption,
    plane_basis,
    sentence_tokens,
    target_shapes,
    torch_check,
    vector_table,
)
from lnviz.ui.params import EPSILONS

PAGE = "app_pages/geometry.py"
SENTENCE_TOKENS = [[1, 2, 3], [2, 4, 6], [3, 6, 9], [4, 8, 12], [5, 10, 15], [6, 12, 18],
                   [7, 13, 19]]
TOKENS = ("I", "love", "deep", "learning", "Transformers", "are", "powerful")
#: ε values the tests sweep: none, PyTorch's default, and large enough to move every point.
SWEEP = (0.0, 1e-5, 1e-2, 1.0)
#: float32 precision for numbers of size √3: a few units in the last place.
F32 = 8 * np.finfo(np.float32).eps * math.sqrt(3)

vectors = hs.lists(hs.lists(hs.floats(-50, 50, allow_nan=False, width=32), min_size=3,
                            max_size=3), min_size=2, max_size=GEOMETRY_MAX_VECTORS)


def view_of(source="sentences", h=3, norm="LayerNorm", eps=0.0, gamma=None, beta=None,
            dtype="float32", **source_args):
    inputs = input_vectors(source, h, **source_args)
    return geometry_view(inputs.values, inputs.labels, norm, eps, gamma, beta, dtype=dtype)


def fact(view, start: str) -> str:
    """The page's sentence about ``view`` that starts with ``start`` (fails if none does)."""
    lines = facts(view)
    found = [line for line in lines if line.startswith(start)]
    assert found, lines
    return found[0]


def lnviz_x_hat(x: torch.Tensor, norm: str, eps: float) -> torch.Tensor:
    h = x.shape[1]
    if norm == "LayerNorm":
        return lnviz.layer_norm(x, h, eps=eps).x_hat
    if norm == "RMSNorm":
        return lnviz.rms_norm(x, h, eps=eps).x_hat
    return lnviz.batch_norm(x, None, None, training=True, eps=eps).x_hat


def torch_x_hat(x: torch.Tensor, norm: str, eps: float) -> torch.Tensor:
    h = x.shape[1]
    if norm == "LayerNorm":
        return F.layer_norm(x, (h,), eps=eps)
    if norm == "RMSNorm":
        return F.rms_norm(x, (h,), eps=eps)
    return F.batch_norm(x, None, None, training=True, eps=eps)


# --- Sources ----------------------------------------------------------------------------------


def test_seed_tokens_are_the_two_sentences_seven_real_tokens_from_the_preset():
    values, labels = sentence_tokens()
    preset = get_preset("padded_tokens")
    assert values.tolist() == SENTENCE_TOKENS and labels == TOKENS
    assert preset.values[preset.mask].tolist() == SENTENCE_TOKENS  # the preset, not a retyped copy
    # each is a + b·(0, 1, 2) with b > 0: why LayerNorm sends all seven to one point
    b = values[:, 1] - values[:, 0]
    assert (b > 0).all()
    np.testing.assert_array_equal(values, values[:, :1] + b[:, None] * [0, 1, 2])


def test_sources_give_the_first_h_features():
    seed3, seed2 = input_vectors("sentences", 3), input_vectors("sentences", 2)
    assert seed3.dropped == 0 and seed2.dropped == 1
    np.testing.assert_array_equal(seed2.values, seed3.values[:, :2])
    random3 = input_vectors("random", 3, count=5, seed=4)
    np.testing.assert_array_equal(random3.values, random_batch((5, 3), seed=4))
    np.testing.assert_array_equal(input_vectors("random", 2, count=5, seed=4).values,
                                  random3.values[:, :2])
    assert random3.labels == ("v1", "v2", "v3", "v4", "v5")
    assert not np.array_equal(random3.values, input_vectors("random", 3, count=5, seed=5).values)
    typed = input_vectors("typed", 2, text="1, 2, 3; 3 1 2\n0, 4, 1")
    assert typed.values.tolist() == [[1, 2], [3, 1], [0, 4]] and typed.dropped == 1
    assert input_vectors("typed", 3, text="[1, 2, 3]").values.tolist() == [[1, 2, 3]]


@pytest.mark.parametrize(("source", "h", "args", "message"), [
    ("typed", 3, {"text": "1, 2; 3, 4"}, "H = 3 needs at least 3 numbers"),
    ("typed", 2, {"text": "1, 2; 3"}, "line 1, row 2"),
    ("typed", 2, {"text": "1, x"}, "'x' is not a number"),
    ("typed", 2, {"text": ""}, "nothing to parse"),
    ("typed", 2, {"text": "1, nan; 2, 3"}, "finite"),
    ("typed", 2, {"text": "1, 2e5"}, "up to ±10000"),
    ("typed", 2, {"text": "; ".join(["1, 2"] * (GEOMETRY_MAX_VECTORS + 1))},
     f"at most {GEOMETRY_MAX_VECTORS}"),
    ("typed", 2, {"text": "[[[1, 2]]]"}, "one vector per line"),
    ("random", 2, {"count": GEOMETRY_MAX_VECTORS + 1}, f"at most {GEOMETRY_MAX_VECTORS}"),
    ("random", 2, {"count": 0}, "at least 1"),
    ("upload", 2, {}, "source must be one of"),
    ("sentences", 4, {}, "H must be one of"),
])
def test_sources_refuse_what_cannot_be_drawn(source, h, args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        input_vectors(source, h, **args)


def test_batch_norm_refuses_a_single_vector_as_lnviz_does():
    with pytest.raises(ValueError, match="more than one value per channel"):
        geometry_view(np.array([[1.0, 2.0, 3.0]]), ["v1"], "BatchNorm", 1e-5)


def test_the_page_offers_the_norms_lnviz_runs_on_a_table():
    assert GEOMETRY_NORMS == ("LayerNorm", "RMSNorm", "BatchNorm")
    assert set(GEOMETRY_NORMS) <= set(TABLE_NORMS)
    assert list(SOURCES) == ["sentences", "random", "typed"] and FEATURES == (2, 3)


# --- Every point against lnviz's and torch's norms --------------------------------------------


@pytest.mark.parametrize(("norm", "h", "eps", "dtype"), [
    (norm, h, eps, dtype) for norm in GEOMETRY_NORMS for h in FEATURES for eps in SWEEP
    for dtype in ("float32", "float64") if not (norm == "BatchNorm" and eps == 0.0)])
def test_every_point_is_lnvizs_and_torchs_x_hat(norm, h, eps, dtype):
    for source, args in (("sentences", {}), ("random", {"count": 12, "seed": 3})):
        view = view_of(source, h, norm, eps, dtype=dtype, **args)
        x = torch.as_tensor(input_vectors(source, h, **args).values).to(getattr(torch, dtype))
        tol = 1e-6 if dtype == "float32" else 1e-13
        np.testing.assert_allclose(view.x_hat, lnviz_x_hat(x, norm, eps).double(), atol=tol)
        np.testing.assert_allclose(view.x_hat, torch_x_hat(x, norm, eps).double(), atol=tol)
        np.testing.assert_array_equal(view.inputs, x.double())
        assert view.torch_difference is not None and view.torch_difference <= tol


def test_batch_norm_at_eps_zero_is_lnvizs_and_torch_refuses_it():
    view = view_of(norm="BatchNorm", eps=0.0)
    x = torch.tensor(SENTENCE_TOKENS, dtype=torch.float32)
    np.testing.assert_allclose(view.x_hat, lnviz_x_hat(x, "BatchNorm", 0.0).double(), atol=1e-6)
    assert view.torch_difference is None and "eps must be positive" in view.torch_refusal
    assert torch_check(view).startswith("torch.nn.functional.batch_norm refuses this setting")
    assert torch_check(view_of()).startswith("lnviz matches torch.nn.functional.layer_norm")


def test_points_agree_with_torch_on_every_device(device):
    inputs = input_vectors("random", 3, count=GEOMETRY_MAX_VECTORS, seed=1)
    for norm in GEOMETRY_NORMS:
        view = geometry_view(inputs.values, inputs.labels, norm, 1e-5, (2.0, 1.0, 0.5),
                             (1.0, 0.0, -0.5), device=device)
        assert view.torch_difference is not None and view.torch_difference < 1e-5


@pytest.mark.parametrize("norm", GEOMETRY_NORMS)
def test_gamma_and_beta_give_torchs_output(norm):
    gamma, beta = (2.0, -1.0, 0.5), (1.0, 0.0, -0.5)
    view = view_of("random", 3, norm, 1e-5, gamma, beta, count=10, seed=2)
    x = torch.as_tensor(view.inputs, dtype=torch.float32)
    g, b = torch.tensor(gamma), torch.tensor(beta)
    expected = {"LayerNorm": lambda: F.layer_norm(x, (3,), g, b, 1e-5),
                "RMSNorm": lambda: F.rms_norm(x, (3,), g, 1e-5),  # RMSNorm has no β
                "BatchNorm": lambda: F.batch_norm(x, None, None, g, b, True, 0.1, 1e-5)}[norm]()
    np.testing.assert_allclose(view.output, expected.double(), atol=1e-6)
    np.testing.assert_allclose(view.output, view.x_hat * view.gamma + view.beta, atol=1e-6)
    assert view.affine and (norm != "RMSNorm" or not view.beta.any())


# --- The geometry: plane, sphere, radius ------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(values=vectors, h=hs.sampled_from(FEATURES), eps=hs.sampled_from(SWEEP[1:]))
def test_layer_norm_projects_onto_the_plane_then_scales_to_its_radius(values, h, eps):
    x = np.array(values, dtype=np.float64)[:, :h]
    view = geometry_view(x, [f"v{i}" for i in range(len(x))], "LayerNorm", eps,
                         dtype="float64")
    ones = np.ones(h) / math.sqrt(h)
    # centring is the orthogonal projection onto Σx = 0: it removes the part along (1, …, 1)
    np.testing.assert_allclose(view.centred, x - np.outer(x @ ones, ones), atol=1e-9)
    var = x.var(axis=1)
    np.testing.assert_allclose(view.x_hat, view.centred / np.sqrt(var + eps)[:, None],
                               atol=1e-9)
    np.testing.assert_allclose(view.plane_sum, 0.0, atol=1e-9)
    radius = math.sqrt(h) * np.sqrt(var / (var + eps))
    np.testing.assert_allclose(view.radius, radius, atol=1e-9)
    np.testing.assert_allclose(view.expected_radius, radius, atol=1e-9)
    # x̂ is (x − μ) scaled along its own ray: same direction as the centred vector
    np.testing.assert_allclose(view.x_hat * np.linalg.norm(view.centred, axis=1)[:, None],
                               view.centred * view.radius[:, None], atol=1e-7)


@pytest.mark.parametrize(("h", "eps"), itertools.product(FEATURES, SWEEP))
def test_in_float32_every_layer_norm_point_is_on_the_plane_at_its_radius(h, eps):
    view = view_of("random", h, "LayerNorm", eps, count=GEOMETRY_MAX_VECTORS, seed=7)
    var = view.inputs.var(axis=1)
    assert np.abs(view.plane_sum).max() <= F32
    np.testing.assert_allclose(view.radius, math.sqrt(h) * np.sqrt(var / (var + eps)),
                               atol=F32)
    if eps == 0.0:  # on the circle itself
        assert view.circle_distance.max() <= F32


@pytest.mark.parametrize(("h", "eps"), itertools.product(FEATURES, SWEEP))
def test_rms_norm_points_are_on_the_sphere_anywhere(h, eps):
    view = view_of("random", h, "RMSNorm", eps, count=GEOMETRY_MAX_VECTORS, seed=7)
    ms = (view.inputs**2).mean(axis=1)
    np.testing.assert_allclose(view.radius, math.sqrt(h) * np.sqrt(ms / (ms + eps)), atol=F32)
    np.testing.assert_allclose(view.expected_radius, view.radius, atol=F32)
    np.testing.assert_array_equal(view.centred, view.inputs)  # no centring
    assert view.mean is None and np.abs(view.plane_sum).max() > 0.5  # off the plane


@pytest.mark.parametrize("h", FEATURES)
def test_the_two_sentences_seven_tokens_collapse_onto_one_point(h):
    view = view_of("sentences", h, "LayerNorm", 0.0)
    spread = np.abs(view.x_hat - view.x_hat[0]).max()
    assert spread <= F32  # to float32 precision
    expected = np.array([-1.0, 0.0, 1.0]) * math.sqrt(1.5) if h == 3 else np.array([-1.0, 1.0])
    np.testing.assert_allclose(view.x_hat, np.tile(expected, (7, 1)), atol=F32)
    assert len(groups_of_equal(view.x_hat, view.tolerance)) == 1
    line = fact(view, "All 7 x̂ land on one point")
    shown = float(line.split("at most ")[1].rstrip(").")) if "at most" in line else None
    assert shown is not None and shown <= F32


@pytest.mark.parametrize(("h", "eps"), itertools.product(FEATURES, SWEEP[1:]))
def test_with_eps_the_two_sentences_tokens_share_a_ray_and_small_variances_are_pulled_in(h, eps):
    view = view_of("sentences", h, "LayerNorm", eps)
    directions = view.x_hat / view.radius[:, None]
    assert np.abs(directions - directions[0]).max() <= F32
    var = view.var
    assert np.all(np.diff(view.radius[np.argsort(var)]) >= -F32)  # radius grows with σ²
    assert view.radius.max() - view.radius.min() > view.tolerance  # ε > 0 moves them apart
    line = fact(view, "All 7 x̂ point the same way")
    low, high = (float(v) for v in line.split("from ")[1].split(". At")[0].split(" to "))
    assert low == pytest.approx(view.radius.min(), rel=1e-3)
    assert high == pytest.approx(view.radius.max(), rel=1e-3) and low < high


@settings(max_examples=30, deadline=None)
@given(values=vectors, eps=hs.sampled_from(SWEEP))
def test_with_two_features_layer_norm_outputs_plus_or_minus_one_minus_one(values, eps):
    x = np.array(values, dtype=np.float64)[:, :2]
    view = geometry_view(x, [f"v{i}" for i in range(len(x))], "LayerNorm", eps,
                         dtype="float64")
    var = ((x[:, 0] - x[:, 1]) / 2) ** 2
    with np.errstate(invalid="ignore"):
        expected = (np.sign(x[:, 0] - x[:, 1]) * np.sqrt(var / (var + eps)))[:, None] * [1, -1]
    np.testing.assert_allclose(view.x_hat, expected, atol=1e-9)
    two = next(line for line in facts(view) if line.startswith("With H = 2 LayerNorm"))
    assert f"({int((x[:, 0] > x[:, 1]).sum())} here)" in two


def test_batch_of_two_gives_plus_or_minus_one_per_feature_the_twin():
    x = np.array([[1.0, 5.0, -2.0], [3.0, 1.0, 4.0]])
    for eps in SWEEP[1:]:
        view = geometry_view(x, ["a", "b"], "BatchNorm", eps, dtype="float64")
        var = ((x[0] - x[1]) / 2) ** 2
        np.testing.assert_allclose(np.abs(view.x_hat), np.tile(np.sqrt(var / (var + eps)),
                                                               (2, 1)), atol=1e-12)
        np.testing.assert_allclose(view.x_hat[0], -view.x_hat[1], atol=1e-12)
        assert any("twin of LayerNorm's ±(1, −1)" in line for line in facts(view))


@pytest.mark.parametrize(("h", "eps"), itertools.product(FEATURES, EPSILONS))
def test_batch_norm_puts_the_two_sentences_points_off_the_circle(h, eps):
    view = view_of("sentences", h, "BatchNorm", eps)
    assert view.circle_distance.min() > 1.0  # "every point leaves LayerNorm's circle"
    # what BatchNorm fixes instead: each feature's mean, and the mean of |x̂|²
    np.testing.assert_allclose(view.x_hat.mean(axis=0), 0.0, atol=F32)
    var = view.inputs.var(axis=0)
    assert (view.x_hat**2).sum(axis=1).mean() == pytest.approx((var / (var + eps)).sum(),
                                                                rel=1e-5)
    line = facts(view)[0]
    assert f"up to {view.circle_distance.max():.3g} from it" in line


def test_distance_to_circle_against_a_fine_circle_and_the_two_points():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(200, 3)) * 2
    angles = np.linspace(0, 2 * np.pi, 20001)
    basis = plane_basis(3)
    fine = math.sqrt(3) * np.stack([np.cos(angles), np.sin(angles)], axis=1) @ basis
    brute = np.linalg.norm(points[:, None] - fine[None], axis=2).min(axis=1)
    np.testing.assert_allclose(distance_to_circle(points), brute, atol=1e-6)
    flat = points[:, :2]
    two = np.array([[1.0, -1.0], [-1.0, 1.0]])
    np.testing.assert_allclose(distance_to_circle(flat),
                               np.linalg.norm(flat[:, None] - two[None], axis=2).min(axis=1))
    assert distance_to_circle(np.zeros((1, 3)))[0] == pytest.approx(math.sqrt(3))


def test_plane_basis_is_orthonormal_and_in_the_plane():
    for h in FEATURES:
        basis = plane_basis(h)
        np.testing.assert_allclose(basis @ basis.T, np.eye(h - 1), atol=1e-15)
        np.testing.assert_allclose(basis.sum(axis=1), 0.0, atol=1e-15)


@pytest.mark.parametrize("h", FEATURES)
def test_target_shapes_are_the_plane_sphere_circle_and_their_images(h):
    gamma, beta = np.array([2.0, 0.5, 1.5])[:h], np.array([1.0, -1.0, 0.5])[:h]
    shapes = target_shapes(h, 4.0, gamma, beta)
    root = math.sqrt(h)
    np.testing.assert_allclose(shapes.plane.sum(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(shapes.plane, axis=1), 4.0)
    np.testing.assert_allclose(np.linalg.norm(shapes.sphere, axis=1), root)
    np.testing.assert_allclose(np.linalg.norm(shapes.circle, axis=1), root)
    np.testing.assert_allclose(shapes.circle.sum(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(shapes.circle_out, shapes.circle * gamma + beta)
    np.testing.assert_allclose(shapes.sphere_out, shapes.sphere * gamma + beta)
    if h == 2:
        np.testing.assert_allclose(shapes.circle, [[1.0, -1.0], [-1.0, 1.0]])
        assert shapes.faces is None
    else:
        # the ellipse is centred at β and is the circle stretched by γ
        np.testing.assert_allclose(shapes.circle_out[:-1].mean(axis=0), beta, atol=1e-12)
        assert shapes.faces.min() == 0 and shapes.faces.max() == len(shapes.sphere) - 1
        assert len(np.unique(shapes.faces)) == len(shapes.sphere)


@pytest.mark.parametrize("h", FEATURES)
def test_layer_norms_output_lies_on_the_ellipse_at_eps_zero(h):
    gamma, beta = (2.0, 0.5, 1.5)[:h], (1.0, -1.0, 0.5)[:h]
    view = view_of("random", h, "LayerNorm", 0.0, gamma, beta, count=10, seed=1)
    # (y − β)/γ is back on the circle
    assert distance_to_circle((view.output - view.beta) / view.gamma).max() <= 4 * F32


# --- The page's sentences, across every setting ------------------------------------------------


#: Every setting of the page's controls but γ and β (and the random vectors' seed and count).
SETTINGS = [(source, h, norm, eps) for source in SOURCES for h in FEATURES
            for norm in GEOMETRY_NORMS for eps in EPSILONS]


@pytest.mark.parametrize(("source", "h", "norm", "eps"), SETTINGS)
def test_every_sentence_holds_for_its_setting(source, h, norm, eps):
    args = {"random": {"count": 9, "seed": 5}, "typed": {"text": "1, 2, 3; 3, 1, 2; 0, 4, 1"}}
    view = view_of(source, h, norm, eps, **args.get(source, {}))
    lines = facts(view)
    x_hat = view.x_hat
    # an independent float64 check of the claims each sentence makes
    if norm == "LayerNorm":
        assert lines[0].startswith("Every x̂ lies on the " + ("line" if h == 2 else "plane"))
        assert np.abs(x_hat.sum(axis=1)).max() <= F32
    elif norm == "RMSNorm":
        assert "anywhere around it" in lines[0]
    else:
        assert "no single x̂ is held to LayerNorm's" in lines[0]
    # one point: the float64 x̂ (computed here) closer than the precision can show apart
    x64 = view.inputs.astype(np.float64)
    if norm == "LayerNorm":
        exact = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + eps)
    elif norm == "RMSNorm":
        exact = x64 / np.sqrt((x64**2).mean(1, keepdims=True) + eps)
    else:
        exact = (x64 - x64.mean(0)) / np.sqrt(x64.var(0) + eps)
    pairwise = np.linalg.norm(exact[:, None] - exact[None], axis=2)
    if norm == "BatchNorm":
        one_point = bool(pairwise.max() <= 1e-12)
    else:  # exact arithmetic: one direction and, at any ε > 0, one σ² (one mean square)
        centred = x64 - x64.mean(1, keepdims=True) if norm == "LayerNorm" else x64
        ways = centred / np.linalg.norm(centred, axis=1, keepdims=True)
        spread = (centred**2).mean(1)
        one_point = bool(np.abs(ways - ways[0]).max() <= 1e-12
                         and (eps == 0 or np.ptp(spread) <= 1e-12 * spread.max()))
    assert any(line.startswith(f"All {len(x_hat)} x̂ land on one point") for line in lines) \
        is one_point
    same_way = any("point the same way" in line for line in lines)
    if same_way:
        directions = exact / np.linalg.norm(exact, axis=1, keepdims=True)
        assert np.abs(directions - directions[0]).max() <= 1e-9 * math.sqrt(h)
        assert eps > 0
    assert any(line.startswith("With H = 2 LayerNorm") for line in lines) is (
        h == 2 and norm == "LayerNorm")
    text = path_caption(view) + closeup_caption(view)
    assert ("±(1, −1)" in text) is (h == 2 and norm != "RMSNorm")
    assert ("RMSNorm does not centre" in text) is (norm == "RMSNorm")


def test_constant_vectors_are_named_and_nan_only_at_eps_zero():
    x = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0], [0.0, 0.0, 0.0]])
    view = geometry_view(x, ["c", "v", "z"], "LayerNorm", 0.0)
    assert view.finite.tolist() == [False, True, False]
    assert facts(view)[0] == ("2 of the 3 vectors have σ² = 0, so x − μ = 0: with ε = 0, their "
                              "x̂ is 0/0 = NaN and is not drawn; any ε > 0 gives 0 instead.")
    view = geometry_view(x, ["c", "v", "z"], "LayerNorm", 1e-5)
    assert view.finite.all() and view.radius[[0, 2]].tolist() == [0.0, 0.0]
    assert facts(view)[0].endswith("with ε = 1e-05, x̂ is 0/√ε = 0 there.")
    assert not any("NaN" in line for line in facts(view))
    ray = geometry_view(np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [2.0, 2.0, 2.0]]),
                        ["a", "b", "c"], "LayerNorm", 1e-2)
    assert fact(ray, "All 2 nonzero x̂ (1 at 0) point the same way").endswith(
        "At ε = 0 they would land on one point.")
    rms = geometry_view(x, ["c", "v", "z"], "RMSNorm", 0.0)
    assert rms.finite.tolist() == [True, True, False]
    assert facts(rms)[0].startswith("1 of the 3 vectors has ms = 0, so x = 0: with ε = 0, its")
    bn = geometry_view(np.array([[1.0, 2.0], [3.0, 2.0]]), ["a", "b"], "BatchNorm", 0.0)
    assert not bn.finite.any() and facts(bn)[0].startswith(
        "1 of the 2 features has σ² = 0 across the vectors")
    assert len(facts(bn)) == 1  # nothing drawn, nothing more to say
    bn = geometry_view(np.array([[1.0, 2.0], [3.0, 2.0]]), ["a", "b"], "BatchNorm", 1e-5)
    assert bn.finite.all() and (bn.x_hat[:, 1] == 0).all()
    cloud = fact(bn, "What it fixes is the cloud")
    assert cloud.endswith(f"{(bn.x_hat ** 2).sum(axis=1).mean():.4g}.")  # not "H at ε = 0"
    assert not any("twin" in line for line in facts(bn))  # a feature of 0s is not ±1


def test_rms_norm_splits_powerful_off_from_the_other_six():
    for h, eps in itertools.product(FEATURES, SWEEP):
        view = view_of("sentences", h, "RMSNorm", eps)
        # at ε = 0 two points; with ε > 0 two rays (or points, where ε moved them by less than
        # the precision tells apart)
        line = fact(view, "The 7 x̂ land on 2 different points" if eps == 0 else "The 7 x̂ ")
        assert "2 different" in line
        assert "I, love, deep, learning, Transformers and are share one" in line, line
        directions = view.x_hat / view.radius[:, None]
        assert np.abs(directions[:6] - directions[0]).max() <= F32
        assert np.abs(directions[6] - directions[0]).max() > 0.01


def test_the_captions_say_what_is_drawn():
    assert "are drawn for comparison" in path_caption(view_of(h=2, norm="BatchNorm", eps=1e-5))
    assert "circle is drawn for comparison" in path_caption(view_of(norm="BatchNorm", eps=1e-5))
    affine = view_of(gamma=(2.0, 1.0, 0.5), beta=(1.0, 0.0, -0.5))
    assert "an ellipse centred at β = (1, 0, -0.5)" in closeup_caption(affine)
    two = view_of(h=2, gamma=(2.0, 0.5), beta=(1.0, 0.0))
    assert "β ± γ⊙(1, −1) = (3, -0.5) and (-1, 0.5)" in closeup_caption(two)
    rms = view_of(norm="RMSNorm", gamma=(2.0, 1.0, 0.5))
    assert "RMSNorm has no β" in closeup_caption(rms) and "ellipsoid" in closeup_caption(rms)


def test_the_table_has_a_row_per_vector_and_the_radius_law():
    table = vector_table(view_of(eps=1e-5))
    assert table["vector"].tolist() == list(TOKENS)
    assert table.columns.tolist() == ["vector", "x", "μ", "σ²", "x̂", "|x̂|", "√H·√(σ²/(σ²+ε))",
                                      "Σx̂", "from the circle"]
    assert vector_table(view_of(h=2)).columns[-1] == "from ±(1, −1)"
    assert table["x"][0] == "(1, 2, 3)" and table["σ²"][0] == "0.6667"
    assert "y" in vector_table(view_of(gamma=(1.0, 1.0, 1.0), beta=(0.0, 0.0, 0.0))).columns
    assert "ms" in vector_table(view_of(norm="RMSNorm")).columns


# --- The PyTorch snippet ----------------------------------------------------------------------


@pytest.mark.parametrize(("norm", "h", "eps", "affine"), [
    ("LayerNorm", 3, 0.0, False), ("LayerNorm", 2, 1e-5, True), ("RMSNorm", 3, 1.0, True),
    ("BatchNorm", 3, 1e-5, True), ("BatchNorm", 2, 1e-2, False)])
def test_the_snippet_runs_and_gives_the_pages_points(norm, h, eps, affine):
    gamma, beta = ((2.0, 1.0, 0.5)[:h], (1.0, 0.0, -0.5)[:h]) if affine else (None, None)
    inputs = input_vectors("sentences", h)
    view = geometry_view(inputs.values, inputs.labels, norm, eps, gamma,
                         None if norm == "RMSNorm" else beta)
    code = geometry_snippet(inputs.values, norm, eps, gamma,
                            None if norm == "RMSNorm" else beta)
    namespace: dict = {}
    exec(compile(code, "snippet", "exec"), namespace)  # our own generated code
    np.testing.assert_allclose(namespace["x_hat"].double(), view.x_hat, atol=1e-6)
    if affine:
        np.testing.assert_allclose(namespace["y"].double(), view.output, atol=1e-6)


def test_the_snippet_says_torch_refuses_batch_norm_at_eps_zero():
    code = geometry_snippet(np.array(SENTENCE_TOKENS, float), "BatchNorm", 0.0)
    assert "torch refuses eps=0 in training mode" in code
    with pytest.raises(ValueError, match="eps must be positive"):
        exec(compile(code, "snippet", "exec"), {})


# --- Figures ----------------------------------------------------------------------------------


def named(fig: dict, name: str) -> dict:
    return next(trace for trace in fig["data"] if trace.get("name") == name)


def xyz(trace: dict) -> np.ndarray:
    return np.stack([decode(trace[k]).astype(float) for k in "xyz" if k in trace], axis=1)


def both_figures(view, affine: bool = False):
    far = target_shapes(view.h, view.reach)
    near = target_shapes(view.h, view.closeup_reach, view.gamma, view.beta)
    path = charts.geometry.path_figure(view.norm, view.inputs, view.centred, view.x_hat,
                                       view.labels, far.plane, far.sphere, far.faces,
                                       far.circle)
    closeup = charts.geometry.closeup_figure(
        view.norm, view.x_hat, view.labels, near.plane, near.sphere, near.faces, near.circle,
        view.output if affine else None, near.sphere_out if affine else None,
        near.circle_out if affine else None)
    return path, closeup


@pytest.mark.parametrize(("norm", "h"), itertools.product(GEOMETRY_NORMS, FEATURES))
def test_figures_stay_small_and_draw_the_lessons_numbers(norm, h):
    gamma, beta = (3.0, -3.0, 2.5)[:h], (3.0, -3.0, 1.0)[:h]
    view = view_of("random", h, norm, 1e-2, gamma, beta, count=GEOMETRY_MAX_VECTORS, seed=0)
    for fig in both_figures(view, affine=True):
        assert len(fig.to_json()) < 200_000  # a few dozen points and modest meshes
    path, closeup = (json.loads(fig.to_json()) for fig in both_figures(view, affine=True))
    np.testing.assert_allclose(xyz(named(path, "input x")), view.inputs, rtol=1e-6)
    np.testing.assert_allclose(xyz(named(path, "x̂")), view.x_hat, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(xyz(named(closeup, "x̂")), view.x_hat, rtol=1e-6, atol=1e-7)
    output = "y = γ⊙x̂" if norm == "RMSNorm" else "y = γ⊙x̂ + β"
    np.testing.assert_allclose(xyz(named(closeup, output)), view.output, rtol=1e-6, atol=1e-7)
    names = {trace.get("name") for trace in path["data"]}
    assert ("x − μ" in names) is (norm != "RMSNorm")
    assert any("Σx = 0" in str(n) or "x₁ + x₂ = 0" in str(n) for n in names) is (
        norm != "RMSNorm")
    kind = "scatter3d" if h == 3 else "scatter"
    assert named(path, "input x")["type"] == kind


def test_the_3d_scene_stands_on_the_plane_and_keeps_equal_axes():
    path, _ = (json.loads(fig.to_json()) for fig in both_figures(view_of()))
    scene = path["layout"]["scene"]
    assert scene["aspectmode"] == "cube" and scene["camera"]["up"] == {"x": 1, "y": 1, "z": 1}
    assert scene["xaxis"]["range"] == scene["yaxis"]["range"] == scene["zaxis"]["range"]
    flat, _ = (json.loads(fig.to_json()) for fig in both_figures(view_of(h=2)))
    assert flat["layout"]["yaxis"]["scaleanchor"] == "x"


def test_figure_tables_carry_z_for_a_3d_scene():
    path, _ = both_figures(view_of())
    points = dict(charts.base.figure_tables(path))["points"]
    shown = points[points["trace"] == "input x"][["x", "y", "z"]].to_numpy(float)
    np.testing.assert_array_equal(shown, np.array(SENTENCE_TOKENS, float))


# --- The page ---------------------------------------------------------------------------------


def page_facts(at) -> list[str]:
    """The bulleted sentences under the close-up, as shown."""
    bullets = next(m.value for m in at.markdown if m.value.startswith("- "))
    return [shown_text(line.removeprefix("- ")) for line in bullets.split("\n")]


def _torch_points(values: np.ndarray, norm: str, eps: float) -> int:
    """How many different x̂ torch.nn.functional gives the vectors (rows), to 4 decimals."""
    x = torch.tensor(values, dtype=torch.float64)
    if norm == "LayerNorm":
        y = F.layer_norm(x, (x.shape[1],), eps=eps)
    elif norm == "RMSNorm":
        y = F.rms_norm(x, (x.shape[1],), eps=eps)
    else:
        y = F.batch_norm(x, None, None, training=True, eps=eps or 1e-12)  # torch refuses 0
    return len(np.unique(np.round(y.numpy(), 4) + 0.0, axis=0))


@pytest.mark.parametrize(("source", "h", "norm", "points"), [
    ("sentences", 3, "LayerNorm", 1),  # each token is a + b·(0, 1, 2), b > 0
    ("sentences", 2, "LayerNorm", 1),  # every (a, a + b) lands on (−1, 1)
    ("sentences", 3, "RMSNorm", 2),  # (7, 13, 19) is no multiple of (1, 2, 3)
    ("sentences", 3, "BatchNorm", 7),
    ("random", 3, "LayerNorm", 8),
])
def test_the_landing_question_counts_the_points_torch_gives(source, h, norm, points):
    """The page's answer at ε = 0 is the number of different x̂ torch's own norms give the same
    vectors (the counts by hand beside each case); its reason says what the norm keeps and
    where these vectors went."""
    inputs = input_vectors(source, h, count=8, seed=0)
    assert _torch_points(inputs.values, norm, 0.0) == points
    answer = landing_answer(geometry_view(inputs.values, inputs.labels, norm, 0.0))
    n = len(inputs.labels)
    assert answer.option == LANDING_OPTIONS[0 if points == 1 else 2 if points == n else 1]
    assert answer.reason.startswith(f"{norm} ")
    where = (f"All {n} x̂ land on one point" if points == 1 else
             f"The {n} x̂ land on {points} different points")
    assert where in answer.reason


def test_the_page_asks_where_the_vectors_land_before_it_draws_them():
    """A shared link opens the question with the figures held back; every option gets its
    reply, "Right" for one point (seed 002's tokens under LayerNorm at ε = 0), and a new norm
    asks again."""
    at = asks_first(PAGE, "gm_guess_LayerNorm", "all on one point")
    assert at.radio(key="gm_guess_LayerNorm").label == \
        "Before you look: under LayerNorm at ε = 0, where do the 7 vectors' x̂ land?"
    at.segmented_control(key="gm_norm").set_value("RMSNorm").run()
    assert at.radio(key="gm_guess_RMSNorm").value is None and not figures(at)
    assert at.code  # the PyTorch code is there either way


def test_page_opens_on_the_two_sentences_collapse():
    at = open_page(PAGE)
    assert at.title[0].value == "The geometry of LayerNorm"
    assert len(figures(at)) == 2 and not alerts(at)["error"] and at.latex and at.code
    assert "Try this" in alerts(at)["info"][0]
    text = "\n".join(page_facts(at))
    assert "All 7 x̂ land on one point, (-1.22, 0, 1.22)" in text
    closeup = figures(at)[1]
    np.testing.assert_allclose(xyz(named(closeup, "x̂")),
                               np.tile([-math.sqrt(1.5), 0, math.sqrt(1.5)], (7, 1)), atol=F32)
    assert at.dataframe[0].value["vector"].tolist() == list(TOKENS)
    assert any("lnviz matches torch.nn.functional.layer_norm" in shown_text(c.value)
               for c in at.caption)


def test_every_control_moves_the_page():
    at = open_page(PAGE)
    at.segmented_control(key="gm_h").set_value(2).run()
    assert any(line.startswith("With H = 2 LayerNorm") for line in page_facts(at))
    np.testing.assert_allclose(xyz(named(figures(at)[1], "x̂")), np.tile([-1.0, 1.0], (7, 1)),
                               atol=F32)
    at.select_slider(key="gm_eps").set_value(1.0).run()
    radius = np.linalg.norm(xyz(named(figures(at)[1], "x̂")), axis=1)
    assert radius[0] == pytest.approx(math.sqrt(2) * math.sqrt(0.25 / 1.25), rel=1e-5)
    at.segmented_control(key="gm_norm").set_value("BatchNorm").run()
    assert any("no single x̂ is held" in line for line in page_facts(at))
    at.segmented_control(key="gm_norm").set_value("RMSNorm").run()
    assert any("share one" in line for line in page_facts(at))
    at.toggle(key="gm_affine").set_value(True).run()
    assert [s.key for s in at.slider] == ["gm_g0", "gm_g1"]  # RMSNorm has no β
    at.slider(key="gm_g0").set_value(-1.0).run()
    y = xyz(named(figures(at)[1], "y = γ⊙x̂"))
    np.testing.assert_allclose(y[:, 0], -xyz(named(figures(at)[1], "x̂"))[:, 0], atol=1e-6)
    at.segmented_control(key="gm_norm").set_value("LayerNorm").run()
    at.slider(key="gm_b1").set_value(2.0).run()
    y = xyz(named(figures(at)[1], "y = γ⊙x̂ + β"))
    x_hat = xyz(named(figures(at)[1], "x̂"))
    np.testing.assert_allclose(y, x_hat * [-1.0, 1.0] + [1.0, 2.0], atol=1e-6)
    at.segmented_control(key="gm_src").set_value("random").run()
    first = xyz(named(figures(at)[0], "input x"))
    assert len(first) == 8
    at.slider(key="gm_n").set_value(20).run()
    assert len(xyz(named(figures(at)[0], "input x"))) == 20
    at.number_input(key="seed").set_value(3).run()
    assert not np.allclose(xyz(named(figures(at)[0], "input x"))[:8], first)
    at.segmented_control(key="gm_src").set_value("typed").run()
    at.text_input(key="gm_text").set_value("1, 2; 3, 5").run()
    np.testing.assert_array_equal(xyz(named(figures(at)[0], "input x")), [[1, 2], [3, 5]])
    at.segmented_control(key="gm_h").set_value(3).run()
    assert "H = 3 needs at least 3 numbers in each vector" in alerts(at)["error"][0]
    assert not at.exception and not figures(at)


def test_a_link_restores_every_setting():
    query = {"gm_src": "Typed", "gm_text": "1, 2, 3; 3, 1, 2", "gm_h": "2",
             "gm_norm": "BatchNorm", "gm_eps": "1e-2", "gm_affine": "true", "gm_g1": "-2.0",
             "gm_b0": "0.5"}
    at = open_page(PAGE, query)
    assert at.segmented_control(key="gm_src").value == "typed"
    assert at.text_input(key="gm_text").value == "1, 2, 3; 3, 1, 2"
    assert at.segmented_control(key="gm_h").value == 2
    assert at.segmented_control(key="gm_norm").value == "BatchNorm"
    assert at.select_slider(key="gm_eps").value == 1e-2
    assert at.toggle(key="gm_affine").value is True
    assert at.slider(key="gm_g1").value == -2.0 and at.slider(key="gm_b0").value == 0.5
    # two vectors under BatchNorm: each feature ±√(σ²/(σ² + ε)) — the twin of H = 2
    assert any("twin of LayerNorm's ±(1, −1)" in line for line in page_facts(at))
    x_hat = xyz(named(figures(at)[1], "x̂"))
    var = np.array([1.0, 0.25])
    np.testing.assert_allclose(np.abs(x_hat), np.tile(np.sqrt(var / (var + 1e-2)), (2, 1)),
                               rtol=1e-5)
    assert any(c.value.startswith("H = 2: the first 2 of each vector") for c in at.caption)


def test_the_pages_snippet_is_the_lessons_for_its_settings():
    at = open_page(PAGE, {"gm_norm": "RMSNorm", "gm_affine": "true", "gm_eps": "1e-5"})
    inputs = input_vectors("sentences", 3)
    assert at.code[0].value == geometry_snippet(inputs.values, "RMSNorm", 1e-5,
                                                (2.0, 1.0, 0.5), None).strip()


JUNK = ["", "abc", "-1", "1e309", "nan", "9" * 40, "<script>", "Random vectors", "0"]


@pytest.mark.parametrize("source", ["Random", "Typed"])
def test_the_controls_that_appear_later_survive_junk_in_the_url(source):
    """tests/test_bad_input.py sends junk to the controls a page shows when it opens; these
    appear only with another setting (the vector count, the typed text, γ and β)."""
    keys = ["gm_n", "gm_text", *(f"gm_{p}{c}" for p in "gb" for c in range(3))]
    for k in range(len(JUNK)):
        query = {"gm_src": source, "gm_affine": "true",
                 **{key: JUNK[(k + i) % len(JUNK)] for i, key in enumerate(keys)}}
        at = open_page(PAGE, query)  # open_page asserts that no exception was raised
        assert at.title[0].value == "The geometry of LayerNorm"
        assert len(figures(at)) == 2 or alerts(at)["error"], query


@pytest.mark.parametrize("source", ["Random", "Typed"])
def test_the_controls_that_appear_later_have_help_text(source):
    at = open_page(PAGE, {"gm_src": source, "gm_affine": "true"})
    controls = [w for kind in ("slider", "select_slider", "segmented_control", "toggle",
                               "text_input") for w in getattr(at, kind)]
    assert len(controls) == 12  # source, H, norm, ε, γ and β, three γ, three β, count or text
    assert [w.key for w in controls if not w.help] == []


def test_each_gamma_and_beta_slider_moves_its_own_coordinate():
    at = open_page(PAGE, {"gm_affine": "true", "gm_src": "Random"})
    gamma, beta = [2.0, 1.0, 0.5], [1.0, 0.0, -0.5]
    for c, (g, b) in enumerate(zip((-1.5, 0.3, 2.5), (0.7, -2.0, 3.0), strict=True)):
        at.slider(key=f"gm_g{c}").set_value(g).run()
        at.slider(key=f"gm_b{c}").set_value(b).run()
        gamma[c], beta[c] = g, b
        closeup = figures(at)[1]
        y, x_hat = xyz(named(closeup, "y = γ⊙x̂ + β")), xyz(named(closeup, "x̂"))
        np.testing.assert_allclose(y, x_hat * gamma + beta, atol=1e-5)
        ellipse = xyz(named(closeup, "ellipse γ⊙circle + β"))
        np.testing.assert_allclose(ellipse[:-1].mean(axis=0), beta, atol=1e-5)


def test_an_answer_holds_for_the_question_it_was_given_to() -> None:
    """Answered, then other vectors chosen: the question is asked again (its answer may differ)
    instead of grading the old answer against vectors the learner has not seen; the same
    vectors again keep nothing stale either."""
    from pageutil import open_page

    at = open_page(PAGE, asked=True)
    at.radio(key="gm_guess_LayerNorm").set_value("all on one point").run()
    replies = [m.value for m in at.markdown if m.value.startswith(("**Right:**", "**Not quite:**"))]
    assert len(replies) == 1
    at.segmented_control(key="gm_src").set_value("Random").run()  # other vectors
    assert not at.exception, at.exception
    assert at.radio(key="gm_guess_LayerNorm").value is None
    assert not [m for m in at.markdown if m.value.startswith(("**Right:**", "**Not quite:**"))]
    assert any(c.value.startswith("Pick an answer to see") for c in at.caption)


@pytest.mark.parametrize(("eps", "option"), [(0.0, "all on one point"),
                                             (1e-6, "on more than one point, fewer than vectors"),
                                             (1e-5, "on more than one point, fewer than vectors"),
                                             (1.0, "on more than one point, fewer than vectors")])
def test_with_eps_only_the_two_sentences_vectors_of_equal_variance_share_a_point(eps, option):
    """The two sentences' vectors lie on one ray; at ε > 0 each lands at its own distance
    √H·√(σ²/(σ² + ε)), so only vectors of equal σ² share a point ("are" and "powerful", σ² 24),
    whether that distance differs by a dozen of float32's last places (ε = 1e-5) or by most of
    √H (ε = 1): the verdict is read from the float64 x̂, not float32's rounding."""
    inputs = input_vectors("sentences", 3)
    view = geometry_view(inputs.values, inputs.labels, "LayerNorm", eps)
    answer = landing_answer(view)
    assert answer.option == option
    if eps > 0:
        assert "“powerful” = (7, 13, 19) = 1·(1, …, 1) + 1·“are”" in answer.reason
        assert "same σ²" in answer.reason
        variances = dict(zip(inputs.labels, inputs.values.var(axis=1), strict=True))
        assert variances["are"] == variances["powerful"] == pytest.approx(24.0)
    # float32 holds ε = 1e-6's distances within its rounding: "one point" is right there too,
    # and said to be; not from ε = 1e-5 on, where float32 tells some of them apart
    assert answer.reply("all on one point").startswith("**Right:**") is (eps < 1e-5)
    assert ("as the numbers are stored" in answer.reason) is (0 < eps < 1e-5)


@pytest.mark.parametrize("h", [2, 3])
@pytest.mark.parametrize("eps", [1e-12, 1e-11, 1e-10, 1e-9])
def test_a_tiny_eps_still_parts_vectors_of_unequal_variance(h, eps):
    """However small ε > 0 is, vectors of unequal σ² land at different distances: in float64
    the two sentences' x̂ are ~1e-12 apart at ε = 1e-12, hundreds of times its rounding, so
    "on more than one point, fewer than vectors" ("are" and "powerful" share one) is right and
    nothing else is; in float32 the same distances are below the rounding, and "one point" is
    right too."""
    inputs = input_vectors("sentences", h)
    exact = geometry_view(inputs.values, inputs.labels, "LayerNorm", eps, dtype="float64")
    answer = landing_answer(exact)
    assert answer.option == "on more than one point, fewer than vectors" and answer.accepted == ()
    assert answer.reply("all on one point").startswith("**Not quite:**")
    apart = np.linalg.norm(exact.x_hat - exact.x_hat[0], axis=1).max()
    assert apart > 100 * exact.tolerance  # float64 shows them apart, far beyond its rounding
    stored = geometry_view(inputs.values, inputs.labels, "LayerNorm", eps, dtype="float32")
    assert landing_answer(stored).accepted == ("all on one point",)


def test_the_intro_leaves_where_two_features_land_to_the_question() -> None:
    """At H = 2 LayerNorm sends every vector to one of two points: for random vectors that is
    the question's answer ("on more than one point, fewer than vectors"), so the paragraph above
    it names the circle at H = 3 and not the two points."""
    from pageutil import open_page, page_text

    at = open_page(PAGE, {"gm_src": "Random", "gm_h": "2"}, asked=True)
    assert at.segmented_control(key="gm_src").value == "random"
    assert at.segmented_control(key="gm_h").value == 2
    assert [r.label for r in at.radio] == [
        "Before you look: under LayerNorm at ε = 0, where do the 8 vectors' x̂ land?"]
    assert "two points" not in page_text(at)
    inputs = input_vectors("random", 2, count=8, seed=0)
    answer = landing_answer(geometry_view(inputs.values, inputs.labels, "LayerNorm", 0.0))
    assert answer.option == "on more than one point, fewer than vectors"


@pytest.mark.parametrize("text", ["1, 2, 3; 2, 4, 6", "1, 2, 3; 3, 4, 5",
                                  "1, 2, 3; 2, 4, 6; 3, 6, 9; 0, 1, 2"])
def test_the_landing_options_exclude_each_other(text):
    """Vectors all on one point are on one point only: the middle option asks for more than
    one point, so it is wrong there at any number of vectors (with two, it cannot happen)."""
    inputs = input_vectors("typed", 3, text=text)
    answer = landing_answer(geometry_view(inputs.values, inputs.labels, "LayerNorm", 0.0))
    assert answer.option == "all on one point" and answer.accepted == ()
    for other in LANDING_OPTIONS[1:]:
        assert answer.reply(other).startswith("**Not quite:**")


@pytest.mark.parametrize("zeros", [(), (0,), (1,), (0, 2), (0, 1, 2)])
def test_the_closeup_caption_names_what_gamma_zeros_leave_of_the_circle(zeros):
    """LayerNorm's circle (H = 3) through y = γ⊙x̂ + β: with one γ at 0 it is still an ellipse,
    lying in the plane y_i = β_i (its image spans two directions); with two, a segment (one);
    with three, the point β (none). The caption says what the image's span shows."""
    gamma = np.array([-3.0, 0.7, 0.5])
    gamma[list(zeros)] = 0.0
    beta = (1.0, 0.0, -0.5)
    view = view_of("random", 3, "LayerNorm", 1e-5, tuple(gamma), beta, count=4, seed=0)
    caption = closeup_caption(view)
    image = target_shapes(3, 4.0, gamma, beta).circle_out - np.asarray(beta)
    span = int(np.linalg.matrix_rank(image, tol=1e-9))
    assert span == (3 - len(zeros) if zeros else 2)
    if span == 2 and zeros:
        i = "₁₂₃"[zeros[0]]
        assert f"γ{i} = 0 lays it in the plane y{i} = β{i}: still an ellipse" in caption
        np.testing.assert_allclose(image[:, zeros[0]], 0.0)
    assert ("squeezed to a segment" in caption) is (span == 1)
    # every γ at 0: y is β itself, with no ellipse to lie on or inside, at any ε
    assert ("for every vector, at any ε" in caption) is (span == 0)
    assert ("ellipse" in caption.split("y = γ⊙x̂ + β")[1]) is (span > 0)


@pytest.mark.parametrize("text", ["1,1,1; 2,2,2; 1,2,3; 2,4,6",
                                  "1,1,1; 2,2,2; 1,2,3; 2,4,6; 1,3,5"])
def test_constant_vectors_share_x_hat_zero_and_no_nan_instance_is_written(text):
    """At ε > 0 the constant vectors share x̂ = 0 because x − μ is 0; no a + b·v writes one
    from another (that was nan·(1, …, 1) + nan·v). Where another group shares a point too,
    the instance is that group's."""
    inputs = input_vectors("typed", 3, text=text)
    view = geometry_view(inputs.values, inputs.labels, "LayerNorm", 1e-2)
    reason = landing_answer(view).reason
    assert "nan" not in reason
    varied = any(len(g) > 1 and np.std(view.inputs[g[0]]) > 0 for g in view.points)
    if varied:
        assert "With ε > 0, two vectors share a point only if they also have the same σ²" in reason
    else:
        assert "“v1” and “v2” share x̂ = 0 because they are constant vectors" in reason
