"""Tune lnviz.fused's launch settings on a CUDA GPU: time each (rows per program, block, warps)
for LayerNorm and RMSNorm at several sizes, beside torch's native kernel and a copy, and print
the best settings next to what :func:`lnviz.fused.config` picks.

    python tools/fused_tune.py [--json PATH] [--quick]

Times are GPU times between CUDA events with the L2 cache overwritten before each call
(:func:`lnviz.lessons.performance.time_samples`); the median of ``--repeats`` calls counts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys

import torch
import torch.nn.functional as F

from lnviz import fused
from lnviz.lessons.performance import time_samples

#: The issue's three sizes, the two shipped models' widths (MiniLM 384 × 2 = 768 wide
#: activations; SmolLM2 576) and a row wider than one register block.
SIZES = ((16384, 1024), (16384, 4096), (65536, 4096), (16384, 768), (16384, 576), (4096, 16384))


def median_s(fn, repeats: int) -> float:
    return statistics.median(time_samples(fn, "cuda", repeats, warmup=3))


def candidates(h: int) -> list[tuple[int, int, int]]:
    """(rows, block, warps) worth timing for rows of ``h`` values."""
    whole = fused.triton.next_power_of_2(h)
    blocks = sorted({min(whole, b) for b in (whole, 4096, 8192, 16384)})
    found = []
    for block, rows, warps in itertools.product(blocks, (1, 2, 4, 8, 16), (2, 4, 8, 16)):
        if block < h and rows > 1:
            continue  # the looping kernel takes one row per program
        if rows * block > 32768 or rows * block < 32 * warps:
            continue  # too many values for registers, or fewer than one per thread
        found.append((rows, block, warps))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="the three issue sizes only")
    parser.add_argument("--sizes", help="e.g. 16384x1024,16384x768 (instead of the defaults)")
    parser.add_argument("--norms", default="layer",
                        help="comma-separated: layer,rms (one kernel serves both; default layer)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    results = []
    sizes = SIZES[:3] if args.quick else SIZES
    if args.sizes:
        sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",")]
    for (n, h), norm in itertools.product(sizes, args.norms.split(",")):
        x = torch.randn(n, h, device="cuda")
        bytes_moved = 2 * x.numel() * x.element_size()
        copy = min(time_samples(lambda x=x: x.clone(), "cuda", args.repeats, warmup=3))
        native = (lambda x=x: F.layer_norm(x, x.shape[-1:])) if norm == "layer" else \
            (lambda x=x: F.rms_norm(x, x.shape[-1:], eps=1e-6))
        torch_s = median_s(native, args.repeats)
        timed = []
        for settings in candidates(h):
            try:
                timed.append((median_s(lambda x=x, s=settings, c=norm == "layer": fused._norm(
                    x, (1,), None, None, 1e-5, centre=c, settings=s),
                    args.repeats), settings))
            except Exception as err:  # a setting the compiler refuses (too many registers)
                print(f"  {norm} {n}×{h} {settings}: {type(err).__name__}", file=sys.stderr)
        best_s, best = min(timed)
        picked = fused.config(h)
        picked_s = next((s for s, c in timed if c == picked), float("nan"))
        row = dict(norm=norm, rows=n, cols=h, copy_gbps=bytes_moved / copy / 1e9,
                   torch_of_copy=copy / torch_s, best=best, best_of_copy=copy / best_s,
                   picked=picked, picked_of_copy=copy / picked_s,
                   top5=[(c, copy / s) for s, c in sorted(timed)[:5]])
        results.append(row)
        print(f"{norm:5} {n:6}×{h:<6} copy {row['copy_gbps']:6.0f} GB/s | torch "
              f"{row['torch_of_copy']:4.0%} | best {best} {row['best_of_copy']:4.0%} | "
              f"picked {picked} {row['picked_of_copy']:4.0%} | top5 "
              + " ".join(f"{c}:{f:.0%}" for c, f in row["top5"]), flush=True)
        del x
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
