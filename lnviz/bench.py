"""How fast is a normalization? ``python -m lnviz.bench`` times implementations against the
memory roofline.

Each norm is timed as NumPy, lnviz's readable ``scratch`` code, lnviz's ``fast`` path, on a CUDA
GPU lnviz's own Triton kernel (``fused``; elsewhere the run kept in
lnviz/data/measured/h100_fused.json is printed instead), torch's native kernel and
``torch.compile`` of the scratch code, and reported as the median time, the
bandwidth of the bytes that must move (read x, write y) and that bandwidth as a fraction of a
plain copy's (the roofline). The measuring itself is :mod:`lnviz.lessons.performance`'s, which
the app's Performance page runs too.

Run ``python -m lnviz.bench --help`` for the options; ``--quick`` finishes in under 30 s,
``--memory`` measures the peak extra memory of each implementation. (The app's own rerun times are
measured by ``python tools/apptiming.py``, outside the package.)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from lnviz.lessons.performance import (
    DEFAULT_SIZES,
    IMPLEMENTATIONS,
    NORMS,
    QUICK_SIZES,
    format_table,
    machine,
    peak_extra_memory,
    recorded_gpu_run,
    run,
)

__all__ = ["main"]


def _parse_sizes(text: str) -> list[tuple[int, int]]:
    try:
        return [tuple(int(v) for v in part.lower().split("x")) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes look like 1024x1024,4096x1024; got {text!r}") \
            from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lnviz.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or mps (default: cpu)")
    parser.add_argument("--sizes", type=_parse_sizes, help="e.g. 1024x1024,16384x1024")
    parser.add_argument("--norms", default=",".join(NORMS),
                        help="comma-separated: " + ",".join(NORMS)
                             + " (or their functions' names: layer_norm, …)")
    parser.add_argument("--impls", default="numpy,scratch,fast,fused,torch,compiled",
                        help="comma-separated: " + ",".join(IMPLEMENTATIONS))
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per case (median)")
    parser.add_argument("--quick", action="store_true", help="small sizes, no torch.compile: <30 s")
    parser.add_argument("--memory", action="store_true",
                        help="also measure peak extra memory at 16384×1024")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args(argv)

    impls = [i for i in args.impls.split(",") if i]
    sizes = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    if args.quick:
        impls = [i for i in impls if i != "compiled"]
        args.repeats = min(args.repeats, 5)
    print(f"# {machine()}", flush=True)
    rows = run(sizes, args.norms.split(","), impls, args.device, args.repeats,
               progress=lambda f, m: print(f"  [{f:4.0%}] {m}", file=sys.stderr, flush=True),
               on_skip=lambda s: print(f"  skipped {s.norm} {s.impl} {s.rows}×{s.cols}: "
                                       f"{s.reason}", file=sys.stderr, flush=True))
    print(format_table(rows))
    if args.device != "cuda" and "fused" in impls:
        gpu = recorded_gpu_run()
        print(f"\n# fused needs a CUDA GPU. On an {gpu.device} ({gpu.date}, {gpu.machine}, "
              f"Triton {gpu.triton}) it measured:\n{format_table(gpu.rows)}")
    result: dict = {"machine": machine(), "rows": [asdict(r) for r in rows]}
    if args.memory:
        memory = {f"{n}/{i}": peak_extra_memory(n, i, 16384, 1024, args.device)
                  for n in args.norms.split(",") for i in ("scratch", "fast", "torch")}
        input_bytes = 16384 * 1024 * 4
        print("\npeak extra memory at 16384×1024 float32 (× input size):")
        for key, value in memory.items():
            print(f"  {key}: {value / input_bytes:.2f}×")
        result["peak_extra_memory_bytes"] = memory
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
