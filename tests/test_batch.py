"""lnviz.batch: Batch, NormSpec, the norm table and everything that dispatches through it, and
the layout helpers, checked against torch and hand-computed values."""


from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pageutil import padded

from lnviz.batch import (
    LAYOUTS,
    NORM_TABLE,
    NORMS,
    TABLE_NORMS,
    Batch,
    NormSpec,
    channel_dim,
    grid_view,
    group_ids,
    grouping,
    max_abs_difference,
    normalize,
    norms_where,
    param_size,
    table_norm,
    torch_reference,
    torch_table_norm,
)
from lnviz.data import get_preset, image_batch, padded_batch, random_batch
from lnviz.lessons.explorer import (
    explore,
    group_stats,
)


def specs_for(layout: str) -> list[NormSpec]:
    out = []
    for norm in NORMS:
        if norm == "InstanceNorm" and layout == "NC":
            continue
        out.append(NormSpec(norm=norm, groups=1, gamma=1.5, beta=-0.5))
    out.append(NormSpec(norm="BatchNorm", training=False, warmup_steps=3))
    return out


def _values_then_layout(values_and_mask: tuple[np.ndarray, np.ndarray]) -> tuple:
    values, mask = values_and_mask
    return values, "NLC", mask


BATCHES = {
    "NC": lambda seed: Batch(random_batch((5, 4), feature_spread=1.0, seed=seed), "NC"),
    "NLC": lambda seed: Batch(*_values_then_layout(padded_batch(3, 4, max_len=5, seed=seed))),
    "NCHW": lambda seed: Batch(image_batch(2, 4, 3, 3, seed=seed), "NCHW"),
}


@settings(max_examples=25, deadline=None)
@given(layout=st.sampled_from(list(BATCHES)), seed=st.integers(0, 1000), data=st.data())
def test_every_norm_agrees_with_torch(layout, seed, data):
    batch = BATCHES[layout](seed)
    spec = data.draw(st.sampled_from(specs_for(layout)))
    ex = explore(batch, spec)
    assert ex.agrees_with_torch, (spec, ex.max_difference)
    assert ex.output_values.shape == batch.values.shape


def test_masked_batch_norm_uses_real_tokens_only():
    """The transformer article, feature 1: μ = 4 without the pad (3.5 with it)."""
    batch = padded()
    masked = explore(batch, NormSpec(norm="BatchNorm", use_mask=True))
    unmasked = explore(batch, NormSpec(norm="BatchNorm", use_mask=False))
    assert masked.mean_in[0] == pytest.approx(4.0)
    assert masked.std_in[0] == pytest.approx(2.0)
    assert unmasked.mean_in[0] == pytest.approx(3.5)
    assert unmasked.std_in[0] == pytest.approx(2.2913, abs=1e-4)
    assert masked.agrees_with_torch and unmasked.agrees_with_torch
    assert masked.mean_out[0] == pytest.approx(0.0, abs=1e-6)
    assert masked.std_out[0] == pytest.approx(1.0, abs=1e-5)


def test_eval_mode_uses_running_statistics_after_warm_up():
    values = np.array([[1.0], [3.0]], dtype=np.float32)  # μ = 2, unbiased σ² = 2
    batch = Batch(values, "NC")
    result = normalize(torch.tensor(values), "NC", NormSpec(norm="BatchNorm", training=False,
                                                              warmup_steps=1, eps=0.0))
    # One pass with momentum 0.1 from (0, 1): running μ = 0.2, running σ² = 0.9 + 0.2 = 1.1.
    assert result.mean.item() == pytest.approx(0.2)
    assert result.var.item() == pytest.approx(1.1)
    assert result.output[0, 0].item() == pytest.approx((1 - 0.2) / math.sqrt(1.1), rel=1e-6)
    assert explore(batch, NormSpec(norm="BatchNorm", training=False)).agrees_with_torch


def test_layer_norm_over_last_two_dims_of_the_notes():
    p = get_preset("two_words")
    result = normalize(torch.tensor(p.values), "NLC", NormSpec(dims=2))
    expected = [[[0.0, -1.2238, 1.2238]], [[1.4140, -0.7070, -0.7070]]]
    np.testing.assert_allclose(result.output.numpy(), expected, atol=1e-4)


def test_per_feature_gamma_and_beta():
    values = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    spec = NormSpec(gamma=(1.0, 2.0, 3.0), beta=(0.0, 10.0, 20.0))
    out = normalize(torch.tensor(values), "NC", spec).output[0].tolist()
    assert out == pytest.approx([-1.2247, 10.0, 20.0 + 3 * 1.2247], abs=1e-3)
    with pytest.raises(ValueError, match="per-feature γ needs 3"):
        normalize(torch.tensor(values), "NC", NormSpec(gamma=(1.0, 2.0)))


def test_refusals_are_clear():
    x = torch.zeros(2, 6)
    with pytest.raises(ValueError, match="InstanceNorm needs a sequence or spatial dim"):
        normalize(x, "NC", NormSpec(norm="InstanceNorm"))
    with pytest.raises(ValueError, match="divides the 6 channels"):
        normalize(x, "NC", NormSpec(norm="GroupNorm", groups=4))
    with pytest.raises(ValueError, match="ε must be"):
        NormSpec(eps=-1.0)
    with pytest.raises(ValueError, match="needs 3 dims"):
        Batch(np.zeros((2, 3), np.float32), "NLC")


def test_eps_zero_on_a_constant_row_is_reported_not_raised():
    ex = explore(Batch(get_preset("constant_row").values, "NC"), NormSpec(eps=0.0))
    assert ex.nonfinite_outputs == 4  # the constant row: 0/0
    assert np.isfinite(ex.output_values[1]).all()
    assert ex.agrees_with_torch  # NaN where torch has NaN counts as agreement


def test_max_abs_difference_treats_nan_honestly():
    a = torch.tensor([1.0, float("nan"), float("inf")])
    assert max_abs_difference(a, a.clone()) == 0.0
    assert max_abs_difference(a, torch.tensor([1.5, float("nan"), float("inf")])) == 0.5
    assert max_abs_difference(a, torch.tensor([1.0, 0.0, float("inf")])) == math.inf


@pytest.mark.parametrize(("layout", "shape", "spec", "expected"), [
    ("NC", (2, 3), NormSpec(norm="LayerNorm"), [[0, 0, 0], [1, 1, 1]]),
    ("NC", (2, 3), NormSpec(norm="BatchNorm"), [[0, 1, 2], [0, 1, 2]]),
    ("NLC", (2, 2, 2), NormSpec(norm="LayerNorm", dims=2), [[[0, 0], [0, 0]], [[1, 1], [1, 1]]]),
    ("NLC", (1, 2, 2), NormSpec(norm="BatchNorm"), [[[0, 1], [0, 1]]]),
    ("NLC", (1, 2, 2), NormSpec(norm="InstanceNorm"), [[[0, 1], [0, 1]]]),
    ("NCHW", (1, 4, 1, 2), NormSpec(norm="GroupNorm", groups=2),
     [[[[0, 0]], [[0, 0]], [[1, 1]], [[1, 1]]]]),
])
def test_group_ids(layout, shape, spec, expected):
    assert group_ids(shape, layout, spec).tolist() == expected


@given(rows=st.integers(1, 3000), cols=st.integers(1, 3000), mode=st.sampled_from(
    ["slice", "downsample"]), start=st.integers(0, 5000))
def test_grid_view_stays_small_and_in_range(rows, cols, mode, start):
    view = grid_view((rows, cols), 128, 128, mode, start)
    assert view.shape == (min(rows, 128), min(cols, 128))
    assert view.rows.min() >= 0 and view.rows.max() < rows
    assert np.all(np.diff(view.rows) > 0)
    if mode == "downsample" and rows > 128:
        assert view.rows[0] == 0 and view.rows[-1] == rows - 1


def test_torch_reference_compares_masked_positions_only():
    batch = padded()
    spec = NormSpec(norm="BatchNorm")
    x = torch.tensor(batch.values)
    _, where = torch_reference(x, "NLC", spec, torch.tensor(batch.mask))
    assert where is not None and where.sum() == 7
    assert param_size(x.shape, "NLC", spec) == 3


@st.composite
def tensors_for(draw: st.DrawFn, norm: str) -> tuple[torch.Tensor, str, NormSpec, torch.Tensor]:
    """A float64 tensor in any layout, settings for ``norm`` and, for tokens, a padding mask."""
    layout = draw(st.sampled_from(list(LAYOUTS)))
    shape = tuple(draw(st.integers(1, 4)) for _ in layout)
    c, n = shape[channel_dim(layout)], param_size(shape, layout, NormSpec(norm=norm))
    spec = NormSpec(
        norm=norm,
        dims=draw(st.integers(1, len(shape))),
        training=draw(st.booleans()),
        warmup_steps=draw(st.integers(0, 3)),
        use_mask=draw(st.booleans()),
        groups=draw(st.sampled_from([g for g in range(1, c + 1) if c % g == 0])),
        eps=draw(st.sampled_from([1e-5, 0.1])),
        gamma=draw(st.sampled_from([1.0, -0.5, tuple(0.5 + k for k in range(n))])),
        beta=draw(st.sampled_from([0.0, 2.0, tuple(-1.0 * k for k in range(n))])),
    )
    seed = draw(st.integers(0, 2**16))
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    mask = None
    if layout == "NLC":
        lengths = [draw(st.integers(1, shape[1])) for _ in range(shape[0])]
        mask = torch.arange(shape[1])[None, :] < torch.tensor(lengths)[:, None]
    return x, layout, spec, mask


@settings(max_examples=150, deadline=None)
@given(data=st.data(), norm=st.sampled_from(NORMS), impl=st.sampled_from(["scratch", "fast"]))
def test_every_norm_in_the_table_runs_through_lnviz_and_torch_and_they_agree(data, norm, impl):
    """Every row of NORM_TABLE, in every layout, over random shapes and settings: normalize and
    torch_reference refuse alike or agree, and the values the table groups (group_ids,
    group_stats) are those the norm took its statistics over."""
    x, layout, spec, mask = data.draw(tensors_for(norm))
    try:
        ours = normalize(x, layout, spec, mask, impl)
    except ValueError:  # refused alike: no positions (InstanceNorm on NC), one value a group
        with pytest.raises((ValueError, RuntimeError)):
            torch_reference(x, layout, spec, mask)
        return
    theirs, where = torch_reference(x, layout, spec, mask)
    keep = (torch.ones_like(x, dtype=torch.bool) if where is None
            else where.unsqueeze(channel_dim(layout)).expand(x.shape))
    torch.testing.assert_close(ours.output[keep], theirs[keep])
    ids = group_ids(tuple(x.shape), layout, spec)
    if spec.norm != "BatchNorm" or spec.training:  # batch statistics, not running ones
        mean, std = group_stats(x, layout, spec, mask)
        assert mean.shape == std.shape == (int(ids.max()) + 1,)
        at = ids[keep.numpy()]
        # σ² for the centring norms; RMSNorm's mean square is μ² + σ².
        expected_var = std[at] ** 2 + (0.0 if NORM_TABLE[norm].centred else mean[at] ** 2)
        np.testing.assert_allclose(ours.var.expand(x.shape)[keep].numpy(), expected_var,
                                   rtol=1e-9, atol=1e-12)
        if ours.mean is not None:
            np.testing.assert_allclose(ours.mean.expand(x.shape)[keep].numpy(), mean[at],
                                       atol=1e-12)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), norm=st.sampled_from(NORMS))
def test_a_grouping_s_ids_and_arrangement_name_the_same_groups(data, norm):
    """The ids a figure colours and the values the statistics reduce come from one Grouping:
    arranged, each group's ids lie along the reduced axes, constant, in group order."""
    x, layout, spec, _ = data.draw(tensors_for(norm))
    groups = grouping(tuple(x.shape), layout, spec)
    ids = torch.from_numpy(np.ascontiguousarray(groups.ids()))
    values, dims, _ = groups.arrange(ids)
    low, high = values.amin(dims), values.amax(dims)
    assert torch.equal(low, high)  # one id along every reduced axis
    assert low.flatten().tolist() == list(range(groups.count))  # every group once, in order
    assert groups.count * math.prod(values.shape[d] for d in dims) == x.numel()


@pytest.mark.parametrize("norm", ["GroupNorm", "InstanceNorm"])
def test_fast_group_norm_of_tokens(norm):
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    torch.testing.assert_close(normalize(x, "NLC", NormSpec(norm=norm), impl="fast").output,
                               torch_reference(x, "NLC", NormSpec(norm=norm))[0])


@settings(max_examples=40, deadline=None)
@given(norm=st.sampled_from(TABLE_NORMS), n=st.integers(2, 6), c=st.integers(1, 6),
       seed=st.integers(0, 2**16), eps=st.sampled_from([1e-5, 0.1]))
def test_table_norm_and_its_torch_twin_agree_with_gradients(norm, n, c, seed, eps):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, generator=generator, dtype=torch.float64)
    weight = torch.randn(c, generator=generator, dtype=torch.float64)
    bias = torch.randn(c, generator=generator, dtype=torch.float64)
    grads = []
    for run in (lambda *a: table_norm(*a).output, torch_table_norm):
        leaves = [t.clone().requires_grad_(True) for t in (x, weight, bias)]
        y = run(leaves[0], norm, *leaves[1:], eps)
        (y * torch.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
        grads.append([y.detach()] + [t.grad for t in leaves if t.grad is not None])
    assert len(grads[0]) == len(grads[1]) == (3 if norm == "RMSNorm" else 4)  # RMSNorm: no β
    for ours, theirs in zip(*grads, strict=True):
        torch.testing.assert_close(ours, theirs)
    np.testing.assert_allclose(table_norm(x, norm, impl="fast").output.numpy(),
                               torch_table_norm(x, norm).numpy(), atol=1e-12)


def test_table_norm_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match=r"\(batch, features\) table"):
        table_norm(torch.zeros(2, 3, 4), "LayerNorm")
    with pytest.raises(ValueError, match="norm must be one of"):
        torch_table_norm(torch.zeros(2, 3), "GroupNorm")


def test_every_list_of_norms_is_drawn_from_the_table():
    from lnviz.lessons import bn_vs_ln, gradients, performance, scale_shift

    assert NORMS == tuple(NORM_TABLE) == (
        "BatchNorm", "LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm")
    assert TABLE_NORMS == norms_where(lambda n: n.table) == ("BatchNorm", "LayerNorm", "RMSNorm")
    # Each lesson's norms, in the order its page shows them.
    assert scale_shift.AFFINE_NORMS == ("BatchNorm", "LayerNorm")
    assert gradients.GRAD_NORMS == ("LayerNorm", "BatchNorm")
    assert bn_vs_ln.CUBE_NORMS == ("BatchNorm", "LayerNorm", "InstanceNorm", "GroupNorm")
    assert performance.NORMS == ("LayerNorm", "BatchNorm", "RMSNorm")
    for name, norm in NORM_TABLE.items():  # lnviz mirrors torch.nn.functional, name for name
        assert norm.lnviz.__name__ == norm.functional.__name__ == name.function, name
