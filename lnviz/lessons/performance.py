"""How fast is a normalization? Timing implementations against the memory roofline.

Layer, batch and RMS normalization do a handful of arithmetic operations per value, so on any
modern machine they are limited by memory traffic, not arithmetic: the best an implementation
can do is read x once and write y once. This module times several implementations of each norm
— a NumPy two-pass version, lnviz's readable ``scratch`` code, lnviz's ``fast`` path, on a CUDA
GPU lnviz's own Triton kernel (``fused``), torch's native kernel and, where it works,
``torch.compile`` of the scratch code — and reports, for each,
the median time, the bandwidth it achieved counting only the bytes that must move (read x,
write y), and that bandwidth as a fraction of a plain copy's measured in the same run (the
roofline: a copy also reads and writes every byte once).

A time budget is kept by estimating each case before running it (from the same norm at a smaller
size, or from one call) and skipping what would not fit; torch.compile's compile time counts, and
before the first compile in a process it is assumed to be :data:`FIRST_COMPILE_S`. The
Performance page and ``python -m lnviz.bench`` both run :func:`run`.
"""


from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import math
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lnviz import norms
from lnviz.batch import NORM_TABLE, TABLE_NORMS, table_norm, torch_table_norm
from lnviz.snippets import snippet
from lnviz.terms import NormKind

__all__ = [
    "FIRST_COMPILE_S",
    "FUSED_NORMS",
    "GPU_RUN_FILE",
    "IMPLEMENTATIONS",
    "NORMS",
    "BudgetExceeded",
    "RecordedRun",
    "Row",
    "Skipped",
    "bandwidth_snippet",
    "copy_bandwidth",
    "find_row",
    "fused_unavailable",
    "implementations",
    "kernel_sources",
    "one_shape_per_size",
    "peak_extra_memory",
    "recorded_gpu_run",
    "run",
    "time_call",
    "time_samples",
]


#: The norms timed, by their short names: those that run on a (rows, cols) table with nothing
#: set but ε (:data:`lnviz.batch.TABLE_NORMS`), LayerNorm first.
NORMS = tuple(sorted(TABLE_NORMS, key=lambda name: name != NormKind.LAYER))


IMPLEMENTATIONS = ("numpy", "scratch", "fast", "fused", "torch", "compiled")


#: The norms lnviz's own GPU kernels (impl="fused", :mod:`lnviz.fused`) exist for.
FUSED_NORMS = (NormKind.LAYER, NormKind.RMS)


DEFAULT_SIZES = ((64, 64), (256, 256), (1024, 1024), (4096, 1024), (16384, 1024),
                 (16384, 4096))


QUICK_SIZES = ((256, 256), (1024, 1024), (4096, 1024))


EPS = 1e-5


#: Seconds the first torch.compile in a process is assumed to take before one has been seen: it
#: also loads the compiler. Measured on a 2-core machine: 29 s with an empty compiler cache, 9 s
#: with a warm one; each later shape or norm took 0.3–3 s.
FIRST_COMPILE_S = 30.0


@dataclass(frozen=True)
class Row:
    """One measurement: ``norm`` by ``impl`` on a ``rows × cols`` float32 input."""

    norm: str
    impl: str
    rows: int
    cols: int
    device: str
    seconds: float
    gb_per_s: float
    roofline: float  # gb_per_s as a fraction of a copy's bandwidth in the same run
    #: why this row's numbers should not be read as they stand ("" when nothing is wrong): a
    #: norm faster than the copy that bounds it, or times that varied widely between repeats
    doubt: str = ""

    @property
    def copy_gb_per_s(self) -> float:
        """The copy bandwidth this row was measured against."""
        return self.gb_per_s / self.roofline if self.roofline else math.nan

    @property
    def size(self) -> int:
        return self.rows * self.cols


@dataclass(frozen=True)
class Skipped:
    """A case :func:`run` left out, and why (in words a learner can act on)."""

    norm: str
    impl: str
    rows: int
    cols: int
    reason: str


class BudgetExceeded(Exception):
    """Timing was abandoned because the calls still to come would end after the deadline."""

    def __init__(self, need_s: float, left_s: float) -> None:
        super().__init__(f"needs about {need_s:.1f} s more, {max(left_s, 0.0):.1f} s left")
        self.need_s, self.left_s = need_s, left_s


def _timed(norm: str) -> NormKind:
    """The norm ``norm`` names (any spelling :meth:`NormKind.parse` reads), if it is timed."""
    kind = NormKind.parse(norm)
    if kind not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {norm!r}")
    return kind


def _numpy_norm(norm: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """Two-pass NumPy: μ, then the mean of the squared deviations (BatchNorm over axis 0)."""
    entry = NORM_TABLE[_timed(norm)]
    axis = -1 if entry.trailing else 0

    def run(x: torch.Tensor) -> torch.Tensor:
        a = x.numpy()
        if not entry.centred:
            return torch.from_numpy(a / np.sqrt(np.mean(a * a, axis=axis, keepdims=True) + EPS))
        centered = a - a.mean(axis=axis, keepdims=True)
        var = np.mean(centered * centered, axis=axis, keepdims=True)
        return torch.from_numpy(centered / np.sqrt(var + EPS))

    return run


def implementations(norm: str, device: str) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """The callables to time for ``norm`` on ``device`` (NumPy only on the CPU): lnviz's
    scratch and fast code and torch's own kernel, as :mod:`lnviz.batch` runs them on a table."""
    name = _timed(norm)

    def lnviz_fn(x: torch.Tensor, impl: str) -> torch.Tensor:
        return table_norm(x, name, eps=EPS, impl=impl).output

    def native(x: torch.Tensor) -> torch.Tensor:
        return torch_table_norm(x, name, eps=EPS)

    found: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
    if device == "cpu":
        found["numpy"] = _numpy_norm(norm)
    found["scratch"] = lambda x: lnviz_fn(x, "scratch")
    found["fast"] = lambda x: lnviz_fn(x, "fast")
    if fused_unavailable(norm, device) is None:
        found["fused"] = lambda x: lnviz_fn(x, "fused")
    found["torch"] = native
    scratch = found["scratch"]
    found["compiled"] = lambda x: _compiled(norm, scratch)(x)  # compiled on first use
    return found


def fused_unavailable(norm: str, device: str) -> str | None:
    """Why impl="fused" cannot be timed for ``norm`` on ``device``, in words; None if it can.
    Triton's interpreter is not timed: it runs the kernels on the CPU, value by value."""
    if NormKind.parse(norm) not in FUSED_NORMS:
        return "lnviz's fused kernels exist for LayerNorm and RMSNorm only"
    if device != "cuda":
        return "lnviz's fused kernels (Triton) run on a CUDA GPU only"
    from lnviz import fused  # imports triton, which only a GPU run needs

    if not fused.available(device):
        return "the triton package is not installed (pip install triton)"
    return None


_COMPILED: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}


#: (norm, shape) already compiled in this process (dynamic=False compiles once per shape), and
#: the seconds each compile took, in order.
_COMPILED_SHAPES: set[tuple[str, tuple[int, int]]] = set()


_COMPILE_SECONDS: list[float] = []


def _compile_estimate() -> float:
    """Seconds a new compile is expected to take: :data:`FIRST_COMPILE_S` before any, then the
    slowest seen after the first (which also loaded the compiler), or the first if it is alone."""
    if not _COMPILE_SECONDS:
        return FIRST_COMPILE_S
    return max(_COMPILE_SECONDS[1:] or _COMPILE_SECONDS)


def _compiled(norm: str, scratch: Callable[[torch.Tensor], torch.Tensor]
              ) -> Callable[[torch.Tensor], torch.Tensor]:
    """torch.compile of the scratch code, built once per norm (compiling takes seconds)."""
    if norm not in _COMPILED:
        _COMPILED[norm] = torch.compile(scratch, dynamic=False)
    return _COMPILED[norm]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_call(fn: Callable[[], object], device: str = "cpu", repeats: int = 7,
              warmup: int = 2, deadline: float = math.inf) -> float:
    """Median wall time of ``fn()`` in seconds, after ``warmup`` untimed calls (see
    :func:`time_samples`)."""
    return statistics.median(time_samples(fn, device, repeats, warmup, deadline))


def _wall_seconds(fn: Callable[[], object], device: str) -> float:
    """Seconds from calling ``fn`` until its work is done (on the CPU: until it returns)."""
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


#: Bytes written before each timed GPU call: far more than any GPU's L2 cache (50 MB on an H100),
#: so that every call reads its input from memory, as a norm inside a model does, and enough
#: work (about 0.35 ms on an H100) to keep the GPU busy while Python prepares the call.
L2_FLUSH_BYTES = 2**30
_L2_FLUSH: list[torch.Tensor] = []


def _gpu_seconds(fn: Callable[[], object], device: str) -> float:
    """GPU seconds of ``fn``'s kernels, between two CUDA events, after the L2 cache was
    overwritten. The overwrite is queued first, so the GPU is still busy with it while Python
    prepares ``fn``'s launches and the start event waits behind it: the events time the
    kernels, not the Python around them. (A 16384×1024 norm takes about 50 µs on an H100; a call
    through lnviz and Triton's launcher spends tens of µs in Python first. With a 256 MB
    overwrite, 85 µs, that Python sometimes outlasted it and was timed as the norm's.)"""
    if not _L2_FLUSH:
        free, _ = torch.cuda.mem_get_info()
        _L2_FLUSH.append(torch.empty(min(L2_FLUSH_BYTES, free // 4), dtype=torch.uint8,
                                     device=device))
    _L2_FLUSH[0].zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def time_samples(fn: Callable[[], object], device: str = "cpu", repeats: int = 7,
                 warmup: int = 2, deadline: float = math.inf) -> list[float]:
    """The times of ``repeats`` calls of ``fn()`` in seconds, after ``warmup`` untimed ones: wall
    time until the work is done, or on CUDA the kernels' time between events (:func:`_gpu_seconds`).

    With a ``deadline`` (a :func:`time.perf_counter` value), timing stops with
    :class:`BudgetExceeded` as soon as the calls still to come, at the pace of the latest, would
    end after it: the first call doubles as a cheap probe of what the whole case costs.
    """
    calls = warmup + repeats
    times = []
    timed = _gpu_seconds if device == "cuda" else _wall_seconds
    for k in range(calls):
        times.append(timed(fn, device))
        now = time.perf_counter()
        need = (calls - k - 1) * times[-1]
        if now + need > deadline:
            raise BudgetExceeded(need, deadline - now)
    return times[warmup:]


def copy_bandwidth(x: torch.Tensor, repeats: int = 7, deadline: float = math.inf) -> float:
    """GB/s of copying ``x`` (read it once, write it once): the roofline for a norm. The fastest
    of the calls counts: a ceiling is what the machine can do, and a busy moment only slows a
    call down."""
    seconds = min(time_samples(lambda: x.clone(), x.device.type, repeats, deadline=deadline))
    return 2 * x.numel() * x.element_size() / seconds / 1e9


#: A row whose repeats' range exceeds this share of their median is flagged: the machine was
#: busy while it was timed.
WIDE_SPREAD = 1.0
#: How much faster than the copy a norm may seem before the copy is retimed, and, if it still
#: is after that, flagged: a copy moves the bytes a norm must move, so this is timing noise.
ABOVE_COPY = 1.05


def _doubt(fraction: float, samples: Sequence[float]) -> str:
    """Why a row cannot be read as it stands, or ""."""
    median = statistics.median(samples)
    spread = (max(samples) - min(samples)) / median if median > 0 else 0.0
    if fraction > ABOVE_COPY:
        return (f"{fraction:.0%} of the copy, which is impossible: a copy moves the bytes a "
                "norm must move, so the copy's timing at this size was disturbed (a busy "
                "machine, or a first call) even after it was retaken. Run again.")
    if spread > WIDE_SPREAD:
        return (f"its {len(samples)} timings ranged over {spread:.0%} of their median: the "
                "machine was busy. Run again, or raise the repeats.")
    return ""


def run(
    sizes: Sequence[tuple[int, int]] = QUICK_SIZES,
    norms: Sequence[str] = NORMS,
    impls: Sequence[str] = ("numpy", "scratch", "fast", "torch"),
    device: str = "cpu",
    repeats: int = 5,
    budget_s: float = math.inf,
    progress: Callable[[float, str], None] | None = None,
    on_skip: Callable[[Skipped], None] | None = None,
) -> list[Row]:
    """Time every (size, norm, impl) on ``device``, smallest sizes first, within ``budget_s``.

    A case that would not end within the budget is skipped and handed to ``on_skip`` with the
    reason: before its first call when that call alone would not fit (estimated from the same
    norm and implementation at a smaller size, else from the copy of this size), and after any
    call once the calls still to come would not (:func:`time_call`). A compiled case's compile
    time counts (:func:`_compile_estimate`). So a run ends within about one call of the
    budget. ``progress(fraction, message)`` is called
    before each case (for a progress bar).
    """
    rows: list[Row] = []
    kinds = [_timed(norm) for norm in norms]
    cases = [(s, n, i) for s in sorted(sizes, key=math.prod) for n in kinds for i in impls]
    deadline = time.perf_counter() + budget_s
    generator = torch.Generator().manual_seed(0)
    inputs: dict[tuple[int, int], torch.Tensor] = {}
    roofline: dict[tuple[int, int], float] = {}  # NaN: the copy itself did not fit
    pace: dict[tuple[str, str], float] = {}  # seconds per value, from the latest row
    samples: dict[int, list[float]] = {}  # each row's timings, by its index in rows

    def measure(fn: Callable[[torch.Tensor], torch.Tensor], norm: str, impl: str,
                shape: tuple[int, int]) -> str | None:
        """Time one case into ``rows``, or say why it was skipped."""
        if time.perf_counter() >= deadline:
            return "the time budget was used up"
        if shape not in inputs:
            inputs[shape] = torch.randn(*shape, generator=generator).to(device)
        x = inputs[shape]
        if shape not in roofline:
            try:
                roofline[shape] = copy_bandwidth(x, repeats, deadline)
            except BudgetExceeded:
                roofline[shape] = math.nan
        if math.isnan(roofline[shape]):
            return "even timing a plain copy at this size did not fit in the budget"
        # Only the first call is estimated here, and generously: a per-value pace taken at a
        # small size, where the fixed cost of a call dominates, overstates a larger size's;
        # time_call judges the rest from that first call. A norm moves at least a copy's bytes,
        # so the copy's pace is a floor for an unseen case.
        first_call = (pace.get((norm, impl), 0.0) * x.numel()
                      or 2 * x.numel() * x.element_size() / roofline[shape] / 1e9)
        compile_s = 0.0
        if impl == "compiled" and (norm, shape) not in _COMPILED_SHAPES:
            compile_s = _compile_estimate()
        left = deadline - time.perf_counter()
        if compile_s + first_call > left:
            if compile_s:
                first = "" if _COMPILE_SECONDS else " the first time (it loads the compiler)"
                return (f"compiling takes about {compile_s:.0f} s{first}, and {left:.1f} s of "
                        "the budget was left")
            return (f"one call takes about {first_call:.1f} s at the pace of a smaller size, "
                    f"and {left:.1f} s of the budget was left")
        try:
            if compile_s:
                start = time.perf_counter()
                fn(x)
                _sync(device)
                _COMPILE_SECONDS.append(time.perf_counter() - start)
                _COMPILED_SHAPES.add((norm, shape))
            samples[len(rows)] = time_samples(lambda: fn(x), device, repeats,
                                              deadline=deadline)
        except BudgetExceeded as err:
            return f"stopped after its first calls: it {err}"
        except Exception as err:  # torch.compile is optional: no compiler here, no row
            return f"it failed ({type(err).__name__})"
        seconds = statistics.median(samples[len(rows)])
        pace[(norm, impl)] = seconds / x.numel()
        gbps = 2 * x.numel() * x.element_size() / seconds / 1e9
        rows.append(Row(norm, impl, *shape, device, seconds, gbps, gbps / roofline[shape]))
        return None

    for k, ((r, c), norm, impl) in enumerate(cases):
        if progress is not None:
            progress(k / len(cases), f"{norm} norm, {impl}, {r}×{c}")
        fns = implementations(norm, device)
        if impl not in fns:
            reason = fused_unavailable(norm, device) if impl == "fused" else None
            if reason and on_skip is not None:
                on_skip(Skipped(norm, impl, r, c, reason))
            continue
        reason = measure(fns[impl], norm, impl, (r, c))
        if reason and on_skip is not None:
            on_skip(Skipped(norm, impl, r, c, reason))
    if progress is not None:
        progress(1.0, "done")
    return _checked(rows, samples, inputs, roofline, repeats, deadline)


def _checked(rows: list[Row], samples: dict[int, list[float]],
             inputs: dict[tuple[int, int], torch.Tensor],
             roofline: dict[tuple[int, int], float], repeats: int, deadline: float) -> list[Row]:
    """The rows against a copy that bounds them: where a norm beat its size's copy, the copy is
    timed again (twice the repeats, the best of both counts) and the fractions recomputed; a row
    still above it, or with widely spread timings, says why (:attr:`Row.doubt`)."""
    for shape in {(r.rows, r.cols) for r in rows if r.roofline > ABOVE_COPY}:
        try:
            again = copy_bandwidth(inputs[shape], 2 * repeats, max(deadline, time.perf_counter()
                                                                   + 5.0))
        except BudgetExceeded:
            continue
        roofline[shape] = max(roofline[shape], again)
    checked = []
    for k, row in enumerate(rows):
        fraction = row.gb_per_s / roofline[(row.rows, row.cols)]
        checked.append(dataclasses.replace(row, roofline=fraction,
                                           doubt=_doubt(fraction, samples[k])))
    return checked


def peak_extra_memory(norm: str, impl: str, rows: int, cols: int, device: str = "cpu") -> int:
    """Peak bytes an implementation allocates beyond its input, measured in a fresh process.

    On the CPU the peak is the process's resident high-water mark. On Linux that is VmHWM,
    reset to the current size just before the call (``/proc/self/clear_refs``); not
    ``ru_maxrss``, which a child inherits from its parent at fork (a test process of 450 MB hid
    every allocation of the measured call). Elsewhere ``ru_maxrss``, with the input filled in
    place (randn would allocate temporaries) so that the baseline is the peak so far.
    """
    code = (
        "import sys, resource, torch\n"
        "from lnviz.lessons.performance import implementations\n"
        "def status(field):\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith(field + ':'):\n"
        "            return int(line.split()[1]) * 1024\n"
        "linux = sys.platform.startswith('linux')\n"
        f"x = torch.empty({rows}, {cols}, device={device!r}).normal_()\n"
        f"fn = implementations({norm!r}, {device!r})[{impl!r}]\n"
        "fn(x[:2].clone())  # load kernels and libraries before the baseline\n"
        "if x.device.type == 'cuda':\n"
        "    torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()\n"
        "    fn(x); torch.cuda.synchronize()\n"
        "    print(torch.cuda.max_memory_allocated() - base)\n"
        "elif linux:\n"
        "    with open('/proc/self/clear_refs', 'w') as f:\n"
        "        f.write('5')  # reset the high-water mark to the current size\n"
        "    base = status('VmRSS')\n"
        "    fn(x)\n"
        "    print(status('VmHWM') - base)\n"
        "else:\n"
        "    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "    fn(x)\n"
        "    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    return int(out.stdout.strip().splitlines()[-1])


def machine() -> str:
    """A one-line description of where the numbers were measured."""
    cpu = platform.processor() or platform.machine()
    line = (f"{platform.system()} {platform.machine()}, {cpu}, {torch.get_num_threads()} torch "
            f"threads, torch {torch.__version__}")
    if torch.cuda.is_available():
        line += f", {torch.cuda.get_device_name()}"
    return line


def format_table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| norm | impl | size | device | median ms | GB/s | of copy | doubt |",
             "|---|---|---|---|---:|---:|---:|---|"]
    lines += [f"| {r.norm} | {r.impl} | {r.rows}×{r.cols} | {r.device} | {r.seconds * 1e3:.2f} "
              f"| {r.gb_per_s:.2f} | {r.roofline:.0%}{' ⚠' if r.doubt else ''} | {r.doubt} |"
              for r in rows]
    return "\n".join(lines)


def ratios(rows: Sequence[Row]) -> dict[tuple[str, str, int, int], float]:
    """Each lnviz implementation's time over torch's native one, per (norm, impl, size)."""
    native = {(r.norm, r.rows, r.cols): r.seconds for r in rows if r.impl == "torch"}
    return {(r.norm, r.impl, r.rows, r.cols): r.seconds / native[(r.norm, r.rows, r.cols)]
            for r in rows if r.impl in ("scratch", "fast", "fused")
            and (r.norm, r.rows, r.cols) in native}


def bandwidth_snippet(rows: int = 4096, cols: int = 1024) -> str:
    """PyTorch code a learner can run to measure LayerNorm's bandwidth on their own machine
    (``lnviz/snippets/bandwidth.py``): the bytes that must move (read x, write y: 2 × 4 bytes
    per float32 value) over the time of one call, as :func:`run` counts them. It leaves
    ``gb_per_s`` defined and prints it."""
    return snippet("bandwidth", rows=rows, cols=cols)


#: A run of the benchmark on a lent GPU, kept so that a machine without one can show what the
#: fused kernels did there (docs/benchmarks.md shows the same numbers).
GPU_RUN_FILE = Path(__file__).resolve().parent.parent / "data" / "measured" / "h100_fused.json"


@dataclass(frozen=True)
class RecordedRun:
    """A benchmark run kept in a file: where, when and how it was measured, and its rows."""

    device: str
    date: str
    command: str
    machine: str
    triton: str
    rows: tuple[Row, ...]


def recorded_gpu_run(path: Path = GPU_RUN_FILE) -> RecordedRun:
    """The GPU run in ``path`` (written by ``python -m lnviz.bench --json`` on the GPU, with the
    date, device and command added)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    # its rows name the norms as the benchmark then did ("layer"): read in today's terms
    rows = tuple(Row(**dict(row, norm=NormKind.parse(row["norm"]))) for row in data["rows"])
    return RecordedRun(data["device"], data["date"], data["command"], data["machine"],
                       data["triton"], rows)


def _function_source(path: Path, name: str, body_only: bool) -> str:
    """The source of the function ``name`` in ``path`` (dedented), read without importing the
    module; ``body_only`` leaves out its signature and docstring."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    node = next(n for n in ast.walk(ast.parse(text))
                if isinstance(n, ast.FunctionDef) and n.name == name)
    first = node.body[1] if body_only else (node.decorator_list or [node])[0]
    return textwrap.dedent("\n".join(lines[first.lineno - 1:node.end_lineno]))


@functools.cache  # the files do not change while the app runs: parsed once, not every rerun
def kernel_sources() -> tuple[str, str]:
    """LayerNorm side by side: the readable scratch code's steps (every intermediate a full-size
    tensor) and the fused kernel (x read once into registers, y written once). The kernel is
    read from its file, so that no triton is needed to show it."""
    scratch = _function_source(Path(inspect.getfile(norms)), "layer_norm", body_only=True)
    scratch = scratch[scratch.index("# Shapes for"):]  # the steps, not the choice of impl
    kernel = _function_source(Path(inspect.getfile(norms)).with_name("fused.py"), "_norm_rows",
                              body_only=False)
    return scratch, kernel


def one_shape_per_size(rows: Sequence[Row]) -> list[Row]:
    """The rows of the first shape measured at each size (values): a figure against size draws
    one line per implementation, which shapes of equal size (16384×4096, 4096×16384) would
    zigzag."""
    first: dict[int, tuple[int, int]] = {}
    for row in rows:
        first.setdefault(row.size, (row.rows, row.cols))
    return [row for row in rows if first[row.size] == (row.rows, row.cols)]


def find_row(rows: Sequence[Row], norm: str, impl: str, shape: tuple[int, int]) -> Row | None:
    """The row of ``norm`` by ``impl`` at ``shape``, if measured."""
    kind = NormKind.parse(norm)
    return next((r for r in rows if (r.norm, r.impl, (r.rows, r.cols)) == (kind, impl, shape)),
                None)
