"""lnviz.bench and the Performance page: what is stable enough to check (no timing asserts)."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from pageutil import figures, open_page

from lnviz import bench, charts
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
    rows = performance.run([(64, 32)], ["LayerNorm"], ["fast", "torch"], repeats=3)
    assert [r.impl for r in rows] == ["fast", "torch"]
    for r in rows:
        assert r.seconds > 0
        assert r.gb_per_s == pytest.approx(2 * 64 * 32 * 4 / r.seconds / 1e9)
        assert r.copy_gb_per_s > 0 and r.roofline == pytest.approx(r.gb_per_s / r.copy_gb_per_s)
    ratios = performance.ratios(rows)
    assert set(ratios) == {("LayerNorm", "fast", 64, 32)}


def test_time_budget_stops_early_and_progress_is_reported():
    seen = []
    rows = performance.run([(32, 32)] * 5, ["LayerNorm"], ["torch"], repeats=1, budget_s=0.0,
                     progress=lambda f, m: seen.append(f))
    assert len(rows) <= 1 and seen[-1] == 1.0


def test_cli_writes_json(tmp_path):
    out = tmp_path / "performance.json"
    assert bench.main(["--sizes", "32x16", "--norms", "rms", "--impls", "scratch,torch",
                       "--repeats", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {r["impl"] for r in data["rows"]} == {"scratch", "torch"}
    assert {r["norm"] for r in data["rows"]} == {"RMSNorm"}  # "rms" read, the one name written
    assert data["machine"]


@pytest.mark.slow  # a fresh process of its own
def test_peak_extra_memory_of_fast_layer_norm_is_about_the_output():
    """fast allocates the output (1× the input) and small statistics, never the intermediates
    of the scratch code (the performance target asks at most 2× the input). Measured 1.00× and
    2.00× on the machine's kernels, the portable ones and two threads: a bar at the target
    passed one extra full-size copy, so the bars sit between one copy and two."""
    input_bytes = 16384 * 1024 * 4  # large enough to stand above the interpreter's own peak
    fast = performance.peak_extra_memory("LayerNorm", "fast", 16384, 1024)
    scratch = performance.peak_extra_memory("LayerNorm", "scratch", 16384, 1024)
    assert fast <= 1.25 * input_bytes, fast / input_bytes
    assert scratch >= 1.5 * fast, (scratch / input_bytes, fast / input_bytes)


def test_performance_page_runs_a_small_benchmark():
    at = open_page("app_pages/performance.py")
    at.multiselect(key="pf_sizes").set_value(["64×64"]).run()
    at.multiselect(key="pf_impls").set_value(["fast", "torch"]).run()
    at.button(key="pf_run").click().run()
    assert not at.exception
    fig = figures(at)[0]
    assert {t["name"] for t in fig["data"]} >= {"LayerNorm · fast", "LayerNorm · torch",
                                                "copy (roofline)"}


def test_before_a_run_the_page_states_the_budget_and_no_typed_duration(monkeypatch):
    """No time typed into the page: before any benchmark on this server, the budget it keeps
    to; after one, the estimate at that run's measured pace."""
    from lnviz.ui import jobs

    monkeypatch.setattr(jobs, "_paces", {})  # no benchmark has run on this "server" yet
    at = open_page("app_pages/performance.py", {"pf_budget": "10"})
    info = next(i.value for i in at.info if "Run benchmark" in i.value)
    assert info.endswith("It keeps to its time budget (10 s): a case that would not finish "
                         "within it is skipped and listed.")
    assert "laptop" not in info
    at.multiselect(key="pf_sizes").set_value(["64×64"]).run()
    at.multiselect(key="pf_impls").set_value(["torch"]).run()
    at.button(key="pf_run").click().run()
    about = jobs.estimate_s("benchmark budget-seconds", 10)
    assert about is not None
    again = open_page("app_pages/performance.py", {"pf_budget": "10"})
    info = next(i.value for i in again.info if "Run benchmark" in i.value)
    assert info.endswith(f"; about {jobs.duration(about)} at the pace of this server's last "
                         "benchmark.")


def test_the_benchmark_waits_its_turn_and_the_demo_offers_what_fits(monkeypatch):
    import contextlib

    from lnviz.ui import jobs

    lines = []

    @contextlib.contextmanager
    def in_line(what, show, *, kind, units, stop=False):  # records the turn the page took
        lines.append((what, kind, units))
        with jobs.bounded_threads():
            yield

    monkeypatch.setattr(jobs, "heavy", in_line)
    monkeypatch.setattr(jobs.os, "cpu_count", lambda: 2)
    monkeypatch.setenv("LNVIZ_DEMO", "1")
    at = open_page("app_pages/performance.py", {"pf_sizes": ["64×64", "16384×4096"],
                                                 "pf_impls": ["torch", "compiled"],
                                                 "pf_budget": "120"})
    assert not at.exception
    assert at.multiselect(key="pf_sizes").options == ["64×64", "256×256", "1024×1024",
                                                      "4096×1024"]
    assert "compiled" not in at.multiselect(key="pf_impls").options
    assert at.multiselect(key="pf_sizes").value == ["64×64"]  # the link's larger size dropped
    assert at.multiselect(key="pf_impls").value == ["torch"]
    assert at.slider(key="pf_budget").max == 30 and at.slider(key="pf_budget").value <= 30
    assert any(c.value.startswith("On this shared server the benchmark takes sizes up to "
                                  "4096×1024, a budget of up to 30 s and no torch.compile")
               for c in at.caption)
    at.button(key="pf_run").click().run()
    assert not at.exception and lines == [("your benchmark", "benchmark budget-seconds",
                                           at.slider(key="pf_budget").value)]
    took = next(c.value for c in at.caption if c.value.startswith("The run took"))
    assert "torch ran on 1 of the machine's 2 cores: a heavy job leaves one" in took
    monkeypatch.setenv("LNVIZ_DEMO", "")
    at = open_page("app_pages/performance.py")
    assert "16384×4096" in at.multiselect(key="pf_sizes").options
    assert "compiled" in at.multiselect(key="pf_impls").options
    assert at.slider(key="pf_budget").max == 120
    assert not any(c.value.startswith("On this shared server") for c in at.caption)


def test_the_pages_snippet_runs_and_counts_the_bytes_as_run_does(capsys):
    code = performance.bandwidth_snippet(64, 32)
    at = open_page("app_pages/performance.py")
    assert [c.value for c in at.code][-1] == performance.bandwidth_snippet().rstrip("\n")
    namespace: dict = {}
    exec(code, namespace)  # the code a learner copies, run as it is shown
    x, y, seconds = namespace["x"], namespace["y"], namespace["seconds"]
    assert x.shape == (64, 32)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (32,)))
    # the same count of bytes as run()'s rows: read x once, write y once, 4 bytes a value
    assert namespace["gb_per_s"] == pytest.approx(2 * 64 * 32 * 4 / seconds / 1e9)
    assert capsys.readouterr().out == f"{namespace['gb_per_s']:.1f} GB/s\n"


# --- The time budget: a case that would overrun is skipped, with its reason ----------------------
class Slow:
    """A stand-in implementation that takes ``per_value`` seconds per value of its input (at
    least ``floor``), counting its calls by input size."""

    def __init__(self, per_value: float = 0.0, floor: float = 0.0) -> None:
        self.per_value, self.floor = per_value, floor
        self.calls: dict[int, int] = {}

    def __call__(self, x):
        self.calls[x.numel()] = self.calls.get(x.numel(), 0) + 1
        time.sleep(max(self.floor, self.per_value * x.numel()))
        return x


@pytest.fixture
def slow(monkeypatch):
    fn = Slow()
    monkeypatch.setattr(performance, "implementations", lambda norm, device: {"torch": fn})
    return fn


@pytest.fixture
def no_compile_yet(monkeypatch):
    """A process that has compiled nothing, and a torch.compile that must not be reached."""
    monkeypatch.setattr(performance, "_COMPILE_SECONDS", [], raising=False)
    monkeypatch.setattr(performance, "_COMPILED_SHAPES", set(), raising=False)
    monkeypatch.setattr(performance, "_COMPILED", {})

    def refuse(*args, **kwargs):
        raise AssertionError("torch.compile was called although it could not fit the budget")

    monkeypatch.setattr(performance.torch, "compile", refuse)


def test_a_case_that_would_overrun_stops_after_its_first_call(slow):
    """Old code: every one of the 2 + 5 calls ran (2.1 s against a 1 s budget)."""
    slow.floor = 0.3
    skipped: list[performance.Skipped] = []
    rows = performance.run([(8, 8)], ["LayerNorm"], ["torch"], repeats=5, budget_s=1.0,
                     on_skip=skipped.append)
    assert rows == [] and slow.calls == {64: 1}
    assert [(s.norm, s.impl, s.rows, s.cols) for s in skipped] == [("LayerNorm", "torch", 8, 8)]
    # the 6 calls left take at least 6 × 0.3 s; a busy machine makes each call take longer
    needs = re.match(r"stopped after its first calls: it needs about ([\d.]+) s",
                     skipped[0].reason)
    assert needs and float(needs.group(1)) >= 1.75, skipped[0].reason


def test_a_larger_size_is_skipped_before_any_call_from_the_smaller_ones_pace(slow):
    """64×64 takes ≥ 0.8 ms a call, so one call at 16384×64 (256× the values) takes ≥ 0.2 s:
    more than a 0.15 s budget leaves, so it is never called. Sizes run smallest first."""
    slow.per_value = 2e-7
    skipped: list[performance.Skipped] = []
    rows = performance.run([(16384, 64), (64, 64)], ["LayerNorm"], ["torch"], repeats=5,
                           budget_s=0.15, on_skip=skipped.append)
    assert [(r.rows, r.cols) for r in rows] == [(64, 64)]
    assert slow.calls == {64 * 64: 7}
    assert len(skipped) == 1 and (skipped[0].rows, skipped[0].cols) == (16384, 64)
    # on a busy machine the copy this size is measured against may not fit what is left either:
    # skipped before any call all the same
    assert re.fullmatch(r"one call takes about [\d.]+ s at the pace of a smaller size, and "
                        r"0\.\d s of the budget was left", skipped[0].reason) or (
        skipped[0].reason == "even timing a plain copy at this size did not fit in the budget")


def test_after_the_budget_every_remaining_case_is_listed(slow):
    skipped: list[performance.Skipped] = []
    rows = performance.run([(8, 8), (16, 8)], ["LayerNorm", "RMSNorm"], ["torch"], repeats=1,
                           budget_s=0.0, on_skip=skipped.append)
    assert rows == [] and slow.calls == {}
    assert [(s.norm, s.rows) for s in skipped] == [("LayerNorm", 8), ("RMSNorm", 8),
                                                   ("LayerNorm", 16), ("RMSNorm", 16)]
    assert {s.reason for s in skipped} == {"the time budget was used up"}


def test_compile_time_counts_against_the_budget(no_compile_yet):
    """The report: "compiled" at 16384×1024 with a 5 s budget took 33 s, nearly all of it the
    first compile. Before any compile, one is assumed to take FIRST_COMPILE_S (30 s)."""
    skipped: list[performance.Skipped] = []
    rows = performance.run([(256, 256)], ["LayerNorm"], ["compiled", "torch"], repeats=3,
                           budget_s=5.0, on_skip=skipped.append)
    assert [r.impl for r in rows] == ["torch"]
    assert [(s.impl, s.reason.split(",")[0]) for s in skipped] == [
        ("compiled", "compiling takes about 30 s the first time (it loads the compiler)")]


def test_the_compile_estimate_learns_from_the_compiles_seen(monkeypatch):
    monkeypatch.setattr(performance, "_COMPILE_SECONDS", [])
    assert performance._compile_estimate() == performance.FIRST_COMPILE_S == 30.0
    performance._COMPILE_SECONDS.append(9.0)  # the first also loaded the compiler
    assert performance._compile_estimate() == 9.0
    performance._COMPILE_SECONDS.extend([2.5, 0.3])
    assert performance._compile_estimate() == 2.5


def test_roofline_with_one_size_is_visible():
    """Old code drew the roofline as mode="lines": one size, one point, nothing to see, yet a
    legend entry."""
    rows = [performance.Row("LayerNorm", "torch", 64, 64, "cpu", 1e-5, 3.2, 0.5)]
    fig = charts.performance.bench_figure(rows, {64 * 64: 6.4})
    roof = next(t for t in fig.data if t.name == "copy (roofline)")
    assert list(roof.y) == [6.4] and "markers" in roof.mode
    assert roof.marker.size >= 20 and roof.marker.symbol == "line-ew-open"
    assert all("markers" in t.mode for t in fig.data)  # every series visible at one size


def test_page_skips_compile_within_a_5_s_budget_and_lists_it(no_compile_yet):
    at = open_page("app_pages/performance.py")
    at.multiselect(key="pf_sizes").set_value(["256×256"]).run()
    at.multiselect(key="pf_impls").set_value(["torch", "compiled"]).run()
    at.slider(key="pf_budget").set_value(5).run()
    at.button(key="pf_run").click().run()
    assert not at.exception
    assert "1 of the chosen cases were not timed" in at.warning[0].value
    table = next(d.value for d in at.dataframe if "why" in d.value.columns)
    assert table[["norm", "implementation", "size"]].values.tolist() == [
        ["LayerNorm", "compiled", "256×256"]]
    assert table["why"][0].startswith("compiling takes about 30 s the first time")
    assert any("its budget was 5 s" in c.value for c in at.caption)
    fig = figures(at)[0]
    roof = next(t for t in fig["data"] if t["name"] == "copy (roofline)")
    assert "markers" in roof["mode"]
    assert {t["name"] for t in fig["data"]} == {"LayerNorm · torch", "copy (roofline)"}


def test_a_disturbed_copy_is_retimed_and_a_row_above_it_is_flagged(monkeypatch):
    """The default run once showed LayerNorm at 4191% "of copy": the copy at 256×256 had been
    timed on a busy moment. A norm faster than the copy that bounds it makes the copy be timed
    again; if it stays faster, the row says why, and the table marks it."""
    real_copy = performance.copy_bandwidth
    calls = []

    def disturbed_first(x, repeats=7, deadline=math.inf):
        calls.append(repeats)
        return 1e-6 if len(calls) == 1 else real_copy(x, repeats, deadline)  # 1 kB/s, then real

    monkeypatch.setattr(performance, "copy_bandwidth", disturbed_first)
    rows = performance.run([(256, 256)], ["LayerNorm"], ["torch"], repeats=3)
    assert calls == [3, 6]  # retimed, with twice the repeats
    # against the retimed copy, not the disturbed one (which puts the norm at about 10⁶ × copy);
    # how near the norm then comes to the copy is the machine's business (a busy one: 17×)
    assert rows[0].copy_gb_per_s > 0.01 and rows[0].roofline < 1e3

    monkeypatch.setattr(performance, "copy_bandwidth", lambda x, repeats=7, deadline=0: 1e-6)
    rows = performance.run([(256, 256)], ["LayerNorm"], ["torch"], repeats=3)
    assert rows[0].roofline > 100 and "impossible" in rows[0].doubt
    assert "⚠" in performance.format_table(rows)


def test_doubt_names_a_wide_spread_and_accepts_a_steady_row():
    assert performance._doubt(0.5, [1.0, 1.1, 0.9]) == ""
    assert "ranged over 300%" in performance._doubt(0.5, [1.0, 4.0, 1.0])
    assert "impossible" in performance._doubt(1.2, [1.0, 1.0, 1.0])
    assert performance._doubt(1.04, [1.0, 1.0, 1.0]) == ""  # within timing noise of the copy


def test_the_recorded_gpu_run_backs_what_the_page_says_of_it():
    """The shipped GPU run (lnviz/data/measured): fused at least as fast as torch's kernel for
    every norm and shape measured, and at least 85% of a copy from 16384×4096 up, as the issue
    asked; docs/benchmarks.md shows the same numbers."""
    run = performance.recorded_gpu_run()
    assert "H100" in run.device and run.date and "--impls fast,fused,torch" in run.command
    shapes = {(r.rows, r.cols) for r in run.rows}
    assert {(16384, 1024), (16384, 4096), (65536, 4096)} <= shapes
    doc = (Path(__file__).parent.parent / "docs" / "benchmarks.md").read_text()
    for norm in ("LayerNorm", "RMSNorm"):
        for shape in shapes:
            fused, native = (performance.find_row(run.rows, norm, impl, shape)
                             for impl in ("fused", "torch"))
            assert fused.seconds <= native.seconds, (norm, shape)
            if shape[0] * shape[1] >= 16384 * 4096 and shape[1] <= 4096:
                assert fused.roofline >= 0.85, (norm, shape)
            assert f"| {norm} | fused | {shape[0]}×{shape[1]} | cuda | {fused.seconds * 1e3:.2f} " \
                   f"| {fused.gb_per_s:.2f} | {fused.roofline:.0%} |" in doc, (norm, shape)


def test_the_kernel_and_the_scratch_code_are_shown_from_their_files():
    scratch, kernel = performance.kernel_sources()
    assert scratch.startswith("# Shapes for") and "centered = x - mean" in scratch
    assert kernel.startswith("@triton.jit\ndef _norm_rows(") and "tl.store(Y + at" in kernel
    assert "_fast(" not in scratch and "def _norm_wide_rows" not in kernel


def test_the_page_shows_the_fused_kernel_and_the_gpu_run_without_a_gpu():
    at = open_page("app_pages/performance.py")
    assert not at.exception
    run = performance.recorded_gpu_run()
    fused = performance.find_row(run.rows, "LayerNorm", "fused", (16384, 4096))
    text = " ".join(m.value for m in at.markdown)
    assert "The kernel needs a CUDA GPU, and this machine's device is cpu" in text
    assert f"moved {fused.gb_per_s:,.0f} GB/s at 16384×4096, {fused.roofline:.0%} of a copy" \
        in text
    assert [c.value for c in at.code][:2] == list(performance.kernel_sources())
    gpu = figures(at)[0]  # before any run, the only figure is the GPU run's
    assert {t["name"] for t in gpu["data"]} >= {"LayerNorm · fused", "RMSNorm · fused",
                                                "LayerNorm · torch"}


def test_the_cli_on_a_cpu_prints_what_the_gpu_run_measured(capsys):
    """The norms go by any spelling (here the short one the recorded run's command used), and
    come out by their name; the recorded file's "layer" rows read as LayerNorm's."""
    assert bench.main(["--sizes", "16x8", "--norms", "layer", "--impls", "fused,torch",
                       "--repeats", "2"]) == 0
    out, err = capsys.readouterr()
    assert "fused needs a CUDA GPU. On an NVIDIA H100" in out
    assert "| LayerNorm | fused | 65536×4096 | cuda |" in out
    assert "skipped LayerNorm fused 16×8: lnviz's fused kernels (Triton) run on a CUDA GPU" in err
    assert "layer" not in out.replace("--norms layer", "")
