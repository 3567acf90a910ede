"""impl="fused": lnviz's own GPU kernels for LayerNorm and RMSNorm, written in Triton.

A normalization does a few operations per value, so on a GPU its speed is set by memory traffic:
the least it can do is read x once and write y once. The kernels here do exactly that. Each
program of the kernel takes a few rows of the ``(rows, H)`` table, loads them into registers,
takes μ and σ² there with the same three sums as :func:`lnviz.layer_norm` (Σx, the correction
Σ(x − μ), Σ(x − μ)²), and writes y, μ and 1/√(σ² + ε); nothing else touches memory. The scratch
code, by comparison, writes and reads back five full-size intermediates.

A row wider than :data:`MAX_BLOCK` values does not fit in registers: its program walks the row in
blocks (:func:`config`), once for the statistics and once to write y (two reads, still one
write).

One kernel serves both norms: RMSNorm is LayerNorm without the centring (``CENTRE=False``: no
μ, and σ² becomes the mean square Σx²/H) and without β.

The kernels take float32, float16 and bfloat16 inputs and accumulate in float32 (half-precision
values are read as they are, summed in float32 and written back in their own dtype); float64 is
left to impl="fast". The per-row divisions and the square root round correctly
(``div_rn``, ``sqrt_rn``): a GPU's default float32 division is approximate (within 2 units in
the last place), which would let a constant row centre to a few ulp instead of exactly 0.

The kernels need a CUDA GPU. On a CPU tensor, with ``TRITON_INTERPRET=1`` in the environment,
they run under Triton's interpreter instead: slow, but the same kernel code, which is how the tests
check it on machines without a GPU. Anything else is refused with :class:`FusedUnavailable`.
"""

from __future__ import annotations

import math
import os

import torch

from lnviz.kernels import Kernel

__all__ = ["DTYPES", "INTERPRETED", "MAX_BLOCK", "FusedUnavailable", "available", "config",
           "layer_norm", "rms_norm"]

try:
    import triton
    import triton.language as tl
except ImportError:  # the kernels are optional: impl="fused" then says what to install
    triton = None

#: The dtypes the kernels take (statistics in float32).
DTYPES = (torch.float32, torch.float16, torch.bfloat16)

#: The widest row a program holds in registers at once; wider rows are walked in blocks of this
#: many values.
MAX_BLOCK = 16384


class FusedUnavailable(RuntimeError):
    """impl="fused" cannot run here: no triton, or a tensor that is not on a CUDA GPU."""


#: Whether the kernels were built for Triton's interpreter: TRITON_INTERPRET=1 when this module
#: was imported (Triton decides when it builds a kernel, not when it runs one).
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"


def available(device: str | torch.device) -> bool:
    """Whether impl="fused" runs on ``device`` here: CUDA with triton installed, or any CPU
    tensor under Triton's interpreter (``TRITON_INTERPRET=1``)."""
    kind = torch.device(device).type
    return triton is not None and (kind == "cuda" or (kind == "cpu" and INTERPRETED))


def _why_not(x: torch.Tensor) -> str | None:
    if triton is None:
        return ("impl='fused' runs lnviz's Triton kernels, and the triton package is not "
                "installed (pip install triton); use impl='fast' here")
    if not available(x.device):
        return (f"impl='fused' runs lnviz's Triton kernels, which need a CUDA GPU; this tensor "
                f"is on {x.device.type}. Use impl='fast' here, or set TRITON_INTERPRET=1 "
                "before starting Python to run the kernels on the CPU under Triton's "
                "interpreter (slow: for checking them)")
    return None


if triton is not None:

    @triton.jit
    def _norm_rows(
        X, Y, W, B, MEAN, RSTD,  # pointers: x and y (rows, H), γ and β (H,), μ and rstd (rows,)
        rows, H, eps,
        CENTRE: tl.constexpr,  # LayerNorm (True) or RMSNorm (False)
        HAS_W: tl.constexpr, HAS_B: tl.constexpr,
        ROWS: tl.constexpr,  # rows per program
        BLOCK: tl.constexpr,  # a power of two ≥ H: the whole row is in registers
    ):
        """Normalize ROWS rows of x, each held whole: one read of x, one write of y."""
        row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # this program's rows: (ROWS,)
        col = tl.arange(0, BLOCK)  # (BLOCK,)
        real = (row[:, None] < rows) & (col[None, :] < H)  # inside the table: (ROWS, BLOCK)
        at = row[:, None].to(tl.int64) * H + col[None, :]  # offsets of the values: (ROWS, BLOCK)
        x = tl.load(X + at, mask=real, other=0.0).to(tl.float32)  # x, 0 outside: (ROWS, BLOCK)
        n = H * 1.0  # H as a float32, for the correctly rounded divisions
        if CENTRE:
            mean = tl.math.div_rn(tl.sum(x, axis=1), n)  # μ = Σx / H: (ROWS,)
            centered = tl.where(real, x - mean[:, None], 0.0)  # x − μ: (ROWS, BLOCK)
            error = tl.math.div_rn(tl.sum(centered, axis=1), n)  # Σ(x − μ)/H, μ's error: (ROWS,)
            centered = tl.where(real, centered - error[:, None], 0.0)  # x − μ, exact to rounding
            mean += error  # μ, exact to rounding
            tl.store(MEAN + row, mean, mask=row < rows)
        else:
            centered = x  # RMSNorm does not centre
        var = tl.math.div_rn(tl.sum(centered * centered, axis=1), n)  # σ² = Σ(x − μ)²/H: (ROWS,)
        rstd = tl.math.div_rn(1.0, tl.sqrt_rn(var + eps))  # 1/√(σ² + ε): (ROWS,)
        tl.store(RSTD + row, rstd, mask=row < rows)
        y = centered * rstd[:, None]  # x̂ = (x − μ)/√(σ² + ε): (ROWS, BLOCK)
        if HAS_W:
            y *= tl.load(W + col, mask=col < H).to(tl.float32)[None, :]  # γ·x̂
        if HAS_B:
            y += tl.load(B + col, mask=col < H).to(tl.float32)[None, :]  # + β
        tl.store(Y + at, y.to(Y.dtype.element_ty), mask=real)

    @triton.jit
    def _norm_wide_rows(
        X, Y, W, B, MEAN, RSTD, rows, H, eps,
        CENTRE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
        BLOCK: tl.constexpr,  # the values read at a time; H > BLOCK
    ):
        """Normalize one row too wide for registers, BLOCK values at a time: two reads of the
        row (the statistics; y), one write.

        Each of the BLOCK lanes keeps a running μ and Σ(x − μ)² of the values it has seen
        (Welford's update), and the lanes are merged at the end (Chan, Golub & LeVeque's
        formula), with μ's rounding error taken out as in the three sums."""
        row = tl.program_id(0)
        start = row.to(tl.int64) * H  # where the row begins
        col = tl.arange(0, BLOCK)  # (BLOCK,)
        n = H * 1.0  # H as a float32, for the correctly rounded divisions
        seen = tl.zeros([BLOCK], tl.float32)  # values seen, by lane
        lane_mean = tl.zeros([BLOCK], tl.float32)  # their μ (RMSNorm: stays 0)
        lane_m2 = tl.zeros([BLOCK], tl.float32)  # their Σ(x − μ)²  (RMSNorm: Σx²)
        for c in range(0, H, BLOCK):
            inside = c + col < H
            x = tl.load(X + start + c + col, mask=inside, other=0.0).to(tl.float32)
            seen += tl.where(inside, 1.0, 0.0)
            delta = tl.where(inside, x - lane_mean, 0.0)  # x − μ before this value
            if CENTRE:
                lane_mean += delta / tl.maximum(seen, 1.0)  # μ with this value
            lane_m2 += delta * (x - lane_mean)  # Welford: (x − μ_before)(x − μ_after)
        mean = tl.math.div_rn(tl.sum(seen * lane_mean, axis=0), n)  # μ = Σx / H
        error = tl.math.div_rn(tl.sum(seen * (lane_mean - mean), axis=0), n)  # μ's error
        spread = lane_mean - mean
        # σ² = [Σ lanes' Σ(x − μ_lane)² + Σ seen·(μ_lane − μ)²]/H − error² (Chan et al.)
        var = tl.math.div_rn(tl.sum(lane_m2 + seen * spread * spread, axis=0), n) - error * error
        rstd = tl.math.div_rn(1.0, tl.sqrt_rn(var + eps))  # 1/√(σ² + ε)
        mean += error  # μ, exact to rounding
        if CENTRE:
            tl.store(MEAN + row, mean)
        tl.store(RSTD + row, rstd)
        for c in range(0, H, BLOCK):
            x = tl.load(X + start + c + col, mask=c + col < H, other=0.0).to(tl.float32)
            y = (x - mean) * rstd  # x̂
            if HAS_W:
                y *= tl.load(W + c + col, mask=c + col < H).to(tl.float32)  # γ·x̂
            if HAS_B:
                y += tl.load(B + c + col, mask=c + col < H).to(tl.float32)  # + β
            tl.store(Y + start + c + col, y.to(Y.dtype.element_ty), mask=c + col < H)


def config(h: int) -> tuple[int, int, int]:
    """(rows per program, block, warps) for rows of ``h`` values.

    Chosen from timing (rows, block, warps) settings with ``tools/fused_tune.py`` on an H100
    (docs/benchmarks.md): short rows go several to a program (about 2,048 values) on 2 warps, a
    row of 2,048–8,192 values alone on 16 warps, one of up to 16,384 values on 8 warps, and a
    longer one is walked in blocks of 16,384 on 16 warps.
    """
    if h > MAX_BLOCK:
        return 1, MAX_BLOCK, 16
    block = triton.next_power_of_2(h)
    if block <= 1024:
        return min(16, max(1, 2048 // block)), block, 2
    return 1, block, 16 if block <= 8192 else 8


def _norm(x: torch.Tensor, dims: tuple[int, ...], weight: torch.Tensor | None,
          bias: torch.Tensor | None, eps: float, centre: bool,
          settings: tuple[int, int, int] | None = None) -> Kernel | None:
    """Run the kernel on ``x`` as a ``(rows, H)`` table, H the values of the trailing dims."""
    why = _why_not(x)
    if why:
        raise FusedUnavailable(why)
    if x.dtype not in DTYPES:
        raise TypeError(f"impl='fused' takes {', '.join(map(str, DTYPES))} inputs, got "
                        f"{x.dtype}; impl='fast' takes any floating dtype")
    h = math.prod(x.shape[d] for d in dims)  # H, the values of one row
    if x.numel() == 0 or h == 0:
        return None  # nothing to launch: the readable code returns torch's empty answer
    table = x.reshape(-1, h).contiguous()  # (rows, H)
    n = table.shape[0]
    y = torch.empty_like(table)
    mean = torch.empty(n, dtype=torch.float32, device=x.device)  # the accumulation dtype
    rstd = torch.empty(n, dtype=torch.float32, device=x.device)
    w = table if weight is None else weight.reshape(h).contiguous()  # unused when absent
    b = table if bias is None else bias.reshape(h).contiguous()
    rows, block, warps = settings or config(h)
    flags = dict(CENTRE=centre, HAS_W=weight is not None, HAS_B=bias is not None, BLOCK=block,
                 num_warps=warps)
    if h <= block:  # whole rows in registers, several to a program
        _norm_rows[(triton.cdiv(n, rows),)](table, y, w, b, mean, rstd, n, h, eps, ROWS=rows,
                                            **flags)
    else:  # one row to a program, walked in blocks
        _norm_wide_rows[(n,)](table, y, w, b, mean, rstd, n, h, eps, **flags)
    stat_shape = tuple(x.shape[: x.dim() - len(dims)]) + (1,) * len(dims)
    return Kernel(y.reshape(x.shape), mean.reshape(stat_shape) if centre else None,
                  rstd.reshape(stat_shape))


def layer_norm(
    input: torch.Tensor,
    dims: tuple[int, ...],
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
) -> Kernel | None:
    """LayerNorm over the trailing ``dims`` in one kernel."""
    return _norm(input, dims, weight, bias, eps, centre=True)


def rms_norm(
    input: torch.Tensor, dims: tuple[int, ...], weight: torch.Tensor | None, eps: float
) -> Kernel | None:
    """RMSNorm over the trailing ``dims`` in one kernel."""
    return _norm(input, dims, weight, None, eps, centre=False)
