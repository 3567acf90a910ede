"""lnviz's GGUF reader (lnviz.models.gguf_file) on files written here with gguf's own writer:
every kind of metadata value and of tensor reads back as written, and a damaged file is refused
with a message, never a raw exception. The real models' files are compared with gguf's reader
in tests/test_models_llama.py and tests/test_models_gemma.py."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from lnviz.models import ModelFileError  # noqa: E402
from lnviz.models.gguf_file import read  # noqa: E402

#: Every scalar type, a string with non-ASCII letters, arrays of numbers, of strings and of
#: arrays, as gguf's writer stores each (the value, the Python type it reads back as).
VALUES = {
    "u8": (200, int), "i8": (-5, int), "u16": (60_000, int), "i16": (-30_000, int),
    "u32": (4_000_000_000, int), "i32": (-2_000_000_000, int), "f32": (0.5, float),
    "b": (True, bool), "s": ("héllo ▁", str), "u64": (2**63, int), "i64": (-(2**62), int),
    "f64": (0.1, float), "ints": ([1, 2, 3], list), "strs": (["a", "", "ü"], list),
    "nested": ([[1, 2], [3, 4, 5]], list), "ka": (1, int), "kb": (2, int),
}
PLAIN = np.arange(12, dtype=np.float32).reshape(3, 4)
HALF = np.arange(6, dtype=np.float16).reshape(2, 3)
ROWS = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)


def _write(path: Path) -> bytes:
    writer = gguf.GGUFWriter(path, "test")
    writer.add_custom_alignment(64)
    adders = {"u8": writer.add_uint8, "i8": writer.add_int8, "u16": writer.add_uint16,
              "i16": writer.add_int16, "u32": writer.add_uint32, "i32": writer.add_int32,
              "f32": writer.add_float32, "b": writer.add_bool, "s": writer.add_string,
              "u64": writer.add_uint64, "i64": writer.add_int64, "f64": writer.add_float64}
    for key, (value, _) in VALUES.items():
        adders.get(key, writer.add_array if isinstance(value, list) else writer.add_uint32)(
            key, value)
    writer.add_tensor("plain", PLAIN)
    writer.add_tensor("half", HALF)
    q8 = gguf.quants.quantize(ROWS, gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("q8", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def _read(path: Path, data: bytes):
    path.write_bytes(data)
    return read(path, sha256=hashlib.sha256(data).hexdigest(), packages=["some-package"])


def test_every_value_type_and_tensor_kind_reads_back_as_written(tmp_path):
    path = tmp_path / "all.gguf"
    ours = _read(path, _write(path))
    assert ours.version == 3
    assert ours.fields["general.architecture"] == "test"
    assert ours.fields["general.alignment"] == 64
    for key, (value, kind) in VALUES.items():
        assert ours.fields[key] == value and type(ours.fields[key]) is kind, key
    plain, half, q8 = ours.tensors
    assert (plain.name, plain.shape, plain.data.dtype) == ("plain", (4, 3), np.float32)
    assert np.array_equal(plain.data, PLAIN)
    assert (half.shape, half.data.dtype) == ((3, 2), np.float16) and np.array_equal(half.data,
                                                                                     HALF)
    # a quantized tensor: its bytes, 34 a block of 32 values, as gguf dequantizes them
    assert q8.tensor_type == gguf.GGMLQuantizationType.Q8_0 and q8.data.shape == (2, 34)
    back = gguf.quants.dequantize(q8.data, q8.tensor_type)
    assert np.abs(back - ROWS).max() < 1 / 127


def _patched(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 1, old
    return data.replace(old, new)


@pytest.mark.parametrize("damage", ["magic", "big-endian", "alignment 0", "alignment 48",
                                    "alignment a string", "a key twice", "a string too long",
                                    "cut short"])
def test_a_damaged_file_is_refused_with_a_message(tmp_path, damage):
    path = tmp_path / "damaged.gguf"
    data = _write(path)
    alignment = struct.pack("<QsI", 17, b"", 4)[:8] + b"general.alignment" + struct.pack("<I", 4)
    damaged = {
        "magic": b"GGUG" + data[4:],
        "big-endian": data[:4] + struct.pack(">I", 3) + data[8:],
        "alignment 0": _patched(data, alignment + struct.pack("<I", 64),
                                alignment + struct.pack("<I", 0)),
        "alignment 48": _patched(data, alignment + struct.pack("<I", 64),
                                 alignment + struct.pack("<I", 48)),
        # the value's type a string: its 4 bytes then read as a string's length, and more
        "alignment a string": _patched(data, alignment, alignment[:-4] + struct.pack("<I", 8)),
        "a key twice": _patched(data, struct.pack("<Q", 2) + b"kb", struct.pack("<Q", 2) + b"ka"),
        "a string too long": data[:24] + struct.pack("<Q", 10**9) + data[32:],
        "cut short": data[:-80],  # the last tensor's 68 bytes padded to 128
    }[damage]
    expected = {"magic": "not a GGUF file", "big-endian": "big-endian",
                "alignment 0": "general.alignment is 0",
                "alignment 48": "general.alignment is 48",
                "alignment a string": "a string runs past the end",
                "a key twice": "the key ka is there twice",
                "a string too long": "a string runs past the end",
                "cut short": "the tensor q8 runs past the end"}[damage]
    with pytest.raises(ModelFileError, match=f"cannot read the model's file.*{expected}.*"
                                             "some-package"):
        _read(path, damaged)
