"""lnviz's normalizations against torch.nn.functional and against the seeds' worked numbers."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import lnviz
from lnviz.devices import DTYPES, supported_dtypes
from lnviz.norms import IMPLS

#: The impls every norm has (impl="fused" is LayerNorm's and RMSNorm's: tests/test_fused.py).
EVERY_NORM_IMPLS = ("scratch", "fast")

# Rounding of the output: both sides accumulate in float32 (or float64), so they differ only by
# the last rounding to the output dtype and by summation order.
TOL = {
    torch.float64: dict(atol=1e-8, rtol=1e-8),
    torch.float32: dict(atol=2e-5, rtol=2e-5),
    torch.float16: dict(atol=1e-2, rtol=1e-2),
    torch.bfloat16: dict(atol=1e-1, rtol=2e-2),
}
EPSILONS = st.sampled_from([1e-12, 1e-5, 1e-3, 0.1, 1.0])
DTYPE_NAMES = st.sampled_from(list(DTYPES))
FUZZ = settings(max_examples=60, deadline=None)


def close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert actual.shape == expected.shape
    torch.testing.assert_close(
        actual.double().cpu(), expected.double().cpu(), equal_nan=True, **TOL[dtype]
    )


def matches(actual: torch.Tensor, torch_same_dtype: torch.Tensor, torch_exact: torch.Tensor,
            dtype: torch.dtype, condition: float = 0.0) -> None:
    """Close to torch in the same dtype, or at least as close to the exact answer as torch is.

    Where a row is ill-conditioned (a single feature, two nearly equal values, ε ≪ σ²) the last
    bits of both results are rounding noise; lnviz must then be no further from torch's float64
    answer on the same input than torch's own kernel is (up to a factor of 4), or within the
    rounding bound that the problem's ``condition`` number (max |x| / σ) allows: torch's CPU
    BatchNorm accumulates float32 in float64, so it can beat that bound.
    """
    try:
        close(actual, torch_same_dtype, dtype)
    except AssertionError:
        exact = torch_exact.double().cpu()
        ours = (actual.double().cpu() - exact).abs().nan_to_num(0.0)
        theirs = (torch_same_dtype.double().cpu() - exact).abs().nan_to_num(0.0)
        bound = 4 * theirs + TOL[dtype]["atol"] + 4 * torch.finfo(dtype).eps * condition
        assert bool((ours <= bound).all()), (ours.max(), theirs.max())
        assert torch.equal(torch.isnan(actual.cpu()), torch.isnan(torch_exact.cpu()))


def double(*tensors: torch.Tensor | None) -> list[torch.Tensor | None]:
    return [None if t is None else t.double() for t in tensors]


def sample(shape: tuple[int, ...], seed: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    """Values with a per-tensor offset and scale, so the tests do not only see N(0, 1)."""
    g = torch.Generator().manual_seed(seed)
    scale = float(torch.empty(()).uniform_(0.1, 10.0, generator=g))
    offset = float(torch.empty(()).uniform_(-5.0, 5.0, generator=g))
    x = torch.randn(shape, generator=g, dtype=torch.float64) * scale + offset
    return x.to(device=device, dtype=dtype)


def affine_params(
    shape: tuple[int, ...], seed: int, device: str, dtype: torch.dtype, affine: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    if not affine:
        return None, None
    g = torch.Generator().manual_seed(seed + 1)
    weight = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 + 0.5).to(device, dtype)
    bias = torch.randn(shape, generator=g, dtype=torch.float64).to(device, dtype)
    return weight, bias


def stat_dtype(dtype: torch.dtype) -> torch.dtype:
    """torch keeps running statistics in float32, or float64 for float64 inputs."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def shapes(min_dims: int = 2, max_dims: int = 4, min_side: int = 0) -> st.SearchStrategy:
    return st.lists(st.integers(min_side, 5), min_size=min_dims, max_size=max_dims).map(tuple)


def skip_unsupported(device: str, dtype_name: str) -> None:
    if dtype_name not in supported_dtypes(device):
        pytest.skip(f"{dtype_name} is not supported on {device}")


# --- LayerNorm ---------------------------------------------------------------------------------


@FUZZ
@given(shape=shapes(), data=st.data(), eps=EPSILONS, affine=st.booleans(), dtype_name=DTYPE_NAMES,
       seed=st.integers(0, 2**16))
def test_layer_norm_matches_torch(device, shape, data, eps, affine, dtype_name, seed):
    skip_unsupported(device, dtype_name)
    dtype = DTYPES[dtype_name]
    k = data.draw(st.integers(1, len(shape)), label="normalized dims")
    normalized_shape = shape[-k:]
    x = sample(shape, seed, device, dtype)
    weight, bias = affine_params(normalized_shape, seed, device, dtype, affine)

    result = lnviz.layer_norm(x, normalized_shape, weight, bias, eps)
    expected = F.layer_norm(x, normalized_shape, weight, bias, eps)
    exact = F.layer_norm(*double(x), normalized_shape, *double(weight, bias), eps)

    assert result.output.dtype == dtype and result.output.device == x.device
    matches(result.output, expected, exact, dtype)
    assert result.reduce_dims == tuple(range(len(shape) - k, len(shape)))
    if x.numel() and math.prod(normalized_shape):
        _, mean, rstd = torch.native_layer_norm(x.float() if dtype != torch.float64 else x,
                                                normalized_shape, None, None, eps)
        close(result.mean, mean, torch.float32)
        # rstd of a nearly constant row is ill-conditioned: compare it relatively
        torch.testing.assert_close(result.rstd.double().cpu(), rstd.double().cpu(), rtol=1e-3,
                                   atol=1e-5, equal_nan=True)
        assert result.mean.shape == shape[: len(shape) - k] + (1,) * k


def test_layer_norm_of_one_two_three():
    """Seeds 000/002: [1, 2, 3] has μ = 2, σ ≈ 0.816 and normalizes to [−1.2247, 0, 1.2247]."""
    result = lnviz.layer_norm(torch.tensor([[1.0, 2.0, 3.0]]), 3)
    torch.testing.assert_close(result.output, torch.tensor([[-1.2247, 0.0, 1.2247]]), atol=1e-4,
                               rtol=0)
    assert result.mean.item() == pytest.approx(2.0)
    assert math.sqrt(result.var.item()) == pytest.approx(0.8165, abs=1e-4)


def test_layer_norm_over_last_two_dims_the_notes():
    """The two-word notes: two words of a (2, 1, 3) tensor, normalized over their last two dims."""
    x = torch.tensor([[[0.2, 0.1, 0.3]], [[0.5, 0.1, 0.1]]])
    result = lnviz.layer_norm(x, x.shape[-2:], torch.ones(1, 3), torch.zeros(1, 3), eps=1e-5)
    expected = torch.tensor([[[0.0, -1.2238, 1.2238]], [[1.4140, -0.7070, -0.7070]]])
    torch.testing.assert_close(result.output, expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(result.mean.flatten(), torch.tensor([0.2, 0.2333]), atol=1e-4,
                               rtol=0)
    torch.testing.assert_close(result.var.flatten(), torch.tensor([0.0067, 0.0356]), atol=1e-4,
                               rtol=0)
    denominator = 1 / result.rstd.flatten()
    torch.testing.assert_close(denominator, torch.tensor([0.0817, 0.1886]), atol=1e-4, rtol=0)
    assert result.reduce_dims == (1, 2)
    assert result.mean.shape == (2, 1, 1)


def test_tiny_variance_vector_the_formula_module():
    """The formula tutorial: a vector whose variance (4e-9) is smaller than ε = 1e-8 is damped by
    ε."""
    x = torch.tensor([0.001, 0.001, 0.0011, 0.0009, 0.001], dtype=torch.float64)
    without = lnviz.layer_norm(x, 5, eps=0.0)
    with_eps = lnviz.layer_norm(x, 5, eps=1e-8)
    assert without.mean.item() == pytest.approx(0.001, rel=1e-12)
    assert without.var.item() == pytest.approx(4e-9, rel=1e-9)
    expected_without = torch.tensor([0.0, 0.0, 1.0, -1.0, 0.0], dtype=torch.float64) / math.sqrt(
        0.4
    )
    expected_with = torch.tensor([0.0, 0.0, 1e-4, -1e-4, 0.0], dtype=torch.float64) / math.sqrt(
        4e-9 + 1e-8
    )
    torch.testing.assert_close(without.output, expected_without, atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(with_eps.output, expected_with, atol=1e-9, rtol=1e-9)
    assert with_eps.output[2].item() == pytest.approx(0.8452, abs=1e-4)
    assert without.output[2].item() == pytest.approx(1.5811, abs=1e-4)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_eps_zero_on_constant_row_gives_true_inf_and_nan(norm):
    x = torch.tensor([[3.0, 3.0, 3.0], [0.0, 0.0, 0.0]])
    if norm == "layer":
        result = lnviz.layer_norm(x, 3, eps=0.0)
        assert torch.isinf(result.rstd).all()
        assert torch.isnan(result.output).all()
        assert torch.isnan(F.layer_norm(x, (3,), eps=0.0)).all()
    else:
        result = lnviz.rms_norm(x, 3, eps=0.0)
        assert result.output[0].tolist() == pytest.approx([1.0, 1.0, 1.0])
        assert torch.isnan(result.output[1]).all() and torch.isinf(result.rstd[1]).all()


def test_layer_norm_far_from_zero_is_as_accurate_as_torch():
    """float32 rows at 1e4 ± 1: two-pass statistics keep torch's accuracy; E[x²]−E[x]² does not."""
    g = torch.Generator().manual_seed(0)
    x = (1e4 + torch.randn(64, 1024, generator=g, dtype=torch.float64)).float()
    reference = F.layer_norm(x.double(), (1024,))
    ours = (lnviz.layer_norm(x, 1024).output.double() - reference).abs().max().item()
    theirs = (F.layer_norm(x, (1024,)).double() - reference).abs().max().item()
    mean = x.mean(-1, keepdim=True)
    naive_var = (x * x).mean(-1, keepdim=True) - mean * mean
    naive = ((x - mean) / torch.sqrt(naive_var.clamp_min(0) + 1e-5)).double()
    naive_error = (naive - reference).abs().max().item()
    assert ours <= 2 * theirs + 1e-6, (ours, theirs)
    assert naive_error > 100 * ours  # the test can tell a cancelling implementation apart


def test_layer_norm_rejects_mismatched_shape():
    with pytest.raises(ValueError, match="normalized_shape"):
        lnviz.layer_norm(torch.zeros(2, 3), 4)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_half_precision_accumulates_in_float32(dtype_name):
    x = torch.randn(4, 8).to(DTYPES[dtype_name])
    result = lnviz.layer_norm(x, 8)
    assert result.output.dtype == DTYPES[dtype_name]
    assert result.mean.dtype == result.var.dtype == result.x_hat.dtype == torch.float32


# --- RMSNorm -----------------------------------------------------------------------------------


@FUZZ
@given(shape=shapes(), data=st.data(), eps=st.one_of(st.none(), EPSILONS), affine=st.booleans(),
       dtype_name=DTYPE_NAMES, seed=st.integers(0, 2**16))
def test_rms_norm_matches_torch(device, shape, data, eps, affine, dtype_name, seed):
    skip_unsupported(device, dtype_name)
    dtype = DTYPES[dtype_name]
    k = data.draw(st.integers(1, len(shape)), label="normalized dims")
    normalized_shape = shape[-k:]
    x = sample(shape, seed, device, dtype)
    weight, _ = affine_params(normalized_shape, seed, device, dtype, affine)

    result = lnviz.rms_norm(x, normalized_shape, weight, eps)
    expected = F.rms_norm(x, normalized_shape, weight, eps)
    exact_eps = torch.finfo(result.var.dtype).eps if eps is None else eps
    exact = F.rms_norm(*double(x), normalized_shape, *double(weight), exact_eps)

    assert result.mean is None
    assert result.output.dtype == dtype
    matches(result.output, expected, exact, dtype)
    if x.numel():
        mean_square = (x.double() ** 2).mean(dim=result.reduce_dims, keepdim=True)
        close(result.var, mean_square, torch.float32)


# --- BatchNorm ---------------------------------------------------------------------------------


@FUZZ
@given(shape=shapes(min_side=1), eps=EPSILONS, affine=st.booleans(), dtype_name=DTYPE_NAMES,
       seed=st.integers(0, 2**16), steps=st.integers(1, 4),
       momentum=st.sampled_from([0.1, 0.5, 1.0, None]))
def test_batch_norm_training_matches_torch(device, shape, eps, affine, dtype_name, seed, steps,
                                           momentum):
    skip_unsupported(device, dtype_name)
    dtype = DTYPES[dtype_name]
    c = shape[1]
    sd = stat_dtype(dtype)
    weight, bias = affine_params((c,), seed, device, sd, affine)
    ours = (torch.zeros(c, device=device, dtype=sd), torch.ones(c, device=device, dtype=sd))
    theirs = (torch.zeros(c, device=device, dtype=sd), torch.ones(c, device=device, dtype=sd))
    count = torch.zeros((), dtype=torch.long)
    # F.batch_norm has no cumulative mode (momentum=None); nn.BatchNorm keeps the count for it.
    module = torch.nn.BatchNorm1d(c, eps=eps, momentum=momentum, affine=False).to(device, sd)
    values_per_channel = math.prod(shape) // c

    for step in range(steps):
        x = sample(shape, seed + step, device, dtype)
        if values_per_channel == 1:
            with pytest.raises(ValueError, match="more than one value per channel"):
                lnviz.batch_norm(x, *ours, weight, bias, True, momentum, eps,
                                 num_batches_tracked=count)
            return
        result = lnviz.batch_norm(x, *ours, weight, bias, True, momentum, eps,
                                  num_batches_tracked=count)
        if momentum is None:
            module(x.reshape(shape[0], c, -1).to(sd))
            expected_stats = (module.running_mean, module.running_var)
        else:
            expected = F.batch_norm(x, *theirs, weight, bias, True, momentum, eps)
            exact = F.batch_norm(*double(x), None, None, *double(weight, bias), True, eps=eps)
            matches(result.output, expected, exact, dtype)
            expected_stats = theirs
        close(ours[0], expected_stats[0], dtype)
        close(ours[1], expected_stats[1], dtype)
    assert int(count) == steps
    dims = tuple(d for d in range(len(shape)) if d != 1)
    assert result.reduce_dims == dims


def test_batch_norm_running_statistics_after_training_steps():
    """Hand-checked: two training steps with momentum 0.5 from (0, 1)."""
    x1 = torch.tensor([[1.0], [3.0]])  # μ = 2, σ² = 1, unbiased 2
    x2 = torch.tensor([[0.0], [8.0]])  # μ = 4, σ² = 16, unbiased 32
    rm, rv = torch.zeros(1), torch.ones(1)
    lnviz.batch_norm(x1, rm, rv, training=True, momentum=0.5)
    assert rm.item() == pytest.approx(1.0) and rv.item() == pytest.approx(1.5)
    lnviz.batch_norm(x2, rm, rv, training=True, momentum=0.5)
    assert rm.item() == pytest.approx(2.5) and rv.item() == pytest.approx(16.75)
    evaluated = lnviz.batch_norm(torch.tensor([[2.5]]), rm, rv, eps=0.0)
    assert evaluated.output.item() == pytest.approx(0.0)
    assert evaluated.var.item() == pytest.approx(16.75)


def test_batch_norm_cumulative_average_with_momentum_none():
    rm, rv, count = torch.zeros(1), torch.ones(1), torch.zeros((), dtype=torch.long)
    for batch in ([[1.0], [3.0]], [[0.0], [8.0]], [[5.0], [7.0]]):
        lnviz.batch_norm(torch.tensor(batch), rm, rv, training=True, momentum=None,
                         num_batches_tracked=count)
    assert int(count) == 3
    assert rm.item() == pytest.approx((2 + 4 + 6) / 3)
    assert rv.item() == pytest.approx((2 + 32 + 2) / 3)
    with pytest.raises(ValueError, match="num_batches_tracked"):
        lnviz.batch_norm(torch.ones(2, 1), rm, rv, training=True, momentum=None)


@FUZZ
@given(shape=shapes(min_side=1), eps=EPSILONS, affine=st.booleans(), dtype_name=DTYPE_NAMES,
       seed=st.integers(0, 2**16))
def test_batch_norm_eval_matches_torch(device, shape, eps, affine, dtype_name, seed):
    skip_unsupported(device, dtype_name)
    dtype = DTYPES[dtype_name]
    c = shape[1]
    x = sample(shape, seed, device, dtype)
    g = torch.Generator().manual_seed(seed)
    rm = torch.randn(c, generator=g).to(device, stat_dtype(dtype))
    rv = (torch.rand(c, generator=g) + 0.1).to(device, stat_dtype(dtype))
    weight, bias = affine_params((c,), seed, device, stat_dtype(dtype), affine)
    result = lnviz.batch_norm(x, rm, rv, weight, bias, False, 0.1, eps)
    close(result.output, F.batch_norm(x, rm, rv, weight, bias, False, 0.1, eps), dtype)
    close(result.mean.flatten(), rm, torch.float32)


def test_batch_norm_eval_needs_running_statistics():
    with pytest.raises(ValueError, match="evaluation mode"):
        lnviz.batch_norm(torch.randn(4, 3), None, None)


@pytest.mark.parametrize("impl", ["scratch", "fast"])
def test_a_mask_with_no_real_token_is_refused_not_divided_by_zero(impl: str) -> None:
    """Every position padding: the statistics would be over no value (0/0, every output NaN,
    which the Explorer then blamed on ε); refused as one real token is, with its reason."""
    x = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="the mask leaves no real token"):
        lnviz.batch_norm(x, None, None, training=True, channel_dim=-1,
                         mask=torch.zeros(2, 3, dtype=torch.bool), impl=impl)
    with pytest.raises(ValueError, match="more than one value per channel"):
        lnviz.batch_norm(x, None, None, training=True, channel_dim=-1,
                         mask=torch.tensor([[True, False, False], [False] * 3]), impl=impl)


@FUZZ
@given(batch=st.integers(1, 4), length=st.integers(1, 6), channels=st.integers(1, 5),
       seed=st.integers(0, 2**16), affine=st.booleans(), data=st.data())
def test_channel_last_with_mask_matches_torch_on_real_tokens(device, batch, length, channels,
                                                             seed, affine, data):
    """A transformer's (N, L, C) with padding: masked BatchNorm = torch on the real tokens only."""
    lengths = data.draw(st.lists(st.integers(1, length), min_size=batch, max_size=batch))
    mask = torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]
    x = sample((batch, length, channels), seed, device, torch.float32)
    # zero padding, as in the transformer article
    x = x.masked_fill(~mask[..., None].to(device), 0.0)
    weight, bias = affine_params((channels,), seed, device, torch.float32, affine)
    real = x[mask.to(device)]  # (n_real, C)
    rm, rv = torch.zeros(channels, device=device), torch.ones(channels, device=device)
    trm, trv = rm.clone(), rv.clone()

    if real.shape[0] == 1:
        with pytest.raises(ValueError):
            lnviz.batch_norm(x, rm, rv, weight, bias, True, channel_dim=-1, mask=mask.to(device))
        return
    result = lnviz.batch_norm(x, rm, rv, weight, bias, True, channel_dim=-1, mask=mask.to(device))
    expected = F.batch_norm(real, trm, trv, weight, bias, True)
    exact = F.batch_norm(*double(real), None, None, *double(weight, bias), True)
    scale = 1.0 if weight is None else float(weight.abs().max())
    condition = scale * float(real.abs().max() / real.double().std(0, unbiased=False).min())
    matches(result.output[mask.to(device)], expected, exact, torch.float32, condition)
    close(rm, trm, torch.float32)
    close(rv, trv, torch.float32)
    assert result.mean.shape == (1, 1, channels)
    assert result.reduce_dims == (0, 1)

    unmasked = lnviz.batch_norm(x, None, None, training=True, channel_dim=-1)
    channels_first = x.transpose(1, 2)
    matches(unmasked.output,
            F.batch_norm(channels_first, None, None, training=True).transpose(1, 2),
            F.batch_norm(channels_first.double(), None, None, training=True).transpose(1, 2),
            torch.float32)


def padded_tokens() -> tuple[torch.Tensor, torch.Tensor]:
    """The two-sentence batch: "I love deep learning" and "Transformers are powerful" + one pad."""
    x = torch.tensor([
        [[1, 2, 3], [2, 4, 6], [3, 6, 9], [4, 8, 12]],
        [[5, 10, 15], [6, 12, 18], [7, 13, 19], [0, 0, 0]],
    ], dtype=torch.float32)
    mask = torch.tensor([[True, True, True, True], [True, True, True, False]])
    return x, mask


def test_batch_norm_over_the_two_sentences_padded_batch():
    """Feature 1 over all 8 positions: μ = 3.5, σ = 2.29; leaving the pad out: μ = 4.0, σ = 2."""
    x, mask = padded_tokens()
    with_pad = lnviz.batch_norm(x, None, None, training=True, channel_dim=-1)
    assert with_pad.mean[0, 0, 0].item() == pytest.approx(3.5)
    assert math.sqrt(with_pad.var[0, 0, 0].item()) == pytest.approx(2.29, abs=5e-3)
    assert with_pad.output[0, 0, 0].item() == pytest.approx(-1.09, abs=5e-3)  # "I"
    assert with_pad.output[1, 2, 0].item() == pytest.approx(1.52, abs=1e-2)  # "powerful"

    masked = lnviz.batch_norm(x, None, None, training=True, channel_dim=-1, mask=mask)
    assert masked.mean[0, 0, 0].item() == pytest.approx(4.0)
    assert masked.var[0, 0, 0].item() == pytest.approx(4.0)
    assert masked.output[0, 0, 0].item() == pytest.approx(-1.5, abs=1e-5)


def test_layer_norm_of_the_two_sentences_pad_token():
    """LayerNorm per token: real tokens are untouched by padding; the zero pad row stays 0."""
    x, _ = padded_tokens()
    result = lnviz.layer_norm(x, 3)
    torch.testing.assert_close(result.output[0, 0], torch.tensor([-1.2247, 0.0, 1.2247]),
                               atol=1e-4, rtol=0)
    assert result.var[1, 3].item() == 0.0
    assert result.output[1, 3].tolist() == [0.0, 0.0, 0.0]


# --- GroupNorm and InstanceNorm ----------------------------------------------------------------


@FUZZ
@given(n=st.integers(0, 3), groups=st.integers(1, 3), per_group=st.integers(1, 3),
       spatial=st.lists(st.integers(0, 4), min_size=0, max_size=2).map(tuple), eps=EPSILONS,
       affine=st.booleans(), dtype_name=DTYPE_NAMES, seed=st.integers(0, 2**16))
def test_group_norm_matches_torch(device, n, groups, per_group, spatial, eps, affine, dtype_name,
                                  seed):
    skip_unsupported(device, dtype_name)
    dtype = DTYPES[dtype_name]
    c = groups * per_group
    shape = (n, c, *spatial)
    x = sample(shape, seed, device, dtype)
    weight, bias = affine_params((c,), seed, device, dtype, affine)
    if n * per_group * math.prod(spatial) == 1:
        with pytest.raises(ValueError, match="more than one value"):
            lnviz.group_norm(x, groups, weight, bias, eps)
        return
    result = lnviz.group_norm(x, groups, weight, bias, eps)
    exact = F.group_norm(*double(x), groups, *double(weight, bias), eps)
    matches(result.output, F.group_norm(x, groups, weight, bias, eps), exact, dtype)
    assert result.mean.shape == (n, c) + (1,) * len(spatial)
    assert result.reduce_dims == tuple(range(1, len(shape)))


def test_group_norm_rejects_groups_that_do_not_divide_channels():
    with pytest.raises(ValueError, match="divide"):
        lnviz.group_norm(torch.zeros(2, 6, 3), 4)


@FUZZ
@given(n=st.integers(1, 3), c=st.integers(1, 4),
       spatial=st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple), eps=EPSILONS,
       affine=st.booleans(), dtype_name=DTYPE_NAMES, seed=st.integers(0, 2**16),
       steps=st.integers(1, 3))
def test_instance_norm_matches_torch(device, n, c, spatial, eps, affine, dtype_name, seed, steps):
    skip_unsupported(device, dtype_name)
    dtype = DTYPES[dtype_name]
    shape = (n, c, *spatial)
    weight, bias = affine_params((c,), seed, device, dtype, affine)
    sd = stat_dtype(dtype)
    ours = (torch.zeros(c, device=device, dtype=sd), torch.ones(c, device=device, dtype=sd))
    theirs = (torch.zeros(c, device=device, dtype=sd), torch.ones(c, device=device, dtype=sd))
    for step in range(steps):
        x = sample(shape, seed + step, device, dtype)
        if math.prod(spatial) == 1:
            with pytest.raises(ValueError, match="spatial"):
                lnviz.instance_norm(x, *ours, weight, bias, True, 0.1, eps)
            return
        result = lnviz.instance_norm(x, *ours, weight, bias, True, 0.1, eps)
        expected = F.instance_norm(x, *theirs, weight, bias, True, 0.1, eps)
        exact = F.instance_norm(*double(x), None, None, *double(weight, bias), eps=eps)
        matches(result.output, expected, exact, dtype)
        close(ours[0], theirs[0], dtype)
        close(ours[1], theirs[1], dtype)
    x = sample(shape, seed, device, dtype)
    evaluated = lnviz.instance_norm(x, *ours, weight, bias, False, 0.1, eps)
    close(evaluated.output, F.instance_norm(x, *theirs, weight, bias, False, 0.1, eps), dtype)


# --- Autograd ----------------------------------------------------------------------------------


def _grads(fn, x, weight, bias, upstream):
    x = x.clone().requires_grad_(True)
    params = [p.clone().requires_grad_(True) for p in (weight, bias) if p is not None]
    out = fn(x, *params)
    (out * upstream).sum().backward()
    return [x.grad] + [p.grad for p in params]


CASES = {
    "layer_norm": (lambda x, w, b: lnviz.layer_norm(x, 4, w, b).output,
                   lambda x, w, b: F.layer_norm(x, (4,), w, b), (3, 5, 4), (4,)),
    "rms_norm": (lambda x, w: lnviz.rms_norm(x, 4, w).output,
                 lambda x, w: F.rms_norm(x, (4,), w), (3, 5, 4), (4,)),
    "batch_norm": (lambda x, w, b: lnviz.batch_norm(x, None, None, w, b, True).output,
                   lambda x, w, b: F.batch_norm(x, None, None, w, b, True), (6, 4, 3), (4,)),
    "group_norm": (lambda x, w, b: lnviz.group_norm(x, 2, w, b).output,
                   lambda x, w, b: F.group_norm(x, 2, w, b), (3, 4, 5), (4,)),
    "instance_norm": (lambda x, w, b: lnviz.instance_norm(x, None, None, w, b).output,
                      lambda x, w, b: F.instance_norm(x, None, None, w, b), (3, 4, 5), (4,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_match_torch(device, name):
    ours, theirs, shape, param_shape = CASES[name]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=g, dtype=torch.float64).to(device)
    weight = torch.rand(param_shape, generator=g, dtype=torch.float64).to(device) + 0.5
    bias = None if name == "rms_norm" else torch.randn(param_shape, dtype=torch.float64).to(device)
    upstream = torch.randn(shape, generator=g, dtype=torch.float64).to(device)
    for a, b in zip(_grads(ours, x, weight, bias, upstream), _grads(theirs, x, weight, bias,
                                                                    upstream), strict=True):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


# --- Torch parity on empty and small-rank inputs ------------------------------------------------

#: Shapes with a zero somewhere (and (2, 3), which torch's InstanceNorm treats specially): every
#: norm must accept each one exactly when torch's does, with the same output and the same running
#: statistics afterwards.
EMPTY_SHAPES = [(0,), (0, 0), (0, 3), (2, 0), (1, 0), (0, 3, 4), (2, 3, 0), (0, 3, 0), (2, 0, 4),
                (0, 3, 1), (0, 3, 2, 2), (2, 3, 0, 5), (2, 3)]


def _outcome(norm, *args, **kwargs) -> tuple:
    """("ok", output) or ("refused",): whether a norm accepts the input, and what it returns."""
    try:
        out = norm(*args, **kwargs)
    except (RuntimeError, ValueError, IndexError):
        return ("refused",)
    return ("ok", out.output if isinstance(out, lnviz.NormResult) else out)


def _agree(ours: tuple, theirs: tuple, buffers: tuple = (), torch_buffers: tuple = ()) -> None:
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        torch.testing.assert_close(ours[1], theirs[1], equal_nan=True)
        torch.testing.assert_close(buffers, torch_buffers, equal_nan=True)


def _buffers(x: torch.Tensor, given: bool) -> tuple:
    """Fresh running statistics (0, 1) for torch's channel count: no channels in a 1-D input."""
    c = x.shape[1] if x.dim() > 1 else 0
    return (torch.zeros(c), torch.ones(c)) if given else (None, None)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
def test_trailing_norms_accept_what_torch_accepts(shape, affine, impl):
    if impl == "fused":
        fused = pytest.importorskip("lnviz.fused")
        if not fused.available("cpu"):  # a GPU machine: tests/test_fused.py checks it there
            pytest.skip("impl='fused' runs on CPU tensors only under Triton's interpreter")
    x = torch.randn(shape)
    normalized = x.shape[-1:]
    weight, bias = ((torch.linspace(0.5, 2.0, normalized[0]),
                     torch.linspace(-1.0, 1.0, normalized[0])) if affine else (None, None))
    _agree(_outcome(lnviz.layer_norm, x, normalized, weight, bias, impl=impl),
           _outcome(F.layer_norm, x, normalized, weight, bias))
    _agree(_outcome(lnviz.rms_norm, x, normalized, weight, impl=impl),
           _outcome(F.rms_norm, x, normalized, weight))


@pytest.mark.parametrize("impl", EVERY_NORM_IMPLS)
@pytest.mark.parametrize("buffers", [True, False], ids=["running", "no-running"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
def test_batch_norm_accepts_what_torch_accepts(shape, training, buffers, impl):
    """F.batch_norm returns an empty input as it is and leaves the running statistics alone;
    so does lnviz, on both paths, in both modes."""
    x = torch.randn(shape)
    ours, theirs = _buffers(x, buffers), _buffers(x, buffers)
    mine = _outcome(lnviz.batch_norm, x, *ours, training=training, impl=impl)
    _agree(mine, _outcome(F.batch_norm, x, *theirs, training=training), ours, theirs)
    if mine[0] == "ok" and buffers:  # one statistic per channel (lnviz's channel of 1-D: dim 0)
        c = x.shape[x.dim() > 1]
        r = lnviz.batch_norm(x, torch.zeros(c), torch.ones(c), training=training, impl=impl)
        for stat in (r.mean, r.var, r.rstd):
            assert stat.dim() == x.dim() and stat.numel() == c


@pytest.mark.parametrize("impl", EVERY_NORM_IMPLS)
@pytest.mark.parametrize("buffers", [True, False], ids=["running", "no-running"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
def test_instance_norm_accepts_what_torch_accepts(shape, training, buffers, impl):
    """use_input_stats=False needs no spatial dim in torch, so (N, C) is accepted there; an
    empty batch (N = 0) turns torch's running statistics into NaN, the mean over no
    instances, and lnviz's too."""
    x = torch.randn(shape)
    ours, theirs = _buffers(x, buffers), _buffers(x, buffers)
    _agree(_outcome(lnviz.instance_norm, x, *ours, use_input_stats=training, impl=impl),
           _outcome(F.instance_norm, x, *theirs, use_input_stats=training), ours, theirs)


@pytest.mark.parametrize("impl", EVERY_NORM_IMPLS)
@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
def test_group_norm_accepts_what_torch_accepts(shape, groups, impl):
    x = torch.randn(shape)
    _agree(_outcome(lnviz.group_norm, x, groups, impl=impl), _outcome(F.group_norm, x, groups))


@pytest.mark.parametrize("impl", EVERY_NORM_IMPLS)
def test_batch_norm_counts_an_empty_training_batch_as_nn_batch_norm_does(impl):
    """nn.BatchNorm counts every training call in num_batches_tracked, an empty batch too,
    and F.batch_norm leaves the running statistics of an empty batch alone, so with
    momentum=None the next batch is averaged in with weight 1/2."""
    module = torch.nn.BatchNorm1d(3, momentum=None)
    ours = (torch.zeros(3), torch.ones(3))
    count = torch.zeros((), dtype=torch.long)
    for x in (torch.randn(0, 3), torch.randn(4, 3)):
        module(x)
        lnviz.batch_norm(x, *ours, training=True, momentum=None, num_batches_tracked=count,
                         impl=impl)
    assert int(count) == int(module.num_batches_tracked) == 2
    torch.testing.assert_close(ours, (module.running_mean, module.running_var))
