"""Peak and resident memory a real server spends on one Model inspector session with a large file.

    python tools/inspector_memory.py FILE [--demo]

Starts ``streamlit run app.py`` on a free local port and one headless Chromium. The learner
opens the Model inspector, uploads FILE (a capture or checkpoint; a SmolLM2 capture for the
layer it picks), moves the outlier threshold three times (full reruns, whose memory must not
pile up), picks the layer ``model.norm``, opens it in the Explorer and goes to the home page.
Prints the server's resident size (VmRSS) and its high-water mark (VmHWM, reset before each
step) in MB after each step, and the largest rise over the size before the upload, per value of
the file. Used to size lnviz.limits.INSPECTOR_BYTES_PER_VALUE (docs/benchmarks.md).

A real server, not AppTest: AppTest registers an uploaded file again on every run (a new copy
of its bytes each time), which a server does not.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.localserver import CHROMIUM_ARGS, HOST, free_port, healthy, server_command  # noqa: E402

#: Every wait of one step (ms): a 144 MB upload is read and summarised in seconds.
TIMEOUT_MS = 300_000


def status(pid: int, field: str) -> float:
    """A /proc/PID/status field (kB) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--demo", action="store_true", help="run with LNVIZ_DEMO=1")
    args = parser.parse_args()
    from playwright.sync_api import expect, sync_playwright

    from lnviz.data.files import load_arrays

    values = sum(a.size for a in load_arrays(args.file).values())
    env = dict(os.environ, LNVIZ_DEMO="1" if args.demo else "")
    port = free_port()
    base = f"http://{HOST}:{port}"
    server = subprocess.Popen(server_command(port), cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not healthy(base):
            time.sleep(0.25)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)

            def idle() -> None:
                time.sleep(0.3)
                expect(page.locator('[data-testid="stApp"]')).to_have_attribute(
                    "data-test-script-state", "notRunning")

            page.goto(f"{base}/inspector?in_src=Upload+a+file")
            dropzone = page.locator('[data-testid="stFileUploader"] input[type=file]').first
            expect(dropzone).to_be_attached()
            idle()
            before = highest = status(server.pid, "VmRSS")

            def step(name: str, action) -> None:
                nonlocal highest
                Path(f"/proc/{server.pid}/clear_refs").write_text("5")
                start = time.perf_counter()
                action()
                idle()
                seconds = time.perf_counter() - start
                errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
                highest = max(highest, status(server.pid, "VmHWM"))
                print(f"{name:<24} peak {status(server.pid, 'VmHWM'):7.0f} MB  after "
                      f"{status(server.pid, 'VmRSS'):7.0f} MB  {seconds:5.1f} s  "
                      f"{[e[:90] for e in errors] if errors else ''}", flush=True)

            print(f"{'before the upload':<24} {before:7.0f} MB")
            step("upload " + args.file.name, lambda: (
                dropzone.set_input_files(str(args.file)),
                expect(page.get_by_role("heading", name="Every layer")).to_be_visible()))
            threshold = page.get_by_role("spinbutton", name="Outlier threshold (σ)")
            for sigmas in (4, 5, 3):  # full reruns: the memory of one must not pile up
                step(f"threshold {sigmas} σ",
                     lambda s=sigmas: (threshold.fill(str(s)), threshold.press("Enter")))
            step("model.norm", lambda: (
                page.get_by_label("Layer", exact=True).click(),
                page.keyboard.type("model.norm"),  # the selectbox filters its options
                page.get_by_role("option", name=re.compile("model.norm")).first.click()))
            step("open in Explorer", lambda: (
                page.get_by_role("button", name="Open in Explorer").click(),
                expect(page.get_by_role("radiogroup", name="Data source")).to_be_visible()))
            step("page: home", lambda: page.goto(f"{base}/"))
            rise = highest - before
            print(f"largest rise over the size before the upload: {rise:.0f} MB, "
                  f"{rise * 2**20 / values:.0f} bytes per value of its {values:,}")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
