"""Peak and resident memory of one Explorer session that uploads a tensor file.

    python tools/upload_memory.py FILE [--demo]

Runs the Explorer with Streamlit's AppTest in this process, uploads FILE, moves ε, switches to
float64 and to BatchNorm (so that the session keeps two results, the larger in float64), then
switches the source to the course examples and then to another page. Prints the process's
resident size (VmRSS) and its high-water mark (VmHWM, reset before each step) in MB after each
step, and the largest rise over the size before the upload. Used to measure what an upload
costs the server (lnviz.limits.EXPLORER_BYTES_PER_VALUE, docs/deploy.md; issue 11).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def status(field: str) -> float:
    """A /proc/self/status field (kB) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--demo", action="store_true", help="run with LNVIZ_DEMO=1")
    args = parser.parse_args()
    if args.demo:
        os.environ["LNVIZ_DEMO"] = "1"
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.switch_page("app_pages/explorer.py").run()
    at.segmented_control(key="src").set_value("upload").run()

    base = status("VmRSS")
    highest = base

    def step(name: str, action) -> None:
        nonlocal highest
        reset_peak()
        start = time.perf_counter()
        action()
        seconds = time.perf_counter() - start
        errors = [e.value[:90] for e in at.error]
        highest = max(highest, status("VmHWM"))
        print(f"{name:<28} peak {status('VmHWM'):7.0f} MB  after {status('VmRSS'):7.0f} MB  "
              f"{seconds:5.1f} s  {errors if errors else ''}", flush=True)

    step("before the upload", lambda: None)
    step("upload " + args.file.name,
         lambda: at.file_uploader(key="upload").upload(args.file.name,
                                                       args.file.read_bytes()).run())
    if not at.error:
        step("ε = 0.1", lambda: at.select_slider(key="eps").set_value(0.1).run())
        step("precision: float64", lambda: at.selectbox(key="precision").set_value("float64").run())
        step("BatchNorm", lambda: at.segmented_control(key="norm").set_value("BatchNorm").run())
    step("source: course examples",
         lambda: at.segmented_control(key="src").set_value("preset").run())
    step("page: home", lambda: at.switch_page("app_pages/home.py").run())
    print(f"largest rise over the size before the upload: {highest - base:.0f} MB")


if __name__ == "__main__":
    main()
