"""lnviz.explore: the Explorer's computation, checked against torch and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lnviz.data import get_preset, image_batch, padded_batch, random_batch
from lnviz.explore import (
    NORMS,
    Batch,
    NormSpec,
    explore,
    grid_labels,
    grid_view,
    group_ids,
    group_stats,
    max_abs_difference,
    normalize,
    param_size,
    pytorch_snippet,
    step_by_step,
    to_grid,
    torch_reference,
    worked_example_latex,
)


def padded() -> Batch:
    p = get_preset("padded_tokens")
    return Batch(p.values, "NLC", p.mask, p.labels)


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
    """Seed 002, feature 1: μ = 4 without the pad (3.5 with it)."""
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


def test_layer_norm_over_last_two_dims_of_seed_003():
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


def test_group_stats_and_grid():
    values = torch.tensor([[1.0, 2.0, 3.0], [10.0, 10.0, 40.0]], dtype=torch.float64)
    mean, std = group_stats(values, "NC", NormSpec())
    assert mean.tolist() == [2.0, 20.0]
    assert std == pytest.approx([math.sqrt(2 / 3), math.sqrt(200)])
    mean, std = group_stats(values, "NC", NormSpec(norm="BatchNorm"))
    assert mean.tolist() == [5.5, 6.0, 21.5]
    tokens = torch.tensor([[[1.0], [3.0], [100.0]]])  # (1, 3, 1), the last token padding
    mask = torch.tensor([[True, True, False]])
    assert group_stats(tokens, "NLC", NormSpec(norm="BatchNorm"), mask)[0].tolist() == [2.0]
    images = torch.arange(16.0).reshape(1, 4, 2, 2)
    gn_mean, _ = group_stats(images, "NCHW", NormSpec(norm="GroupNorm", groups=2))
    assert gn_mean.tolist() == [3.5, 11.5]
    in_mean, _ = group_stats(images[:, :, 0], "NLC", NormSpec(norm="InstanceNorm"))
    assert in_mean.tolist() == [6.0, 7.0]  # per feature over the 4 tokens
    images = np.arange(2 * 3 * 2 * 2).reshape(2, 3, 2, 2)
    assert to_grid(images, "NCHW").shape == (6, 4)
    assert to_grid(images[:, :, 0], "NLC").shape == (6, 2)
    rows, cols = grid_labels((2, 3, 2, 2), "NCHW")
    assert rows[4] == "image 1 · ch 1" and cols[3] == "(1, 1)"


@given(rows=st.integers(1, 3000), cols=st.integers(1, 3000), mode=st.sampled_from(
    ["slice", "downsample"]), start=st.integers(0, 5000))
def test_grid_view_stays_small_and_in_range(rows, cols, mode, start):
    view = grid_view((rows, cols), 128, 128, mode, start)
    assert view.shape == (min(rows, 128), min(cols, 128))
    assert view.rows.min() >= 0 and view.rows.max() < rows
    assert np.all(np.diff(view.rows) > 0)
    if mode == "downsample" and rows > 128:
        assert view.rows[0] == 0 and view.rows[-1] == rows - 1


def test_step_by_step_for_seed_002_feature_one():
    batch = padded()
    spec = NormSpec(norm="BatchNorm", use_mask=True)
    x = torch.tensor(batch.values)
    result = normalize(x, "NLC", spec, torch.tensor(batch.mask))
    table = step_by_step(x, result, spec, group_ids(x.shape, "NLC", spec), 0, "NLC",
                         mask=batch.mask)
    assert table["x"].tolist() == [1, 2, 3, 4, 5, 6, 7, 0]
    assert table["padding"].tolist() == [False] * 7 + [True]
    assert set(table["μ"]) == {4.0}
    assert table["σ²"].iloc[0] == pytest.approx(4.0)
    assert table["y"].iloc[0] == pytest.approx(-1.5, abs=1e-5)
    latex = worked_example_latex(table.iloc[0], spec.eps)
    assert r"\frac{(1 - 4)}{\sqrt{4 + 10^{-5}}}" in latex and latex.endswith("= (-1.5)")
    tiny = worked_example_latex(table.iloc[0].replace(1.0, 2.5e-7), 1e-8)
    assert r"2.5 \times 10^{-7}" in tiny and r"10^{-8}" in tiny


def test_pytorch_snippet_runs_and_reproduces_the_output(tmp_path, monkeypatch):
    batch = padded()
    monkeypatch.chdir(tmp_path)
    np.save("input.npy", batch.values)
    np.save("mask.npy", batch.mask)
    for spec in [NormSpec(norm="BatchNorm"), NormSpec(norm="BatchNorm", training=False),
                 NormSpec(norm="LayerNorm", dims=2, gamma=2.0), NormSpec(norm="RMSNorm"),
                 NormSpec(norm="GroupNorm", groups=3), NormSpec(norm="InstanceNorm"),
                 NormSpec(gamma=(1.0, 2.0, 3.0), beta=(0.5, 0.5, 0.5))]:
        namespace: dict = {}
        code = pytorch_snippet(batch.values.shape, "NLC", spec, has_mask=True)
        exec(compile(code, "snippet", "exec"), namespace)  # our own generated code
        ours = normalize(torch.tensor(batch.values), "NLC", spec, torch.tensor(batch.mask))
        real = torch.tensor(batch.mask)[..., None].expand(batch.values.shape)
        if spec.norm == "BatchNorm" and spec.training:
            assert max_abs_difference(ours.output, namespace["y"], real) < 1e-5
        else:
            assert max_abs_difference(ours.output, namespace["y"]) < 1e-5, spec


def test_torch_reference_compares_masked_positions_only():
    batch = padded()
    spec = NormSpec(norm="BatchNorm")
    x = torch.tensor(batch.values)
    _, where = torch_reference(x, "NLC", spec, torch.tensor(batch.mask))
    assert where is not None and where.sum() == 7
    assert param_size(x.shape, "NLC", spec) == 3
