"""Benchmark of "Inside a real transformer": all-MiniLM-L6-v2's load time, time per sentence,
and the server's memory with the model loaded and learners on the page.

A script, not a pytest test::

    python tools/minilm_bench.py                 # model alone: load, per-sentence, RSS
    python tools/minilm_bench.py --sessions 1 5  # plus a local server with 1, then 5 sessions

1. In a fresh Python process: resident memory (VmRSS) after importing torch and lnviz, the time
   ``lnviz.models.minilm()`` takes (sha256 of the 90 MB weights, reading them, the tokenizer)
   and the RSS after it; then ``model.run(text)`` on sentences of 12, 128 and 512 tokens and
   ``lnviz.lessons.minilm.analyze`` (the page's main computation) on 12 and 128, each
   repeated: best and median time.
2. With ``--sessions``: ``streamlit run app.py`` on a free port of 127.0.0.1 (nothing else is
   contacted), headless Chromium opening the page in that many browser contexts one after the
   other, each waiting for all 8 figures; the server's RSS (process and children) after each
   count, and the time the first and the last session took to show the page.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools.localserver import CHROMIUM_ARGS, free_port, healthy, server_command  # noqa: E402

_MODEL_PART = r"""
import json, statistics, sys, time
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
import torch, lnviz, lnviz.models
from lnviz.lessons import minilm
out = {"threads": torch.get_num_threads(), "rss_before_mb": rss_mb()}
t = time.perf_counter(); model = lnviz.models.minilm(); out["load_s"] = time.perf_counter() - t
out["rss_loaded_mb"] = rss_mb()
repeats = int(sys.argv[1])
for n in (12, 128, 512):
    text = " ".join(["word"] * (n - 2))
    assert len(model.run(text).tokens) == n
    times = []
    for _ in range(repeats):
        t = time.perf_counter(); model.run(text); times.append(time.perf_counter() - t)
    out[f"run_{n}_ms"] = [1000 * min(times), 1000 * statistics.median(times)]
    if n <= 128:
        times = []
        for _ in range(max(3, repeats // 4)):
            t = time.perf_counter(); minilm.analyze(model, text)
            times.append(time.perf_counter() - t)
        out[f"analyze_{n}_ms"] = [1000 * min(times), 1000 * statistics.median(times)]
out["rss_after_runs_mb"] = rss_mb()
print(json.dumps(out))
"""


def model_numbers(repeats: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _MODEL_PART, str(repeats)], cwd=REPO,
                          capture_output=True, text=True, check=True, timeout=900)
    return json.loads(done.stdout.strip().splitlines()[-1])


def tree_rss_mb(pid: int) -> float:
    """VmRSS of a process and its children, in MB."""
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def server_numbers(counts: list[int]) -> list[dict]:
    from playwright.sync_api import expect, sync_playwright

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    results = []
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(server_command(port), cwd=REPO, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while not healthy(base):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the server did not start")
                time.sleep(0.25)
            idle = tree_rss_mb(proc.pid)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=shutil.which("chromium"),
                                             headless=True, args=CHROMIUM_ARGS)
                pages, opened = [], []
                try:
                    for count in counts:
                        while len(pages) < count:
                            context = browser.new_context(viewport={"width": 1400,
                                                                    "height": 1000})
                            page = context.new_page()
                            started = time.monotonic()
                            page.goto(f"{base}/minilm")
                            expect(page.locator('[data-testid="stPlotlyChart"]')).to_have_count(
                                8, timeout=180_000)
                            opened.append(time.monotonic() - started)
                            pages.append(page)
                        time.sleep(2)
                        results.append({"sessions": count, "server_rss_mb": tree_rss_mb(proc.pid),
                                        "idle_server_rss_mb": idle,
                                        "first_open_s": opened[0], "last_open_s": opened[-1]})
                finally:
                    browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--sessions", type=int, nargs="*", default=[])
    args = parser.parse_args()
    out = {"model": model_numbers(args.repeats)}
    if args.sessions:
        out["server"] = server_numbers(sorted(args.sessions))
    with open("/proc/loadavg") as f:
        out["loadavg"] = f.read().split()[:3]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
