"""EfficientNet-Lite0: lnviz's load, memory and ``run()`` time beside the reference
implementation's (efficientnet-lite-pytorch) on the same weights, and the page's heavier parts.

    python tools/efficientnet_bench.py [REPEATS]

Each side is measured in a fresh process (``--one WHAT``), so that one's memory does not count
in the other's: the resident memory a load adds (after ``import torch``), the load's wall time,
and the median of REPEATS runs (after one untimed run) of a batch of 1 and of 8 pictures at
224 × 224, in evaluation mode and in train mode; lnviz's with every BatchNorm recorded and
without records, and its network with the BatchNorms folded. Then the page's parts, each
lesson function once on the seven photos' pool (``--one parts``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "--one" else 5

from tools.gemma_bench import _median_ms, _resident_mb  # noqa: E402  (one home for both)


def one(what: str, repeats: int) -> dict:
    """One side's numbers, in this process."""
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    generator = torch.Generator().manual_seed(0)
    batches = {n: torch.randn(n, 3, 224, 224, generator=generator) * 0.5 for n in (1, 8)}
    out: dict = {}
    if what == "lnviz":
        import lnviz.models.efficientnet as eff

        base = _resident_mb()
        start = time.perf_counter()
        model = eff.efficientnet_lite0()
        out["load s"] = round(time.perf_counter() - start, 3)
        out["added MB"] = round(_resident_mb() - base)
        folded = model.folded()
        for n, x in batches.items():
            out[f"eval, {n}, recorded ms"] = _median_ms(lambda x=x: model.run(x), repeats)
            out[f"eval, {n}, no records ms"] = _median_ms(
                lambda x=x: model.run(x, record=False), repeats)
            out[f"train, {n}, no records ms"] = _median_ms(
                lambda x=x: model.run(x, training=True, record=False), repeats)
            with torch.no_grad():
                out[f"folded, {n} ms"] = _median_ms(lambda x=x: folded(x), repeats)
    elif what == "reference":
        from efficientnet_lite_pytorch import EfficientNet

        import lnviz.models.efficientnet as eff

        weights = str(eff.package_file(eff._MODULE, eff.PACKAGE, eff._WEIGHTS))
        base = _resident_mb()
        start = time.perf_counter()
        net = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=weights).eval()
        out["load s"] = round(time.perf_counter() - start, 3)
        out["added MB"] = round(_resident_mb() - base)
        for n, x in batches.items():
            with torch.no_grad():
                out[f"eval, {n} ms"] = _median_ms(lambda x=x: net(x), repeats)
    else:  # the page's parts
        from lnviz.data.photos import photo
        from lnviz.lessons import efficientnet as lesson
        from lnviz.models import efficientnet_lite0

        model = efficientnet_lite0()
        start = time.perf_counter()
        pool = lesson.photo_pool()
        out["the pool of 35 s"] = round(time.perf_counter() - start, 2)
        image, crops = lesson.prepared(photo(pool.sources[0]))
        parts = {
            "1 alone": lambda: lesson.alone(model, image, pool),
            "2 batch-mates": lambda: lesson.batch_mates(model, image, crops, pool,
                                                        pool.sources[0]),
            "3 one BatchNorm at a time": lambda: lesson.layer_gaps(model, pool),
            "4 fold and time": lambda: lesson.fold(model, pool),
            "5 shifted (darker)": lambda: lesson.shifted(model, pool, next(iter(lesson.SHIFTS))),
            "6 per-sample norms": lambda: lesson.swapped(model, pool),
        }
        for name, part in parts.items():
            start = time.perf_counter()
            part()
            out[f"{name} s"] = round(time.perf_counter() - start, 2)
    return out


def main() -> None:
    if "--one" in sys.argv:
        _, _, what, repeats = sys.argv
        print(json.dumps(one(what, int(repeats))))
        return
    results = {}
    for what in ("lnviz", "reference", "parts"):
        done = subprocess.run([sys.executable, __file__, "--one", what, str(REPEATS)],
                              capture_output=True, text=True, check=True)
        results[what] = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
