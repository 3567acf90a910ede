"""What one upload can cost the server: time and peak memory of lnviz.load_arrays on hostile and
on the largest accepted tensor files, each in a fresh process.

    python tools/upload_cost.py [--demo]

Prints one row per file: its size, what load_arrays made of it (loaded, or the start of the
refusal), the seconds it took and the rise of the process's peak resident size (VmHWM) over its
size before the call. The hostile files are the kinds a hostile pass found (a pickle that calls
bytearray(N), one that punycode-encodes 48,000 characters) and the costliest pickles the scan
lets through to torch.load; docs/benchmarks.md records the numbers.
"""

from __future__ import annotations

import argparse
import codecs
import io
import json
import subprocess
import sys
import time
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class Call:
    """Pickles as a call of ``function(*args)``: a function torch's weights-only loader allows
    (tests/test_files.py builds its hostile files with it too)."""

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.function, self.args)


def _tsave(value: Any) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _with_pickle(pickle_bytes: bytes) -> bytes:
    """A torch.save file of one tensor whose data.pkl is replaced by ``pickle_bytes``."""
    import torch

    source = zipfile.ZipFile(io.BytesIO(_tsave({"w": torch.ones(1)})))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for info in source.infolist():
            data = source.read(info)
            archive.writestr(info.filename, pickle_bytes if info.filename.endswith("data.pkl")
                             else data)
    return buffer.getvalue()


def _files(tensor_values: int) -> dict[str, Callable[[], bytes]]:
    import numpy as np
    import torch

    from lnviz.data.files import MAX_ARRAYS, MAX_PICKLE_BYTES
    from lnviz.data.torch_pickle import MAX_PICKLE_OPCODES

    text = "".join(map(chr, range(0x4E00, 0x4E00 + 48_000)))
    return {
        "bytearray(2**31) in a .pt": lambda: _tsave(
            {"w": torch.ones(2), "x": Call(bytearray, 2**31)}),
        "punycode of 48,000 characters": lambda: _tsave(
            {"w": torch.ones(2), "x": Call(codecs.encode, text, "punycode")}),
        "slowest pickle within the opcode cap": lambda: _with_pickle(
            b"\x80\x02}" + b"K\x01K\x02s" * ((MAX_PICKLE_OPCODES - 3) // 3) + b"."),
        "slowest pickle of MAX_PICKLE_BYTES": lambda: _with_pickle(
            b"\x80\x02}" + b"K\x01K\x02s" * ((MAX_PICKLE_BYTES - 16) // 5) + b"."),
        "empty lists up to the opcode cap": lambda: _with_pickle(
            b"\x80\x02" + b"]" * (MAX_PICKLE_OPCODES - 2) + b"."),
        f"state dict of {MAX_ARRAYS:,} tensors": lambda: _tsave(OrderedDict(
            (f"encoder.layers.{i}.attention.self.query.weight", torch.ones(4))
            for i in range(MAX_ARRAYS))),
        f"one float32 tensor of {tensor_values:,} values": lambda: _tsave(
            torch.from_numpy(np.random.default_rng(0).standard_normal(
                tensor_values, dtype=np.float32))),
    }


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def _one(name: str, tensor_values: int) -> dict[str, Any]:
    from lnviz.data.files import TensorFileError, load_arrays

    data = _files(tensor_values)[name]()
    before = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    start = time.perf_counter()
    try:
        arrays = load_arrays(data, max_elements=tensor_values)
        outcome = f"loaded {len(arrays)} arrays"
    except TensorFileError as err:
        outcome = "refused: " + str(err)[:70]
    return {"file": name, "bytes": len(data), "outcome": outcome,
            "seconds": time.perf_counter() - start, "peak_rise_mb": _status("VmHWM") - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", action="store_true", help="the hosted demo's cap (LNVIZ_DEMO)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from lnviz.limits import DEMO_LIMITS, FULL_LIMITS

    values = (DEMO_LIMITS if args.demo else FULL_LIMITS).tensor_values
    if args.one:
        print(json.dumps(_one(args.one, values)))
        return
    print("| file | bytes | outcome | s | peak rise (MB) |\n|---|---:|---|---:|---:|")
    for name in _files(values):
        command = [sys.executable, __file__, "--one", name] + (["--demo"] if args.demo else [])
        row = json.loads(subprocess.run(command, capture_output=True, text=True, check=True,
                                        cwd=ROOT).stdout)
        print(f"| {row['file']} | {row['bytes']:,} | {row['outcome']} | {row['seconds']:.2f} "
              f"| {row['peak_rise_mb']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
