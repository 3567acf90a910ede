"""Gemma 3 270M: lnviz's load, memory and ``run()`` time beside transformers' on the same file.

    python tools/gemma_bench.py [REPEATS]

Each measurement runs in a fresh process (``--one WHAT``), so that one's memory does not count
in another's: the resident memory a load adds (after ``import torch`` and the libraries, which
both sides import anyway), the peak while loading, the load's wall time, and the median of
REPEATS runs (after one untimed run) of 5, 32 and 128 tokens. It also times what holding the
tied embedding as its Q8_0 codes costs the logits: 32 tokens' logits from the codes against
from the float32 table. transformers reads a whole file, so the pieces are put together in a
temporary folder for it first (not timed).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "--one" else 5


def _resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _median_ms(run, repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 1)


def _texts() -> dict[int, str]:
    return {n: " ".join(["word"] * (n - 1)) for n in (5, 32, 128)}  # <bos> and n − 1 words


def one(what: str, repeats: int, path: str = "") -> dict:
    """One side's numbers, in this process."""
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    import gguf  # noqa: F401  (both sides use it: imported before the baseline)
    import tokenizers  # noqa: F401

    out: dict = {}
    if what == "lnviz":
        import lnviz.models.gemma

        base = _resident_mb()
        start = time.perf_counter()
        model = lnviz.models.gemma.gemma3()
        out["load s"] = round(time.perf_counter() - start, 2)
        out["added MB"] = round(_resident_mb() - base)
        out["peak MB over base"] = round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base)
        for n, text in _texts().items():
            assert len(model.run(text).tokens) == n
            out[f"run {n} tokens ms"] = _median_ms(lambda text=text: model.run(text), repeats)
        embedding = model.module.model.embed_tokens
        x = torch.randn(32, 640)
        out["logits of 32 tokens from the Q8_0 codes ms"] = _median_ms(
            lambda: embedding.logits(x), repeats)
        table = embedding.rows(slice(None))  # the float32 table, 671 MB
        out["logits of 32 tokens from a float32 table ms"] = _median_ms(
            lambda: x @ table.T, repeats)
        out["float32 table MB"] = round(table.numel() * 4 / 2**20)
    else:
        os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
        import transformers
        from transformers import AutoTokenizer, Gemma3ForCausalLM

        base = _resident_mb()
        start = time.perf_counter()
        folder, name = os.path.split(path)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        net = Gemma3ForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        out["load s"] = round(time.perf_counter() - start, 2)
        out["added MB"] = round(_resident_mb() - base)
        out["peak MB over base"] = round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base)
        out["transformers"] = transformers.__version__
        for n, text in _texts().items():
            ids = tokenizer(text, return_tensors="pt").input_ids
            assert ids.shape[1] == n

            def forward(ids=ids):
                with torch.no_grad():
                    net(ids)

            out[f"run {n} tokens ms"] = _median_ms(forward, repeats)
    return out


def main() -> None:
    if "--one" in sys.argv:
        _, _, what, repeats, *path = sys.argv
        print(json.dumps(one(what, int(repeats), *path)))
        return
    sys.path.insert(0, str(ROOT))
    from lnviz.models.gemma import GGUF_FILE, model_pieces

    results = {}
    with tempfile.TemporaryDirectory() as folder:
        whole = Path(folder) / GGUF_FILE
        with whole.open("wb") as out:
            for piece in model_pieces():
                out.write(piece.read_bytes())
        for what in ("lnviz", "transformers"):
            done = subprocess.run([sys.executable, __file__, "--one", what, str(REPEATS),
                                   str(whole)], capture_output=True, text=True, check=True)
            results[what] = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
