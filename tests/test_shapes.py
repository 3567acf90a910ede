"""lnviz.lessons.shapes (normalized_shape on 2-D/3-D/4-D tensors, transformer blocks) and the Shapes
page."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from pageutil import figures, open_page, trace_data

from lnviz.lessons.shapes import (
    SHAPE_EXAMPLES,
    VARIANTS,
    StackConfig,
    block,
    block_snippet,
    depth_profiles,
    feed_forward,
    first_blocks,
    init_block,
    layer_norm_shapes,
    layer_norm_snippet,
    rms,
    self_attention,
    shape_example,
)

PAGE = "app_pages/shapes.py"
SEED_003 = [[0.0, -1.2238, 1.2238], [1.4140, -0.7070, -0.7070]]


# --- normalized_shape --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "shape", "layout"), [
    ("seed 003", (2, 1, 3), "NLC"), ("2-D", (4, 6), "NC"), ("3-D", (2, 4, 3), "NLC"),
    ("4-D", (2, 3, 4, 4), "NCHW"),
])
def test_examples(name, shape, layout):
    batch = shape_example(name)
    assert batch.values.shape == shape and batch.layout == layout
    assert len(SHAPE_EXAMPLES[name]) == len(shape)


def test_examples_follow_the_seed_and_refuse_unknown_names():
    assert not np.allclose(shape_example("2-D", 0).values, shape_example("2-D", 1).values)
    np.testing.assert_array_equal(shape_example("3-D").values[0, 0], [1, 2, 3])  # "I", seed 002
    with pytest.raises(ValueError, match="example must be one of"):
        shape_example("5-D")


@pytest.mark.parametrize("dims", [1, 2])
def test_seed_003_over_the_last_one_or_two_dims(dims):
    view = layer_norm_shapes(shape_example("seed 003"), dims)
    np.testing.assert_allclose(view.output_grid, SEED_003, atol=1e-4)
    assert view.normalized_shape == ((3,) if dims == 1 else (1, 3))
    assert view.stats_shape == (2, 1, 1)
    assert (view.groups, view.group_size) == (2, 3)


@pytest.mark.parametrize(("name", "dims", "groups", "size", "stats"), [
    ("2-D", 1, 4, 6, (4, 1)),
    ("3-D", 1, 8, 3, (2, 4, 1)),
    ("3-D", 2, 2, 12, (2, 1, 1)),
    ("4-D", 1, 24, 4, (2, 3, 4, 1)),
    ("4-D", 2, 6, 16, (2, 3, 1, 1)),
    ("4-D", 3, 2, 48, (2, 1, 1, 1)),
])
def test_shapes_and_values_match_torch(name, dims, groups, size, stats):
    batch = shape_example(name)
    view = layer_norm_shapes(batch, dims)
    x = torch.from_numpy(batch.values)
    expected = F.layer_norm(x, x.shape[-dims:]).numpy()
    np.testing.assert_allclose(view.output_grid, expected.reshape(view.output_grid.shape),
                               atol=1e-5)
    assert (view.groups, view.group_size, view.stats_shape) == (groups, size, stats)
    assert view.normalized_shape == tuple(batch.values.shape[-dims:])
    assert len(np.unique(view.group_grid)) == groups


def test_group_grid_of_the_padded_batch():
    # last 2 dims of (2, 4, 3): one group per sentence, the pad token included
    view = layer_norm_shapes(shape_example("3-D"), 2)
    np.testing.assert_array_equal(view.group_grid[:, 0], [0] * 4 + [1] * 4)
    assert layer_norm_shapes(shape_example("3-D"), 1).group_grid[:, 0].tolist() == list(range(8))


@pytest.mark.parametrize("dims", [0, 2])
def test_dims_must_leave_the_batch_out(dims):
    with pytest.raises(ValueError, match="last 1 to 1 dims"):
        layer_norm_shapes(shape_example("2-D"), dims)


def test_snippet_runs_and_prints_the_same_shapes():
    view = layer_norm_shapes(shape_example("4-D"), 2)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(layer_norm_snippet(view), {})
    assert out.getvalue().splitlines() == [
        "torch.Size([4, 4]) torch.Size([4, 4])", "torch.Size([2, 3, 1, 1])"]


# --- blocks ------------------------------------------------------------------------------------


def params_and_input(d: int = 8, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    params = init_block(d, 1.0, generator)
    return params, torch.randn(2, 5, d, generator=generator, dtype=torch.float64)


def test_init_block_shapes_and_scale():
    params = init_block(64, 2.0, torch.Generator().manual_seed(0))
    assert params["w1"].shape == (256, 64) and params["w2"].shape == (64, 256)
    assert params["b1"].abs().sum() == 0
    assert params["w1"].std().item() == pytest.approx(2.0 / 8, rel=0.05)  # gain/√fan_in
    assert params["w2"].std().item() == pytest.approx(2.0 / 16, rel=0.05)


def test_attention_and_ffn_match_torch():
    params, x = params_and_input()
    q, k, v = x @ params["wq"].T, x @ params["wk"].T, x @ params["wv"].T
    expected = F.scaled_dot_product_attention(q, k, v) @ params["wo"].T
    torch.testing.assert_close(self_attention(x, params), expected)
    linear = F.linear(F.relu(F.linear(x, params["w1"], params["b1"])), params["w2"], params["b2"])
    torch.testing.assert_close(feed_forward(x, params, F.relu), linear)


@pytest.mark.parametrize(("variant", "norm_first"), [("post-LN", False), ("pre-LN", True)])
def test_block_equals_torch_transformer_encoder_layer(variant, norm_first):
    d = 8
    params, x = params_and_input(d)
    layer = torch.nn.TransformerEncoderLayer(
        d, 1, dim_feedforward=4 * d, dropout=0.0, activation="gelu", batch_first=True,
        norm_first=norm_first, dtype=torch.float64).eval()
    with torch.no_grad():
        attn = layer.self_attn
        attn.in_proj_weight.copy_(torch.cat([params["wq"], params["wk"], params["wv"]]))
        attn.in_proj_bias.zero_()
        attn.out_proj.weight.copy_(params["wo"])
        attn.out_proj.bias.zero_()
        layer.linear1.weight.copy_(params["w1"])
        layer.linear2.weight.copy_(params["w2"])
        layer.linear1.bias.zero_()
        layer.linear2.bias.zero_()
        torch.testing.assert_close(block(x, params, variant)[0], layer(x))


def test_block_without_norm_and_its_errors():
    params, x = params_and_input()
    out, attn, ffn = block(x, params, "none")
    x1 = x + self_attention(x, params)
    torch.testing.assert_close(attn, self_attention(x, params))
    torch.testing.assert_close(out, x1 + feed_forward(x1, params))
    torch.testing.assert_close(ffn, feed_forward(x1, params))
    with pytest.raises(ValueError, match="variant must be one of"):
        block(x, params, "sandwich")


def test_rms_by_hand():
    assert rms(torch.tensor([3.0, 4.0])) == pytest.approx(math.sqrt(12.5))


@pytest.mark.parametrize(("field", "value"), [
    ("activation", "tanh"), ("depth", 0), ("d_model", 2000), ("init_gain", 0.0)])
def test_stack_config_refuses_bad_settings(field, value):
    with pytest.raises(ValueError, match=field):
        StackConfig(**{field: value})


def test_depth_profiles_at_the_default_setting():
    profiles = depth_profiles(StackConfig())
    post, pre, none = (profiles[v].stream for v in VARIANTS)
    assert len(post) == 49 and len(profiles["pre-LN"].ffn) == 48
    assert post[0] == pre[0] == none[0]  # the same input batch for all three
    np.testing.assert_allclose(post[1:], 1.0, atol=1e-4)  # LN is the last step: RMS = 1
    assert pre[-1] > 2 * pre[12] > 2  # pre-LN grows with depth ...
    assert 4 < pre[-1] < 12  # ... roughly like √depth, about 7.6 here
    assert none[-1] > 1e6 * pre[-1]  # none grows geometrically
    # pre-LN sublayers read normalized inputs, so their outputs stay of order one
    assert profiles["pre-LN"].ffn.max() < 2


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 1000), d_model=st.sampled_from([8, 16]),
       gain=st.sampled_from([1.0, 1.414]), activation=st.sampled_from(["GELU", "ReLU"]))
def test_post_ln_keeps_the_stream_at_rms_one_and_none_grows_fastest(seed, d_model, gain,
                                                                    activation):
    config = StackConfig(depth=8, d_model=d_model, seq_len=8, batch=2, init_gain=gain,
                         activation=activation, seed=seed)
    profiles = depth_profiles(config)
    np.testing.assert_allclose(profiles["post-LN"].stream[1:], 1.0, atol=1e-3)
    assert profiles["none"].stream[-1] > profiles["pre-LN"].stream[-1] > \
        profiles["post-LN"].stream[-1]


def test_a_shallower_stack_is_the_first_blocks_of_a_deeper_one():
    deep = depth_profiles(StackConfig(depth=12, d_model=16, seed=3))
    shallow = depth_profiles(StackConfig(depth=5, d_model=16, seed=3))
    for variant, profile in first_blocks(deep, 5).items():
        np.testing.assert_array_equal(profile.stream, shallow[variant].stream)
        np.testing.assert_array_equal(profile.attention, shallow[variant].attention)
        np.testing.assert_array_equal(profile.ffn, shallow[variant].ffn)
        assert profile.stream.shape == (6,) and profile.ffn.shape == (5,)


def test_depth_profiles_are_seeded_and_mark_overflow():
    first = depth_profiles(StackConfig(depth=4, seed=1))["pre-LN"].stream
    np.testing.assert_array_equal(first, depth_profiles(StackConfig(depth=4, seed=1))
                                  ["pre-LN"].stream)
    assert not np.allclose(first, depth_profiles(StackConfig(depth=4, seed=2))["pre-LN"].stream)
    exploded = depth_profiles(StackConfig(d_model=16, init_gain=10.0))["none"].stream
    assert np.isnan(exploded[-1]) and np.isfinite(exploded[:10]).all()


def test_block_snippet_runs():
    scope: dict = {}
    exec(block_snippet(16, "ReLU"), scope)
    x = torch.randn(2, 5, 16)
    assert rms(scope["post_ln"](x)) == pytest.approx(1.0, abs=1e-3)
    assert scope["pre_ln"](x).shape == x.shape


# --- the page ----------------------------------------------------------------------------------


def output_grid(at) -> np.ndarray:
    return trace_data(at, 0, 1)


def stream(at, variant: int = 1) -> np.ndarray:
    """The residual-stream curve of one variant (traces: stream, FFN, attention per variant)."""
    return trace_data(at, 1, 3 * variant, "y")


def test_default_view_is_seed_003_and_a_48_block_stack():
    at = open_page(PAGE)
    assert len(figures(at)) == 2
    np.testing.assert_allclose(output_grid(at), SEED_003, atol=1e-4)
    metrics = [m.value for m in at.metric]
    assert metrics[:4] == ["(2, 1, 3)", "(3,)", "(2, 1, 1)", "2 × 3"]
    np.testing.assert_allclose(stream(at, 0)[1:], 1.0, atol=1e-4)
    assert len(stream(at, 1)) == 49 and stream(at, 2)[-1] > 1e6
    assert "nn.LayerNorm((3,))" in at.code[0].value


def test_shape_controls_change_the_groups_and_the_output():
    at = open_page(PAGE)
    at.segmented_control(key="sh_tensor").set_value("3-D").run()
    per_token = trace_data(at, 0, 2, "customdata")
    assert per_token[:, 0].tolist() == list(range(8))
    at.radio(key="sh_dims").set_value(2).run()
    per_sentence = trace_data(at, 0, 2, "customdata")
    assert per_sentence[:, 0].tolist() == [0] * 4 + [1] * 4
    tokens = torch.from_numpy(shape_example("3-D").values)
    np.testing.assert_allclose(output_grid(at), F.layer_norm(tokens, (4, 3)).reshape(8, 3),
                               atol=1e-5)
    assert [m.value for m in at.metric][1] == "(4, 3)"
    at.segmented_control(key="sh_tensor").set_value("4-D").run()
    at.radio(key="sh_dims").set_value(3).run()
    assert output_grid(at).shape == (6, 16)
    assert [m.value for m in at.metric][:4] == ["(2, 3, 4, 4)", "(3, 4, 4)", "(2, 1, 1, 1)",
                                                "2 × 48"]


def test_block_controls_change_the_depth_figure():
    at = open_page(PAGE)
    curve = stream(at)
    for widget, key, value in (("slider", "sh_depth", 20),
                               ("select_slider", "sh_dmodel", 32),
                               ("segmented_control", "sh_act", "ReLU"),
                               ("select_slider", "sh_gain", 0.5)):
        getattr(at, widget)(key=key).set_value(value).run()
        moved = stream(at)
        assert moved.shape != curve.shape or not np.allclose(moved, curve), key
        curve = moved
    assert len(curve) == 21


def test_url_restores_the_settings():
    at = open_page(PAGE, {"sh_tensor": "4-D", "sh_dims": "2", "sh_depth": "12",
                          "sh_gain": "0.5", "sh_act": "ReLU", "sh_dmodel": "32"})
    assert at.segmented_control(key="sh_tensor").value == "4-D"
    assert at.radio(key="sh_dims").value == 2
    assert at.slider(key="sh_depth").value == 12
    assert at.select_slider(key="sh_gain").value == 0.5
    assert at.select_slider(key="sh_dmodel").value == 32
    assert at.segmented_control(key="sh_act").value == "ReLU"
    assert [m.value for m in at.metric][1] == "(4, 4)"
    assert len(stream(at)) == 13
