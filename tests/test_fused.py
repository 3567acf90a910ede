"""impl="fused" (lnviz.fused, Triton kernels) returns the NormResult of the readable code and
torch's output: on a CUDA GPU compiled, elsewhere under Triton's interpreter (conftest.py sets
TRITON_INTERPRET=1 where there is no GPU)."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import lnviz
from lnviz import fused
from lnviz.lessons import performance

if fused.triton is None:
    if sys.platform.startswith("linux"):
        pytest.fail("triton is in the dev extra (pyproject.toml, on Linux): these tests need it",
                    pytrace=False)
    pytest.skip("triton ships Linux wheels only", allow_module_level=True)

HALF = (torch.float16, torch.bfloat16)
#: Where the kernels are checked: compiled on a CUDA GPU, else interpreted on the CPU.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FUNCTIONS = {"layer": lnviz.layer_norm, "rms": lnviz.rms_norm}


def reference(norm: str, x: torch.Tensor, h: int | tuple[int, ...], weight, bias,
              eps: float) -> lnviz.NormResult:
    """The readable code on the input in float64: every statistic to far better than float32."""
    w = None if weight is None else weight.double()
    if norm == "rms":
        return lnviz.rms_norm(x.double(), h, w, eps)
    return lnviz.layer_norm(x.double(), h, w, None if bias is None else bias.double(), eps)


def torch_output(norm: str, x, shape, weight, bias, eps) -> torch.Tensor:
    if norm == "rms":
        return F.rms_norm(x, shape, weight, eps)
    return F.layer_norm(x, shape, weight, bias, eps)


def within(got: torch.Tensor, want: torch.Tensor, bound: torch.Tensor | float) -> None:
    """|got − want| ≤ bound, NaN exactly where ``want`` is NaN and ±∞ where it is (a constant
    row with ε = 0)."""
    got, want = got.double().cpu(), want.double().cpu()
    bound = bound.cpu() if isinstance(bound, torch.Tensor) else bound
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    ok = (got == want) | ((got - want).abs() <= bound)
    assert ok[~nan].all(), float((got - want).abs()[~nan].max())


def assert_matches(got: lnviz.NormResult, norm: str, x, h, weight, bias, eps) -> None:
    """``got`` against the float64 readable code and against torch, to the input dtype's
    precision: half-precision outputs within two of their units in the last place, float32 to
    a few parts in a million of the output's scale. torch's own float32 error grows with
    |μ|/σ (a row far from zero), and its bound with it."""
    ref = reference(norm, x, h, weight, bias, eps)
    shape = (h,) if isinstance(h, int) else h
    # x − μ in float32 carries μ's rounding (half a unit of |μ|'s last place), times rstd: lnviz
    # when σ² and x̂ are read (as on the fast path), torch in its output
    rounding = 0 if norm == "rms" else torch.finfo(torch.float32).eps * ref.mean.abs() * ref.rstd
    assert got.output.shape == x.shape and got.output.dtype == x.dtype
    assert got.reduce_dims == ref.reduce_dims
    if x.dtype in HALF:
        ulp = torch.finfo(x.dtype).eps
        bound = 2 * ulp * (ref.output.abs() + ulp)
        within(got.output, ref.output, bound)
        theirs_bound = 2 * bound
        if weight is not None:
            if x.is_cuda:  # torch's CUDA kernels want γ and β in x's dtype
                weight, bias = (None if p is None else p.to(x.dtype) for p in (weight, bias))
            # torch rounds γ·x̂ to x's dtype before adding β (on the CPU, float32 γ and β with a
            # half input take its unfused path), so a y that β nearly cancels carries the
            # rounding of γ·x̂ and of β: what that can move y by (seen: 2⁻¹⁰ at y ≈ 0.03)
            rounded = ref.x_hat.abs() * weight.double().abs() + (
                0 if bias is None else bias.double().abs())
            theirs_bound = theirs_bound + ulp * rounded
        # and torch's μ rounds in float32: on a row far from zero whose values are all equal in
        # x's dtype (bfloat16 has steps of 0.5 at 100), lnviz's output is 0 and torch's
        # (x − μ)·rstd is that rounding times rstd (seen: 3.7e-4 at μ = 100, ε = 1e-5)
        theirs_bound = theirs_bound + rounding * (1 if weight is None else weight.double().abs())
        within(got.output, torch_output(norm, x, shape, weight, bias, eps), theirs_bound)
    else:
        tol = 4e-6 * (ref.output.abs().nan_to_num().max().item() + 1)
        within(got.output, ref.output, tol)
        far = 1 if norm == "rms" else (1 + ref.mean.abs() / ref.var.sqrt()).nan_to_num(1.0)
        within(got.output, torch_output(norm, x, shape, weight, bias, eps), tol * far)
    assert got.rstd.dtype == torch.float32 and got.rstd.shape == ref.rstd.shape
    stat_tol = 2e-6
    within(got.rstd, ref.rstd, (stat_tol * ref.rstd.abs()).nan_to_num(0.0))
    if norm == "rms":
        assert got.mean is None
    else:
        spread = (ref.var.sqrt() + 1e-30).cpu()
        assert ((got.mean.double().cpu() - ref.mean.cpu()).abs()
                <= stat_tol * (ref.mean.abs().cpu() + spread)).all()
    # σ² and x̂ are built from μ and rstd when read, as on the fast path (μ's rounding, above)
    within(got.x_hat, ref.x_hat, (1e-3 if x.dtype in HALF else 1e-5) + rounding)


def table(rows: int, h: int, dtype: torch.dtype, offset: float, seed: int,
          device: str = DEVICE) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, h, generator=g, dtype=torch.float64) * 2 + offset).to(device, dtype)


def affine(h: int, seed: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """γ and β for ``x``: float32 for half-precision inputs (as models keep them), else x's."""
    g = torch.Generator().manual_seed(seed + 1)
    dtype = torch.float32 if x.dtype in HALF else x.dtype
    return ((torch.rand(h, generator=g) + 0.5).to(x.device, dtype),
            torch.randn(h, generator=g).to(x.device, dtype))


@settings(max_examples=60, deadline=None)
@given(norm=st.sampled_from(sorted(FUNCTIONS)), rows=st.integers(1, 20), h=st.integers(2, 300),
       dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16]),
       eps=st.sampled_from([0.0, 1e-5, 1e-2]), offset=st.sampled_from([0.0, 3.0, 100.0]),
       with_affine=st.booleans(), seed=st.integers(0, 999))
def test_fused_matches_the_readable_code_and_torch(norm, rows, h, dtype, eps, offset,
                                                   with_affine, seed):
    """Any row count and width (powers of two or not), each dtype, ε = 0 included, rows far from
    zero (μ's correction sum at work), with and without γ and β."""
    x = table(rows, h, dtype, offset, seed)
    weight, bias = affine(h, seed, x) if with_affine else (None, None)
    if norm == "rms":
        bias = None
        got = lnviz.rms_norm(x, h, weight, eps, impl="fused")
    else:
        got = lnviz.layer_norm(x, h, weight, bias, eps, impl="fused")
    assert_matches(got, norm, x, h, weight, bias, eps)


@settings(max_examples=25, deadline=None)
@given(norm=st.sampled_from(sorted(FUNCTIONS)), rows=st.integers(1, 6), h=st.integers(17, 200),
       dtype=st.sampled_from([torch.float32, torch.bfloat16]), offset=st.sampled_from([0.0, 50.0]),
       seed=st.integers(0, 999))
def test_rows_wider_than_a_block_are_walked_in_blocks(norm, rows, h, dtype, offset, seed):
    """With a block of 16 values every width here takes the looping kernel: whole blocks, a
    ragged last block, the three reads."""
    x = table(rows, h, dtype, offset, seed)
    weight, bias = affine(h, seed, x)
    bias = None if norm == "rms" else bias
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fused, "MAX_BLOCK", 16)
        assert fused.config(h)[1] == 16 < h
        got = (lnviz.rms_norm(x, h, weight, 1e-5, impl="fused") if norm == "rms"
               else lnviz.layer_norm(x, h, weight, bias, 1e-5, impl="fused"))
    assert_matches(got, norm, x, h, weight, bias, 1e-5)


def test_a_row_one_value_wider_than_the_register_block():
    h = fused.MAX_BLOCK + 1
    x = table(2, h, torch.float32, 10.0, 0)
    for norm, fn in FUNCTIONS.items():
        assert_matches(fn(x, h, None, None, 1e-5, impl="fused") if norm == "layer"
                       else fn(x, h, None, 1e-5, impl="fused"), norm, x, h, None, None, 1e-5)


def test_any_leading_shape_several_trailing_dims_and_a_strided_view():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 4, 5, 6, generator=g).to(DEVICE)
    assert_matches(lnviz.layer_norm(x, (5, 6), impl="fused"), "layer", x, (5, 6), None, None,
                   1e-5)
    strided = x.transpose(0, 3)  # (6, 4, 5, 3), not contiguous
    assert_matches(lnviz.rms_norm(strided, 3, eps=1e-6, impl="fused"), "rms", strided, 3, None,
                   None, 1e-6)
    rms = lnviz.rms_norm(x, 6, impl="fused")  # ε None: the accumulation dtype's epsilon
    assert_matches(rms, "rms", x, 6, None, None, torch.finfo(torch.float32).eps)


@pytest.mark.parametrize("block", [None, 16], ids=["in registers", "walked in blocks"])
def test_a_constant_row_centres_to_exactly_zero(block):
    x = torch.full((3, 50), 0.1, device=DEVICE)
    with pytest.MonkeyPatch.context() as patch:
        if block:
            patch.setattr(fused, "MAX_BLOCK", block)
        r = lnviz.layer_norm(x, 50, impl="fused")
    assert (r.output == 0).all() and torch.equal(r.mean.flatten(), x[:, 0])


def test_empty_inputs_behave_as_torch():
    for x in (torch.empty(0, 5, device=DEVICE), torch.empty(2, 0, 5, device=DEVICE)):
        r = lnviz.layer_norm(x, 5, impl="fused")
        assert r.output.shape == x.shape == F.layer_norm(x, (5,)).shape


def test_without_a_gpu_or_triton_fused_says_what_it_needs(monkeypatch):
    x = torch.randn(2, 3)
    monkeypatch.setattr(fused, "INTERPRETED", False)
    with pytest.raises(fused.FusedUnavailable, match=r"need a CUDA GPU; this tensor is on cpu"):
        lnviz.layer_norm(x, 3, impl="fused")
    assert not fused.available("cpu")
    monkeypatch.setattr(fused, "triton", None)
    with pytest.raises(fused.FusedUnavailable, match=r"pip install triton"):
        lnviz.rms_norm(x, 3, impl="fused")
    with pytest.raises(ValueError, match="layer_norm and rms_norm only"):
        lnviz.batch_norm(x, None, None, training=True, impl="fused")


def test_float64_is_left_to_the_fast_path():
    with pytest.raises(TypeError, match="impl='fast' takes any floating dtype"):
        lnviz.layer_norm(torch.randn(2, 3, dtype=torch.float64, device=DEVICE), 3, impl="fused")


def test_the_benchmark_offers_fused_on_cuda_only_and_says_why():
    assert "fused" not in performance.implementations("layer", "cpu")
    assert "GPU" in performance.fused_unavailable("layer", "cpu")
    assert "LayerNorm and RMSNorm only" in performance.fused_unavailable("batch", "cuda")
    skipped = []
    rows = performance.run([(8, 8)], ["layer"], ["fused"], "cpu", 3, on_skip=skipped.append)
    assert rows == [] and [s.impl for s in skipped] == ["fused"]
    assert "CUDA GPU" in skipped[0].reason


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(16384, 1024), (4096, 4096), (300, 777), (64, 20000),
                                   (5, 1)])
def test_compiled_on_the_gpu(shape, dtype):
    """The compiled kernels on CUDA: the benchmark's sizes, an odd width, a width past one
    block."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    rows, h = shape
    x = table(rows, h, dtype, 1.0, 0, "cuda")
    weight, bias = affine(h, 0, x)
    assert_matches(lnviz.layer_norm(x, h, weight, bias, 1e-5, impl="fused"), "layer", x, h,
                   weight, bias, 1e-5)
    assert_matches(lnviz.rms_norm(x, h, weight, 1e-6, impl="fused"), "rms", x, h, weight,
                   None, 1e-6)
