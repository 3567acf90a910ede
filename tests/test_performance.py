"""lnviz.bench and the Performance page: what is stable enough to check (no timing asserts)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from pageutil import figures, open_page

from lnviz import bench
from lnviz.lessons import performance


@pytest.mark.parametrize("norm", performance.NORMS)
def test_every_implementation_computes_the_same_norm(norm):
    x = torch.randn(64, 32)
    outputs = {name: fn(x) for name, fn in performance.implementations(norm, "cpu").items()
               if name != "compiled"}
    reference = outputs["torch"]
    for name, out in outputs.items():
        np.testing.assert_allclose(out.numpy(), reference.numpy(), atol=1e-4, err_msg=name)


def test_run_reports_bandwidth_from_bytes_moved():
    rows = performance.run([(64, 32)], ["layer"], ["fast", "torch"], repeats=3)
    assert [r.impl for r in rows] == ["fast", "torch"]
    for r in rows:
        assert r.seconds > 0
        assert r.gb_per_s == pytest.approx(2 * 64 * 32 * 4 / r.seconds / 1e9)
        assert r.copy_gb_per_s > 0 and r.roofline == pytest.approx(r.gb_per_s / r.copy_gb_per_s)
    ratios = performance.ratios(rows)
    assert set(ratios) == {("layer", "fast", 64, 32)}


def test_time_budget_stops_early_and_progress_is_reported():
    seen = []
    rows = performance.run([(32, 32)] * 5, ["layer"], ["torch"], repeats=1, budget_s=0.0,
                     progress=lambda f, m: seen.append(f))
    assert len(rows) <= 1 and seen[-1] == 1.0


def test_cli_writes_json(tmp_path):
    out = tmp_path / "performance.json"
    assert bench.main(["--sizes", "32x16", "--norms", "rms", "--impls", "scratch,torch",
                       "--repeats", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {r["impl"] for r in data["rows"]} == {"scratch", "torch"}
    assert data["machine"]


def test_peak_extra_memory_of_fast_layer_norm_is_about_the_output():
    """fast allocates the output (1× the input) and small statistics, never the intermediates
    of the scratch code: at most 2× the input, as the performance target asks."""
    input_bytes = 16384 * 1024 * 4  # large enough to stand above the interpreter's own peak
    fast = performance.peak_extra_memory("layer", "fast", 16384, 1024)
    scratch = performance.peak_extra_memory("layer", "scratch", 16384, 1024)
    assert fast <= 2 * input_bytes
    assert scratch > fast


def test_performance_page_runs_a_small_benchmark():
    at = open_page("app_pages/performance.py")
    at.multiselect(key="pf_sizes").set_value(["64×64"]).run()
    at.multiselect(key="pf_impls").set_value(["fast", "torch"]).run()
    at.button(key="pf_run").click().run()
    assert not at.exception
    fig = figures(at)[0]
    assert {t["name"] for t in fig["data"]} >= {"layer · fast", "layer · torch",
                                                "copy (roofline)"}


def test_the_pages_snippet_runs_and_counts_the_bytes_as_run_does(capsys):
    code = performance.bandwidth_snippet(64, 32)
    at = open_page("app_pages/performance.py")
    assert [c.value for c in at.code] == [performance.bandwidth_snippet().rstrip("\n")]
    namespace: dict = {}
    exec(code, namespace)  # the code a learner copies, run as it is shown
    x, y, seconds = namespace["x"], namespace["y"], namespace["seconds"]
    assert x.shape == (64, 32)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (32,)))
    # the same count of bytes as run()'s rows: read x once, write y once, 4 bytes a value
    assert namespace["gb_per_s"] == pytest.approx(2 * 64 * 32 * 4 / seconds / 1e9)
    assert capsys.readouterr().out == f"{namespace['gb_per_s']:.1f} GB/s\n"
