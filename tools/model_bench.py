"""The two real models' load and ``run()`` time, best of N runs, one thread.

    python tools/model_bench.py [CHECKOUT] [REPEATS]

CHECKOUT (default: this one) is the lnviz checkout to time, so that two versions can be timed
one after the other on the same machine (docs/benchmarks.md §5).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
CHECKOUT = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[1])
REPEATS = int(sys.argv[2]) if len(sys.argv) > 2 else 15
sys.path.insert(0, CHECKOUT)

import torch  # noqa: E402

import lnviz  # noqa: E402


def best(run: Callable[[], object], repeats: int = REPEATS) -> float:
    """The fastest of ``repeats`` calls after one untimed call, in milliseconds."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    torch.set_num_threads(1)
    assert lnviz.__file__.startswith(CHECKOUT), lnviz.__file__
    start = time.perf_counter()
    encoder = lnviz.models.minilm()
    out = {"minilm load s": round(time.perf_counter() - start, 2)}
    for n in (12, 128, 510):
        text = " ".join(["word"] * (n - 2))
        assert len(encoder.run(text).tokens) == n
        out[f"minilm {n} tokens ms"] = round(
            best(lambda text=text: encoder.run(text), REPEATS if n < 500 else 5), 1)
    start = time.perf_counter()
    decoder = lnviz.models.smollm2()
    out["smollm2 load s"] = round(time.perf_counter() - start, 2)
    for n in (5, 32, 128):
        text = " ".join(["word"] * n)
        assert len(decoder.run(text).tokens) == n
        out[f"smollm2 {n} tokens ms"] = round(
            best(lambda text=text: decoder.run(text), REPEATS if n < 100 else 5), 1)
    print(out)


if __name__ == "__main__":
    main()
