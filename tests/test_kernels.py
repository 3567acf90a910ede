"""impl="fast" (lnviz.kernels) returns the same NormResult as the readable impl="scratch" (and as
torch)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import lnviz
import lnviz.norms
from lnviz.devices import DTYPES, supported_dtypes

TOL = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1.5e-1}


def same(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, rel: bool = False) -> None:
    tol = TOL[dtype]
    torch.testing.assert_close(a.double().cpu(), b.double().cpu(), atol=0 if rel else tol,
                               rtol=tol, equal_nan=True)


def both(fn, *args, **kwargs) -> tuple[lnviz.NormResult, lnviz.NormResult]:
    return fn(*args, **kwargs, impl="scratch"), fn(*args, **kwargs, impl="fast")


def compare(scratch: lnviz.NormResult, fast: lnviz.NormResult, dtype: torch.dtype) -> None:
    assert fast.output.dtype == scratch.output.dtype == dtype
    assert fast.reduce_dims == scratch.reduce_dims
    assert fast.mean is None or fast.mean.shape == scratch.mean.shape
    assert fast.var.shape == scratch.var.shape and fast.rstd.shape == scratch.rstd.shape
    if scratch.mean is not None:
        same(fast.mean, scratch.mean, dtype)
    # In half precision a group of nearly equal values has a variance below the inputs'
    # rounding, where torch's half kernels and the float32 scratch path may differ; compare
    # the groups whose spread is resolvable.
    half = dtype in (torch.float16, torch.bfloat16)
    keep = scratch.var > 1e-2 if half else torch.ones_like(scratch.var, dtype=torch.bool)
    same(fast.rstd[keep], scratch.rstd[keep], dtype, rel=True)
    cells = keep.expand(scratch.output.shape)
    same(fast.output[cells], scratch.output[cells], dtype)
    same(fast.x_hat[cells], scratch.x_hat[cells], dtype)


CASE = settings(max_examples=40, deadline=None)
SIZES = st.integers(2, 6)


@CASE
@given(n=SIZES, c=SIZES, length=SIZES, dtype_name=st.sampled_from(list(DTYPES)),
       affine=st.booleans(), eps=st.sampled_from([1e-5, 1e-2]), seed=st.integers(0, 999))
def test_fast_equals_scratch(device, n, c, length, dtype_name, affine, eps, seed):
    if dtype_name not in supported_dtypes(device):
        pytest.skip(f"{dtype_name} is not supported on {device}")
    dtype = DTYPES[dtype_name]
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, c, length, generator=g) * 3 + 1).to(device, dtype)
    pdtype = torch.float64 if dtype == torch.float64 else torch.float32
    w = (torch.rand(c, generator=g) + 0.5).to(device, pdtype) if affine else None
    b = torch.randn(c, generator=g).to(device, pdtype) if affine else None
    wl = (torch.rand(length, generator=g) + 0.5).to(device, dtype) if affine else None
    bl = torch.randn(length, generator=g).to(device, dtype) if affine else None

    compare(*both(lnviz.layer_norm, x, length, wl, bl, eps), dtype)
    compare(*both(lnviz.layer_norm, x, (c, length), None, None, eps), dtype)
    compare(*both(lnviz.rms_norm, x, length, wl, eps), dtype)
    compare(*both(lnviz.group_norm, x, 1, w, b, eps), dtype)
    compare(*both(lnviz.group_norm, x, c, w, b, eps), dtype)
    compare(*both(lnviz.instance_norm, x, None, None, w, b, True, 0.1, eps), dtype)
    compare(*both(lnviz.batch_norm, x, None, None, w, b, True, 0.1, eps), dtype)
    compare(*both(lnviz.batch_norm, x.transpose(1, 2), None, None, w, b, True, 0.1, eps,
                  channel_dim=-1), dtype)


def test_fast_batch_norm_updates_running_statistics_like_torch():
    x = torch.randn(8, 3, 5)
    ours = (torch.zeros(3), torch.ones(3))
    theirs = (torch.zeros(3), torch.ones(3))
    for _ in range(3):
        lnviz.batch_norm(x, *ours, training=True, momentum=0.3, impl="fast")
        F.batch_norm(x, *theirs, training=True, momentum=0.3)
    torch.testing.assert_close(ours[0], theirs[0])
    torch.testing.assert_close(ours[1], theirs[1])
    evaluated = lnviz.batch_norm(x, *ours, impl="fast")
    torch.testing.assert_close(evaluated.output, F.batch_norm(x, *theirs))
    torch.testing.assert_close(evaluated.mean.flatten(), ours[0])


def test_fast_falls_back_to_scratch_where_torch_has_no_kernel():
    """A mask (padding) and momentum=None have no native kernel: the result is still right."""
    x = torch.tensor([[[1.0], [3.0], [0.0]]])
    mask = torch.tensor([[True, True, False]])
    r = lnviz.batch_norm(x, None, None, training=True, channel_dim=-1, mask=mask, impl="fast")
    assert r.mean.item() == pytest.approx(2.0)
    rm, rv, count = torch.zeros(1), torch.ones(1), torch.zeros((), dtype=torch.long)
    lnviz.batch_norm(x[:, :2], rm, rv, training=True, momentum=None, channel_dim=-1,
                     num_batches_tracked=count, impl="fast")
    assert rm.item() == pytest.approx(2.0) and int(count) == 1


def test_x_hat_is_built_only_when_read():
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    r = lnviz.layer_norm(x, 8, impl="fast")
    assert callable(r._x_hat)
    first = r.x_hat
    assert r.x_hat is first  # computed once, then kept
    torch.testing.assert_close(first, lnviz.layer_norm(r.output, 8).output, atol=1e-4, rtol=0)


def test_fast_keeps_the_refusals():
    with pytest.raises(ValueError, match="more than one value per channel"):
        lnviz.batch_norm(torch.ones(1, 3), None, None, training=True, impl="fast")
    with pytest.raises(ValueError, match="evaluation mode"):
        lnviz.batch_norm(torch.ones(2, 3), None, None, impl="fast")
    with pytest.raises(ValueError, match="impl must be one of"):
        lnviz.layer_norm(torch.ones(2, 3), 3, impl="turbo")


def test_fast_var_is_recovered_from_rstd():
    x = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    r = lnviz.layer_norm(x, 3, impl="fast")
    assert r.var.item() == pytest.approx(2 / 3, rel=1e-9)
    assert r.rstd.item() == pytest.approx(1 / math.sqrt(2 / 3 + 1e-5), rel=1e-12)


def test_x_hat_is_computed_once_and_cached():
    calls = []
    x_hat = torch.randn(2, 3)

    def build() -> torch.Tensor:
        calls.append(1)
        return x_hat

    # Positional, in the order the call sites outside lnviz.norms use (lnviz.batch passes a
    # function fifth).
    r = lnviz.NormResult(torch.zeros(2, 3), None, torch.ones(2, 1), torch.ones(2, 1), build, (1,))
    assert calls == []
    assert r.x_hat is x_hat and r.x_hat is x_hat
    assert calls == [1]
    eager = lnviz.layer_norm(torch.randn(4, 8), 8)
    assert eager.x_hat is eager.x_hat is eager._x_hat  # the scratch path hands over the tensor
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.output = torch.ones(2, 3)


@pytest.mark.slow  # a fresh process of its own
def test_kernels_stand_below_the_norms():
    """No cycle: lnviz.kernels imports nothing of lnviz.norms, which imports it; a kernel gives
    back y, μ and rstd, and the norms build the NormResult."""
    code = ("import sys, torch, lnviz.kernels as k; "
            "out = k.layer_norm(torch.tensor([[1.0, 2.0, 3.0]]), (1,), None, None, 0.0); "
            "print(out.output.tolist(), out.mean.tolist(), 'lnviz.norms' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == (f"{[[-1.2247447967529297, 0.0, 1.2247447967529297]]} "
                                   "[[2.0]] False")


def test_the_fast_path_builds_var_only_when_read():
    """σ² = rstd⁻² − ε is one more launch over the statistics on a GPU: built when read."""
    r = lnviz.layer_norm(torch.tensor([[1.0, 2.0, 3.0]]), 3, impl="fast")
    assert callable(r._var) and "var" not in vars(r)
    assert r.var is r.var  # built once, then kept
    scratch = lnviz.layer_norm(torch.tensor([[1.0, 2.0, 3.0]]), 3)
    assert scratch.var is scratch._var  # the readable path hands over the tensor


RANKS = st.integers(3, 5)


@CASE
@given(data=st.data(), rank=RANKS, dtype_name=st.sampled_from(list(DTYPES)),
       eps=st.sampled_from([1e-5, 1e-2]), seed=st.integers(0, 999))
def test_fast_equals_scratch_for_any_rank(device, data, rank, dtype_name, eps, seed):
    """Random shapes of any rank, statistics over several trailing dims, channels last."""
    if dtype_name not in supported_dtypes(device):
        pytest.skip(f"{dtype_name} is not supported on {device}")
    dtype = DTYPES[dtype_name]
    shape = data.draw(st.lists(SIZES, min_size=rank, max_size=rank), label="shape")
    trailing = data.draw(st.integers(1, rank - 1), label="normalized dims")
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3 - 2).to(device, dtype)
    pdtype = torch.float64 if dtype == torch.float64 else torch.float32
    c = shape[1]
    w = (torch.rand(c, generator=g) + 0.5).to(device, pdtype)
    b = torch.randn(c, generator=g).to(device, pdtype)
    normalized = shape[-trailing:]
    wl = (torch.rand(normalized, generator=g) + 0.5).to(device, dtype)
    groups = data.draw(st.sampled_from([d for d in range(1, c + 1) if c % d == 0]),
                       label="groups")

    compare(*both(lnviz.layer_norm, x, normalized, wl, None, eps), dtype)
    compare(*both(lnviz.rms_norm, x, normalized, wl, eps), dtype)
    compare(*both(lnviz.group_norm, x, groups, w, b, eps), dtype)
    compare(*both(lnviz.instance_norm, x, None, None, w, b, True, 0.1, eps), dtype)
    compare(*both(lnviz.batch_norm, x, None, None, w, b, True, 0.1, eps), dtype)
    last = x.movedim(1, -1)
    compare(*both(lnviz.batch_norm, last, None, None, w, b, True, 0.1, eps, channel_dim=-1),
            dtype)


@pytest.mark.parametrize("impl", ["scratch", "fast"])  # impl="fused" is LayerNorm's and RMSNorm's
def test_batch_norm_counts_training_batches_whatever_the_momentum(impl):
    """num_batches_tracked counts training batches on both paths, as nn.BatchNorm's does."""
    count = torch.zeros((), dtype=torch.long)
    running = (torch.zeros(3), torch.ones(3))
    for _ in range(2):
        lnviz.batch_norm(torch.randn(8, 3, 5), *running, training=True, momentum=0.1,
                         num_batches_tracked=count, impl=impl)
    lnviz.batch_norm(torch.randn(8, 3, 5), *running, num_batches_tracked=count, impl=impl)
    assert int(count) == 2  # not the evaluation call


@pytest.mark.parametrize("shape", [(0, 3, 5), (2, 3, 0)])
def test_fast_batch_norm_of_an_empty_batch_is_like_torch(shape):
    """torch's native kernel refuses an empty input that F.batch_norm accepts."""
    x = torch.randn(shape)
    ours, theirs = (torch.zeros(3), torch.ones(3)), (torch.zeros(3), torch.ones(3))
    r = lnviz.batch_norm(x, *ours, training=True, impl="fast")
    assert r.output.shape == F.batch_norm(x, *theirs, training=True).shape == x.shape
    torch.testing.assert_close(ours, theirs)  # the running statistics are left as they were
